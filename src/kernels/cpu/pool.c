/* Pooling over the sequence and row normalization: the masked mean of a (B,T,C) hidden state
 * (sentence-transformers' Pooling(mean)), its backward, and L2 normalization of rows
 * (F.normalize). Sums run in double so the result is as exact as the f32 inputs allow,
 * whatever the length; the optimized versions split rows (and channels) across threads and
 * keep each sum's order, so they equal the reference bit for bit. */
#include <math.h>

#include "cpu_kernels.h"

static int64_t real_count(const int32_t *mask, int64_t b, int64_t T)
{
    int64_t n = 0;
    for (int64_t t = 0; t < T; t++)
        n += !mask || mask[b * T + t];
    return n;
}

/* out (B,C) =; x (B,T,C); mask (B,T) or NULL */
static void mean_pool_row(float *out, const float *x, const int32_t *mask, int64_t b, int64_t T, int64_t C,
                          int64_t c0, int64_t c1)
{
    const int64_t cnt = real_count(mask, b, T);
    for (int64_t c = c0; c < c1; c++) {
        double acc = 0;
        for (int64_t t = 0; t < T; t++)
            if (!mask || mask[b * T + t])
                acc += x[(b * T + t) * C + c];
        out[b * C + c] = cnt ? (float)(acc / (double)cnt) : 0.0f;
    }
}

void lp_k_mean_pool_forward_ref(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T, int64_t C)
{
    for (int64_t b = 0; b < B; b++)
        mean_pool_row(out, x, mask, b, T, C, 0, C);
}

void lp_k_mean_pool_forward_opt(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T, int64_t C)
{
    const int64_t chunk = 64, nc = (C + chunk - 1) / chunk; // channel blocks: parallel even at B = 1
#pragma omp parallel for collapse(2) schedule(static) if (B * T * C >= LP_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < nc; k++)
            mean_pool_row(out, x, mask, b, T, C, k * chunk, (k + 1) * chunk < C ? (k + 1) * chunk : C);
}

/* dx (B,T,C) = dout[b] * mask[b,t] / count_b */
static void mean_pool_back_row(float *dx, const float *dout, const int32_t *mask, int64_t b, int64_t T, int64_t C)
{
    const int64_t cnt = real_count(mask, b, T);
    const float s = cnt ? 1.0f / (float)cnt : 0.0f;
    for (int64_t t = 0; t < T; t++) {
        float *d = dx + (b * T + t) * C;
        const float w = (!mask || mask[b * T + t]) ? s : 0.0f;
        for (int64_t c = 0; c < C; c++)
            d[c] = dout[b * C + c] * w;
    }
}

void lp_k_mean_pool_backward_ref(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T, int64_t C)
{
    for (int64_t b = 0; b < B; b++)
        mean_pool_back_row(dx, dout, mask, b, T, C);
}

void lp_k_mean_pool_backward_opt(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T, int64_t C)
{
#pragma omp parallel for schedule(static) if (B * T * C >= LP_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        mean_pool_back_row(dx, dout, mask, b, T, C);
}

static void normalize_row(float *r, int64_t C)
{
    double ss = 0;
    for (int64_t c = 0; c < C; c++)
        ss += (double)r[c] * r[c];
    const double nrm = sqrt(ss);
    const float s = (float)(1.0 / (nrm > 1e-12 ? nrm : 1e-12));
    for (int64_t c = 0; c < C; c++)
        r[c] *= s;
}

void lp_k_l2_normalize_ref(float *x, int64_t N, int64_t C)
{
    for (int64_t i = 0; i < N; i++)
        normalize_row(x + i * C, C);
}

void lp_k_l2_normalize_opt(float *x, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static) if (N * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < N; i++)
        normalize_row(x + i * C, C);
}
