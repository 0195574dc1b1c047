/* Private helpers of the GGML integer dot products (qdot_*.c, qact.c, qgemv_ggml.c): the
 * f16 scale load and the 8-bit dot-product steps, as VNNI dpbusd where the build targets
 * it (AVX-512 VNNI with VL, or AVX-VNNI) and as AVX2 maddubs + madd otherwise. */
#ifndef LP_QDOT_H
#define LP_QDOT_H

#include <stdint.h>
#include <string.h>

#include "cpu_kernels.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* The f16 at p (little-endian, any alignment) as f32. */
static inline float lp_qd_f16(const uint8_t *p)
{
#if defined(__F16C__)
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
#else
    return lp_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
#endif
}

/* The little-endian 32-bit word at p (any alignment): Q5_0 / Q5_1's fifth bits. */
static inline uint32_t lp_qd_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 6-bit scale and min of each of a K-quant block's 8 sub-blocks (Q4_K, Q5_K) from its
 * 12 packed bytes: sub-blocks 0-3 in the low 6 bits of bytes s and s+4, 4-7 in the nibbles
 * of bytes 8-11 with the top 2 bits of bytes 0-7 above them. */
static inline void lp_qd_k4_scales_mins(const uint8_t *sc, uint8_t *scale, uint8_t *min)
{
    for (int s = 0; s < 4; s++) {
        scale[s] = sc[s] & 63;
        min[s] = sc[s + 4] & 63;
        scale[s + 4] = (uint8_t)((sc[s + 8] & 0xF) | ((sc[s] >> 6) << 4));
        min[s + 4] = (uint8_t)((sc[s + 8] >> 4) | ((sc[s + 4] >> 6) << 4));
    }
}

#if defined(__AVX2__)
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define LP_QD_VNNI 1
#endif

static inline float lp_qd_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 int32 partial sums of u (32 x u8, each <= 128) times s (32 x i8). Without VNNI the
 * int16 pair sums of maddubs cannot saturate while u * s pairs stay within 2 * 128 * 127. */
static inline __m256i lp_qd_dot_u8i8(__m256i u, __m256i s)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* 8 int32 partial sums of x (32 x i8) times y (32 x i8, never -128): |x| times y with x's
 * sign moved onto y, so the unsigned-by-signed instructions apply. */
static inline __m256i lp_qd_dot_i8i8(__m256i x, __m256i y)
{
    return lp_qd_dot_u8i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* The 32 nibbles of 16 bytes as bytes: low nibbles first (elements 0..15), then the high
 * ones (16..31), the order of ggml's Q4_0 / Q4_1 blocks. */
static inline __m256i lp_qd_nibbles16(const uint8_t *p)
{
    __m128i r = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(r, 4), r);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}
#endif

/* Q4_K (fifth false: 144-byte blocks) or Q5_K (fifth: 176-byte blocks, 32 bytes of fifth
 * bits before the nibbles) weight blocks times Q8_K activation blocks:
 * sum = d d_a sum_s scale_s sum(q q_a) - dmin d_a sum_s min_s bsum_s, all sums integer.
 * fifth is a constant at each call, so each copy keeps only its own unpacking. */
static inline __attribute__((always_inline)) float lp_qd_dot_k45(int64_t nb, const uint8_t *w,
                                                                 const lp_q8k *a, bool fifth)
{
    float acc = 0.0f;
    const int64_t bytes = fifth ? 176 : 144;
#if defined(__AVX2__)
    __m256 vacc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
#endif
    for (int64_t b = 0; b < nb; b++, w += bytes) {
        uint8_t scale[8], min[8];
        lp_qd_k4_scales_mins(w + 4, scale, min);
        const uint8_t *qh = w + 16, *qs = w + (fifth ? 48 : 16);
        const int8_t *qa = a[b].q;
        int32_t msum = 0;
        for (int s = 0; s < 8; s++)
            msum += min[s] * (a[b].bsum[2 * s] + a[b].bsum[2 * s + 1]);
        const float d = lp_qd_f16(w) * a[b].d, dmin = lp_qd_f16(w + 2) * a[b].d;
        acc -= dmin * (float)msum;
#if defined(__AVX2__)
        const __m256i hbits = fifth ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) { /* 32 bytes: sub-block 2c in the low nibbles, 2c+1 high */
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            if (fifth) { /* bit 2c (2c+1) of each byte to 0x10: 16-bit shifts keep each byte's bits */
                lo = _mm256_or_si256(
                    lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one), 4));
                hi = _mm256_or_si256(
                    hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one), 4));
            }
            __m256i plo = lp_qd_dot_u8i8(lo, _mm256_loadu_si256((const __m256i *)(qa + 64 * c)));
            __m256i phi = lp_qd_dot_u8i8(hi, _mm256_loadu_si256((const __m256i *)(qa + 64 * c + 32)));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(plo, _mm256_set1_epi32(scale[2 * c])));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(phi, _mm256_set1_epi32(scale[2 * c + 1])));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), vacc);
#else
        int32_t isum = 0;
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            int32_t t = 0;
            for (int j = 0; j < 32; j++)
                t += (((q[j] >> shift) & 0xF) | (fifth ? ((qh[j] >> s) & 1) << 4 : 0)) * qa[32 * s + j];
            isum += scale[s] * t;
        }
        acc += d * (float)isum;
#endif
    }
#if defined(__AVX2__)
    acc += lp_qd_hsum(vacc);
#endif
    return acc;
}

#endif
