/* Quantized base weights (NF4, int8; the GGML formats in qweight_ggml.c): allocation in one QUANTIZED_WEIGHT block, sizes,
 * the dequantize table entries (dispatching on the dtype) and the y += x helper. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

static size_t up64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

size_t lp_qweight_plan_nbytes(lp_dtype dtype, int64_t rows, int64_t cols, bool double_quant)
{
    const int64_t n = rows * cols;
    if (dtype == LP_DTYPE_INT8)
        return up64((size_t)n) + (size_t)rows * sizeof(float);
    if (dtype != LP_DTYPE_NF4)
        return 0;
    const int64_t blocks = (n + LP_NF4_BLOCK - 1) / LP_NF4_BLOCK;
    const int64_t nested = double_quant ? (blocks + LP_NF4_NESTED_BLOCK - 1) / LP_NF4_NESTED_BLOCK : 0;
    return up64((size_t)(n + 1) / 2) + up64((size_t)blocks * (double_quant ? 1 : sizeof(float))) +
           (size_t)nested * sizeof(float);
}

/* lp_qweight_quantize, with int8 codes in [-qmax, qmax] */
static lp_status quantize(lp_qweight *q, lp_dtype dtype, const float *w, int64_t rows, int64_t cols,
                          bool double_quant, const char *name, int qmax)
{
    memset(q, 0, sizeof *q);
    if (dtype != LP_DTYPE_NF4 && dtype != LP_DTYPE_INT8)
        return lp_err(LP_STATUS_INVALID_ARG, "quantize %s: dtype must be nf4 or int8",
                      name ? name : "weight");
    if (rows <= 0 || cols <= 0 || !w)
        return lp_err(LP_STATUS_INVALID_ARG, "quantize %s: bad shape [%lld, %lld]", name ? name : "weight",
                      (long long)rows, (long long)cols);
    int64_t n = rows * cols;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(w[i]))
            return lp_err(LP_STATUS_NUMERIC, "quantize %s: non-finite weight %g at [%lld, %lld]",
                          name ? name : "weight", (double)w[i], (long long)(i / cols), (long long)(i % cols));
    lp_qweight t = {.dtype = dtype, .rows = rows, .cols = cols, .n = n};
    float *scratch = NULL;
    size_t bytes;
    if (dtype == LP_DTYPE_NF4) {
        t.double_quant = double_quant;
        t.n_blocks = (n + LP_NF4_BLOCK - 1) / LP_NF4_BLOCK;
        t.n_nested = double_quant ? (t.n_blocks + LP_NF4_NESTED_BLOCK - 1) / LP_NF4_NESTED_BLOCK : 0;
        size_t codes = up64((size_t)(n + 1) / 2);
        size_t scales = up64((size_t)t.n_blocks * (double_quant ? 1 : sizeof(float)));
        bytes = lp_qweight_plan_nbytes(dtype, rows, cols, double_quant);
        uint8_t *m = lp_alloc(bytes, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, name ? name : "nf4 weight");
        if (!m)
            return LP_STATUS_NO_MEMORY;
        t.mem = m;
        t.codes = m;
        if (double_quant) {
            t.absmax_q = m + codes;
            t.nested_absmax = (float *)(m + codes + scales);
            scratch =
                lp_alloc((size_t)t.n_blocks * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "nf4 absmax scratch");
            if (!scratch) {
                lp_free(m);
                return LP_STATUS_NO_MEMORY;
            }
        } else {
            t.absmax = (float *)(m + codes);
        }
        lp_k_nf4_quantize(&t, w, scratch);
        lp_free(scratch);
    } else {
        size_t qb = up64((size_t)n);
        bytes = lp_qweight_plan_nbytes(dtype, rows, cols, false);
        uint8_t *m = lp_alloc(bytes, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, name ? name : "int8 weight");
        if (!m)
            return LP_STATUS_NO_MEMORY;
        t.mem = m;
        t.q = (int8_t *)m;
        t.scale = (float *)(m + qb);
        lp_k_int8_quantize(&t, w, qmax);
    }
    *q = t;
    return LP_OK;
}

lp_status lp_qweight_quantize(lp_qweight *q, lp_dtype dtype, const float *w, int64_t rows, int64_t cols,
                              bool double_quant, const char *name)
{
    return quantize(q, dtype, w, rows, cols, double_quant, name, 127);
}

lp_status lp_k_qweight_quantize_int8(lp_qweight *q, const float *w, int64_t rows, int64_t cols, int qmax,
                                     const char *name)
{
    return quantize(q, LP_DTYPE_INT8, w, rows, cols, false, name, qmax);
}

lp_status lp_k_qweight_alloc_packed(lp_qweight *q, const float *w, int64_t rows, int64_t cols, size_t bytes,
                                    const char *kind, const char *name, lp_mem_category cat, void **mem)
{
    memset(q, 0, sizeof *q);
    *mem = NULL;
    const char *nm = name ? name : "weight";
    if (rows <= 0 || cols <= 0 || !w)
        return lp_err(LP_STATUS_INVALID_ARG, "%s %s: bad shape [%lld, %lld]", kind, nm, (long long)rows,
                      (long long)cols);
    void *m = lp_alloc(bytes, cat, nm);
    if (!m)
        return LP_STATUS_NO_MEMORY;
    memset(m, 0, bytes);
    *mem = m;
    return LP_OK;
}

void lp_qweight_free(lp_qweight *q)
{
    if (q->tiles != q->mem) /* tiles that replaced the blocks are the weight's mem */
        lp_free(q->tiles);
    lp_free(q->mem);
    memset(q, 0, sizeof *q);
}

size_t lp_qweight_nbytes(const lp_qweight *q)
{
    return (q->mem ? lp_alloc_size(q->mem) : 0) + (q->tiles && q->tiles != q->mem ? lp_alloc_size(q->tiles) : 0);
}

size_t lp_qweight_decode_nbytes(const lp_qweight *q)
{
    return q->mem ? lp_alloc_size(q->mem) : 0;
}

double lp_qweight_bytes_per_param(const lp_qweight *q)
{
    return q->n ? (double)lp_qweight_nbytes(q) / (double)q->n : 0.0;
}

float lp_qweight_nf4_block_absmax(const lp_qweight *q, int64_t b)
{
    float s;
    lp_k_nf4_block_scales(q, b, 1, &s);
    return s;
}

void lp_k_qweight_dequantize_ref(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    if (w->dtype == LP_DTYPE_GGML)
        lp_k_ggml_dequantize_range(out, w, start, n);
    else if (w->dtype == LP_DTYPE_BF16)
        lp_k_bf16_dequantize_range(out, w, start, n);
    else if (w->dtype == LP_DTYPE_F32)
        lp_k_f32_dequantize_range(out, w, start, n);
    else if (w->dtype == LP_DTYPE_NF4)
        lp_k_nf4_dequantize_ref(out, w, start, n);
    else
        lp_k_int8_dequantize_ref(out, w, start, n);
}

void lp_k_qweight_dequantize_opt(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    /* split large ranges across threads; each chunk starts on a block boundary */
    const int64_t chunk = 1 << 16;
    if (n < 2 * chunk) {
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
        return;
    }
    int64_t nchunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * chunk, len = lo + chunk < n ? chunk : n - lo;
        if (w->dtype == LP_DTYPE_GGML)
            lp_k_ggml_dequantize_range(out + lo, w, start + lo, len);
        else if (w->dtype == LP_DTYPE_BF16)
            lp_k_bf16_dequantize_range(out + lo, w, start + lo, len);
        else if (w->dtype == LP_DTYPE_F32)
            lp_k_f32_dequantize_range(out + lo, w, start + lo, len);
        else if (w->dtype == LP_DTYPE_NF4)
            lp_k_nf4_dequantize_opt(out + lo, w, start + lo, len);
        else
            lp_k_int8_dequantize_opt(out + lo, w, start + lo, len);
    }
}

void lp_k_add_inplace_ref(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

void lp_k_add_inplace_opt(float *y, const float *x, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}
