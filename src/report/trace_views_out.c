/* The (op, call stack) rows and the largest allocations as text (loupe analyze) and CSV
 * (stacks.csv, memory_events.csv); the page draws the same rows (analyze_html.c). */
#include "trace_model_internal.h"

#include <stdlib.h>
#include <string.h>

const char *lp_tm_stack_source(const lp_trace_model *m)
{
    int s = m->stack_source;
    return s & LP_TRACE_STACK_ARG      ? "the ops' \"Call stack\" args"
           : s & LP_TRACE_STACK_PYTHON ? "the python_function frames around each op"
           : s & LP_TRACE_STACK_RANGES ? "the record_function ranges around each op (with_stack, no Python frames)"
                                       : "none";
}

static double stack_key(const lp_trace_stack_row *r, lp_prof_sort by)
{
    switch (by) {
    case LP_PROF_SORT_CPU_TIME_TOTAL:
        return (double)r->cpu_total_ns;
    case LP_PROF_SORT_CPU_TIME:
        return r->calls ? (double)r->cpu_total_ns / (double)r->calls : 0;
    case LP_PROF_SORT_SELF_DEVICE_TIME_TOTAL:
        return (double)r->self_device_ns;
    case LP_PROF_SORT_DEVICE_TIME_TOTAL:
        return (double)r->device_total_ns;
    case LP_PROF_SORT_DEVICE_TIME:
        return r->calls ? (double)r->device_total_ns / (double)r->calls : 0;
    case LP_PROF_SORT_COUNT:
        return (double)r->calls;
    case LP_PROF_SORT_NONE:
        return 0;
    default:
        return (double)r->self_cpu_ns;
    }
}

typedef struct srow {
    double key;
    size_t i;
} srow;

static int cmp_srow(const void *a, const void *b)
{
    const srow *x = a, *y = b;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

size_t *lp_tm_stack_order(const lp_trace_model *m, lp_prof_sort by)
{
    srow *o = malloc((m->n_stacks ? m->n_stacks : 1) * sizeof *o);
    size_t *idx = malloc((m->n_stacks ? m->n_stacks : 1) * sizeof *idx);
    if (!o || !idx) {
        free(o);
        free(idx);
        return NULL;
    }
    for (size_t i = 0; i < m->n_stacks; i++)
        o[i] = (srow){stack_key(&m->stacks[i], by), i};
    qsort(o, m->n_stacks, sizeof *o, cmp_srow);
    for (size_t i = 0; i < m->n_stacks; i++)
        idx[i] = o[i].i;
    free(o);
    return idx;
}

const char *lp_tm_stack_label(const lp_trace_stack_row *r)
{
    return r->folded ? "(stacks past the cap, summed)" : r->n_frames == 0 ? "(no stack recorded)" : NULL;
}

/* torch's trim_path: the end of a long frame, "..." in front. */
static void frame_cell(char *out, size_t cap, const char *f)
{
    size_t n = strlen(f), w = cap - 1;
    if (n <= w)
        snprintf(out, cap, "%s", f);
    else
        snprintf(out, cap, "...%s", f + n - (w - 3));
}

void lp_tm_write_stacks_text(FILE *f, const lp_trace_model *m, lp_prof_sort by, int64_t limit)
{
    if (!m->n_stacks)
        return;
    size_t *ord = lp_tm_stack_order(m, by);
    if (!ord)
        return;
    fprintf(f, "\nKey averages by call stack (%d frames, innermost first, from %s; times in us):\n",
            m->stack_frames, lp_tm_stack_source(m));
    fprintf(f, "%-40s %12s %12s %12s %12s %10s  %s\n", "Name", "Self CPU", "CPU total", "Self device",
            "Device total", "# of Calls", "Source Location");
    size_t n = limit > 0 && (size_t)limit < m->n_stacks ? (size_t)limit : m->n_stacks;
    for (size_t k = 0; k < n; k++) {
        const lp_trace_stack_row *r = &m->stacks[ord[k]];
        char nm[41], fr[76];
        if (strlen(r->name) > 40)
            snprintf(nm, sizeof nm, "%.37s...", r->name);
        else
            snprintf(nm, sizeof nm, "%s", r->name);
        const char *label = lp_tm_stack_label(r);
        frame_cell(fr, sizeof fr, label ? label : r->frames[0]);
        fprintf(f, "%-40s %12.3f %12.3f %12.3f %12.3f %10lld  %s\n", nm, r->self_cpu_ns / 1e3, r->cpu_total_ns / 1e3,
                r->self_device_ns / 1e3, r->device_total_ns / 1e3, (long long)r->calls, fr);
        for (int32_t j = 1; !label && j < r->n_frames; j++) {
            frame_cell(fr, sizeof fr, r->frames[j]);
            fprintf(f, "%-40s %12s %12s %12s %12s %10s  %s\n", "", "", "", "", "", "", fr);
        }
    }
    if (n < m->n_stacks)
        fprintf(f, "(%zu more rows; --top 0 lists them)\n", m->n_stacks - n);
    fprintf(f, "%zu (op, stack) rows; %lld calls summed in rows past the caps (%d stacks per op, %d in all)\n",
            m->n_stacks, (long long)m->stack_folded_calls, LP_TRACE_STACKS_PER_OP, LP_TRACE_STACKS_MAX);
    free(ord);
}

void lp_tm_lifetime_str(const lp_trace_mem_event *e, char *buf, size_t cap)
{
    if (e->lifetime_ns >= 0)
        snprintf(buf, cap, "%.3f", e->lifetime_ns / 1e6);
    else
        snprintf(buf, cap, "%s", e->lifetime_ns == -1 ? "not freed" : "-");
}

void lp_tm_write_mem_text(FILE *f, const lp_trace_model *m)
{
    if (!m->n_mem_top)
        return;
    int64_t top_bytes = 0;
    for (size_t i = 0; i < m->n_mem_top; i++)
        top_bytes += m->mem_top[i].bytes;
    fprintf(f, "\nLargest allocations (%zu of %lld, %lld of %lld bytes allocated; %lld frees of %lld bytes; "
               "lifetime to the free at the same address%s):\n",
            m->n_mem_top, (long long)m->n_allocs, (long long)top_bytes, (long long)m->alloc_total_bytes,
            (long long)m->n_frees, (long long)m->free_total_bytes,
            m->mem_has_addr ? "" : ", unknown: the trace writes no Addr");
    fprintf(f, "%4s %12s %14s %10s %12s  %s\n", "#", "Time ms", "Bytes", "Device", "Lifetime ms", "Allocated by");
    for (size_t i = 0; i < m->n_mem_top; i++) {
        const lp_trace_mem_event *e = &m->mem_top[i];
        char dev[32], life[32];
        lp_trace_device_str(e->device_type, e->device_id, dev, sizeof dev);
        lp_tm_lifetime_str(e, life, sizeof life);
        fprintf(f, "%4zu %12.3f %14lld %10s %12s  %s\n", i + 1, (e->ts_ns - m->first_ns) / 1e6, (long long)e->bytes,
                dev, life, e->op[0] ? e->op : "-");
    }
    if ((int64_t)m->n_mem_top < m->n_allocs)
        fprintf(f, "     the other %lld allocations: %lld bytes\n", (long long)(m->n_allocs - (int64_t)m->n_mem_top),
                (long long)(m->alloc_total_bytes - top_bytes));
}

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

void lp_tm_csv_stacks(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    fprintf(f, "name,kind,stack,frames,folded,calls,self_cpu_ns,cpu_total_ns,self_device_ns,device_total_ns\n");
    for (size_t i = 0; i < m->n_stacks; i++) {
        const lp_trace_stack_row *r = &m->stacks[i];
        csv_str(f, r->name);
        fprintf(f, ",%s,\"", lp_trace_kind_name(r->kind));
        for (int32_t j = 0; j < r->n_frames; j++) { /* frames joined by ';' as the trace writes them */
            if (j)
                fputc(';', f);
            for (const char *q = r->frames[j]; *q; q++) {
                if (*q == '"')
                    fputc('"', f);
                fputc(*q, f);
            }
        }
        fprintf(f, "\",%d,%d,%lld,%lld,%lld,%lld,%lld\n", (int)r->n_frames, r->folded, (long long)r->calls,
                (long long)r->self_cpu_ns, (long long)r->cpu_total_ns, (long long)r->self_device_ns,
                (long long)r->device_total_ns);
    }
}

void lp_tm_csv_mem_events(FILE *f, const void *a)
{
    const lp_trace_model *m = a;
    fprintf(f, "rank,ts_ns,bytes,total_allocated,device_type,device_id,device,lifetime_ns,op\n");
    int64_t top_bytes = 0;
    for (size_t i = 0; i < m->n_mem_top; i++) {
        const lp_trace_mem_event *e = &m->mem_top[i];
        char dev[32];
        lp_trace_device_str(e->device_type, e->device_id, dev, sizeof dev);
        top_bytes += e->bytes;
        fprintf(f, "%zu,%lld,%lld,%lld,%d,%d,%s,%lld,", i + 1, (long long)e->ts_ns, (long long)e->bytes,
                (long long)e->total_allocated, (int)e->device_type, (int)e->device_id, dev, (long long)e->lifetime_ns);
        csv_str(f, e->op);
        fputc('\n', f);
    }
    /* the rest as one row, so the table's bytes add up to every allocation */
    fprintf(f, "rest,,%lld,,,,,,\"(%lld other allocations)\"\n", (long long)(m->alloc_total_bytes - top_bytes),
            (long long)(m->n_allocs - (int64_t)m->n_mem_top));
}
