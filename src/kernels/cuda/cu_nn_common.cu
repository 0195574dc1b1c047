/* Host side of the NN kernels' shared pieces (cu_nn_common.cuh): the backend context's
 * stream, its pending-error path, scratch from its caching allocator, and the device-side
 * data-error record. Built for the CPU emulator (LP_CUDA_EMU) it stands alone: the default
 * stream, lp_err, and the emulator's malloc. */
#include <stdio.h>

#include "cu_nn_common.cuh"
#ifndef LP_CUDA_EMU
#include "cuda_kernels.h"
#endif

cudaStream_t lp_cu_nn_stream(void)
{
#ifndef LP_CUDA_EMU
    return lp_cu_stream();
#else
    return (cudaStream_t)0;
#endif
}

lp_status lp_cu_nn_launched(const char *op)
{
#ifndef LP_CUDA_EMU
    return lp_cu_check(op); /* kept as the context's pending error: the next sync returns it */
#else
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess
               ? LP_OK
               : lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: launch failed: %s", op, cudaGetErrorString(e));
#endif
}

#ifdef LP_CUDA_EMU
static lp_status emu_pending;
#endif

lp_status lp_cu_nn_refuse(const char *op, lp_status st)
{
#ifndef LP_CUDA_EMU
    (void)op; /* lp_err already names it */
    return lp_cu_pend(st);
#else
    (void)op;
    if (emu_pending == LP_OK) /* the emulator has no context: kept here for take_error */
        emu_pending = st;
    return st;
#endif
}

void *lp_cu_nn_scratch(size_t bytes, const char *op)
{
    void *p = NULL;
#ifndef LP_CUDA_EMU
    lp_cuda_ctx *x = lp_cu_ctx();
    if (x) {
        p = lp_cu_alloc_get(&x->alloc, bytes ? bytes : 1, LP_MEM_CATEGORY_TEMPORARY, op);
        if (!p)
            lp_cu_fail(op, "scratch", cudaErrorMemoryAllocation);
        return p;
    }
#endif
    cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, lp_cu_nn_stream());
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        lp_err(LP_STATUS_NO_MEMORY, "cuda %s: %zu bytes of scratch: %s", op, bytes, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

/* The allocator hands a freed block out again only to work queued after this point on the
 * same stream, so freeing right after the launches that use it is safe. */
void lp_cu_nn_scratch_free(void *p)
{
    if (!p)
        return;
#ifndef LP_CUDA_EMU
    lp_cuda_ctx *x = lp_cu_ctx();
    if (x) {
        if (lp_cu_alloc_put(&x->alloc, p) != LP_OK)
            lp_cu_fail("scratch", "free", cudaErrorInvalidValue);
        return;
    }
#endif
    (void)cudaFreeAsync(p, lp_cu_nn_stream());
}

/* One two-int slot per process (device memory, zeroed once, never freed), made when the
 * backend is (so not inside a CUDA Graph capture: cudaMalloc) or on first use. */
static int *g_slot;

int *lp_cu_nn_error_slot(void)
{
    if (!g_slot) {
        int *p = NULL;
        cudaStream_t st = lp_cu_nn_stream();
        if (cudaMalloc((void **)&p, 2 * sizeof(int)) != cudaSuccess ||
            cudaMemsetAsync(p, 0, 2 * sizeof(int), st) != cudaSuccess ||
            cudaStreamSynchronize(st) != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL; /* the kernels then only write NaN */
        }
        g_slot = p;
    }
    return g_slot;
}

lp_status lp_cu_nn_take_error(void)
{
    cudaStream_t st = lp_cu_nn_stream();
#ifdef LP_CUDA_EMU
    if (emu_pending != LP_OK) {
        lp_status p = emu_pending;
        emu_pending = LP_OK;
        return p;
    }
#endif
    if (!g_slot)
        return LP_OK;
    int h[2] = {0, 0};
    cudaError_t e = cudaMemcpyAsync(h, g_slot, sizeof h, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda: reading the NN kernels' error record: %s",
                      cudaGetErrorString(e));
    if (h[0] == LP_CU_ERR_NONE)
        return LP_OK;
    (void)cudaMemsetAsync(g_slot, 0, sizeof h, st);
    switch (h[0]) {
    case LP_CU_ERR_EMB_ID:
        return lp_err(LP_STATUS_RANGE, "cuda embedding: token id at flat position %d outside the vocabulary",
                      h[1]);
    case LP_CU_ERR_EMB_TYPE:
        return lp_err(LP_STATUS_RANGE,
                      "cuda embedding: token type at flat position %d outside the type table", h[1]);
    case LP_CU_ERR_CE_LABEL:
        return lp_err(LP_STATUS_RANGE, "cuda cross-entropy: label at row %d outside 0..V-1 (and not ignored)",
                      h[1]);
    default:
        return lp_err(LP_STATUS_NUMERIC, "cuda cross-entropy: row %d has non-finite logits", h[1]);
    }
}
