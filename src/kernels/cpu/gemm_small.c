/* GEMM with few rows against a weight in PyTorch layout, C (M,N) = alpha A (M,K) B^T + beta C
 * with B stored (N,K): what every Linear does when decoding (M = sequences in the batch) or
 * prefilling a short prompt. OpenBLAS packs all of B for each call, which for M this small
 * triples the memory traffic of an operation that is nothing but that traffic; here each
 * weight row is read once, straight from memory, and dotted with the M rows of A, which stay
 * in cache.
 *
 * Threads: one parallel region per call, each thread one contiguous, equal range of B's rows,
 * so each streams its own part of the weight with no scheduling and the threads finish
 * together. Fixed 64-row tasks dealt out statically left a 192-row k / v projection 2:1
 * between two threads and a 576-row q / o / down projection 5:4 (SmolLM2 decode: ~7 % of a
 * token's GEMV time waiting at the join).
 *
 * Within a range one row at a time, which the hardware prefetchers see as one sequential
 * stream. Measured and not kept (bench_tg, SmolLM2 F32, one thread, Zen 5): four rows at a
 * time (four FMA chains, one reduction) 5 % more CPU a token, and software prefetch 1-4 KiB
 * ahead (with four rows up to 15 % more; with one row within +-2 %). LP_SGEMV_PF=BYTES turns
 * the prefetch on, for measuring (two threads on a quiet machine not yet measured). */
#include <stdlib.h>

#include <omp.h>

#include "cpu_kernels.h"
#include "simd.h"

/* Software prefetch distance in floats, from LP_SGEMV_PF (bytes; unset or 0: none), read
 * once (threads racing to the first call store the same value). */
static int64_t pf_floats(void)
{
    static _Atomic int cached = -1;
    int v = cached;
    if (v < 0) {
        const char *e = getenv("LP_SGEMV_PF");
        v = e && *e ? atoi(e) : 0;
        v = v < 0 ? 0 : v - v % 64; /* whole cache lines */
        cached = v;
    }
    return v / (int64_t)sizeof(float);
}

#if defined(LP_HAVE_AVX512)
#define VW 16
typedef __m512 vf;
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUM(v) _mm512_reduce_add_ps(v)
#elif defined(LP_HAVE_AVX2)
#define VW 8
typedef __m256 vf;
#define VZERO() _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSUM(v) lp_hsum256(v)
#endif

#if defined(VW)
static inline void pf(const float *p)
{
    _mm_prefetch((const char *)p, _MM_HINT_T0);
}

static inline float dot1(const float *restrict a, const float *restrict b, int64_t K, int64_t pfd)
{
    vf s0 = VZERO(), s1 = VZERO();
    int64_t k = 0;
    if (pfd)
        for (; k + 2 * VW <= K; k += 2 * VW) {
            for (int64_t c = 0; c < 2 * VW; c += 64 / (int64_t)sizeof(float))
                pf(b + k + pfd + c);
            s0 = VFMA(VLOAD(a + k), VLOAD(b + k), s0);
            s1 = VFMA(VLOAD(a + k + VW), VLOAD(b + k + VW), s1);
        }
    for (; k + 2 * VW <= K; k += 2 * VW) { // two chains hide the FMA latency
        s0 = VFMA(VLOAD(a + k), VLOAD(b + k), s0);
        s1 = VFMA(VLOAD(a + k + VW), VLOAD(b + k + VW), s1);
    }
    for (; k + VW <= K; k += VW)
        s0 = VFMA(VLOAD(a + k), VLOAD(b + k), s0);
    float s = VSUM(VADD(s0, s1));
    for (; k < K; k++)
        s += a[k] * b[k];
    return s;
}
#else
static inline float dot1(const float *restrict a, const float *restrict b, int64_t K, int64_t pfd)
{
    (void)pfd;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < K; k++)
        s += a[k] * b[k];
    return s;
}
#endif

static inline void put(float *c, float s, float alpha, float beta)
{
    *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
}

/* rows [j0, j1) of C for every row of A: each weight row streamed once (prefetching ahead
 * for the first row of A), dotted with A's rows from cache */
static void rows(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int64_t pfd)
{
    for (int64_t j = j0; j < j1; j++)
        for (int64_t i = 0; i < M; i++)
            put(C + i * ldc + j, dot1(A + i * lda, B + j * ldb, K, i == 0 ? pfd : 0), alpha, beta);
}

void lp_k__sgemm_small_m(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc)
{
    const int64_t pfd = pf_floats();
    int nth = N * K > 32768 ? omp_get_max_threads() : 1;
    if (nth > N)
        nth = (int)N;
    if (nth <= 1) {
        rows(M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pfd);
        return;
    }
#pragma omp parallel num_threads(nth)
    {
        int64_t lo, hi;
        lp_k_split(N, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        rows(M, lo, hi, K, alpha, A, lda, B, ldb, beta, C, ldc, pfd);
    }
}
