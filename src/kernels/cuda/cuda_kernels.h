/* The CUDA backend's insides: its context and the launcher of every op (`lp_cu_<op>`, one
 * .cu per op family), each with the signature of its lp_kernel_table entry. Every pointer
 * is a DEVICE pointer, except small host structs (lp_attn_geom, lp_attn_dropout, lp_qweight
 * headers) read by value; every launch goes on the context's stream and returns at once
 * (sum_squares waits: it returns the value). A launch failure is kept by lp_cu_check and
 * returned by the next sync (ops are void).
 *
 * The context is process-wide (one device, one stream): launchers reach it through
 * lp_cu_ctx(), valid once lp_backend_cuda has succeeded. */
#ifndef LP_KERNELS_CUDA_KERNELS_H
#define LP_KERNELS_CUDA_KERNELS_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "../backend.h"
#include "cuda_alloc.h"
#include "loupe/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lp_cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *workspace;          /* cuBLASLt workspace on the device */
    size_t workspace_bytes;
    bool tf32;                /* sgemm with CUBLAS_COMPUTE_32F_FAST_TF32 */
    int attn_mode;            /* lp_cuda_attn_mode (backend.h) */
    cudaEvent_t t0, t1;       /* lp_cuda_timer_* */
    lp_cuda_device_info info;
    lp_cu_alloc alloc;        /* caching allocator over cudaMalloc / cudaFree */
    /* the first error since the last sync (ops return void): status and message */
    pthread_mutex_t err_mu;
    lp_status err;
    char err_msg[512];
} lp_cuda_ctx;

/* The context; NULL before lp_backend_cuda succeeded. */
lp_cuda_ctx *lp_cu_ctx(void);
/* The context's stream (0, the legacy stream, before there is one). */
cudaStream_t lp_cu_stream(void);

/* Records e (when not cudaSuccess) as the context's pending error: "<op>: <call>: <CUDA
 * name>: <CUDA message>". Returns LP_OK or the status it recorded, with lp_err set. */
lp_status lp_cu_fail(const char *op, const char *call, cudaError_t e);
lp_status lp_cu_fail_blas(const char *op, const char *call, cublasStatus_t s);
/* Records st with the thread's current lp_err message as the pending error; returns st. */
lp_status lp_cu_pend(lp_status st);
/* After a launch: picks up a launch error (cudaGetLastError) for op. */
static inline lp_status lp_cu_check(const char *op)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? LP_OK : lp_cu_fail(op, "kernel launch", e);
}
/* Checks a CUDA runtime call inside a function returning lp_status. */
#define LP_CU_TRY(op, call)                                                                                     \
    do {                                                                                                        \
        cudaError_t lp_cu_e_ = (call);                                                                          \
        if (lp_cu_e_ != cudaSuccess)                                                                            \
            return lp_cu_fail(op, #call, lp_cu_e_);                                                             \
    } while (0)
#define LP_CUBLAS_TRY(op, call)                                                                                 \
    do {                                                                                                        \
        cublasStatus_t lp_cu_s_ = (call);                                                                       \
        if (lp_cu_s_ != CUBLAS_STATUS_SUCCESS)                                                                  \
            return lp_cu_fail_blas(op, #call, lp_cu_s_);                                                        \
    } while (0)

/* Blocks for n elements at `threads` per block, capped where a grid-stride loop takes over. */
static inline unsigned lp_cu_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

/* ---- GEMM (cuda_gemm.c, cuBLASLt) ---- */
void lp_cu_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* C_i (M,N) = alpha op(A_i) op(B_i) + beta C_i for i < batch (X_i = X + i sX floats), one
 * strided-batched cuBLASLt call, TF32 or f32 compute as asked. The error is returned (lp_err),
 * not kept as the pending one: the caller (attention) falls back. */
lp_status lp_cu_sgemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                              int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta, float *C,
                              int64_t ldc, int64_t sc, int64_t batch, bool tf32);
/* A, B bf16 bits; C f32; f32 accumulation (lp_cuda_gemm_bf16). */
lp_status lp_cu_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                          int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* A Linear: out (N,OC) = inp (N,C) @ weight^T + bias (NULL: none), the bias added by the GEMM's
 * epilogue where cuBLASLt has one for the shape (else a broadcast the GEMM accumulates into);
 * f32 or TF32 as the context says (the table's linear_forward), or bf16 a and w. */
void lp_cu_linear_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t N,
                          int64_t C, int64_t OC);
lp_status lp_cu_linear_bf16(float *out, const uint16_t *a, const uint16_t *w, const float *bias, int64_t N,
                            int64_t C, int64_t OC);

/* ---- --dtype bf16 (bf16.cu: the rounding; cuda_bf16.c: the table's bf16 entries) ----
 * out (n) = x rounded to bf16 bits, nearest even (the CPU's rule) */
void lp_cu_round_bf16(uint16_t *out, const float *x, int64_t n);
/* w: a bf16 copy from lp_cuda_qweight_bf16_train (one row-major (OC, C) device array) */
lp_status lp_cu_bf16_matmul_forward(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                    int64_t N, int64_t C, int64_t OC);
lp_status lp_cu_bf16_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                     const lp_qweight *w, int64_t N, int64_t C, int64_t OC);
void lp_cu_bf16_repack(lp_qweight *q, const float *w);

/* ---- elementwise (elementwise.cu) ---- */
void lp_cu_bias_add_forward(float *out, const float *bias, int64_t N, int64_t C);
void lp_cu_bias_broadcast(float *out, const float *bias, int64_t N, int64_t C);
void lp_cu_gelu_forward(float *out, const float *inp, int64_t n, lp_gelu_kind kind);
void lp_cu_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind);
void lp_cu_act_forward(float *out, const float *inp, int64_t n, lp_act_kind kind);
void lp_cu_act_backward(float *dinp, const float *dout, const float *inp, const float *out, int64_t n,
                        lp_act_kind kind);
void lp_cu_swiglu_forward(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld);
void lp_cu_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t N,
                           int64_t F, int64_t ld);
void lp_cu_scale(float *x, int64_t n, float s);
void lp_cu_add_inplace(float *y, const float *x, int64_t n);
/* C (M,N) with row stride ldc *= beta (0: set to 0), for GEMMs with K == 0 */
void lp_cu_scale_2d(float *C, int64_t M, int64_t N, int64_t ldc, float beta);

/* x (n) = uniform in [-1, 1) from a hash of (seed, i); as bf16 bits with bf16 set (peak.cu) */
void lp_cu_fill_uniform(void *x, int64_t n, uint32_t seed, bool bf16);

/* ---- reductions (reduce.cu) ---- */
void lp_cu_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C);
double lp_cu_sum_squares(const float *x, int64_t n);
void lp_cu_mean_pool_forward(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T, int64_t C);
void lp_cu_mean_pool_backward(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T, int64_t C);
void lp_cu_l2_normalize(float *x, int64_t N, int64_t C);

/* ---- dropout (dropout.cu; philox.cuh is the device Philox for cukern's fused dropout) ---- */
void lp_cu_dropout_forward(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng);
void lp_cu_dropout_backward(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p);

/* ---- rows, optimizer, quantized weights (rows.cu, adamw.cu, nf4.cu) ---- */
void lp_cu_rows_gather(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C);
void lp_cu_rows_scatter_add(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C);
void lp_cu_adamw_step(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1,
                      double beta2, double eps, double weight_decay, int64_t step);
void lp_cu_adamw_multi(const lp_adamw_tensor *t, int count, double lr, double beta1, double beta2, double eps,
                       int64_t step);
/* w: a host lp_qweight header whose arrays are device pointers (lp_cuda_qweight_upload) */
void lp_cu_qweight_dequantize(float *out, const lp_qweight *w, int64_t start, int64_t n);

/* ---- cukern's ops (their .cu files; entries join the table in cuda_backend.c) ---- */
void lp_cu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                             const float *bias, int64_t N, int64_t C, float eps);
void lp_cu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                              const float *weight, const float *mean, const float *rstd, int64_t N, int64_t C);
void lp_cu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int64_t N, int64_t C,
                           float eps);
void lp_cu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                            const float *rstd, int64_t N, int64_t C);
void lp_cu_softmax_forward(float *out, const float *inp, int64_t N, int64_t C);
void lp_cu_softmax_backward(float *dinp, const float *dout, const float *out, int64_t N, int64_t C);
lp_status lp_cu_embedding_forward(float *out, const int32_t *ids, const int32_t *type_ids, const float *wte,
                                  const float *wpe, const float *wtt, int64_t B, int64_t T, int64_t C, int64_t V,
                                  int64_t P, int64_t TT, int64_t pos_offset);
void lp_cu_embedding_backward(float *dwte, float *dwpe, float *dwtt, const float *dout, const int32_t *ids,
                              const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset);
lp_status lp_cu_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N,
                                      int64_t V, int32_t ignore_index);
void lp_cu_cross_entropy_backward(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
                                  int64_t N, int64_t V, int32_t ignore_index, float dloss);
void lp_cu_rope_cache(float *cos, float *sin, const int32_t *pos, const float *inv_freq, float attn_factor, int64_t N,
                      int64_t D);
void lp_cu_rope_forward(float *x, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D, int64_t ld);
void lp_cu_rope_backward(float *dx, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D, int64_t ld);
void lp_cu_attention_fused_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                                   const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
void lp_cu_attention_fused_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                    const float *lse, const float *q, const float *k, const float *v,
                                    const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
/* ---- the table's attention entries (cuda_attention.c): GEMMs on the tensor cores or the
 * fused kernels above, as lp_cuda_set_attention says ---- */
void lp_cu_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                             const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
void lp_cu_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                              const float *q, const float *k, const float *v, const int32_t *mask,
                              const lp_attn_geom *g, const lp_attn_dropout *drop);

#ifdef __cplusplus
}
#endif
#endif
