/* report.html for a training run (loupe train, loupe profile): headline figures, loss and
 * learning-rate curves, the step split into data, forward, backward and optimizer,
 * throughput over steps, memory by category over time, top ops, the diagnosis, and the
 * files of the run. Every chart is also written under plots/. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

void lp_run__fmt_bytes(double b, char *buf, size_t cap)
{
    if (!isfinite(b))
        snprintf(buf, cap, "-");
    else if (b >= 1e9)
        snprintf(buf, cap, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, cap, "%.1f MB", b / 1e6);
    else
        snprintf(buf, cap, "%.0f kB", b / 1e3);
}

const char *lp_run__short_op(const char *name)
{
    const char *c = strstr(name, "::");
    return c ? c + 2 : name;
}

lp_figure lp_run__figure(const lp_chart_panel *p, const char *title, int32_t w, int32_t hgt)
{
    (void)title; // one panel: its own title says it, the page's caption repeats it
    return (lp_figure){.rows = 1, .cols = 1, .width = w, .height = hgt, .panels = p, .n_panels = 1};
}

/* Columns of the steps table as arrays for the charts (NaN where absent). */
typedef struct cols {
    double *x, *loss, *lr, *data, *fwd, *bwd, *opt, *other, *sps, *tps, *mem, *rss;
} cols;

static int cols_make(const lp_run_data *d, cols *c)
{
    size_t n = d->n_steps ? (size_t)d->n_steps : 1;
    double *all = calloc(12 * n, sizeof *all);
    if (!all)
        return 0;
    double **v[] = {&c->x,   &c->loss,  &c->lr,  &c->data, &c->fwd, &c->bwd,
                    &c->opt, &c->other, &c->sps, &c->tps,  &c->mem, &c->rss};
    for (size_t k = 0; k < 12; k++)
        *v[k] = all + k * n;
    for (int32_t i = 0; i < d->n_steps; i++) {
        const lp_run_step *s = &d->steps[i];
        c->x[i] = s->step;
        c->loss[i] = s->loss;
        c->lr[i] = s->lr;
        c->data[i] = s->data_ms;
        c->fwd[i] = s->forward_ms;
        c->bwd[i] = s->backward_ms;
        c->opt[i] = s->optimizer_ms;
        double parts = (isfinite(s->data_ms) ? s->data_ms : 0) +
                       (isfinite(s->forward_ms) ? s->forward_ms : 0) +
                       (isfinite(s->backward_ms) ? s->backward_ms : 0) +
                       (isfinite(s->optimizer_ms) ? s->optimizer_ms : 0);
        c->other[i] = fmax(0, s->step_ms - parts); // what the four ranges do not cover
        c->sps[i] = s->step_ms > 0 ? s->samples / (s->step_ms / 1e3) : NAN;
        c->tps[i] = s->step_ms > 0 ? s->tokens / (s->step_ms / 1e3) : NAN;
        c->mem[i] = s->memory_bytes / 1e6;
        c->rss[i] = s->rss_bytes / 1e6;
    }
    return 1;
}

static double mean_of(const double *v, int32_t n)
{
    double s = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            s += v[i];
            k++;
        }
    return k ? s / k : NAN;
}

static void headline(lp_html *h, const lp_run_data *d)
{
    const lp_run_summary *s = &d->sum;
    char b[64];
    lp_html_stats_begin(h);
    lp_html_stat(h, "method", "%s (%s%s%s)", s->method, s->exec, s->dtype[0] ? ", " : "", s->dtype);
    if (s->bf16_path[0])
        lp_html_stat(h, "bf16 GEMMs", "%s", s->bf16_path);
    lp_html_stat(h, "steps", "%.0f", s->steps);
    lp_html_stat(h, "final loss", "%.4f", s->final_loss);
    if (isfinite(s->eval_accuracy))
        lp_html_stat(h, "eval accuracy", "%.1f %%", 100 * s->eval_accuracy);
    lp_html_stat(h, "step time (mean)", "%.1f ms", s->step_ms);
    lp_html_stat(h, "throughput", "%.1f samples/s", s->samples_per_s);
    lp_run__fmt_bytes(s->peak_bytes, b, sizeof b);
    lp_html_stat(h, "peak memory (tracked)", "%s", b);
    if (isfinite(d->peak_rss_bytes)) {
        lp_run__fmt_bytes(d->peak_rss_bytes, b, sizeof b);
        lp_html_stat(h, "peak RSS", "%s", b);
    }
    lp_html_stat(h, "trainable parameters", "%.0f of %.0f (%.2f %%)", s->params_trainable, s->params_total,
                 100 * s->params_trainable / s->params_total);
    if (isfinite(d->mfu))
        lp_html_stat(h, "MFU", "%.1f %% (%.2f GFLOP/s)", 100 * d->mfu, d->achieved_gflops);
    lp_html_stats_end(h);
}

static void training_charts(lp_html *h, const lp_run_data *d, const cols *c)
{
    int32_t n = d->n_steps;
    lp_html_section_begin(h, "training", "Training");
    if (n == 0) {
        lp_html_p(h, "No steps recorded (steps.csv is empty or absent).");
        lp_html_section_end(h);
        return;
    }
    lp_chart_series loss = {.name = "training loss", .x = c->x, .y = c->loss, .n = n};
    lp_chart_series lr = {.name = "learning rate", .x = c->x, .y = c->lr, .n = n};
    lp_chart_panel pl[] = {
        {.title = "Loss", .xlabel = "step", .ylabel = "loss", .series = &loss, .n_series = 1},
        {.title = "Learning rate",
         .xlabel = "step",
         .ylabel = "lr",
         .y_from_zero = 1,
         .series = &lr,
         .n_series = 1},
    };
    lp_figure f = {.title = "Loss and learning rate",
                   .rows = 1,
                   .cols = 2,
                   .width = 1100,
                   .height = 380,
                   .panels = pl,
                   .n_panels = 2};
    lp_html_chart(h, "loss_lr", &f);

    lp_chart_series parts[] = {{.name = "data", .x = c->x, .y = c->data, .n = n},
                               {.name = "forward", .x = c->x, .y = c->fwd, .n = n},
                               {.name = "backward", .x = c->x, .y = c->bwd, .n = n},
                               {.name = "optimizer", .x = c->x, .y = c->opt, .n = n},
                               {.name = "other", .x = c->x, .y = c->other, .n = n}};
    lp_chart_panel ps = {.title = "Time per step",
                         .xlabel = "step",
                         .ylabel = "ms",
                         .kind = LP_CHART_STACKED,
                         .y_from_zero = 1,
                         .series = parts,
                         .n_series = 5};
    f = lp_run__figure(&ps, "Step time split: data, forward, backward, optimizer", 1100, 380);
    lp_html_chart(h, "step_time", &f);
    lp_html_note(
        h,
        "Mean per step: data %.2f ms, forward %.1f ms, backward %.1f ms, optimizer %.1f ms, other %.2f ms "
        "(the step's wall time not inside those four ranges).",
        mean_of(c->data, n), mean_of(c->fwd, n), mean_of(c->bwd, n), mean_of(c->opt, n),
        mean_of(c->other, n));

    lp_chart_series sps = {.name = "samples/s", .x = c->x, .y = c->sps, .n = n};
    lp_chart_series tps = {.name = "tokens/s", .x = c->x, .y = c->tps, .n = n};
    lp_chart_panel pt[] = {
        {.title = "Samples per second", .xlabel = "step", .y_from_zero = 1, .series = &sps, .n_series = 1},
        {.title = "Tokens per second", .xlabel = "step", .y_from_zero = 1, .series = &tps, .n_series = 1},
    };
    f = (lp_figure){.title = "Throughput over steps",
                    .rows = 1,
                    .cols = 2,
                    .width = 1100,
                    .height = 340,
                    .panels = pt,
                    .n_panels = 2};
    lp_html_chart(h, "throughput", &f);
    lp_html_section_end(h);
}

static void memory_chart(lp_html *h, const lp_run_data *d, const cols *c)
{
    lp_html_section_begin(h, "memory", "Memory");
    const lp_run_summary *s = &d->sum;
    if (d->n_mem > 1) {
        double *t = malloc((size_t)d->n_mem * (LP_MEM_CATEGORY__COUNT + 1) * sizeof *t);
        if (!t) {
            lp_html_p(h, "(out of memory drawing the memory timeline)");
            lp_html_section_end(h);
            return;
        }
        lp_chart_series se[LP_MEM_CATEGORY__COUNT];
        int32_t ns = 0;
        for (int32_t i = 0; i < d->n_mem; i++)
            t[i] = d->mem[i].t_ms;
        for (int cat = 0; cat < LP_MEM_CATEGORY__COUNT; cat++) {
            double *y = t + (size_t)(cat + 1) * d->n_mem, mx = 0;
            for (int32_t i = 0; i < d->n_mem; i++)
                mx = fmax(mx, y[i] = d->mem[i].bytes[cat] / 1e6);
            if (mx > 0) // a category never used would be a flat line at 0
                se[ns++] = (lp_chart_series){
                    .name = lp_mem_category_name((lp_mem_category)cat), .x = t, .y = y, .n = d->n_mem};
        }
        lp_chart_panel p = {.title = "Live memory by category (profiled window)",
                            .xlabel = "ms",
                            .ylabel = "MB",
                            .y_from_zero = 1,
                            .series = se,
                            .n_series = ns};
        lp_figure f = lp_run__figure(&p, "Memory by category over time", 1100, 400);
        lp_html_chart(h, "memory", &f);
        free(t);
    } else if (d->n_steps > 0) {
        lp_chart_series se[] = {{.name = "tracked (all categories)", .x = c->x, .y = c->mem, .n = d->n_steps},
                                {.name = "process RSS", .x = c->x, .y = c->rss, .n = d->n_steps}};
        lp_chart_panel p = {.title = "Memory after each step",
                            .xlabel = "step",
                            .ylabel = "MB",
                            .y_from_zero = 1,
                            .series = se,
                            .n_series = 2};
        lp_figure f = lp_run__figure(&p, "Memory over steps", 1100, 360);
        lp_html_chart(h, "memory", &f);
        lp_html_note(h, "Per-category curves come from a profiled run's trace (loupe profile); this run has "
                        "the per-step totals and the peak per category below.");
    }
    if (s->n_mem > 0) {
        double x[LP_COMPARE_MAX_CATS], y[LP_COMPARE_MAX_CATS];
        const char *names[LP_COMPARE_MAX_CATS];
        int32_t k = 0;
        for (int i = 0; i < s->n_mem; i++)
            if (s->mem[i].bytes > 0) {
                x[k] = k;
                y[k] = s->mem[i].bytes / 1e6;
                names[k++] = s->mem[i].name;
            }
        lp_chart_series se = {.name = "peak MB", .x = x, .y = y, .n = k};
        lp_chart_panel p = {.title = "Peak by category",
                            .ylabel = "MB",
                            .kind = LP_CHART_BAR,
                            .x_scale = LP_CHART_X_CATEGORY,
                            .x_categories = names,
                            .n_categories = k,
                            .y_from_zero = 1,
                            .series = &se,
                            .n_series = 1};
        lp_figure f = lp_run__figure(&p, "Peak memory by category", 1100, 340);
        if (k > 0)
            lp_html_chart(h, "memory_peak", &f);
    }
    lp_html_section_end(h);
}

static void top_ops(lp_html *h, const lp_run_data *d)
{
    lp_html_section_begin(h, "ops", "Top ops");
    if (d->n_ops == 0) {
        lp_html_p(h, "No op timings: run `loupe profile` (or train with --profile) for the per-op view.");
        lp_html_section_end(h);
        return;
    }
    enum { TOP = 10 };
    double x[TOP], y[TOP], total = 0;
    const char *names[TOP];
    int32_t k = d->n_ops < TOP ? d->n_ops : TOP;
    for (int32_t i = 0; i < d->n_ops; i++)
        total += d->ops[i].self_ms;
    for (int32_t i = 0; i < k; i++) {
        x[i] = i;
        y[i] = d->ops[i].self_ms;
        names[i] = lp_run__short_op(d->ops[i].name);
    }
    lp_chart_series se = {.name = "self ms", .x = x, .y = y, .n = k};
    lp_chart_panel p = {.title = "Self time of the top ops",
                        .ylabel = "ms",
                        .kind = LP_CHART_BAR,
                        .x_scale = LP_CHART_X_CATEGORY,
                        .x_categories = names,
                        .n_categories = k,
                        .y_from_zero = 1,
                        .series = &se,
                        .n_series = 1};
    lp_figure f = lp_run__figure(&p, "Top ops by self time", 1100, 380);
    lp_html_chart(h, "top_ops", &f);
    lp_html_table_begin(h, (const char *[]){"op", "#calls", "#self ms", "#% of self time", "#total ms"}, 5);
    for (int32_t i = 0; i < d->n_ops && i < 30; i++) {
        lp_html_tr(h);
        lp_html_td(h, d->ops[i].name);
        lp_html_td_num(h, d->ops[i].calls, "%.0f");
        lp_html_td_num(h, d->ops[i].self_ms, "%.2f");
        lp_html_td_num(h, total > 0 ? 100 * d->ops[i].self_ms / total : NAN, "%.1f");
        lp_html_td_num(h, d->ops[i].total_ms, "%.2f");
    }
    lp_html_table_end(h);
    lp_html_section_end(h);
}

static void epochs(lp_html *h, const lp_run_data *d)
{
    if (d->n_epochs == 0)
        return;
    lp_html_section_begin(h, "epochs", "Epochs");
    lp_html_table_begin(h,
                        (const char *[]){"#epoch", "#train loss", "#eval loss", "#eval accuracy",
                                         "#eval macro-F1", "#samples/s"},
                        6);
    for (int32_t i = 0; i < d->n_epochs; i++) {
        const lp_run_epoch *e = &d->epochs[i];
        lp_html_tr(h);
        lp_html_td_num(h, e->epoch, "%.0f");
        lp_html_td_num(h, e->train_loss, "%.4f");
        lp_html_td_num(h, e->eval_loss, "%.4f");
        lp_html_td_num(h, e->eval_accuracy, "%.4f");
        lp_html_td_num(h, e->eval_macro_f1, "%.4f");
        lp_html_td_num(h, e->samples_per_s, "%.1f");
    }
    lp_html_table_end(h);
    lp_html_section_end(h);
}

static void files(lp_html *h, const lp_run_data *d)
{
    lp_html_section_begin(h, "files", "Files of this run");
    lp_html_raw(h, "<ul>");
    lp_html_raw(h, "<li><code>summary.json</code>: the figures above</li>");
    if (d->n_steps)
        lp_html_raw(h, "<li><code>steps.csv</code>: one line per step</li>");
    if (d->trace[0]) {
        lp_html_raw(h, "<li><code>");
        lp_html_text(h, d->trace);
        lp_html_raw(h,
                    "</code>: the Kineto trace: open it in <a href=\"https://ui.perfetto.dev\">Perfetto</a> "
                    "(Open trace file), TensorBoard or HolisticTraceAnalysis, or read it with "
                    "<code>loupe analyze</code></li>");
        lp_html_raw(h, "<li><code>profiler/key_averages.txt</code>: every op, torch's table</li>");
    }
    lp_html_raw(h, "<li><code>plots/</code>: each chart as PNG and SVG</li></ul>\n");
    lp_html_section_end(h);
}

lp_status lp_run_report_write(const lp_run_data *d, const lp_run_ceilings *c)
{
    char path[1100], plots[1100];
    snprintf(path, sizeof path, "%s/report.html", d->dir);
    snprintf(plots, sizeof plots, "%s/plots", d->dir);
    if (d->kind == LP_RUN_BENCH)
        return lp_run__bench_page(d, c, path, plots);
    char title[400];
    snprintf(title, sizeof title, "loupe run %s: %s on %s", d->sum.run_id, d->sum.method, d->model);
    lp_html *h = lp_html_new(title, plots);
    if (!h)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "%s", path);
    cols cl;
    if (!cols_make(d, &cl)) {
        lp_html_free(h);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    lp_html_h(h, 1, title);
    lp_html_note(h, "Run directory %s; task %s.", d->dir, d->task);
    headline(h, d);
    training_charts(h, d, &cl);
    memory_chart(h, d, &cl);
    top_ops(h, d);
    lp_run__diagnosis(h, d, c);
    epochs(h, d);
    files(h, d);
    free(cl.x);
    lp_status st = lp_html_write(h, path);
    lp_html_free(h);
    return st;
}
