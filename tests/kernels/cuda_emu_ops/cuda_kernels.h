/* The CPU emulator's stand-in for src/kernels/cuda/cuda_kernels.h (run.sh puts it first on
 * the include path): the context and helpers the kernels use, the CUDA calls the emulator
 * lacks (__constant__, cudaMemcpyToSymbol, __fadd_rn), no cuBLASLt, and the launchers
 * cuda_bf16.c (compiled as C++ here) calls. */
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
/* the launchers cuda_bf16.c calls: the rounding kernel (bf16.cu, emulated), the bias add
 * (elementwise.cu) and the bf16 GEMM and Linear (the CPU reference here, emu_backend.cpp) */
void lp_cu_round_bf16(uint16_t *out, const float *x, int64_t n);
void lp_cu_bias_add_forward(float *out, const float *bias, int64_t N, int64_t C);
lp_status lp_cu_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                          const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                          float *C, int64_t ldc);
lp_status lp_cu_linear_bf16(float *out, const uint16_t *a, const uint16_t *w, const float *bias, int64_t N,
                            int64_t C, int64_t OC);
lp_status lp_cu_bf16_matmul_forward(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                    int64_t N, int64_t C, int64_t OC);
lp_status lp_cu_bf16_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                     const lp_qweight *w, int64_t N, int64_t C, int64_t OC);
void lp_cu_bf16_repack(lp_qweight *q, const float *w);
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
