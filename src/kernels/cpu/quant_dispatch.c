/* The public wrappers of the quant section (quantized GEMM, LoRA linear): each records its
 * shapes and FLOPs with the profiler and calls the active table. The *_eager compositions
 * run the same math as separate profiled ops (what --exec eager shows). */
#include <string.h>

#include "cpu_kernels.h"
#include "op_record.h"

#define K lp_kernels_active()

static double wbytes(const lp_qweight *w)
{
    return (double)lp_qweight_nbytes(w);
}

void lp_qweight_dequantize(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    if (w->dtype == LP_DTYPE_NF4) {
        LP_OP_BEGIN("lp::nf4_dequantize", 1.0 * n, 4.5 * n, 2, w->rows, w->cols);
        K->qweight_dequantize(out, w, start, n);
    } else if (w->dtype == LP_DTYPE_BF16) {
        LP_OP_BEGIN("lp::bf16_dequantize", 0.0, 6.0 * n, 2, w->rows, w->cols);
        K->qweight_dequantize(out, w, start, n);
    } else if (w->dtype == LP_DTYPE_F32) {
        LP_OP_BEGIN("lp::f32_unpack", 0.0, 8.0 * n, 2, w->rows, w->cols);
        K->qweight_dequantize(out, w, start, n);
    } else if (w->dtype == LP_DTYPE_GGML) {
        LP_OP_BEGIN("lp::ggml_dequantize", 1.0 * n, 4.0 * n + (double)lp_qweight_nbytes(w) * n / (double)w->n, 2,
                    w->rows, w->cols);
        K->qweight_dequantize(out, w, start, n);
    } else {
        LP_OP_BEGIN("lp::int8_dequantize", 1.0 * n, 5.0 * n, 2, w->rows, w->cols);
        K->qweight_dequantize(out, w, start, n);
    }
}

/* One profiler name per GGML format, so a profile tells a Q4_K layer from a Q6_K one. */
#define GGML_FWD(T, name)                        \
    case LP_GGML_TYPE_##T: {                     \
        LP_OP_BEGIN(name, fl, by, 3, N, C, OC); \
        return K->qmatmul_forward(out, inp, w, bias, N, C, OC); \
    }

static lp_status ggml_forward(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                              int64_t C, int64_t OC, double fl, double by)
{
    switch (w->gtype) {
        GGML_FWD(Q8_0, "lp::q8_0_matmul_forward")
        GGML_FWD(Q4_0, "lp::q4_0_matmul_forward")
        GGML_FWD(Q4_1, "lp::q4_1_matmul_forward")
        GGML_FWD(Q4_K, "lp::q4_k_matmul_forward")
        GGML_FWD(Q6_K, "lp::q6_k_matmul_forward")
        GGML_FWD(F16, "lp::f16_matmul_forward")
    default: {
        LP_OP_BEGIN("lp::bf16_matmul_forward", fl, by, 3, N, C, OC);
        return K->qmatmul_forward(out, inp, w, bias, N, C, OC);
    }
    }
}

lp_status lp_qmatmul_forward(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                             int64_t C, int64_t OC)
{
    double fl = 2.0 * N * C * OC + (bias ? 1.0 * N * OC : 0.0), by = 4.0 * (N * C + N * OC) + wbytes(w);
    if (w && w->dtype == LP_DTYPE_GGML)
        return ggml_forward(out, inp, w, bias, N, C, OC, fl, by);
    if (w && w->dtype == LP_DTYPE_BF16) {
        LP_OP_BEGIN("lp::bf16_gemm_forward", fl, by, 3, N, C, OC);
        return K->bf16_matmul_forward(out, inp, w, bias, N, C, OC);
    }
    if (w && w->dtype == LP_DTYPE_F32) {
        LP_OP_BEGIN("lp::f32_gemm_forward", fl, by, 3, N, C, OC);
        return K->f32_matmul_forward(out, inp, w, bias, N, C, OC);
    }
    if (!K->qmatmul_forward) // a device without a quantized GEMM: dequantize, then its f32 GEMM
        return lp_qmatmul_forward_eager(out, inp, w, bias, N, C, OC);
    if (w->dtype == LP_DTYPE_NF4) {
        LP_OP_BEGIN("lp::nf4_matmul_forward", fl, by, 3, N, C, OC);
        return K->qmatmul_forward(out, inp, w, bias, N, C, OC);
    } else {
        LP_OP_BEGIN("lp::int8_matmul_forward", fl, by, 3, N, C, OC);
        return K->qmatmul_forward(out, inp, w, bias, N, C, OC);
    }
}

lp_status lp_qmatmul_backward(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                              int64_t OC)
{
    double fl = 2.0 * N * C * OC, by = 4.0 * (N * C + N * OC) + wbytes(w);
    if (w->dtype == LP_DTYPE_BF16 && (w->bf16t || !K->qmatmul_backward)) {
        /* training: bf16 dY @ W on W^T's panels (CPU) or the device's bf16 copy */
        LP_OP_BEGIN("lp::bf16_gemm_backward_dx", fl, by, 3, N, C, OC);
        return K->bf16_matmul_backward(dinp, NULL, dout, NULL, w, N, C, OC);
    }
    if (!K->qmatmul_backward) // a device without a quantized GEMM (as the forward)
        return lp_qmatmul_backward_eager(dinp, dout, w, N, C, OC);
    if (w->dtype == LP_DTYPE_NF4) {
        LP_OP_BEGIN("lp::nf4_matmul_backward", fl, by, 3, N, C, OC);
        return K->qmatmul_backward(dinp, dout, w, N, C, OC);
    } else if (w->dtype == LP_DTYPE_BF16) {
        LP_OP_BEGIN("lp::bf16_matmul_backward", fl, by, 3, N, C, OC);
        return K->qmatmul_backward(dinp, dout, w, N, C, OC);
    } else if (w->dtype == LP_DTYPE_F32) {
        LP_OP_BEGIN("lp::f32_packed_matmul_backward", fl, by, 3, N, C, OC);
        return K->qmatmul_backward(dinp, dout, w, N, C, OC);
    } else if (w->dtype == LP_DTYPE_GGML) {
        LP_OP_BEGIN("lp::ggml_matmul_backward", fl, by, 3, N, C, OC);
        return K->qmatmul_backward(dinp, dout, w, N, C, OC);
    } else {
        LP_OP_BEGIN("lp::int8_matmul_backward", fl, by, 3, N, C, OC);
        return K->qmatmul_backward(dinp, dout, w, N, C, OC);
    }
}

lp_status lp_bf16_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                  const lp_qweight *w, int64_t N, int64_t C, int64_t OC)
{
    double fl = 2.0 * N * C * OC * ((dinp != NULL) + (dweight != NULL)),
           by = 4.0 * (N * OC + (dinp ? N * C : 0) + (dweight ? N * C + 2 * OC * C : 0)) + wbytes(w);
    LP_OP_BEGIN("lp::bf16_gemm_backward", fl, by, 3, N, C, OC);
    return K->bf16_matmul_backward(dinp, dweight, dout, inp, w, N, C, OC);
}

void lp_qweight_repack_bf16(lp_qweight *q, const float *w)
{
    const double n = (double)q->rows * (double)q->cols;
    LP_OP_BEGIN("lp::bf16_repack", 0.0, 4.0 * n + (double)lp_qweight_nbytes(q), 2, q->rows, q->cols);
    K->bf16_repack(q, w);
}

/* The whole weight as f32 in a TEMPORARY buffer of the active device (the eager path's cost,
 * by design; on a device without a quantized GEMM, its path). */
static float *dequant_full(const lp_qweight *w)
{
    float *wf =
        lp_kernels_dev_scratch((size_t)w->n * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "dequantized weight");
    if (wf)
        lp_qweight_dequantize(wf, w, 0, w->n);
    return wf;
}

lp_status lp_qmatmul_forward_eager(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                   int64_t N, int64_t C, int64_t OC)
{
    if (!w || w->rows != OC || w->cols != C)
        return lp_err(LP_STATUS_INVALID_ARG, "qmatmul_forward_eager: weight shape is not [%lld, %lld]",
                      (long long)OC, (long long)C);
    float *wf = dequant_full(w);
    if (!wf)
        return LP_STATUS_NO_MEMORY;
    lp_matmul_forward(out, inp, wf, bias, N, C, OC);
    lp_kernels_dev_free(wf);
    return LP_OK;
}

lp_status lp_qmatmul_backward_eager(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                    int64_t OC)
{
    if (!w || w->rows != OC || w->cols != C)
        return lp_err(LP_STATUS_INVALID_ARG, "qmatmul_backward_eager: weight shape is not [%lld, %lld]",
                      (long long)OC, (long long)C);
    float *wf = dequant_full(w);
    if (!wf)
        return LP_STATUS_NO_MEMORY;
    lp_matmul_backward(dinp, NULL, NULL, dout, NULL, wf, N, C, OC);
    lp_kernels_dev_free(wf);
    return LP_OK;
}

void lp_add_inplace(float *y, const float *x, int64_t n)
{
    LP_OP_BEGIN("lp::add", 1.0 * n, 12.0 * n, 1, n);
    K->add_inplace(y, x, n);
}

static double lora_fwd_flops(const lp_lora_base *b, int64_t N, int64_t C, int64_t OC, int64_t r)
{
    return 2.0 * N * C * OC + 2.0 * N * C * r + 2.0 * N * r * OC + 2.0 * N * OC +
           (b && b->bias ? 1.0 * N * OC : 0.0);
}

lp_status lp_lora_forward(float *out, float *u, uint8_t *keep, const float *inp, const lp_lora_base *base,
                          const float *A, const float *B, float s, float p, lp_rng *rng, int64_t N, int64_t C,
                          int64_t OC, int64_t r)
{
    double fl = lora_fwd_flops(base, N, C, OC, r);
    double by =
        4.0 * (N * C + N * OC + N * r + r * C + OC * r) + (base && base->q ? wbytes(base->q) : 4.0 * C * OC);
    LP_OP_BEGIN("lp::lora_linear_forward", fl, by, 4, N, C, OC, r);
    return K->lora_forward(out, u, keep, inp, base, A, B, s, p, rng, N, C, OC, r);
}

lp_status lp_lora_backward(float *dinp, float *dA, float *dB, const float *dout, const float *inp,
                           const float *u, const uint8_t *keep, const lp_lora_base *base, const float *A,
                           const float *B, float s, float p, int64_t N, int64_t C, int64_t OC, int64_t r)
{
    double fl = 2.0 * N * OC * r + (dB ? 2.0 * N * OC * r : 0.0) + (dA ? 2.0 * N * r * C : 0.0) +
                (dinp ? 2.0 * N * C * OC + 2.0 * N * r * C : 0.0);
    double by = 4.0 * (2 * N * C + N * OC + N * r + 2 * r * C + 2 * OC * r) +
                (base && base->q ? wbytes(base->q) : 4.0 * C * OC);
    LP_OP_BEGIN("lp::lora_linear_backward", fl, by, 4, N, C, OC, r);
    return K->lora_backward(dinp, dA, dB, dout, inp, u, keep, base, A, B, s, p, N, C, OC, r);
}

/* y (n) = s * x (n), as its own op so the eager profile shows the scaling. */
static void scaled_copy(float *y, const float *x, int64_t n, float s)
{
    LP_OP_BEGIN("lp::mul", 1.0 * n, 8.0 * n, 1, n);
    if (y != x)
        lp_kernels_copy(y, x, (size_t)n * sizeof(float)); // memcpy on the CPU
    K->scale(y, n, s);
}

lp_status lp_lora_forward_eager(float *out, float *u, uint8_t *keep, const float *inp,
                                const lp_lora_base *base, const float *A, const float *B, float s, float p,
                                lp_rng *rng, int64_t N, int64_t C, int64_t OC, int64_t r)
{
    lp_status st = lp_k_lora_check(base, p, keep, rng, C, OC, r, true);
    if (st || N <= 0)
        return st;
    // the active device's memory (lp_alloc on the CPU): the eager path also runs LoRA on a GPU;
    // every scratch buffer here is written whole before it is read
    float *xd = NULL, *v = lp_kernels_dev_scratch((size_t)(N * OC) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                                                  "lora_B out");
    if (!v)
        return LP_STATUS_NO_MEMORY;
    if (p > 0.0f) {
        xd = lp_kernels_dev_scratch((size_t)(N * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                                    "lora dropout out");
        if (!xd) {
            lp_kernels_dev_free(v);
            return LP_STATUS_NO_MEMORY;
        }
        lp_dropout_forward(xd, keep, inp, N * C, p, rng);
    }
    lp_matmul_forward(u, xd ? xd : inp, A, NULL, N, C, r); // lora_A
    lp_matmul_forward(v, u, B, NULL, N, r, OC);            // lora_B
    scaled_copy(v, v, N * OC, s);
    if (base->weight)
        lp_matmul_forward(out, inp, base->weight, base->bias, N, C, OC);
    else if (!K->qmatmul_forward) // a device: its bf16 GEMM, or its own dequantize + f32 GEMM
        st = lp_qmatmul_forward(out, inp, base->q, base->bias, N, C, OC);
    else
        st = lp_qmatmul_forward_eager(out, inp, base->q, base->bias, N, C, OC);
    if (!st)
        lp_add_inplace(out, v, N * OC);
    lp_kernels_dev_free(xd);
    lp_kernels_dev_free(v);
    return st;
}

lp_status lp_lora_backward_eager(float *dinp, float *dA, float *dB, const float *dout, const float *inp,
                                 const float *u, const uint8_t *keep, const lp_lora_base *base,
                                 const float *A, const float *B, float s, float p, int64_t N, int64_t C,
                                 int64_t OC, int64_t r)
{
    lp_status st = lp_k_lora_check(base, p, keep, NULL, C, OC, r, false);
    if (st || N <= 0)
        return st;
    float *dv =
        lp_kernels_dev_scratch((size_t)(N * OC) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "lora dv");
    float *du = lp_kernels_dev_scratch((size_t)(N * r) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "lora du");
    float *dxd =
        lp_kernels_dev_scratch((size_t)(N * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "lora dx");
    float *xd = p > 0.0f ? lp_kernels_dev_scratch((size_t)(N * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                                                  "lora dropout out")
                         : NULL;
    if (!dv || !du || !dxd || (p > 0.0f && !xd)) {
        st = LP_STATUS_NO_MEMORY;
        goto done;
    }
    scaled_copy(dv, dout, N * OC, s);
    lp_matmul_backward(du, dB, NULL, dv, u, B, N, r, OC); // du = dv @ B; dB += dv^T @ u
    if (xd)                                               // the dropped input again, from the mask
        lp_dropout_backward(xd, inp, keep, N * C, p);
    lp_matmul_backward(dinp ? dxd : NULL, dA, NULL, du, xd ? xd : inp, A, N, C,
                       r); // dxd = du @ A; dA += du^T @ xd
    if (dinp) {
        if (base->weight)
            lp_matmul_backward(dinp, NULL, NULL, dout, inp, base->weight, N, C, OC);
        else if (!K->qmatmul_backward) // as the forward
            st = lp_qmatmul_backward(dinp, dout, base->q, N, C, OC);
        else
            st = lp_qmatmul_backward_eager(dinp, dout, base->q, N, C, OC);
        if (!st && p > 0.0f)
            lp_dropout_backward(dxd, dxd, keep, N * C, p);
        if (!st)
            lp_add_inplace(dinp, dxd, N * C);
    }
done:
    lp_kernels_dev_free(xd);
    lp_kernels_dev_free(dxd);
    lp_kernels_dev_free(du);
    lp_kernels_dev_free(dv);
    return st;
}
