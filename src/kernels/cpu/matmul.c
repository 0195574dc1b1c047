/* GEMM: the reference is a plain triple loop (double accumulators); the optimized
 * version is OpenBLAS's cblas_sgemm, which runs on our OpenMP pool (see core threads.c). */
#include <cblas.h>

#include "cpu_kernels.h"

void lp_k_sgemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < K; p++) {
                float a = trans_a ? A[p * lda + i] : A[i * lda + p];
                float b = trans_b ? B[j * ldb + p] : B[p * ldb + j];
                acc += (double)a * b;
            }
            float old = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
            C[i * ldc + j] = old + alpha * (float)acc;
        }
}

void lp_k_sgemm_opt(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { /* BLAS would leave C scaled by beta: do the same without calling it */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    if (!trans_a && trans_b && M <= LP_SGEMM_SMALL_M) { // a Linear on a few rows: decoding
        lp_k__sgemm_small_m(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M,
                (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
