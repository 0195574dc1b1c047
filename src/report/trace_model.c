/* The streaming trace model: events from the JSON reader pass through a reorder window
 * (a min-heap by start, longer first) and leave it in time order into running tables:
 *  - host events nest per thread as torch's EventList does (a child starts at or after its
 *    parent and ends no later); self time = duration minus the children's; a node that is
 *    its parent's only child and has its name is folded into it (torch's _remove_dup_nodes);
 *  - a runtime call records its correlation id -> the call path of host ops around it; a
 *    kernel/memcpy/memset finds its launch through that id (External id only as a
 *    fallback) and adds its time to the innermost op (self device) and every op on the path
 *    (device total);
 *  - a sweep over time gives each instant to the first part active then (the breakdown);
 *  - unions over the device events give busy, compute, communication and overlap time;
 *  - each host op's call stack (trace_stack.c) gives its (op, stack) row, and [memory]
 *    events feed the K largest allocations (trace_memev.c).
 * Only the window, the stacks and the interned names/paths are kept. */
#include "trace_json.h"
#include "trace_model_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void lp_trace_model_opts_init(lp_trace_model_opts *o)
{
    memset(o, 0, sizeof *o);
}

static const char *const part_names[LP_TRACE_PART__COUNT] = {
    "kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other",
};
const char *lp_trace_part_name(lp_trace_part p)
{
    return (unsigned)p < LP_TRACE_PART__COUNT ? part_names[p] : "?";
}

static const char *const kind_names[LP_TRACE_KIND__COUNT] = {
    "cpu_op", "user_annotation", "runtime", "driver", "kernel", "memcpy", "memset", "gpu_user_annotation",
};
const char *lp_trace_kind_name(lp_trace_kind k)
{
    return (unsigned)k < LP_TRACE_KIND__COUNT ? kind_names[k] : "?";
}

const char *lp_trace_class_name(lp_trace_class c)
{
    static const char *const n[LP_TRACE_CLASS__COUNT] = {"compute", "communication", "memory"};
    return (unsigned)c < LP_TRACE_CLASS__COUNT ? n[c] : "?";
}

/* Category text -> kind; -1 for categories that are not ops (flows, python, sync, ...). */
static int kind_of_cat(const char *c)
{
    static const struct {
        const char *cat;
        int kind;
    } map[] = {
        {"cpu_op", LP_TRACE_KIND_CPU_OP},
        {"operator", LP_TRACE_KIND_CPU_OP},
        {"user_annotation", LP_TRACE_KIND_USER_ANNOTATION},
        {"cuda_runtime", LP_TRACE_KIND_RUNTIME},
        {"runtime", LP_TRACE_KIND_RUNTIME},
        {"hip_runtime", LP_TRACE_KIND_RUNTIME},
        {"cuda_driver", LP_TRACE_KIND_DRIVER},
        {"hip_driver", LP_TRACE_KIND_DRIVER},
        {"kernel", LP_TRACE_KIND_KERNEL},
        {"cuda_profiler_range", LP_TRACE_KIND_KERNEL},
        {"gpu_memcpy", LP_TRACE_KIND_MEMCPY},
        {"memcpy", LP_TRACE_KIND_MEMCPY},
        {"gpu_memset", LP_TRACE_KIND_MEMSET},
        {"memset", LP_TRACE_KIND_MEMSET},
        {"gpu_user_annotation", LP_TRACE_KIND_GPU_ANNOTATION},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcasecmp(c, map[i].cat))
            return map[i].kind;
    return -1;
}

static int is_host(int k)
{
    return k <= LP_TRACE_KIND_DRIVER;
}
static int is_device_work(int k)
{
    return k >= LP_TRACE_KIND_KERNEL && k <= LP_TRACE_KIND_MEMSET;
}

/* Bytes of one element of a record_param_comms "dtype"; 0 when unknown. */
static int64_t dtype_size(const char *d)
{
    static const struct {
        const char *n;
        int64_t b;
    } t[] = {
        {"Float", 4},        {"Double", 8},         {"Half", 2},          {"BFloat16", 2},    {"Int", 4},
        {"Long", 8},         {"Short", 2},          {"Char", 1},          {"Byte", 1},        {"Bool", 1},
        {"ComplexFloat", 8}, {"ComplexDouble", 16}, {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(d, t[i].n))
            return t[i].b;
    return 0;
}

/* torch's profiler drops these names before building its tree (_filter_name). */
static int filtered_name(const char *n)
{
    static const char *const f[] = {"[memory]",
                                    "[OutOfMemory]",
                                    "profiler::_record_function_enter",
                                    "profiler::_record_function_enter_new",
                                    "profiler::_record_function_exit",
                                    "aten::is_leaf",
                                    "aten::output_nr",
                                    "aten::_version"};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!strcmp(n, f[i]))
            return 1;
    return 0;
}

static int contains_ci(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s; s++)
        if (!strncasecmp(s, w, n))
            return 1;
    return 0;
}

static int is_comm_name(const char *n)
{
    return contains_ci(n, "nccl") || contains_ci(n, "rccl") || contains_ci(n, "gloo") ||
           !strncmp(n, "c10d::", 6) || !strncmp(n, "mpi:", 4) || !strcmp(n, "record_param_comms");
}

/* The key of an ac2g flow's end: the stream and the start of the kernel it lands on. */
static int64_t flow_key(int64_t thread, int64_t ts)
{
    return (int64_t)((uint64_t)ts * 1000003u + (uint64_t)thread);
}

/* ---- the window ---------------------------------------------------------------------- */

static int tev_before(const tev *a, const tev *b)
{
    if (a->ts != b->ts)
        return a->ts < b->ts;
    if (a->dur != b->dur)
        return a->dur > b->dur;
    return a->seq < b->seq;
}

static void heap_push(tm_state *s, const tev *e)
{
    size_t i = s->nheap++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!tev_before(e, &s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = *e;
}

static tev heap_pop(tm_state *s)
{
    tev top = s->heap[0];
    tev last = s->heap[--s->nheap];
    size_t i = 0, n = s->nheap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const tev *best = &last;
        if (l < n && tev_before(&s->heap[l], best))
            m = l, best = &s->heap[l];
        if (r < n && tev_before(&s->heap[r], best))
            m = r;
        if (m == i)
            break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

/* ---- rows ---------------------------------------------------------------------------- */

lp_status lp_tm_oom(tm_state *s)
{
    return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory building the trace model", s->name);
}

int lp_tm_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return 0;
    memset((char *)q + *cap * elem, 0, (c - *cap) * elem);
    *p = q;
    *cap = c;
    return 1;
}

/* Row of (name, group[, shapes]) in a table, created on first use. -1: out of memory. */
static int64_t row_of(tm_state *s, int by_shape, uint32_t name, int group, uint32_t shapes, int kind)
{
    uint32_t key[3] = {name, (uint32_t)group, by_shape ? shapes : 0};
    lp_strtab *keys = by_shape ? &s->skeys : &s->keys;
    size_t before = keys->n;
    int64_t id = lp_strtab_intern(keys, (const char *)key, sizeof key);
    if (id < 0)
        return -1;
    if ((size_t)id == before) {
        lp_trace_op_row **rows = by_shape ? &s->m->ops_shape : &s->m->ops;
        size_t *n = by_shape ? &s->m->n_ops_shape : &s->m->n_ops;
        size_t *cap = by_shape ? &s->cap_srows : &s->cap_rows;
        if (!lp_tm_grow((void **)rows, cap, *n + 1, sizeof **rows))
            return -1;
        lp_trace_op_row *r = &(*rows)[(*n)++];
        r->name = s->names.str[name];
        r->shapes = !by_shape ? "" : shapes ? s->names.str[shapes - 1] : "[]"; /* torch: str([]) */
        r->kind = (lp_trace_kind)kind;
        r->is_device = group >= 2;
    }
    return id;
}

static int group_of(int kind)
{
    return kind == LP_TRACE_KIND_USER_ANNOTATION  ? 1
           : kind == LP_TRACE_KIND_GPU_ANNOTATION ? 3
           : is_device_work(kind)                 ? 2
                                                  : 0;
}

/* A finished host node's figures go to its rows. */
static void flush(tm_state *s, const summ *x)
{
    lp_trace_op_row *rows[2] = {&s->m->ops[x->row], &s->m->ops_shape[x->srow]};
    int64_t self = x->dur - x->child_ns;
    if (x->krow != NO_KROW) {
        lp_trace_stack_row *k = &s->m->stacks[x->krow];
        k->calls++;
        k->cpu_total_ns += x->dur;
        k->self_cpu_ns += self;
    }
    for (int k = 0; k < 2; k++) {
        lp_trace_op_row *r = rows[k];
        r->calls++;
        r->cpu_total_ns += x->dur;
        r->self_cpu_ns += self;
        r->cpu_mem += x->mem[0];
        r->self_cpu_mem += x->mem[0] - x->child_mem[0];
        r->device_mem += x->mem[1];
        r->self_device_mem += x->mem[1] - x->child_mem[1];
        if (x->flops > 0)
            r->flops += x->flops;
    }
}

/* Device time that went through a same-named child of f, once torch's fold of that child
 * is known: folded, the child is gone and its kernels are f's (f's row already has the
 * total); kept, the child's rows get it. */
static void stack_dev(tm_state *s, uint32_t krow, int64_t total, int64_t self)
{
    if (krow != NO_KROW && (total || self)) {
        s->m->stacks[krow].device_total_ns += total;
        s->m->stacks[krow].self_device_ns += self;
    }
}

/* a: the parent's rows (by name, by shape, by stack), b: the same-named child's. */
static void settle(tm_state *s, const uint32_t *a, const uint32_t *b, int64_t total, int64_t self, int folded)
{
    lp_trace_model *m = s->m;
    if (folded) {
        m->ops[a[0]].self_device_ns += self;
        m->ops_shape[a[1]].self_device_ns += self;
        stack_dev(s, a[2], 0, self);
        return;
    }
    m->ops[a[0]].device_total_ns += total; /* same name, same row */
    m->ops_shape[b[1]].device_total_ns += total;
    m->ops[a[0]].self_device_ns += self;
    m->ops_shape[b[1]].self_device_ns += self;
    stack_dev(s, b[2], total, self);
}

static void settle_child(tm_state *s, frame *f, int folded)
{
    uint32_t a[3] = {f->row, f->srow, f->krow}, b[3] = {f->row, f->pend_srow, f->pend_krow};
    settle(s, a, b, f->pend_total, f->pend_self, folded);
    f->pend_total = f->pend_self = 0;
}

/* Closes the innermost open node of thread t. */
static void pop_frame(tm_state *s, tm_thread *t)
{
    frame *f = &t->st[--t->n];
    summ me = {f->name,
               f->row,
               f->srow,
               f->krow,
               f->end - f->ts,
               f->child_ns,
               f->n_children,
               {f->mem[0], f->mem[1]},
               {f->child_mem[0], f->child_mem[1]},
               f->flops};
    int folded = f->n_children == 1 && f->only.name == f->name;
    if (f->n_children == 1) {
        if (folded) { /* torch's _remove_dup_nodes: the child goes, its children stay */
            me.child_ns = f->only.child_ns;
            me.n_children = f->only.n_children;
            me.child_mem[0] = f->only.child_mem[0];
            me.child_mem[1] = f->only.child_mem[1];
        } else {
            flush(s, &f->only);
        }
    }
    if (f->cand) {
        settle_child(s, f, folded);
        lp_idmap_val v = {0};
        v.path = (uint32_t)folded;
        if (!lp_idmap_put(&s->folds, (int64_t)f->serial, &v))
            s->oom = 1;
    }
    if (t->n == 0) {
        flush(s, &me);
        return;
    }
    frame *p = &t->st[t->n - 1];
    p->child_ns += me.dur;
    p->child_mem[0] += me.mem[0];
    p->child_mem[1] += me.mem[1];
    if (++p->n_children == 1) {
        p->only = me;
    } else {
        if (p->n_children == 2)
            flush(s, &p->only);
        flush(s, &me);
    }
}

static tm_thread *thread_at(tm_state *s, uint32_t id)
{
    if (!lp_tm_grow((void **)&s->threads, &s->cap_threads, (size_t)id + 1, sizeof *s->threads))
        return NULL;
    if (id >= s->n_threads)
        s->n_threads = id + 1;
    return &s->threads[id];
}

/* Ids per op on a call path: its row by name, by shape, by stack. */
#define PS 3

/* The call path of the open host ops of t (root first, runtime calls left out), interned,
 * into v->path with the innermost op and the deepest fold candidate. Only that pair is
 * settled exactly: a chain of three same-named ops counts the outer pair unfolded. */
static int64_t path_of(tm_state *s, const tm_thread *t, uint32_t thread_id, lp_idmap_val *v)
{
    size_t n = 0;
    uint32_t *innermost = &v->launch_op;
    *innermost = 0;
    v->a_depth = -1;
    int prev = -1;
    for (int i = 0; i < t->n; i++) {
        const frame *f = &t->st[i];
        if (f->kind == LP_TRACE_KIND_RUNTIME || f->kind == LP_TRACE_KIND_DRIVER)
            continue;
        if (prev >= 0 && t->st[prev].name == f->name && prev == i - 1) { /* a fold candidate */
            v->a_depth = prev;
            v->a_serial = t->st[prev].serial;
            v->a_thread = thread_id;
            v->b_pos = (uint32_t)n;
        }
        prev = i;
        if (!lp_tm_grow((void **)&s->pathbuf, &s->cap_path, PS * n + PS, sizeof *s->pathbuf))
            return -1;
        s->pathbuf[PS * n] = f->row;
        s->pathbuf[PS * n + 1] = f->srow;
        s->pathbuf[PS * n + 2] = f->krow;
        n++;
        *innermost = f->row + 1;
    }
    return lp_strtab_intern(&s->paths, (const char *)s->pathbuf, PS * n * sizeof *s->pathbuf);
}

/* ---- one event out of the window --------------------------------------------------------- */

static lp_status process(tm_state *s, const tev *e)
{
    lp_trace_model *m = s->m;
    if (e->kind == K_PYFN) { /* a Python frame: only the stacks of the ops inside it use it */
        tm_thread *t = thread_at(s, e->thread);
        if (!t)
            return lp_tm_oom(s);
        lp_tm_py_frame(s, t, e);
        return LP_OK;
    }
    if (s->any_out && e->ts < s->last_out)
        m->n_late++;
    s->last_out = e->ts > s->last_out || !s->any_out ? e->ts : s->last_out;
    if (!s->any_out) {
        s->cursor = s->ov_cursor = e->ts;
        m->first_ns = e->ts;
        s->any_out = 1;
    }
    int64_t end = e->ts + e->dur;
    if (end > m->last_ns)
        m->last_ns = end;
    tm_thread *t = thread_at(s, e->thread);
    if (!t)
        return lp_tm_oom(s);
    const char *name = s->names.str[e->name];
    lp_tm_sweep_to(s, e->ts);
    lp_tm_host_overlap_to(s, e->ts);
    m->n_used++;

    if (e->kind == K_MEMORY) {
        while (t->n && t->st[t->n - 1].end <= e->ts)
            pop_frame(s, t);
        if (e->a > 0 && t->n) {
            frame *f = &t->st[t->n - 1];
            m->ops[f->row].alloc_bytes += e->a;
            m->ops_shape[f->srow].alloc_bytes += e->a;
        }
        lp_status mst = lp_tm_mem_event(s, e, t->n ? m->ops[t->st[t->n - 1].row].name : "");
        if (mst != LP_OK)
            return mst;
        m->n_mem_events++;
        /* torch's CPU/device Mem: the event counts for every host op whose [start, end]
         * holds it, on any thread (frames already ended but not yet closed are skipped) */
        for (size_t i = 0; i < s->n_threads; i++)
            for (int k = 0; k < s->threads[i].n; k++) {
                frame *f = &s->threads[i].st[k];
                if (f->end >= e->ts && f->ts <= e->ts)
                    f->mem[e->memdev > 0] += e->a;
            }
        int dev = e->memdev > 0;
        s->mem_dev_seen |= dev;
        if (!s->peak_seen[dev] || e->b > s->peak[dev])
            s->peak[dev] = e->b, s->peak_ts[dev] = e->ts, s->peak_seen[dev] = 1;
        return lp_tm_mem_point(s, dev ? &s->curve_dev : &s->curve_cpu, e->ts, e->b);
    }

    if (is_host(e->kind)) {
        /* torch: pop while the event cannot be the top's child */
        while (t->n && (e->ts >= t->st[t->n - 1].end || end > t->st[t->n - 1].end))
            pop_frame(s, t);
        uint8_t fl = s->name_flags[e->name];
        int part = e->kind == LP_TRACE_KIND_RUNTIME || e->kind == LP_TRACE_KIND_DRIVER ? LP_TRACE_PART_RUNTIME
                   : fl & NF_DATA ? LP_TRACE_PART_DATALOADER
                   : fl & NF_COMM ? LP_TRACE_PART_COMMUNICATION
                                  : LP_TRACE_PART_CPU_EXEC;
        int is_step = (fl & NF_STEP) != 0;
        if (is_step) {
            lp_status st = lp_tm_start_step(s, e, name);
            if (st != LP_OK)
                return st;
        } else if (end > s->max_end[part]) {
            s->max_end[part] = end;
        }
        if (!is_step && part == LP_TRACE_PART_COMMUNICATION && end > t->comm_end)
            t->comm_end = end, s->ov_comm_seen = 1;
        else if (!is_step && part == LP_TRACE_PART_CPU_EXEC && end > t->exec_end)
            t->exec_end = end;
        if (m->n_steps && e->ts < s->step_cpu_end)
            lp_tm_extend_step(s, end > s->step_cpu_end ? s->step_cpu_end : end);
        uint32_t rname = is_step ? s->step_name : e->name;
        int64_t row = row_of(s, 0, rname, group_of(e->kind), 0, e->kind);
        int64_t srow = row_of(s, 1, rname, group_of(e->kind), e->shapes, e->kind);
        if (row < 0 || srow < 0)
            return lp_tm_oom(s);
        uint32_t krow;
        lp_status kst = lp_tm_stack_row(s, t, e, (uint32_t)row, &krow);
        if (kst != LP_OK)
            return kst;
        if (e->kind == LP_TRACE_KIND_RUNTIME || e->kind == LP_TRACE_KIND_DRIVER) {
            lp_idmap_val v;
            memset(&v, 0, sizeof v);
            int64_t path = path_of(s, t, e->thread, &v);
            if (path < 0)
                return lp_tm_oom(s);
            v.path = (uint32_t)path;
            v.step = m->n_steps && e->ts < s->step_cpu_end ? (int32_t)m->n_steps - 1 : -1;
            v.launch_ts = e->ts;
            v.msg_bytes = -1;
            for (int i = t->n - 1; i >= 0 && v.msg_bytes < 0; i--)
                v.msg_bytes = t->st[i].msg_bytes;
            if (e->corr >= 0 && !lp_idmap_put(&s->corr, e->corr, &v))
                return lp_tm_oom(s);
        }
        if (t->n >= LP_TRACE_MAX_STACK) { /* absurd nesting: counted as a root */
            summ x = {rname, (uint32_t)row, (uint32_t)srow, krow, e->dur, 0, 0, {0, 0}, {0, 0}, e->flops};
            flush(s, &x);
            return LP_OK;
        }
        if (!lp_tm_grow((void **)&t->st, &t->cap, (size_t)t->n + 1, sizeof *t->st))
            return lp_tm_oom(s);
        frame *f = &t->st[t->n++];
        memset(f, 0, sizeof *f);
        f->ts = e->ts;
        f->end = end;
        f->name = rname;
        f->row = (uint32_t)row;
        f->srow = (uint32_t)srow;
        f->krow = krow;
        f->pend_krow = NO_KROW;
        f->kind = e->kind;
        f->serial = s->serial++;
        f->msg_bytes = e->a;
        f->flops = e->flops;
        if (e->flops >= 0)
            m->has_flops = 1;
        if (t->n >= 2 && t->st[t->n - 2].name == rname)
            t->st[t->n - 2].cand = 1;
        if (e->kind == LP_TRACE_KIND_CPU_OP && e->ext >= 0) {
            lp_idmap_val v;
            memset(&v, 0, sizeof v);
            int64_t path = path_of(s, t, e->thread, &v);
            if (path < 0)
                return lp_tm_oom(s);
            v.path = (uint32_t)path;
            v.step = -1;
            v.launch_ts = e->ts;
            if (!lp_idmap_put(&s->ext, e->ext, &v))
                return lp_tm_oom(s);
        }
        return LP_OK;
    }

    /* device side */
    int group = group_of(e->kind);
    uint32_t rname =
        s->name_flags[e->name] & NF_STEP ? s->step_name : e->name; /* torch renames on every event */
    int64_t row = row_of(s, 0, rname, group, 0, e->kind);
    int64_t srow = row_of(s, 1, rname, group, 0, e->kind);
    if (row < 0 || srow < 0)
        return lp_tm_oom(s);
    lp_trace_op_row *r = &m->ops[row], *q = &m->ops_shape[srow];
    r->calls++, q->calls++;
    r->self_device_ns += e->dur, q->self_device_ns += e->dur;
    r->device_total_ns += e->dur, q->device_total_ns += e->dur;
    if (e->kind == LP_TRACE_KIND_GPU_ANNOTATION)
        return LP_OK;
    m->has_device = 1;

    int64_t corr = e->corr;
    if (corr < 0) { /* no args.correlation: the ac2g flow ending on this kernel */
        const lp_idmap_val *f = lp_idmap_get(&s->flows, flow_key(e->thread, e->ts));
        if (f)
            corr = f->launch_ts;
    }
    const lp_idmap_val *launch = corr >= 0 ? lp_idmap_get(&s->corr, corr) : NULL;
    if ((!launch || !s->paths.len[launch->path]) && e->ext >= 0) {
        const lp_idmap_val *alt = lp_idmap_get(&s->ext, e->ext);
        if (alt)
            launch = alt;
    }
    int comm = (s->name_flags[e->name] & NF_COMM) != 0;
    int cls = e->kind != LP_TRACE_KIND_KERNEL ? LP_TRACE_CLASS_MEMORY
              : comm                          ? LP_TRACE_CLASS_COMMUNICATION
                                              : LP_TRACE_CLASS_COMPUTE;
    /* kernel table */
    size_t before = s->kkeys.n;
    int64_t kid = lp_strtab_intern(&s->kkeys, (const char *)&e->name, sizeof e->name);
    if (kid < 0)
        return lp_tm_oom(s);
    if ((size_t)kid == before) {
        if (!lp_tm_grow((void **)&m->kernels, &s->cap_kernels, m->n_kernels + 1, sizeof *m->kernels))
            return lp_tm_oom(s);
        lp_trace_kernel_row *k = &m->kernels[m->n_kernels++];
        k->name = name;
        k->kind = (lp_trace_kind)e->kind;
        k->cls = (lp_trace_class)cls;
        k->min_ns = e->dur;
        k->launch_op = "";
    }
    lp_trace_kernel_row *k = &m->kernels[kid];
    k->calls++;
    k->total_ns += e->dur;
    if (e->dur < k->min_ns)
        k->min_ns = e->dur;
    if (e->dur > k->max_ns)
        k->max_ns = e->dur;
    if (e->kind != LP_TRACE_KIND_KERNEL && e->a > 0)
        k->bytes += e->a;
    else if (comm && launch && launch->msg_bytes > 0)
        k->bytes += launch->msg_bytes;
    if (launch && launch->launch_op && !k->launch_op[0])
        k->launch_op = m->ops[launch->launch_op - 1].name;

    /* device time up the call path */
    if (launch && s->paths.len[launch->path]) {
        const uint32_t *pp = (const uint32_t *)s->paths.str[launch->path];
        size_t n = s->paths.len[launch->path] / (PS * sizeof *pp);
        size_t b = launch->a_depth >= 0 ? launch->b_pos : SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            if (i == b)
                continue;
            m->ops[pp[PS * i]].device_total_ns += e->dur;
            m->ops_shape[pp[PS * i + 1]].device_total_ns += e->dur;
            stack_dev(s, pp[PS * i + 2], e->dur, 0);
        }
        if (b != n - 1) {
            m->ops[pp[PS * (n - 1)]].self_device_ns += e->dur;
            m->ops_shape[pp[PS * (n - 1) + 1]].self_device_ns += e->dur;
            stack_dev(s, pp[PS * (n - 1) + 2], 0, e->dur);
        }
        if (b != SIZE_MAX) { /* through a same-named child: settle now or when its parent closes */
            int64_t self = b == n - 1 ? e->dur : 0;
            tm_thread *at = launch->a_thread < s->n_threads ? &s->threads[launch->a_thread] : NULL;
            frame *a = at && launch->a_depth < at->n && at->st[launch->a_depth].serial == launch->a_serial
                           ? &at->st[launch->a_depth]
                           : NULL;
            if (a && a->n_children < 2) {
                a->pend_total += e->dur;
                a->pend_self += self;
                a->pend_srow = pp[PS * b + 1];
                a->pend_krow = pp[PS * b + 2];
            } else {
                const lp_idmap_val *d = a ? NULL : lp_idmap_get(&s->folds, (int64_t)launch->a_serial);
                settle(s, pp + PS * (b - 1), pp + PS * b, e->dur, self, d && d->path);
            }
        }
    } else {
        m->n_unlinked++;
    }

    /* breakdown, step extent, GPU unions and idle gaps */
    int part = e->kind == LP_TRACE_KIND_MEMCPY   ? LP_TRACE_PART_MEMCPY
               : e->kind == LP_TRACE_KIND_MEMSET ? LP_TRACE_PART_MEMSET
               : comm                            ? LP_TRACE_PART_COMMUNICATION
                                                 : LP_TRACE_PART_KERNEL;
    if (end > s->max_end[part])
        s->max_end[part] = end;
    if (m->n_steps && launch && launch->step == (int32_t)m->n_steps - 1)
        lp_tm_extend_step(s, end);
    gpu_ev g = {e->ts,
                end,
                launch ? launch->launch_ts : INT64_MIN,
                e->thread,
                (uint8_t)cls,
                (uint8_t)(cls != LP_TRACE_CLASS_COMPUTE || !(s->name_flags[e->name] & NF_NOT_COMPUTE))};
    if (!lp_tm_gpu_account(&s->g_all, &g))
        return lp_tm_oom(s);
    /* HTA's scope (with two steps or more): device work whose launch it found before the last
     * step began. Held while its step is the latest; committed when the next step starts. */
    if (launch && !m->n_steps) { /* before any step: in HTA's scope whatever comes */
        if (!lp_tm_gpu_account(&s->g_hta, &g))
            return lp_tm_oom(s);
    } else if (launch) { /* bounded by one step's device work */
        if (!lp_tm_grow((void **)&s->fifo, &s->cap_fifo, s->n_fifo + 1, sizeof *s->fifo))
            return lp_tm_oom(s);
        s->fifo[s->n_fifo++] = g;
    }
    return LP_OK;
}

/* ---- events in ----------------------------------------------------------------------------- */

static lp_status intern_name(tm_state *s, const char *str, uint32_t *id)
{
    size_t before = s->names.n;
    int64_t v = lp_strtab_intern(&s->names, str, strlen(str));
    if (v < 0)
        return lp_tm_oom(s);
    *id = (uint32_t)v;
    if ((size_t)v == before) { /* a new name: classify it once */
        if (!lp_tm_grow((void **)&s->name_flags, &s->cap_flags, (size_t)v + 1, 1))
            return lp_tm_oom(s);
        s->name_flags[v] =
            (uint8_t)((is_comm_name(str) ? NF_COMM : 0) |
                      (!strncmp(str, "enumerate(DataLoader)", 21) || !strncmp(str, "enumerate(DataPipe)", 19)
                           ? NF_DATA
                           : 0) |
                      (!strncmp(str, "ProfilerStep#", 13) ? NF_STEP : 0) |
                      (filtered_name(str) ? NF_FILTERED : 0) |
                      /* HTA counts these kernels as neither compute nor memory */
                      (strstr(str, "Memcpy") || !strncmp(str, "Memset", 6) || strstr(str, "Sync")
                           ? NF_NOT_COMPUTE
                           : 0));
    }
    return LP_OK;
}

/* A thread is (pid, tid) as written; its dense id, -1 when out of memory. */
static int64_t thread_of(tm_state *s, const lp_trace_item *it)
{
    char key[256];
    size_t pl = strlen(it->pid), tl = strlen(it->tid);
    pl = pl > 127 ? 127 : pl;
    tl = tl > 127 ? 127 : tl;
    memcpy(key, it->pid, pl);
    key[pl] = '\x1f';
    memcpy(key + pl + 1, it->tid, tl);
    return lp_strtab_intern(&s->threads_tab, key, pl + 1 + tl);
}

static lp_status on_item(void *ctx, const lp_trace_item *it)
{
    tm_state *s = ctx;
    lp_trace_model *m = s->m;
    m->n_events++;
    const char *ph = it->ph;
    if (!strcmp(ph, "f") && !strcasecmp(it->cat, "ac2g") && it->flow_id >= 0 && it->has_ts) {
        /* the flow's end sits on the kernel (same thread and start): its id is the
         * correlation, for kernels written without args.correlation */
        int64_t th = thread_of(s, it);
        if (th < 0)
            return lp_tm_oom(s);
        lp_idmap_val v;
        memset(&v, 0, sizeof v);
        v.launch_ts = it->flow_id;
        if (!lp_idmap_put(&s->flows, flow_key(th, it->ts_ns), &v))
            return lp_tm_oom(s);
        return LP_OK;
    }
    if (!strcmp(ph, "M") || !strcmp(ph, "s") || !strcmp(ph, "f") || !strcmp(ph, "t"))
        return LP_OK; /* metadata and other flows */
    if (!strcmp(ph, "B") || !strcmp(ph, "E")) {
        m->n_begin_end++;
        return LP_OK;
    }
    int is_x = !strcmp(ph, "X");
    int is_mem = (!strcmp(ph, "i") || !strcmp(ph, "I")) && !strcmp(it->name, "[memory]");
    if (!is_x && !is_mem)
        return LP_OK;
    if (!it->name[0] || !it->has_ts || it->bad_time || (is_x && (!it->has_dur || it->dur_ns < 0))) {
        m->n_skipped++;
        return LP_OK;
    }
    tev e;
    memset(&e, 0, sizeof e);
    e.flops = -1;
    if (is_mem) {
        e.kind = K_MEMORY;
        e.a = it->mem_bytes;
        /* 1.8/1.9 traces write no "Total Allocated": keep a running sum of the bytes */
        int dev = it->mem_device_type > 0;
        s->mem_running[dev] += it->mem_bytes;
        e.b = it->mem_total_allocated != INT64_MIN ? it->mem_total_allocated : s->mem_running[dev];
        e.memdev = (int8_t)(it->mem_device_type > 127 ? 127 : it->mem_device_type); /* > 0: a device */
    } else {
        int k;
        if (s->last_cat_kind != INT32_MIN && !strcmp(it->cat, s->last_cat)) { /* categories repeat */
            k = s->last_cat_kind;
        } else {
            k = kind_of_cat(it->cat);
            snprintf(s->last_cat, sizeof s->last_cat, "%s", it->cat);
            s->last_cat_kind = strlen(it->cat) < sizeof s->last_cat ? k : INT32_MIN;
        }
        if (k < 0 && !(s->stack_frames && is_x && !strcasecmp(it->cat, "python_function")))
            return LP_OK; /* "Trace" window, cuda_sync, ...; Python frames when stacks are off */
        e.kind = k < 0 ? K_PYFN : (uint8_t)k;
        e.a = it->bytes;
        e.flops = it->flops;
        if (k >= 0 && is_host(k) && it->call_stack) {
            lp_status cst = lp_tm_stack_arg(s, it->call_stack, &e.stack);
            if (cst != LP_OK)
                return cst;
        }
        if (k >= 0 && is_host(k)) { /* a collective's message size, for the Distributed view */
            int64_t sz = dtype_size(it->dtype);
            e.a = it->msg_nelems >= 0 && sz && it->msg_nelems <= INT64_MAX / sz ? it->msg_nelems * sz : -1;
        }
    }
    e.ts = it->ts_ns;
    e.dur = is_x ? it->dur_ns : 0;
    if (e.ts % 1000 || e.dur % 1000)
        m->sub_us = 1;
    if (e.ts > INT64_MAX / 2 || e.ts < INT64_MIN / 2 || e.dur > INT64_MAX / 4) {
        m->n_skipped++;
        return LP_OK;
    }
    e.corr = is_mem ? it->mem_addr : it->correlation;
    e.ext = is_mem ? it->mem_device_id : it->external_id;
    e.seq = s->seq++;
    lp_status st = intern_name(s, it->name, &e.name);
    if (st != LP_OK)
        return st;
    if (!is_mem && e.kind != K_PYFN && (s->name_flags[e.name] & NF_FILTERED))
        return LP_OK; /* torch drops these before building its tree */
    if (it->shapes && !is_mem && e.kind != K_PYFN) {
        uint32_t sid = 0;
        if ((st = intern_name(s, it->shapes, &sid)) != LP_OK)
            return st;
        e.shapes = sid + 1;
        m->has_shapes = 1;
    }
    int64_t tid = thread_of(s, it);
    if (tid < 0)
        return lp_tm_oom(s);
    e.thread = (uint32_t)tid;
    if (s->nheap == s->window) {
        tev out = heap_pop(s);
        if ((st = process(s, &out)) != LP_OK)
            return st;
    }
    heap_push(s, &e);
    return LP_OK;
}

static lp_status sink(void *ctx, const char *data, size_t n)
{
    tm_state *s = ctx;
    s->m->bytes += n;
    return lp_trace_json_feed(s->json, data, n);
}

static void state_free(tm_state *s)
{
    for (size_t i = 0; i < s->n_threads; i++) {
        free(s->threads[i].st);
        free(s->threads[i].py);
    }
    free(s->threads);
    lp_tm_stacks_free(s);
    lp_tm_mem_free(s);
    free(s->heap);
    free(s->pathbuf);
    free(s->name_flags);
    free(s->curve_cpu.pts);
    free(s->curve_dev.pts);
    lp_strtab_free(&s->keys);
    lp_strtab_free(&s->skeys);
    lp_strtab_free(&s->kkeys);
    lp_strtab_free(&s->paths);
    lp_strtab_free(&s->threads_tab);
    lp_idmap_free(&s->corr);
    lp_idmap_free(&s->ext);
    lp_idmap_free(&s->folds);
    lp_idmap_free(&s->flows);
    lp_tm_gpu_free(&s->g_all);
    lp_tm_gpu_free(&s->g_hta);
    free(s->fifo);
    lp_trace_json_free(s->json);
}

/* Drains the window, closes every stack, and fills the derived figures. */
static lp_status finish(tm_state *s)
{
    lp_trace_model *m = s->m;
    while (s->nheap) {
        tev e = heap_pop(s);
        lp_status st = process(s, &e);
        if (st != LP_OK)
            return st;
    }
    for (size_t i = 0; i < s->n_threads; i++)
        while (s->threads[i].n)
            pop_frame(s, &s->threads[i]);
    lp_tm_sweep_to(s, m->last_ns);
    lp_tm_host_overlap_to(s, m->last_ns);
    if (s->oom)
        return lp_tm_oom(s);
    /* the last step ends where its CPU range or its device work does; later time is not its */
    for (size_t i = 0; i < m->n_steps; i++) {
        lp_trace_step *st = &m->steps[i];
        st->dur_ns = 0;
        for (int p = 0; p < LP_TRACE_PART__COUNT; p++)
            st->dur_ns += st->part_ns[p];
    }
    lp_status kst = lp_tm_stacks_finish(s); /* uses the op rows' ids: before they move */
    if (kst != LP_OK || (kst = lp_tm_mem_finish(s)) != LP_OK)
        return kst;
    /* a same-named only child folded away was never counted: torch has no row for it */
    lp_trace_op_row *tabs[2] = {m->ops, m->ops_shape};
    size_t *ns[2] = {&m->n_ops, &m->n_ops_shape};
    for (int t = 0; t < 2; t++) {
        size_t k = 0;
        for (size_t i = 0; i < *ns[t]; i++)
            if (tabs[t][i].calls > 0)
                tabs[t][k++] = tabs[t][i];
        *ns[t] = k;
    }
    m->total.ts_ns = m->first_ns;
    m->total.dur_ns = m->last_ns - m->first_ns;
    if (!m->has_steps) {
        if (!(m->steps = malloc(sizeof *m->steps)))
            return lp_tm_oom(s);
        m->steps[0] = m->total;
        m->n_steps = 1;
    }
    /* the held events: launched before the last step began are in HTA's scope */
    if (!lp_tm_fifo_commit(s, s->m->n_steps >= 2 ? s->last_step_ts : INT64_MAX))
        return lp_tm_oom(s);
    lp_tm_gpu_figures(&s->g_all, &m->gpu_all);
    lp_tm_gpu_figures(m->n_steps >= 2 ? &s->g_hta : &s->g_all, &m->gpu);
    tm_curve *c = s->mem_dev_seen ? &s->curve_dev : &s->curve_cpu;
    if (c->in_run) { /* the last partial run */
        c->in_run = 0;
        if (c->n < LP_TRACE_MEM_POINTS)
            c->pts[c->n++] = c->run;
    }
    m->mem = c->pts;
    m->n_mem = c->n;
    m->mem_is_device = s->mem_dev_seen;
    m->mem_peak = s->peak[s->mem_dev_seen];
    m->mem_peak_ts_ns = s->peak_ts[s->mem_dev_seen];
    c->pts = NULL;
    return lp_trace_model_collectives(m, &s->names);
}

static lp_status state_init(tm_state *s, const char *name, const lp_trace_model_opts *o, lp_trace_model **out)
{
    memset(s, 0, sizeof *s);
    *out = NULL;
    s->name = name;
    s->window = o && o->window ? o->window : LP_TRACE_WINDOW;
    s->m = calloc(1, sizeof *s->m);
    s->heap = malloc(s->window * sizeof *s->heap);
    if (!s->m || !s->heap || !lp_idmap_init(&s->corr, 1u << 20) || !lp_idmap_init(&s->ext, 1u << 20) ||
        !lp_idmap_init(&s->folds, 1u << 16) || !lp_idmap_init(&s->flows, 1u << 16))
        return lp_tm_oom(s);
    snprintf(s->m->path, sizeof s->m->path, "%s", name);
    s->curve_cpu.stride = s->curve_dev.stride = 1;
    int sf = o ? o->stack_frames : 0;
    s->stack_frames = sf < 0 ? 0 : sf == 0 ? LP_TRACE_STACK_FRAMES : sf > 64 ? 64 : sf;
    int k = o ? o->mem_events : 0;
    s->k_mtop = k <= 0 ? LP_TRACE_MEM_EVENTS : k > LP_TRACE_MEM_EVENTS_MAX ? LP_TRACE_MEM_EVENTS_MAX : (size_t)k;
    s->last_cat_kind = INT32_MIN;
    lp_status st = lp_trace_json_new(name, on_item, s, &s->json);
    if (st != LP_OK)
        return st;
    return intern_name(s, "ProfilerStep*", &s->step_name);
}

/* Moves what the model keeps (names) out of the state and frees the rest. */
static lp_status conclude(tm_state *s, lp_status st, lp_trace_model **out)
{
    if (st == LP_OK)
        st = lp_trace_json_finish(s->json);
    if (st == LP_OK)
        st = finish(s);
    lp_trace_model *m = s->m;
    if (m) {
        const lp_trace_top *top = lp_trace_json_top(s->json);
        m->rank = top->rank;
        m->world_size = top->world_size;
        snprintf(m->backend, sizeof m->backend, "%s", top->backend);
        snprintf(m->device_name, sizeof m->device_name, "%s", top->device_name);
        m->device_count = top->device_count;
        m->schema_version = top->schema_version;
        m->is_array = top->is_array;
        m->has_base_time = top->has_base_time;
        m->base_time_ns = top->base_time_ns;
        m->n_skipped += lp_trace_json_skipped(s->json);
        lp_strtab *keep = malloc(sizeof *keep);
        if (keep) {
            *keep = s->names;
            memset(&s->names, 0, sizeof s->names);
        } else if (st == LP_OK) {
            st = lp_tm_oom(s);
        }
        m->priv = keep;
    }
    lp_strtab_free(&s->names);
    state_free(s);
    if (st != LP_OK) {
        lp_trace_model_free(m);
        return st;
    }
    *out = m;
    return LP_OK;
}

lp_status lp_trace_model_load(const char *path, const lp_trace_model_opts *o, lp_trace_model **out)
{
    tm_state s;
    lp_status st = state_init(&s, path, o, out);
    if (st == LP_OK) {
        uint64_t total = 0;
        st = lp_trace_stream(path, o ? o->max_bytes : 0, sink, &s, &total);
    }
    return conclude(&s, st, out);
}

lp_status lp_trace_model_parse(const char *name, const char *text, size_t len, const lp_trace_model_opts *o,
                               lp_trace_model **out)
{
    tm_state s;
    lp_status st = state_init(&s, name, o, out);
    if (st == LP_OK)
        st = sink(&s, text, len);
    return conclude(&s, st, out);
}

void lp_trace_model_free(lp_trace_model *m)
{
    if (!m)
        return;
    if (m->priv) {
        lp_strtab_free(m->priv);
        free(m->priv);
    }
    free(m->ops);
    free(m->ops_shape);
    free(m->kernels);
    free(m->steps);
    free(m->mem);
    free(m->colls);
    free(m->stacks);
    free(m->stack_pool);
    if (m->priv_frames) {
        lp_strtab_free(m->priv_frames);
        free(m->priv_frames);
    }
    free(m->mem_top);
    free(m);
}
