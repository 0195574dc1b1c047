/* loupe analyze --html: the views TensorBoard's profiler plugin had (Overview, Operator,
 * Kernel, Memory, Distributed, Trace) as one self-contained page, drawn from the trace
 * model's tables with the report layer's HTML toolkit. Every number here is also in the
 * text output or the CSVs. */
#include "loupe/report.h"
#include "trace_model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double ms(int64_t ns)
{
    return (double)ns / 1e6;
}
static double pct(int64_t a, int64_t b)
{
    return b > 0 ? 100.0 * (double)a / (double)b : 0.0;
}

static lp_figure figure(const lp_chart_panel *p, const char *title)
{
    return (lp_figure){
        .title = title, .rows = 1, .cols = 1, .width = 1100, .height = 380, .panels = p, .n_panels = 1};
}

/* Recommendations, each with the threshold it used and the value measured. */
static void recommendations(lp_html *h, const lp_trace_model *m)
{
    int any = 0;
    const lp_trace_gpu *g = &m->gpu;
    int64_t span = g->last_ns - g->first_ns, idle = span - g->busy_ns;
    const lp_trace_step *t = &m->total;
    lp_html_h(h, 3, "Recommendations");
    if (m->has_device && span > 0 && pct(idle, span) > 30.0) {
        any = 1;
        int host = g->idle_host_wait_ns >= g->idle_kernel_wait_ns && g->idle_host_wait_ns >= g->idle_other_ns;
        lp_html_p(
            h,
            "GPU idle %.1f %% of its span (threshold 30 %%). %s: host wait %.3f ms, kernel wait %.3f ms, "
            "other %.3f ms.%s",
            pct(idle, span), host ? "Most of it is the host launching too late" : "Idle time by cause",
            ms(g->idle_host_wait_ns), ms(g->idle_kernel_wait_ns), ms(g->idle_other_ns),
            host ? " Larger batches, fewer small ops (fusion, torch.compile) or CUDA graphs cut launch gaps."
                 : "");
    }
    if (t->dur_ns > 0 && pct(t->part_ns[LP_TRACE_PART_DATALOADER], t->dur_ns) > 10.0) {
        any = 1;
        lp_html_p(h,
                  "Data loading takes %.1f %% of the trace (threshold 10 %%): more DataLoader workers, "
                  "pin_memory or prefetching overlap it with compute.",
                  pct(t->part_ns[LP_TRACE_PART_DATALOADER], t->dur_ns));
    }
    if (t->dur_ns > 0 && pct(t->part_ns[LP_TRACE_PART_MEMCPY], t->dur_ns) > 10.0) {
        any = 1;
        lp_html_p(
            h,
            "Memory copies take %.1f %% of the trace (threshold 10 %%): keep tensors on the device, copy "
            "asynchronously from pinned memory.",
            pct(t->part_ns[LP_TRACE_PART_MEMCPY], t->dur_ns));
    }
    /* a CPU-only trace: communication ranges against other threads' compute */
    const int64_t comm = m->has_device ? g->comm_ns : m->host_comm_ns,
                  overlap = m->has_device ? g->comm_overlap_ns : m->host_comm_overlap_ns;
    if (comm > 0 && pct(overlap, comm) < 50.0) {
        any = 1;
        lp_html_p(
            h,
            "Only %.1f %% of communication overlaps compute (threshold 50 %%): bucketed all-reduce during "
            "backward (DDP's default) or FSDP prefetch hides more of it.",
            pct(overlap, comm));
    }
    if (t->dur_ns > 0 && pct(t->part_ns[LP_TRACE_PART_RUNTIME], t->dur_ns) > 20.0) {
        any = 1;
        lp_html_p(
            h,
            "Runtime calls (launches, synchronisation) take %.1f %% of the trace (threshold 20 %%): look for "
            "cudaStreamSynchronize / .item() calls in the loop.",
            pct(t->part_ns[LP_TRACE_PART_RUNTIME], t->dur_ns));
    }
    if (!any)
        lp_html_p(
            h, "Nothing crossed a threshold (GPU idle 30 %%, data loading 10 %%, memcpy 10 %%, communication "
               "overlap 50 %%, runtime 20 %%).");
}

static void overview(lp_html *h, const lp_trace_model *m)
{
    lp_html_tab_begin(h, "overview", "Overview");
    lp_html_stats_begin(h);
    lp_html_stat(h, "events", "%llu (%llu used, %llu malformed skipped)", (unsigned long long)m->n_events,
                 (unsigned long long)m->n_used, (unsigned long long)m->n_skipped);
    lp_html_stat(h, "trace span", "%.3f ms", ms(m->last_ns - m->first_ns));
    if (m->device_name[0])
        lp_html_stat(h, "devices", "%lld x %s", (long long)m->device_count, m->device_name);
    if (m->rank >= 0)
        lp_html_stat(h, "rank", "%lld of %lld %s", (long long)m->rank, (long long)m->world_size, m->backend);
    if (m->has_device) {
        int64_t span = m->gpu.last_ns - m->gpu.first_ns;
        lp_html_stat(h, "GPU utilisation", "%.1f %% busy of %.3f ms", pct(m->gpu.busy_ns, span), ms(span));
    }
    lp_html_stats_end(h);

    size_t n = m->n_steps;
    double *x = calloc(n ? n : 1, sizeof *x), *y = calloc((n ? n : 1) * LP_TRACE_PART__COUNT, sizeof *y);
    const char **cats = calloc(n ? n : 1, sizeof *cats);
    char(*labels)[24] = calloc(n ? n : 1, sizeof *labels);
    if (x && y && cats && labels && n) {
        lp_chart_series se[LP_TRACE_PART__COUNT];
        for (size_t i = 0; i < n; i++) {
            x[i] = (double)i;
            snprintf(labels[i], sizeof labels[i], "%lld", (long long)m->steps[i].step);
            cats[i] = m->has_steps ? labels[i] : "trace";
            for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
                y[p * n + i] = ms(m->steps[i].part_ns[p]);
        }
        for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
            se[p] = (lp_chart_series){
                .name = lp_trace_part_name((lp_trace_part)p), .x = x, .y = y + p * n, .n = (int32_t)n};
        lp_chart_panel pn = {.title = "Step time breakdown",
                             .xlabel = m->has_steps ? "step" : "",
                             .ylabel = "ms",
                             .kind = LP_CHART_STACKED,
                             .x_scale = LP_CHART_X_CATEGORY,
                             .x_categories = cats,
                             .n_categories = (int32_t)n,
                             .y_from_zero = 1,
                             .series = se,
                             .n_series = LP_TRACE_PART__COUNT};
        lp_figure f =
            figure(&pn, "Each step's time: kernel, memcpy, memset, communication, runtime, data loading, "
                        "CPU exec, other");
        lp_html_chart(h, "steps", &f);
    }
    free(x);
    free(y);
    free(cats);
    free(labels);
    const char *hd[] = {"step",          "time ms", "kernel",     "memcpy",   "memset",
                        "communication", "runtime", "dataloader", "cpu_exec", "other"};
    lp_html_table_begin(h, hd, 10);
    for (size_t i = 0; i < n; i++) {
        lp_html_tr(h);
        lp_html_td_num(h, (double)m->steps[i].step, "%.0f");
        lp_html_td_num(h, ms(m->steps[i].dur_ns), "%.3f");
        for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
            lp_html_td_num(h, ms(m->steps[i].part_ns[p]), "%.3f");
    }
    lp_html_table_end(h);
    if (m->has_device) {
        const lp_trace_gpu *g = &m->gpu;
        lp_html_h(h, 3, "GPU");
        lp_html_p(
            h,
            "Busy %.3f ms: compute %.3f ms, communication %.3f ms (%.1f %% overlapped by compute), memory "
            "%.3f "
            "ms. Idle %.3f ms, split as HolisticTraceAnalysis does: host wait %.3f ms, kernel wait %.3f ms "
            "(gaps under %d us), other %.3f ms.",
            ms(g->busy_ns), ms(g->compute_ns), ms(g->comm_ns), pct(g->comm_overlap_ns, g->comm_ns),
            ms(g->memory_ns), ms(g->last_ns - g->first_ns - g->busy_ns), ms(g->idle_host_wait_ns),
            ms(g->idle_kernel_wait_ns), LP_TRACE_KERNEL_WAIT_NS / 1000, ms(g->idle_other_ns));
    }
    if (!m->has_device && m->host_comm_ns > 0) {
        lp_html_h(h, 3, "Host communication");
        lp_html_p(h,
                  "Communication ranges %.3f ms, %.1f %% of them overlapped by compute on other threads "
                  "(HolisticTraceAnalysis's overlap, which needs GPU kernels, over host threads).",
                  ms(m->host_comm_ns), pct(m->host_comm_overlap_ns, m->host_comm_ns));
    }
    recommendations(h, m);
    lp_html_tab_end(h);
}

static void op_table(lp_html *h, const lp_trace_op_row *r, size_t n, int shapes)
{
    const char *hd[] = {"name",         "input shapes",   "calls",           "self CPU us",
                        "CPU total us", "self device us", "device total us", "allocated bytes"};
    if (shapes) {
        lp_html_table_begin(h, hd, 8);
    } else {
        const char *hd2[] = {"name",           "calls",           "self CPU us",    "CPU total us",
                             "self device us", "device total us", "allocated bytes"};
        lp_html_table_begin(h, hd2, 7);
    }
    for (size_t i = 0; i < n; i++) {
        lp_html_tr(h);
        lp_html_td(h, r[i].name);
        if (shapes)
            lp_html_td(h, r[i].shapes);
        lp_html_td_num(h, (double)r[i].calls, "%.0f");
        lp_html_td_num(h, r[i].self_cpu_ns / 1e3, "%.3f");
        lp_html_td_num(h, r[i].cpu_total_ns / 1e3, "%.3f");
        lp_html_td_num(h, r[i].self_device_ns / 1e3, "%.3f");
        lp_html_td_num(h, r[i].device_total_ns / 1e3, "%.3f");
        lp_html_td_num(h, (double)r[i].alloc_bytes, "%.0f");
    }
    lp_html_table_end(h);
}

/* Rows shown per table: a page stays small whatever the trace; the CSV has every row. */
#define HTML_STACK_ROWS 500

static void stacks(lp_html *h, const lp_trace_model *m)
{
    lp_html_h(h, 3, "By operator and call stack");
    if (!m->n_stacks) {
        lp_html_note(h, "The trace records no call stacks (with_stack was off).");
        return;
    }
    lp_html_p(h,
              "torch's key_averages(group_by_stack_n=%d): one row per host op and its %d innermost frames "
              "(innermost first), from %s. An op's rows sum to its row above.",
              m->stack_frames, m->stack_frames, lp_tm_stack_source(m));
    size_t *ord = lp_tm_stack_order(m, LP_PROF_SORT_CPU_TIME_TOTAL);
    if (!ord)
        return;
    /* folded by default: a few hundred rows with five frames each would bury the views below */
    char sum[96];
    snprintf(sum, sizeof sum, "<details><summary>%zu (op, stack) rows</summary>", m->n_stacks);
    lp_html_raw(h, sum);
    const char *hd[] = {"name", "call stack", "calls", "self CPU us", "CPU total us", "self device us",
                        "device total us"};
    lp_html_table_begin(h, hd, 7);
    size_t n = m->n_stacks < HTML_STACK_ROWS ? m->n_stacks : HTML_STACK_ROWS;
    for (size_t k = 0; k < n; k++) {
        const lp_trace_stack_row *r = &m->stacks[ord[k]];
        lp_html_tr(h);
        lp_html_td(h, r->name);
        const char *label = lp_tm_stack_label(r);
        if (label) {
            lp_html_td(h, label);
        } else {
            size_t len = 1;
            for (int32_t j = 0; j < r->n_frames; j++)
                len += strlen(r->frames[j]) + 3;
            char *cell = malloc(len);
            if (cell) {
                cell[0] = '\0';
                for (int32_t j = 0; j < r->n_frames; j++) {
                    if (j)
                        strcat(cell, " ; ");
                    strcat(cell, r->frames[j]);
                }
            }
            lp_html_td(h, cell ? cell : "");
            free(cell);
        }
        lp_html_td_num(h, (double)r->calls, "%.0f");
        lp_html_td_num(h, r->self_cpu_ns / 1e3, "%.3f");
        lp_html_td_num(h, r->cpu_total_ns / 1e3, "%.3f");
        lp_html_td_num(h, r->self_device_ns / 1e3, "%.3f");
        lp_html_td_num(h, r->device_total_ns / 1e3, "%.3f");
    }
    lp_html_table_end(h);
    lp_html_raw(h, "</details>");
    free(ord);
    if (n < m->n_stacks)
        lp_html_note(h, "The %d rows of largest CPU total of %zu; --csv DIR writes every row (stacks.csv).",
                     HTML_STACK_ROWS, m->n_stacks);
    lp_html_note(h,
                 "Memory stays bounded: each op keeps %d distinct stacks and the trace %d; %lld calls past "
                 "those caps are summed in their op's \"stacks past the cap\" row.",
                 LP_TRACE_STACKS_PER_OP, LP_TRACE_STACKS_MAX, (long long)m->stack_folded_calls);
}

static void operators(lp_html *h, const lp_trace_model *m)
{
    lp_html_tab_begin(h, "operator", "Operator");
    lp_html_p(h,
              "torch's key averages: host ops and runtime calls, and one device row per kernel, memcpy and "
              "memset name. Device time reaches an op through the runtime call that launched it (correlation "
              "id), as torch's own key_averages() does. Click a header to sort.");
    op_table(h, m->ops, m->n_ops, 0);
    if (m->has_shapes) {
        lp_html_h(h, 3, "By operator and input shapes");
        op_table(h, m->ops_shape, m->n_ops_shape, 1);
    } else {
        lp_html_note(h, "The trace has no input shapes (record_shapes was off).");
    }
    stacks(h, m);
    lp_html_tab_end(h);
}

static void kernels(lp_html *h, const lp_trace_model *m)
{
    lp_html_tab_begin(h, "kernel", "Kernel");
    if (!m->n_kernels) {
        lp_html_p(h, "No device events in this trace.");
        lp_html_tab_end(h);
        return;
    }
    double x[LP_TRACE_CLASS__COUNT], y[LP_TRACE_CLASS__COUNT] = {0};
    const char *cats[LP_TRACE_CLASS__COUNT];
    for (int c = 0; c < LP_TRACE_CLASS__COUNT; c++) {
        x[c] = c;
        cats[c] = lp_trace_class_name((lp_trace_class)c);
    }
    for (size_t i = 0; i < m->n_kernels; i++)
        y[m->kernels[i].cls] += ms(m->kernels[i].total_ns);
    lp_chart_series se = {.name = "total ms", .x = x, .y = y, .n = LP_TRACE_CLASS__COUNT};
    lp_chart_panel pn = {.title = "Device time by class",
                         .ylabel = "ms",
                         .kind = LP_CHART_BAR,
                         .x_scale = LP_CHART_X_CATEGORY,
                         .x_categories = cats,
                         .n_categories = LP_TRACE_CLASS__COUNT,
                         .y_from_zero = 1,
                         .series = &se,
                         .n_series = 1};
    lp_figure f = figure(&pn, "Kernels, memcpy and memset: compute, communication, memory");
    lp_html_chart(h, "kernel_classes", &f);
    const char *hd[] = {"kernel", "class", "calls", "total us", "mean us", "min us", "max us", "launched by"};
    lp_html_table_begin(h, hd, 8);
    for (size_t i = 0; i < m->n_kernels; i++) {
        const lp_trace_kernel_row *k = &m->kernels[i];
        lp_html_tr(h);
        lp_html_td(h, k->name);
        lp_html_td(h, lp_trace_class_name(k->cls));
        lp_html_td_num(h, (double)k->calls, "%.0f");
        lp_html_td_num(h, k->total_ns / 1e3, "%.3f");
        lp_html_td_num(h, k->total_ns / 1e3 / (double)k->calls, "%.3f");
        lp_html_td_num(h, k->min_ns / 1e3, "%.3f");
        lp_html_td_num(h, k->max_ns / 1e3, "%.3f");
        lp_html_td(h, k->launch_op[0] ? k->launch_op : "-");
    }
    lp_html_table_end(h);
    lp_html_tab_end(h);
}

static void mem_events(lp_html *h, const lp_trace_model *m)
{
    lp_html_h(h, 3, "Largest allocations");
    if (!m->n_mem_top) {
        lp_html_note(h, "No allocation events.");
        return;
    }
    int64_t top = 0;
    for (size_t i = 0; i < m->n_mem_top; i++)
        top += m->mem_top[i].bytes;
    lp_html_p(h,
              "The %zu largest of %lld allocations (%lld of %lld bytes); the other %lld allocations hold "
              "%lld bytes. %lld frees (%lld bytes). Lifetime: to the free of the same address on the same "
              "device%s.",
              m->n_mem_top, (long long)m->n_allocs, (long long)top, (long long)m->alloc_total_bytes,
              (long long)(m->n_allocs - (int64_t)m->n_mem_top), (long long)(m->alloc_total_bytes - top),
              (long long)m->n_frees, (long long)m->free_total_bytes,
              m->mem_has_addr ? "" : " (unknown here: the trace writes no Addr)");
    const char *hd[] = {"#", "time ms", "bytes", "device", "lifetime ms", "allocated by"};
    lp_html_table_begin(h, hd, 6);
    for (size_t i = 0; i < m->n_mem_top; i++) {
        const lp_trace_mem_event *e = &m->mem_top[i];
        char dev[32], life[32];
        lp_trace_device_str(e->device_type, e->device_id, dev, sizeof dev);
        lp_tm_lifetime_str(e, life, sizeof life);
        lp_html_tr(h);
        lp_html_td_num(h, (double)(i + 1), "%.0f");
        lp_html_td_num(h, ms(e->ts_ns - m->first_ns), "%.3f");
        lp_html_td_num(h, (double)e->bytes, "%.0f");
        lp_html_td(h, dev);
        if (e->lifetime_ns >= 0)
            lp_html_td_num(h, ms(e->lifetime_ns), "%.3f");
        else
            lp_html_td(h, life);
        lp_html_td(h, e->op[0] ? e->op : "-");
    }
    lp_html_table_end(h);
}

static void memory(lp_html *h, const lp_trace_model *m)
{
    lp_html_tab_begin(h, "memory", "Memory");
    if (!m->n_mem_events) {
        lp_html_p(h, "No [memory] events (profile_memory was off).");
        lp_html_tab_end(h);
        return;
    }
    lp_html_stats_begin(h);
    lp_html_stat(h, "peak allocated", "%.3f MB (%s)", m->mem_peak / 1e6, m->mem_is_device ? "device" : "CPU");
    lp_html_stat(h, "at", "%.3f ms", ms(m->mem_peak_ts_ns - m->first_ns));
    lp_html_stat(h, "[memory] events", "%lld", (long long)m->n_mem_events);
    lp_html_stats_end(h);
    double *x = malloc((m->n_mem ? m->n_mem : 1) * sizeof *x),
           *y = malloc((m->n_mem ? m->n_mem : 1) * sizeof *y);
    if (x && y && m->n_mem >= 2) { /* one point is no curve */
        for (size_t i = 0; i < m->n_mem; i++) {
            x[i] = ms(m->mem[i].ts_ns - m->first_ns);
            y[i] = m->mem[i].allocated / 1e6;
        }
        lp_chart_series se = {.name = "allocated", .x = x, .y = y, .n = (int32_t)m->n_mem};
        lp_chart_panel pn = {.title = "Allocated memory",
                             .xlabel = "ms",
                             .ylabel = "MB",
                             .y_from_zero = 1,
                             .series = &se,
                             .n_series = 1};
        lp_figure f = figure(&pn, "Allocated memory over time (the largest value of each thinned run kept)");
        lp_html_chart(h, "memory", &f);
    }
    free(x);
    free(y);
    lp_html_h(h, 3, "Allocations by operator");
    const char *hd[] = {"operator", "allocated bytes", "calls"};
    lp_html_table_begin(h, hd, 3);
    for (size_t i = 0; i < m->n_ops; i++)
        if (m->ops[i].alloc_bytes > 0) {
            lp_html_tr(h);
            lp_html_td(h, m->ops[i].name);
            lp_html_td_num(h, (double)m->ops[i].alloc_bytes, "%.0f");
            lp_html_td_num(h, (double)m->ops[i].calls, "%.0f");
        }
    lp_html_table_end(h);
    lp_html_note(h,
                 "Each event's allocation counts for the innermost op open on its thread. The curve keeps %d "
                 "points; --csv writes it.",
                 LP_TRACE_MEM_POINTS);
    mem_events(h, m);
    lp_html_tab_end(h);
}

static void distributed(lp_html *h, const lp_trace_model *m, const lp_trace_job *j)
{
    lp_html_tab_begin(h, "distributed", "Distributed");
    if (j && j->n) {
        size_t n = j->n;
        double *x = calloc(n, sizeof *x), *y = calloc(4 * n, sizeof *y);
        const char **cats = calloc(n, sizeof *cats);
        char(*labels)[24] = calloc(n, sizeof *labels);
        if (x && y && cats && labels) {
            for (size_t i = 0; i < n; i++) {
                const lp_trace_rank_row *r = &j->rows[i];
                x[i] = (double)i;
                snprintf(labels[i], sizeof labels[i], "%lld", (long long)r->rank);
                cats[i] = labels[i];
                y[i] = ms(r->compute_ns - r->overlap_ns);
                y[n + i] = ms(r->overlap_ns);
                y[2 * n + i] = ms(r->comm_ns - r->overlap_ns);
                y[3 * n + i] = ms(r->other_ns);
            }
            lp_chart_series se[] = {{.name = "compute only", .x = x, .y = y, .n = (int32_t)n},
                                    {.name = "overlap", .x = x, .y = y + n, .n = (int32_t)n},
                                    {.name = "communication only", .x = x, .y = y + 2 * n, .n = (int32_t)n},
                                    {.name = "other (idle)", .x = x, .y = y + 3 * n, .n = (int32_t)n}};
            lp_chart_panel pn = {.title = "Per rank",
                                 .xlabel = "rank",
                                 .ylabel = "ms",
                                 .kind = LP_CHART_STACKED,
                                 .x_scale = LP_CHART_X_CATEGORY,
                                 .x_categories = cats,
                                 .n_categories = (int32_t)n,
                                 .y_from_zero = 1,
                                 .series = se,
                                 .n_series = 4};
            lp_figure f = figure(&pn, "Compute, communication, their overlap and idle time per rank");
            lp_html_chart(h, "ranks", &f);
        }
        free(x);
        free(y);
        free(cats);
        free(labels);
        const char *hd[] = {"rank",       "span ms",  "compute ms",  "communication ms",
                            "overlap ms", "other ms", "comm wait ms"};
        lp_html_table_begin(h, hd, 7);
        for (size_t i = 0; i < n; i++) {
            const lp_trace_rank_row *r = &j->rows[i];
            lp_html_tr(h);
            lp_html_td_num(h, (double)r->rank, "%.0f");
            lp_html_td_num(h, ms(r->span_ns), "%.3f");
            lp_html_td_num(h, ms(r->compute_ns), "%.3f");
            lp_html_td_num(h, ms(r->comm_ns), "%.3f");
            lp_html_td_num(h, ms(r->overlap_ns), "%.3f");
            lp_html_td_num(h, ms(r->other_ns), "%.3f");
            lp_html_td_num(h, ms(r->comm_wait_ns), "%.3f");
        }
        lp_html_table_end(h);
        lp_html_p(h, "Slowest rank: %lld. %s.", (long long)j->slowest_rank, j->slowest_why);
    } else {
        lp_html_p(h, "One trace%s: analyse a directory holding every rank's trace for the per-rank view.",
                  m->rank >= 0 ? " of a distributed job" : "");
    }
    const lp_trace_model *const *ms_ = j && j->n ? (const lp_trace_model *const *)j->ranks : &m;
    size_t nm = j && j->n ? j->n : 1;
    lp_html_h(h, 3, "Collectives");
    const char *hd[] = {"rank", "collective", "calls", "total ms", "bytes"};
    lp_html_table_begin(h, hd, 5);
    for (size_t k = 0; k < nm; k++)
        for (size_t c = 0; c < ms_[k]->n_colls; c++) {
            lp_html_tr(h);
            lp_html_td_num(h, (double)ms_[k]->rank, "%.0f");
            lp_html_td(h, ms_[k]->colls[c].name);
            lp_html_td_num(h, (double)ms_[k]->colls[c].calls, "%.0f");
            lp_html_td_num(h, ms(ms_[k]->colls[c].total_ns), "%.3f");
            lp_html_td_num(h, (double)ms_[k]->colls[c].bytes, "%.0f");
        }
    lp_html_table_end(h);
    lp_html_tab_end(h);
}

static void trace_view(lp_html *h, const lp_trace_model *m, const lp_trace_job *j)
{
    lp_html_tab_begin(h, "trace", "Trace");
    const char *p = j && j->n ? j->ranks[0]->path : m->path, *base = strrchr(p, '/');
    lp_html_p(
        h,
        "The timeline: open https://ui.perfetto.dev, choose \"Open trace file\" and pick %s (keep the trace "
        "next to this page). Perfetto reads Kineto traces, gzip included, in the browser; nothing is "
        "uploaded.",
        base ? base + 1 : p);
    lp_html_tab_end(h);
}

lp_status lp_trace_html_write(const lp_trace_model *m, const lp_trace_job *j, const char *path)
{
    char title[1200];
    snprintf(title, sizeof title, "loupe analyze: %s", j && j->n ? "distributed job" : m->path);
    lp_html *h = lp_html_new(title, NULL);
    if (!h)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    lp_html_h(h, 1, title);
    lp_html_tabs_begin(h);
    overview(h, m);
    operators(h, m);
    kernels(h, m);
    memory(h, m);
    distributed(h, m, j);
    trace_view(h, m, j);
    lp_html_tabs_end(h);
    lp_status st = lp_html_write(h, path);
    lp_html_free(h);
    return st;
}
