/* Helpers for the CUDA op tests: the backend (or a skip, exit 77, with lp_backend_cuda's
 * reason), device buffers uploaded from / downloaded to host arrays, a comparison against
 * the CPU reference that prints one line per case (op, shape, worst abs / rel error, the
 * tolerance, PASS/FAIL, device time per call), and a CUDA-event timer.
 *
 *   if ((rc = ct_init()) != 0) return rc;                 // 77: no GPU or no CUDA build
 *   float *h = kt_rand_f(n, -3, 3), *want = kt_nan(n), *got = kt_nan(n);
 *   ct_ref->gelu_forward(want, h, n, LP_GELU_ERF);          // the CPU reference
 *   float *x = ct_up(h, n), *y = ct_dnan(n);
 *   ct_be->ops->gelu_forward(y, x, n, LP_GELU_ERF);         // device pointers
 *   ct_down(got, y, n);
 *   CT_TIME(ms, ct_be->ops->gelu_forward(y, x, n, LP_GELU_ERF));
 *   fails += ct_check("gelu_forward erf", "n=1000", got, want, n, 1e-6, 1e-5, ms);
 *   ct_free_all(); kt_release("gelu");
 */
#ifndef LP_CUDA_TEST_UTIL_H
#define LP_CUDA_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kernels/kernel_test_util.h"
#include "loupe/kernels.h"

static const lp_backend *ct_be;
static const lp_kernel_table *ct_ref;

/* 0 when a CUDA device is there (printed); 77 (ctest's skip) with the reason otherwise. */
static inline int ct_init(void)
{
    lp_status st = lp_backend_cuda(&ct_be);
    if (st != LP_OK) {
        printf("skipped: %s\n", lp_err_msg());
        return 77;
    }
    const lp_cuda_device_info *d = lp_cuda_device_info_get(ct_be);
    printf("device %d: %s, sm_%d%d, %d SMs at %d MHz, %.1f GiB (%.1f free), driver %d, runtime %d\n", d->device,
           d->name, d->cc_major, d->cc_minor, d->sm_count, d->sm_clock_khz / 1000, d->total_mem / 1073741824.0,
           d->free_mem / 1073741824.0, d->driver_version, d->runtime_version);
    ct_ref = lp_kernels_table(LP_KERNELS_IMPL_REF);
    return 0;
}

#define CT_MAX_BUFS 64
static void *ct_bufs[CT_MAX_BUFS];
static int ct_nbufs;

static inline void ct_die(const char *what)
{
    fprintf(stderr, "FATAL: %s: %s\n", what, lp_err_msg());
    exit(1);
}

/* A device buffer of bytes (not initialized). */
static inline void *ct_dalloc(size_t bytes)
{
    if (ct_nbufs >= CT_MAX_BUFS)
        abort();
    void *p = ct_be->alloc_tagged(ct_be->ctx, bytes, LP_MEM_CATEGORY_TEMPORARY, "test buffer");
    if (!p)
        ct_die("device alloc");
    return ct_bufs[ct_nbufs++] = p;
}

static inline void *ct_up_bytes(const void *h, size_t bytes)
{
    void *d = ct_dalloc(bytes);
    if (ct_be->upload(ct_be->ctx, d, h, bytes) != LP_OK)
        ct_die("upload");
    return d;
}

static inline float *ct_up(const float *h, int64_t n)
{
    return ct_up_bytes(h, (size_t)n * sizeof(float));
}

/* A device buffer of n NaNs: an element an op forgets to write shows up. */
static inline float *ct_dnan(int64_t n)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        h[i] = NAN;
    float *d = ct_up(h, n);
    free(h);
    return d;
}

/* An op's pending error (a launch or cuBLASLt failure) is printed and the host copy filled
 * with NaN bytes, so the case fails and the run goes on to the next; a failed copy ends it. */
static inline void ct_down_bytes(void *h, const void *d, size_t bytes)
{
    if (ct_be->sync(ct_be->ctx) != LP_OK) {
        printf("    error: %s\n", lp_err_msg());
        memset(h, 0xFF, bytes);
        return;
    }
    if (ct_be->download(ct_be->ctx, h, d, bytes) != LP_OK)
        ct_die("download");
}

static inline void ct_down(float *h, const float *d, int64_t n)
{
    ct_down_bytes(h, d, (size_t)n * sizeof(float));
}

static inline void ct_free_all(void)
{
    for (int i = 0; i < ct_nbufs; i++)
        ct_be->free(ct_be->ctx, ct_bufs[i]);
    ct_nbufs = 0;
    if (ct_be->sync(ct_be->ctx) != LP_OK) /* e.g. an error of a timed run */
        printf("    error: %s\n", lp_err_msg());
}

/* ms = device time of one run of stmt: one warm-up, then CT_REPS runs between two events. */
#ifndef CT_REPS
#define CT_REPS 10
#endif
#define CT_TIME(ms, stmt)                                                                                       \
    do {                                                                                                        \
        stmt;                                                                                                   \
        if (lp_cuda_timer_start(ct_be) != LP_OK)                                                                \
            ct_die("timer");                                                                                    \
        for (int ct_r_ = 0; ct_r_ < CT_REPS; ct_r_++)                                                           \
            stmt;                                                                                               \
        if (lp_cuda_timer_stop(ct_be, &(ms)) != LP_OK)                                                          \
            ct_die("timer");                                                                                    \
        (ms) /= CT_REPS > 0 ? CT_REPS : 1;                                                                      \
    } while (0)

/* got against want: |got - want| <= atol + rtol |want| everywhere (atol = rtol = 0: equal),
 * NaN exactly where want has NaN. Prints the case's
 * line (and the worst element on failure); returns 1 on failure. ms < 0: not timed. */
static inline int ct_check(const char *op, const char *shape, const float *got, const float *want, int64_t n,
                           double atol, double rtol, double ms)
{
    double worst = 0.0, max_abs = 0.0, max_rel = 0.0;
    int64_t wi = -1, nan_at = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i])) {
            nan_at = i;
            break;
        }
        if (isnan(got[i]))
            continue;
        double d = fabs((double)got[i] - want[i]);
        double r = d / (fabs((double)want[i]) > 1e-30 ? fabs((double)want[i]) : 1e-30);
        double tol = atol + rtol * fabs((double)want[i]);
        double e = tol > 0 ? d / tol : d > 0 ? INFINITY : 0.0; /* tolerance 0: bit for bit */
        max_abs = d > max_abs ? d : max_abs;
        max_rel = r > max_rel && fabs((double)want[i]) > atol ? r : max_rel;
        if (e > worst)
            worst = e, wi = i;
    }
    int fail = nan_at >= 0 || worst > 1.0;
    char t[32] = "-";
    if (ms >= 0)
        snprintf(t, sizeof t, "%.4f ms", ms);
    printf("%-28s %-30s max abs %.3e  max rel %.3e  tol atol %.0e rtol %.0e  %s  %s\n", op, shape, max_abs, max_rel,
           atol, rtol, fail ? "FAIL" : "PASS", t);
    if (nan_at >= 0)
        printf("    NaN at %lld: got %g, want %g\n", (long long)nan_at, (double)got[nan_at], (double)want[nan_at]);
    else if (fail)
        printf("    worst element %lld: got %.9g, want %.9g (%.2fx the bound)\n", (long long)wi, (double)got[wi],
               (double)want[wi], worst);
    fflush(stdout);
    return fail;
}

#endif
