/* Row gather and scatter-add by index: pooling of one row per sequence (the last real token
 * of a decoder classifier, CLS, ...) and its backward, so nn/ and models/ keep no per-row
 * loops. Both are memory copies and adds the compiler vectorizes; the scatter splits columns
 * across threads, so repeated indices never race and add up in the reference's order. */
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

// out (n,C) =; x (rows,C); idx (n)
void lp_k_rows_gather_ref(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            out[i * C + c] = x[idx[i] * C + c];
}

void lp_k_rows_gather_opt(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C)
{
#pragma omp parallel for schedule(static) if (n * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        memcpy(out + i * C, x + idx[i] * C, (size_t)C * sizeof(float));
}

// dx (rows,C) +=; dout (n,C); idx (n)
void lp_k_rows_scatter_add_ref(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            dx[idx[i] * C + c] += dout[i * C + c];
}

void lp_k_rows_scatter_add_opt(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C)
{
#pragma omp parallel if (n * C >= LP_PAR_MIN && C >= 64)
    {
        int64_t lo, hi;
        lp_k_split(C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t i = 0; i < n; i++) {
            float *restrict d = dx + idx[i] * C;
            const float *restrict g = dout + i * C;
#pragma omp simd
            for (int64_t c = lo; c < hi; c++)
                d[c] += g[c];
        }
    }
}
