/* The neutral event list: completed events with copied strings (interned per list) and
 * shapes held in an arena, plus trace-wide info and thread names. The recorder fills it,
 * trace parsers fill it, and every exporter reads it. */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_blk;

typedef struct str_ent {
    struct str_ent *next;
    uint64_t h;
    const char *s;
} str_ent;

typedef struct tname {
    int64_t pid, tid;
    char *name;
} tname;

struct lp_prof_events {
    lp_prof_event *ev;
    size_t n, cap;
    arena_blk *arena;
    str_ent **strtab;
    size_t strtab_cap, strtab_n;
    tname *names;
    size_t n_names;
    lp_gpu_device_props *gpus;
    size_t n_gpus;
    lp_prof_events_info info;
};

void lp_prof_event_init(lp_prof_event *e)
{
    memset(e, 0, sizeof *e);
    e->ph = 'X';
    e->external_id = -1;
    e->correlation = -1;
    e->n_inputs = -1;
    e->flops = -1;
    e->bytes = -1;
    e->mem_device_id = -1;
    e->mem_category = -1;
    e->hw_cycles = e->hw_instructions = e->hw_cache_misses = -1;
}

lp_status lp_prof_events_new(lp_prof_events **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (event list)");
    (*out)->info.pid = (int64_t)getpid();
    return LP_OK;
}

void lp_prof_events_free(lp_prof_events *ev)
{
    if (!ev)
        return;
    for (arena_blk *b = ev->arena; b;) {
        arena_blk *nx = b->next;
        free(b);
        b = nx;
    }
    for (size_t i = 0; i < ev->strtab_cap; i++)
        for (str_ent *e = ev->strtab ? ev->strtab[i] : NULL; e;) {
            str_ent *nx = e->next;
            free(e);
            e = nx;
        }
    free(ev->strtab);
    for (size_t i = 0; i < ev->n_names; i++)
        free(ev->names[i].name);
    free(ev->names);
    free(ev->gpus);
    free(ev->ev);
    free(ev);
}

static void *arena_alloc(lp_prof_events *ev, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_blk *b = ev->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        arena_blk *nb = malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        nb->next = ev->arena;
        ev->arena = nb;
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Returns the list's own copy of s (one copy per distinct string). */
static const char *intern(lp_prof_events *ev, const char *s)
{
    if (!s)
        return NULL;
    if (ev->strtab_n * 2 >= ev->strtab_cap) {
        size_t ncap = ev->strtab_cap ? ev->strtab_cap * 2 : 256;
        str_ent **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < ev->strtab_cap; i++)
            for (str_ent *e = ev->strtab[i]; e;) {
                str_ent *nx = e->next;
                e->next = nt[e->h % ncap];
                nt[e->h % ncap] = e;
                e = nx;
            }
        free(ev->strtab);
        ev->strtab = nt;
        ev->strtab_cap = ncap;
    }
    uint64_t h = hash_str(s);
    str_ent **b = &ev->strtab[h % ev->strtab_cap];
    for (str_ent *e = *b; e; e = e->next)
        if (e->h == h && strcmp(e->s, s) == 0)
            return e->s;
    size_t n = strlen(s) + 1;
    char *copy = arena_alloc(ev, n);
    str_ent *e = malloc(sizeof *e);
    if (!copy || !e) {
        free(e);
        return NULL;
    }
    memcpy(copy, s, n);
    e->h = h;
    e->s = copy;
    e->next = *b;
    *b = e;
    ev->strtab_n++;
    return copy;
}

lp_status lp_prof_events_add(lp_prof_events *ev, const lp_prof_event *e)
{
    if (!e->name)
        return lp_err(LP_STATUS_INVALID_ARG, "profiler: event without a name");
    if (e->n_inputs > 0 && (!e->input_ranks || e->n_inputs > 4096))
        return lp_err(LP_STATUS_INVALID_ARG, "profiler: event '%s': %d inputs without ranks",
                      e->name, (int)e->n_inputs);
    lp_prof_event *ne = lp_grow(ev->ev, &ev->cap, ev->n + 1, sizeof *ne, 1024);
    if (!ne)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (%zu events)", ev->n);
    ev->ev = ne;
    lp_prof_event c = *e;
    c.name = intern(ev, e->name);
    c.cat = intern(ev, e->cat ? e->cat : "");
    if (!c.name || !c.cat)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (event strings)");
    c.input_ranks = NULL;
    c.input_dims = NULL;
    c.input_types = NULL;
    c.gpu = NULL;
    if (e->gpu) { /* the record is kept whole for the trace writer's args */
        lp_gpu_activity *g = arena_alloc(ev, sizeof *g);
        if (!g)
            return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (GPU record)");
        *g = *e->gpu;
        g->name = e->gpu->name ? intern(ev, e->gpu->name) : NULL;
        if (e->gpu->name && !g->name)
            return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (GPU record)");
        c.gpu = g;
    }
    if (e->n_inputs > 0) {
        size_t nd = 0;
        for (int i = 0; i < e->n_inputs; i++) {
            if (e->input_ranks[i] < 0 || e->input_ranks[i] > 1024)
                return lp_err(LP_STATUS_INVALID_ARG, "profiler: event '%s': input %d rank %d",
                              e->name, i, (int)e->input_ranks[i]);
            nd += (size_t)e->input_ranks[i];
        }
        if (nd && !e->input_dims)
            return lp_err(LP_STATUS_INVALID_ARG, "profiler: event '%s': ranks without dims",
                          e->name);
        int32_t *r = arena_alloc(ev, (size_t)e->n_inputs * sizeof *r);
        int64_t *d = arena_alloc(ev, (nd ? nd : 1) * sizeof *d);
        if (!r || !d)
            return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (shapes)");
        memcpy(r, e->input_ranks, (size_t)e->n_inputs * sizeof *r);
        if (nd)
            memcpy(d, e->input_dims, nd * sizeof *d);
        c.input_ranks = r;
        c.input_dims = d;
        if (e->input_types) {
            const char **t = arena_alloc(ev, (size_t)e->n_inputs * sizeof *t);
            if (!t)
                return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (types)");
            for (int i = 0; i < e->n_inputs; i++) {
                t[i] = intern(ev, e->input_types[i] ? e->input_types[i] : "");
                if (!t[i])
                    return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (types)");
            }
            c.input_types = t;
        }
    }
    ev->ev[ev->n++] = c;
    return LP_OK;
}

size_t lp_prof_events_count(const lp_prof_events *ev) { return ev->n; }

const lp_prof_event *lp_prof_events_get(const lp_prof_events *ev, size_t i)
{
    return i < ev->n ? &ev->ev[i] : NULL;
}

lp_prof_events_info *lp_prof_events_info_of(lp_prof_events *ev) { return &ev->info; }
const lp_prof_events_info *lp_prof_events_info_get(const lp_prof_events *ev) { return &ev->info; }

/* Merge sort keeps equal keys in insertion order (qsort would not). */
static int ev_less(const lp_prof_event *a, const lp_prof_event *b)
{
    if (a->ts_ns != b->ts_ns)
        return a->ts_ns < b->ts_ns;
    return a->dur_ns > b->dur_ns;
}

static void msort(lp_prof_event *a, lp_prof_event *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    msort(a, tmp, h);
    msort(a + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = ev_less(&a[j], &a[i]) ? a[j++] : a[i++];
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

void lp_prof_events_sort(lp_prof_events *ev)
{
    if (ev->n < 2)
        return;
    lp_prof_event *tmp = malloc(ev->n * sizeof *tmp);
    if (!tmp) { /* insertion sort fallback: slow but correct */
        for (size_t i = 1; i < ev->n; i++) {
            lp_prof_event x = ev->ev[i];
            size_t j = i;
            while (j > 0 && ev_less(&x, &ev->ev[j - 1])) {
                ev->ev[j] = ev->ev[j - 1];
                j--;
            }
            ev->ev[j] = x;
        }
        return;
    }
    msort(ev->ev, tmp, ev->n);
    free(tmp);
}

static lp_status set_name(lp_prof_events *ev, int64_t pid, int64_t tid, const char *name)
{
    for (size_t i = 0; i < ev->n_names; i++)
        if (ev->names[i].pid == pid && ev->names[i].tid == tid) {
            char *c = strdup(name);
            if (!c)
                return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory");
            free(ev->names[i].name);
            ev->names[i].name = c;
            return LP_OK;
        }
    tname *nn = realloc(ev->names, (ev->n_names + 1) * sizeof *nn);
    if (!nn)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory");
    ev->names = nn;
    nn[ev->n_names].pid = pid;
    nn[ev->n_names].tid = tid;
    nn[ev->n_names].name = strdup(name);
    if (!nn[ev->n_names].name)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory");
    ev->n_names++;
    return LP_OK;
}

/* Process names live in the same table under tid INT64_MIN. */
lp_status lp_prof_events_set_thread_name(lp_prof_events *ev, int64_t pid, int64_t tid,
                                         const char *name)
{
    return set_name(ev, pid, tid, name ? name : "");
}

lp_status lp_prof_events_set_process_name(lp_prof_events *ev, int64_t pid, const char *name)
{
    return set_name(ev, pid, INT64_MIN, name ? name : "");
}

lp_status lp_prof_events_set_gpu_devices(lp_prof_events *ev, const lp_gpu_device_props *d,
                                         size_t n)
{
    lp_gpu_device_props *c = NULL;
    if (n) {
        c = malloc(n * sizeof *c);
        if (!c)
            return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (GPU devices)");
        memcpy(c, d, n * sizeof *c);
    }
    free(ev->gpus);
    ev->gpus = c;
    ev->n_gpus = n;
    return LP_OK;
}

const lp_gpu_device_props *lp_prof_events_gpu_devices(const lp_prof_events *ev, size_t *n)
{
    *n = ev->n_gpus;
    return ev->gpus;
}

lp_prof_event *lp_prof__events_at(lp_prof_events *ev, size_t i)
{
    return i < ev->n ? &ev->ev[i] : NULL;
}

const char *lp_prof_events_thread_name(const lp_prof_events *ev, int64_t pid, int64_t tid)
{
    for (size_t i = 0; i < ev->n_names; i++)
        if (ev->names[i].pid == pid && ev->names[i].tid == tid)
            return ev->names[i].name;
    return NULL;
}

/* Number of (pid, tid) names, and the i-th, for the trace writer's metadata events. */
size_t lp_prof__events_n_names(const lp_prof_events *ev) { return ev->n_names; }
const char *lp_prof__events_name_at(const lp_prof_events *ev, size_t i, int64_t *pid,
                                    int64_t *tid)
{
    *pid = ev->names[i].pid;
    *tid = ev->names[i].tid;
    return ev->names[i].name;
}

/* Appends to buf (bounded), counting the full length like snprintf. */
static void put(char *buf, size_t cap, size_t *len, const char *s)
{
    size_t n = strlen(s);
    if (buf && *len < cap) {
        size_t room = cap - *len - 1;
        size_t k = n < room ? n : room;
        memcpy(buf + *len, s, k);
        buf[*len + k] = '\0';
    }
    *len += n;
}

size_t lp_prof_event_format_shapes(const lp_prof_event *e, char *buf, size_t cap)
{
    size_t len = 0;
    char num[32];
    if (buf && cap)
        buf[0] = '\0';
    else
        buf = NULL;
    put(buf, cap, &len, "[");
    size_t d = 0;
    for (int i = 0; i < e->n_inputs; i++) {
        put(buf, cap, &len, i ? ", [" : "[");
        for (int j = 0; j < e->input_ranks[i]; j++) {
            snprintf(num, sizeof num, j ? ", %lld" : "%lld", (long long)e->input_dims[d++]);
            put(buf, cap, &len, num);
        }
        put(buf, cap, &len, "]");
    }
    put(buf, cap, &len, "]");
    return len;
}
