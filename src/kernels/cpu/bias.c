/* Bias add (broadcast over rows) and its gradient (column sums). The optimized
 * gradient splits columns across threads so each sum has one owner: no atomics and the
 * same summation order as the reference. */
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

// out (N,C) += bias (C)
void lp_k_bias_add_forward_ref(float *out, const float *bias, int64_t N, int64_t C)
{
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++)
            out[i * C + c] += bias[c];
}

void lp_k_bias_add_forward_opt(float *out, const float *bias, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        float *restrict o = out + i * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++)
            o[c] += bias[c];
    }
}

// out (N,C) = bias (C) broadcast over rows
void lp_k_bias_broadcast_ref(float *out, const float *bias, int64_t N, int64_t C)
{
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++)
            out[i * C + c] = bias[c];
}

void lp_k_bias_broadcast_opt(float *out, const float *bias, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++)
        memcpy(out + i * C, bias, (size_t)C * sizeof(float));
}

// dbias (C) += sum over rows of dout (N,C)
void lp_k_bias_backward_ref(float *dbias, const float *dout, int64_t N, int64_t C)
{
    for (int64_t c = 0; c < C; c++) {
        float s = 0.0f;
        for (int64_t i = 0; i < N; i++)
            s += dout[i * C + c];
        dbias[c] += s;
    }
}

void lp_k_bias_backward_opt(float *dbias, const float *dout, int64_t N, int64_t C)
{
#pragma omp parallel if (N * C >= LP_PAR_MIN)
    {
        int64_t lo, hi;
        lp_k_split(C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        /* Rows outer, columns inner: streams through dout and vectorizes over c, while
         * keeping the per-column order of additions identical to the reference. */
        float acc[256];
        for (int64_t c0 = lo; c0 < hi; c0 += 256) {
            int64_t w = hi - c0 < 256 ? hi - c0 : 256;
            for (int64_t c = 0; c < w; c++)
                acc[c] = 0.0f;
            for (int64_t i = 0; i < N; i++) {
                const float *restrict d = dout + i * C + c0;
#pragma omp simd
                for (int64_t c = 0; c < w; c++)
                    acc[c] += d[c];
            }
            for (int64_t c = 0; c < w; c++)
                dbias[c0 + c] += acc[c];
        }
    }
}
