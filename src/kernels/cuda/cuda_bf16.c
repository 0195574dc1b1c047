/* --dtype bf16 on the GPU, autocast semantics as ../cpu/bf16_train.c: the f32 master weight
 * W (rows = OC, cols = C) is what AdamW updates; its bf16 copy (lp_cuda_qweight_bf16_train)
 * is one row-major device array q->bf16, rounded again by bf16_repack after each step. Per
 * call the activation (or output gradient) is rounded to bf16 into TEMPORARY scratch with the
 * CPU's rule, and cuBLASLt multiplies bf16 x bf16 with f32 accumulation and f32 results:
 *   forward  out (N,OC)  = x (N,C) @ W^T (+ bias, f32)
 *   backward dX (N,C)    = dY (N,OC) @ W
 *            dW (OC,C)  += dY^T @ X
 * The same bf16 operands as the CPU's, so the two differ by f32 summation order only. One
 * row-major copy serves both orientations (cuBLASLt transposes as it reads). */
#include "cuda_kernels.h"

static lp_status bad_weight(const char *op, int64_t C, int64_t OC)
{
    return lp_err(LP_STATUS_INVALID_ARG, "cuda %s: the weight is not a device bf16 [%lld, %lld] copy", op,
                  (long long)OC, (long long)C);
}

static bool weight_ok(const lp_qweight *w, int64_t C, int64_t OC)
{
    return w && w->dtype == LP_DTYPE_BF16 && w->bf16 && w->rows == OC && w->cols == C;
}

/* n values of x rounded to bf16 in TEMPORARY scratch (NULL and lp_err when out of memory) */
static uint16_t *rounded(const float *x, int64_t n, const char *what)
{
    uint16_t *b = lp_cu_alloc_get(&lp_cu_ctx()->alloc, (size_t)(n > 0 ? n : 1) * sizeof(uint16_t),
                                  LP_MEM_CATEGORY_TEMPORARY, what);
    if (b)
        lp_cu_round_bf16(b, x, n);
    return b;
}

static void put(void *p)
{
    if (p)
        (void)lp_cu_alloc_put(&lp_cu_ctx()->alloc, p); /* reused only by work queued after this */
}

lp_status lp_cu_bf16_matmul_forward(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                    int64_t N, int64_t C, int64_t OC)
{
    if (!weight_ok(w, C, OC))
        return bad_weight("bf16_matmul_forward", C, OC);
    if (!lp_cu_ctx())
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda bf16_matmul_forward: no CUDA context");
    if (N == 0 || OC == 0)
        return LP_OK;
    uint16_t *xb = rounded(inp, N * C, "bf16 matmul input");
    if (!xb)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "cuda bf16_matmul_forward: %lld x %lld input", (long long)N,
                           (long long)C);
    lp_status st = lp_cu_linear_bf16(out, xb, w->bf16, bias, N, C, OC);
    put(xb);
    return st;
}

lp_status lp_cu_bf16_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                     const lp_qweight *w, int64_t N, int64_t C, int64_t OC)
{
    if (!weight_ok(w, C, OC))
        return bad_weight("bf16_matmul_backward", C, OC);
    if (!lp_cu_ctx())
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda bf16_matmul_backward: no CUDA context");
    if (N == 0 || (!dinp && !dweight))
        return LP_OK;
    uint16_t *db = rounded(dout, N * OC, "bf16 matmul output gradient"), *xb = NULL;
    if (!db)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "cuda bf16_matmul_backward: %lld x %lld gradient",
                           (long long)N, (long long)OC);
    lp_status st = LP_OK;
    if (dinp) /* dX (N,C) = dY (N,OC) @ W (OC,C) */
        st = lp_cu_gemm_bf16(false, false, N, C, OC, 1.0f, db, OC, w->bf16, C, 0.0f, dinp, C);
    if (st == LP_OK && dweight) { /* dW (OC,C) += dY^T (OC,N) @ X (N,C) */
        if (!(xb = rounded(inp, N * C, "bf16 matmul input")))
            st = lp_err_wrap(LP_STATUS_NO_MEMORY, "cuda bf16_matmul_backward: %lld x %lld input",
                             (long long)N, (long long)C);
        else
            st = lp_cu_gemm_bf16(true, false, OC, C, N, 1.0f, db, OC, xb, C, 1.0f, dweight, C);
    }
    put(xb);
    put(db);
    return st;
}

void lp_cu_bf16_repack(lp_qweight *q, const float *w)
{
    lp_cu_round_bf16(q->bf16, w, q->rows * q->cols);
}
