/* GEMM with few rows against a weight in PyTorch layout, C (M,N) = alpha A (M,K) B^T + beta C
 * with B stored (N,K): what every Linear does when decoding (M = sequences in the batch) or
 * prefilling a short prompt. OpenBLAS packs all of B for each call, which for M this small
 * triples the memory traffic of an operation that is nothing but that traffic; here each
 * weight row is read once, straight from memory, and dotted with the M rows of A, which stay
 * in cache.
 *
 * Threads: one parallel region per call, each thread one contiguous, equal range of B's rows
 * (in blocks of RB rows), so each streams its own part of the weight with no scheduling and
 * the threads finish together. Fixed 64-row tasks dealt out statically left a 192-row k / v
 * projection 2:1 between two threads and a 576-row one 5:4 (SmolLM2 decode).
 *
 * Within a range, RB = 4 rows at a time: four independent FMA chains per A row (more loads
 * in flight for the out-of-order core) and one horizontal reduction for the four. The
 * weight is prefetched PF_BYTES ahead in each of the four rows: a decode reads it once, so
 * nothing hides memory latency but the prefetchers, and the hardware ones stop at each 4 KiB
 * page. */
#include <stdlib.h>

#include <omp.h>

#include "cpu_kernels.h"
#include "simd.h"

#define RB 4 /* weight rows per block */

/* Prefetch distance (bytes ahead in each row). LP_SGEMV_PF overrides it (0: none), for
 * measuring only. */
#define PF_BYTES 1024

static int64_t pf_floats(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *e = getenv("LP_SGEMV_PF");
        int v = e && *e ? atoi(e) : PF_BYTES;
        cached = v < 0 ? 0 : v;
    }
    return cached / (int64_t)sizeof(float);
}

static int rb_mode(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *e = getenv("LP_SGEMV_RB");
        cached = e && *e ? atoi(e) : RB;
    }
    return cached;
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

/* s[r] = a . b_r for the RB rows at b (stride ldb), two vectors of k a step, each row its own
 * accumulators; the vector tail of K in plain C. */
static inline void dot_rb(float s[RB], const float *restrict a, const float *restrict b, int64_t ldb, int64_t K,
                          int64_t pfd)
{
    const float *b0 = b, *b1 = b + ldb, *b2 = b + 2 * ldb, *b3 = b + 3 * ldb;
    vf s00 = VZERO(), s01 = VZERO(), s10 = VZERO(), s11 = VZERO();
    vf s20 = VZERO(), s21 = VZERO(), s30 = VZERO(), s31 = VZERO();
    int64_t k = 0;
    if (pfd) {
        for (; k + 2 * VW <= K; k += 2 * VW) {
            /* one prefetch per row per 64-byte line read */
            for (int64_t c = 0; c < 2 * VW; c += 64 / (int64_t)sizeof(float)) {
                pf(b0 + k + pfd + c);
                pf(b1 + k + pfd + c);
                pf(b2 + k + pfd + c);
                pf(b3 + k + pfd + c);
            }
            const vf x0 = VLOAD(a + k), x1 = VLOAD(a + k + VW);
            s00 = VFMA(x0, VLOAD(b0 + k), s00);
            s01 = VFMA(x1, VLOAD(b0 + k + VW), s01);
            s10 = VFMA(x0, VLOAD(b1 + k), s10);
            s11 = VFMA(x1, VLOAD(b1 + k + VW), s11);
            s20 = VFMA(x0, VLOAD(b2 + k), s20);
            s21 = VFMA(x1, VLOAD(b2 + k + VW), s21);
            s30 = VFMA(x0, VLOAD(b3 + k), s30);
            s31 = VFMA(x1, VLOAD(b3 + k + VW), s31);
        }
    }
    for (; k + 2 * VW <= K; k += 2 * VW) {
        const vf x0 = VLOAD(a + k), x1 = VLOAD(a + k + VW);
        s00 = VFMA(x0, VLOAD(b0 + k), s00);
        s01 = VFMA(x1, VLOAD(b0 + k + VW), s01);
        s10 = VFMA(x0, VLOAD(b1 + k), s10);
        s11 = VFMA(x1, VLOAD(b1 + k + VW), s11);
        s20 = VFMA(x0, VLOAD(b2 + k), s20);
        s21 = VFMA(x1, VLOAD(b2 + k + VW), s21);
        s30 = VFMA(x0, VLOAD(b3 + k), s30);
        s31 = VFMA(x1, VLOAD(b3 + k + VW), s31);
    }
    for (; k + VW <= K; k += VW) {
        const vf x0 = VLOAD(a + k);
        s00 = VFMA(x0, VLOAD(b0 + k), s00);
        s10 = VFMA(x0, VLOAD(b1 + k), s10);
        s20 = VFMA(x0, VLOAD(b2 + k), s20);
        s30 = VFMA(x0, VLOAD(b3 + k), s30);
    }
    s[0] = VSUM(VADD(s00, s01));
    s[1] = VSUM(VADD(s10, s11));
    s[2] = VSUM(VADD(s20, s21));
    s[3] = VSUM(VADD(s30, s31));
    for (; k < K; k++) {
        s[0] += a[k] * b0[k];
        s[1] += a[k] * b1[k];
        s[2] += a[k] * b2[k];
        s[3] += a[k] * b3[k];
    }
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
static inline void dot_rb(float s[RB], const float *restrict a, const float *restrict b, int64_t ldb, int64_t K,
                          int64_t pfd)
{
    (void)pfd;
    for (int r = 0; r < RB; r++) {
        float t = 0.0f;
        const float *br = b + r * ldb;
#pragma omp simd reduction(+ : t)
        for (int64_t k = 0; k < K; k++)
            t += a[k] * br[k];
        s[r] = t;
    }
}

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

/* rows [j0, j1) of C for every row of A */
static void rows(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int64_t pfd)
{
    int64_t j = j0;
    for (; rb_mode() == RB && j + RB <= j1; j += RB) {
        const float *b = B + j * ldb;
        for (int64_t i = 0; i < M; i++) {
            float s[RB];
            /* the first row of A streams the block from memory (prefetching ahead); the
             * others find it in L1 / L2 */
            dot_rb(s, A + i * lda, b, ldb, K, i == 0 ? pfd : 0);
            for (int r = 0; r < RB; r++)
                put(C + i * ldc + j + r, s[r], alpha, beta);
        }
    }
    for (; j < j1; j++)
        for (int64_t i = 0; i < M; i++)
            put(C + i * ldc + j, dot1(A + i * lda, B + j * ldb, K, i == 0 ? pfd : 0), alpha, beta);
}

void lp_k__sgemm_small_m(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc)
{
    const int64_t blocks = (N + RB - 1) / RB, pfd = pf_floats();
    int nth = N * K > 32768 ? omp_get_max_threads() : 1;
    if (nth > blocks)
        nth = (int)blocks;
    if (nth <= 1) {
        rows(M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pfd);
        return;
    }
#pragma omp parallel num_threads(nth)
    {
        int64_t lo, hi;
        lp_k_split(blocks, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        rows(M, lo * RB, hi * RB < N ? hi * RB : N, K, alpha, A, lda, B, ldb, beta, C, ldc, pfd);
    }
}
