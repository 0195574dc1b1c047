/* The trace model's tables as text (loupe analyze) and CSV (--csv DIR), and the
 * per-collective rows derived from its communication kernels. Every number the text shows
 * is in a CSV; the CSVs carry raw ns. */
#define _GNU_SOURCE /* open_memstream */
#include "trace_model_internal.h"

#include <stdlib.h>
#include <string.h>

/* "ncclKernel_AllReduce_RING_LL_Sum_float(...)" / "ncclDevKernel_AllGather_RING_LL" ->
 * "AllReduce" / "AllGather"; other communication kernels keep their name up to '('. */
static void collective_of(const char *k, char *out, size_t cap)
{
    const char *p = strstr(k, "Kernel_");
    if (p && (p = strchr(p, '_'))) {
        p++;
        size_t n = strcspn(p, "_(<");
        snprintf(out, cap, "%.*s", (int)n, p);
        return;
    }
    snprintf(out, cap, "%.*s", (int)strcspn(k, "(<"), k);
}

lp_status lp_trace_model_collectives(lp_trace_model *m, lp_strtab *names)
{
    size_t cap = 0;
    for (size_t i = 0; i < m->n_kernels; i++) {
        const lp_trace_kernel_row *k = &m->kernels[i];
        if (k->cls != LP_TRACE_CLASS_COMMUNICATION)
            continue;
        char c[128];
        collective_of(k->name, c, sizeof c);
        int64_t id = lp_strtab_intern(names, c, strlen(c));
        if (id < 0)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", m->path);
        size_t j = 0;
        while (j < m->n_colls && m->colls[j].name != names->str[id])
            j++;
        if (j == m->n_colls) {
            if (m->n_colls == cap) {
                cap = cap ? cap * 2 : 8;
                lp_trace_coll_row *r = realloc(m->colls, cap * sizeof *r);
                if (!r)
                    return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", m->path);
                m->colls = r;
            }
            m->colls[m->n_colls++] = (lp_trace_coll_row){names->str[id], 0, 0, 0};
        }
        m->colls[j].calls += k->calls;
        m->colls[j].total_ns += k->total_ns;
        m->colls[j].bytes += k->bytes;
    }
    return LP_OK;
}

static int cmp_kernel(const void *a, const void *b)
{
    const lp_trace_kernel_row *x = *(const lp_trace_kernel_row *const *)a,
                              *y = *(const lp_trace_kernel_row *const *)b;
    if (x->total_ns != y->total_ns)
        return x->total_ns < y->total_ns ? 1 : -1;
    return x < y ? -1 : x > y;
}

static double us(int64_t ns)
{
    return (double)ns / 1e3;
}
static double ms(int64_t ns)
{
    return (double)ns / 1e6;
}
static double pct(int64_t a, int64_t b)
{
    return b > 0 ? 100.0 * (double)a / (double)b : 0.0;
}

lp_status lp_trace_model_keyavg(const lp_trace_model *m, int by_shape, lp_prof_keyavg *out)
{
    memset(out, 0, sizeof *out);
    const lp_trace_op_row *rows = by_shape ? m->ops_shape : m->ops;
    size_t n = by_shape ? m->n_ops_shape : m->n_ops;
    out->rows = calloc(n ? n : 1, sizeof *out->rows);
    if (!out->rows)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", m->path);
    for (size_t i = 0; i < n; i++) {
        const lp_trace_op_row *r = &rows[i];
        lp_prof_keyavg_row *k = &out->rows[out->n++];
        k->key = strdup(r->name);
        k->input_shapes = strdup(r->shapes);
        if (!k->key || !k->input_shapes) {
            lp_prof_keyavg_free(out);
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", m->path);
        }
        k->count = r->calls;
        k->self_cpu_us = (double)r->self_cpu_ns / 1e3;
        k->cpu_total_us = (double)r->cpu_total_ns / 1e3;
        k->self_device_us = (double)r->self_device_ns / 1e3;
        k->device_total_us = (double)r->device_total_ns / 1e3;
        k->is_device = r->is_device;
        k->cpu_mem = r->cpu_mem;
        k->self_cpu_mem = r->self_cpu_mem;
        k->device_mem = r->device_mem;
        k->self_device_mem = r->self_device_mem;
        k->flops = r->flops;
        out->has_device_mem |= r->device_mem != 0;
        out->sum_self_cpu_us += k->self_cpu_us;
        /* torch's footer sums device self time over device events, annotations excluded */
        if (r->is_device && r->kind != LP_TRACE_KIND_GPU_ANNOTATION)
            out->sum_self_device_us += k->self_device_us;
    }
    out->has_device_time = m->has_device;
    out->profile_memory = m->n_mem_events > 0;
    out->has_flops = m->has_flops;
    out->has_input_shapes = by_shape && m->has_shapes;
    return LP_OK;
}

/* Per-step table: one row per step (the first and last LP_TRACE_STEPS_SHOWN/2 of a long
 * trace unless all), parts that occur as columns, and the mean over all steps. */
#define LP_TRACE_STEPS_SHOWN 20

static void step_row(FILE *f, const char *label, int64_t dur, const int64_t *part, const int *used)
{
    fprintf(f, "%8s  %12.3f", label, ms(dur));
    for (int p = 0; p < LP_TRACE_PART__COUNT; p++) {
        if (!used[p])
            continue;
        char cell[64];
        snprintf(cell, sizeof cell, "%.3f (%5.1f%%)", ms(part[p]), pct(part[p], dur));
        fprintf(f, "  %18s", cell);
    }
    fprintf(f, "\n");
}

static void write_steps(FILE *f, const lp_trace_model *m, int all)
{
    size_t n = m->n_steps;
    if (!n)
        return;
    int used[LP_TRACE_PART__COUNT] = {0};
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
            used[p] |= m->steps[i].part_ns[p] > 0;
    fprintf(f, "\nPer-step time breakdown (ms; %% of the step in brackets; %s):\n",
            m->has_steps ? "each ProfilerStep's CPU range and the device work it launched"
                         : "no ProfilerStep, the whole trace");
    fprintf(f, "%8s  %12s", "Step", "Step time");
    for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
        if (used[p])
            fprintf(f, "  %18s", lp_trace_part_name((lp_trace_part)p));
    fprintf(f, "\n");
    int64_t tot[LP_TRACE_PART__COUNT] = {0}, tot_dur = 0;
    size_t half = LP_TRACE_STEPS_SHOWN / 2;
    for (size_t i = 0; i < n; i++) {
        const lp_trace_step *st = &m->steps[i];
        tot_dur += st->dur_ns;
        for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
            tot[p] += st->part_ns[p];
        if (!all && n > LP_TRACE_STEPS_SHOWN && i >= half && i < n - half) {
            if (i == half)
                fprintf(f, "%8s  (%zu more steps; --all-steps lists them)\n", "...", n - 2 * half);
            continue;
        }
        char label[32];
        snprintf(label, sizeof label, "%lld", (long long)st->step);
        step_row(f, label, st->dur_ns, st->part_ns, used);
    }
    if (n > 1) {
        int64_t mean[LP_TRACE_PART__COUNT];
        for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
            mean[p] = tot[p] / (int64_t)n;
        step_row(f, "mean", tot_dur / (int64_t)n, mean, used);
    }
}

static void write_kernels(FILE *f, const lp_trace_model *m, size_t top)
{
    if (!m->n_kernels)
        return;
    const lp_trace_kernel_row **ord = malloc(m->n_kernels * sizeof *ord);
    if (!ord)
        return;
    int64_t cls[LP_TRACE_CLASS__COUNT] = {0}, all = 0;
    for (size_t i = 0; i < m->n_kernels; i++) {
        ord[i] = &m->kernels[i];
        cls[m->kernels[i].cls] += m->kernels[i].total_ns;
        all += m->kernels[i].total_ns;
    }
    qsort(ord, m->n_kernels, sizeof *ord, cmp_kernel);
    fprintf(f, "\nDevice kernels (us): compute %.1f%%, communication %.1f%%, memory %.1f%% of %.3f ms\n",
            pct(cls[0], all), pct(cls[1], all), pct(cls[2], all), ms(all));
    fprintf(f, "%-60s %8s %12s %10s %10s %10s %-13s %s\n", "Kernel", "Calls", "Total", "Mean", "Min", "Max",
            "Class", "Launched by");
    for (size_t i = 0; i < m->n_kernels && (!top || i < top); i++) {
        const lp_trace_kernel_row *k = ord[i];
        char nm[61];
        if (strlen(k->name) > 60)
            snprintf(nm, sizeof nm, "%.57s...", k->name);
        else
            snprintf(nm, sizeof nm, "%s", k->name);
        fprintf(f, "%-60s %8lld %12.3f %10.3f %10.3f %10.3f %-13s %s\n", nm, (long long)k->calls,
                us(k->total_ns), us(k->total_ns) / (double)k->calls, us(k->min_ns), us(k->max_ns),
                lp_trace_class_name(k->cls), k->launch_op[0] ? k->launch_op : "-");
    }
    if (top && m->n_kernels > top)
        fprintf(f, "(%zu more kernels)\n", m->n_kernels - top);
    free(ord);
}

/* A CPU-only trace's communication ranges and how much of them other threads computed
 * through (HTA's overlap on host threads; see lp_trace_model). */
static void write_host_comm(FILE *f, const lp_trace_model *m)
{
    if (m->has_device || !m->host_comm_ns)
        return;
    fprintf(f, "\nHost communication: %.3f ms; overlapped by compute on other threads: %.3f ms (%.1f%% of "
               "communication)\n",
            ms(m->host_comm_ns), ms(m->host_comm_overlap_ns), pct(m->host_comm_overlap_ns, m->host_comm_ns));
}

static void write_gpu(FILE *f, const lp_trace_model *m)
{
    if (!m->has_device)
        return;
    const lp_trace_gpu *g = &m->gpu;
    int64_t span = g->last_ns - g->first_ns, idle = span - g->busy_ns;
    fprintf(f, "\nGPU (%lld streams, %.3f ms from the first device event to the last%s):\n",
            (long long)g->n_streams, ms(span),
            m->has_steps && m->n_steps >= 2 ? "; as HTA, work launched before the last step" : "");
    fprintf(f, "  busy %.3f ms (%.1f%%): compute %.3f ms, communication %.3f ms, memory %.3f ms\n",
            ms(g->busy_ns), pct(g->busy_ns, span), ms(g->compute_ns), ms(g->comm_ns), ms(g->memory_ns));
    fprintf(f,
            "  idle %.3f ms (%.1f%%); stream gaps: host wait %.3f ms, kernel wait %.3f ms, other %.3f ms\n",
            ms(idle), pct(idle, span), ms(g->idle_host_wait_ns), ms(g->idle_kernel_wait_ns),
            ms(g->idle_other_ns));
    if (g->comm_ns)
        fprintf(f, "  communication overlapped by compute: %.3f ms (%.1f%% of communication)\n",
                ms(g->comm_overlap_ns), pct(g->comm_overlap_ns, g->comm_ns));
    for (size_t i = 0; i < m->n_colls; i++)
        fprintf(f, "  collective %-24s %8lld calls %12.3f ms\n", m->colls[i].name,
                (long long)m->colls[i].calls, ms(m->colls[i].total_ns));
}

lp_status lp_trace_model_write_text(FILE *f, const lp_trace_model *m, const lp_prof_keyavg_opts *o,
                                    int all_steps)
{
    lp_prof_keyavg_opts ko = *o;
    int by_shape = ko.group_by_input_shape && m->has_shapes;
    ko.group_by_input_shape = by_shape;
    lp_prof_keyavg ka;
    char *table = NULL;
    lp_status st = lp_trace_model_keyavg(m, by_shape, &ka);
    if (st != LP_OK)
        return st;
    lp_prof_keyavg_sort(&ka, ko.sort_by);
    if ((st = lp_prof_keyavg_table(&ka, &ko, &table)) != LP_OK) {
        lp_prof_keyavg_free(&ka);
        return st;
    }
    fprintf(f, "Trace: %s\n", m->path);
    fprintf(f, "%llu events (%llu used), %zu key-average rows, %zu device kernels, %zu steps, %s",
            (unsigned long long)m->n_events, (unsigned long long)m->n_used, m->n_ops, m->n_kernels,
            m->has_steps ? m->n_steps : 0, m->is_array ? "bare-array trace" : "object trace");
    if (m->rank >= 0)
        fprintf(f, ", rank %lld", (long long)m->rank);
    if (m->world_size > 0)
        fprintf(f, " of %lld", (long long)m->world_size);
    if (m->backend[0])
        fprintf(f, " (%s)", m->backend);
    if (m->device_name[0])
        fprintf(f, ", %lld x %s", (long long)m->device_count, m->device_name);
    fprintf(f, "\n");
    if (m->n_skipped || m->n_late || m->n_begin_end)
        fprintf(
            f,
            "warning: ignored %llu malformed and %llu begin/end events; %llu events came out of order beyond "
            "the reorder window\n",
            (unsigned long long)m->n_skipped, (unsigned long long)m->n_begin_end,
            (unsigned long long)m->n_late);
    fprintf(f, "\n");
    fputs(table, f);
    free(table);
    lp_prof_keyavg_free(&ka);
    write_steps(f, m, all_steps);
    write_kernels(f, m, ko.row_limit > 0 ? (size_t)ko.row_limit : 0);
    lp_tm_write_stacks_text(f, m, ko.sort_by, ko.row_limit);
    write_gpu(f, m);
    write_host_comm(f, m);
    if (m->n_mem_events)
        fprintf(f, "\nMemory (%s): peak allocated %.3f MB at %.3f ms; %lld [memory] events\n",
                m->mem_is_device ? "device" : "CPU", (double)m->mem_peak / 1e6,
                ms(m->mem_peak_ts_ns - m->first_ns), (long long)m->n_mem_events);
    lp_tm_write_mem_text(f, m);
    return LP_OK;
}

/* ---- CSV ---------------------------------------------------------------------------- */

static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

typedef void (*csv_fn)(FILE *f, const void *arg);

static lp_status write_csv_file(const char *dir, const char *file, csv_fn fn, const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return lp_err(LP_STATUS_NO_MEMORY, "%s/%s: out of memory", dir, file);
    fn(f, arg);
    fclose(f);
    size_t need = strlen(dir) + strlen(file) + 2;
    char *path = malloc(need);
    lp_status st = path ? LP_OK : LP_STATUS_NO_MEMORY;
    if (path) {
        snprintf(path, need, "%s/%s", dir, file);
        st = lp_file_write_atomic(path, buf, len);
    }
    free(path);
    free(buf);
    return st;
}

static void ops_rows(FILE *f, const lp_trace_op_row *r, size_t n)
{
    fprintf(f,
            "name,input_shapes,kind,is_device,calls,self_cpu_ns,cpu_total_ns,self_device_ns,device_total_ns,"
            "alloc_bytes\n");
    for (size_t i = 0; i < n; i++) {
        csv_str(f, r[i].name);
        fputc(',', f);
        csv_str(f, r[i].shapes);
        fprintf(f, ",%s,%d,%lld,%lld,%lld,%lld,%lld,%lld\n", lp_trace_kind_name(r[i].kind), r[i].is_device,
                (long long)r[i].calls, (long long)r[i].self_cpu_ns, (long long)r[i].cpu_total_ns,
                (long long)r[i].self_device_ns, (long long)r[i].device_total_ns, (long long)r[i].alloc_bytes);
    }
}

static void csv_ops(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    ops_rows(f, m->ops, m->n_ops);
}
static void csv_ops_shape(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    ops_rows(f, m->ops_shape, m->n_ops_shape);
}

static void csv_kernels(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    fprintf(f, "name,kind,class,calls,total_ns,mean_ns,min_ns,max_ns,bytes,launch_op\n");
    for (size_t i = 0; i < m->n_kernels; i++) {
        const lp_trace_kernel_row *k = &m->kernels[i];
        csv_str(f, k->name);
        fprintf(f, ",%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,", lp_trace_kind_name(k->kind),
                lp_trace_class_name(k->cls), (long long)k->calls, (long long)k->total_ns,
                (long long)(k->total_ns / k->calls), (long long)k->min_ns, (long long)k->max_ns,
                (long long)k->bytes);
        csv_str(f, k->launch_op);
        fputc('\n', f);
    }
}

static void csv_steps(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    fprintf(f, "step,ts_ns,dur_ns");
    for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
        fprintf(f, ",%s_ns", lp_trace_part_name((lp_trace_part)p));
    fprintf(f, "\n");
    for (size_t i = 0; i <= m->n_steps; i++) {
        const lp_trace_step *st = i < m->n_steps ? &m->steps[i] : &m->total;
        if (i < m->n_steps)
            fprintf(f, "%lld", (long long)st->step);
        else
            fprintf(f, "trace");
        fprintf(f, ",%lld,%lld", (long long)st->ts_ns, (long long)st->dur_ns);
        for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
            fprintf(f, ",%lld", (long long)st->part_ns[p]);
        fprintf(f, "\n");
    }
}

static void gpu_row(FILE *f, const lp_trace_model *m, const char *scope, const lp_trace_gpu *g)
{
    fprintf(f, "%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%d,%llu,%llu\n",
            scope, (long long)m->rank, (long long)g->n_streams, (long long)g->first_ns, (long long)g->last_ns,
            (long long)g->busy_ns, (long long)g->compute_ns, (long long)g->comm_ns, (long long)g->memory_ns,
            (long long)g->compute_comm_ns, (long long)g->comm_overlap_ns, (long long)g->idle_host_wait_ns,
            (long long)g->idle_kernel_wait_ns, (long long)g->idle_other_ns, (long long)m->mem_peak,
            m->mem_is_device, (unsigned long long)m->n_skipped, (unsigned long long)m->n_late);
}

static void csv_gpu(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    fprintf(
        f, "scope,rank,streams,first_ns,last_ns,busy_ns,compute_ns,comm_ns,memory_ns,compute_comm_ns,"
           "comm_overlap_ns,idle_host_wait_ns,idle_kernel_wait_ns,idle_other_ns,mem_peak_bytes,mem_is_device,"
           "skipped,late\n");
    gpu_row(f, m, "hta", &m->gpu);
    gpu_row(f, m, "all", &m->gpu_all);
}

static void csv_memory(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    fprintf(f, "ts_ns,allocated_bytes\n");
    for (size_t i = 0; i < m->n_mem; i++)
        fprintf(f, "%lld,%lld\n", (long long)m->mem[i].ts_ns, (long long)m->mem[i].allocated);
}

static void csv_colls(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    fprintf(f, "collective,calls,total_ns,bytes\n");
    for (size_t i = 0; i < m->n_colls; i++) {
        csv_str(f, m->colls[i].name);
        fprintf(f, ",%lld,%lld,%lld\n", (long long)m->colls[i].calls, (long long)m->colls[i].total_ns,
                (long long)m->colls[i].bytes);
    }
}

lp_status lp_trace_model_write_csv(const lp_trace_model *m, const char *dir)
{
    lp_status st = lp_mkdir_p(dir);
    if (st != LP_OK)
        return st;
    static const struct {
        const char *file;
        csv_fn fn;
    } t[] = {
        {"ops.csv", csv_ops},           {"ops_by_shape.csv", csv_ops_shape},
        {"kernels.csv", csv_kernels},   {"steps.csv", csv_steps},
        {"gpu.csv", csv_gpu},           {"memory.csv", csv_memory},
        {"collectives.csv", csv_colls}, {"stacks.csv", lp_tm_csv_stacks},
        {"memory_events.csv", lp_tm_csv_mem_events},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0] && st == LP_OK; i++)
        st = write_csv_file(dir, t[i].file, t[i].fn, m);
    return st;
}
