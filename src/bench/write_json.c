/* baseline_metrics.json: everything a bench measured, in the seed's shape
 * (full_dataset_metrics.accuracy, per-batch metrics, model summary) plus machine, data,
 * the optimal batch size and the bottlenecks. "complete" is false for an interrupted run,
 * so a reader never takes a partial file for a finished one. NaN is written as null. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"
#include "loupe/core.h"
#include "loupe/kernels.h"

static void num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *stats(const lp_bench_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    num(o, "mean", s->mean);
    num(o, "std", s->std);
    num(o, "min", s->min);
    num(o, "p50", s->p50);
    num(o, "p90", s->p90);
    num(o, "p99", s->p99);
    num(o, "max", s->max);
    return o;
}

static cJSON *config_json(const lp_bench_config *c, const lp_bench_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", c->model_dir);
    if (c->adapter_dir)
        cJSON_AddStringToObject(o, "adapter", c->adapter_dir);
    cJSON_AddStringToObject(o, "data", c->synthetic ? "synthetic" : c->data_file);
    if (c->label_map_file)
        cJSON_AddStringToObject(o, "label_map", c->label_map_file);
    cJSON *bs = cJSON_AddArrayToObject(o, "batch_sizes");
    for (int32_t i = 0; i < c->n_batch_sizes; i++)
        cJSON_AddItemToArray(bs, cJSON_CreateNumber(c->batch_sizes[i]));
    cJSON *ss = cJSON_AddArrayToObject(o, "samples");
    for (int32_t i = 0; i < c->n_sample_sizes; i++)
        cJSON_AddItemToArray(ss, cJSON_CreateNumber((double)c->sample_sizes[i]));
    cJSON_AddNumberToObject(o, "warmup", c->warmup);
    cJSON_AddNumberToObject(o, "runs", c->runs);
    cJSON_AddNumberToObject(o, "max_length", r->max_length);
    cJSON_AddStringToObject(o, "dtype", lp_bench_dtype_name(c->dtype));
    cJSON_AddNumberToObject(o, "threads", r->threads);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddBoolToObject(o, "sort_by_length", c->sort_by_length);
    cJSON_AddBoolToObject(o, "synthetic", c->synthetic);
    if (c->synthetic)
        cJSON_AddNumberToObject(o, "seq_len", c->seq_len);
    cJSON_AddStringToObject(o, "exec", lp_exec_mode_name(c->exec));
    cJSON_AddBoolToObject(o, "skip_profiling", c->skip_profiling);
    return o;
}

static cJSON *point_json(const lp_bench_point *p, const lp_bench_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "batch_size", p->batch_size);
    cJSON_AddNumberToObject(o, "runs", p->runs_done);
    cJSON_AddItemToObject(o, "latency_per_sample_ms", stats(&p->sample_latency_ms));
    cJSON_AddItemToObject(o, "latency_per_batch_ms", stats(&p->batch_latency_ms));
    cJSON_AddItemToObject(o, "throughput_samples_per_s", stats(&p->samples_per_s));
    num(o, "batches_per_s", p->batches_per_s);
    cJSON_AddItemToObject(o, "tokens_per_s", stats(&p->tokens_per_s));
    double T = 0;
    for (int32_t i = 0; i < p->runs_done; i++)
        T += p->padded_len[i];
    num(o, "mean_padded_length", p->runs_done ? T / p->runs_done : NAN);
    cJSON *m = cJSON_AddObjectToObject(o, "memory");
    num(m, "peak_rss_mb", p->peak_rss_bytes / 1048576.0);
    cJSON_AddItemToObject(m, "rss_mb", stats(&p->rss_mb));
    cJSON_AddItemToObject(m, "accounted_peak_mb", stats(&p->accounted_mb));
    num(m, "model_mb", r->model_mb);
    cJSON *cat = cJSON_AddObjectToObject(m, "peak_by_category_mb");
    for (int k = 0; k < LP_MEM_CATEGORY__COUNT; k++)
        num(cat, lp_mem_category_name((lp_mem_category)k), p->mem_peak[k] / 1048576.0);
    cJSON_AddItemToObject(o, "efficiency_samples_per_s_per_gb", stats(&p->samples_per_s_per_gb));
    return o;
}

static cJSON *full_json(const lp_bench_state *s)
{
    const lp_bench_full *f = &s->r->full;
    cJSON *o = cJSON_CreateObject();
    num(o, "accuracy", f->accuracy);
    num(o, "macro_f1", f->macro_f1);
    cJSON_AddNumberToObject(o, "samples", (double)f->n);
    cJSON_AddNumberToObject(o, "batch_size", f->batch_size);
    num(o, "total_time_s", f->total_s);
    num(o, "throughput_samples_per_s", f->samples_per_s);
    num(o, "tokens_per_s", f->tokens_per_s);
    if (f->f32_done) { /* a quantized --dtype: the accuracy change against the same model in f32 */
        num(o, "accuracy_f32", f->f32_accuracy);
        num(o, "accuracy_change_vs_f32", f->accuracy - f->f32_accuracy);
        cJSON_AddNumberToObject(o, "predictions_agreeing_with_f32", (double)f->f32_agree);
    }
    cJSON *pc = cJSON_AddArrayToObject(o, "per_class");
    for (int32_t k = 0; k < f->num_labels; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", k);
        cJSON_AddStringToObject(e, "label", s->ds.label_map.names[k]);
        num(e, "precision", f->precision[k]);
        num(e, "recall", f->recall[k]);
        num(e, "f1", f->f1[k]);
        cJSON_AddNumberToObject(e, "support", (double)f->support[k]);
        cJSON_AddItemToArray(pc, e);
    }
    cJSON *cm = cJSON_AddArrayToObject(o, "confusion_matrix");
    for (int32_t y = 0; y < f->num_labels; y++) {
        cJSON *row = cJSON_CreateArray();
        for (int32_t p = 0; p < f->num_labels; p++)
            cJSON_AddItemToArray(row,
                                 cJSON_CreateNumber((double)f->confusion[(int64_t)y * f->num_labels + p]));
        cJSON_AddItemToArray(cm, row);
    }
    cJSON *ss = cJSON_AddArrayToObject(o, "sample_sizes");
    for (int32_t i = 0; i < f->n_sample_sizes; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "samples", (double)f->sample_n[i]);
        num(e, "accuracy", f->sample_accuracy[i]);
        num(e, "time_s", f->sample_s[i]);
        num(e, "throughput_samples_per_s", f->sample_n[i] / f->sample_s[i]);
        cJSON_AddItemToArray(ss, e);
    }
    return o;
}

static cJSON *profile_json(const lp_bench_profile *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "batch_size", p->batch_size);
    cJSON_AddNumberToObject(o, "batches", p->batches);
    num(o, "peak_gflops", p->peak_gflops);
    num(o, "peak_gbs", p->peak_gbs);
    num(o, "ridge_flop_per_byte", p->ridge);
    num(o, "total_self_ms", p->total_self_ms);
    cJSON_AddStringToObject(o, "directory", "profiler");
    cJSON *b = cJSON_AddArrayToObject(o, "bottlenecks");
    for (int32_t i = 0; i < p->n_top; i++) {
        const lp_bench_op *op = &p->top[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", op->name);
        cJSON_AddNumberToObject(e, "calls", (double)op->calls);
        num(e, "self_ms", op->self_ms);
        num(e, "share", op->share);
        num(e, "gflops", op->gflops);
        num(e, "gbs", op->gbs);
        num(e, "flop_per_byte", op->intensity);
        cJSON_AddStringToObject(e, "bound", op->bound ? op->bound : "unknown");
        cJSON_AddItemToArray(b, e);
    }
    return o;
}

lp_status lp_bench__write_json(const lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    const lp_bench_result *r = s->r;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "schema", "loupe.bench/1");
    cJSON_AddBoolToObject(j, "complete", !r->interrupted);
    cJSON_AddBoolToObject(j, "interrupted", r->interrupted);
    cJSON_AddStringToObject(j, "loupe_version", c->loupe_version ? c->loupe_version : "unknown");
    cJSON_AddItemToObject(j, "config", config_json(c, r));
    cJSON *mach = cJSON_AddObjectToObject(j, "machine");
    cJSON_AddStringToObject(mach, "cpu", r->cpu);
    cJSON_AddStringToObject(mach, "simd", r->simd); /* the ISA level the kernels ran at */
    cJSON_AddStringToObject(mach, "isa_detected", lp_isa_name(lp_isa_detect()));
    cJSON_AddNumberToObject(mach, "threads", r->threads);
    cJSON_AddStringToObject(mach, "blas_core", lp_threads_blas_core());
    cJSON_AddStringToObject(mach, "wait_policy", lp_threads_spin_desc());
    /* CPU time over wall x threads of the timed runs; under 0.75 for runs in a row: busy (core.h) */
    cJSON *busy = cJSON_AddObjectToObject(mach, "contention");
    cJSON_AddNumberToObject(busy, "cpu_share", lp_contention_cpu_share(&r->busy));
    cJSON_AddNumberToObject(busy, "runs_flagged", (double)r->busy.flagged);
    cJSON_AddNumberToObject(busy, "runs", (double)r->busy.steps);
    cJSON_AddBoolToObject(busy, "noticed", r->busy.noticed);
    cJSON *ms = cJSON_AddObjectToObject(j, "model_summary");
    cJSON_AddStringToObject(ms, "model_type", r->model_type);
    cJSON_AddStringToObject(ms, "architecture", r->arch);
    cJSON_AddNumberToObject(ms, "parameters", (double)r->n_params);
    num(ms, "size_mb", r->model_mb);
    cJSON_AddStringToObject(ms, "dtype", r->dtype);
    cJSON_AddNumberToObject(ms, "num_labels", r->num_labels);
    cJSON_AddNumberToObject(ms, "max_length", r->max_length);
    cJSON *d = cJSON_AddObjectToObject(j, "data");
    cJSON_AddStringToObject(d, "file", c->synthetic ? "synthetic" : c->data_file);
    cJSON_AddNumberToObject(d, "rows", (double)r->n_rows);
    cJSON_AddNumberToObject(d, "sweep_pool_rows", (double)r->pool_rows);
    num(d, "mean_tokens", r->mean_len);
    cJSON_AddNumberToObject(d, "max_tokens", r->max_len_seen);
    cJSON *pts = cJSON_AddArrayToObject(j, "batch_metrics");
    for (int32_t i = 0; i < r->n_points; i++)
        cJSON_AddItemToArray(pts, point_json(&r->points[i], r));
    if (r->best >= 0) {
        const lp_bench_point *b = &r->points[r->best];
        cJSON *o = cJSON_AddObjectToObject(j, "optimal_batch_size");
        char why[256];
        lp_bench__best_reason(r, why, sizeof why);
        cJSON_AddNumberToObject(o, "batch_size", b->batch_size);
        cJSON_AddStringToObject(o, "reason", why);
        num(o, "latency_per_sample_ms", b->sample_latency_ms.mean);
        num(o, "throughput_samples_per_s", b->samples_per_s.mean);
    } else
        cJSON_AddNullToObject(j, "optimal_batch_size");
    if (r->full.done)
        cJSON_AddItemToObject(j, "full_dataset_metrics", full_json(s));
    else
        cJSON_AddNullToObject(j, "full_dataset_metrics");
    if (r->prof.done)
        cJSON_AddItemToObject(j, "profile", profile_json(&r->prof));
    else
        cJSON_AddNullToObject(j, "profile");
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text)
        return lp_err(LP_STATUS_NO_MEMORY, "baseline_metrics.json: out of memory");
    char path[1200];
    snprintf(path, sizeof path, "%s/baseline_metrics.json", s->dir);
    lp_status st = lp_file_write_atomic(path, text, strlen(text));
    free(text);
    return st;
}
