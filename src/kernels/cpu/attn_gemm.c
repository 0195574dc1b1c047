/* Attention as GEMMs (../attn_gemm.h): the composition, plain C over a backend's steps, and
 * the CPU's steps, which hold it to attention_fused_ref.c in every build. Orchestration:
 * compiled once (lp_kernels_once), no SIMD. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../attn_gemm.h"
#include "../backend.h"
#include "cpu_kernels.h"

size_t lp_attn_gemm_scratch_bytes(const lp_attn_geom *g, bool backward)
{
    const size_t q = (size_t)(g->B * g->H * g->T * g->D), kv = (size_t)(g->B * g->Hkv * g->T * g->D);
    const size_t s = (size_t)(g->B * g->H) * (size_t)g->T * (size_t)g->T;
    /* forward: Qh (reused for Oh), Kh, Vh, S; backward: Qh, Kh, Vh, dOh, S, dP */
    return (backward ? 2 * q + 2 * kv + 2 * s : q + 2 * kv + s) * sizeof(float);
}

/* the buffers of one call, freed together */
typedef struct bufs {
    const lp_attn_gemm_ops *ops;
    float *p[6];
    int n;
} bufs;

static float *take(bufs *b, int64_t n, const char *what)
{
    float *p = b->ops->alloc(b->ops->ctx, (size_t)n * sizeof(float), what);
    if (p)
        b->p[b->n++] = p;
    return p;
}

static void release(bufs *b)
{
    for (int i = 0; i < b->n; i++)
        b->ops->free(b->ops->ctx, b->p[i]);
    b->n = 0;
}

/* S (per (b, kv head): grp*T rows of queries x T keys) = scale Qh Kh^T */
static lp_status scores(const lp_attn_gemm_ops *o, float *S, const float *Qh, const float *Kh, const lp_attn_geom *g)
{
    const int64_t T = g->T, D = g->D, grp = g->H / g->Hkv;
    return o->gemm(o->ctx, false, true, grp * T, T, D, lp_attn_scale(g), Qh, D, grp * T * D, Kh, D, T * D, 0.0f, S,
                   T, grp * T * T, g->B * g->Hkv);
}

lp_status lp_attn_gemm_forward(const lp_attn_gemm_ops *o, float *out, float *lse, const float *q, const float *k,
                               const float *v, const int32_t *mask, const lp_attn_geom *g,
                               const lp_attn_dropout *drop)
{
    lp_status st = lp_attention_geom_check(g, "attention (GEMMs)");
    if (st != LP_OK)
        return st;
    const int64_t B = g->B, T = g->T, H = g->H, Hkv = g->Hkv, D = g->D, grp = H / Hkv;
    bufs b = {.ops = o};
    float *Qh = take(&b, B * H * T * D, "attention q (heads)"), *Kh = Qh ? take(&b, B * Hkv * T * D, "attention k (heads)") : NULL;
    float *Vh = Kh ? take(&b, B * Hkv * T * D, "attention v (heads)") : NULL;
    float *S = Vh ? take(&b, B * H * T * T, "attention scores") : NULL;
    if (!S) {
        release(&b);
        return LP_STATUS_NO_MEMORY; /* lp_err: the allocator's */
    }
    o->to_heads(Qh, q, B, T, H, D, g->ldq);
    o->to_heads(Kh, k, B, T, Hkv, D, g->ldkv);
    o->to_heads(Vh, v, B, T, Hkv, D, g->ldkv);
    st = scores(o, S, Qh, Kh, g);
    if (st == LP_OK) {
        o->softmax_forward(S, lse, mask, g, drop);
        /* Oh (in Qh, no longer read) = (z P) Vh, per (b, kv head) */
        st = o->gemm(o->ctx, false, false, grp * T, D, T, 1.0f, S, T, grp * T * T, Vh, D, T * D, 0.0f, Qh, D,
                     grp * T * D, B * Hkv);
    }
    if (st == LP_OK)
        o->from_heads(out, Qh, B, T, H, D, H * D);
    release(&b);
    return st;
}

lp_status lp_attn_gemm_backward(const lp_attn_gemm_ops *o, float *dq, float *dk, float *dv, const float *dout,
                                const float *out, const float *lse, const float *q, const float *k, const float *v,
                                const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    lp_status st = lp_attention_geom_check(g, "attention backward (GEMMs)");
    if (st != LP_OK)
        return st;
    const int64_t B = g->B, T = g->T, H = g->H, Hkv = g->Hkv, D = g->D, grp = H / Hkv, BK = B * Hkv;
    bufs b = {.ops = o};
    float *Qh = take(&b, B * H * T * D, "attention q (heads)"), *dOh = Qh ? take(&b, B * H * T * D, "attention dout (heads)") : NULL;
    float *Kh = dOh ? take(&b, B * Hkv * T * D, "attention k (heads)") : NULL;
    float *Vh = Kh ? take(&b, B * Hkv * T * D, "attention v (heads)") : NULL;
    float *S = Vh ? take(&b, B * H * T * T, "attention scores") : NULL;
    float *dP = S ? take(&b, B * H * T * T, "attention score gradients") : NULL;
    if (!dP) {
        release(&b);
        return LP_STATUS_NO_MEMORY;
    }
    o->to_heads(Qh, q, B, T, H, D, g->ldq);
    o->to_heads(Kh, k, B, T, Hkv, D, g->ldkv);
    o->to_heads(Vh, v, B, T, Hkv, D, g->ldkv);
    o->to_heads(dOh, dout, B, T, H, D, H * D);
    st = scores(o, S, Qh, Kh, g); /* the forward's GEMM: the same scores lse was taken over */
    if (st == LP_OK) /* dP = dOh Vh^T */
        st = o->gemm(o->ctx, false, true, grp * T, T, D, 1.0f, dOh, D, grp * T * D, Vh, D, T * D, 0.0f, dP, T,
                     grp * T * T, BK);
    if (st == LP_OK) {
        o->softmax_backward(S, dP, dout, out, lse, mask, g, drop); /* S = z P, dP = dS */
        /* dVh (in Vh) = (z P)^T dOh: the group's heads summed by the GEMM's K = grp*T */
        st = o->gemm(o->ctx, true, false, T, D, grp * T, 1.0f, S, T, grp * T * T, dOh, D, grp * T * D, 0.0f, Vh, D,
                     T * D, BK);
    }
    if (st == LP_OK) /* dQh (in dOh, read last by the GEMM above) = dS Kh */
        st = o->gemm(o->ctx, false, false, grp * T, D, T, 1.0f, dP, T, grp * T * T, Kh, D, T * D, 0.0f, dOh, D,
                     grp * T * D, BK);
    if (st == LP_OK) /* dKh (in Kh, read last by the GEMM above) = dS^T Qh */
        st = o->gemm(o->ctx, true, false, T, D, grp * T, 1.0f, dP, T, grp * T * T, Qh, D, grp * T * D, 0.0f, Kh, D,
                     T * D, BK);
    if (st == LP_OK) {
        o->from_heads(dq, dOh, B, T, H, D, g->ldq);
        o->from_heads(dk, Kh, B, T, Hkv, D, g->ldkv);
        o->from_heads(dv, Vh, B, T, Hkv, D, g->ldkv);
    }
    release(&b);
    return st;
}

/* ---- the CPU's steps ---------------------------------------------------------------------- */

void lp_attn_gemm_to_heads_cpu(float *xh, const float *x, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hx; h++)
            for (int64_t t = 0; t < T; t++)
                memcpy(xh + ((b * Hx + h) * T + t) * D, x + (b * T + t) * ld + h * D, (size_t)D * sizeof(float));
}

void lp_attn_gemm_from_heads_cpu(float *x, const float *xh, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hx; h++)
            for (int64_t t = 0; t < T; t++)
                memcpy(x + (b * T + t) * ld + h * D, xh + ((b * Hx + h) * T + t) * D, (size_t)D * sizeof(float));
}

/* Whether key j is visible to query i of row mb (NULL: no mask). */
static bool visible(const lp_attn_geom *g, const int32_t *mb, int64_t i, int64_t j)
{
    int64_t lo, hi;
    lp_attn_key_range(g, i, &lo, &hi);
    return j >= lo && j < hi && lp_attn_mask_visible(g, mb, i, j);
}

void lp_attn_gemm_softmax_forward_cpu(float *s, float *lse, const int32_t *mask, const lp_attn_geom *g,
                                      const lp_attn_dropout *drop)
{
    const int64_t T = g->T, H = g->H;
    for (int64_t r = 0; r < g->B * H * T; r++) { /* r = (b H + h) T + i */
        const int64_t b = r / (H * T), i = r % T;
        const int32_t *mb = mask ? mask + b * T : NULL;
        float *row = s + r * T;
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j < T; j++)
            if (visible(g, mb, i, j))
                m = fmaxf(m, row[j]);
        for (int64_t j = 0; j < T; j++)
            if (visible(g, mb, i, j))
                l += expf(row[j] - m);
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t j = 0; j < T; j++) {
            float z = 1.0f;
            const bool vis = l > 0.0f && visible(g, mb, i, j);
            if (vis && drop)
                lp_k_attn_drop_factors(&z, drop, r * T + j, 1);
            row[j] = vis ? z * (expf(row[j] - m) * inv) : 0.0f;
        }
        lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
    }
}

void lp_attn_gemm_softmax_backward_cpu(float *s, float *dp, const float *dout, const float *out, const float *lse,
                                       const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    const int64_t T = g->T, H = g->H, D = g->D, C = H * D;
    const float scale = lp_attn_scale(g);
    for (int64_t r = 0; r < g->B * H * T; r++) {
        const int64_t b = r / (H * T), h = (r / T) % H, i = r % T;
        const int32_t *mb = mask ? mask + b * T : NULL;
        const float *doi = dout + (b * T + i) * C + h * D, *oi = out + (b * T + i) * C + h * D;
        float di = 0.0f;
        for (int64_t d = 0; d < D; d++)
            di += doi[d] * oi[d];
        const float li = lse[r];
        float *srow = s + r * T, *drow = dp + r * T;
        for (int64_t j = 0; j < T; j++) {
            float pz = 0.0f, ds = 0.0f;
            if (li != -INFINITY && visible(g, mb, i, j)) {
                const float p = expf(srow[j] - li);
                float z = 1.0f;
                if (drop)
                    lp_k_attn_drop_factors(&z, drop, r * T + j, 1);
                pz = z * p;
                ds = p * (z * drow[j] - di) * scale;
            }
            srow[j] = pz;
            drow[j] = ds;
        }
    }
}

static void *cpu_alloc(void *ctx, size_t bytes, const char *what)
{
    (void)ctx;
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        lp_err(LP_STATUS_NO_MEMORY, "attention (GEMMs): %zu bytes for %s", bytes, what);
    return p;
}

static void cpu_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static lp_status cpu_gemm(void *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                          int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta, float *C,
                          int64_t ldc, int64_t sc, int64_t batch)
{
    const lp_kernel_table *t = ctx;
    for (int64_t i = 0; i < batch; i++)
        t->sgemm(ta, tb, M, N, K, alpha, A + i * sa, lda, B + i * sb, ldb, beta, C + i * sc, ldc);
    return LP_OK;
}

lp_attn_gemm_ops lp_attn_gemm_ops_cpu(const lp_kernel_table *sgemm_table)
{
    return (lp_attn_gemm_ops){
        .ctx = (void *)(sgemm_table ? sgemm_table : lp_kernels_table(LP_KERNELS_IMPL_REF)),
        .alloc = cpu_alloc,
        .free = cpu_free,
        .gemm = cpu_gemm,
        .to_heads = lp_attn_gemm_to_heads_cpu,
        .from_heads = lp_attn_gemm_from_heads_cpu,
        .softmax_forward = lp_attn_gemm_softmax_forward_cpu,
        .softmax_backward = lp_attn_gemm_softmax_backward_cpu,
    };
}

/* ---- which path runs (backend.h: the CUDA table's and the stand-in device's choice) ---------- */

lp_status lp_cuda_attn_mode_env(lp_cuda_attn_mode *mode)
{
    const char *e = getenv("LP_CUDA_ATTN");
    *mode = LP_CUDA_ATTN_AUTO;
    if (!e || !*e || !strcmp(e, "auto"))
        return LP_OK;
    if (!strcmp(e, "fused"))
        *mode = LP_CUDA_ATTN_FUSED;
    else if (!strcmp(e, "gemm"))
        *mode = LP_CUDA_ATTN_GEMM;
    else
        return lp_err(LP_STATUS_INVALID_ARG, "cuda: LP_CUDA_ATTN=%s is not auto, fused or gemm", e);
    return LP_OK;
}

bool lp_cuda_attn_gemm_chosen(lp_cuda_attn_mode mode, bool tf32, const lp_attn_geom *g)
{
    if (mode != LP_CUDA_ATTN_AUTO)
        return mode == LP_CUDA_ATTN_GEMM;
    const double score_mib = (double)g->B * (double)g->H * (double)g->T * (double)g->T * 4.0 / 1048576.0;
    return tf32 && g->T <= LP_CUDA_ATTN_GEMM_MAX_T && score_mib <= LP_CUDA_ATTN_GEMM_MAX_MIB;
}
