/* Helpers for the golden tests: read a tensor of a golden.safetensors file as f32 or i32,
 * and compare a C result with the reference tensor, printing the largest difference.
 *
 * "Relative" is normwise per tensor: max|a-b| / max(max|b|, tiny). The golden.json of each
 * golden records how far torch's own float32 run is from float64 with the same measure
 * (f32_vs_f64 ... max_rel). */
#ifndef LP_GOLDEN_UTIL_H
#define LP_GOLDEN_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/io.h"

/* Floats of a golden tensor (f32 in every golden); NULL when absent or not f32. */
static inline const float *gold_f32(const lp_st_file *f, const char *name, int64_t *numel)
{
    const lp_st_tensor *t = lp_st_find(f, name);
    if (!t || t->dtype != LP_ST_DTYPE_F32)
        return NULL;
    if (numel)
        *numel = (int64_t)t->numel;
    return t->data;
}

/* An integer golden tensor (i64 or i32) converted to a fresh i32 array (caller frees). */
static inline int32_t *gold_i32(const lp_st_file *f, const char *name, int64_t *numel)
{
    const lp_st_tensor *t = lp_st_find(f, name);
    if (!t || (t->dtype != LP_ST_DTYPE_I64 && t->dtype != LP_ST_DTYPE_I32))
        return NULL;
    int32_t *v = malloc((t->numel ? t->numel : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (uint64_t i = 0; i < t->numel; i++) {
        if (t->dtype == LP_ST_DTYPE_I64) {
            int64_t x;
            memcpy(&x, (const char *)t->data + 8 * i, 8);
            v[i] = (int32_t)x;
        } else {
            memcpy(&v[i], (const char *)t->data + 4 * i, 4);
        }
    }
    if (numel)
        *numel = (int64_t)t->numel;
    return v;
}

typedef struct gold_cmp {
    double max_abs, ref_max, rel;
    int64_t worst;
} gold_cmp;

static inline gold_cmp gold_compare(const float *a, const float *b, int64_t n, double tiny)
{
    gold_cmp c = {0, 0, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= c.max_abs)) { // NaN counts as the worst
            c.max_abs = isnan(d) ? INFINITY : d;
            c.worst = i;
        }
        if (fabs((double)b[i]) > c.ref_max)
            c.ref_max = fabs((double)b[i]);
    }
    c.rel = c.max_abs / (c.ref_max > tiny ? c.ref_max : tiny);
    return c;
}

/* The padded batch every classification golden holds: input_ids, attention_mask,
 * token_type_ids (absent for DistilBERT: NULL) and labels, as (B,T) / (B) i32 arrays. */
typedef struct gold_batch {
    int32_t *ids, *mask, *types, *labels;
    int32_t B, T;
} gold_batch;

/* Reads the batch; returns 0, or -1 when input_ids, attention_mask or labels is missing. */
static inline int gold_batch_get(const lp_st_file *g, gold_batch *b)
{
    int64_t n = 0, nl = 0;
    memset(b, 0, sizeof *b);
    b->ids = gold_i32(g, "input_ids", &n);
    b->mask = gold_i32(g, "attention_mask", NULL);
    b->types = gold_i32(g, "token_type_ids", NULL);
    b->labels = gold_i32(g, "labels", &nl);
    if (!b->ids || !b->mask || !b->labels || nl <= 0)
        return -1;
    b->B = (int32_t)nl;
    b->T = (int32_t)(n / nl);
    return 0;
}

static inline void gold_batch_free(gold_batch *b)
{
    free(b->ids);
    free(b->mask);
    free(b->types);
    free(b->labels);
}

#ifdef fail_msg /* cmocka included first: helpers that fail the test */
/* Opens a safetensors file (a golden or a reference checkpoint); fails the test naming why. */
static inline lp_st_file *gold_open(const char *path)
{
    lp_st_file *f = NULL;
    if (lp_st_open(path, &f) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return f;
}

/* The golden's batch; fails the test when a tensor is missing. */
static inline void gold_batch_read(const lp_st_file *g, gold_batch *b)
{
    if (gold_batch_get(g, b) != 0)
        fail_msg("golden batch: input_ids, attention_mask or labels missing");
}

/* Compares a with the golden b (n floats), prints the figures, keeps the worst relative
 * difference in *worst, and fails the test beyond tol. Returns the relative difference. */
static inline double gold_check(const char *label, const float *a, const float *b, int64_t n, double tiny, double tol,
                                double *worst)
{
    gold_cmp c = gold_compare(a, b, n, tiny);
    printf("  %-72s max|d| %.3e  ref max %.3e  rel %.3e\n", label, c.max_abs, c.ref_max, c.rel);
    if (c.rel > *worst)
        *worst = c.rel;
    if (!(c.rel <= tol))
        fail_msg("%s: relative difference %.3e > %.0e (element %lld: %.9g vs %.9g)", label, c.rel, tol,
                 (long long)c.worst, a[c.worst], b[c.worst]);
    return c.rel;
}
#endif

#endif
