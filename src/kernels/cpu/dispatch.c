/* The dispatch tables (reference and optimized) and the public lp_* wrappers: each
 * wrapper records the call's shapes and FLOPs with the profiler, then calls the active
 * table. Compositions (linear layer, clipping) live here too, built on table entries. */
#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "op_record.h"

#define ENTRY(impl, name) .name = lp_k_##name##_##impl
/* impl: ref, opt (the baseline copy) or opt_<level>; isa: the level's name. One line per
 * group of ops, as written: */
/* clang-format off */
#define TABLE(impl, nm, isa_)                                                                                \
    {                                                                                                        \
        .name = nm, .isa = isa_,                                                                             \
        ENTRY(impl, sgemm), ENTRY(impl, bias_add_forward), ENTRY(impl, bias_broadcast),                      \
        ENTRY(impl, bias_backward), ENTRY(impl, embedding_forward), ENTRY(impl, embedding_backward),         \
        ENTRY(impl, layernorm_forward), ENTRY(impl, layernorm_backward),                                     \
        ENTRY(impl, gelu_forward), ENTRY(impl, gelu_backward), ENTRY(impl, act_forward),                     \
        ENTRY(impl, act_backward), ENTRY(impl, softmax_forward), ENTRY(impl, softmax_backward),              \
        ENTRY(impl, attention_eager_forward), ENTRY(impl, attention_eager_backward),                         \
        ENTRY(impl, attention_fused_forward), ENTRY(impl, attention_fused_backward),                         \
        ENTRY(impl, dropout_forward), ENTRY(impl, dropout_backward), ENTRY(impl, cross_entropy_forward),     \
        ENTRY(impl, cross_entropy_backward), ENTRY(impl, adamw_step), ENTRY(impl, sum_squares),              \
        ENTRY(impl, scale),                                                                                  \
        /* decoder ops */                                                                                    \
        ENTRY(impl, rmsnorm_forward), ENTRY(impl, rmsnorm_backward), ENTRY(impl, swiglu_forward),            \
        ENTRY(impl, swiglu_backward), ENTRY(impl, rope_cache), ENTRY(impl, rope_forward),                    \
        ENTRY(impl, rope_backward), ENTRY(impl, rows_gather), ENTRY(impl, rows_scatter_add),                 \
        /* pooling */                                                                                        \
        ENTRY(impl, mean_pool_forward), ENTRY(impl, mean_pool_backward), ENTRY(impl, l2_normalize),          \
        /* quant section */                                                                                  \
        ENTRY(impl, qweight_dequantize), ENTRY(impl, qmatmul_forward), ENTRY(impl, qmatmul_backward),        \
        ENTRY(impl, add_inplace), ENTRY(impl, lora_forward), ENTRY(impl, lora_backward),                     \
        /* KV-cache decoding */                                                                              \
        ENTRY(impl, kv_write), ENTRY(impl, attention_decode),                                                \
        /* bf16 weights and training; packed f32 weights */                                                  \
        ENTRY(impl, bf16_matmul_forward), ENTRY(impl, bf16_matmul_backward), ENTRY(impl, bf16_repack),       \
        ENTRY(impl, f32_matmul_forward), ENTRY(impl, f32_matmul_backward),                                   \
    }
/* clang-format on */

static const lp_kernel_table table_ref = TABLE(ref, "ref", "baseline");
/* One optimized table per ISA level (the CPU backend's op table at that level). */
static const lp_kernel_table table_opt[LP_ISA_COUNT] = {
    [LP_ISA_BASELINE] = TABLE(opt, "opt", "baseline"),
    [LP_ISA_AVX2] = TABLE(opt_avx2, "opt", "avx2"),
    [LP_ISA_AVX512] = TABLE(opt_avx512, "opt", "avx512"),
    [LP_ISA_AVX512BF16] = TABLE(opt_avx512bf16, "opt", "avx512bf16"),
};
/* The per-ISA helpers outside the op table, indexed like table_opt. */
static float (*const fma_chain[LP_ISA_COUNT])(int, int64_t) = {
    lp_k_fma_chain_opt, lp_k_fma_chain_opt_avx2, lp_k_fma_chain_opt_avx512, lp_k_fma_chain_opt_avx512bf16};
static int (*const fma_bits[LP_ISA_COUNT])(void) = {lp_k_fma_bits_opt, lp_k_fma_bits_opt_avx2,
                                                     lp_k_fma_bits_opt_avx512, lp_k_fma_bits_opt_avx512bf16};

/* active: the table the wrappers call; isa: the level of the optimized one (-1 until
 * lp_kernels_init). Both are set once at start-up (or by the select calls, which tests and
 * benchmarks make between ops, never during one). */
static _Atomic(const lp_kernel_table *) active;
static atomic_int active_isa = -1;

/* LP_ISA, or the detected level; on error *isa is the detected level. */
static lp_status isa_from_env(lp_isa *isa)
{
    *isa = lp_isa_detect();
    const char *s = getenv("LP_ISA");
    if (!s || !*s)
        return LP_OK;
    lp_isa want;
    lp_status st = lp_isa_parse(s, "LP_ISA", &want);
    if (st != LP_OK)
        return st;
    const char *missing = lp_isa_missing(want);
    if (missing)
        return lp_err(LP_STATUS_UNSUPPORTED, "LP_ISA=%s: this CPU lacks %s (it runs up to %s)", s, missing,
                      lp_isa_name(*isa));
    *isa = want;
    lp_threads_blas_cap((int)want); /* and OpenBLAS, so the whole run is that level's */
    return LP_OK;
}

/* Sets the ISA level from LP_ISA once, whichever of init / select / the first op comes first. */
static lp_status isa_init(void)
{
    if (atomic_load(&active_isa) >= 0)
        return LP_OK;
    lp_isa isa;
    lp_status st = isa_from_env(&isa);
    int expected = -1;
    atomic_compare_exchange_strong(&active_isa, &expected, (int)isa);
    return st;
}

lp_status lp_kernels_init(void)
{
    lp_status st = isa_init();
    if (atomic_load(&active))
        return st;
    const char *s = getenv("LP_KERNELS");
    const lp_kernel_table *t = (s && !strcmp(s, "ref")) ? &table_ref : &table_opt[atomic_load(&active_isa)];
    const lp_kernel_table *expected = NULL;
    atomic_compare_exchange_strong(&active, &expected, t);
    return st;
}

void lp_kernels_select(lp_kernels_impl impl) { atomic_store(&active, lp_kernels_table(impl)); }

/* device.c: a device backend's table, or NULL to have lp_kernels_init choose again */
void lp_kernels__set_active(const lp_kernel_table *t) { atomic_store(&active, t); }

lp_status lp_kernels_select_isa(lp_isa isa)
{
    const char *missing = lp_isa_missing(isa);
    if (missing)
        return lp_err(LP_STATUS_UNSUPPORTED, "ISA level %s: this CPU lacks %s (it runs up to %s)", lp_isa_name(isa),
                      missing, lp_isa_name(lp_isa_detect()));
    bool was_ref = lp_kernels_active() == &table_ref;
    atomic_store(&active_isa, (int)isa);
    atomic_store(&active, was_ref ? &table_ref : &table_opt[isa]);
    return LP_OK;
}

lp_isa lp_kernels_isa(void)
{
    if (atomic_load(&active_isa) < 0 && isa_init() != LP_OK) /* implicit: nobody to hand the status to */
        fprintf(stderr, "loupe: %s; using %s\n", lp_err_msg(), lp_isa_name((lp_isa)atomic_load(&active_isa)));
    return (lp_isa)atomic_load(&active_isa);
}

const lp_kernel_table *lp_kernels_table(lp_kernels_impl impl)
{
    return impl == LP_KERNELS_IMPL_REF ? &table_ref : &table_opt[lp_kernels_isa()];
}

const lp_kernel_table *lp_kernels_table_isa(lp_isa isa)
{
    assert((unsigned)isa < LP_ISA_COUNT);
    return &table_opt[isa];
}

const lp_kernel_table *lp_kernels_active(void)
{
    const lp_kernel_table *t = atomic_load(&active);
    if (!t) {
        lp_kernels_isa(); /* reports a bad LP_ISA */
        (void)lp_kernels_init();
        t = atomic_load(&active);
    }
    return t;
}

float lp_k_fma_chain(int bits, int64_t iters) { return fma_chain[lp_kernels_isa()](bits, iters); }

int lp_k_fma_bits(void) { return fma_bits[lp_kernels_isa()](); }

#define K lp_kernels_active()

void lp_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K_, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    LP_OP_BEGIN("lp::sgemm", 2.0 * M * N * K_, 4.0 * (M * K_ + K_ * N + M * N), 3, M, N, K_);
    K->sgemm(trans_a, trans_b, M, N, K_, alpha, A, lda, B, ldb, beta, C, ldc);
    LP_OP_END();
}

void lp_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t N, int64_t C,
                       int64_t OC)
{
    LP_OP_BEGIN("lp::matmul_forward", 2.0 * N * C * OC, 4.0 * (N * C + C * OC + N * OC), 3, N, C, OC);
    // out (N,OC) = bias + inp (N,C) @ weight^T (C,OC): the bias is the C the GEMM accumulates
    // into, which saves OpenBLAS's zeroing pass and a separate bias pass over out
    if (bias && K->linear_forward) {
        K->linear_forward(out, inp, weight, bias, N, C, OC);
    } else {
        if (bias)
            K->bias_broadcast(out, bias, N, OC);
        K->sgemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC);
    }
    LP_OP_END();
}

void lp_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, int64_t N, int64_t C, int64_t OC)
{
    double flops = (dinp ? 2.0 * N * C * OC : 0.0) + (dweight ? 2.0 * N * C * OC : 0.0) + (dbias ? 1.0 * N * OC : 0.0);
    LP_OP_BEGIN("lp::matmul_backward", flops, 4.0 * (2 * N * C + 2 * C * OC + N * OC), 3, N, C, OC);
    // dinp (N,C) = dout (N,OC) @ weight (OC,C)
    if (dinp)
        K->sgemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
    // dweight (OC,C) += dout^T (OC,N) @ inp (N,C)
    if (dweight)
        K->sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias)
        K->bias_backward(dbias, dout, N, OC);
    LP_OP_END();
}

void lp_bias_add_forward(float *out, const float *bias, int64_t N, int64_t C)
{
    LP_OP_BEGIN("lp::bias_add_forward", 1.0 * N * C, 4.0 * (2 * N * C + C), 2, N, C);
    K->bias_add_forward(out, bias, N, C);
    LP_OP_END();
}

void lp_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C)
{
    LP_OP_BEGIN("lp::bias_backward", 1.0 * N * C, 4.0 * (N * C + 2 * C), 2, N, C);
    K->bias_backward(dbias, dout, N, C);
    LP_OP_END();
}

lp_status lp_embedding_forward(float *out, const int32_t *ids, const int32_t *type_ids, const float *wte,
                               const float *wpe, const float *wtt, int64_t B, int64_t T, int64_t C, int64_t V,
                               int64_t P, int64_t TT, int64_t pos_offset)
{
    LP_OP_BEGIN("lp::embedding_forward", 2.0 * B * T * C, 4.0 * 4 * B * T * C, 3, B, T, C);
    lp_status st = K->embedding_forward(out, ids, type_ids, wte, wpe, wtt, B, T, C, V, P, TT, pos_offset);
    LP_OP_END();
    return st;
}

void lp_embedding_backward(float *dwte, float *dwpe, float *dwtt, const float *dout, const int32_t *ids,
                           const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset)
{
    LP_OP_BEGIN("lp::embedding_backward", 3.0 * B * T * C, 4.0 * 7 * B * T * C, 3, B, T, C);
    K->embedding_backward(dwte, dwpe, dwtt, dout, ids, type_ids, B, T, C, pos_offset);
    LP_OP_END();
}

void lp_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                          const float *bias, int64_t N, int64_t C, float eps)
{
    LP_OP_BEGIN("lp::layernorm_forward", 8.0 * N * C, 4.0 * (2 * N * C + 2 * C + 2 * N), 2, N, C);
    K->layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps);
    LP_OP_END();
}

void lp_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, const float *mean, const float *rstd, int64_t N, int64_t C)
{
    LP_OP_BEGIN("lp::layernorm_backward", 14.0 * N * C, 4.0 * (5 * N * C + 3 * C + 2 * N), 2, N, C);
    K->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    LP_OP_END();
}

void lp_act_forward(float *out, const float *inp, int64_t n, lp_act_kind kind)
{
    LP_OP_BEGIN("lp::act_forward", (kind == LP_ACT_TANH ? 10.0 : 1.0) * n, 8.0 * n, 1, n);
    K->act_forward(out, inp, n, kind);
    LP_OP_END();
}

void lp_act_backward(float *dinp, const float *dout, const float *inp, const float *out, int64_t n,
                     lp_act_kind kind)
{
    LP_OP_BEGIN("lp::act_backward", 3.0 * n, 12.0 * n, 1, n);
    K->act_backward(dinp, dout, inp, out, n, kind);
    LP_OP_END();
}

void lp_gelu_forward(float *out, const float *inp, int64_t n, lp_gelu_kind kind)
{
    if (kind == LP_GELU_KIND_TANH) {
        LP_OP_BEGIN("lp::gelu_tanh_forward", 12.0 * n, 8.0 * n, 1, n);
        K->gelu_forward(out, inp, n, kind);
    } else {
        LP_OP_BEGIN("lp::gelu_forward", 12.0 * n, 8.0 * n, 1, n);
        K->gelu_forward(out, inp, n, kind);
    }
}

void lp_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind)
{
    if (kind == LP_GELU_KIND_TANH) {
        LP_OP_BEGIN("lp::gelu_tanh_backward", 20.0 * n, 12.0 * n, 1, n);
        K->gelu_backward(dinp, dout, inp, n, kind);
    } else {
        LP_OP_BEGIN("lp::gelu_backward", 20.0 * n, 12.0 * n, 1, n);
        K->gelu_backward(dinp, dout, inp, n, kind);
    }
}

void lp_softmax_forward(float *out, const float *inp, int64_t N, int64_t C)
{
    LP_OP_BEGIN("lp::softmax_forward", 5.0 * N * C, 8.0 * N * C, 2, N, C);
    K->softmax_forward(out, inp, N, C);
    LP_OP_END();
}

void lp_softmax_backward(float *dinp, const float *dout, const float *out, int64_t N, int64_t C)
{
    LP_OP_BEGIN("lp::softmax_backward", 4.0 * N * C, 12.0 * N * C, 2, N, C);
    K->softmax_backward(dinp, dout, out, N, C);
    LP_OP_END();
}

void lp_dropout_forward(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng)
{
    LP_OP_BEGIN("lp::dropout_forward", 1.0 * n, 9.0 * n, 1, n);
    K->dropout_forward(out, keep, inp, n, p, rng);
    LP_OP_END();
}

void lp_dropout_backward(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p)
{
    LP_OP_BEGIN("lp::dropout_backward", 1.0 * n, 9.0 * n, 1, n);
    K->dropout_backward(dinp, dout, keep, n, p);
    LP_OP_END();
}

/* Attention FLOPs: QK^T and PV are 2*D per visible (query, key) pair each, per (batch,
 * head) forward; the backward does four such products (dV, dP, dQ, dK) plus, when fused,
 * the recomputed QK^T. Only the pairs the causal mask and window leave visible count
 * (about T*(T+1)/2 per head when causal): the fused kernels skip the rest, tile by tile;
 * padding is not subtracted (it varies per row and the kernels compute it). */
static double attn_pairs(const lp_attn_geom *g)
{
    if (!g->causal && g->window <= 0)
        return (double)g->T * (double)g->T;
    double n = 0.0;
    for (int64_t i = 0; i < g->T; i++) {
        int64_t lo, hi;
        lp_attn_key_range(g, i, &lo, &hi);
        n += (double)(hi - lo);
    }
    return n;
}

void lp_attention_eager_forward(float *out, float *att, const float *q, const float *k, const float *v,
                                const int32_t *mask, const lp_attn_geom *g)
{
    assert(lp_attention_geom_check(g, "lp_attention_eager_forward") == LP_OK);
    assert(!g->segments || mask); /* sample ids live in the mask */
    const double BH = (double)g->B * g->H, tok = (double)g->B * g->T;
    LP_OP_BEGIN("lp::attention_eager_forward", 4.0 * BH * attn_pairs(g) * g->D,
                4.0 * (tok * (2 * g->H + 2 * g->Hkv) * g->D + BH * g->T * g->T), 5, g->B, g->H, g->Hkv, g->T, g->D);
    K->attention_eager_forward(out, att, q, k, v, mask, g);
    LP_OP_END();
}

void lp_attention_eager_backward(float *dq, float *dk, float *dv, float *datt, const float *dout, const float *att,
                                 const float *q, const float *k, const float *v, const lp_attn_geom *g)
{
    assert(lp_attention_geom_check(g, "lp_attention_eager_backward") == LP_OK);
    const double BH = (double)g->B * g->H, tok = (double)g->B * g->T;
    LP_OP_BEGIN("lp::attention_eager_backward", 8.0 * BH * attn_pairs(g) * g->D,
                4.0 * (tok * (3 * g->H + 4 * g->Hkv) * g->D + 3 * BH * g->T * g->T), 5, g->B, g->H, g->Hkv, g->T,
                g->D);
    K->attention_eager_backward(dq, dk, dv, datt, dout, att, q, k, v, g);
    LP_OP_END();
}

void lp_attention_fused_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                                const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    assert(lp_attention_geom_check(g, "lp_attention_fused_forward") == LP_OK);
    assert(!g->segments || mask); /* sample ids live in the mask */
    const double BH = (double)g->B * g->H, tok = (double)g->B * g->T;
    LP_OP_BEGIN("lp::attention_fused_forward", 4.0 * BH * attn_pairs(g) * g->D,
                4.0 * (tok * (2 * g->H + 2 * g->Hkv) * g->D + BH * g->T), 5, g->B, g->H, g->Hkv, g->T, g->D);
    K->attention_fused_forward(out, lse, q, k, v, mask, g, drop);
    LP_OP_END();
}

void lp_attention_fused_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                 const float *lse, const float *q, const float *k, const float *v,
                                 const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    assert(lp_attention_geom_check(g, "lp_attention_fused_backward") == LP_OK);
    assert(!g->segments || mask); /* sample ids live in the mask */
    const double BH = (double)g->B * g->H, tok = (double)g->B * g->T;
    LP_OP_BEGIN("lp::attention_fused_backward", 10.0 * BH * attn_pairs(g) * g->D,
                4.0 * (tok * (4 * g->H + 4 * g->Hkv) * g->D + BH * g->T), 5, g->B, g->H, g->Hkv, g->T, g->D);
    K->attention_fused_backward(dq, dk, dv, dout, out, lse, q, k, v, mask, g, drop);
    LP_OP_END();
}

lp_status lp_attention_geom_check(const lp_attn_geom *g, const char *what)
{
    const char *w = what ? what : "attention";
    if (!g)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: no attention geometry", w);
    if (g->B < 1 || g->T < 1 || g->H < 1 || g->Hkv < 1 || g->D < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: attention shape B=%lld T=%lld H=%lld Hkv=%lld D=%lld needs all >= 1",
                      w, (long long)g->B, (long long)g->T, (long long)g->H, (long long)g->Hkv, (long long)g->D);
    if (g->H % g->Hkv)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: %lld query heads do not split into groups over %lld key/value heads",
                      w, (long long)g->H, (long long)g->Hkv);
    if (g->ldq < g->H * g->D || g->ldkv < g->Hkv * g->D)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: token strides ldq=%lld, ldkv=%lld are below H*D=%lld, Hkv*D=%lld", w,
                      (long long)g->ldq, (long long)g->ldkv, (long long)(g->H * g->D), (long long)(g->Hkv * g->D));
    if (g->window < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: sliding window %lld is negative (0 = none)", w, (long long)g->window);
    if (!(g->scale >= 0.0f) || isinf(g->scale))
        return lp_err(LP_STATUS_INVALID_ARG, "%s: attention scale %g is not a finite value >= 0 (0 = 1/sqrt(D))", w,
                      (double)g->scale);
    return LP_OK;
}

lp_status lp_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N,
                                   int64_t V, int32_t ignore_index)
{
    LP_OP_BEGIN("lp::cross_entropy_forward", 4.0 * N * V, 4.0 * (N * V + 2 * N), 2, N, V);
    lp_status st = K->cross_entropy_forward(loss, lse, logits, targets, N, V, ignore_index);
    LP_OP_END();
    return st;
}

void lp_cross_entropy_backward(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
                               int64_t N, int64_t V, int32_t ignore_index, float dloss)
{
    LP_OP_BEGIN("lp::cross_entropy_backward", 4.0 * N * V, 4.0 * (2 * N * V + 2 * N), 2, N, V);
    K->cross_entropy_backward(dlogits, logits, lse, targets, N, V, ignore_index, dloss);
    LP_OP_END();
}

void lp_adamw_step(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
                   double eps, double weight_decay, int64_t step)
{
    LP_OP_BEGIN("lp::adamw_step", 14.0 * n, 4.0 * 7 * n, 1, n);
    K->adamw_step(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
    LP_OP_END();
}

void lp_adamw_multi(const lp_adamw_tensor *t, int count, double lr, double beta1, double beta2, double eps,
                    int64_t step)
{
    if (!K->adamw_multi) {
        for (int i = 0; i < count; i++)
            lp_adamw_step(t[i].param, t[i].grad, t[i].m, t[i].v, t[i].n, lr, beta1, beta2, eps,
                          t[i].weight_decay, step);
        return;
    }
    int64_t total = 0;
    for (int i = 0; i < count; i++)
        total += t[i].n;
    LP_OP_BEGIN("lp::adamw_multi", 14.0 * total, 4.0 * 7 * total, 2, (int64_t)count, total);
    K->adamw_multi(t, count, lr, beta1, beta2, eps, step);
    LP_OP_END();
}

double lp_grad_sum_squares(float *const *grads, const int64_t *sizes, int n_tensors)
{
    int64_t total = 0;
    for (int i = 0; i < n_tensors; i++)
        total += sizes[i];
    LP_OP_BEGIN("lp::grad_norm", 2.0 * total, 4.0 * total, 1, total);
    double s = 0.0;
    for (int i = 0; i < n_tensors; i++)
        s += K->sum_squares(grads[i], sizes[i]);
    LP_OP_END();
    return s;
}

double lp_grad_norm(float *const *grads, const int64_t *sizes, int n_tensors)
{
    return sqrt(lp_grad_sum_squares(grads, sizes, n_tensors));
}

void lp_grad_scale(float *const *grads, const int64_t *sizes, int n_tensors, float s)
{
    int64_t total = 0;
    for (int i = 0; i < n_tensors; i++)
        total += sizes[i];
    LP_OP_BEGIN("lp::grad_clip_scale", 1.0 * total, 8.0 * total, 1, total);
    for (int i = 0; i < n_tensors; i++)
        K->scale(grads[i], sizes[i], s);
    LP_OP_END();
}

double lp_grad_clip(float *const *grads, const int64_t *sizes, int n_tensors, double max_norm)
{
    double norm = lp_grad_norm(grads, sizes, n_tensors);
    if (!isfinite(norm))
        return norm;
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        lp_grad_scale(grads, sizes, n_tensors, (float)coef);
    return norm;
}
