/* Weights kept in a GGML block format at run time (lp_qweight with dtype LP_DTYPE_GGML):
 * made from a GGUF tensor's blocks as stored, or by quantizing an f32 weight at load;
 * one QUANTIZED_WEIGHT block either way, rows of whole blocks (ggml's own row layout). */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

bool lp_ggml_type_runnable(lp_ggml_type t)
{
    switch (t) {
    case LP_GGML_TYPE_Q8_0:
    case LP_GGML_TYPE_Q4_0:
    case LP_GGML_TYPE_Q4_1:
    case LP_GGML_TYPE_Q5_0:
    case LP_GGML_TYPE_Q5_1:
    case LP_GGML_TYPE_Q4_K:
    case LP_GGML_TYPE_Q5_K:
    case LP_GGML_TYPE_Q6_K:
    case LP_GGML_TYPE_F16:
    case LP_GGML_TYPE_BF16:
        return true;
    default:
        return false;
    }
}

size_t lp_qweight_ggml_plan_nbytes(lp_ggml_type t, int64_t rows, int64_t cols)
{
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get((uint32_t)t);
    if (!tt || !lp_ggml_type_runnable(t) || rows <= 0 || cols <= 0 || cols % tt->block)
        return 0;
    size_t n = (size_t)rows * (size_t)(cols / tt->block) * (size_t)tt->bytes;
    return (n + 63) & ~(size_t)63;
}

static lp_status alloc_ggml(lp_qweight *q, lp_ggml_type t, int64_t rows, int64_t cols, const char *name)
{
    memset(q, 0, sizeof *q);
    const char *nm = name ? name : "weight";
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get((uint32_t)t);
    if (!tt || !lp_ggml_type_runnable(t))
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "%s: GGML type %s cannot be kept at run time (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, "
                      "Q5_K, Q6_K, F16, BF16)",
                      nm, tt ? tt->name : "?");
    if (rows <= 0 || cols <= 0 || cols % tt->block)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: shape [%lld, %lld] is not rows of whole %s blocks of %d", nm,
                      (long long)rows, (long long)cols, tt->name, (int)tt->block);
    uint8_t *m = lp_alloc(lp_qweight_ggml_plan_nbytes(t, rows, cols), LP_MEM_CATEGORY_QUANTIZED_WEIGHT, nm);
    if (!m)
        return LP_STATUS_NO_MEMORY;
    *q = (lp_qweight){.dtype = LP_DTYPE_GGML, .rows = rows, .cols = cols, .n = rows * cols, .gtype = t,
                      .blocks = m, .row_bytes = cols / tt->block * tt->bytes, .mem = m};
    return LP_OK;
}

lp_status lp_qweight_from_ggml(lp_qweight *q, lp_ggml_type t, const void *data, int64_t rows, int64_t cols,
                               const char *name)
{
    lp_status st = alloc_ggml(q, t, rows, cols, name);
    if (st == LP_OK)
        memcpy(q->blocks, data, (size_t)(rows * q->row_bytes));
    return st;
}

lp_status lp_qweight_quantize_ggml(lp_qweight *q, lp_ggml_type t, const float *w, int64_t rows, int64_t cols,
                                   const char *name)
{
    memset(q, 0, sizeof *q);
    const char *nm = name ? name : "weight";
    if (!lp_ggml_can_quantize(t))
        return lp_err(LP_STATUS_UNSUPPORTED, "quantize %s: loupe quantizes to q8_0, q4_0, f16 or bf16", nm);
    if (!w)
        return lp_err(LP_STATUS_INVALID_ARG, "quantize %s: no weight", nm);
    for (int64_t i = 0; i < rows * cols; i++)
        if (!isfinite(w[i]))
            return lp_err(LP_STATUS_NUMERIC, "quantize %s: non-finite weight %g at [%lld, %lld]", nm, (double)w[i],
                          (long long)(i / cols), (long long)(i % cols));
    lp_status st = alloc_ggml(q, t, rows, cols, name);
    if (st == LP_OK)
        lp_ggml_quantize(t, w, q->blocks, rows * cols);
    return st;
}

void lp_k_ggml_dequantize_range(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get((uint32_t)w->gtype);
    const int64_t B = tt->block, per_row = w->cols / B;
    float tmp[256];
    uint8_t rebuilt[64]; /* one block rebuilt from the tiles when they replaced the blocks */
    for (int64_t e = start, end = start + n; e < end;) {
        const int64_t blk = e / B, off = e % B; /* rows hold whole blocks: blocks are flat too */
        const uint8_t *src = rebuilt;
        if (w->blocks)
            src = w->blocks + (blk / per_row) * w->row_bytes + (blk % per_row) * tt->bytes;
        else
            lp_qweight_ggml_block_from_tiles(w, blk / per_row, blk % per_row, rebuilt);
        if (off == 0 && end - e >= B && !w->blocks) { /* one whole block */
            lp_ggml_dequantize(w->gtype, src, out + (e - start), B);
            e += B;
            continue;
        }
        if (off == 0 && end - e >= B) { /* whole blocks straight into out */
            int64_t k = (end - e) / B;
            lp_ggml_dequantize(w->gtype, src, out + (e - start), k * B);
            e += k * B;
            continue;
        }
        lp_ggml_dequantize(w->gtype, src, tmp, B);
        int64_t take = B - off < end - e ? B - off : end - e;
        memcpy(out + (e - start), tmp + off, (size_t)take * sizeof(float));
        e += take;
    }
}
