/* GEMMs through cuBLASLt: the table's sgemm (f32, or TF32 when the context asks) and the
 * bf16 GEMM (bf16 inputs, f32 accumulation and output). loupe's matrices are row-major and
 * cuBLASLt's column-major, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the same
 * buffers, operands swapped, no copies. Pointer alignments are passed to the heuristic
 * (which otherwise assumes 256-byte aligned operands and may pick a kernel that faults on a
 * view into a buffer). Descriptors are made per call (a few microseconds); a cache keyed by
 * shape is the next step if launches ever show in a profile. */
#include <stdint.h>

#include "cuda_kernels.h"

static uint32_t align_of(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a)
        a /= 2;
    return a;
}

static lp_status lt_gemm(const char *op, cudaDataType_t ab, cublasComputeType_t compute, bool trans_a, bool trans_b,
                         int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda, const void *B,
                         int64_t ldb, float beta, float *C, int64_t ldc)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    if (!x)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: no CUDA context (call lp_backend_cuda first)", op);
    if (M == 0 || N == 0)
        return LP_OK;
    if (K == 0) { /* C = beta * C: nothing to multiply */
        lp_cu_scale_2d(C, M, N, ldc, beta);
        return LP_OK;
    }
    /* first cuBLAS operand: our B, stored column-major as (N,K) or, transposed, (K,N) */
    cublasOperation_t ta = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t a_rows = trans_b ? K : N, a_cols = trans_b ? N : K;
    uint64_t b_rows = trans_a ? M : K, b_cols = trans_a ? K : M;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s;
    const char *call = "cublasLtMatmulDescCreate";
#define LT(c)                                                                                                   \
    do {                                                                                                        \
        call = #c;                                                                                              \
        if ((s = (c)) != CUBLAS_STATUS_SUCCESS)                                                                 \
            goto done;                                                                                          \
    } while (0)
    LT(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT(cublasLtMatrixLayoutCreate(&la, ab, a_rows, a_cols, ldb));
    LT(cublasLtMatrixLayoutCreate(&lb, ab, b_rows, b_cols, lda));
    LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, (uint64_t)N, (uint64_t)M, ldc));
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = x->workspace_bytes;
    uint32_t al_a = align_of(B), al_b = align_of(A), al_c = align_of(C);
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(x->lt, desc, la, lb, lc, lc, pref, 1, &res, &nres));
    if (nres == 0) {
        call = "cublasLtMatmulAlgoGetHeuristic (no algorithm for this shape)";
        s = CUBLAS_STATUS_NOT_SUPPORTED;
        goto done;
    }
    LT(cublasLtMatmul(x->lt, desc, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &res.algo, x->workspace, ws,
                      x->stream));
#undef LT
done:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (desc)
        cublasLtMatmulDescDestroy(desc);
    if (s != CUBLAS_STATUS_SUCCESS)
        return lp_cu_fail_blas(op, call, s);
    return LP_OK;
}

void lp_cu_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    lp_cuda_ctx *x = lp_cu_ctx();
    cublasComputeType_t compute = x && x->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    (void)lt_gemm("sgemm", CUDA_R_32F, compute, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

lp_status lp_cu_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                          int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    return lt_gemm("gemm_bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                   beta, C, ldc);
}
