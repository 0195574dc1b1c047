/* LayerNorm over the last dimension (torch.nn.LayerNorm: biased variance, eps inside the
 * square root). The forward saves mean and 1/std per row for the backward. */
#include <math.h>
#include <omp.h>

#include "cpu_kernels.h"

// out (N,C) =; mean, rstd (N) =; inp (N,C); weight, bias (C)
void lp_k_layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                                const float *bias, int64_t N, int64_t C, float eps)
{
    for (int64_t i = 0; i < N; i++) {
        const float *x = inp + i * C;
        double m = 0.0;
        for (int64_t c = 0; c < C; c++)
            m += x[c];
        m /= (double)C;
        double v = 0.0;
        for (int64_t c = 0; c < C; c++)
            v += ((double)x[c] - m) * ((double)x[c] - m);
        v /= (double)C;
        float s = (float)(1.0 / sqrt(v + (double)eps));
        for (int64_t c = 0; c < C; c++)
            out[i * C + c] = ((x[c] - (float)m) * s) * weight[c] + bias[c];
        mean[i] = (float)m;
        rstd[i] = s;
    }
}

void lp_k_layernorm_forward_opt(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                                const float *bias, int64_t N, int64_t C, float eps)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        const float *restrict x = inp + i * C;
        float *restrict o = out + i * C;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < C; c++)
            sum += x[c];
        float m = sum / (float)C;
        float var = 0.0f;
#pragma omp simd reduction(+ : var)
        for (int64_t c = 0; c < C; c++) {
            float d = x[c] - m;
            var += d * d;
        }
        float s = 1.0f / sqrtf(var / (float)C + eps);
#pragma omp simd
        for (int64_t c = 0; c < C; c++)
            o[c] = ((x[c] - m) * s) * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

// dinp (N,C) =; dweight, dbias (C) +=; dout, inp (N,C); weight (C); mean, rstd (N)
void lp_k_layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                 const float *weight, const float *mean, const float *rstd, int64_t N, int64_t C)
{
    for (int64_t i = 0; i < N; i++) {
        const float *x = inp + i * C, *d = dout + i * C;
        double dn_mean = 0.0, dn_xhat_mean = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double xhat = ((double)x[c] - mean[i]) * rstd[i];
            double dn = (double)d[c] * weight[c];
            dn_mean += dn;
            dn_xhat_mean += dn * xhat;
        }
        dn_mean /= (double)C;
        dn_xhat_mean /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double xhat = ((double)x[c] - mean[i]) * rstd[i];
            double dn = (double)d[c] * weight[c];
            dinp[i * C + c] = (float)((dn - dn_mean - xhat * dn_xhat_mean) * rstd[i]);
            if (dweight)
                dweight[c] += (float)(d[c] * xhat);
            if (dbias)
                dbias[c] += d[c];
        }
    }
}

void lp_k_layernorm_backward_opt(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                 const float *weight, const float *mean, const float *rstd, int64_t N, int64_t C)
{
    int par = N * C >= LP_PAR_MIN;
    /* Pass 1, rows in parallel: the input gradient needs only per-row reductions. */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t i = 0; i < N; i++) {
        const float *restrict x = inp + i * C, *restrict d = dout + i * C;
        float *restrict di = dinp + i * C;
        float m = mean[i], s = rstd[i];
        float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
        for (int64_t c = 0; c < C; c++) {
            float dn = d[c] * weight[c];
            a += dn;
            b += dn * ((x[c] - m) * s);
        }
        a /= (float)C;
        b /= (float)C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            di[c] = (d[c] * weight[c] - a - xhat * b) * s;
        }
    }
    if (!dweight && !dbias)
        return;
    /* Pass 2, columns split across threads: each parameter gradient has one owner. */
#pragma omp parallel if (par)
    {
        int64_t lo, hi;
        lp_k_split(C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t i = 0; i < N; i++) {
            const float *restrict x = inp + i * C, *restrict d = dout + i * C;
            float m = mean[i], s = rstd[i];
            if (dweight) {
#pragma omp simd
                for (int64_t c = lo; c < hi; c++)
                    dweight[c] += d[c] * ((x[c] - m) * s);
            }
            if (dbias) {
#pragma omp simd
                for (int64_t c = lo; c < hi; c++)
                    dbias[c] += d[c];
            }
        }
    }
}
