/* Reference fused attention: one query row at a time, streaming over its visible keys with
 * an online softmax (running max m, running sum l, rescaled accumulator), saving only the
 * log-sum-exp; the backward recomputes each probability from q, k and lse. No scratch at
 * all (the output row is the accumulator), so it also serves the optimized kernels as
 * their fallback when their tile memory cannot be allocated. Dropout and the no-visible-key
 * rule as in attention_fused.c. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

/* z[c] = keep factor (0 or 1/(1-p)) of probability elements e0 .. e0+n-1 (lp_attn_dropout). */
void lp_k_attn_drop_factors(float *z, const lp_attn_dropout *d, int64_t e0, int64_t n)
{
    const float sd = 1.0f / (1.0f - d->p);
    for (int64_t c = 0; c < n;) {
        int64_t e = e0 + c + (int64_t)d->lane;
        uint32_t x[4];
        lp_rng_philox(d->seed, d->stream, d->offset + (uint64_t)(e >> 2), x);
        for (int lane = (int)(e & 3); lane < 4 && c < n; lane++, c++)
            z[c] = lp_rng_u01(x[lane]) >= d->p ? sd : 0.0f;
    }
}

/* Whether key j is visible to query i of row mb (lp_attn_geom). */
static inline bool visible(const lp_attn_geom *g, const int32_t *mb, int64_t i, int64_t j)
{
    int64_t lo, hi;
    lp_attn_key_range(g, i, &lo, &hi);
    return j >= lo && j < hi && lp_attn_mask_visible(g, mb, i, j);
}

// out (B,T,H*D) =; lse (B,H,T) =; q (B,T,H,D) stride ldq; k, v (B,T,Hkv,D) stride ldkv; mask (B,T)
void lp_k_attention_fused_forward_ref(float *out, float *lse, const float *q, const float *k, const float *v,
                                      const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    const int64_t B = g->B, T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D;
    const float scale = lp_attn_scale(g);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                const float *qi = q + (b * T + i) * g->ldq + h * D;
                float *o = out + (b * T + i) * C + h * D; /* the accumulator: no scratch, any D */
                float m = -INFINITY, l = 0.0f;
                for (int64_t d = 0; d < D; d++)
                    o[d] = 0.0f;
                for (int64_t j = 0; j < T; j++) {
                    if (!visible(g, mask ? mask + b * T : NULL, i, j))
                        continue;
                    const float *kj = k + (b * T + j) * g->ldkv + (h / grp) * D;
                    const float *vj = v + (b * T + j) * g->ldkv + (h / grp) * D;
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++)
                        s += qi[d] * kj[d];
                    s *= scale;
                    float mn = fmaxf(m, s);
                    float corr = expf(m - mn), p = expf(s - mn), z = 1.0f;
                    if (drop)
                        lp_k_attn_drop_factors(&z, drop, ((b * H + h) * T + i) * T + j, 1);
                    l = l * corr + p;
                    for (int64_t d = 0; d < D; d++)
                        o[d] = o[d] * corr + z * p * vj[d];
                    m = mn;
                }
                float inv = l > 0.0f ? 1.0f / l : 0.0f; /* no visible key: out stays 0 */
                for (int64_t d = 0; d < D; d++)
                    o[d] *= inv;
                lse[(b * H + h) * T + i] = l > 0.0f ? m + logf(l) : -INFINITY;
            }
}

// dq (B,T,H,D) stride ldq =; dk, dv (B,T,Hkv,D) stride ldkv = (summed over each group); dout, out (B,T,H*D); lse (B,H,T)
void lp_k_attention_fused_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                       const float *lse, const float *q, const float *k, const float *v,
                                       const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    const int64_t B = g->B, T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D;
    const float scale = lp_attn_scale(g);
    for (int64_t bt = 0; bt < B * T; bt++) {
        memset(dq + bt * g->ldq, 0, (size_t)C * sizeof(float));
        memset(dk + bt * g->ldkv, 0, (size_t)(g->Hkv * D) * sizeof(float));
        memset(dv + bt * g->ldkv, 0, (size_t)(g->Hkv * D) * sizeof(float));
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kvo = (h / grp) * D;
            for (int64_t i = 0; i < T; i++) {
                float li = lse[(b * H + h) * T + i];
                if (li == -INFINITY) /* sees no key: no gradient */
                    continue;
                const float *qi = q + (b * T + i) * g->ldq + h * D;
                const float *doi = dout + (b * T + i) * C + h * D, *oi = out + (b * T + i) * C + h * D;
                float di = 0.0f; /* rowsum(dout * out) = sum_j p_ij * dp_ij */
                for (int64_t d = 0; d < D; d++)
                    di += doi[d] * oi[d];
                float *dqi = dq + (b * T + i) * g->ldq + h * D;
                for (int64_t j = 0; j < T; j++) {
                    if (!visible(g, mask ? mask + b * T : NULL, i, j))
                        continue;
                    const float *kj = k + (b * T + j) * g->ldkv + kvo, *vj = v + (b * T + j) * g->ldkv + kvo;
                    float *dkj = dk + (b * T + j) * g->ldkv + kvo, *dvj = dv + (b * T + j) * g->ldkv + kvo;
                    float s = 0.0f, dp = 0.0f;
                    for (int64_t d = 0; d < D; d++) {
                        s += qi[d] * kj[d];
                        dp += doi[d] * vj[d];
                    }
                    float p = expf(s * scale - li), z = 1.0f;
                    if (drop)
                        lp_k_attn_drop_factors(&z, drop, ((b * H + h) * T + i) * T + j, 1);
                    float ds = p * (z * dp - di) * scale;
                    for (int64_t d = 0; d < D; d++) {
                        dvj[d] += z * p * doi[d];
                        dqi[d] += ds * kj[d];
                        dkj[d] += ds * qi[d];
                    }
                }
            }
        }
}
