/* SiLU-gated MLP activation (Llama, Mistral, Qwen2): out = silu(gate) * up, with gate and
 * up strided by ld so they can be the two halves of one fused gate_up GEMM output.
 * silu(g) = g * s with s = 1 / (1 + exp(-g)): exp(-g) overflowing to inf gives s = 0, never
 * inf / inf, so every finite g (|g| up to 3e38) gives a finite result; the derivative is
 * taken as s * (1 + g * (1 - s)), which is 0 * (finite) rather than inf * 0 at the far
 * negative end. The optimized versions run lp_exp256 / lp_exp512 (rel. error ~2e-7). */
#include <math.h>

#include "cpu_kernels.h"
#include "simd.h"

/* The reference evaluates in double so it is the accurate side of every comparison. */
static inline double sigmoid1(double g)
{
    return 1.0 / (1.0 + exp(-g));
}

// out (N,F) =; gate, up (N, ld)
void lp_k_swiglu_forward_ref(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            double g = gate[n * ld + f];
            out[n * F + f] = (float)(g * sigmoid1(g) * up[n * ld + f]);
        }
}

// dgate, dup (N, ld) =; dout (N,F); gate, up (N, ld). dgate may be gate, dup may be up.
void lp_k_swiglu_backward_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                              int64_t N, int64_t F, int64_t ld)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            double g = gate[n * ld + f], u = up[n * ld + f], d = dout[n * F + f];
            double s = sigmoid1(g);
            dgate[n * ld + f] = (float)(d * u * (s * (1.0 + g * (1.0 - s))));
            dup[n * ld + f] = (float)(d * g * s);
        }
}

/* float versions for the tails of the vector loops (same formulas as the lanes) */
static inline float sig1f(float g)
{
    return 1.0f / (1.0f + expf(-g));
}

static void fwd_row(float *restrict o, const float *restrict g, const float *restrict u, int64_t F)
{
    int64_t f = 0;
#if defined(LP_HAVE_AVX512)
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; f < F; f += 16) {
        __mmask16 m = F - f >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (F - f)) - 1);
        __m512 gv = _mm512_maskz_loadu_ps(m, g + f);
        __m512 e = lp_exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(o + f, m, _mm512_mul_ps(_mm512_mul_ps(gv, s), _mm512_maskz_loadu_ps(m, u + f)));
    }
#elif defined(LP_HAVE_AVX2)
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; f + 8 <= F; f += 8) {
        __m256 gv = _mm256_loadu_ps(g + f);
        __m256 e = lp_exp256(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
        _mm256_storeu_ps(o + f, _mm256_mul_ps(_mm256_mul_ps(gv, s), _mm256_loadu_ps(u + f)));
    }
#endif
    for (; f < F; f++)
        o[f] = g[f] * sig1f(g[f]) * u[f];
}

void lp_k_swiglu_forward_opt(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld)
{
#pragma omp parallel for schedule(static) if (N * F >= LP_PAR_MIN)
    for (int64_t n = 0; n < N; n++)
        fwd_row(out + n * F, gate + n * ld, up + n * ld, F);
}

/* dg may be g and du may be u: every lane loads g and u before either store */
static void bwd_row(float *dg, float *du, const float *restrict d, const float *g, const float *u, int64_t F)
{
    int64_t f = 0;
#if defined(LP_HAVE_AVX512)
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; f < F; f += 16) {
        __mmask16 m = F - f >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (F - f)) - 1);
        __m512 gv = _mm512_maskz_loadu_ps(m, g + f), uv = _mm512_maskz_loadu_ps(m, u + f);
        __m512 dv = _mm512_maskz_loadu_ps(m, d + f);
        __m512 e = lp_exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
        __m512 ds = _mm512_mul_ps(s, _mm512_fmadd_ps(gv, _mm512_sub_ps(one, s), one));
        __m512 dgv = _mm512_mul_ps(_mm512_mul_ps(dv, uv), ds);
        __m512 duv = _mm512_mul_ps(dv, _mm512_mul_ps(gv, s));
        _mm512_mask_storeu_ps(dg + f, m, dgv);
        _mm512_mask_storeu_ps(du + f, m, duv);
    }
#elif defined(LP_HAVE_AVX2)
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; f + 8 <= F; f += 8) {
        __m256 gv = _mm256_loadu_ps(g + f), uv = _mm256_loadu_ps(u + f), dv = _mm256_loadu_ps(d + f);
        __m256 e = lp_exp256(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
        __m256 ds = _mm256_mul_ps(s, _mm256_fmadd_ps(gv, _mm256_sub_ps(one, s), one));
        __m256 dgv = _mm256_mul_ps(_mm256_mul_ps(dv, uv), ds);
        __m256 duv = _mm256_mul_ps(dv, _mm256_mul_ps(gv, s));
        _mm256_storeu_ps(dg + f, dgv);
        _mm256_storeu_ps(du + f, duv);
    }
#endif
    for (; f < F; f++) {
        float gf = g[f], uf = u[f], s = sig1f(gf);
        dg[f] = d[f] * uf * (s * (1.0f + gf * (1.0f - s)));
        du[f] = d[f] * (gf * s);
    }
}

void lp_k_swiglu_backward_opt(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                              int64_t N, int64_t F, int64_t ld)
{
#pragma omp parallel for schedule(static) if (N * F >= LP_PAR_MIN)
    for (int64_t n = 0; n < N; n++)
        bwd_row(dgate + n * ld, dup + n * ld, dout + n * F, gate + n * ld, up + n * ld, F);
}
