/* Fused LoRA linear (PEFT semantics): out = base(x) + s * (drop(x) @ A^T) @ B^T over an f32,
 * int8 or NF4 frozen base, forward and backward. Neither version forms B @ A. The reference
 * is plain loops with double accumulators; the optimized one computes u = drop(x) @ A^T
 * once and accumulates s * u @ B^T into the base GEMM's output (qgemm.c), and in the
 * backward accumulates the LoRA input gradient into dinp the same way. The dropout mask
 * is lp_dropout_forward's (same Philox counters). */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

lp_status lp_k_lora_check(const lp_lora_base *base, float p, const void *keep, const lp_rng *rng, int64_t C,
                          int64_t OC, int64_t r, bool fwd)
{
    if (!base || (!base->weight) == (!base->q))
        return lp_err(LP_STATUS_INVALID_ARG,
                      "lora: the base needs exactly one of an f32 or a quantized weight");
    if (base->q && (base->q->rows != OC || base->q->cols != C))
        return lp_err(LP_STATUS_INVALID_ARG,
                      "lora: quantized base is [%lld, %lld], the call says [%lld, %lld]",
                      (long long)base->q->rows, (long long)base->q->cols, (long long)OC, (long long)C);
    if (r < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "lora: rank %lld < 1", (long long)r);
    if (!(p >= 0.0f && p < 1.0f))
        return lp_err(LP_STATUS_INVALID_ARG, "lora: dropout %g outside [0, 1)", (double)p);
    if (p > 0.0f && (!keep || (fwd && !rng)))
        return lp_err(LP_STATUS_INVALID_ARG, "lora: dropout %g needs a keep mask%s", (double)p,
                      fwd ? " and an rng" : "");
    return LP_OK;
}

/* keep[i] for elements [lo, hi) of the N*C mask, exactly as lp_dropout_forward draws it
 * (draw rng->lane + i: see dropout.c). */
static void lora_mask(uint8_t *keep, int64_t lo, int64_t hi, const lp_rng *rng, float p)
{
    const int64_t lane = rng->lane;
    for (int64_t b = (lo + lane) / 4; b * 4 < hi + lane; b++) {
        uint32_t x[4];
        lp_rng_philox(rng->seed, rng->stream, rng->offset + (uint64_t)b, x);
        for (int j = 0; j < 4; j++) {
            int64_t i = 4 * b + j - lane;
            if (i >= lo && i < hi)
                keep[i] = lp_rng_u01(x[j]) >= p;
        }
    }
}

static float base_w(const lp_lora_base *base, int64_t e)
{
    if (base->weight)
        return base->weight[e];
    float v;
    lp_k_qweight_dequantize_ref(&v, base->q, e, 1);
    return v;
}

// out (N,OC) =, u (N,r) =, keep (N*C) =; inp (N,C), A (r,C), B (OC,r)
lp_status lp_k_lora_forward_ref(float *out, float *u, uint8_t *keep, const float *inp,
                                const lp_lora_base *base, const float *A, const float *B, float s, float p,
                                lp_rng *rng, int64_t N, int64_t C, int64_t OC, int64_t r)
{
    lp_status st = lp_k_lora_check(base, p, keep, rng, C, OC, r, true);
    if (st)
        return st;
    float sd = 1.0f / (1.0f - p);
    if (p > 0.0f) {
        lora_mask(keep, 0, N * C, rng, p);
        lp_rng_skip(rng, N * C);
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < r; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < C; k++) {
                float xd = p > 0.0f ? (keep[i * C + k] ? inp[i * C + k] * sd : 0.0f) : inp[i * C + k];
                acc += (double)xd * A[j * C + k];
            }
            u[i * r + j] = (float)acc;
        }
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < OC; o++) {
            double acc = base->bias ? base->bias[o] : 0.0, lo = 0.0;
            for (int64_t k = 0; k < C; k++)
                acc += (double)inp[i * C + k] * base_w(base, o * C + k);
            for (int64_t j = 0; j < r; j++)
                lo += (double)u[i * r + j] * B[o * r + j];
            out[i * OC + o] = (float)(acc + s * lo);
        }
    return LP_OK;
}

// dinp (N,C) =, dA (r,C) +=, dB (OC,r) +=; dout (N,OC)
lp_status lp_k_lora_backward_ref(float *dinp, float *dA, float *dB, const float *dout, const float *inp,
                                 const float *u, const uint8_t *keep, const lp_lora_base *base,
                                 const float *A, const float *B, float s, float p, int64_t N, int64_t C,
                                 int64_t OC, int64_t r)
{
    lp_status st = lp_k_lora_check(base, p, keep, NULL, C, OC, r, false);
    if (st)
        return st;
    float sd = 1.0f / (1.0f - p);
    float *g = lp_alloc((size_t)(N * r) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "lora g");
    if (!g)
        return LP_STATUS_NO_MEMORY;
    for (int64_t i = 0; i < N; i++) // g (N,r) = dout @ B
        for (int64_t j = 0; j < r; j++) {
            double acc = 0.0;
            for (int64_t o = 0; o < OC; o++)
                acc += (double)dout[i * OC + o] * B[o * r + j];
            g[i * r + j] = (float)acc;
        }
    if (dB)
        for (int64_t o = 0; o < OC; o++)
            for (int64_t j = 0; j < r; j++) {
                double acc = 0.0;
                for (int64_t i = 0; i < N; i++)
                    acc += (double)dout[i * OC + o] * u[i * r + j];
                dB[o * r + j] += (float)(s * acc);
            }
    if (dA)
        for (int64_t j = 0; j < r; j++)
            for (int64_t k = 0; k < C; k++) {
                double acc = 0.0;
                for (int64_t i = 0; i < N; i++) {
                    float xd = p > 0.0f ? (keep[i * C + k] ? inp[i * C + k] * sd : 0.0f) : inp[i * C + k];
                    acc += (double)g[i * r + j] * xd;
                }
                dA[j * C + k] += (float)(s * acc);
            }
    if (dinp)
        for (int64_t i = 0; i < N; i++)
            for (int64_t k = 0; k < C; k++) {
                double acc = 0.0, lo = 0.0;
                for (int64_t o = 0; o < OC; o++)
                    acc += (double)dout[i * OC + o] * base_w(base, o * C + k);
                for (int64_t j = 0; j < r; j++)
                    lo += (double)g[i * r + j] * A[j * C + k];
                double f = p > 0.0f ? (keep[i * C + k] ? sd : 0.0) : 1.0;
                dinp[i * C + k] = (float)(acc + s * lo * f);
            }
    lp_free(g);
    return LP_OK;
}

/* Rows of the dropped input built at a time (the full dropped copy is never formed). */
#define LORA_ROWS 64

/* Dropped rows [i0, i0+m) of inp into xd (m,C). */
static void dropped_rows(float *xd, const float *inp, const uint8_t *keep, int64_t i0, int64_t m, int64_t C,
                         float sd)
{
    const float *x = inp + i0 * C;
    const uint8_t *kp = keep + i0 * C;
    for (int64_t e = 0; e < m * C; e++)
        xd[e] = kp[e] ? x[e] * sd : 0.0f;
}

lp_status lp_k_lora_forward_opt(float *out, float *u, uint8_t *keep, const float *inp,
                                const lp_lora_base *base, const float *A, const float *B, float s, float p,
                                lp_rng *rng, int64_t N, int64_t C, int64_t OC, int64_t r)
{
    lp_status st = lp_k_lora_check(base, p, keep, rng, C, OC, r, true);
    if (st || N <= 0)
        return st;
    if (p == 0.0f) { // u (N,r) = inp (N,C) @ A^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)r, (int)C, 1.0f, inp, (int)C, A,
                    (int)C, 0.0f, u, (int)r);
    } else {
        float sd = 1.0f / (1.0f - p);
        int64_t nch = (N + LORA_ROWS - 1) / LORA_ROWS;
        int nthreads = omp_get_max_threads();
        float *buf = lp_alloc((size_t)nthreads * LORA_ROWS * (size_t)C * sizeof(float),
                              LP_MEM_CATEGORY_TEMPORARY, "lora dropped rows");
        if (!buf)
            return LP_STATUS_NO_MEMORY;
        lp_rng at = *rng;
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < nch; c++) {
            int64_t i0 = c * LORA_ROWS, m = N - i0 < LORA_ROWS ? N - i0 : LORA_ROWS;
            float *xd = buf + (size_t)omp_get_thread_num() * LORA_ROWS * (size_t)C;
            lora_mask(keep, i0 * C, (i0 + m) * C, &at, p);
            dropped_rows(xd, inp, keep, i0, m, C, sd);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)r, (int)C, 1.0f, xd, (int)C, A,
                        (int)C, 0.0f, u + i0 * r, (int)r);
        }
        lp_free(buf);
        lp_rng_skip(rng, N * C);
    }
    return lp_k_linear_slabs_forward(out, inp, base->weight, base->q, base->bias, u, B, s, N, C, OC, r);
}

lp_status lp_k_lora_backward_opt(float *dinp, float *dA, float *dB, const float *dout, const float *inp,
                                 const float *u, const uint8_t *keep, const lp_lora_base *base,
                                 const float *A, const float *B, float s, float p, int64_t N, int64_t C,
                                 int64_t OC, int64_t r)
{
    lp_status st = lp_k_lora_check(base, p, keep, NULL, C, OC, r, false);
    if (st || N <= 0)
        return st;
    float *g = lp_alloc((size_t)(N * r) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "lora g");
    if (!g)
        return LP_STATUS_NO_MEMORY;
    // g (N,r) = dout (N,OC) @ B (OC,r)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)r, (int)OC, 1.0f, dout, (int)OC, B,
                (int)r, 0.0f, g, (int)r);
    if (dB) // dB (OC,r) += s * dout^T @ u
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)r, (int)N, s, dout, (int)OC, u,
                    (int)r, 1.0f, dB, (int)r);
    if (dA && p == 0.0f) { // dA (r,C) += s * g^T @ inp
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r, (int)C, (int)N, s, g, (int)r, inp,
                    (int)C, 1.0f, dA, (int)C);
    } else if (dA) { /* the dropped input, rebuilt a few hundred rows at a time */
        const int64_t R = 4 * LORA_ROWS;
        float *xd = lp_alloc((size_t)(R * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "lora dropped rows");
        if (!xd) {
            lp_free(g);
            return LP_STATUS_NO_MEMORY;
        }
        float sd = 1.0f / (1.0f - p);
        for (int64_t i0 = 0; i0 < N; i0 += R) {
            int64_t m = N - i0 < R ? N - i0 : R;
            dropped_rows(xd, inp, keep, i0, m, C, sd);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r, (int)C, (int)m, s, g + i0 * r,
                        (int)r, xd, (int)C, 1.0f, dA, (int)C);
        }
        lp_free(xd);
    }
    if (dinp)
        st = lp_k_linear_slabs_backward(dinp, dout, base->weight, base->q, g, A, s, keep, p, N, C, OC, r);
    lp_free(g);
    return st;
}
