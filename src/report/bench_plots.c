/* The bench's figures, drawn through the chart module from the curves of one or more runs:
 * batch_size_comparison (six panels, mean +- std error bars, one series per run) and
 * metrics_heatmap (batch sizes as rows, metrics as columns coloured per column), each as
 * PNG and SVG. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/report.h"

enum { N_PANELS = 6, N_COLS = 7, MAX_RUNS = 8 };

static lp_status write_both(const lp_figure *f, const char *dir, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.png", dir, name);
    lp_status st = lp_figure_write_png(f, path);
    if (st != LP_OK)
        return st;
    snprintf(path, sizeof path, "%s/%s.svg", dir, name);
    return lp_figure_write_svg(f, path);
}

static lp_status comparison(const lp_bench_curve *c, int n, const char *dir)
{
    static const struct {
        const char *title, *ylabel;
        int zero;
    } spec[N_PANELS] = {
        {"Latency per sample", "ms per sample", 1}, {"Throughput", "samples / s", 1},
        {"Memory (allocator peak)", "MB", 1},       {"Process memory (RSS)", "MB", 1},
        {"Latency per batch", "ms per batch", 1},   {"Memory efficiency", "samples / s per GB RSS", 1},
    };
    lp_chart_series s[N_PANELS][MAX_RUNS];
    lp_chart_panel p[N_PANELS];
    for (int k = 0; k < N_PANELS; k++) {
        for (int i = 0; i < n; i++) {
            const lp_bench_curve *r = &c[i];
            const double *y[N_PANELS] = {r->lat_sample, r->thr, r->alloc_mb, r->rss_mb, r->lat_batch, r->eff};
            const double *e[N_PANELS] = {r->lat_sample_std, r->thr_std,       r->alloc_std,
                                         r->rss_std,        r->lat_batch_std, r->eff_std};
            s[k][i] =
                (lp_chart_series){.name = r->label, .x = r->batch_size, .y = y[k], .err = e[k], .n = r->n};
        }
        p[k] = (lp_chart_panel){.title = spec[k].title,
                                .xlabel = "batch size",
                                .ylabel = spec[k].ylabel,
                                .kind = k == 2 || k == 3 ? LP_CHART_BAR : LP_CHART_LINE,
                                .x_scale = LP_CHART_X_LOG2,
                                .y_from_zero = spec[k].zero,
                                .series = s[k],
                                .n_series = n};
    }
    char title[256];
    snprintf(title, sizeof title, "Batch-size comparison%s%s", n == 1 ? ": " : " of ",
             n == 1 ? c[0].label : "runs");
    lp_figure f = {.title = title,
                   .rows = 2,
                   .cols = 3,
                   .width = 1800,
                   .height = 1100,
                   .panels = p,
                   .n_panels = N_PANELS};
    return write_both(&f, dir, "batch_size_comparison");
}

static lp_status heatmap(const lp_bench_curve *c, int n, const char *dir)
{
    static const char *cols[N_COLS] = {"latency/sample ms", "latency/batch ms", "samples/s",   "tokens/s",
                                       "allocator MB",      "RSS MB",           "samples/s/GB"};
    int32_t rows = 0;
    for (int i = 0; i < n; i++)
        rows += c[i].n;
    double *v = malloc((size_t)rows * N_COLS * sizeof *v);
    char *text = malloc((size_t)rows * N_COLS * 24), *rl = malloc((size_t)rows * 96);
    const char **tp = malloc((size_t)rows * N_COLS * sizeof *tp), **rp = malloc((size_t)rows * sizeof *rp);
    lp_status st = LP_OK;
    if (!v || !text || !rl || !tp || !rp) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for the heatmap", dir);
        goto out;
    }
    int32_t r = 0;
    for (int i = 0; i < n; i++)
        for (int32_t k = 0; k < c[i].n; k++, r++) {
            const lp_bench_curve *u = &c[i];
            double row[N_COLS] = {u->lat_sample[k], u->lat_batch[k], u->thr[k], u->tokens_per_s[k],
                                  u->alloc_mb[k],   u->rss_mb[k],    u->eff[k]};
            for (int j = 0; j < N_COLS; j++) {
                v[r * N_COLS + j] = row[j];
                char *t = text + (size_t)(r * N_COLS + j) * 24;
                double a = fabs(row[j]);
                snprintf(t, 24, a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : a >= 1 ? "%.2f" : "%.3f", row[j]);
                tp[r * N_COLS + j] = t;
            }
            char *l = rl + (size_t)r * 96;
            if (n == 1)
                snprintf(l, 96, "batch %.0f", u->batch_size[k]);
            else
                snprintf(l, 96, "%.60s: %.0f", u->label, u->batch_size[k]);
            rp[r] = l;
        }
    lp_chart_heatmap h = {.rows = rows,
                          .cols = N_COLS,
                          .values = v,
                          .text = tp,
                          .row_labels = rp,
                          .col_labels = cols,
                          .normalise_columns = 1};
    lp_chart_panel p = {.title =
                            "Metrics by batch size (colour normalised per column: dark low, yellow high)",
                        .kind = LP_CHART_HEATMAP,
                        .heatmap = &h};
    int32_t height = 300 + rows * 48; // cells tall enough for their text
    lp_figure f = {.title = "Metrics heatmap",
                   .rows = 1,
                   .cols = 1,
                   .width = 1400,
                   .height = height > 16000 ? 16000 : height,
                   .panels = &p,
                   .n_panels = 1};
    st = write_both(&f, dir, "metrics_heatmap");
out:
    free(v);
    free(text);
    free(rl);
    free(tp);
    free(rp);
    return st;
}

lp_status lp_bench_plots_write(const lp_bench_curve *c, int n, const char *dir)
{
    if (n < 1 || n > MAX_RUNS)
        return lp_err(LP_STATUS_INVALID_ARG, "bench plots: 1 to %d runs, got %d", MAX_RUNS, n);
    lp_status st = lp_mkdir_p(dir);
    if (st != LP_OK)
        return st;
    if ((st = comparison(c, n, dir)) != LP_OK)
        return st;
    return heatmap(c, n, dir);
}
