/* The measured passes. The sweep: per batch size, warm-up runs then timed runs, each a
 * forward (no_grad) over the next rows of the seeded pool padded to their longest row;
 * latency, throughput, tokens, resident memory and the allocator's peaks per run. The
 * full pass: every row once at the best batch size, in the seeded order, for accuracy,
 * macro-F1, per-class precision/recall and the confusion matrix; with a quantized --dtype,
 * the same batches again through the model in f32 (untimed), for the accuracy change. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

lp_status lp_bench__fill(lp_bench_state *s, const int64_t *rows, int64_t n_rows, int64_t at, int32_t n)
{
    int64_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx); // outside the timed forward
    if (!idx)
        return lp_err(LP_STATUS_NO_MEMORY, "bench: out of memory for a batch of %d", n);
    for (int32_t i = 0; i < n; i++) // a batch larger than the pool reuses rows
        idx[i] = rows[(at + i) % n_rows];
    lp_status st = lp_batch_fill(&s->batch, &s->enc, idx, n, 0);
    free(idx);
    return st;
}

static lp_status forward(lp_bench_state *s)
{
    const lp_batch *b = &s->batch;
    return lp_model_forward(s->model, b->input_ids, b->attention_mask, b->token_type_ids, b->B, b->T,
                            s->logits);
}

/* Linux resets VmHWM (the peak RSS) when "5" is written to clear_refs; elsewhere the peak
 * stays the process's so far, which the report then says. */
static int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void point_stats(lp_bench_point *p)
{
    int32_t n = p->runs_done;
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v)
        return;
#define STATS(dst, expr)                                                                                     \
    do {                                                                                                     \
        for (int32_t i = 0; i < n; i++)                                                                      \
            v[i] = (expr);                                                                                   \
        lp_bench_stats_of(v, n, &p->dst);                                                                    \
    } while (0)
    STATS(batch_latency_ms, p->batch_ms[i]);
    STATS(sample_latency_ms, p->batch_ms[i] / p->batch_size);
    STATS(samples_per_s, p->batch_size * 1000.0 / p->batch_ms[i]);
    STATS(tokens_per_s, p->tokens[i] * 1000.0 / p->batch_ms[i]);
    STATS(rss_mb, p->rss_bytes[i] / 1048576.0);
    STATS(accounted_mb, p->accounted_peak[i] / 1048576.0);
    STATS(samples_per_s_per_gb, p->batch_size * 1000.0 / p->batch_ms[i] / (p->rss_bytes[i] / 1073741824.0));
#undef STATS
    p->batches_per_s = n ? 1000.0 / p->batch_latency_ms.mean : NAN;
    free(v);
}

static lp_status one_batch_size(lp_bench_state *s, lp_bench_point *p, int64_t *cursor)
{
    const lp_bench_config *c = s->c;
    int32_t bs = p->batch_size, R = c->runs;
    p->batch_ms = calloc((size_t)R, sizeof *p->batch_ms);
    p->padded_len = calloc((size_t)R, sizeof *p->padded_len);
    p->tokens = calloc((size_t)R, sizeof *p->tokens);
    p->rss_bytes = calloc((size_t)R, sizeof *p->rss_bytes);
    p->accounted_peak = calloc((size_t)R, sizeof *p->accounted_peak);
    if (!p->batch_ms || !p->padded_len || !p->tokens || !p->rss_bytes || !p->accounted_peak)
        return lp_err(LP_STATUS_NO_MEMORY, "bench: out of memory");
    reset_peak_rss();
    lp_prof_mem_reset_peaks();
    lp_status st;
    for (int32_t w = 0; w < c->warmup && !lp_bench_stop_requested(); w++) {
        if ((st = lp_bench__fill(s, s->pool, s->pool_n, *cursor, bs)) != LP_OK || (st = forward(s)) != LP_OK)
            return st;
        *cursor += bs;
    }
    lp_mem_stats ms;
    memset(p->mem_peak, 0, sizeof p->mem_peak);
    for (int32_t i = 0; i < R && !lp_bench_stop_requested(); i++) {
        if ((st = lp_bench__fill(s, s->pool, s->pool_n, *cursor, bs)) != LP_OK)
            return st;
        *cursor += bs;
        lp_prof_mem_reset_peaks();
        int64_t t0 = lp_prof_now_ns();
        double cpu0 = lp_cpu_time_s();
        if ((st = forward(s)) != LP_OK)
            return st;
        int64_t t1 = lp_prof_now_ns();
        if (lp_contention_add(&s->r->busy, (t1 - t0) / 1e9, lp_cpu_time_s() - cpu0) && c->progress) {
            char note[512];
            fprintf(stderr, "loupe bench: %s\n", lp_contention_note(&s->r->busy, note, sizeof note));
        }
        lp_prof_mem_stats(&ms);
        int64_t rss = 0, hwm = 0;
        if (lp_prof_rss(&rss, &hwm) != LP_OK)
            rss = 0;
        p->batch_ms[i] = (t1 - t0) / 1e6;
        p->padded_len[i] = s->batch.T;
        p->tokens[i] = s->batch.n_tokens;
        p->rss_bytes[i] = rss;
        p->accounted_peak[i] = ms.total_peak;
        for (int k = 0; k < LP_MEM_CATEGORY__COUNT; k++)
            if (ms.peak[k] > p->mem_peak[k])
                p->mem_peak[k] = ms.peak[k];
        p->runs_done = i + 1;
    }
    int64_t rss = 0, hwm = 0;
    if (lp_prof_rss(&rss, &hwm) == LP_OK)
        p->peak_rss_bytes = hwm;
    point_stats(p);
    return LP_OK;
}

lp_status lp_bench__sweep(lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    lp_bench_result *r = s->r;
    int64_t cursor = 0;
    r->best = -1;
    for (int32_t k = 0; k < c->n_batch_sizes && !lp_bench_stop_requested(); k++) {
        lp_bench_point *p = &r->points[r->n_points++];
        p->batch_size = c->batch_sizes[k];
        lp_status st = one_batch_size(s, p, &cursor);
        if (st != LP_OK)
            return lp_err_wrap(st, "batch size %d", p->batch_size);
        if (p->runs_done == 0) { // interrupted before a timed run: nothing to report for it
            r->n_points--;
            break;
        }
        if (c->progress)
            fprintf(stderr,
                    "bench: batch %4d: %8.2f ms/batch (+- %.2f), %8.3f ms/sample, %9.1f samples/s, peak RSS "
                    "%.0f MB"
                    "%s\n",
                    p->batch_size, p->batch_latency_ms.mean, p->batch_latency_ms.std,
                    p->sample_latency_ms.mean, p->samples_per_s.mean, p->peak_rss_bytes / 1048576.0,
                    p->runs_done < c->runs ? " (interrupted)" : "");
        if (r->best < 0 || p->samples_per_s.mean > r->points[r->best].samples_per_s.mean)
            r->best = r->n_points - 1;
    }
    return LP_OK;
}

static void class_metrics(lp_bench_full *f, const int32_t *labels, const int64_t *rows, int64_t n)
{
    int32_t L = f->num_labels;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t row = rows[i];
        int32_t y = labels[row], p = f->pred[row];
        f->confusion[(int64_t)y * L + p]++;
        correct += y == p;
    }
    f->accuracy = n ? (double)correct / n : NAN;
    double sum_f1 = 0;
    int32_t n_cls = 0;
    for (int32_t k = 0; k < L; k++) {
        int64_t tp = f->confusion[(int64_t)k * L + k], pred_k = 0, true_k = 0;
        for (int32_t j = 0; j < L; j++) {
            pred_k += f->confusion[(int64_t)j * L + k];
            true_k += f->confusion[(int64_t)k * L + j];
        }
        f->support[k] = true_k;
        /* sklearn's zero_division=0: an empty denominator scores 0 */
        f->precision[k] = pred_k ? (double)tp / pred_k : 0;
        f->recall[k] = true_k ? (double)tp / true_k : 0;
        double d = f->precision[k] + f->recall[k];
        f->f1[k] = d > 0 ? 2 * f->precision[k] * f->recall[k] / d : 0;
        if (true_k || pred_k) { // macro over the labels present in the data or predictions
            sum_f1 += f->f1[k];
            n_cls++;
        }
    }
    f->macro_f1 = n_cls ? sum_f1 / n_cls : NAN;
}

static int32_t argmax(const float *v, int32_t n)
{
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[b]) // the first of equal maxima, as torch.argmax
            b = i;
    return b;
}

lp_status lp_bench__full_pass(lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    lp_bench_result *r = s->r;
    lp_bench_full *f = &r->full;
    if (c->synthetic || c->skip_full || r->best < 0)
        return LP_OK;
    int64_t n = s->enc.n;
    int32_t L = r->num_labels, bs = r->points[r->best].batch_size;
    f->n = n;
    f->batch_size = bs;
    f->num_labels = L;
    f->pred = malloc((size_t)n * sizeof *f->pred);
    f->precision = calloc((size_t)L, sizeof *f->precision);
    f->recall = calloc((size_t)L, sizeof *f->recall);
    f->f1 = calloc((size_t)L, sizeof *f->f1);
    f->support = calloc((size_t)L, sizeof *f->support);
    f->confusion = calloc((size_t)L * L, sizeof *f->confusion);
    if (!f->pred || !f->precision || !f->recall || !f->f1 || !f->support || !f->confusion)
        return lp_err(LP_STATUS_NO_MEMORY, "bench: out of memory for the full pass");
    double elapsed_ms = 0;
    int64_t tokens = 0, done = 0;
    int32_t next_sample = 0;
    int64_t sizes[LP_BENCH_MAX_SAMPLE_SIZES];
    int32_t ns = 0;
    for (int32_t i = 0; i < c->n_sample_sizes; i++)
        if (c->sample_sizes[i] <= n)
            sizes[ns++] = c->sample_sizes[i];
    for (int32_t i = 1; i < ns; i++) // ascending, so each is reached in turn
        for (int32_t j = i; j > 0 && sizes[j] < sizes[j - 1]; j--) {
            int64_t t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
        }
    while (done < n) {
        if (lp_bench_stop_requested())
            return LP_OK; // f->done stays false: no accuracy from a partial pass
        int32_t b = (int32_t)(n - done < bs ? n - done : bs);
        lp_status st = lp_bench__fill(s, s->order, n, done, b);
        if (st != LP_OK)
            return st;
        int64_t t0 = lp_prof_now_ns();
        if ((st = forward(s)) != LP_OK)
            return lp_err_wrap(st, "full pass, rows %lld..%lld", (long long)done, (long long)(done + b - 1));
        elapsed_ms += (lp_prof_now_ns() - t0) / 1e6;
        tokens += s->batch.n_tokens;
        for (int32_t i = 0; i < b; i++) {
            int64_t row = s->order[done + i];
            f->pred[row] = argmax(s->logits + (int64_t)i * L, L);
        }
        done += b;
        /* sample sizes that this batch completed (a size inside a batch counts the batch's
         * time up to it in proportion) */
        while (next_sample < ns && sizes[next_sample] <= done) {
            int64_t k = sizes[next_sample];
            int64_t ck = 0;
            for (int64_t i = 0; i < k; i++)
                ck += f->pred[s->order[i]] == s->enc.labels[s->order[i]];
            f->sample_n[next_sample] = k;
            f->sample_accuracy[next_sample] = (double)ck / k;
            f->sample_s[next_sample] = elapsed_ms / 1000.0 * k / done;
            next_sample++;
        }
    }
    f->n_sample_sizes = next_sample;
    f->total_s = elapsed_ms / 1000.0;
    f->samples_per_s = n / f->total_s;
    f->tokens_per_s = tokens / f->total_s;
    class_metrics(f, s->enc.labels, s->order, n);
    f->done = true;
    if (c->progress)
        fprintf(stderr, "bench: full pass: %lld rows at batch %d in %.2f s, accuracy %.4f, macro-F1 %.4f\n",
                (long long)n, bs, f->total_s, f->accuracy, f->macro_f1);
    return LP_OK;
}

lp_status lp_bench__f32_reference(lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    lp_bench_full *f = &s->r->full;
    /* f32 and f32_packed hold the f32 values already; a head drawn from --seed is not the same
     * draw in a quantized load (its Linears leave the parameter table) and predicts chance */
    if (!f->done || c->dtype == LP_BENCH_DTYPE_F32 || c->dtype == LP_BENCH_DTYPE_F32_PACKED ||
        !s->head_trained || lp_bench_stop_requested())
        return LP_OK;
    lp_model *q = s->model, *m = NULL;
    lp_status st = lp_bench__load_f32(s, &m);
    if (st != LP_OK)
        return st;
    s->model = m;
    const int32_t L = f->num_labels;
    int64_t correct = 0, agree = 0;
    /* the full pass's batches (rows, order, padding), so only the weights differ */
    for (int64_t done = 0; st == LP_OK && done < f->n; done += f->batch_size) {
        const int32_t b = (int32_t)(f->n - done < f->batch_size ? f->n - done : f->batch_size);
        if ((st = lp_bench__fill(s, s->order, f->n, done, b)) != LP_OK || (st = forward(s)) != LP_OK)
            break;
        for (int32_t i = 0; i < b; i++) {
            const int64_t row = s->order[done + i];
            const int32_t p = argmax(s->logits + (int64_t)i * L, L);
            correct += p == s->enc.labels[row];
            agree += p == f->pred[row];
        }
    }
    s->model = q;
    lp_model_free(m);
    if (st != LP_OK)
        return lp_err_wrap(st, "bench: the f32 reference pass");
    f->f32_done = true;
    f->f32_accuracy = (double)correct / (double)f->n;
    f->f32_agree = agree;
    if (c->progress)
        fprintf(stderr,
                "bench: f32 reference: accuracy %.4f (%s %+.2f points), %lld of %lld predictions agree\n",
                f->f32_accuracy, lp_bench_dtype_name(c->dtype), 100.0 * (f->accuracy - f->f32_accuracy),
                (long long)agree, (long long)f->n);
    return LP_OK;
}
