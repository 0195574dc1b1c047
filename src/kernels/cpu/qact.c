/* Activations quantized per block for the integer dot products (see lp_q8a / lp_q8k in
 * cpu_kernels.h): d = max|x| / 127, q = round-to-nearest-even(x / d) clamped to
 * [-127, 127] (an all-zero block has d = 0 and q = 0); the int8 GEMM's rows the same with
 * 63 (LP_INT8_ACT_QMAX). The rounding error of each element
 * is at most d / 2: the bound the tests hold the quantized GEMM to. */
#include <math.h>

#include "qdot.h"

/* q (len) in [-qmax, qmax] from x, each byte stored as q + off (mod 256: off 128 or 64 makes
 * q unsigned for vpdpbusd / pmaddubsw); returns d = max|x| / qmax and the sum of q. */
static float quantize_run(int8_t *q, const float *x, int len, int32_t *sum, int qmax, uint8_t off)
{
    float amax = 0.0f;
#if defined(__AVX2__)
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < len; j += 8)
        m = _mm256_max_ps(m, _mm256_andnot_ps(signbit, _mm256_loadu_ps(x + j)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    amax = _mm_cvtss_f32(h);
#else
    for (int j = 0; j < len; j++)
        amax = fmaxf(amax, fabsf(x[j]));
#endif
    const float fq = (float)qmax, d = amax / fq, id = amax > 0.0f ? fq / amax : 0.0f;
    int32_t s = 0;
#if defined(__AVX2__)
    const __m256 vid = _mm256_set1_ps(id), lim = _mm256_set1_ps(fq);
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < len; j += 32) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vid);
            t = _mm256_max_ps(_mm256_min_ps(t, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
            v[k] = _mm256_cvtps_epi32(t); /* MXCSR default: nearest even */
            acc = _mm256_add_epi32(acc, v[k]);
        }
        /* pack 32 int32 to 32 int8 in element order (packs interleave the 128-bit lanes) */
        __m256i a = _mm256_packs_epi32(v[0], v[1]), b = _mm256_packs_epi32(v[2], v[3]);
        __m256i c = _mm256_packs_epi16(a, b);
        c = _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + j), _mm256_add_epi8(c, _mm256_set1_epi8((char)off)));
    }
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    t = _mm_hadd_epi32(t, t);
    t = _mm_hadd_epi32(t, t);
    s = _mm_cvtsi128_si32(t);
#else
    for (int j = 0; j < len; j++) {
        float v = nearbyintf(x[j] * id);
        v = v > fq ? fq : v < -fq ? -fq : v;
        s += (int32_t)v;
        q[j] = (int8_t)(uint8_t)((uint8_t)(int8_t)v + off);
    }
#endif
    *sum = s;
    return d;
}

void lp_k_quantize_q8a(lp_q8a *y, const float *x, int64_t n)
{
    for (int64_t b = 0; b < n / 32; b++) {
        int32_t s;
        y[b].d = quantize_run(y[b].q, x + 32 * b, 32, &s, 127, 0);
        y[b].s = y[b].d * (float)s;
    }
}

void lp_k_quantize_q8k(lp_q8k *y, const float *x, int64_t n)
{
    for (int64_t b = 0; b < n / 256; b++) {
        int32_t s;
        y[b].d = quantize_run(y[b].q, x + 256 * b, 256, &s, 127, 0);
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += y[b].q[16 * g + j];
            y[b].bsum[g] = (int16_t)sum;
        }
    }
}

float lp_k_quantize_i8(int8_t *q, const float *x, int64_t n, int qmax, uint8_t off)
{
    int32_t s;
    return quantize_run(q, x, (int)n, &s, qmax, off);
}
