/* Shared pieces of the CUDA NN kernels (cu_*.cu): the stream they launch on, the launch
 * check, warp and block reductions, the device-side data-error record, stream-ordered
 * scratch. Internal to src/kernels/cuda. */
#ifndef LP_CU_NN_COMMON_CUH
#define LP_CU_NN_COMMON_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cu_nn.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The stream every NN kernel is enqueued on: the backend context's. */
cudaStream_t lp_cu_nn_stream(void);

/* After a launch: a configuration or device error goes to lp_err naming the op. Returns
 * LP_OK or the status it set. */
lp_status lp_cu_nn_launched(const char *op);

/* After lp_err was set for a call the launcher refuses (nothing enqueued): the refusal
 * becomes the context's pending error too, so the next sync returns it. Returns st's status. */
lp_status lp_cu_nn_refuse(const char *op, lp_status st);

/* Device memory of at least `bytes` for one call's temporaries, stream-ordered (freed with
 * lp_cu_nn_scratch_free on the same stream after the kernels that use it). NULL and lp_err
 * when it cannot be had. */
void *lp_cu_nn_scratch(size_t bytes, const char *op);
void lp_cu_nn_scratch_free(void *p);

/* Data errors recorded on the device (lp_cu_nn_take_error reads them): the slot is two
 * ints, [0] the kind (first writer wins), [1] the row. */
enum { LP_CU_ERR_NONE = 0, LP_CU_ERR_EMB_ID, LP_CU_ERR_EMB_TYPE, LP_CU_ERR_CE_LABEL, LP_CU_ERR_CE_NONFINITE };
#ifdef __cplusplus
}
#endif

/* Launch and dynamic shared memory through macros, so that the kernels also build as plain
 * C++ against the CPU emulator of tests/kernels/cuda_emu (LP_CUDA_EMU), which runs them on
 * machines without a GPU. */
#ifdef LP_CUDA_EMU
#define LP_CU_LAUNCH(kernel, grid, block, smem, stream, ...)                                                 \
    ((void)(stream), lp_emu_launch(kernel, dim3(grid), dim3(block), (size_t)(smem), __VA_ARGS__))
#define LP_CU_DYN_SMEM(type, name) type *name = (type *)lp_emu_dyn_smem()
#else
#define LP_CU_LAUNCH(kernel, grid, block, smem, stream, ...)                                                 \
    kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define LP_CU_DYN_SMEM(type, name) extern __shared__ type name[]
#endif

#if defined(__CUDACC__) || defined(LP_CUDA_EMU)
static __device__ __forceinline__ void cu_record_error(int *slot, int kind, long long row)
{
    if (atomicCAS(slot, 0, kind) == 0)
        slot[1] = (int)row;
}

static __device__ __forceinline__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

static __device__ __forceinline__ float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
 * sh: 32 floats of shared memory. The order is fixed, so the result is deterministic. */
static __device__ __forceinline__ float block_sum(float x, float *sh)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    x = warp_sum(x);
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0)
        sh[w] = x;
    __syncthreads();
    x = lane < nw ? sh[lane] : 0.0f;
    return warp_sum(x);
}

static __device__ __forceinline__ float block_max(float x, float *sh)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    x = warp_max(x);
    __syncthreads();
    if (lane == 0)
        sh[w] = x;
    __syncthreads();
    x = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(x);
}
#endif

/* blocks of `per` covering n, capped (grid-stride loops take the rest) */
static inline unsigned cu_blocks(int64_t n, int64_t per, int64_t cap)
{
    int64_t b = (n + per - 1) / per;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

#endif /* LP_CU_NN_COMMON_CUH */
