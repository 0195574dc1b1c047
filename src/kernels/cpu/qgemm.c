/* GEMM with a quantized (NF4 or int8) frozen weight, PyTorch layout W (OC,C) (packed f32
 * and bf16 weights go to their own GEMMs, f32_gemm.c / bf16_gemm.c):
 * forward out = inp @ W^T + bias, backward dinp = dout @ W. The reference dequantizes one
 * element at a time inside plain loops. The optimized version never holds an f32 copy of
 * W: it dequantizes a slab of the reduction dimension at a time (at most 4 MiB) and lets
 * OpenBLAS accumulate each slab's product into the output. Cutting along the reduction
 * (not the output) is what keeps it as fast as a plain GEMM: cutting W into output panels
 * made OpenBLAS re-pack the whole activation for every panel (0.56-0.89x sgemm). */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"

static lp_status check_shape(const lp_qweight *w, int64_t C, int64_t OC, const char *op)
{
    if (!w || !w->mem || w->rows != OC || w->cols != C)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: weight is [%lld, %lld], the call says [%lld, %lld]", op,
                      w ? (long long)w->rows : -1LL, w ? (long long)w->cols : -1LL, (long long)OC,
                      (long long)C);
    return LP_OK;
}

/* The GGML reference: each weight row dequantized exactly (ggml_dequant.c), then an f32
 * dot accumulated in double: what the integer kernels approximate. */
static lp_status ggml_forward_ref(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                                  int64_t C, int64_t OC)
{
    float *row = lp_alloc((size_t)C * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "dequantized row");
    if (!row)
        return LP_STATUS_NO_MEMORY;
    for (int64_t o = 0; o < OC; o++) {
        lp_k_ggml_dequantize_range(row, w, o * C, C);
        for (int64_t i = 0; i < N; i++) {
            double acc = bias ? bias[o] : 0.0;
            for (int64_t k = 0; k < C; k++)
                acc += (double)inp[i * C + k] * row[k];
            out[i * OC + o] = (float)acc;
        }
    }
    lp_free(row);
    return LP_OK;
}

// out (N,OC) = inp (N,C) @ W^T (C,OC) + bias (OC)
lp_status lp_k_qmatmul_forward_ref(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                   int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_forward");
    if (st)
        return st;
    if (w->dtype == LP_DTYPE_GGML)
        return ggml_forward_ref(out, inp, w, bias, N, C, OC);
    if (w->dtype == LP_DTYPE_BF16)
        return lp_k_bf16_matmul_forward_ref(out, inp, w, bias, N, C, OC);
    if (w->dtype == LP_DTYPE_F32)
        return lp_k_f32_matmul_forward_ref(out, inp, w, bias, N, C, OC);
    if (w->dtype == LP_DTYPE_INT8 && w->tiles) /* int8 inference: the integer GEMM's own reference */
        return lp_k_int8_gemm_ref(out, inp, w, bias, N);
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < OC; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int64_t k = 0; k < C; k++) {
                float wv;
                lp_k_qweight_dequantize_ref(&wv, w, o * C + k, 1);
                acc += (double)inp[i * C + k] * wv;
            }
            out[i * OC + o] = (float)acc;
        }
    return LP_OK;
}

/* dinp (N,C) = dout @ W for a GGML weight: rows dequantized once each (a per-element
 * lookup would decode a whole block per element), sums in double. */
static lp_status ggml_backward_ref(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                   int64_t OC)
{
    float *row = lp_alloc((size_t)C * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "dequantized row");
    double *acc = lp_alloc((size_t)(N * C) * sizeof(double), LP_MEM_CATEGORY_TEMPORARY, "backward sums");
    if (!row || !acc) {
        lp_free(row);
        lp_free(acc);
        return LP_STATUS_NO_MEMORY;
    }
    memset(acc, 0, (size_t)(N * C) * sizeof(double));
    for (int64_t o = 0; o < OC; o++) {
        lp_k_ggml_dequantize_range(row, w, o * C, C);
        for (int64_t i = 0; i < N; i++)
            for (int64_t k = 0; k < C; k++)
                acc[i * C + k] += (double)dout[i * OC + o] * row[k];
    }
    for (int64_t e = 0; e < N * C; e++)
        dinp[e] = (float)acc[e];
    lp_free(row);
    lp_free(acc);
    return LP_OK;
}

// dinp (N,C) = dout (N,OC) @ W (OC,C)
lp_status lp_k_qmatmul_backward_ref(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                    int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_backward");
    if (st)
        return st;
    if (w->dtype == LP_DTYPE_GGML)
        return ggml_backward_ref(dinp, dout, w, N, C, OC);
    if (w->dtype == LP_DTYPE_F32)
        return lp_k_f32_matmul_backward_ref(dinp, dout, w, N, C, OC);
    for (int64_t i = 0; i < N; i++)
        for (int64_t k = 0; k < C; k++) {
            double acc = 0.0;
            for (int64_t o = 0; o < OC; o++) {
                float wv;
                lp_k_qweight_dequantize_ref(&wv, w, o * C + k, 1);
                acc += (double)dout[i * OC + o] * wv;
            }
            dinp[i * C + k] = (float)acc;
        }
    return LP_OK;
}

static void dequant_one_thread(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    if (w->dtype == LP_DTYPE_GGML)
        lp_k_ggml_dequantize_range(out, w, start, n);
    else if (w->dtype == LP_DTYPE_BF16)
        lp_k_bf16_dequantize_range(out, w, start, n);
    else if (w->dtype == LP_DTYPE_F32)
        lp_k_f32_dequantize_range(out, w, start, n);
    else if (w->dtype == LP_DTYPE_NF4)
        lp_k_nf4_dequantize_opt(out, w, start, n);
    else
        lp_k_int8_dequantize_opt(out, w, start, n);
}

/* slab (rows, width) = W[o, k0 + j] for o < rows (row stride C of the flattened weight,
 * starting at row o0), dequantized by the whole pool. */
static void dequant_slab(float *slab, const lp_qweight *w, int64_t o0, int64_t rows, int64_t k0, int64_t width)
{
    const int64_t C = w->cols;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < rows; o++)
        dequant_one_thread(slab + o * width, w, (o0 + o) * C + k0, width);
}

/* out (N,OC) = inp @ Wb^T + bias [+ s * u @ B^T when u], all accumulated into out: an f32
 * base is one multi-threaded GEMM; a quantized one is dequantized a K-slab at a time
 * (OC x kc) and each slab's GEMM adds into out, so every element of inp and of W is
 * packed once, as in a plain GEMM, and no f32 copy of W exists. The LoRA update is one
 * more rank-r GEMM into the same output (never B @ A, never an (N,OC) temporary). */
lp_status lp_k_linear_slabs_forward(float *out, const float *inp, const float *wf, const lp_qweight *wq,
                                     const float *bias, const float *u, const float *B, float s, int64_t N,
                                     int64_t C, int64_t OC, int64_t r)
{
    float beta = 0.0f;
    if (wq && wq->bf16t) { /* a bf16 training base (--dtype bf16): the bf16 GEMM, then the LoRA term */
        lp_status st = lp_k_bf16_matmul_forward_opt(out, inp, wq, bias, N, C, OC);
        if (st != LP_OK)
            return st;
        wq = NULL; /* the base is done: neither branch below runs */
        wf = NULL;
        bias = NULL;
        beta = 1.0f;
    } else if (bias && (wf || wq->dtype != LP_DTYPE_F32)) { /* packed f32 adds its bias itself */
        lp_k_bias_broadcast_opt(out, bias, N, OC);
        beta = 1.0f;
    }
    if (wf) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OC, (int)C, 1.0f, inp, (int)C, wf,
                    (int)C, beta, out, (int)OC);
    } else if (wq && wq->dtype == LP_DTYPE_F32) { /* packed f32: its own GEMM, bias included, no slab */
        lp_status st = lp_k_f32_matmul_forward_opt(out, inp, wq, bias, N, C, OC);
        if (st)
            return st;
    } else if (wq) {
        int64_t kc = lp_qmatmul_slab_width(OC, C);
        float *slab = lp_alloc((size_t)(OC * kc) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "qmatmul slab");
        if (!slab)
            return LP_STATUS_NO_MEMORY;
        for (int64_t k0 = 0; k0 < C; k0 += kc, beta = 1.0f) {
            int64_t w = C - k0 < kc ? C - k0 : kc;
            dequant_slab(slab, wq, 0, OC, k0, w);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OC, (int)w, 1.0f, inp + k0, (int)C,
                        slab, (int)w, beta, out, (int)OC);
        }
        lp_free(slab);
    }
    if (u) /* out += s * u (N,r) @ B^T (r,OC) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OC, (int)r, s, u, (int)r, B, (int)r,
                    1.0f, out, (int)OC);
    return LP_OK;
}

/* dinp (N,C) = dout @ Wb [+ s * drop'(g @ A) when g; drop' multiplies by keep / (1-p) when
 * p > 0]. The quantized base is dequantized an OC-slab of whole rows at a time (contiguous
 * in the flattened weight) and each slab's GEMM adds into dinp. */
lp_status lp_k_linear_slabs_backward(float *dinp, const float *dout, const float *wf, const lp_qweight *wq,
                                      const float *g, const float *A, float s, const uint8_t *keep, float p,
                                      int64_t N, int64_t C, int64_t OC, int64_t r)
{
    if (wq && wq->bf16t) { /* a bf16 training base: dY @ W on W^T's panels */
        lp_status st = lp_k_bf16_matmul_backward_opt(dinp, NULL, dout, NULL, wq, N, C, OC);
        if (st != LP_OK)
            return st;
    } else if (wf) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)OC, 1.0f, dout, (int)OC, wf,
                    (int)C, 0.0f, dinp, (int)C);
    } else if (wq->dtype == LP_DTYPE_F32) { /* packed f32: the dot-product kernel on the panels, no slab */
        lp_status st = lp_k_f32_matmul_backward_opt(dinp, dout, wq, N, C, OC);
        if (st)
            return st;
    } else {
        int64_t ob = lp_qmatmul_slab_width(C, OC);
        float *slab = lp_alloc((size_t)(ob * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "qmatmul slab");
        if (!slab)
            return LP_STATUS_NO_MEMORY;
        float beta = 0.0f;
        for (int64_t o0 = 0; o0 < OC; o0 += ob, beta = 1.0f) {
            int64_t h = OC - o0 < ob ? OC - o0 : ob;
            dequant_slab(slab, wq, o0, h, 0, C);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)h, 1.0f, dout + o0,
                        (int)OC, slab, (int)C, beta, dinp, (int)C);
        }
        lp_free(slab);
    }
    if (!g)
        return LP_OK;
    if (p == 0.0f) { /* dinp += s * g (N,r) @ A (r,C) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)r, s, g, (int)r, A, (int)C,
                    1.0f, dinp, (int)C);
        return LP_OK;
    }
    /* masked: s * (g @ A) a few rows at a time per thread, added where the mask kept x */
    const int64_t TR = 32;
    int nthreads = omp_get_max_threads();
    float *tmp = lp_alloc((size_t)nthreads * (size_t)(TR * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                          "lora masked rows");
    if (!tmp)
        return LP_STATUS_NO_MEMORY;
    float sd = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < N; i0 += TR) {
        int64_t m = N - i0 < TR ? N - i0 : TR;
        float *t = tmp + (size_t)omp_get_thread_num() * (size_t)(TR * C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)C, (int)r, s, g + i0 * r, (int)r, A,
                    (int)C, 0.0f, t, (int)C);
        for (int64_t e = 0; e < m * C; e++)
            dinp[i0 * C + e] += keep[i0 * C + e] ? t[e] * sd : 0.0f;
    }
    lp_free(tmp);
    return LP_OK;
}

lp_status lp_k_qmatmul_forward_opt(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                   int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_forward");
    if (st || N <= 0)
        return st;
    if (w->dtype == LP_DTYPE_GGML) /* integer kernels on the blocks as stored */
        return lp_k_ggml_matmul_forward(out, inp, w, bias, N, C, OC);
    if (w->dtype == LP_DTYPE_BF16) /* bf16 compute on the packed panels */
        return lp_k_bf16_matmul_forward_opt(out, inp, w, bias, N, C, OC);
    if (w->dtype == LP_DTYPE_F32) /* the packed f32 GEMM */
        return lp_k_f32_matmul_forward_opt(out, inp, w, bias, N, C, OC);
    if (w->dtype == LP_DTYPE_INT8 && w->tiles) /* int8 inference: the row-scaled integer GEMM */
        return lp_k_int8_gemm(out, inp, w, bias, N);
    if (N <= LP_NF4_GEMV_MAX_ROWS && lp_k_nf4_gemv_fits(w)) { /* decode: no f32 weight at all */
        lp_k_nf4_gemv(out, inp, w, bias, N, C, OC);
        return LP_OK;
    }
    return lp_k_linear_slabs_forward(out, inp, NULL, w, bias, NULL, NULL, 0.0f, N, C, OC, 0);
}

lp_status lp_k_qmatmul_backward_opt(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                    int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_backward");
    if (st || N <= 0)
        return st;
    if (w->dtype == LP_DTYPE_F32) /* packed f32: dinp = dout @ W on the panels */
        return lp_k_f32_matmul_backward_opt(dinp, dout, w, N, C, OC);
    return lp_k_linear_slabs_backward(dinp, dout, NULL, w, NULL, NULL, 0.0f, NULL, 0.0f, N, C, OC, 0);
}
