/* The CUDA table's attention entries: attention as GEMMs on the tensor cores (../attn_gemm.h:
 * cuBLASLt strided-batched GEMMs in TF32, cu_attention_gemm.cu's softmax and copies between
 * them) for short sequences with TF32 on, the fused f32 SIMT kernels (cu_attention.cu)
 * otherwise and as the fallback (backend.h, lp_cuda_set_attention).
 *
 * Why both: at BERT-like lengths the fused kernels spend their time in f32 FMAs on the CUDA
 * cores (DistilBERT's attention, 12 heads of 64 at T 128, took 3.7 of a 14.9 ms training step
 * on an H200), while the scores of a whole batch are small (B*H*T*T floats: 25 MB there), so
 * writing them out and running the products on the tensor cores costs a few passes over
 * memory and buys TF32's throughput. Long sequences keep the fused kernels (the scores grow
 * as T^2 and causal masks waste half the GEMMs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../attn_gemm.h"
#include "cu_nn.h"
#include "cuda_kernels.h"

/* whether x runs g as GEMMs (before scratch) */
static bool use_gemm(const lp_cuda_ctx *x, const lp_attn_geom *g)
{
    return x && lp_cuda_attn_gemm_chosen((lp_cuda_attn_mode)x->attn_mode, x->tf32, g);
}

bool lp_cuda_attention_uses_gemm(const lp_backend *b, const lp_attn_geom *g)
{
    const lp_cuda_ctx *x = lp_cu_ctx();
    return b && x && b->ctx == x && use_gemm(x, g);
}

void lp_cuda_set_attention(const lp_backend *b, lp_cuda_attn_mode mode)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    if (b && x && b->ctx == x)
        x->attn_mode = mode;
}

/* ---- lp_attn_gemm_ops on this backend -------------------------------------------------------- */

static void *ag_alloc(void *ctx, size_t bytes, const char *what)
{
    return lp_cu_alloc_get(&((lp_cuda_ctx *)ctx)->alloc, bytes, LP_MEM_CATEGORY_TEMPORARY, what);
}

/* back to the cache: handed out again only to work queued later on this stream */
static void ag_free(void *ctx, void *p)
{
    if (p && lp_cu_alloc_put(&((lp_cuda_ctx *)ctx)->alloc, p) != LP_OK)
        (void)lp_cu_pend(LP_STATUS_INVALID_ARG);
}

static lp_status ag_gemm(void *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                         int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta, float *C,
                         int64_t ldc, int64_t sc, int64_t batch)
{
    const lp_cuda_ctx *x = ctx;
    return lp_cu_sgemm_batched(ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, x->tf32);
}

static lp_attn_gemm_ops ops_of(lp_cuda_ctx *x)
{
    return (lp_attn_gemm_ops){
        .ctx = x,
        .alloc = ag_alloc,
        .free = ag_free,
        .gemm = ag_gemm,
        .to_heads = lp_cu_attn_gemm_to_heads,
        .from_heads = lp_cu_attn_gemm_from_heads,
        .softmax_forward = lp_cu_attn_gemm_softmax_forward,
        .softmax_backward = lp_cu_attn_gemm_softmax_backward,
    };
}

/* The GEMM path refused the call (no scratch, a GEMM cuBLASLt would not plan): said once per
 * process on stderr, since the fused kernels then run every such call, correctly but slower. */
static void fell_back(const char *op)
{
    static bool said;
    if (!said) {
        said = true;
        fprintf(stderr, "loupe: cuda %s: attention as GEMMs refused (%s); the fused kernels run instead\n", op,
                lp_err_msg());
    }
}

void lp_cu_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                             const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    if (use_gemm(x, g) && lp_cu_attention_supports(g) == LP_OK) {
        const lp_attn_gemm_ops o = ops_of(x);
        if (lp_attn_gemm_forward(&o, out, lse, q, k, v, mask, g, drop) == LP_OK)
            return;
        fell_back("attention_fused_forward");
    }
    lp_cu_attention_fused_forward(out, lse, q, k, v, mask, g, drop);
}

void lp_cu_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                              const float *q, const float *k, const float *v, const int32_t *mask,
                              const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    if (use_gemm(x, g) && lp_cu_attention_supports(g) == LP_OK) {
        const lp_attn_gemm_ops o = ops_of(x);
        if (lp_attn_gemm_backward(&o, dq, dk, dv, dout, out, lse, q, k, v, mask, g, drop) == LP_OK)
            return;
        fell_back("attention_fused_backward");
    }
    lp_cu_attention_fused_backward(dq, dk, dv, dout, out, lse, q, k, v, mask, g, drop);
}
