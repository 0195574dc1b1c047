/* Key averages (torch's EventList.key_averages): per-key call counts, self/total host
 * time, device time of linked kernels, memory attributed by time interval, FLOPs; and
 * torch's descending sort by any of those columns. */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>

void lp_prof_keyavg_opts_init(lp_prof_keyavg_opts *o)
{
    memset(o, 0, sizeof *o);
    o->sort_by = LP_PROF_SORT_SELF_CPU_TIME_TOTAL;
    o->row_limit = 100;
    o->profile_memory = -1;
    o->with_flops = -1;
}

static const char *const sort_names[LP_PROF_SORT__COUNT] = {
    "none",
    "self_cpu_time_total",
    "cpu_time_total",
    "cpu_time",
    "self_device_time_total",
    "device_time_total",
    "device_time",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "device_memory_usage",
    "self_device_memory_usage",
    "count",
    "flops",
};

const char *lp_prof_sort_name(lp_prof_sort s)
{
    return (unsigned)s < LP_PROF_SORT__COUNT ? sort_names[s] : "?";
}

lp_status lp_prof_sort_parse(const char *s, lp_prof_sort *out)
{
    /* torch maps "cuda", "xpu", "privateuse1" in the key to its "device" attribute */
    char buf[64];
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 8 < sizeof buf;) {
        static const char *const dev[] = {"cuda", "xpu", "privateuse1"};
        int hit = 0;
        for (size_t d = 0; d < 3 && !hit; d++) {
            size_t l = strlen(dev[d]);
            if (strncmp(s + i, dev[d], l) == 0) {
                memcpy(buf + j, "device", 6);
                j += 6;
                i += l;
                hit = 1;
            }
        }
        if (!hit)
            buf[j++] = s[i++];
    }
    buf[j] = '\0';
    for (int k = 0; k < LP_PROF_SORT__COUNT; k++)
        if (strcmp(buf, sort_names[k]) == 0) {
            *out = (lp_prof_sort)k;
            return LP_OK;
        }
    return lp_err(LP_STATUS_INVALID_ARG,
                  "unknown sort key '%s' (try self_cpu_time_total, cpu_time_total, cpu_time, "
                  "self_cuda_time_total, cuda_time_total, cpu_memory_usage, "
                  "self_cpu_memory_usage, count, flops)",
                  s);
}

static int filtered_name(const char *n)
{
    static const char *const f[] = {"[memory]", "[OutOfMemory]",
                                    "profiler::_record_function_enter",
                                    "profiler::_record_function_enter_new",
                                    "profiler::_record_function_exit", "aten::is_leaf",
                                    "aten::output_nr", "aten::_version"};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (strcmp(n, f[i]) == 0)
            return 1;
    return 0;
}

static int cpu_row_event(const lp_prof_event *e)
{
    return lp_prof__is_cpu_range(e) && !filtered_name(e->name);
}

/* Per-event figures before grouping. */
typedef struct evfig {
    int64_t dev_own_ns; /* kernels linked to this op */
    int64_t dev_total_ns;
    int64_t cpu_mem, dev_mem; /* inclusive */
    int64_t child_cpu_mem, child_dev_mem;
} evfig;

typedef struct memev {
    int64_t ts;
    int64_t cpu, dev;
} memev;

static int memev_cmp(const void *a, const void *b)
{
    const memev *x = a, *y = b;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

/* Index of the first mem event with ts >= t (prefix arrays have n+1 entries). */
static size_t lower(const memev *m, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m[mid].ts < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct grp {
    uint64_t h;
    size_t row;
    struct grp *next;
} grp;

static uint64_t hash_key(const char *a, const char *b, int flags)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)flags;
    for (; *a; a++)
        h = (h ^ (unsigned char)*a) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (; b && *b; b++)
        h = (h ^ (unsigned char)*b) * 1099511628211ull;
    return h;
}

void lp_prof_keyavg_free(lp_prof_keyavg *ka)
{
    if (!ka)
        return;
    for (size_t i = 0; i < ka->n; i++) {
        free(ka->rows[i].key);
        free(ka->rows[i].input_shapes);
    }
    free(ka->rows);
    memset(ka, 0, sizeof *ka);
}

/* torch's EventList._remove_dup_nodes: a node that is its parent's only child and has
 * the parent's name is dropped; its children become the parent's (so the parent's self
 * time absorbs the child's). Dropped nodes get node_of = -1. Parents precede children in
 * node order, so one forward pass reaches torch's fixed point. */
static lp_status fold_duplicates(const lp_prof_events *ev, lp_prof_node *nodes, size_t nn,
                                 size_t *node_of)
{
    int *nchild = calloc(nn ? nn : 1, sizeof *nchild);
    if (!nchild)
        return LP_STATUS_NO_MEMORY;
    for (size_t k = 0; k < nn; k++)
        if (nodes[k].parent >= 0)
            nchild[nodes[k].parent]++;
    for (size_t k = 0; k < nn; k++) {
        long p = nodes[k].parent;
        if (p < 0 || nchild[p] != 1)
            continue;
        const lp_prof_event *e = lp_prof_events_get(ev, nodes[k].idx);
        const lp_prof_event *pe = lp_prof_events_get(ev, nodes[p].idx);
        if (strcmp(e->name, pe->name) != 0)
            continue;
        nodes[p].child_ns = nodes[k].child_ns;
        nchild[p] = nchild[k];
        for (size_t j = k + 1; j < nn; j++) /* children follow their parent */
            if (nodes[j].parent == (long)k)
                nodes[j].parent = p;
        node_of[nodes[k].idx] = (size_t)-1;
        nodes[k].parent = -2; /* dropped */
    }
    free(nchild);
    return LP_OK;
}

/* Times are summed in integer ns and turned into µs once, so the averages round the
 * same way as `loupe analyze`'s, which sums the trace's ns (a double sum per event
 * drifts in the last bit and flips a .5 in the table). */
typedef struct rowx {
    int64_t self_cpu_ns, cpu_total_ns, self_dev_ns, dev_total_ns;
    int is_user_annotation;
    int flags; /* grouping discriminator: device, user annotation */
} rowx;

lp_status lp_prof_keyavg_build(const lp_prof_events *ev, const lp_prof_keyavg_opts *o,
                               lp_prof_keyavg *out)
{
    memset(out, 0, sizeof *out);
    const lp_prof_events_info *in = lp_prof_events_info_get(ev);
    size_t total = lp_prof_events_count(ev);
    lp_prof_node *nodes = NULL;
    size_t nn = 0;
    lp_status st = lp_prof__nest(ev, cpu_row_event, &nodes, &nn);
    if (st != LP_OK)
        return st;

    evfig *fig = calloc(nn ? nn : 1, sizeof *fig);
    size_t *node_of = malloc((total ? total : 1) * sizeof *node_of); /* event -> node */
    memev *mem = malloc((total ? total : 1) * sizeof *mem);
    int64_t *pre_cpu = NULL, *pre_dev = NULL;
    grp **tab = NULL;
    rowx *rx = NULL;
    size_t nmem = 0, cap_rows = 0, tab_cap = 0;
    grp *grp_pool = NULL;
    char *shape_buf = NULL;
    if (!fig || !node_of || !mem)
        goto oom;
    for (size_t i = 0; i < total; i++)
        node_of[i] = (size_t)-1;
    for (size_t k = 0; k < nn; k++)
        node_of[nodes[k].idx] = k;
    st = fold_duplicates(ev, nodes, nn, node_of);
    if (st != LP_OK)
        goto oom;

    /* Memory events, by time, with prefix sums split by device type. */
    for (size_t i = 0; i < total; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph == 'i' && strcmp(e->name, "[memory]") == 0) {
            mem[nmem].ts = e->ts_ns;
            mem[nmem].cpu = e->mem_device_type == 0 ? e->mem_bytes : 0;
            mem[nmem].dev = e->mem_device_type != 0 ? e->mem_bytes : 0;
            nmem++;
        }
    }
    qsort(mem, nmem, sizeof *mem, memev_cmp);
    pre_cpu = calloc(nmem + 1, sizeof *pre_cpu);
    pre_dev = calloc(nmem + 1, sizeof *pre_dev);
    if (!pre_cpu || !pre_dev)
        goto oom;
    for (size_t i = 0; i < nmem; i++) {
        pre_cpu[i + 1] = pre_cpu[i] + mem[i].cpu;
        pre_dev[i + 1] = pre_dev[i] + mem[i].dev;
    }
    for (size_t k = 0; k < nn; k++) {
        const lp_prof_event *e = lp_prof_events_get(ev, nodes[k].idx);
        size_t a = lower(mem, nmem, e->ts_ns);
        size_t b = lower(mem, nmem, e->ts_ns + e->dur_ns + 1); /* inclusive end */
        fig[k].cpu_mem = pre_cpu[b] - pre_cpu[a];
        fig[k].dev_mem = pre_dev[b] - pre_dev[a];
    }

    /* Device events: attach to the CPU op with the same External id (not the runtime
     * call, which carries the same id). Linear map via a small open hash. */
    {
        size_t hcap = 16;
        while (hcap < nn * 2 + 16)
            hcap *= 2;
        long *h = malloc(hcap * sizeof *h);
        if (!h)
            goto oom;
        for (size_t i = 0; i < hcap; i++)
            h[i] = -1;
        for (size_t k = 0; k < nn; k++) {
            const lp_prof_event *e = lp_prof_events_get(ev, nodes[k].idx);
            if (e->external_id < 0 || (strcmp(e->cat, "cpu_op") != 0 &&
                                       strcmp(e->cat, "user_annotation") != 0))
                continue;
            size_t s = (size_t)(e->external_id * 0x9E3779B97F4A7C15ull) & (hcap - 1);
            while (h[s] >= 0 &&
                   lp_prof_events_get(ev, nodes[h[s]].idx)->external_id != e->external_id)
                s = (s + 1) & (hcap - 1);
            if (h[s] < 0)
                h[s] = (long)k;
        }
        for (size_t i = 0; i < total; i++) {
            const lp_prof_event *e = lp_prof_events_get(ev, i);
            if (e->ph != 'X' || !lp_prof__is_device_cat(e->cat) || e->external_id < 0)
                continue;
            size_t s = (size_t)(e->external_id * 0x9E3779B97F4A7C15ull) & (hcap - 1);
            while (h[s] >= 0) {
                if (lp_prof_events_get(ev, nodes[h[s]].idx)->external_id == e->external_id) {
                    fig[h[s]].dev_own_ns += e->dur_ns;
                    break;
                }
                s = (s + 1) & (hcap - 1);
            }
        }
        free(h);
    }
    /* Inclusive device time and children's memory: children follow parents in node
     * order, so a reverse sweep accumulates bottom-up. */
    for (size_t k = 0; k < nn; k++)
        fig[k].dev_total_ns = fig[k].dev_own_ns;
    for (size_t k = nn; k-- > 0;) {
        long p = nodes[k].parent;
        if (p >= 0) {
            fig[p].dev_total_ns += fig[k].dev_total_ns;
            fig[p].child_cpu_mem += fig[k].cpu_mem;
            fig[p].child_dev_mem += fig[k].dev_mem;
        }
    }

    /* Group in event order (first-seen order = torch's dict insertion order). */
    int by_shape = o && o->group_by_input_shape;
    shape_buf = malloc(4096);
    if (!shape_buf)
        goto oom;
    tab_cap = 1024;
    tab = calloc(tab_cap, sizeof *tab);
    grp_pool = malloc((total ? total : 1) * sizeof *grp_pool);
    if (!tab || !grp_pool)
        goto oom;
    size_t npool = 0;
    for (size_t i = 0; i < total; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        int is_dev = e->ph == 'X' && lp_prof__is_device_cat(e->cat) && !filtered_name(e->name);
        size_t k = node_of[i];
        if (k == (size_t)-1 && !is_dev)
            continue;
        const char *name = e->name;
        if (strncmp(name, "ProfilerStep#", 13) == 0)
            name = "ProfilerStep*";
        shape_buf[0] = '\0';
        if (by_shape) {
            if (e->n_inputs >= 0)
                lp_prof_event_format_shapes(e, shape_buf, 4096);
            else
                strcpy(shape_buf, "[]");
        }
        int is_ua = strcmp(e->cat, "user_annotation") == 0;
        int flags = is_dev | (is_ua << 1);
        uint64_t hv = hash_key(name, shape_buf, flags);
        size_t r = (size_t)-1;
        for (grp *g = tab[hv & (tab_cap - 1)]; g; g = g->next) {
            lp_prof_keyavg_row *row = &out->rows[g->row];
            if (g->h == hv && rx[g->row].flags == flags && strcmp(row->key, name) == 0 &&
                strcmp(row->input_shapes, shape_buf) == 0) {
                r = g->row;
                break;
            }
        }
        if (r == (size_t)-1) {
            if (out->n == cap_rows) {
                size_t nc = cap_rows ? cap_rows * 2 : 64;
                lp_prof_keyavg_row *nr = realloc(out->rows, nc * sizeof *nr);
                if (!nr)
                    goto oom;
                out->rows = nr;
                rowx *nx = realloc(rx, nc * sizeof *nx);
                if (!nx)
                    goto oom;
                rx = nx;
                cap_rows = nc;
            }
            r = out->n;
            lp_prof_keyavg_row *row = &out->rows[r];
            memset(row, 0, sizeof *row);
            row->key = strdup(name);
            row->input_shapes = strdup(shape_buf);
            out->n++;
            if (!row->key || !row->input_shapes)
                goto oom;
            row->is_device = is_dev;
            row->has_cpu_parent = !is_dev && nodes[k].parent >= 0;
            memset(&rx[r], 0, sizeof rx[r]);
            rx[r].flags = flags;
            rx[r].is_user_annotation = is_ua;
            grp *g = &grp_pool[npool++];
            g->h = hv;
            g->row = r;
            g->next = tab[hv & (tab_cap - 1)];
            tab[hv & (tab_cap - 1)] = g;
            if (by_shape && e->n_inputs > 0)
                out->has_input_shapes = 1;
        }
        lp_prof_keyavg_row *row = &out->rows[r];
        row->count++;
        if (e->flops > 0)
            row->flops += e->flops;
        if (is_dev) {
            rx[r].self_dev_ns += e->dur_ns;
            rx[r].dev_total_ns += e->dur_ns;
            continue;
        }
        rx[r].cpu_total_ns += e->dur_ns;
        rx[r].self_cpu_ns += e->dur_ns - nodes[k].child_ns;
        rx[r].dev_total_ns += fig[k].dev_total_ns;
        rx[r].self_dev_ns += fig[k].dev_own_ns;
        row->cpu_mem += fig[k].cpu_mem;
        row->self_cpu_mem += fig[k].cpu_mem - fig[k].child_cpu_mem;
        row->device_mem += fig[k].dev_mem;
        row->self_device_mem += fig[k].dev_mem - fig[k].child_dev_mem;
    }
    for (size_t r = 0; r < out->n; r++) {
        lp_prof_keyavg_row *row = &out->rows[r];
        row->self_cpu_us = (double)rx[r].self_cpu_ns / 1e3;
        row->cpu_total_us = (double)rx[r].cpu_total_ns / 1e3;
        row->self_device_us = (double)rx[r].self_dev_ns / 1e3;
        row->device_total_us = (double)rx[r].dev_total_ns / 1e3;
        out->sum_self_cpu_us += row->self_cpu_us;
        /* torch sums device time over device-type rows only (not user annotations) */
        if (row->is_device)
            out->sum_self_device_us += row->self_device_us;
        if (row->self_device_us > 0)
            out->has_device_time = 1;
        if (row->self_device_mem > 0)
            out->has_device_mem = 1;
        if (row->flops > 0)
            out->has_flops = 1;
    }
    out->profile_memory = o && o->profile_memory >= 0 ? o->profile_memory : in->profile_memory;
    if (o && o->with_flops == 0)
        out->has_flops = 0;
    else if ((!o || o->with_flops < 0) && !in->with_flops)
        out->has_flops = 0;
    lp_prof_keyavg_sort(out, o ? o->sort_by : LP_PROF_SORT_SELF_CPU_TIME_TOTAL);
    st = LP_OK;
    goto done;
oom:
    st = lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (key averages)");
    lp_prof_keyavg_free(out);
done:
    free(nodes);
    free(fig);
    free(node_of);
    free(mem);
    free(pre_cpu);
    free(pre_dev);
    free(tab);
    free(grp_pool);
    free(rx);
    free(shape_buf);
    return st;
}

static double sort_val(const lp_prof_keyavg_row *r, lp_prof_sort by)
{
    switch (by) {
    case LP_PROF_SORT_SELF_CPU_TIME_TOTAL: return r->self_cpu_us;
    case LP_PROF_SORT_CPU_TIME_TOTAL: return r->cpu_total_us;
    case LP_PROF_SORT_CPU_TIME: return r->count ? r->cpu_total_us / (double)r->count : 0;
    case LP_PROF_SORT_SELF_DEVICE_TIME_TOTAL: return r->self_device_us;
    case LP_PROF_SORT_DEVICE_TIME_TOTAL: return r->device_total_us;
    case LP_PROF_SORT_DEVICE_TIME: return r->count ? r->device_total_us / (double)r->count : 0;
    case LP_PROF_SORT_CPU_MEMORY_USAGE: return (double)r->cpu_mem;
    case LP_PROF_SORT_SELF_CPU_MEMORY_USAGE: return (double)r->self_cpu_mem;
    case LP_PROF_SORT_DEVICE_MEMORY_USAGE: return (double)r->device_mem;
    case LP_PROF_SORT_SELF_DEVICE_MEMORY_USAGE: return (double)r->self_device_mem;
    case LP_PROF_SORT_COUNT: return (double)r->count;
    case LP_PROF_SORT_FLOPS: return r->flops;
    default: return 0;
    }
}

void lp_prof_keyavg_sort(lp_prof_keyavg *ka, lp_prof_sort by)
{
    if (by == LP_PROF_SORT_NONE || (unsigned)by >= LP_PROF_SORT__COUNT || ka->n < 2)
        return;
    /* Stable insertion into a merged order: binary insertion keeps it O(n log n) compares
     * with O(n^2) moves, fine for the few thousand distinct keys a trace has. */
    for (size_t i = 1; i < ka->n; i++) {
        lp_prof_keyavg_row x = ka->rows[i];
        double v = sort_val(&x, by);
        size_t lo = 0, hi = i;
        while (lo < hi) { /* first position whose value is < v (descending, stable) */
            size_t mid = (lo + hi) / 2;
            if (sort_val(&ka->rows[mid], by) >= v)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(&ka->rows[lo + 1], &ka->rows[lo], (i - lo) * sizeof x);
        ka->rows[lo] = x;
    }
}
