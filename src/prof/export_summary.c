/* summary JSON: steps and step-time statistics, the per-step breakdown, memory peaks by
 * category (in the window, and process-wide when recorded live), and the top ops by self
 * CPU time. Later layers embed it in a run's summary.json. */
#include "prof_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void num(lp_prof_out *o, double v)
{
    if (isfinite(v))
        lp_prof_out_printf(o, "%.6g", v);
    else
        lp_prof_out_puts(o, "null");
}

lp_status lp_prof_export_summary(const lp_prof_events *ev, const char *path)
{
    const lp_prof_events_info *in = lp_prof_events_info_get(ev);
    lp_prof_step_row *rows = NULL;
    size_t nrows = 0;
    lp_prof_mem_pt *pts = NULL;
    size_t npts = 0;
    lp_prof_keyavg ka;
    memset(&ka, 0, sizeof ka);
    int64_t *durs = NULL;
    lp_prof_out *o = NULL;
    lp_status st = lp_prof_step_breakdown(ev, &rows, &nrows);
    if (st == LP_OK)
        st = lp_prof__mem_series(ev, &pts, &npts);
    lp_prof_keyavg_opts ko;
    lp_prof_keyavg_opts_init(&ko);
    if (st == LP_OK)
        st = lp_prof_keyavg_build(ev, &ko, &ka);
    if (st == LP_OK && !(durs = malloc((nrows ? nrows : 1) * sizeof *durs)))
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    if (st == LP_OK)
        st = lp_prof_out_open(&o, path, 0);
    if (st != LP_OK)
        goto done;

    lp_prof_out_printf(o,
                       "{\n  \"schema\": \"loupe.profiler.summary/1\",\n  \"trace_index\": %lld,\n"
                       "  \"base_time_ns\": %lld,\n  \"window_ms\": ",
                       (long long)in->trace_index, (long long)in->base_time_ns);
    num(o, (double)(in->window_end_ns - in->window_start_ns) / 1e6);
    lp_prof_out_printf(o, ",\n  \"events\": %zu,\n  \"hw_counters\": \"%s\",\n",
                       lp_prof_events_count(ev),
                       in->hw_counters > 0 ? "recorded"
                       : in->hw_counters < 0 ? "unavailable"
                                              : "off");
    /* steps */
    double sum = 0, sq = 0;
    for (size_t i = 0; i < nrows; i++) {
        durs[i] = rows[i].dur_ns;
        sum += (double)rows[i].dur_ns / 1e6;
        sq += pow((double)rows[i].dur_ns / 1e6, 2);
    }
    qsort(durs, nrows, sizeof *durs, cmp_i64);
    lp_prof_out_printf(o, "  \"steps\": {\n    \"count\": %zu,\n    \"numbers\": [", nrows);
    for (size_t i = 0; i < nrows; i++)
        lp_prof_out_printf(o, "%s%lld", i ? ", " : "", (long long)rows[i].step);
    lp_prof_out_puts(o, "],\n    \"step_ms\": [");
    for (size_t i = 0; i < nrows; i++) {
        if (i)
            lp_prof_out_puts(o, ", ");
        num(o, (double)rows[i].dur_ns / 1e6);
    }
    lp_prof_out_puts(o, "],\n    \"mean_ms\": ");
    double mean = nrows ? sum / (double)nrows : NAN;
    num(o, mean);
    lp_prof_out_puts(o, ", \"median_ms\": ");
    num(o, nrows ? (nrows % 2 ? (double)durs[nrows / 2]
                              : ((double)durs[nrows / 2 - 1] + (double)durs[nrows / 2]) / 2) /
                       1e6
                 : NAN);
    lp_prof_out_puts(o, ", \"min_ms\": ");
    num(o, nrows ? (double)durs[0] / 1e6 : NAN);
    lp_prof_out_puts(o, ", \"max_ms\": ");
    num(o, nrows ? (double)durs[nrows - 1] / 1e6 : NAN);
    lp_prof_out_puts(o, ", \"std_ms\": ");
    num(o, nrows ? sqrt(fmax(0, sq / (double)nrows - mean * mean)) : NAN);
    lp_prof_out_puts(o, "\n  },\n  \"breakdown_ms\": {");
    for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++) {
        double t = 0;
        for (size_t i = 0; i < nrows; i++)
            t += (double)rows[i].part_ns[p] / 1e6;
        lp_prof_out_printf(o, "%s\"%s\": ", p ? ", " : "",
                           lp_prof_step_part_name((lp_prof_step_part)p));
        num(o, t);
    }
    lp_prof_out_puts(o, "},\n  \"per_step\": [");
    for (size_t i = 0; i < nrows; i++) {
        lp_prof_out_printf(o, "%s\n    {\"step\": %lld, \"ms\": ", i ? "," : "",
                           (long long)rows[i].step);
        num(o, (double)rows[i].dur_ns / 1e6);
        for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++) {
            lp_prof_out_printf(o, ", \"%s_ms\": ", lp_prof_step_part_name((lp_prof_step_part)p));
            num(o, (double)rows[i].part_ns[p] / 1e6);
        }
        lp_prof_out_puts(o, "}");
    }
    lp_prof_out_puts(o, "\n  ],\n  \"memory\": {\n    \"window_peak_bytes\": {");
    int64_t wpeak[LP_MEM_CATEGORY__COUNT] = {0}, wtotal = 0;
    for (size_t i = 0; i < npts; i++) {
        int64_t s = 0;
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
            if (pts[i].by_cat[c] > wpeak[c])
                wpeak[c] = pts[i].by_cat[c];
            s += pts[i].by_cat[c];
        }
        if (s > wtotal)
            wtotal = s;
    }
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
        lp_prof_out_printf(o, "%s\"%s\": %lld", c ? ", " : "",
                           lp_mem_category_name((lp_mem_category)c), (long long)wpeak[c]);
    lp_prof_out_printf(o, "},\n    \"window_peak_total_bytes\": %lld", (long long)wtotal);
    if (in->has_mem_baseline) { /* recorded live: process-wide counters are meaningful */
        lp_mem_stats ms;
        lp_prof_mem_stats(&ms);
        lp_prof_out_puts(o, ",\n    \"process_peak_bytes\": {");
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
            lp_prof_out_printf(o, "%s\"%s\": %lld", c ? ", " : "",
                               lp_mem_category_name((lp_mem_category)c), (long long)ms.peak[c]);
        lp_prof_out_printf(o, "},\n    \"process_peak_total_bytes\": %lld", (long long)ms.total_peak);
        int64_t rss, prss;
        if (lp_prof_rss(&rss, &prss) == LP_OK)
            lp_prof_out_printf(o, ",\n    \"rss_bytes\": %lld, \"peak_rss_bytes\": %lld",
                               (long long)rss, (long long)prss);
    }
    lp_prof_out_puts(o, "\n  },\n  \"top_ops\": [");
    size_t shown = 0;
    for (size_t i = 0; i < ka.n && shown < 10; i++) {
        const lp_prof_keyavg_row *r = &ka.rows[i];
        if (strcmp(r->key, "ProfilerStep*") == 0)
            continue;
        lp_prof_out_printf(o, "%s\n    {\"name\": ", shown ? "," : "");
        lp_prof_out_json_str(o, r->key);
        lp_prof_out_printf(o, ", \"calls\": %lld, \"self_cpu_us\": ", (long long)r->count);
        num(o, r->self_cpu_us);
        lp_prof_out_puts(o, ", \"cpu_total_us\": ");
        num(o, r->cpu_total_us);
        lp_prof_out_puts(o, ", \"self_cpu_pct\": ");
        num(o, ka.sum_self_cpu_us > 0 ? r->self_cpu_us * 100 / ka.sum_self_cpu_us : 0);
        lp_prof_out_puts(o, ", \"flops\": ");
        num(o, r->flops);
        lp_prof_out_puts(o, "}");
        shown++;
    }
    lp_prof_out_puts(o, "\n  ]\n}\n");
    st = lp_prof_out_commit(o);
done:
    free(rows);
    free(pts);
    free(durs);
    lp_prof_keyavg_free(&ka);
    return st;
}
