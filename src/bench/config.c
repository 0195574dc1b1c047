/* Bench settings: defaults (the seed's sweep: 1..64, 3 warm-up and 10 timed runs, 512
 * tokens), the checks run before anything loads, and the comma lists of the flags. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/bench.h"

static const char *const dtype_names[] = {"f32", "bf16", "q8_0", "int8", "nf4", "f32_packed"};

const char *lp_bench_dtype_name(lp_bench_dtype d)
{
    return (unsigned)d < sizeof dtype_names / sizeof dtype_names[0] ? dtype_names[d] : "?";
}

lp_status lp_bench_dtype_parse(const char *s, lp_bench_dtype *out)
{
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (s && !strcmp(s, dtype_names[i])) {
            *out = (lp_bench_dtype)i;
            return LP_OK;
        }
    if (s && (!strcmp(s, "float32") || !strcmp(s, "fp32"))) {
        *out = LP_BENCH_DTYPE_F32;
        return LP_OK;
    }
    return lp_err(LP_STATUS_INVALID_ARG, "--dtype: unknown '%s' (f32, bf16, q8_0, int8, nf4 or f32_packed)",
                  s ? s : "");
}

void lp_bench_config_init(lp_bench_config *c)
{
    memset(c, 0, sizeof *c);
    c->model_dir = "models/default";
    c->data_file = LP_BENCH_DEFAULT_DATA;
    static const int32_t bs[] = {1, 4, 8, 16, 32, 64};
    c->n_batch_sizes = 6;
    memcpy(c->batch_sizes, bs, sizeof bs);
    static const int64_t ss[] = {100, 500, 1000};
    c->n_sample_sizes = 3;
    memcpy(c->sample_sizes, ss, sizeof ss);
    c->warmup = 3;
    c->runs = 10;
    c->max_length = 512;
    c->seed = 42;
    c->seq_len = 128;
    c->profile_runs = 3;
    c->exec = LP_EXEC_MODE_FUSED;
    c->progress = true;
}

lp_status lp_bench_config_validate(const lp_bench_config *c)
{
    if (c->n_batch_sizes < 1 || c->n_batch_sizes > LP_BENCH_MAX_BATCH_SIZES)
        return lp_err(LP_STATUS_INVALID_ARG, "--batch-sizes: give 1 to %d batch sizes",
                      LP_BENCH_MAX_BATCH_SIZES);
    for (int32_t i = 0; i < c->n_batch_sizes; i++)
        if (c->batch_sizes[i] < 1 || c->batch_sizes[i] > LP_BENCH_MAX_BATCH)
            return lp_err(LP_STATUS_INVALID_ARG, "--batch-sizes: %d is outside 1..%d", c->batch_sizes[i],
                          LP_BENCH_MAX_BATCH);
    if (c->n_sample_sizes < 1 || c->n_sample_sizes > LP_BENCH_MAX_SAMPLE_SIZES)
        return lp_err(LP_STATUS_INVALID_ARG, "--samples: give 1 to %d sample sizes",
                      LP_BENCH_MAX_SAMPLE_SIZES);
    for (int32_t i = 0; i < c->n_sample_sizes; i++)
        if (c->sample_sizes[i] < 1)
            return lp_err(LP_STATUS_INVALID_ARG, "--samples: %lld is not a positive count",
                          (long long)c->sample_sizes[i]);
    if (c->warmup < 0 || c->runs < 1 || c->profile_runs < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "--warmup must be >= 0 and --runs >= 1");
    if (c->max_length < 2 || (c->synthetic && c->seq_len < 1))
        return lp_err(LP_STATUS_INVALID_ARG, "--max-length must be >= 2 and --seq-len >= 1");
    if (!c->model_dir || !*c->model_dir)
        return lp_err(LP_STATUS_INVALID_ARG, "--model is empty");
    if (!c->synthetic && (!c->data_file || !*c->data_file))
        return lp_err(LP_STATUS_INVALID_ARG, "--data is empty (or use --synthetic)");
    return LP_OK;
}

lp_status lp_bench_parse_list(const char *what, const char *s, int64_t lo, int64_t hi, int64_t *out,
                              int32_t cap, int32_t *n)
{
    *n = 0;
    const char *p = s;
    if (!s || !*s)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: empty list", what);
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || (*end && *end != ','))
            return lp_err(LP_STATUS_INVALID_ARG, "%s: '%s' is not a comma-separated list of integers", what,
                          s);
        if (v < lo || v > hi)
            return lp_err(LP_STATUS_INVALID_ARG, "%s: %lld is outside %lld..%lld", what, v, (long long)lo,
                          (long long)hi);
        if (*n >= cap)
            return lp_err(LP_STATUS_INVALID_ARG, "%s: more than %d values", what, cap);
        out[(*n)++] = v;
        if (!*end)
            return LP_OK;
        p = end + 1;
    }
}
