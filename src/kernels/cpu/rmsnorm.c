/* RMSNorm over the last dimension (transformers' LlamaRMSNorm / Qwen2RMSNorm in float32:
 * no mean subtraction, no bias, eps inside the square root). The forward saves 1/rms per row
 * for the backward. The optimized rows use explicit AVX-512 or AVX2 loops (two accumulators
 * each, so both widths keep their FMA units busy on a row of a few hundred floats). */
#include <math.h>
#include <omp.h>

#include "cpu_kernels.h"
#include "simd.h"

// out (N,C) =; rstd (N) =; inp (N,C); weight (C)
void lp_k_rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *weight, int64_t N,
                              int64_t C, float eps)
{
    for (int64_t i = 0; i < N; i++) {
        const float *x = inp + i * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++)
            ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / (double)C + (double)eps));
        /* transformers' order: (x * rstd) rounded to float, then weight * that */
        for (int64_t c = 0; c < C; c++) {
            float xn = x[c] * r;
            out[i * C + c] = weight[c] * xn;
        }
        rstd[i] = r;
    }
}

/* sum of x[c]^2 over one row */
static inline float row_sumsq(const float *restrict x, int64_t C)
{
    int64_t c = 0;
    float s = 0.0f;
#if defined(LP_HAVE_AVX512)
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; c + 32 <= C; c += 32) {
        __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
        a0 = _mm512_fmadd_ps(x0, x0, a0);
        a1 = _mm512_fmadd_ps(x1, x1, a1);
    }
    if (c < C) { /* the rest in at most two masked loads */
        for (; c < C; c += 16) {
            __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);
            __m512 x0 = _mm512_maskz_loadu_ps(m, x + c);
            a0 = _mm512_fmadd_ps(x0, x0, a0);
        }
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#elif defined(LP_HAVE_AVX2)
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; c + 16 <= C; c += 16) {
        __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
        a0 = _mm256_fmadd_ps(x0, x0, a0);
        a1 = _mm256_fmadd_ps(x1, x1, a1);
    }
    if (c + 8 <= C) {
        __m256 x0 = _mm256_loadu_ps(x + c);
        a0 = _mm256_fmadd_ps(x0, x0, a0);
        c += 8;
    }
    s = lp_hsum256(_mm256_add_ps(a0, a1));
#endif
    for (; c < C; c++)
        s += x[c] * x[c];
    return s;
}

/* o[c] = w[c] * (x[c] * r) */
static inline void row_scale(float *restrict o, const float *restrict x, const float *restrict w, float r,
                             int64_t C)
{
    int64_t c = 0;
#if defined(LP_HAVE_AVX512)
    __m512 rv = _mm512_set1_ps(r);
    for (; c < C; c += 16) {
        __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);
        __m512 xn = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + c), rv);
        _mm512_mask_storeu_ps(o + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + c), xn));
    }
#elif defined(LP_HAVE_AVX2)
    __m256 rv = _mm256_set1_ps(r);
    for (; c + 8 <= C; c += 8)
        _mm256_storeu_ps(o + c,
                         _mm256_mul_ps(_mm256_loadu_ps(w + c), _mm256_mul_ps(_mm256_loadu_ps(x + c), rv)));
#endif
    for (; c < C; c++)
        o[c] = w[c] * (x[c] * r);
}

void lp_k_rmsnorm_forward_opt(float *out, float *rstd, const float *inp, const float *weight, int64_t N,
                              int64_t C, float eps)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        float r = 1.0f / sqrtf(row_sumsq(inp + i * C, C) / (float)C + eps);
        row_scale(out + i * C, inp + i * C, weight, r, C);
        rstd[i] = r;
    }
}

// dinp (N,C) =; dweight (C) +=; dout, inp (N,C); weight (C); rstd (N). dinp may alias dout.
void lp_k_rmsnorm_backward_ref(float *dinp, float *dweight, const float *dout, const float *inp,
                               const float *weight, const float *rstd, int64_t N, int64_t C)
{
    for (int64_t i = 0; i < N; i++) {
        const float *x = inp + i * C, *d = dout + i * C;
        double r = rstd[i], dot = 0.0;
        for (int64_t c = 0; c < C; c++)
            dot += (double)d[c] * weight[c] * x[c];
        double k = r * r * r * dot / (double)C;
        for (int64_t c = 0; c < C; c++) {
            double dc = d[c]; /* read before dinp (which may be dout) is written */
            if (dweight)
                dweight[c] += (float)(dc * x[c] * r);
            dinp[i * C + c] = (float)(r * dc * weight[c] - k * x[c]);
        }
    }
}

/* sum of d[c] * w[c] * x[c] over one row */
static inline float row_dot3(const float *restrict d, const float *restrict w, const float *restrict x,
                             int64_t C)
{
    int64_t c = 0;
    float s = 0.0f;
#if defined(LP_HAVE_AVX512)
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; c + 32 <= C; c += 32) {
        a0 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(d + c), _mm512_loadu_ps(w + c)),
                             _mm512_loadu_ps(x + c), a0);
        a1 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(d + c + 16), _mm512_loadu_ps(w + c + 16)),
                             _mm512_loadu_ps(x + c + 16), a1);
    }
    for (; c < C; c += 16) {
        __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);
        a0 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, d + c), _mm512_maskz_loadu_ps(m, w + c)),
                             _mm512_maskz_loadu_ps(m, x + c), a0);
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#elif defined(LP_HAVE_AVX2)
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; c + 16 <= C; c += 16) {
        a0 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(d + c), _mm256_loadu_ps(w + c)),
                             _mm256_loadu_ps(x + c), a0);
        a1 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(d + c + 8), _mm256_loadu_ps(w + c + 8)),
                             _mm256_loadu_ps(x + c + 8), a1);
    }
    if (c + 8 <= C) {
        a0 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(d + c), _mm256_loadu_ps(w + c)),
                             _mm256_loadu_ps(x + c), a0);
        c += 8;
    }
    s = lp_hsum256(_mm256_add_ps(a0, a1));
#endif
    for (; c < C; c++)
        s += d[c] * w[c] * x[c];
    return s;
}

/* di[c] = r * d[c] * w[c] - k * x[c]; di may be d */
static inline void row_dinp(float *di, const float *d, const float *restrict w, const float *restrict x,
                            float r, float k, int64_t C)
{
    int64_t c = 0;
#if defined(LP_HAVE_AVX512)
    __m512 rv = _mm512_set1_ps(r), kv = _mm512_set1_ps(k);
    for (; c < C; c += 16) {
        __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);
        __m512 g = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, d + c), rv),
                                 _mm512_maskz_loadu_ps(m, w + c));
        _mm512_mask_storeu_ps(di + c, m, _mm512_fnmadd_ps(kv, _mm512_maskz_loadu_ps(m, x + c), g));
    }
#elif defined(LP_HAVE_AVX2)
    __m256 rv = _mm256_set1_ps(r), kv = _mm256_set1_ps(k);
    for (; c + 8 <= C; c += 8) {
        __m256 g = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(d + c), rv), _mm256_loadu_ps(w + c));
        _mm256_storeu_ps(di + c, _mm256_fnmadd_ps(kv, _mm256_loadu_ps(x + c), g));
    }
#endif
    for (; c < C; c++)
        di[c] = d[c] * r * w[c] - k * x[c];
}

void lp_k_rmsnorm_backward_opt(float *dinp, float *dweight, const float *dout, const float *inp,
                               const float *weight, const float *rstd, int64_t N, int64_t C)
{
    int par = N * C >= LP_PAR_MIN;
    /* Pass 1, the weight gradient first (dinp may be dout), columns split across threads:
     * each element has one owner, summed over rows in order. */
    if (dweight) {
#pragma omp parallel if (par)
        {
            int64_t lo, hi;
            lp_k_split(C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
            for (int64_t i = 0; i < N; i++) {
                const float *restrict x = inp + i * C, *restrict d = dout + i * C;
                float r = rstd[i];
#pragma omp simd
                for (int64_t c = lo; c < hi; c++)
                    dweight[c] += d[c] * (x[c] * r);
            }
        }
    }
    /* Pass 2, rows in parallel: one reduction, then the row is written. */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t i = 0; i < N; i++) {
        const float *x = inp + i * C, *d = dout + i * C;
        float r = rstd[i];
        float k = r * r * r * row_dot3(d, weight, x, C) / (float)C;
        row_dinp(dinp + i * C, d, weight, x, r, k, C);
    }
}
