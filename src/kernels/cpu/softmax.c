/* Row softmax forward and backward (max-subtracted, so large logits are safe). */
#include <math.h>
#include <omp.h>

#include "cpu_kernels.h"
#include "simd.h"

// out (N,C) = softmax over C of inp (N,C)
void lp_k_softmax_forward_ref(float *out, const float *inp, int64_t N, int64_t C)
{
    for (int64_t i = 0; i < N; i++) {
        const float *x = inp + i * C;
        float m = -INFINITY;
        for (int64_t c = 0; c < C; c++)
            m = fmaxf(m, x[c]);
        double s = 0.0;
        for (int64_t c = 0; c < C; c++)
            s += exp((double)x[c] - m);
        for (int64_t c = 0; c < C; c++)
            out[i * C + c] = (float)(exp((double)x[c] - m) / s);
    }
}

/* One row: out = softmax(x). Shared with the eager attention kernel. */
void lp_k_softmax_row(float *out, const float *x, int64_t C);
void lp_k_softmax_row(float *out, const float *x, int64_t C)
{
    float m = -INFINITY;
    int64_t c = 0;
#ifdef LP_HAVE_AVX2
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; c + 8 <= C; c += 8)
        vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + c));
    m = lp_hmax256(vm);
#endif
    for (; c < C; c++)
        m = fmaxf(m, x[c]);
    float s = 0.0f;
    c = 0;
#ifdef LP_HAVE_AVX2
    __m256 vs = _mm256_setzero_ps(), vmax = _mm256_set1_ps(m);
    for (; c + 8 <= C; c += 8) {
        __m256 e = lp_exp_nonpos256(_mm256_sub_ps(_mm256_loadu_ps(x + c), vmax));
        _mm256_storeu_ps(out + c, e);
        vs = _mm256_add_ps(vs, e);
    }
    s = lp_hsum256(vs);
#endif
    for (; c < C; c++) {
        out[c] = expf(x[c] - m);
        s += out[c];
    }
    float inv = 1.0f / s;
#pragma omp simd
    for (int64_t j = 0; j < C; j++)
        out[j] *= inv;
}

void lp_k_softmax_forward_opt(float *out, const float *inp, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++)
        lp_k_softmax_row(out + i * C, inp + i * C, C);
}

// dinp (N,C) = out * (dout - sum(dout * out)); out (N,C) from the forward
void lp_k_softmax_backward_ref(float *dinp, const float *dout, const float *out, int64_t N, int64_t C)
{
    for (int64_t i = 0; i < N; i++) {
        double dot = 0.0;
        for (int64_t c = 0; c < C; c++)
            dot += (double)dout[i * C + c] * out[i * C + c];
        for (int64_t c = 0; c < C; c++)
            dinp[i * C + c] = (float)(out[i * C + c] * (dout[i * C + c] - dot));
    }
}

void lp_k_softmax_backward_opt(float *dinp, const float *dout, const float *out, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        const float *restrict d = dout + i * C, *restrict y = out + i * C;
        float *restrict di = dinp + i * C;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < C; c++)
            dot += d[c] * y[c];
#pragma omp simd
        for (int64_t c = 0; c < C; c++)
            di[c] = y[c] * (d[c] - dot);
    }
}
