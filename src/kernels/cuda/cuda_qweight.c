/* A quantized weight on the device: lp_cuda_qweight_upload copies a host lp_qweight's
 * arrays into one device block (category QUANTIZED_WEIGHT) and returns a header whose
 * pointers point into it, which the CUDA table's qweight_dequantize reads. NF4 (with or
 * without double quantization) and int8. Plain C over the backend's entry points, so it is
 * in every build (without CUDA there is no CUDA backend to pass it). */
#include <string.h>

#include "../backend.h"

#define PIECE_ALIGN 256 /* each array on its own 256-byte boundary, as cudaMalloc aligns */

static size_t up(size_t x)
{
    return (x + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
}

lp_status lp_cuda_qweight_upload(const lp_backend *b, const lp_qweight *h, lp_qweight *d, const char *name)
{
    memset(d, 0, sizeof *d);
    if (!b || strcmp(b->name, "cuda") != 0)
        return lp_err(LP_STATUS_INVALID_ARG, "lp_cuda_qweight_upload: not a CUDA backend");
    const void *src[3] = {0};
    size_t len[3] = {0};
    if (h->dtype == LP_DTYPE_NF4) {
        src[0] = h->codes, len[0] = (size_t)(h->n + 1) / 2;
        if (h->double_quant) {
            src[1] = h->absmax_q, len[1] = (size_t)h->n_blocks;
            src[2] = h->nested_absmax, len[2] = (size_t)h->n_nested * sizeof(float);
        } else {
            src[1] = h->absmax, len[1] = (size_t)h->n_blocks * sizeof(float);
        }
    } else if (h->dtype == LP_DTYPE_INT8) {
        if (!h->q) /* packed into the CPU integer GEMM's tiles (--dtype int8 inference) */
            return lp_err(LP_STATUS_UNSUPPORTED, "lp_cuda_qweight_upload: %s: an int8 weight packed for the CPU's "
                          "integer GEMM has no GPU kernel (the LoRA int8 base has)", name ? name : "?");
        src[0] = h->q, len[0] = (size_t)h->n;
        src[1] = h->scale, len[1] = (size_t)h->rows * sizeof(float);
    } else {
        return lp_err(LP_STATUS_UNSUPPORTED, "lp_cuda_qweight_upload: %s: %s weights are not supported on the GPU "
                      "(NF4 and int8 are)", name ? name : "?", lp_dtype_name(h->dtype));
    }
    size_t off[3], total = 0;
    for (int i = 0; i < 3; i++)
        off[i] = total, total += up(len[i]);
    uint8_t *mem = b->alloc_tagged(b->ctx, total, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, name ? name : "qweight");
    if (!mem)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "lp_cuda_qweight_upload");
    for (int i = 0; i < 3; i++)
        if (len[i]) {
            lp_status st = b->upload(b->ctx, mem + off[i], src[i], len[i]);
            if (st != LP_OK) {
                b->free(b->ctx, mem);
                return st;
            }
        }
    *d = *h;
    d->codes = NULL, d->absmax = NULL, d->absmax_q = NULL, d->nested_absmax = NULL;
    d->q = NULL, d->scale = NULL, d->blocks = NULL, d->bf16 = NULL;
    if (h->dtype == LP_DTYPE_NF4) {
        d->codes = mem + off[0];
        if (h->double_quant) {
            d->absmax_q = mem + off[1];
            d->nested_absmax = (float *)(mem + off[2]);
        } else {
            d->absmax = (float *)(mem + off[1]);
        }
    } else {
        d->q = (int8_t *)(mem + off[0]);
        d->scale = (float *)(mem + off[1]);
    }
    d->mem = mem;
    return LP_OK;
}

lp_status lp_cuda_qweight_bf16_train(const lp_backend *b, lp_qweight *q, const float *w, int64_t rows,
                                     int64_t cols, const char *name, lp_mem_category cat)
{
    memset(q, 0, sizeof *q);
    if (!b || strcmp(b->name, "cuda") != 0 || !b->ops->bf16_repack)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "lp_cuda_qweight_bf16_train: not a CUDA backend with bf16 GEMMs");
    if (rows <= 0 || cols <= 0 || rows > INT64_MAX / 2 / cols)
        return lp_err(LP_STATUS_INVALID_ARG, "lp_cuda_qweight_bf16_train: %s: bad shape [%lld, %lld]",
                      name ? name : "?", (long long)rows, (long long)cols);
    uint16_t *mem =
        b->alloc_tagged(b->ctx, (size_t)(rows * cols) * sizeof(uint16_t), cat, name ? name : "bf16 weight");
    if (!mem)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "lp_cuda_qweight_bf16_train: %s", name ? name : "?");
    q->dtype = LP_DTYPE_BF16;
    q->rows = rows, q->cols = cols, q->n = rows * cols;
    q->cpad = cols;
    q->bf16 = mem;
    q->mem = mem;
    b->ops->bf16_repack(q, w);
    return LP_OK;
}

void lp_cuda_qweight_free(const lp_backend *b, lp_qweight *d)
{
    if (d->mem)
        b->free(b->ctx, d->mem);
    memset(d, 0, sizeof *d);
}
