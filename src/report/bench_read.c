/* Bench runs read back: baseline_metrics.json into the per-batch-size curves that the bench
 * plots and `loupe bench --compare` draw and tabulate. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/report.h"
#include "loupe/io.h"
#include "run_internal.h"

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static lp_status load_one(const char *dir, lp_bench_curve *c)
{
    memset(c, 0, sizeof *c);
    char path[1200];
    snprintf(path, sizeof path, "%s/baseline_metrics.json", dir);
    cJSON *j;
    lp_status st = lp_run__read_json(dir, "baseline_metrics.json", "bench run directory", &j);
    if (st != LP_OK)
        return st;
    const cJSON *pts = get(j, "batch_metrics");
    const cJSON *schema = get(j, "schema");
    if (!cJSON_IsArray(pts) || !cJSON_IsString(schema) || strncmp(schema->valuestring, "loupe.bench/", 12)) {
        cJSON_Delete(j);
        return lp_err(LP_STATUS_FORMAT, "%s: not a loupe bench result (no \"schema\" or \"batch_metrics\")",
                      path);
    }
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    const cJSON *ms = get(j, "model_summary"), *mach = get(j, "machine"),
                *full = get(j, "full_dataset_metrics");
    lp_json_str(c->dtype, sizeof c->dtype, ms, "dtype");
    lp_json_str(c->cpu, sizeof c->cpu, mach, "cpu");
    lp_json_str(c->simd, sizeof c->simd, mach, "simd");
    c->model_mb = lp_json_num(ms, "size_mb");
    c->complete = cJSON_IsTrue(get(j, "complete"));
    c->accuracy = lp_json_num(full, "accuracy");
    c->macro_f1 = lp_json_num(full, "macro_f1");
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    snprintf(c->label, sizeof c->label, "%.100s (%s)", base, c->dtype);
    const cJSON *p;
    cJSON_ArrayForEach(p, pts)
    {
        if (c->n >= LP_BENCH_CURVE_MAX)
            break;
        int32_t i = c->n++;
        const cJSON *mem = get(p, "memory");
        c->batch_size[i] = lp_json_num(p, "batch_size");
        c->lat_sample[i] = lp_json_num(get(p, "latency_per_sample_ms"), "mean");
        c->lat_sample_std[i] = lp_json_num(get(p, "latency_per_sample_ms"), "std");
        c->lat_batch[i] = lp_json_num(get(p, "latency_per_batch_ms"), "mean");
        c->lat_batch_std[i] = lp_json_num(get(p, "latency_per_batch_ms"), "std");
        c->thr[i] = lp_json_num(get(p, "throughput_samples_per_s"), "mean");
        c->thr_std[i] = lp_json_num(get(p, "throughput_samples_per_s"), "std");
        c->tokens_per_s[i] = lp_json_num(get(p, "tokens_per_s"), "mean");
        c->alloc_mb[i] = lp_json_num(get(mem, "accounted_peak_mb"), "mean");
        c->alloc_std[i] = lp_json_num(get(mem, "accounted_peak_mb"), "std");
        c->rss_mb[i] = lp_json_num(get(mem, "rss_mb"), "mean");
        c->rss_std[i] = lp_json_num(get(mem, "rss_mb"), "std");
        c->eff[i] = lp_json_num(get(p, "efficiency_samples_per_s_per_gb"), "mean");
        c->eff_std[i] = lp_json_num(get(p, "efficiency_samples_per_s_per_gb"), "std");
        if (!isfinite(c->batch_size[i]) || c->batch_size[i] < 1) {
            cJSON_Delete(j);
            return lp_err(LP_STATUS_FORMAT, "%s: batch_metrics[%d] has no valid batch_size", path, i);
        }
    }
    cJSON_Delete(j);
    return LP_OK;
}

lp_status lp_bench_curves_load(const char *const *dirs, int n, lp_bench_curve **out)
{
    *out = NULL;
    if (n < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "bench compare: no run directories");
    lp_bench_curve *c = calloc((size_t)n, sizeof *c);
    if (!c)
        return lp_err(LP_STATUS_NO_MEMORY, "bench compare: out of memory");
    for (int i = 0; i < n; i++) {
        lp_status st = load_one(dirs[i], &c[i]);
        if (st != LP_OK) {
            free(c);
            return st;
        }
    }
    *out = c;
    return LP_OK;
}

static double at(const lp_bench_curve *c, double bs, const double *v)
{
    for (int32_t i = 0; i < c->n; i++)
        if (c->batch_size[i] == bs)
            return v[i];
    return NAN;
}

void lp_bench_compare_write_text(FILE *f, const lp_bench_curve *c, int n)
{
    for (int i = 0; i < n; i++) {
        char acc[64] = "accuracy n/a";
        if (isfinite(c[i].accuracy))
            snprintf(acc, sizeof acc, "accuracy %.4f (%+.4f vs run 1)", c[i].accuracy,
                     c[i].accuracy - c[0].accuracy);
        fprintf(f, "run %d: %s  %s, %s, %s, model %.1f MB, %s%s\n", i + 1, c[i].dir, c[i].dtype, c[i].cpu,
                c[i].simd, c[i].model_mb, acc, c[i].complete ? "" : " (INCOMPLETE)");
    }
    fprintf(f, "\n%6s", "batch");
    for (int i = 0; i < n; i++)
        fprintf(f, " | %14s %10s %7s", "samples/s", "ms/sample", "vs 1");
    fprintf(f, "\n");
    /* every batch size any run measured, in the first run's order then the others' */
    double seen[LP_BENCH_CURVE_MAX * 4];
    int ns = 0;
    for (int i = 0; i < n; i++)
        for (int32_t k = 0; k < c[i].n; k++) {
            int dup = 0;
            for (int s = 0; s < ns; s++)
                dup |= seen[s] == c[i].batch_size[k];
            if (!dup && ns < (int)(sizeof seen / sizeof seen[0]))
                seen[ns++] = c[i].batch_size[k];
        }
    for (int s = 0; s < ns; s++) {
        fprintf(f, "%6.0f", seen[s]);
        double base = at(&c[0], seen[s], c[0].thr);
        for (int i = 0; i < n; i++) {
            double t = at(&c[i], seen[s], c[i].thr), l = at(&c[i], seen[s], c[i].lat_sample);
            fprintf(f, " | %14.1f %10.3f %6.2fx", t, l, t / base);
        }
        fprintf(f, "\n");
    }
}
