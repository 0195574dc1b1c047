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

#endif
