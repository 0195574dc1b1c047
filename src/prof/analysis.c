/* Shared analysis over an event list: which events are host ranges vs device work, and
 * the per-thread nesting (parent, children's time) that key averages, stacks and the
 * step breakdown all need; built the way torch builds its CPU event tree. */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>

int lp_prof__is_device_cat(const char *cat)
{
    return cat && (strcmp(cat, "kernel") == 0 || strcmp(cat, "gpu_memcpy") == 0 ||
                   strcmp(cat, "gpu_memset") == 0);
}

int lp_prof__is_cpu_range(const lp_prof_event *e)
{
    if (e->ph != 'X' || !e->cat)
        return 0;
    if (lp_prof__is_device_cat(e->cat))
        return 0;
    static const char *const skip[] = {"Trace", "gpu_user_annotation", "python_function",
                                       "overhead", "ac2g", "fwdbwd", "cuda_sync"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strcmp(e->cat, skip[i]) == 0)
            return 0;
    return 1;
}

typedef struct nest_key {
    const lp_prof_event *e;
    size_t idx;
} nest_key;

static int key_cmp(const void *pa, const void *pb)
{
    const nest_key *a = pa, *b = pb;
    if (a->e->pid != b->e->pid)
        return a->e->pid < b->e->pid ? -1 : 1;
    if (a->e->tid != b->e->tid)
        return a->e->tid < b->e->tid ? -1 : 1;
    if (a->e->ts_ns != b->e->ts_ns)
        return a->e->ts_ns < b->e->ts_ns ? -1 : 1;
    int64_t ea = a->e->ts_ns + a->e->dur_ns, eb = b->e->ts_ns + b->e->dur_ns;
    if (ea != eb)
        return ea > eb ? -1 : 1; /* longer first: the parent precedes its child */
    return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

lp_status lp_prof__nest(const lp_prof_events *ev, int (*filter)(const lp_prof_event *),
                        lp_prof_node **nodes, size_t *n)
{
    *nodes = NULL;
    *n = 0;
    size_t total = lp_prof_events_count(ev), m = 0;
    nest_key *keys = malloc((total ? total : 1) * sizeof *keys);
    if (!keys)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (nesting)");
    for (size_t i = 0; i < total; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph == 'X' && (!filter || filter(e)))
            keys[m++] = (nest_key){e, i};
    }
    qsort(keys, m, sizeof *keys, key_cmp);
    lp_prof_node *nd = calloc(m ? m : 1, sizeof *nd);
    size_t *stack = malloc((m ? m : 1) * sizeof *stack);
    if (!nd || !stack) {
        free(keys);
        free(nd);
        free(stack);
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (nesting)");
    }
    size_t depth = 0;
    for (size_t k = 0; k < m; k++) {
        const lp_prof_event *e = keys[k].e;
        if (k > 0 && (e->pid != keys[k - 1].e->pid || e->tid != keys[k - 1].e->tid))
            depth = 0;
        int64_t start = e->ts_ns, end = e->ts_ns + e->dur_ns;
        nd[k].idx = keys[k].idx;
        nd[k].parent = -1;
        while (depth > 0) {
            const lp_prof_event *p = keys[stack[depth - 1]].e;
            int64_t pend = p->ts_ns + p->dur_ns;
            if (start >= pend || end > pend) {
                depth--;
                continue;
            }
            nd[k].parent = (long)stack[depth - 1];
            nd[stack[depth - 1]].child_ns += e->dur_ns;
            break;
        }
        nd[k].depth = (int)depth;
        stack[depth++] = k;
    }
    free(keys);
    free(stack);
    *nodes = nd;
    *n = m;
    return LP_OK;
}
