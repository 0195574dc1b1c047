/* Per-step time breakdown in torch-tb-profiler's manner: every instant of a
 * ProfilerStep#N belongs to the highest-priority category active then (kernel, memcpy,
 * memset, communication, runtime, dataloader, optimizer, cpu_exec), else "other", so the
 * parts add up to the step time. */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const part_names[LP_PROF_STEP_PART__COUNT] = {
    "kernel", "memcpy", "memset", "communication", "runtime",
    "dataloader", "optimizer", "cpu_exec", "other"};

const char *lp_prof_step_part_name(lp_prof_step_part p)
{
    return (unsigned)p < LP_PROF_STEP_PART__COUNT ? part_names[p] : "?";
}

static int is_step(const lp_prof_event *e)
{
    return e->ph == 'X' && strncmp(e->name, "ProfilerStep#", 13) == 0;
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Category of an event, or -1 when it does not count. */
static int classify(const lp_prof_event *e)
{
    if (e->ph != 'X' || is_step(e))
        return -1;
    const char *c = e->cat ? e->cat : "";
    if (strcmp(c, "kernel") == 0)
        return (starts(e->name, "nccl") || strstr(e->name, "ncclKernel") ||
                starts(e->name, "hccl"))
                   ? LP_PROF_STEP_PART_COMMUNICATION
                   : LP_PROF_STEP_PART_KERNEL;
    if (strcmp(c, "gpu_memcpy") == 0)
        return LP_PROF_STEP_PART_MEMCPY;
    if (strcmp(c, "gpu_memset") == 0)
        return LP_PROF_STEP_PART_MEMSET;
    if (!lp_prof__is_cpu_range(e))
        return -1;
    if (strcmp(c, "cuda_runtime") == 0 || strcmp(c, "cuda_driver") == 0 ||
        strcmp(c, "runtime") == 0)
        return LP_PROF_STEP_PART_RUNTIME;
    if (starts(e->name, "nccl:") || starts(e->name, "gloo:") || starts(e->name, "mpi:"))
        return LP_PROF_STEP_PART_COMMUNICATION;
    if (starts(e->name, "enumerate(DataLoader)#") || starts(e->name, "enumerate(DataPipe)#"))
        return LP_PROF_STEP_PART_DATALOADER;
    if (starts(e->name, "Optimizer."))
        return LP_PROF_STEP_PART_OPTIMIZER;
    return LP_PROF_STEP_PART_CPU_EXEC;
}

typedef struct bnd {
    int64_t t;
    int part;
    int delta;
} bnd;

static int bnd_cmp(const void *a, const void *b)
{
    const bnd *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

static int row_cmp(const void *a, const void *b)
{
    const lp_prof_step_row *x = a, *y = b;
    return (x->ts_ns > y->ts_ns) - (x->ts_ns < y->ts_ns);
}

/* The boundaries of every classified event clipped to [lo, hi), sorted by time: one +1
 * where an event of a part starts and one -1 where it ends. Returns their count. */
static size_t clipped_bounds(const lp_prof_events *ev, size_t total, int64_t lo, int64_t hi, bnd *b)
{
    size_t nb = 0;
    for (size_t i = 0; i < total; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        int p = classify(e);
        if (p < 0)
            continue;
        int64_t a = e->ts_ns > lo ? e->ts_ns : lo;
        int64_t z = e->ts_ns + e->dur_ns < hi ? e->ts_ns + e->dur_ns : hi;
        if (a >= z)
            continue;
        b[nb++] = (bnd){a, p, +1};
        b[nb++] = (bnd){z, p, -1};
    }
    qsort(b, nb, sizeof *b, bnd_cmp);
    return nb;
}

/* The highest-priority part with an open event, else OTHER. */
static int top_part(const int *cnt)
{
    for (int p = 0; p < LP_PROF_STEP_PART_OTHER; p++)
        if (cnt[p] > 0)
            return p;
    return LP_PROF_STEP_PART_OTHER;
}

lp_status lp_prof_step_breakdown(const lp_prof_events *ev, lp_prof_step_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t total = lp_prof_events_count(ev), ns = 0;
    for (size_t i = 0; i < total; i++)
        ns += is_step(lp_prof_events_get(ev, i));
    lp_prof_step_row *r = calloc(ns ? ns : 1, sizeof *r);
    bnd *b = malloc((2 * total + 2) * sizeof *b);
    if (!r || !b) {
        free(r);
        free(b);
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (step breakdown)");
    }
    if (ns) {
        size_t k = 0;
        for (size_t i = 0; i < total; i++) {
            const lp_prof_event *e = lp_prof_events_get(ev, i);
            if (!is_step(e))
                continue;
            r[k].step = strtoll(e->name + 13, NULL, 10);
            r[k].ts_ns = e->ts_ns;
            r[k].dur_ns = e->dur_ns;
            k++;
        }
        qsort(r, ns, sizeof *r, row_cmp);
    } else { /* tb_plugin: no steps -> the whole CPU span is step 0 */
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t i = 0; i < total; i++) {
            const lp_prof_event *e = lp_prof_events_get(ev, i);
            if (classify(e) < 0)
                continue;
            if (e->ts_ns < lo)
                lo = e->ts_ns;
            if (e->ts_ns + e->dur_ns > hi)
                hi = e->ts_ns + e->dur_ns;
        }
        if (lo < hi) {
            r[0].ts_ns = lo;
            r[0].dur_ns = hi - lo;
            ns = 1;
        }
    }
    int overlap = 0;
    for (size_t s = 1; s < ns; s++)
        overlap |= r[s].ts_ns < r[s - 1].ts_ns + r[s - 1].dur_ns;
    if (ns && !overlap) {
        /* One sweep over every boundary (O(n log n)): each elementary segment goes to the
         * top-priority active category and to the step (sorted, disjoint) it falls in. */
        int64_t lo = r[0].ts_ns, hi = r[ns - 1].ts_ns + r[ns - 1].dur_ns;
        size_t nb = clipped_bounds(ev, total, lo, hi, b);
        int cnt[LP_PROF_STEP_PART__COUNT] = {0};
        int64_t t = lo;
        size_t si = 0;
        for (size_t i = 0; i <= nb; i++) {
            int64_t nt = i < nb ? b[i].t : hi;
            if (nt > t) {
                int part = top_part(cnt);
                /* spread [t, nt) over the steps it overlaps */
                while (si < ns && r[si].ts_ns + r[si].dur_ns <= t)
                    si++;
                for (size_t k = si; k < ns && r[k].ts_ns < nt; k++) {
                    int64_t a = t > r[k].ts_ns ? t : r[k].ts_ns;
                    int64_t z = nt < r[k].ts_ns + r[k].dur_ns ? nt : r[k].ts_ns + r[k].dur_ns;
                    if (z > a)
                        r[k].part_ns[part] += z - a;
                }
                t = nt;
            }
            if (i < nb)
                cnt[b[i].part] += b[i].delta;
        }
    }
    /* Overlapping steps (several threads stepping): each step on its own, O(steps x n). */
    for (size_t s = 0; overlap && s < ns; s++) {
        int64_t s0 = r[s].ts_ns, s1 = r[s].ts_ns + r[s].dur_ns;
        size_t nb = clipped_bounds(ev, total, s0, s1, b);
        int cnt[LP_PROF_STEP_PART__COUNT] = {0};
        int64_t t = s0;
        for (size_t i = 0; i <= nb; i++) {
            int64_t nt = i < nb ? b[i].t : s1;
            if (nt > t) {
                r[s].part_ns[top_part(cnt)] += nt - t;
                t = nt;
            }
            if (i < nb)
                cnt[b[i].part] += b[i].delta;
        }
    }
    free(b);
    if (!ns) {
        free(r);
        r = NULL;
    }
    *rows = r;
    *n = ns;
    return LP_OK;
}
