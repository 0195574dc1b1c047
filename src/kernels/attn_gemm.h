/* Attention as GEMMs (the unfused path for short sequences): the scores of every (batch,
 * head) are materialized, so the two products of the forward and the four of the backward
 * run as strided-batched GEMMs (on the GPU: cuBLASLt on the tensor cores, TF32), with a
 * masked softmax (and its backward) between them. Same semantics as attention_fused_ref.c
 * over a whole lp_attn_geom (GQA, strides, causal, window, padding, segments, scale, the
 * Philox dropout mask of lp_attn_dropout), same outputs (out, lse) and gradients, so either
 * path may run the forward and either the backward.
 *
 * The orchestration (attn_gemm.c: which GEMM with which strides, the GQA grouping, which
 * softmax) is plain C over a table of steps, lp_attn_gemm_ops, that a backend provides:
 * the CUDA backend's (cuda/cuda_attention.c: cuBLASLt + cu_attention_gemm.cu) and the CPU's
 * (lp_attn_gemm_ops_cpu: plain loops and the CPU table's sgemm), which holds the
 * composition to the fused reference in every build, GPU or not.
 *
 * Layout: q, k, v are copied head-major, Qh (B, H, T, D) and Kh, Vh (B, Hkv, T, D). The
 * grp = H / Hkv query heads sharing a kv head are then consecutive, so one GEMM per (b, kv
 * head) covers the whole group as grp*T rows: S (grp*T, T) = scale Qh Kh^T, batch B*Hkv.
 * The scores S (B, H, T, T) are indexed like the dropout elements (((b H + h) T + i) T + j).
 * Memory: B*H*T*T floats of scores (two such buffers in the backward) plus the head-major
 * copies; the backends choose this path under a size limit. */
#ifndef LP_KERNELS_ATTN_GEMM_H
#define LP_KERNELS_ATTN_GEMM_H

#include <stddef.h>

#include "loupe/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lp_attn_gemm_ops {
    void *ctx; /* passed to alloc, free, gemm */
    /* scratch of `bytes` (NULL and lp_err when it cannot be had); free takes NULL */
    void *(*alloc)(void *ctx, size_t bytes, const char *what);
    void (*free)(void *ctx, void *p);
    /* C_i (M,N) = alpha op(A_i) op(B_i) + beta C_i for i < batch, row-major with lp_sgemm's
     * conventions (op(A) (M,K), op(B) (K,N)); X_i = X + i * sX. beta 0: C is not read. */
    lp_status (*gemm)(void *ctx, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta,
                      float *C, int64_t ldc, int64_t sc, int64_t batch);
    /* xh (B,Hx,T,D) contiguous = x (B,T,Hx,D) with ld elements between tokens */
    void (*to_heads)(float *xh, const float *x, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld);
    /* x (B,T,Hx,D), stride ld = xh (B,Hx,T,D); only the Hx*D columns of each token are written */
    void (*from_heads)(float *x, const float *xh, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld);
    /* s (B,H,T,T): scaled scores in, z p out (p the softmax over the keys visible to each
     * query, 0 elsewhere, a whole row 0 for a query that sees none; z the dropout keep factor,
     * 1 without drop); lse (B,H,T) = m + log l of the visible scores, -inf when none. */
    void (*softmax_forward)(float *s, float *lse, const int32_t *mask, const lp_attn_geom *g,
                            const lp_attn_dropout *drop);
    /* s: scaled scores in, z p out (p = exp(s - lse), 0 where invisible or lse = -inf);
     * dp (B,H,T,T): dout.v in, ds = p (z dp - D_i) scale out, D_i = dout_i . out_i with dout,
     * out (B,T,H*D). */
    void (*softmax_backward)(float *s, float *dp, const float *dout, const float *out, const float *lse,
                             const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
} lp_attn_gemm_ops;

/* Bytes of scratch the forward (backward = false) or the backward takes for g. */
size_t lp_attn_gemm_scratch_bytes(const lp_attn_geom *g, bool backward);

/* lp_attention_fused_forward's contract (out (B,T,H*D) =, lse (B,H,T) =) through ops. All
 * scratch is taken before anything is queued: an error (no memory, a GEMM the backend
 * refuses) leaves the outputs to be written by another path; lp_err says what failed. */
lp_status lp_attn_gemm_forward(const lp_attn_gemm_ops *ops, float *out, float *lse, const float *q, const float *k,
                               const float *v, const int32_t *mask, const lp_attn_geom *g,
                               const lp_attn_dropout *drop);
/* lp_attention_fused_backward's contract (dq, dk, dv =, in q's and k/v's layouts) through
 * ops; dq, dk, dv are written last, after every GEMM succeeded. */
lp_status lp_attn_gemm_backward(const lp_attn_gemm_ops *ops, float *dq, float *dk, float *dv, const float *dout,
                                const float *out, const float *lse, const float *q, const float *k, const float *v,
                                const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);

/* The CPU steps (host memory, plain loops; the gemm calls `sgemm` per batch element, the
 * ref table's when NULL). The reference the CUDA steps are tested against. */
lp_attn_gemm_ops lp_attn_gemm_ops_cpu(const lp_kernel_table *sgemm_table);
void lp_attn_gemm_to_heads_cpu(float *xh, const float *x, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld);
void lp_attn_gemm_from_heads_cpu(float *x, const float *xh, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld);
void lp_attn_gemm_softmax_forward_cpu(float *s, float *lse, const int32_t *mask, const lp_attn_geom *g,
                                      const lp_attn_dropout *drop);
void lp_attn_gemm_softmax_backward_cpu(float *s, float *dp, const float *dout, const float *out, const float *lse,
                                       const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);

#ifdef __cplusplus
}
#endif
#endif
