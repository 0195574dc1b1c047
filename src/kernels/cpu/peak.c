/* Machine ceilings for `loupe peak` and MFU: the f32 FMA peak (independent register-
 * resident FMA chains, one loop per thread), OpenBLAS sgemm at a large square size, and
 * memory bandwidth by the STREAM triad a = b + s*c (24 bytes per element counted, no
 * write-allocate, as STREAM does). */
#include <cblas.h>
#include <omp.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 12 independent chains cover FMA latency (4 cycles) times two FMA pipes with room.
 * Returns a float sink so the compiler cannot drop the work. One body per vector width. */
#define FMA_CHAIN(fname, vec, VSET, VFMA, VADD, VSTORE, LANES)                                                   \
    static float fname(int64_t iters)                                                                           \
    {                                                                                                           \
        vec a0 = VSET(1.0f), a1 = VSET(1.1f), a2 = VSET(1.2f), a3 = VSET(1.3f), a4 = VSET(1.4f);                \
        vec a5 = VSET(1.5f), a6 = VSET(1.6f), a7 = VSET(1.7f), a8 = VSET(1.8f), a9 = VSET(1.9f);                \
        vec a10 = VSET(2.0f), a11 = VSET(2.1f);                                                                 \
        const vec b = VSET(0.999999f), c = VSET(1e-6f);                                                         \
        for (int64_t i = 0; i < iters; i++) {                                                                   \
            a0 = VFMA(a0, b, c), a1 = VFMA(a1, b, c), a2 = VFMA(a2, b, c), a3 = VFMA(a3, b, c);                 \
            a4 = VFMA(a4, b, c), a5 = VFMA(a5, b, c), a6 = VFMA(a6, b, c), a7 = VFMA(a7, b, c);                 \
            a8 = VFMA(a8, b, c), a9 = VFMA(a9, b, c), a10 = VFMA(a10, b, c), a11 = VFMA(a11, b, c);             \
            __asm__ volatile("" ::: "memory"); /* keep the loop as written */                                   \
        }                                                                                                       \
        vec s = VADD(VADD(VADD(a0, a1), VADD(a2, a3)), VADD(VADD(a4, a5), VADD(a6, a7)));                       \
        s = VADD(s, VADD(VADD(a8, a9), VADD(a10, a11)));                                                        \
        float t[LANES], sum = 0.0f;                                                                             \
        VSTORE(t, s);                                                                                           \
        for (int i = 0; i < LANES; i++)                                                                         \
            sum += t[i];                                                                                        \
        return sum;                                                                                             \
    }

#define SCALAR_SET(x) (x)
#define SCALAR_FMA(a, b, c) ((a) * (b) + (c))
#define SCALAR_ADD(a, b) ((a) + (b))
#define SCALAR_STORE(t, v) ((t)[0] = (v))
FMA_CHAIN(fma_chain32, float, SCALAR_SET, SCALAR_FMA, SCALAR_ADD, SCALAR_STORE, 1)
#if defined(__AVX2__) && defined(__FMA__)
FMA_CHAIN(fma_chain256, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps, 8)
#endif
#if defined(__AVX512F__)
FMA_CHAIN(fma_chain512, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps, 16)
#endif

static float fma_chain(int bits, int64_t iters)
{
#if defined(__AVX512F__)
    if (bits == 512)
        return fma_chain512(iters);
#endif
#if defined(__AVX2__) && defined(__FMA__)
    if (bits == 256)
        return fma_chain256(iters);
#endif
    return fma_chain32(iters);
}

static int widest_bits(void)
{
#if defined(__AVX512F__)
    return 512;
#elif defined(__AVX2__) && defined(__FMA__)
    return 256;
#else
    return 32;
#endif
}

/* All threads run FMA chains over the same time window; each keeps the best of many short
 * runs (about 2 ms, so that on a busy machine some run fits inside one scheduler slice)
 * timed on its own, and the peak is the sum of the per-thread bests, in GFLOP/s. */
static double fma_peak(int bits, int threads, double seconds, volatile float *sink)
{
    double total = 0.0;
    float acc = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total, acc)
    {
        int64_t iters = 1 << 12;
        double best = 0.0, t_end = now_s() + seconds;
        do {
            double t0 = now_s();
            acc += fma_chain(bits, iters);
            double dt = now_s() - t0;
            if (dt < 2e-3) {
                iters *= 2;
                continue;
            }
            double g = 12.0 * 2.0 * (bits / 32) * (double)iters / dt * 1e-9;
            if (g > best)
                best = g;
        } while (now_s() < t_end);
        total += best;
    }
    *sink += acc;
    return total;
}

double lp_peak_fma_gflops(double seconds)
{
    volatile float sink = 0.0f;
    return fma_peak(widest_bits(), lp_threads_get(), seconds > 0 ? seconds : 0.25, &sink);
}

lp_status lp_peak_measure(lp_peak_result *out, double seconds, int64_t sgemm_n)
{
    memset(out, 0, sizeof *out);
    if (seconds <= 0)
        seconds = 1.0;
    if (sgemm_n <= 0)
        sgemm_n = 2048;
    int threads = lp_threads_get();
    volatile float sink = 0.0f;
    out->threads = threads;
    out->vector_bits = widest_bits();
    out->fma_gflops_1t = fma_peak(out->vector_bits, 1, seconds / 2, &sink);
    out->fma_gflops = fma_peak(out->vector_bits, threads, seconds, &sink);
    out->fma256_gflops = out->vector_bits > 256 ? fma_peak(256, threads, seconds / 2, &sink) : out->fma_gflops;
    snprintf(out->blas_core, sizeof out->blas_core, "%s", lp_threads_blas_core());

    int64_t n = sgemm_n;
    float *A = lp_alloc((size_t)(n * n) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "peak sgemm A");
    float *Bm = lp_alloc((size_t)(n * n) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "peak sgemm B");
    float *Cm = lp_alloc((size_t)(n * n) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "peak sgemm C");
    if (!A || !Bm || !Cm) {
        lp_free(A), lp_free(Bm), lp_free(Cm);
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "peak: sgemm %lldx%lld", (long long)n, (long long)n);
    }
    for (int64_t i = 0; i < n * n; i++) {
        A[i] = (float)(i % 7) * 0.01f;
        Bm[i] = (float)(i % 5) * 0.02f;
    }
    double best = 0.0, t_end = now_s() + seconds;
    do {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, A, (int)n, Bm, (int)n,
                    0.0f, Cm, (int)n);
        double g = 2.0 * (double)n * n * n / (now_s() - t0) * 1e-9;
        if (g > best)
            best = g;
    } while (now_s() < t_end);
    sink += Cm[n * n - 1];
    out->sgemm_gflops = best;
    out->sgemm_n = n;
    lp_free(A), lp_free(Bm), lp_free(Cm);

    /* Triad over arrays 4x the last-level cache of a typical server (>= 128 MiB total). */
    int64_t m = 16 << 20;
    float *a = lp_alloc((size_t)m * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "peak triad a");
    float *b = lp_alloc((size_t)m * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "peak triad b");
    float *c = lp_alloc((size_t)m * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "peak triad c");
    if (!a || !b || !c) {
        lp_free(a), lp_free(b), lp_free(c);
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "peak: triad arrays");
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; i++) {
        b[i] = 1.0f;
        c[i] = 2.0f;
        a[i] = 0.0f;
    }
    best = 0.0;
    t_end = now_s() + seconds;
    do {
        double t0 = now_s();
        const float s = 3.0f;
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < m; i++)
            a[i] = b[i] + s * c[i];
        double g = 3.0 * 4.0 * (double)m / (now_s() - t0) * 1e-9;
        if (g > best)
            best = g;
    } while (now_s() < t_end);
    sink += a[m / 2];
    out->triad_gbs = best;
    out->triad_bytes = m * 4;
    lp_free(a), lp_free(b), lp_free(c);
    (void)sink;
    return LP_OK;
}
