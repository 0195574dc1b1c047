/* GEMM with few rows against a weight in PyTorch layout, C (M,N) = alpha A (M,K) B^T + beta C
 * with B stored (N,K): what every Linear does when decoding (M = sequences in the batch) or
 * prefilling a short prompt. OpenBLAS packs all of B for each call, which for M this small
 * triples the memory traffic of an operation that is nothing but that traffic; here each
 * weight row is read once, straight from memory, and dotted with the M rows of A, which stay
 * in cache. Threads split N (the weight's rows) into contiguous ranges, so each streams its
 * own part of the weight and no thread waits for another. */
#include "cpu_kernels.h"
#include "simd.h"

/* Rows of B per scheduling unit: enough to amortize the loop, small enough to balance. */
#define ROWS_PER_TASK 64

static inline float dot(const float *restrict a, const float *restrict b, int64_t K)
{
#if defined(LP_HAVE_AVX512)
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) { // two chains hide the FMA latency
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), s1);
    }
    for (; k + 16 <= K; k += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
    if (k < K) {
        const __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k), _mm512_maskz_loadu_ps(m, b + k), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
#elif defined(LP_HAVE_AVX2)
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
    }
    float s = lp_hsum256(_mm256_add_ps(s0, s1));
    for (; k < K; k++)
        s += a[k] * b[k];
    return s;
#else
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < K; k++)
        s += a[k] * b[k];
    return s;
#endif
}

void lp_k__sgemm_small_m(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc)
{
    const int64_t tasks = (N + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
#pragma omp parallel for schedule(static) if (N * K > 32768)
    for (int64_t t = 0; t < tasks; t++) {
        const int64_t j1 = (t + 1) * ROWS_PER_TASK < N ? (t + 1) * ROWS_PER_TASK : N;
        for (int64_t j = t * ROWS_PER_TASK; j < j1; j++) {
            const float *b = B + j * ldb;
            for (int64_t i = 0; i < M; i++) {
                const float s = alpha * dot(A + i * lda, b, K);
                C[i * ldc + j] = beta == 0.0f ? s : s + beta * C[i * ldc + j];
            }
        }
    }
}
