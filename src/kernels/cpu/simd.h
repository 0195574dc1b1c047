/* Private AVX2/FMA helpers for the optimized kernels: a vector exp (Cephes-style
 * range reduction + degree-5 polynomial, rel. error ~2e-7) and horizontal sums.
 * Without AVX2 the kernels use their scalar loops. */
#ifndef LP_SIMD_H
#define LP_SIMD_H

#include <math.h>
#include <stdint.h>

/* exp's constants, shared by the 8- and 16-lane versions (same results lane for lane): the
 * clamp range, log2(e), ln 2 split in two for an exact n*ln2, and the degree-5 polynomial p
 * with exp(r) = 1 + r + r^2 p(r) over |r| <= ln2/2. */
#define LP_EXP_HI 88.7228391f
#define LP_EXP_LO -87.3365448f
#define LP_EXP_LOG2E 1.44269504088896341f
#define LP_EXP_LN2_HI 0.693359375f
#define LP_EXP_LN2_LO -2.12194440e-4f
#define LP_EXP_C5 1.9875691500e-4f
#define LP_EXP_C4 1.3981999507e-3f
#define LP_EXP_C3 8.3334519073e-3f
#define LP_EXP_C2 4.1665795894e-2f
#define LP_EXP_C1 1.6666665459e-1f
#define LP_EXP_C0 5.0000001201e-1f

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LP_HAVE_AVX2 1

/* exp(x) for 8 floats; exactly 0 below -87.3 (where expf is denormal or 0), +inf above
 * 88.7, NaN stays NaN. */
/* e^xc = 2^n * e^r with n = round(xc log2 e), |r| <= ln2/2: the reduction and polynomial
 * every exp here shares; returns e^r, n in *n. */
static inline __m256 lp_exp_core256(__m256 xc, __m256 *n)
{
    *n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(LP_EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(*n, _mm256_set1_ps(LP_EXP_LN2_HI), xc);
    r = _mm256_fnmadd_ps(*n, _mm256_set1_ps(LP_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(LP_EXP_C5);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LP_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LP_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LP_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LP_EXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LP_EXP_C0));
    return _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
}

static inline __m256 lp_exp256(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(LP_EXP_HI), lo = _mm256_set1_ps(LP_EXP_LO);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    __m256 n, p = lp_exp_core256(_mm256_min_ps(_mm256_max_ps(x, lo), hi), &n);
    /* scale by 2^n; n in [-126, 128]: split so 2^n never overflows the exponent field */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_andnot_ps(under, y);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
    /* NaN in -> NaN out (the min/max above would have clamped it) */
    __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    return _mm256_blendv_ps(y, x, isnan);
}

/* lp_exp256 for x <= 0 or -inf (a value minus its row's max or log-sum-exp), without what
 * only large x needs (the overflow clamp, 2^n split in two): n >= -126 scales in one
 * multiply, and a rounding above 0 is still exact (2^n fits the exponent up to x ~ 87.9).
 * Exactly 0 below -87.3, as there; NaN stays NaN (the clamp keeps its NaN operand). */
static inline __m256 lp_exp_nonpos256(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(LP_EXP_LO);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 n, p = lp_exp_core256(_mm256_max_ps(lo, x), &n);
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static inline float lp_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float lp_hmax256(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* d[c * ldd + r] = s[r * lds + c] for r, c < 8: pairs (unpack), quads (shuffle_ps), then
 * 128-bit halves. */
static inline void lp_transpose8x8(const float *s, int64_t lds, float *d, int64_t ldd)
{
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(s + i * lds);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) { /* u[g + c], half L: column 4L + c, rows g..g+3 */
        u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
        u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(d + c * ldd, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
        _mm256_storeu_ps(d + (c + 4) * ldd, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
    }
}
#endif

#if defined(__AVX512F__)
#define LP_HAVE_AVX512 1
/* lp_exp256 on 16 floats (same reduction and polynomial, same results lane for lane). */
static inline __m512 lp_exp_core512(__m512 xc, __m512 *n)
{
    *n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(LP_EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(LP_EXP_LN2_HI), xc);
    r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(LP_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(LP_EXP_C5);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LP_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LP_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LP_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LP_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LP_EXP_C0));
    return _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
}

static inline __m512 lp_exp512(__m512 x)
{
    const __m512 hi = _mm512_set1_ps(LP_EXP_HI), lo = _mm512_set1_ps(LP_EXP_LO);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __mmask16 over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __m512 n, p = lp_exp_core512(_mm512_min_ps(_mm512_max_ps(x, lo), hi), &n);
    __m512i ni = _mm512_cvtps_epi32(n);
    __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, _mm512_set1_epi32(127)), 23));
    __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, _mm512_set1_epi32(127)), 23));
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    y = _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
    y = _mm512_mask_mov_ps(y, over, _mm512_set1_ps(INFINITY));
    return _mm512_mask_mov_ps(y, isnan, x);
}

/* lp_exp_nonpos256 on 16 floats. */
static inline __m512 lp_exp_nonpos512(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(LP_EXP_LO);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __m512 n, p = lp_exp_core512(_mm512_max_ps(lo, x), &n);
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps((__mmask16)~under, p, _mm512_castsi512_ps(e));
}
#endif

#endif
