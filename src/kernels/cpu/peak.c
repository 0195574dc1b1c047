/* Machine ceilings for `loupe peak` and MFU: the f32 FMA peak (independent register-
 * resident FMA chains, one loop per thread), OpenBLAS sgemm at a large square size, and
 * memory bandwidth by the STREAM triad a = b + s*c (24 bytes per element counted, no
 * write-allocate, as STREAM does). The FMA chains themselves are per ISA level
 * (peak_fma.c): the peak is that of the level the kernels run at. */
#include <cblas.h>
#include <omp.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
            acc += lp_k_fma_chain(bits, iters);
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
    return fma_peak(lp_k_fma_bits(), lp_threads_get(), seconds > 0 ? seconds : 0.25, &sink);
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
    out->vector_bits = lp_k_fma_bits();
    snprintf(out->isa, sizeof out->isa, "%s", lp_isa_name(lp_kernels_isa()));
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
