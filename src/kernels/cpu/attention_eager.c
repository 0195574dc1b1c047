/* Eager attention: scores = q k^T * scale, visibility mask (padding, samples, causal, window),
 * softmax, @ v, with the (B,H,T,T) probabilities stored for the backward. The optimized
 * version runs each (batch, head) as a task on the OpenMP pool and calls BLAS inside it
 * (OpenBLAS then runs single-threaded: our partitioning, one pool). With GQA the kv heads'
 * gradients are sums over their query heads, so those products run per (batch, kv head). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

void lp_k_softmax_row(float *out, const float *x, int64_t C);

/* Sets the invisible entries of score row i (keys outside [lo, hi) or padded) to -inf;
 * returns how many stay visible. mb: the row's mask (T) or NULL. */
static int64_t mask_row(float *row, const lp_attn_geom *g, const int32_t *mb, int64_t i)
{
    int64_t lo, hi, n = 0;
    lp_attn_key_range(g, i, &lo, &hi);
    for (int64_t j = 0; j < g->T; j++) {
        if (j < lo || j >= hi || !lp_attn_mask_visible(g, mb, i, j))
            row[j] = -INFINITY;
        else
            n++;
    }
    return n;
}

// q (B,T,H,D) stride ldq; k, v (B,T,Hkv,D) stride ldkv; mask (B,T) or NULL; out (B,T,H*D) =; att (B,H,T,T) =
void lp_k_attention_eager_forward_ref(float *out, float *att, const float *q, const float *k, const float *v,
                                      const int32_t *mask, const lp_attn_geom *g)
{
    const int64_t B = g->B, T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D;
    const float scale = lp_attn_scale(g);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                const float *qi = q + (b * T + i) * g->ldq + h * D;
                const int64_t kvo = (h / grp) * D;
                float *a = att + ((b * H + h) * T + i) * T;
                float *o = out + (b * T + i) * C + h * D;
                for (int64_t j = 0; j < T; j++) {
                    const float *kj = k + (b * T + j) * g->ldkv + kvo;
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        s += (double)qi[d] * kj[d];
                    a[j] = (float)s * scale;
                }
                if (mask_row(a, g, mask ? mask + b * T : NULL, i) == 0) { /* sees no key: 0, not NaN */
                    memset(a, 0, (size_t)T * sizeof(float));
                    memset(o, 0, (size_t)D * sizeof(float));
                    continue;
                }
                float m = -INFINITY;
                for (int64_t j = 0; j < T; j++)
                    m = fmaxf(m, a[j]);
                double sum = 0.0;
                for (int64_t j = 0; j < T; j++)
                    sum += exp((double)a[j] - m);
                for (int64_t j = 0; j < T; j++)
                    a[j] = (float)(exp((double)a[j] - m) / sum);
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < T; j++)
                        acc += (double)a[j] * v[(b * T + j) * g->ldkv + kvo + d];
                    o[d] = (float)acc;
                }
            }
}

void lp_k_attention_eager_forward_opt(float *out, float *att, const float *q, const float *k, const float *v,
                                      const int32_t *mask, const lp_attn_geom *g)
{
    const int64_t T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D;
    const float scale = lp_attn_scale(g);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < g->B * H; bh++) {
        int64_t b = bh / H, h = bh % H;
        const float *qb = q + b * T * g->ldq + h * D;
        const float *kb = k + b * T * g->ldkv + (h / grp) * D, *vb = v + b * T * g->ldkv + (h / grp) * D;
        float *a = att + bh * T * T;
        // a (T,T) = scale * q (T,D) @ k^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)D, scale, qb, (int)g->ldq, kb,
                    (int)g->ldkv, 0.0f, a, (int)T);
        const int32_t *mb = mask ? mask + b * T : NULL;
        if (g->causal || g->window > 0 || g->segments) {
            for (int64_t i = 0; i < T; i++) {
                float *row = a + i * T;
                if (mask_row(row, g, mb, i) == 0)
                    memset(row, 0, (size_t)T * sizeof(float)); /* sees no key: p = 0, out = 0 */
                else
                    lp_k_softmax_row(row, row, T);
            }
        } else { /* padding only: every query of the row sees the same keys */
            int64_t seen = T;
            if (mb)
                for (int64_t j = 0; j < T; j++)
                    seen -= !mb[j];
            for (int64_t i = 0; i < T; i++) {
                float *row = a + i * T;
                if (mb)
                    for (int64_t j = 0; j < T; j++)
                        if (!mb[j])
                            row[j] = -INFINITY;
                if (seen == 0)
                    memset(row, 0, (size_t)T * sizeof(float));
                else
                    lp_k_softmax_row(row, row, T);
            }
        }
        // out (T,D) = a (T,T) @ v (T,D)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, a, (int)T, vb,
                    (int)g->ldkv, 0.0f, out + b * T * C + h * D, (int)C);
    }
}

// dq (B,T,H,D) stride ldq =; dk, dv (B,T,Hkv,D) stride ldkv = (summed over each group);
// datt (B,H,T,T) scratch; dout (B,T,H*D); att (B,H,T,T)
void lp_k_attention_eager_backward_ref(float *dq, float *dk, float *dv, float *datt, const float *dout,
                                       const float *att, const float *q, const float *k, const float *v,
                                       const lp_attn_geom *g)
{
    const int64_t B = g->B, T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D;
    const int64_t ldq = g->ldq, ldkv = g->ldkv;
    const float scale = lp_attn_scale(g);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t e = 0; e < g->Hkv * D; e++)
                dk[(b * T + t) * ldkv + e] = dv[(b * T + t) * ldkv + e] = 0.0f;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *a = att + (b * H + h) * T * T;
            float *da = datt + (b * H + h) * T * T;
            const int64_t kvo = (h / grp) * D;
            for (int64_t i = 0; i < T; i++) {
                const float *doi = dout + (b * T + i) * C + h * D;
                // datt = dout @ v^T, then through the softmax
                double dot = 0.0;
                for (int64_t j = 0; j < T; j++) {
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        s += (double)doi[d] * v[(b * T + j) * ldkv + kvo + d];
                    da[i * T + j] = (float)s;
                    dot += s * a[i * T + j];
                }
                for (int64_t j = 0; j < T; j++)
                    da[i * T + j] = (float)(a[i * T + j] * (da[i * T + j] - dot)) * scale;
            }
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++) {
                    double sq = 0.0, sk = 0.0, sv = 0.0;
                    for (int64_t j = 0; j < T; j++) {
                        sq += (double)da[t * T + j] * k[(b * T + j) * ldkv + kvo + d];
                        sk += (double)da[j * T + t] * q[(b * T + j) * ldq + h * D + d];
                        sv += (double)a[j * T + t] * dout[(b * T + j) * C + h * D + d];
                    }
                    dq[(b * T + t) * ldq + h * D + d] = (float)sq;
                    dk[(b * T + t) * ldkv + kvo + d] += (float)sk;
                    dv[(b * T + t) * ldkv + kvo + d] += (float)sv;
                }
        }
}

/* datt (T,T) = dout (T,D) @ v^T through the softmax, scaled: the score gradient of head
 * bh; then dq (T,D) = dscores @ k. */
static void eager_dscores_dq(float *dq, float *datt, const float *dout, const float *att, const float *k,
                             const float *v, const lp_attn_geom *g, int64_t bh)
{
    const int64_t T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D;
    const int64_t b = bh / H, h = bh % H, kvo = b * T * g->ldkv + (h / grp) * D;
    const float scale = lp_attn_scale(g);
    const float *a = att + bh * T * T, *dob = dout + b * T * C + h * D;
    float *da = datt + bh * T * T;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)D, 1.0f, dob, (int)C, v + kvo,
                (int)g->ldkv, 0.0f, da, (int)T);
    for (int64_t i = 0; i < T; i++) {
        const float *restrict ar = a + i * T;
        float *restrict dr = da + i * T;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < T; j++)
            dot += ar[j] * dr[j];
#pragma omp simd
        for (int64_t j = 0; j < T; j++)
            dr[j] = ar[j] * (dr[j] - dot) * scale;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, da, (int)T, k + kvo,
                (int)g->ldkv, 0.0f, dq + b * T * g->ldq + h * D, (int)g->ldq);
}

/* dv (T,D) = sum over the group of att^T @ dout; dk = sum of dscores^T @ q, for kv head bg. */
static void eager_dkv(float *dk, float *dv, const float *datt, const float *dout, const float *att, const float *q,
                      const lp_attn_geom *g, int64_t bg)
{
    const int64_t T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D;
    const int64_t b = bg / g->Hkv, kvo = b * T * g->ldkv + (bg % g->Hkv) * D;
    for (int64_t hh = 0; hh < grp; hh++) {
        const int64_t h = (bg % g->Hkv) * grp + hh, bh = b * H + h;
        const float beta = hh ? 1.0f : 0.0f; /* the first head overwrites, the rest add */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, att + bh * T * T, (int)T,
                    dout + b * T * C + h * D, (int)C, beta, dv + kvo, (int)g->ldkv);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, datt + bh * T * T, (int)T,
                    q + b * T * g->ldq + h * D, (int)g->ldq, beta, dk + kvo, (int)g->ldkv);
    }
}

void lp_k_attention_eager_backward_opt(float *dq, float *dk, float *dv, float *datt, const float *dout,
                                       const float *att, const float *q, const float *k, const float *v,
                                       const lp_attn_geom *g)
{
    if (g->H == g->Hkv) { /* MHA: one task per head does all five products (datt stays in cache) */
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t bh = 0; bh < g->B * g->H; bh++) {
            eager_dscores_dq(dq, datt, dout, att, k, v, g, bh);
            eager_dkv(dk, dv, datt, dout, att, q, g, bh);
        }
        return;
    }
    /* GQA: dscores and dq per query head (B*H tasks), then the kv heads' sums (B*Hkv) */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < g->B * g->H; bh++)
        eager_dscores_dq(dq, datt, dout, att, k, v, g, bh);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bg = 0; bg < g->B * g->Hkv; bg++)
        eager_dkv(dk, dv, datt, dout, att, q, g, bg);
}
