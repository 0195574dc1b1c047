/* The CPU emulator's stand-in for src/kernels/cuda/cuda_kernels.h (run.sh puts it first on
 * the include path): the context and helpers the kernels use, the CUDA calls the emulator
 * lacks (__constant__, cudaMemcpyToSymbol, __fadd_rn), no cuBLASLt. */
#ifndef EMU_CUDA_KERNELS_H
#define EMU_CUDA_KERNELS_H
#include "cuda_runtime.h"
#include "backend.h"
#include "cuda/cuda_alloc.h"
#include "loupe/kernels.h"
#include <pthread.h>
#define __constant__
#define cudaMemcpyToSymbol(sym, src, n) (memcpy(sym, src, n), cudaSuccess)
#define cudaDeviceSynchronize() cudaSuccess
#define cudaGetErrorName cudaGetErrorString
static inline float __fadd_rn(float a, float b)
{
    volatile float r = a + b;
    return r;
}
extern "C" {
typedef struct lp_cuda_ctx {
    cudaStream_t stream;
    lp_cuda_device_info info;
    lp_cu_alloc alloc;
} lp_cuda_ctx;
lp_cuda_ctx *lp_cu_ctx(void);
cudaStream_t lp_cu_stream(void);
lp_status lp_cu_fail(const char *op, const char *call, cudaError_t e);
lp_status lp_cu_pend(lp_status st);
}
static inline lp_status lp_cu_check(const char *op)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? LP_OK : lp_cu_fail(op, "launch", e);
}
static inline unsigned lp_cu_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}
#endif
