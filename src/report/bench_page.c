/* report.html of a bench run (loupe bench): the machine and model, then latency, throughput
 * and memory over the batch-size sweep, and the numbers as a table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run_internal.h"

lp_status lp_run__bench_page(const lp_run_data *d, const char *path, const char *plots)
{
    const lp_bench_curve *b = d->bench;
    char title[320];
    snprintf(title, sizeof title, "loupe bench %s", b->label);
    lp_html *h = lp_html_new(title, plots);
    if (!h)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "%s", path);
    lp_html_h(h, 1, title);
    lp_html_note(h, "Run directory %s%s.", d->dir, b->complete ? "" : " (incomplete: the sweep was stopped)");
    int32_t best = 0;
    for (int32_t i = 1; i < b->n; i++)
        if (b->thr[i] > b->thr[best])
            best = i;
    lp_html_stats_begin(h);
    lp_html_stat(h, "CPU", "%s (%s)", b->cpu, b->simd);
    lp_html_stat(h, "weights", "%s, %.1f MB", b->dtype, b->model_mb);
    if (isfinite(b->accuracy))
        lp_html_stat(h, "accuracy", "%.1f %% (macro-F1 %.3f)", 100 * b->accuracy, b->macro_f1);
    if (b->n > 0) {
        lp_html_stat(h, "best throughput", "%.1f samples/s at batch %.0f", b->thr[best], b->batch_size[best]);
        lp_html_stat(h, "latency at batch 1", "%.2f ms/sample", b->lat_sample[0]);
    }
    lp_html_stats_end(h);
    lp_html_section_begin(h, "sweep", "Batch-size sweep");
    lp_chart_series lat = {.name = "ms per sample", .x = b->batch_size, .y = b->lat_sample, .err = b->lat_sample_std, .n = b->n};
    lp_chart_series thr = {.name = "samples/s", .x = b->batch_size, .y = b->thr, .err = b->thr_std, .n = b->n};
    lp_chart_series mem[] = {{.name = "allocator peak", .x = b->batch_size, .y = b->alloc_mb, .err = b->alloc_std, .n = b->n},
                             {.name = "process RSS", .x = b->batch_size, .y = b->rss_mb, .err = b->rss_std, .n = b->n}};
    lp_chart_panel p[] = {
        {.title = "Latency per sample", .xlabel = "batch size", .ylabel = "ms", .x_scale = LP_CHART_X_LOG2,
         .y_log = 1, .series = &lat, .n_series = 1},
        {.title = "Throughput", .xlabel = "batch size", .ylabel = "samples/s", .x_scale = LP_CHART_X_LOG2,
         .y_from_zero = 1, .series = &thr, .n_series = 1},
        {.title = "Memory", .xlabel = "batch size", .ylabel = "MB", .kind = LP_CHART_BAR, .x_scale = LP_CHART_X_LOG2,
         .y_from_zero = 1, .series = mem, .n_series = 2},
    };
    static const char *names[] = {"latency", "throughput", "memory"};
    for (int i = 0; i < 3; i++) {
        lp_figure f = lp_run__figure(&p[i], p[i].title, 1000, 380);
        lp_html_chart(h, names[i], &f);
    }
    lp_html_table_begin(h,
                        (const char *[]){"#batch", "#ms/sample", "#ms/batch", "#samples/s", "#tokens/s",
                                         "#alloc MB", "#RSS MB", "#samples/s per GB"},
                        8);
    for (int32_t i = 0; i < b->n; i++) {
        lp_html_tr(h);
        lp_html_td_num(h, b->batch_size[i], "%.0f");
        lp_html_td_num(h, b->lat_sample[i], "%.3f");
        lp_html_td_num(h, b->lat_batch[i], "%.2f");
        lp_html_td_num(h, b->thr[i], "%.1f");
        lp_html_td_num(h, b->tokens_per_s[i], "%.0f");
        lp_html_td_num(h, b->alloc_mb[i], "%.1f");
        lp_html_td_num(h, b->rss_mb[i], "%.1f");
        lp_html_td_num(h, b->eff[i], "%.1f");
    }
    lp_html_table_end(h);
    lp_html_section_end(h);
    lp_status st = lp_html_write(h, path);
    lp_html_free(h);
    return st;
}
