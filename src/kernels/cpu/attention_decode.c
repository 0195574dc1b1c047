/* KV-cache decoding: appending a step's keys and values to a layer's cache, and attention of
 * one query row per sequence against the cached columns (GQA, sliding window, padding holes).
 * The reference works in double, two passes per head; the optimized one walks the cache once
 * in key chunks with an online softmax, all query heads of a kv head together, so each cached
 * key and value is read once per step (decode is bound by those reads, not by arithmetic). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

/* Longest head the optimized kernel's stack tiles hold; loaders refuse larger heads for
 * generation (lp_model_kv_init). */
#define DEC_MAX_D 512
/* Keys per chunk: scores for a chunk stay in registers / L1 between the two passes. */
#define DEC_CHUNK 32

static int64_t col(const lp_kv_geom *g, int64_t b, int64_t kv, int64_t j)
{
    return ((b * g->Hkv + kv) * g->cap + j) * g->D;
}

static float dec_scale(const lp_kv_geom *g)
{
    return g->scale != 0.0f ? g->scale : 1.0f / sqrtf((float)g->D);
}

/* First visible column of the query at T-1 (before the padding mask). */
static int64_t first_col(const lp_kv_geom *g)
{
    return g->window > 0 && g->T - g->window > 0 ? g->T - g->window : 0;
}

/* ---- kv_write ----------------------------------------------------------------------------- */

void lp_k_kv_write_ref(void *kc, void *vc, const float *k, const float *v, const lp_kv_geom *g, int64_t t0, int64_t T)
{
    const int64_t KD = g->Hkv * g->D;
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < g->Hkv; h++)
                for (int64_t d = 0; d < g->D; d++) {
                    const int64_t src = (b * T + t) * KD + h * g->D + d, dst = col(g, b, h, t0 + t) + d;
                    if (g->f16) {
                        ((uint16_t *)kc)[dst] = lp_f32_to_f16(k[src]);
                        ((uint16_t *)vc)[dst] = lp_f32_to_f16(v[src]);
                    } else {
                        ((float *)kc)[dst] = k[src];
                        ((float *)vc)[dst] = v[src];
                    }
                }
}

static void to_f16(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) // round to nearest even, as lp_f32_to_f16
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
#endif
    for (; i < n; i++)
        dst[i] = lp_f32_to_f16(src[i]);
}

void lp_k_kv_write_opt(void *kc, void *vc, const float *k, const float *v, const lp_kv_geom *g, int64_t t0, int64_t T)
{
    const int64_t KD = g->Hkv * g->D, D = g->D;
#pragma omp parallel for collapse(2) schedule(static) if (g->B * T * KD > 65536)
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t h = 0; h < g->Hkv; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t src = (b * T + t) * KD + h * D, dst = col(g, b, h, t0 + t);
                if (g->f16) {
                    to_f16((uint16_t *)kc + dst, k + src, D);
                    to_f16((uint16_t *)vc + dst, v + src, D);
                } else {
                    memcpy((float *)kc + dst, k + src, (size_t)D * sizeof(float));
                    memcpy((float *)vc + dst, v + src, (size_t)D * sizeof(float));
                }
            }
}

/* ---- attention_decode: reference ------------------------------------------------------------ */

static double ref_at(const void *c, const lp_kv_geom *g, int64_t i)
{
    return g->f16 ? (double)lp_f16_to_f32(((const uint16_t *)c)[i]) : (double)((const float *)c)[i];
}

static double ref_score(const float *q, const void *kc, const lp_kv_geom *g, int64_t base)
{
    double s = 0.0;
    for (int64_t d = 0; d < g->D; d++)
        s += (double)q[d] * ref_at(kc, g, base + d);
    return s * (double)dec_scale(g);
}

void lp_k_attention_decode_ref(float *out, const float *q, const void *kc, const void *vc, const int32_t *mask,
                               const lp_kv_geom *g)
{
    const int64_t H = g->H, D = g->D, grp = H / g->Hkv, lo = first_col(g);
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *qh = q + (b * H + h) * D;
            float *o = out + (b * H + h) * D;
            double mx = -INFINITY;
            for (int64_t j = lo; j < g->T; j++)
                if (mask[b * g->cap + j]) {
                    double s = ref_score(qh, kc, g, col(g, b, h / grp, j));
                    mx = s > mx ? s : mx;
                }
            for (int64_t d = 0; d < D; d++)
                o[d] = 0.0f;
            if (mx == -INFINITY) // no visible column: 0, as the prefill kernels give
                continue;
            double sum = 0.0;
            for (int64_t j = lo; j < g->T; j++)
                if (mask[b * g->cap + j])
                    sum += exp(ref_score(qh, kc, g, col(g, b, h / grp, j)) - mx);
            for (int64_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t j = lo; j < g->T; j++)
                    if (mask[b * g->cap + j]) {
                        const int64_t c = col(g, b, h / grp, j);
                        acc += exp(ref_score(qh, kc, g, c) - mx) / sum * ref_at(vc, g, c + d);
                    }
                o[d] = (float)acc;
            }
        }
}

/* ---- attention_decode: optimized -------------------------------------------------------------- */

/* Row j of a cache as f32: a pointer into the cache itself, or converted into tmp (f16). */
static const float *row_f32(const void *c, const lp_kv_geom *g, int64_t at, float *tmp)
{
    if (!g->f16)
        return (const float *)c + at;
    const uint16_t *s = (const uint16_t *)c + at;
    int64_t d = 0;
#if defined(__F16C__)
    for (; d + 8 <= g->D; d += 8)
        _mm256_storeu_ps(tmp + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + d))));
#endif
    for (; d < g->D; d++)
        tmp[d] = lp_f16_to_f32(s[d]);
    return tmp;
}

void lp_k_attention_decode_opt(float *out, const float *q, const void *kc, const void *vc, const int32_t *mask,
                               const lp_kv_geom *g)
{
    const int64_t H = g->H, D = g->D, Hkv = g->Hkv, grp = H / Hkv, lo = first_col(g);
    const float scale = dec_scale(g);
    assert(D <= DEC_MAX_D && grp <= 64);
#pragma omp parallel for collapse(2) schedule(static) if (g->B * Hkv > 1 && g->T * D * grp > 4096)
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t kv = 0; kv < Hkv; kv++) {
            // running max, sum and scores per query head of the group; the (grp, D)
            // accumulators are the output rows themselves
            float m[64], l[64], s[64][DEC_CHUNK], tmp[DEC_MAX_D];
            const int32_t *mb = mask + b * g->cap;
            float *ob = out + (b * H + kv * grp) * D; // grp consecutive heads: (grp, D)
            const float *qb = q + (b * H + kv * grp) * D;
            for (int64_t hh = 0; hh < grp; hh++) {
                m[hh] = -INFINITY;
                l[hh] = 0.0f;
                for (int64_t d = 0; d < D; d++)
                    ob[hh * D + d] = 0.0f;
            }
            for (int64_t j0 = lo; j0 < g->T; j0 += DEC_CHUNK) {
                const int64_t n = g->T - j0 < DEC_CHUNK ? g->T - j0 : DEC_CHUNK;
                // scores of the chunk: each key row converted (f16) once for the whole group
                for (int64_t jj = 0; jj < n; jj++) {
                    if (!mb[j0 + jj]) {
                        for (int64_t hh = 0; hh < grp; hh++)
                            s[hh][jj] = -INFINITY;
                        continue;
                    }
                    const float *kr = row_f32(kc, g, col(g, b, kv, j0 + jj), tmp);
                    for (int64_t hh = 0; hh < grp; hh++) {
                        const float *qh = qb + hh * D;
                        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                        for (int64_t d = 0; d < D; d++)
                            dot += qh[d] * kr[d];
                        s[hh][jj] = dot * scale;
                    }
                }
                // online softmax: rescale what was summed so far to the new running max
                for (int64_t hh = 0; hh < grp; hh++) {
                    float cm = m[hh];
                    for (int64_t jj = 0; jj < n; jj++)
                        cm = s[hh][jj] > cm ? s[hh][jj] : cm;
                    if (cm == -INFINITY) // nothing visible yet
                        continue;
                    const float r = m[hh] == -INFINITY ? 0.0f : expf(m[hh] - cm);
                    if (r != 1.0f) {
                        l[hh] *= r;
                        for (int64_t d = 0; d < D; d++)
                            ob[hh * D + d] *= r;
                    }
                    m[hh] = cm;
                    for (int64_t jj = 0; jj < n; jj++) {
                        s[hh][jj] = s[hh][jj] == -INFINITY ? 0.0f : expf(s[hh][jj] - cm);
                        l[hh] += s[hh][jj];
                    }
                }
                for (int64_t jj = 0; jj < n; jj++) {
                    if (!mb[j0 + jj])
                        continue;
                    const float *vr = row_f32(vc, g, col(g, b, kv, j0 + jj), tmp);
                    for (int64_t hh = 0; hh < grp; hh++) {
                        const float p = s[hh][jj];
                        float *oh = ob + hh * D;
#pragma omp simd
                        for (int64_t d = 0; d < D; d++)
                            oh[d] += p * vr[d];
                    }
                }
            }
            for (int64_t hh = 0; hh < grp; hh++) {
                const float inv = l[hh] > 0.0f ? 1.0f / l[hh] : 0.0f; // no visible column: stays 0
                for (int64_t d = 0; d < D; d++)
                    ob[hh * D + d] *= inv;
            }
        }
}
