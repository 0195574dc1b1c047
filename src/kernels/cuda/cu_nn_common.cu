/* Host side of the NN kernels' shared pieces: stream, launch check, scratch, and the
 * device-side data-error record (cu_nn_common.cuh). */
#include <stdio.h>

#include "cu_nn_common.cuh"

cudaStream_t lp_cu_nn_stream(void)
{
    return (cudaStream_t)0; /* TODO(cukern): the backend context's stream once `cuda` lands */
}

lp_status lp_cu_nn_launched(const char *op)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return LP_OK;
    return lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: launch failed: %s", op, cudaGetErrorString(e));
}

void *lp_cu_nn_scratch(size_t bytes, const char *op)
{
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, lp_cu_nn_stream());
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        lp_err(LP_STATUS_NO_MEMORY, "cuda %s: %zu bytes of scratch: %s", op, bytes, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void lp_cu_nn_scratch_free(void *p)
{
    if (p)
        (void)cudaFreeAsync(p, lp_cu_nn_stream());
}

/* One two-int slot per process (device memory, zeroed once). */
static int *g_slot;

int *lp_cu_nn_error_slot(void)
{
    if (!g_slot) {
        int *p = NULL;
        if (cudaMalloc((void **)&p, 2 * sizeof(int)) != cudaSuccess || cudaMemset(p, 0, 2 * sizeof(int)) != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        g_slot = p;
    }
    return g_slot;
}

lp_status lp_cu_nn_take_error(void)
{
    cudaError_t e = cudaStreamSynchronize(lp_cu_nn_stream());
    if (e != cudaSuccess)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda: stream failed: %s", cudaGetErrorString(e));
    if (!g_slot)
        return LP_OK;
    int h[2] = {0, 0};
    if ((e = cudaMemcpy(h, g_slot, sizeof h, cudaMemcpyDeviceToHost)) != cudaSuccess)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda: reading the error record: %s", cudaGetErrorString(e));
    if (h[0] == LP_CU_ERR_NONE)
        return LP_OK;
    (void)cudaMemset(g_slot, 0, sizeof h);
    switch (h[0]) {
    case LP_CU_ERR_EMB_ID:
        return lp_err(LP_STATUS_RANGE, "cuda embedding: token id at flat position %d outside the vocabulary", h[1]);
    case LP_CU_ERR_EMB_TYPE:
        return lp_err(LP_STATUS_RANGE, "cuda embedding: token type at flat position %d outside the type table", h[1]);
    case LP_CU_ERR_EMB_POS:
        return lp_err(LP_STATUS_RANGE, "cuda embedding: position of token %d exceeds the position embeddings", h[1]);
    case LP_CU_ERR_CE_LABEL:
        return lp_err(LP_STATUS_RANGE, "cuda cross-entropy: label at row %d outside 0..V-1 (and not ignored)", h[1]);
    default:
        return lp_err(LP_STATUS_NUMERIC, "cuda cross-entropy: row %d has non-finite logits", h[1]);
    }
}
