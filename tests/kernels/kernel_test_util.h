/* Helpers for the kernel tests: buffers with guard bytes on both sides (checked after
 * every op), NaN-filled outputs (so an element an op forgot to write shows up), seeded
 * random fills, and an error report that prints the worst element. */
#ifndef LP_KERNEL_TEST_UTIL_H
#define LP_KERNEL_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/kernels.h"

/* The op-table tests run once per ISA level (ctest entries <test>_isa_<level> set LP_ISA):
 * returns 77, ctest's skip, when this CPU lacks the level; 1 when LP_ISA is not a level or
 * the optimized table is not the one asked for; else 0, after saying which level runs. */
static inline int kt_isa_init(void)
{
    lp_status st = lp_kernels_init();
    if (st == LP_STATUS_UNSUPPORTED) {
        printf("skipped: %s\n", lp_err_msg());
        return 77;
    }
    if (st != LP_OK) {
        fprintf(stderr, "%s\n", lp_err_msg());
        return 1;
    }
    const char *want = getenv("LP_ISA"), *got = lp_kernels_table(LP_KERNELS_IMPL_OPT)->isa;
    if (want && *want && strcmp(want, got)) {
        fprintf(stderr, "LP_ISA=%s but the optimized table is %s\n", want, got);
        return 1;
    }
    printf("optimized kernels: %s (CPU runs up to %s)\n", got, lp_isa_name(lp_isa_detect()));
    return 0;
}

#define KT_GUARD 64
#define KT_MAX_BUFS 64

typedef struct kt_buf {
    uint8_t *base;
    size_t bytes;
} kt_buf;

static kt_buf kt_bufs[KT_MAX_BUFS];
static int kt_nbufs;
static uint32_t kt_seed = 1;

static inline uint32_t kt_rand(void)
{
    kt_seed = kt_seed * 1664525u + 1013904223u;
    return kt_seed >> 8;
}

static inline float kt_uniform(float lo, float hi) { return lo + (hi - lo) * (float)kt_rand() / 16777216.0f; }

/* bytes of memory between two guard zones of 0xA5; NaN-filled when nan_fill (floats). */
static inline void *kt_alloc(size_t bytes)
{
    if (kt_nbufs >= KT_MAX_BUFS)
        abort();
    uint8_t *b = malloc(bytes + 2 * KT_GUARD);
    if (!b)
        abort();
    memset(b, 0xA5, bytes + 2 * KT_GUARD);
    kt_bufs[kt_nbufs++] = (kt_buf){b, bytes};
    return b + KT_GUARD;
}

static inline float *kt_nan(int64_t n)
{
    float *p = kt_alloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static inline float *kt_rand_f(int64_t n, float lo, float hi)
{
    float *p = kt_alloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = kt_uniform(lo, hi);
    return p;
}

static inline float *kt_copy(const float *src, int64_t n)
{
    float *p = kt_alloc((size_t)n * sizeof(float));
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

/* Returns the number of corrupted guard zones, then frees every buffer. */
static inline int kt_release(const char *what)
{
    int bad = 0;
    for (int i = 0; i < kt_nbufs; i++) {
        uint8_t *b = kt_bufs[i].base;
        for (size_t j = 0; j < KT_GUARD; j++)
            if (b[j] != 0xA5 || b[KT_GUARD + kt_bufs[i].bytes + j] != 0xA5) {
                fprintf(stderr, "  %s: guard bytes of buffer %d overwritten\n", what, i);
                bad++;
                break;
            }
        free(b);
    }
    kt_nbufs = 0;
    return bad;
}

/* |a - b| <= atol + rtol * |b| everywhere, and no NaN (unless both are NaN and allow_nan).
 * Prints the worst element on failure; returns 1 on failure. */
static inline int kt_close(const char *what, const float *a, const float *b, int64_t n, double atol, double rtol)
{
    double worst = 0.0;
    int64_t wi = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            fprintf(stderr, "  %s: NaN at %lld (got %g, want %g)\n", what, (long long)i, (double)a[i], (double)b[i]);
            return 1;
        }
        double e = fabs((double)a[i] - b[i]) / (atol + rtol * fabs((double)b[i]));
        if (e > worst)
            worst = e, wi = i;
    }
    if (worst > 1.0) {
        fprintf(stderr, "  %s: element %lld: got %.9g, want %.9g (%.2fx the bound atol %g rtol %g)\n", what,
                (long long)wi, (double)a[wi], (double)b[wi], worst, atol, rtol);
        return 1;
    }
    return 0;
}

#endif
