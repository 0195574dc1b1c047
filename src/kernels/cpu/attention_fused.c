/* Fused attention (flash-attention style): the forward streams over keys with an online
 * softmax (running max m, running sum l, rescaled accumulator) and saves only the
 * log-sum-exp per query row; the backward recomputes each score from q, k and lse. No
 * (B,H,T,T) buffer exists in either direction. The reference streams one key at a time;
 * the optimized version works on BQ x BK tiles held on the stack, one (batch, head) per
 * OpenMP task. */
#include <assert.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "simd.h"

#define BQ 32
#define BK 64

// out (B,T,H*D) =; lse (B,H,T) =; q, k, v (B,T,H,D) with token stride ld; mask (B,T)
void lp_k_attention_fused_forward_ref(float *out, float *lse, const float *q, const float *k, const float *v,
                                      const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
{
    assert(D <= LP_ATTN_MAX_D);
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
    float acc[LP_ATTN_MAX_D];
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                const float *qi = q + (b * T + i) * ld + h * D;
                float m = -INFINITY, l = 0.0f;
                for (int64_t d = 0; d < D; d++)
                    acc[d] = 0.0f;
                for (int64_t j = 0; j < T; j++) {
                    if (mask && !mask[b * T + j])
                        continue;
                    const float *kj = k + (b * T + j) * ld + h * D, *vj = v + (b * T + j) * ld + h * D;
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++)
                        s += qi[d] * kj[d];
                    s *= scale;
                    float mn = fmaxf(m, s);
                    float corr = expf(m - mn), p = expf(s - mn);
                    l = l * corr + p;
                    for (int64_t d = 0; d < D; d++)
                        acc[d] = acc[d] * corr + p * vj[d];
                    m = mn;
                }
                float *o = out + (b * T + i) * C + h * D;
                for (int64_t d = 0; d < D; d++)
                    o[d] = acc[d] / l;
                lse[(b * H + h) * T + i] = m + logf(l);
            }
}

// dq, dk, dv (B,T,H,D) stride ld =; dout, out (B,T,H*D); lse (B,H,T)
void lp_k_attention_fused_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                       const float *lse, const float *q, const float *k, const float *v,
                                       const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
{
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++) {
                    int64_t o = (b * T + t) * ld + h * D + d;
                    dq[o] = dk[o] = dv[o] = 0.0f;
                }
            for (int64_t i = 0; i < T; i++) {
                const float *qi = q + (b * T + i) * ld + h * D;
                const float *doi = dout + (b * T + i) * C + h * D, *oi = out + (b * T + i) * C + h * D;
                float di = 0.0f; /* rowsum(dout * out) = sum_j p_ij * dp_ij */
                for (int64_t d = 0; d < D; d++)
                    di += doi[d] * oi[d];
                float li = lse[(b * H + h) * T + i];
                float *dqi = dq + (b * T + i) * ld + h * D;
                for (int64_t j = 0; j < T; j++) {
                    if (mask && !mask[b * T + j])
                        continue;
                    const float *kj = k + (b * T + j) * ld + h * D, *vj = v + (b * T + j) * ld + h * D;
                    float *dkj = dk + (b * T + j) * ld + h * D, *dvj = dv + (b * T + j) * ld + h * D;
                    float s = 0.0f, dp = 0.0f;
                    for (int64_t d = 0; d < D; d++) {
                        s += qi[d] * kj[d];
                        dp += doi[d] * vj[d];
                    }
                    float p = expf(s * scale - li);
                    float ds = p * (dp - di) * scale;
                    for (int64_t d = 0; d < D; d++) {
                        dvj[d] += p * doi[d];
                        dqi[d] += ds * kj[d];
                        dkj[d] += ds * qi[d];
                    }
                }
            }
        }
}

/* S (nq,BK) = A (nq,D) @ Bt (D,BK): rows of A against a transposed, packed key tile. */
static inline void tile_qkt(float S[BQ][BK], const float A[BQ][LP_ATTN_MAX_D], const float Bt[][BK], int64_t nq,
                            int64_t D)
{
    for (int64_t r = 0; r < nq; r++) {
        float acc[BK] = {0};
        for (int64_t d = 0; d < D; d++) {
            float a = A[r][d];
#pragma omp simd
            for (int c = 0; c < BK; c++)
                acc[c] += a * Bt[d][c];
        }
        memcpy(S[r], acc, sizeof acc);
    }
}

/* Packs rows [j0, j0+nk) of a (T,D) head slice with stride ld as Dt (D, BK), zero-padded. */
static inline void pack_t(float Dt[][BK], const float *x, int64_t ld, int64_t j0, int64_t nk, int64_t D)
{
    for (int64_t c = 0; c < BK; c++) {
        if (c < nk) {
            const float *row = x + (j0 + c) * ld;
            for (int64_t d = 0; d < D; d++)
                Dt[d][c] = row[d];
        } else {
            for (int64_t d = 0; d < D; d++)
                Dt[d][c] = 0.0f;
        }
    }
}

static inline void exp_row(float *x, int64_t n)
{
    int64_t c = 0;
#ifdef LP_HAVE_AVX2
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(x + c, lp_exp256(_mm256_loadu_ps(x + c)));
#endif
    for (; c < n; c++)
        x[c] = expf(x[c]);
}

typedef struct fused_tiles {
    float Qs[BQ][LP_ATTN_MAX_D];   /* query tile (scaled in the forward) */
    float dO[BQ][LP_ATTN_MAX_D];   /* dout tile (backward) */
    float acc[BQ][LP_ATTN_MAX_D];  /* output or dq accumulator */
    float Kt[LP_ATTN_MAX_D][BK];   /* keys, transposed */
    float Vt[LP_ATTN_MAX_D][BK];   /* values, transposed (backward) */
    float S[BQ][BK], P2[BQ][BK];
} fused_tiles;

/* Per-thread tile storage: too large for a worker's stack under sanitizers, and reused
 * across the (batch, head) tasks of one thread. */
static _Thread_local fused_tiles tiles_tls __attribute__((aligned(64)));

void lp_k_attention_fused_forward_opt(float *out, float *lse, const float *q, const float *k, const float *v,
                                      const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
{
    assert(D <= LP_ATTN_MAX_D);
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
#pragma omp parallel for schedule(dynamic, 1) collapse(2)
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t i0 = 0; i0 < T; i0 += BQ) {
            fused_tiles *w = &tiles_tls;
            int64_t b = bh / H, h = bh % H;
            int64_t nq = T - i0 < BQ ? T - i0 : BQ;
            const float *kb = k + b * T * ld + h * D, *vb = v + b * T * ld + h * D;
            const int32_t *mb = mask ? mask + b * T : NULL;
            float m[BQ], l[BQ];
            for (int64_t r = 0; r < nq; r++) {
                const float *qr = q + (b * T + i0 + r) * ld + h * D;
                for (int64_t d = 0; d < D; d++) {
                    w->Qs[r][d] = qr[d] * scale;
                    w->acc[r][d] = 0.0f;
                }
                m[r] = -INFINITY;
                l[r] = 0.0f;
            }
            for (int64_t j0 = 0; j0 < T; j0 += BK) {
                int64_t nk = T - j0 < BK ? T - j0 : BK;
                pack_t(w->Kt, kb, ld, j0, nk, D);
                tile_qkt(w->S, w->Qs, w->Kt, nq, D);
                for (int64_t r = 0; r < nq; r++) {
                    float *s = w->S[r];
                    for (int64_t c = 0; c < BK; c++)
                        if (c >= nk || (mb && !mb[j0 + c]))
                            s[c] = -INFINITY;
                    float mx = m[r];
                    for (int64_t c = 0; c < nk; c++)
                        mx = fmaxf(mx, s[c]);
                    if (mx == -INFINITY) /* every key so far is padding: nothing to add */
                        continue;
                    float corr = expf(m[r] - mx);
                    for (int64_t c = 0; c < nk; c++)
                        s[c] -= mx;
                    exp_row(s, nk);
                    float sum = 0.0f;
                    for (int64_t c = 0; c < nk; c++)
                        sum += s[c];
                    l[r] = l[r] * corr + sum;
                    m[r] = mx;
                    float *a = w->acc[r];
#pragma omp simd
                    for (int64_t d = 0; d < D; d++)
                        a[d] *= corr;
                    for (int64_t c = 0; c < nk; c++) {
                        float p = s[c];
                        const float *vr = vb + (j0 + c) * ld;
#pragma omp simd
                        for (int64_t d = 0; d < D; d++)
                            a[d] += p * vr[d];
                    }
                }
            }
            for (int64_t r = 0; r < nq; r++) {
                float *o = out + (b * T + i0 + r) * C + h * D;
                float inv = 1.0f / l[r];
                for (int64_t d = 0; d < D; d++)
                    o[d] = w->acc[r][d] * inv;
                lse[bh * T + i0 + r] = m[r] + logf(l[r]);
            }
        }
}

void lp_k_attention_fused_backward_opt(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                       const float *lse, const float *q, const float *k, const float *v,
                                       const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
{
    assert(D <= LP_ATTN_MAX_D);
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
    /* One (batch, head) per task: dk and dv of a head get contributions from every query
     * block, so splitting queries across threads would need atomics. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; bh++) {
        fused_tiles *w = &tiles_tls;
        int64_t b = bh / H, h = bh % H;
        int64_t off = b * T * ld + h * D;
        const float *qb = q + off, *kb = k + off, *vb = v + off;
        float *dqb = dq + off, *dkb = dk + off, *dvb = dv + off;
        const int32_t *mb = mask ? mask + b * T : NULL;
        for (int64_t t = 0; t < T; t++) {
            memset(dkb + t * ld, 0, (size_t)D * sizeof(float));
            memset(dvb + t * ld, 0, (size_t)D * sizeof(float));
        }
        for (int64_t i0 = 0; i0 < T; i0 += BQ) {
            int64_t nq = T - i0 < BQ ? T - i0 : BQ;
            float Di[BQ], L[BQ];
            for (int64_t r = 0; r < nq; r++) {
                const float *qr = qb + (i0 + r) * ld;
                const float *dor = dout + (b * T + i0 + r) * C + h * D, *orow = out + (b * T + i0 + r) * C + h * D;
                float s = 0.0f;
                for (int64_t d = 0; d < D; d++) {
                    w->Qs[r][d] = qr[d];
                    w->dO[r][d] = dor[d];
                    w->acc[r][d] = 0.0f;
                    s += dor[d] * orow[d];
                }
                Di[r] = s;
                L[r] = lse[bh * T + i0 + r];
            }
            for (int64_t j0 = 0; j0 < T; j0 += BK) {
                int64_t nk = T - j0 < BK ? T - j0 : BK;
                pack_t(w->Kt, kb, ld, j0, nk, D);
                pack_t(w->Vt, vb, ld, j0, nk, D);
                tile_qkt(w->S, w->Qs, w->Kt, nq, D);  /* raw scores */
                tile_qkt(w->P2, w->dO, w->Vt, nq, D); /* dp = dout . v */
                for (int64_t r = 0; r < nq; r++) {
                    float *s = w->S[r], *dp = w->P2[r];
                    for (int64_t c = 0; c < nk; c++)
                        s[c] = s[c] * scale - L[r];
                    exp_row(s, nk); /* p */
                    for (int64_t c = 0; c < nk; c++) {
                        if (mb && !mb[j0 + c])
                            s[c] = 0.0f;
                        dp[c] = s[c] * (dp[c] - Di[r]) * scale; /* ds */
                    }
                }
                for (int64_t c = 0; c < nk; c++) {
                    float *dvr = dvb + (j0 + c) * ld, *dkr = dkb + (j0 + c) * ld;
                    for (int64_t r = 0; r < nq; r++) {
                        float p = w->S[r][c], ds = w->P2[r][c];
                        const float *dor = w->dO[r], *qr = w->Qs[r];
#pragma omp simd
                        for (int64_t d = 0; d < D; d++) {
                            dvr[d] += p * dor[d];
                            dkr[d] += ds * qr[d];
                        }
                    }
                }
                for (int64_t r = 0; r < nq; r++) {
                    float *a = w->acc[r];
                    for (int64_t c = 0; c < nk; c++) {
                        float ds = w->P2[r][c];
                        const float *kr = kb + (j0 + c) * ld;
#pragma omp simd
                        for (int64_t d = 0; d < D; d++)
                            a[d] += ds * kr[d];
                    }
                }
            }
            for (int64_t r = 0; r < nq; r++)
                memcpy(dqb + (i0 + r) * ld, w->acc[r], (size_t)D * sizeof(float));
        }
    }
}
