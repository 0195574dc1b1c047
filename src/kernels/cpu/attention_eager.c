/* Eager attention: scores = q k^T * scale, padding mask, softmax, @ v, with the (B,H,T,T)
 * probabilities stored for the backward. The optimized version runs each (batch, head)
 * as a task on the OpenMP pool and calls BLAS inside it (OpenBLAS then runs single-
 * threaded: our partitioning, one pool). */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "cpu_kernels.h"

void lp_k_softmax_row(float *out, const float *x, int64_t C);

// q, k, v (B,T,H,D) with token stride ld; mask (B,T) or NULL; out (B,T,H*D) =; att (B,H,T,T) =
void lp_k_attention_eager_forward_ref(float *out, float *att, const float *q, const float *k, const float *v,
                                      const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
{
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                const float *qi = q + (b * T + i) * ld + h * D;
                float *a = att + ((b * H + h) * T + i) * T;
                float m = -INFINITY;
                for (int64_t j = 0; j < T; j++) {
                    const float *kj = k + (b * T + j) * ld + h * D;
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        s += (double)qi[d] * kj[d];
                    a[j] = (mask && !mask[b * T + j]) ? -INFINITY : (float)s * scale;
                    m = fmaxf(m, a[j]);
                }
                double sum = 0.0;
                for (int64_t j = 0; j < T; j++)
                    sum += exp((double)a[j] - m);
                for (int64_t j = 0; j < T; j++)
                    a[j] = (float)(exp((double)a[j] - m) / sum);
                float *o = out + (b * T + i) * C + h * D;
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < T; j++)
                        acc += (double)a[j] * v[(b * T + j) * ld + h * D + d];
                    o[d] = (float)acc;
                }
            }
}

void lp_k_attention_eager_forward_opt(float *out, float *att, const float *q, const float *k, const float *v,
                                      const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
{
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H;
        const float *qb = q + b * T * ld + h * D, *kb = k + b * T * ld + h * D, *vb = v + b * T * ld + h * D;
        float *a = att + bh * T * T;
        // a (T,T) = scale * q (T,D) @ k^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)D, scale, qb, (int)ld, kb, (int)ld,
                    0.0f, a, (int)T);
        const int32_t *mb = mask ? mask + b * T : NULL;
        for (int64_t i = 0; i < T; i++) {
            float *row = a + i * T;
            if (mb)
                for (int64_t j = 0; j < T; j++)
                    if (!mb[j])
                        row[j] = -INFINITY;
            lp_k_softmax_row(row, row, T);
        }
        // out (T,D) = a (T,T) @ v (T,D)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, a, (int)T, vb, (int)ld,
                    0.0f, out + b * T * C + h * D, (int)C);
    }
}

// dq, dk, dv (B,T,H,D) stride ld =; datt (B,H,T,T) scratch; dout (B,T,H*D); att (B,H,T,T)
void lp_k_attention_eager_backward_ref(float *dq, float *dk, float *dv, float *datt, const float *dout,
                                       const float *att, const float *q, const float *k, const float *v, int64_t B,
                                       int64_t T, int64_t H, int64_t D, int64_t ld)
{
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *a = att + (b * H + h) * T * T;
            float *da = datt + (b * H + h) * T * T;
            for (int64_t i = 0; i < T; i++) {
                const float *doi = dout + (b * T + i) * C + h * D;
                // datt = dout @ v^T, then through the softmax
                double dot = 0.0;
                for (int64_t j = 0; j < T; j++) {
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        s += (double)doi[d] * v[(b * T + j) * ld + h * D + d];
                    da[i * T + j] = (float)s;
                    dot += s * a[i * T + j];
                }
                for (int64_t j = 0; j < T; j++)
                    da[i * T + j] = (float)(a[i * T + j] * (da[i * T + j] - dot)) * scale;
            }
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++) {
                    double sq = 0.0, sk = 0.0, sv = 0.0;
                    for (int64_t j = 0; j < T; j++) {
                        sq += (double)da[t * T + j] * k[(b * T + j) * ld + h * D + d];
                        sk += (double)da[j * T + t] * q[(b * T + j) * ld + h * D + d];
                        sv += (double)a[j * T + t] * dout[(b * T + j) * C + h * D + d];
                    }
                    dq[(b * T + t) * ld + h * D + d] = (float)sq;
                    dk[(b * T + t) * ld + h * D + d] = (float)sk;
                    dv[(b * T + t) * ld + h * D + d] = (float)sv;
                }
        }
}

void lp_k_attention_eager_backward_opt(float *dq, float *dk, float *dv, float *datt, const float *dout,
                                       const float *att, const float *q, const float *k, const float *v, int64_t B,
                                       int64_t T, int64_t H, int64_t D, int64_t ld)
{
    float scale = 1.0f / sqrtf((float)D);
    int64_t C = H * D;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H;
        int64_t off = b * T * ld + h * D;
        const float *a = att + bh * T * T, *dob = dout + b * T * C + h * D;
        float *da = datt + bh * T * T;
        // datt (T,T) = dout (T,D) @ v^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)D, 1.0f, dob, (int)C, v + off,
                    (int)ld, 0.0f, da, (int)T);
        for (int64_t i = 0; i < T; i++) {
            const float *restrict ar = a + i * T;
            float *restrict dr = da + i * T;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t j = 0; j < T; j++)
                dot += ar[j] * dr[j];
#pragma omp simd
            for (int64_t j = 0; j < T; j++)
                dr[j] = ar[j] * (dr[j] - dot) * scale;
        }
        // dv (T,D) = att^T @ dout; dq = dscores @ k; dk = dscores^T @ q
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, a, (int)T, dob, (int)C, 0.0f,
                    dv + off, (int)ld);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, da, (int)T, k + off,
                    (int)ld, 0.0f, dq + off, (int)ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1.0f, da, (int)T, q + off, (int)ld,
                    0.0f, dk + off, (int)ld);
    }
}
