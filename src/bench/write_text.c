/* The bench's table files and its report for people: detailed_metrics.csv (one row per
 * batch size and run), predictions.csv (--save-predictions) and baseline_summary_report.txt
 * (model, per-batch table, optimal batch size and why, memory scaling, accuracy,
 * bottlenecks, recommendations). Each is written atomically. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_internal.h"

static lp_status open_out(const lp_bench_state *s, const char *name, lp_atomic_file *f)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    return lp_atomic_open(f, path);
}

lp_status lp_bench__write_csv(const lp_bench_state *s)
{
    lp_atomic_file f;
    lp_status st = open_out(s, "detailed_metrics.csv", &f);
    if (st != LP_OK)
        return st;
    fprintf(f.fp, "batch_size,run,latency_per_batch_ms,latency_per_sample_ms,throughput_samples_per_s,"
                  "batches_per_s,tokens,padded_length,tokens_per_s,rss_mb,accounted_peak_mb\n");
    const lp_bench_result *r = s->r;
    for (int32_t k = 0; k < r->n_points; k++) {
        const lp_bench_point *p = &r->points[k];
        for (int32_t i = 0; i < p->runs_done; i++) {
            double ms = p->batch_ms[i];
            fprintf(f.fp, "%d,%d,%.6f,%.6f,%.4f,%.4f,%lld,%d,%.2f,%.3f,%.3f\n", p->batch_size, i, ms,
                    ms / p->batch_size, p->batch_size * 1000.0 / ms, 1000.0 / ms, (long long)p->tokens[i],
                    p->padded_len[i], p->tokens[i] * 1000.0 / ms, p->rss_bytes[i] / 1048576.0,
                    p->accounted_peak[i] / 1048576.0);
        }
    }
    return lp_atomic_commit(&f);
}

/* A CSV field: quoted when it holds a comma, quote or line break (RFC 4180). */
static void csv_field(FILE *fp, const char *v)
{
    if (!strpbrk(v, ",\"\r\n")) {
        fputs(v, fp);
        return;
    }
    fputc('"', fp);
    for (; *v; v++) {
        if (*v == '"')
            fputc('"', fp);
        fputc(*v, fp);
    }
    fputc('"', fp);
}

lp_status lp_bench__write_predictions(const lp_bench_state *s)
{
    const lp_bench_full *fl = &s->r->full;
    if (!s->c->save_predictions || !fl->done)
        return LP_OK;
    lp_atomic_file f;
    lp_status st = open_out(s, "predictions.csv", &f);
    if (st != LP_OK)
        return st;
    fprintf(f.fp, "row,line,label_id,label,pred_id,pred,correct\n");
    const char *const *names = (const char *const *)s->ds.label_map.names;
    for (int64_t i = 0; i < fl->n; i++) {
        int32_t y = s->enc.labels[i], p = fl->pred[i];
        fprintf(f.fp, "%lld,%lld,%d,", (long long)i, (long long)s->ds.lines[i], y);
        csv_field(f.fp, names[y]);
        fprintf(f.fp, ",%d,", p);
        csv_field(f.fp, names[p]);
        fprintf(f.fp, ",%d\n", y == p);
    }
    return lp_atomic_commit(&f);
}

/* Smallest batch size within 5 % of the best mean throughput (the latency-friendly pick). */
static int32_t near_best(const lp_bench_result *r)
{
    int32_t pick = r->best;
    for (int32_t i = 0; i < r->n_points; i++)
        if (r->points[i].samples_per_s.mean >= 0.95 * r->points[r->best].samples_per_s.mean &&
            r->points[i].batch_size < r->points[pick].batch_size)
            pick = i;
    return pick;
}

void lp_bench__best_reason(const lp_bench_result *r, char *buf, size_t cap)
{
    if (r->best < 0) {
        snprintf(buf, cap, "no batch size was measured");
        return;
    }
    const lp_bench_point *b = &r->points[r->best];
    if (r->best > 0) {
        snprintf(buf, cap, "highest mean throughput, %.1f samples/s (%.2fx batch size %d's)",
                 b->samples_per_s.mean, b->samples_per_s.mean / r->points[0].samples_per_s.mean,
                 r->points[0].batch_size);
        return;
    }
    /* the first size listed won: say what the next one reached */
    if (r->n_points > 1)
        snprintf(buf, cap, "highest mean throughput, %.1f samples/s; batch size %d reached %.1f",
                 b->samples_per_s.mean, r->points[1].batch_size, r->points[1].samples_per_s.mean);
    else
        snprintf(buf, cap, "the only batch size measured, %.1f samples/s", b->samples_per_s.mean);
}

static void recommendations(FILE *fp, const lp_bench_state *s)
{
    const lp_bench_result *r = s->r;
    int n = 0;
    if (r->best == r->n_points - 1 && r->n_points > 1)
        fprintf(fp, "%d. Throughput still rises at the largest batch size tried (%d): try larger batches.\n",
                ++n, r->points[r->best].batch_size);
    int32_t nb = near_best(r);
    if (nb != r->best)
        fprintf(fp,
                "%d. Batch size %d reaches %.0f%% of the best throughput at %.2f ms per batch instead of "
                "%.2f: the "
                "pick for latency-bound serving.\n",
                ++n, r->points[nb].batch_size,
                100 * r->points[nb].samples_per_s.mean / r->points[r->best].samples_per_s.mean,
                r->points[nb].batch_latency_ms.mean, r->points[r->best].batch_latency_ms.mean);
    if (r->prof.done && r->prof.n_top > 0) {
        const lp_bench_op *op = &r->prof.top[0];
        if (!strcmp(op->bound, "memory"))
            fprintf(
                fp,
                "%d. The top op %s is memory-bound (%.1f FLOP/byte < ridge %.1f): moving fewer bytes helps "
                "(fusion; --dtype int8 or nf4 when it is a weight matmul).\n",
                ++n, op->name, op->intensity, r->prof.ridge);
        else if (!strcmp(op->bound, "compute"))
            fprintf(
                fp,
                "%d. The top op %s is compute-bound (%.1f GFLOP/s of %.0f peak): fewer FLOPs help (shorter "
                "--max-length, a distilled model) more than lower-precision storage.\n",
                ++n, op->name, op->gflops, r->prof.peak_gflops);
    }
    if (r->best >= 0 && !s->c->sort_by_length && !s->c->synthetic) {
        const lp_bench_point *b = &r->points[r->best];
        double T = 0, tok = 0;
        for (int32_t i = 0; i < b->runs_done; i++) {
            T += (double)b->padded_len[i] * b->batch_size;
            tok += (double)b->tokens[i];
        }
        if (tok > 0 && T / tok > 1.3)
            fprintf(
                fp,
                "%d. %.0f%% of the tokens computed at batch %d are padding: --sort-by-length batches rows "
                "of similar length.\n",
                ++n, 100 * (1 - tok / T), b->batch_size);
    }
    if (!n)
        fprintf(fp, "No change stands out: the sweep is flat past batch %d.\n",
                r->best >= 0 ? r->points[r->best].batch_size : 0);
}

static void rule(FILE *fp)
{
    fprintf(fp, "======================================================================\n");
}

lp_status lp_bench__write_summary(const lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    const lp_bench_result *r = s->r;
    lp_atomic_file f;
    lp_status st = open_out(s, "baseline_summary_report.txt", &f);
    if (st != LP_OK)
        return st;
    FILE *fp = f.fp;
    rule(fp);
    fprintf(fp, "LOUPE BENCH: BASELINE INFERENCE PROFILE\n");
    rule(fp);
    if (r->interrupted)
        fprintf(fp, "INCOMPLETE: interrupted; the numbers below are what was measured before Ctrl-C.\n\n");
    fprintf(fp, "MODEL SUMMARY\n");
    fprintf(fp, "Model: %s\nModel type: %s (%s)\n", c->model_dir, r->model_type, r->arch);
    fprintf(fp, "Total parameters: %llu (%.2fM)\n", (unsigned long long)r->n_params, r->n_params / 1e6);
    fprintf(fp, "Model size: %.2f MB (%s)\nLabels: %d, max length %d tokens\n", r->model_mb, r->dtype,
            r->num_labels, r->max_length);
    fprintf(fp, "Machine: %s, %s, %d thread%s\n", r->cpu, r->simd, r->threads, r->threads == 1 ? "" : "s");
    fprintf(fp, "Threads got %.0f%% of wall x threads in CPU time (%lld of %lld timed runs under %.0f%%)%s; %s\n",
            100 * lp_contention_cpu_share(&r->busy), (long long)r->busy.flagged, (long long)r->busy.steps,
            100 * LP_CONTENTION_SHARE, r->busy.noticed ? ": the machine was busy, times are slower than it can do" : "",
            lp_threads_spin_desc());
    fprintf(fp, "Data: %s, %lld rows (sweep pool %lld), %.1f tokens per row on average, longest %d\n\n",
            c->synthetic ? "synthetic ids" : c->data_file, (long long)r->n_rows, (long long)r->pool_rows,
            r->mean_len, r->max_len_seen);
    fprintf(fp, "BATCH SIZE ANALYSIS (%d warm-up + %d timed runs each)\n", c->warmup, c->runs);
    fprintf(fp, "%6s %20s %28s %20s %12s %10s %10s %12s\n", "batch", "ms/sample mean+-std",
            "ms/batch p50/p90/p99", "samples/s mean+-std", "tokens/s", "peakRSS MB", "alloc MB",
            "samples/s/GB");
    for (int32_t i = 0; i < r->n_points; i++) {
        const lp_bench_point *p = &r->points[i];
        char a[32], b[40], t[32];
        snprintf(a, sizeof a, "%.3f +- %.3f", p->sample_latency_ms.mean, p->sample_latency_ms.std);
        snprintf(b, sizeof b, "%.2f/%.2f/%.2f", p->batch_latency_ms.p50, p->batch_latency_ms.p90,
                 p->batch_latency_ms.p99);
        snprintf(t, sizeof t, "%.1f +- %.1f", p->samples_per_s.mean, p->samples_per_s.std);
        fprintf(fp, "%6d %20s %28s %20s %12.0f %10.1f %10.1f %12.1f%s\n", p->batch_size, a, b, t,
                p->tokens_per_s.mean, p->peak_rss_bytes / 1048576.0, p->accounted_mb.mean,
                p->samples_per_s_per_gb.mean, p->runs_done < c->runs ? "  (partial)" : "");
    }
    fprintf(fp, "\n");
    if (r->best >= 0) {
        const lp_bench_point *b = &r->points[r->best];
        char why[256];
        lp_bench__best_reason(r, why, sizeof why);
        fprintf(fp, "OPTIMAL BATCH SIZE: %d (%s)\n", b->batch_size, why);
        fprintf(fp, "Latency per sample there: %.3f ms (p99 per batch %.2f ms)\n", b->sample_latency_ms.mean,
                b->batch_latency_ms.p99);
        fprintf(fp, "Maximum throughput: %.1f samples/s, %.0f tokens/s\n\n", b->samples_per_s.mean,
                b->tokens_per_s.mean);
        const lp_bench_point *lo = &r->points[0], *hi = &r->points[r->n_points - 1];
        fprintf(fp, "MEMORY SCALING\n");
        fprintf(fp, "Allocator peak: %.1f MB at batch %d -> %.1f MB at batch %d", lo->accounted_mb.mean,
                lo->batch_size, hi->accounted_mb.mean, hi->batch_size);
        if (hi->batch_size > lo->batch_size)
            fprintf(fp, " (%.3f MB per extra sample)",
                    (hi->accounted_mb.mean - lo->accounted_mb.mean) / (hi->batch_size - lo->batch_size));
        fprintf(fp,
                "\nPeak RSS: %.1f MB -> %.1f MB; weights %.1f MB; activations peak %.1f MB at batch %d\n\n",
                lo->peak_rss_bytes / 1048576.0, hi->peak_rss_bytes / 1048576.0, r->model_mb,
                hi->mem_peak[LP_MEM_CATEGORY_ACTIVATION] / 1048576.0, hi->batch_size);
    }
    fprintf(fp, "FULL DATASET PERFORMANCE\n");
    if (r->full.done) {
        const lp_bench_full *fl = &r->full;
        fprintf(fp, "Accuracy: %.4f\nMacro-F1: %.4f\nRows: %lld at batch %d\nTotal time: %.2f seconds\n",
                fl->accuracy, fl->macro_f1, (long long)fl->n, fl->batch_size, fl->total_s);
        fprintf(fp, "Throughput: %.1f samples/s, %.0f tokens/s\n", fl->samples_per_s, fl->tokens_per_s);
        if (fl->f32_done)
            fprintf(fp,
                    "Accuracy vs f32: %.4f in f32, %+.2f points with %s; %lld of %lld predictions agree\n",
                    fl->f32_accuracy, 100.0 * (fl->accuracy - fl->f32_accuracy), r->dtype,
                    (long long)fl->f32_agree, (long long)fl->n);
        for (int32_t i = 0; i < fl->n_sample_sizes; i++)
            fprintf(fp, "  first %lld rows: accuracy %.4f in %.3f s\n", (long long)fl->sample_n[i],
                    fl->sample_accuracy[i], fl->sample_s[i]);
        fprintf(fp, "%-28s %9s %9s %9s %8s\n", "class", "precision", "recall", "f1", "support");
        for (int32_t k = 0; k < fl->num_labels; k++)
            fprintf(fp, "%-28.28s %9.4f %9.4f %9.4f %8lld\n", s->ds.label_map.names[k], fl->precision[k],
                    fl->recall[k], fl->f1[k], (long long)fl->support[k]);
    } else
        fprintf(fp, "%s\n",
                c->synthetic   ? "Not measured (--synthetic: random ids have no labels)."
                : c->skip_full ? "Not measured (--skip-full-pass)."
                               : "Not measured (interrupted).");
    fprintf(fp, "\nBOTTLENECKS\n");
    if (r->prof.done) {
        const lp_bench_profile *p = &r->prof;
        fprintf(
            fp,
            "Profiled %d batches of %d (trace, key averages and stacks in profiler/). Ceilings: %.0f GFLOP/s "
            "(f32 FMA), %.1f GB/s (STREAM triad), ridge %.1f FLOP/byte.\n",
            p->batches, p->batch_size, p->peak_gflops, p->peak_gbs, p->ridge);
        for (int32_t i = 0; i < p->n_top; i++) {
            const lp_bench_op *op = &p->top[i];
            fprintf(
                fp,
                "%d. %s: %.1f%% of self time (%.2f ms, %lld calls), %.1f GFLOP/s, %.1f GB/s, %.2f FLOP/byte: "
                "%s-bound\n",
                i + 1, op->name, op->share * 100, op->self_ms, (long long)op->calls, op->gflops, op->gbs,
                op->intensity, op->bound);
        }
    } else
        fprintf(fp, "Not profiled (%s).\n", c->skip_profiling ? "--skip-profiling" : "interrupted");
    fprintf(fp, "\nRECOMMENDATIONS\n");
    recommendations(fp, s);
    rule(fp);
    return lp_atomic_commit(&f);
}
