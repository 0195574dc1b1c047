/* Time figures of the streaming trace model (report layer only): the sweep that gives each
 * instant to a step part, the steps' extents over their device work, unions and per-stream
 * idle gaps over device events (every event, and HolisticTraceAnalysis's scope), and the
 * thinned memory curve. Called by trace_model.c as events leave the reorder window. */
#include "trace_model_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- the breakdown sweep --------------------------------------------------------------- */

static void add_seg(tm_state *s, int64_t a, int64_t b, int part)
{
    if (b <= a)
        return;
    s->m->total.part_ns[part] += b - a;
    if (s->m->n_steps == 0)
        return;
    lp_trace_step *st = &s->m->steps[s->m->n_steps - 1];
    if (a >= s->step_limit) { /* past the step's CPU range and its device work so far */
        s->pending[part] += b - a;
        return;
    }
    if (b > s->step_limit) {
        s->pending[part] += b - s->step_limit;
        b = s->step_limit;
    }
    st->part_ns[part] += b - a;
}

void lp_tm_sweep_to(tm_state *s, int64_t t)
{
    while (s->cursor < t) {
        int p = LP_TRACE_PART_OTHER;
        for (int q = 0; q < LP_TRACE_PART_OTHER; q++)
            if (s->max_end[q] > s->cursor) {
                p = q;
                break;
            }
        int64_t e = p == LP_TRACE_PART_OTHER || s->max_end[p] > t ? t : s->max_end[p];
        add_seg(s, s->cursor, e, p);
        s->cursor = e;
    }
}

/* ---- host communication overlapped by host compute ------------------------------------ */

/* Each instant up to t: communicating if some thread has a communication range open, and
 * overlapped if another thread then has only other ranges open (a thread inside its own
 * collective or wait is not computing). Constant between the threads' range ends. */
void lp_tm_host_overlap_to(tm_state *s, int64_t t)
{
    if (!s->ov_comm_seen) { /* nothing to attribute before the first communication */
        s->ov_cursor = t > s->ov_cursor ? t : s->ov_cursor;
        return;
    }
    while (s->ov_cursor < t) {
        const int64_t x = s->ov_cursor;
        int64_t next = t;
        int comm = 0, comp = 0;
        for (size_t i = 0; i < s->n_threads; i++) {
            const tm_thread *th = &s->threads[i];
            const int c = th->comm_end > x;
            comm |= c;
            comp |= !c && th->exec_end > x;
            if (th->comm_end > x && th->comm_end < next)
                next = th->comm_end;
            if (th->exec_end > x && th->exec_end < next)
                next = th->exec_end;
        }
        if (comm)
            s->m->host_comm_ns += next - x;
        if (comm && comp)
            s->m->host_comm_overlap_ns += next - x;
        s->ov_cursor = next;
    }
}

void lp_tm_extend_step(tm_state *s, int64_t end)
{
    if (end <= s->step_limit)
        return;
    s->step_limit = end;
    lp_trace_step *st = &s->m->steps[s->m->n_steps - 1];
    for (int p = 0; p < LP_TRACE_PART__COUNT; p++) /* the gap up to here was the step's after all */
        st->part_ns[p] += s->pending[p], s->pending[p] = 0;
}

lp_status lp_tm_start_step(tm_state *s, const tev *e, const char *name)
{
    lp_trace_model *m = s->m;
    /* every device event out of the window so far started before this step: its launch too */
    if (!lp_tm_fifo_commit(s, INT64_MAX))
        return lp_tm_oom(s);
    s->last_step_ts = e->ts;
    /* Time after the previous step's CPU range and device work, before this one, is in no
     * step (the loop between steps); it stays in the trace's total. */
    memset(s->pending, 0, sizeof s->pending);
    if (!lp_tm_grow((void **)&m->steps, &s->cap_steps, m->n_steps + 1, sizeof *m->steps))
        return lp_tm_oom(s);
    lp_trace_step *st = &m->steps[m->n_steps++];
    memset(st, 0, sizeof *st);
    st->step = strtoll(name + 13, NULL, 10);
    st->ts_ns = e->ts;
    s->step_limit = e->ts + e->dur;
    s->step_cpu_end = e->ts + e->dur;
    m->has_steps = 1;
    return LP_OK;
}

/* ---- unions over device time ---------------------------------------------------------- */

static void union_add(tm_union *u, int64_t a, int64_t b)
{
    if (!u->any || a > u->end) {
        if (u->any)
            u->total += u->end - u->start;
        u->start = a;
        u->end = b;
        u->any = 1;
    } else if (b > u->end) {
        u->end = b;
    }
}

static int64_t union_total(const tm_union *u)
{
    return u->any ? u->total + u->end - u->start : 0;
}

/* ---- GPU figures over a set of device events (start order) ----------------------------- */

int lp_tm_gpu_account(tm_gpu *g, const gpu_ev *e)
{
    if (!g->any || e->ts < g->first)
        g->first = e->ts;
    if (!g->any || e->end > g->last)
        g->last = e->end;
    g->any = 1;
    g->n_events++;
    union_add(&g->u_all, e->ts, e->end);
    if (e->in_class_union) {
        union_add(&g->u_cls[e->cls], e->ts, e->end);
        if (e->cls != LP_TRACE_CLASS_MEMORY)
            union_add(&g->u_cc, e->ts, e->end);
    }
    if (!lp_tm_grow((void **)&g->prev_end, &g->cap_streams, (size_t)e->stream + 1, sizeof *g->prev_end) ||
        !lp_tm_grow((void **)&g->seen, &g->cap_seen, (size_t)e->stream + 1, 1))
        return 0;
    if (!g->seen[e->stream]) {
        g->seen[e->stream] = 1;
        g->n_streams++;
    } else {
        /* HTA's idle interval: this start minus the previous event's end on the stream (negative
         * when they overlap, summed as is); host wait when the launch came after that end */
        int64_t prev = g->prev_end[e->stream], gap = e->ts - prev;
        if (e->launch_ts != INT64_MIN && e->launch_ts > prev)
            g->host_wait += gap;
        else if (gap < LP_TRACE_KERNEL_WAIT_NS)
            g->kernel_wait += gap;
        else
            g->other += gap;
    }
    g->prev_end[e->stream] = e->end;
    return 1;
}

void lp_tm_gpu_figures(const tm_gpu *g, lp_trace_gpu *out)
{
    memset(out, 0, sizeof *out);
    if (!g->any)
        return;
    out->first_ns = g->first;
    out->last_ns = g->last;
    out->busy_ns = union_total(&g->u_all);
    out->compute_ns = union_total(&g->u_cls[LP_TRACE_CLASS_COMPUTE]);
    out->comm_ns = union_total(&g->u_cls[LP_TRACE_CLASS_COMMUNICATION]);
    out->memory_ns = union_total(&g->u_cls[LP_TRACE_CLASS_MEMORY]);
    out->compute_comm_ns = union_total(&g->u_cc);
    out->comm_overlap_ns = out->compute_ns + out->comm_ns - out->compute_comm_ns;
    out->idle_host_wait_ns = g->host_wait;
    out->idle_kernel_wait_ns = g->kernel_wait;
    out->idle_other_ns = g->other;
    out->n_streams = g->n_streams;
    out->n_events = g->n_events;
}

void lp_tm_gpu_free(tm_gpu *g)
{
    free(g->prev_end);
    free(g->seen);
}

/* Commits held device events launched before t into HTA's scope (all when t is INT64_MAX). */
int lp_tm_fifo_commit(tm_state *s, int64_t t)
{
    for (size_t i = 0; i < s->n_fifo; i++)
        if (s->fifo[i].launch_ts < t && !lp_tm_gpu_account(&s->g_hta, &s->fifo[i]))
            return 0;
    s->n_fifo = 0;
    return 1;
}

/* ---- the memory curve ------------------------------------------------------------------ */

lp_status lp_tm_mem_point(tm_state *s, tm_curve *c, int64_t ts, int64_t v)
{
    /* Thinning keeps each kept point the largest of its run, so the peak survives. */
    if (!c->in_run || v > c->run.allocated)
        c->run = (lp_trace_mem_point){ts, v};
    c->in_run++;
    if (c->in_run < c->stride)
        return LP_OK;
    c->in_run = 0;
    if (c->n == LP_TRACE_MEM_POINTS) {
        for (size_t i = 0; i < c->n / 2; i++)
            c->pts[i] =
                c->pts[2 * i].allocated >= c->pts[2 * i + 1].allocated ? c->pts[2 * i] : c->pts[2 * i + 1];
        c->n /= 2;
        c->stride *= 2;
    }
    if (!c->pts && !(c->pts = malloc(LP_TRACE_MEM_POINTS * sizeof *c->pts)))
        return lp_tm_oom(s);
    c->pts[c->n++] = c->run;
    (void)s;
    return LP_OK;
}
