/* GELU, exact (erf) and tanh-approximated, forward and backward. The optimized
 * versions evaluate erf/tanh with AVX2 polynomials (erf: Abramowitz & Stegun 7.1.26,
 * abs. error < 1.5e-7; the tanh form as a sigmoid through the vector exp), which the tests
 * bound against libm; with AVX-512 the erf form (BERT's and DistilBERT's) runs 16 lanes. */
#include <math.h>
#include <omp.h>

#include "cpu_kernels.h"
#include "simd.h"

#define SQRT1_2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f
/* Abramowitz & Stegun 7.1.26, shared by the 8- and 16-lane versions:
 * erf(z) = 1 - t (A1 + t (A2 + t (A3 + t (A4 + t A5)))) exp(-z^2), t = 1 / (1 + ERF_P z), z >= 0 */
#define ERF_P 0.3275911f
#define ERF_A1 0.254829592f
#define ERF_A2 -0.284496736f
#define ERF_A3 1.421413741f
#define ERF_A4 -1.453152027f
#define ERF_A5 1.061405429f

/* The reference evaluates in double so it is the accurate side of every comparison. */
static inline float gelu1(float xf, lp_gelu_kind kind)
{
    double x = xf;
    if (kind == LP_GELU_KIND_TANH) {
        double u = GELU_K * (x + GELU_A * x * x * x);
        return (float)(0.5 * x * (1.0 + tanh(u)));
    }
    return (float)(0.5 * x * (1.0 + erf(x * SQRT1_2)));
}

static inline float dgelu1(float xf, lp_gelu_kind kind)
{
    double x = xf;
    if (kind == LP_GELU_KIND_TANH) {
        double u = GELU_K * (x + GELU_A * x * x * x);
        double t = tanh(u);
        double du = GELU_K * (1.0 + 3.0 * GELU_A * x * x);
        return (float)(0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
    return (float)(0.5 * (1.0 + erf(x * SQRT1_2)) + x * INV_SQRT_2PI * exp(-0.5 * x * x));
}

// out (n) = gelu(inp (n))
void lp_k_gelu_forward_ref(float *out, const float *inp, int64_t n, lp_gelu_kind kind)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = gelu1(inp[i], kind);
}

// dinp (n) = dout * gelu'(inp)
void lp_k_gelu_backward_ref(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind)
{
    for (int64_t i = 0; i < n; i++)
        dinp[i] = dout[i] * dgelu1(inp[i], kind);
}

#ifdef LP_HAVE_AVX2
/* The erf form on 8 lanes, the same operations as gelu_erf512: erf(z) = sign(z) (1 - t poly(t)
 * exp(-z^2)), t = 1 / (1 + p|z|), z = x / sqrt(2); exp(-z^2) is also the exp(-x^2 / 2) of the
 * derivative's density, so the backward evaluates one exp, not two; its argument is never
 * positive, so the exp without the overflow half (a quarter of the forward's time). Returns
 * gelu(x); gelu'(x) in *d when d != NULL. */
static inline __m256 gelu_erf256(__m256 x, __m256 *d)
{
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f);
    __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(SQRT1_2));
    __m256 az = _mm256_andnot_ps(sign, z);
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(ERF_P), az, one));
    __m256 p = _mm256_set1_ps(ERF_A5);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERF_A4));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERF_A3));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERF_A2));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERF_A1));
    p = _mm256_mul_ps(p, t);
    __m256 e = lp_exp_nonpos256(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(az, az)));
    __m256 erf = _mm256_or_ps(_mm256_fnmadd_ps(p, e, one), _mm256_and_ps(sign, z));
    __m256 cdf = _mm256_mul_ps(half, _mm256_add_ps(one, erf));
    if (d)
        *d = _mm256_fmadd_ps(x, _mm256_mul_ps(_mm256_set1_ps(INV_SQRT_2PI), e), cdf);
    return _mm256_mul_ps(x, cdf);
}

/* Returns gelu(x) and, when d != NULL, gelu'(x) in *d. */
static inline __m256 gelu256(__m256 x, lp_gelu_kind kind, __m256 *d)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    if (kind == LP_GELU_KIND_TANH) {
        /* 0.5 * (1 + tanh(u)) = s = sigmoid(2u), 1 - tanh(u)^2 = 4 s (1 - s), and
         * 1 - s = e * s with e = exp(-2u): no cancellation in either tail. Past |x| = 10
         * tanh(u) is +-1 in float, so s and the slope are taken at x clamped to [-10, 10]
         * (x^3 overflowed from |x| ~ 1e13 on: inf * 0 = NaN in the slope) and the output
         * is x above 10, 0 below -10 (x * s would scale a huge x by a tiny s). */
        const __m256 lim = _mm256_set1_ps(10.0f);
        __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
        __m256 x2 = _mm256_mul_ps(xc, xc);
        __m256 u = _mm256_mul_ps(_mm256_set1_ps(GELU_K), _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_A), x2), xc, xc));
        __m256 e = lp_exp256(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u)); /* <= exp(87.3): finite */
        __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
        if (d) {
            __m256 du = _mm256_mul_ps(_mm256_set1_ps(GELU_K), _mm256_fmadd_ps(_mm256_set1_ps(3.0f * GELU_A), x2, one));
            __m256 oms = _mm256_mul_ps(e, s);
            *d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), xc), _mm256_mul_ps(s, oms)), du, s);
        }
        __m256 below = _mm256_cmp_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), lim), _CMP_LT_OQ);
        return _mm256_andnot_ps(below, _mm256_mul_ps(x, s));
    }
    return gelu_erf256(x, d);
}
#endif

#ifdef LP_HAVE_AVX512
/* The erf form on 16 lanes: erf256's polynomial; exp(-z^2) with z = x/sqrt(2) is also the
 * exp(-x^2/2) of the derivative's density. Returns gelu(x); gelu'(x) in *d when d != NULL. */
static inline __m512 gelu_erf512(__m512 x, __m512 *d)
{
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(SQRT1_2));
    __m512 az = _mm512_abs_ps(z);
    __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(ERF_P), az, one));
    __m512 p = _mm512_set1_ps(ERF_A5);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(ERF_A4));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(ERF_A3));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(ERF_A2));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(ERF_A1));
    p = _mm512_mul_ps(p, t);
    __m512 e = lp_exp_nonpos512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(az, az)));
    __m512 r = _mm512_fnmadd_ps(p, e, one);
    __m512 erf = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(r), _mm512_and_si512(_mm512_castps_si512(z), sign)));
    __m512 cdf = _mm512_mul_ps(half, _mm512_add_ps(one, erf));
    if (d)
        *d = _mm512_fmadd_ps(x, _mm512_mul_ps(_mm512_set1_ps(INV_SQRT_2PI), e), cdf);
    return _mm512_mul_ps(x, cdf);
}
#endif

void lp_k_gelu_forward_opt(float *out, const float *inp, int64_t n, lp_gelu_kind kind)
{
    int64_t nv = 0;
#ifdef LP_HAVE_AVX512
    if (kind == LP_GELU_KIND_ERF) {
        int64_t nw = n / 16;
#pragma omp parallel for schedule(static) if (n >= LP_PAR_MIN)
        for (int64_t b = 0; b < nw; b++)
            _mm512_storeu_ps(out + 16 * b, gelu_erf512(_mm512_loadu_ps(inp + 16 * b), NULL));
        for (int64_t i = nw * 16; i < n; i++)
            out[i] = gelu1(inp[i], kind);
        return;
    }
#endif
#ifdef LP_HAVE_AVX2
    nv = n / 8;
#pragma omp parallel for schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t b = 0; b < nv; b++)
        _mm256_storeu_ps(out + 8 * b, gelu256(_mm256_loadu_ps(inp + 8 * b), kind, NULL));
#endif
    for (int64_t i = nv * 8; i < n; i++)
        out[i] = gelu1(inp[i], kind);
}

void lp_k_gelu_backward_opt(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind)
{
    int64_t nv = 0;
#ifdef LP_HAVE_AVX512
    if (kind == LP_GELU_KIND_ERF) {
        int64_t nw = n / 16;
#pragma omp parallel for schedule(static) if (n >= LP_PAR_MIN)
        for (int64_t b = 0; b < nw; b++) {
            __m512 d;
            (void)gelu_erf512(_mm512_loadu_ps(inp + 16 * b), &d);
            _mm512_storeu_ps(dinp + 16 * b, _mm512_mul_ps(_mm512_loadu_ps(dout + 16 * b), d));
        }
        for (int64_t i = nw * 16; i < n; i++)
            dinp[i] = dout[i] * dgelu1(inp[i], kind);
        return;
    }
#endif
#ifdef LP_HAVE_AVX2
    nv = n / 8;
#pragma omp parallel for schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t b = 0; b < nv; b++) {
        __m256 d;
        (void)gelu256(_mm256_loadu_ps(inp + 8 * b), kind, &d);
        _mm256_storeu_ps(dinp + 8 * b, _mm256_mul_ps(_mm256_loadu_ps(dout + 8 * b), d));
    }
#endif
    for (int64_t i = nv * 8; i < n; i++)
        dinp[i] = dout[i] * dgelu1(inp[i], kind);
}
