/* The compare page (loupe compare --html): runs side by side. A table of each run's
 * figures with its ratio to the first run's, loss and step time over steps overlaid, and
 * throughput, memory by category, eval accuracy and the top ops' self time per run. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

enum { MAXR = 8, TOPOPS = 8 };

static const char *label(const lp_run_data *d)
{
    return d->sum.run_id[0] ? d->sum.run_id : d->dir;
}

static void ratio_cell(lp_html *h, double v, double base, const char *fmt)
{
    char num[64];
    if (!isfinite(v)) {
        lp_html_td_num(h, NAN, "%g");
        return;
    }
    snprintf(num, sizeof num, fmt, v);
    if (isfinite(base) && base != 0)
        lp_html_tdf(h, "%s (x%.2f)", num, v / base);
    else
        lp_html_td(h, num);
}

static void table(lp_html *h, const lp_run_data *const *r, int n)
{
    static const char *rows[] = {"method / exec", "model", "trainable parameters", "steps", "step ms (mean)",
                                 "samples/s", "peak memory (tracked) MB", "final loss", "eval accuracy"};
    const char *head[MAXR + 1] = {"figure"};
    for (int i = 0; i < n; i++)
        head[i + 1] = label(r[i]);
    lp_html_table_begin(h, head, n + 1);
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        lp_html_tr(h);
        lp_html_td(h, rows[k]);
        for (int i = 0; i < n; i++) {
            const lp_run_summary *s = &r[i]->sum, *b = &r[0]->sum;
            switch (k) {
            case 0: lp_html_tdf(h, "%s / %s", s->method, s->exec); break;
            case 1: lp_html_td(h, r[i]->model); break;
            case 2: ratio_cell(h, s->params_trainable, b->params_trainable, "%.0f"); break;
            case 3: ratio_cell(h, s->steps, b->steps, "%.0f"); break;
            case 4: ratio_cell(h, s->step_ms, b->step_ms, "%.1f"); break;
            case 5: ratio_cell(h, s->samples_per_s, b->samples_per_s, "%.1f"); break;
            case 6: ratio_cell(h, s->peak_bytes / 1e6, b->peak_bytes / 1e6, "%.1f"); break;
            case 7: ratio_cell(h, s->final_loss, b->final_loss, "%.4f"); break;
            default: ratio_cell(h, s->eval_accuracy, b->eval_accuracy, "%.4f"); break;
            }
        }
    }
    lp_html_table_end(h);
    lp_html_note(h, "(xR): the ratio to the first run's figure.");
}

/* Each run's steps as one series per run: column off of lp_run_step. */
static void over_steps(lp_html *h, const lp_run_data *const *r, int n, size_t off, int from_zero,
                       const char *name, const char *title, const char *ylabel, double **bufs)
{
    lp_chart_series se[MAXR];
    int32_t ns = 0;
    for (int i = 0; i < n; i++) {
        int32_t m = r[i]->n_steps;
        if (m == 0)
            continue;
        double *x = bufs[i], *y = bufs[i] + m;
        for (int32_t k = 0; k < m; k++) {
            x[k] = r[i]->steps[k].step;
            y[k] = *(const double *)((const char *)&r[i]->steps[k] + off);
        }
        se[ns++] = (lp_chart_series){.name = label(r[i]), .x = x, .y = y, .n = m};
    }
    lp_chart_panel p = {.title = title, .xlabel = "step", .ylabel = ylabel, .y_from_zero = from_zero,
                        .series = se, .n_series = ns};
    lp_figure f = lp_run__figure(&p, title, 1100, 380);
    if (ns > 0)
        lp_html_chart(h, name, &f);
}

static void per_run_bars(lp_html *h, const lp_run_data *const *r, int n)
{
    double x[MAXR], thr[MAXR], acc[MAXR];
    const char *names[MAXR];
    int any_acc = 0;
    for (int i = 0; i < n; i++) {
        x[i] = i;
        names[i] = label(r[i]);
        thr[i] = r[i]->sum.samples_per_s;
        acc[i] = 100 * r[i]->sum.eval_accuracy;
        any_acc |= isfinite(acc[i]);
    }
    lp_chart_series st = {.name = "samples/s", .x = x, .y = thr, .n = n};
    lp_chart_series sa = {.name = "eval accuracy %", .x = x, .y = acc, .n = n};
    lp_chart_panel p[] = {
        {.title = "Training throughput", .ylabel = "samples/s", .kind = LP_CHART_BAR, .x_scale = LP_CHART_X_CATEGORY,
         .x_categories = names, .n_categories = n, .y_from_zero = 1, .series = &st, .n_series = 1},
        {.title = "Eval accuracy", .ylabel = "%", .kind = LP_CHART_BAR, .x_scale = LP_CHART_X_CATEGORY,
         .x_categories = names, .n_categories = n, .y_from_zero = 1, .series = &sa, .n_series = 1},
    };
    lp_figure f = {.rows = 1, .cols = any_acc ? 2 : 1, .width = 1100, .height = 360, .panels = p,
                   .n_panels = any_acc ? 2 : 1};
    lp_html_chart(h, "throughput_accuracy", &f);

    /* memory: one stacked bar per run, a segment per category used by any run */
    static double ys[LP_COMPARE_MAX_CATS][MAXR];
    lp_chart_series sm[LP_COMPARE_MAX_CATS];
    int32_t nc = 0;
    for (int c = 0; c < r[0]->sum.n_mem && nc < LP_COMPARE_MAX_CATS; c++) {
        const char *cat = r[0]->sum.mem[c].name;
        double mx = 0;
        for (int i = 0; i < n; i++) {
            double v = lp_run_summary_mem(&r[i]->sum, cat);
            ys[nc][i] = isfinite(v) ? v / 1e6 : 0;
            mx = fmax(mx, ys[nc][i]);
        }
        if (mx > 0)
            sm[nc] = (lp_chart_series){.name = cat, .x = x, .y = ys[nc], .n = n}, nc++;
    }
    lp_chart_panel pm = {.title = "Peak memory by category", .ylabel = "MB", .kind = LP_CHART_STACKED,
                         .x_scale = LP_CHART_X_CATEGORY, .x_categories = names, .n_categories = n,
                         .y_from_zero = 1, .series = sm, .n_series = nc};
    f = lp_run__figure(&pm, NULL, 1100, 400);
    if (nc > 0)
        lp_html_chart(h, "memory", &f);
}

/* The first run's top ops by self time, each run's self ms of them side by side. */
static void top_ops(lp_html *h, const lp_run_data *const *r, int n)
{
    const lp_run_data *b = r[0];
    int32_t k = b->n_ops < TOPOPS ? b->n_ops : TOPOPS;
    if (k == 0) {
        lp_html_p(h, "No op timings in the first run (profile it for the per-op comparison).");
        return;
    }
    static double y[MAXR][TOPOPS];
    double x[TOPOPS];
    const char *names[TOPOPS];
    lp_chart_series se[MAXR];
    for (int32_t j = 0; j < k; j++) {
        x[j] = j;
        names[j] = lp_run__short_op(b->ops[j].name);
    }
    for (int i = 0; i < n; i++) {
        for (int32_t j = 0; j < k; j++) {
            y[i][j] = NAN;
            for (int32_t q = 0; q < r[i]->n_ops; q++)
                if (strcmp(r[i]->ops[q].name, b->ops[j].name) == 0)
                    y[i][j] = r[i]->ops[q].self_ms;
        }
        se[i] = (lp_chart_series){.name = label(r[i]), .x = x, .y = y[i], .n = k};
    }
    lp_chart_panel p = {.title = "Top ops of the first run: self time in each run", .ylabel = "ms",
                        .kind = LP_CHART_BAR, .x_scale = LP_CHART_X_CATEGORY, .x_categories = names,
                        .n_categories = k, .y_from_zero = 1, .series = se, .n_series = n};
    lp_figure f = lp_run__figure(&p, NULL, 1100, 400);
    lp_html_chart(h, "top_ops", &f);
    const char *head[MAXR + 1] = {"op"};
    char hb[MAXR][160];
    for (int i = 0; i < n; i++) {
        snprintf(hb[i], sizeof hb[i], "#%.120s self ms", label(r[i]));
        head[i + 1] = hb[i];
    }
    lp_html_table_begin(h, head, n + 1);
    for (int32_t j = 0; j < k; j++) {
        lp_html_tr(h);
        lp_html_td(h, b->ops[j].name);
        for (int i = 0; i < n; i++)
            lp_html_td_num(h, y[i][j], "%.2f");
    }
    lp_html_table_end(h);
}

lp_status lp_compare_html_write(const lp_run_data *const *runs, int n, const char *path, const char *plots_dir)
{
    if (n < 1 || n > MAXR)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: compare takes 1 to %d runs, got %d", path, MAXR, n);
    for (int i = 0; i < n; i++)
        if (runs[i]->kind != LP_RUN_TRAIN)
            return lp_err(LP_STATUS_INVALID_ARG, "%s: a bench run; compare bench runs with loupe bench --compare",
                          runs[i]->dir);
    double *bufs[MAXR] = {0};
    for (int i = 0; i < n; i++)
        if (!(bufs[i] = malloc(2 * sizeof(double) * (size_t)(runs[i]->n_steps + 1)))) {
            for (int k = 0; k < i; k++)
                free(bufs[k]);
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        }
    char title[256];
    snprintf(title, sizeof title, "loupe compare: %d runs", n);
    lp_html *h = lp_html_new(title, plots_dir);
    lp_status st = LP_STATUS_NO_MEMORY;
    if (h) {
        lp_html_h(h, 1, title);
        lp_html_raw(h, "<p>Each run's own page: ");
        for (int i = 0; i < n; i++) {
            char abs[PATH_MAX];
            lp_html_raw(h, i ? ", <a href=\"file://" : "<a href=\"file://");
            lp_html_text(h, realpath(runs[i]->dir, abs) ? abs : runs[i]->dir);
            lp_html_raw(h, "/report.html\">");
            lp_html_text(h, label(runs[i]));
            lp_html_raw(h, "</a>");
        }
        lp_html_raw(h, "</p>\n");
        lp_html_section_begin(h, "figures", "Figures");
        table(h, runs, n);
        lp_html_section_end(h);
        lp_html_section_begin(h, "curves", "Over steps");
        over_steps(h, runs, n, offsetof(lp_run_step, loss), 0, "loss", "Training loss", "loss", bufs);
        over_steps(h, runs, n, offsetof(lp_run_step, step_ms), 1, "step_time", "Step time", "ms", bufs);
        lp_html_section_end(h);
        lp_html_section_begin(h, "per-run", "Throughput, accuracy and memory");
        per_run_bars(h, runs, n);
        lp_html_section_end(h);
        lp_html_section_begin(h, "ops", "Top ops");
        top_ops(h, runs, n);
        lp_html_section_end(h);
        st = lp_html_write(h, path);
        lp_html_free(h);
    }
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    return st == LP_STATUS_NO_MEMORY && !h ? lp_err(st, "%s: out of memory", path) : st;
}
