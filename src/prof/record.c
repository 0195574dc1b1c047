/* The recorder: per-thread chunked buffers written without locks (a thread registers its
 * buffer once under a mutex), and the collector that turns a window of begin/end records
 * into completed events in an lp_prof_events list. A writer publishes each record with a
 * release store of its chunk's count; the collector reads with acquire, so it never sees
 * a half-written record and never takes a lock the hot path would wait on. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef LP_HAVE_NVTX
/* header-only NVTX3: with no tool attached a push/pop is a call through a null-checked
 * function pointer */
#include <nvtx3/nvToolsExt.h>
#define NVTX_PUSH(name) nvtxRangePushA(name)
#define NVTX_POP() nvtxRangePop()
#else
#define NVTX_PUSH(name) ((void)0)
#define NVTX_POP() ((void)0)
#endif

int lp_prof__active;
int lp_prof__mem_on;
static int rec_shapes;
static int rec_hw;

enum {
    K_BEGIN = 1, /* b = name, kind byte 1 = cat */
    K_OP = 2,    /* b = desc, c = flops bits; payload: bytes + dims */
    K_STEP = 3,  /* c = step number */
    K_END = 4,
    K_MEM = 5,   /* b = addr, c = signed bytes; payload: total after, category */
    K_STEP_END = 6, /* closes the innermost open ProfilerStep, whatever is above it */
    K_HW = 0x80  /* flag: one payload record of counters follows the others */
};

typedef union rec {
    struct {
        int64_t ts;
        uint64_t b, c;
        uint32_t kind, n; /* n = payload records that follow */
    } e;
    int64_t v[4];
    double d[4];
} rec;

#define CHUNK_RECS 2048

typedef struct chunk {
    _Atomic(struct chunk *) next;
    _Atomic uint32_t n;
    rec r[CHUNK_RECS];
} chunk;

typedef struct tbuf {
    struct tbuf *next_all;
    int64_t tid;
    char name[64];
    chunk *head;       /* collector: oldest chunk not yet released */
    uint32_t head_pos; /* collector: first unread record in head */
    int hw_leader, hw_fds[3], hw_ok;
} tbuf;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static tbuf *all_bufs;

static __thread tbuf *tls_tb;
static __thread chunk *tls_chunk;
static __thread uint32_t tls_pos;

void lp_prof__rec_set_flags(int record_shapes, int hw_counters)
{
    rec_shapes = record_shapes;
    rec_hw = hw_counters;
}

void lp_prof__rec_enable(int on)
{
    if (on)
        __atomic_or_fetch(&lp_prof__active, LP_PROF__ACT_REC, __ATOMIC_RELEASE);
    else
        __atomic_and_fetch(&lp_prof__active, ~LP_PROF__ACT_REC, __ATOMIC_RELEASE);
}

int lp_prof_nvtx_enable(int on)
{
#ifdef LP_HAVE_NVTX
    if (on < 0) { /* auto: a tool (Nsight Systems) injects itself through this variable */
        const char *inj = getenv("NVTX_INJECTION64_PATH");
        on = inj && *inj;
    }
    if (on)
        __atomic_or_fetch(&lp_prof__active, LP_PROF__ACT_NVTX, __ATOMIC_RELEASE);
    else
        __atomic_and_fetch(&lp_prof__active, ~LP_PROF__ACT_NVTX, __ATOMIC_RELEASE);
    return on != 0;
#else
    (void)on;
    return 0;
#endif
}

static tbuf *register_thread(void)
{
    tbuf *tb = calloc(1, sizeof *tb);
    if (!tb)
        return NULL;
    tb->tid = lp_prof_thread_id();
    tb->hw_leader = -1;
    if (pthread_getname_np(pthread_self(), tb->name, sizeof tb->name) != 0)
        tb->name[0] = '\0';
    chunk *c = calloc(1, sizeof *c);
    if (!c) {
        free(tb);
        return NULL;
    }
    tb->head = c;
    if (rec_hw)
        tb->hw_ok = lp_prof__hw_open_thread(&tb->hw_leader, tb->hw_fds);
    pthread_mutex_lock(&reg_mu);
    tb->next_all = all_bufs;
    all_bufs = tb;
    pthread_mutex_unlock(&reg_mu);
    tls_tb = tb;
    tls_chunk = c;
    tls_pos = 0;
    return tb;
}

void lp_prof_set_thread_name(const char *name)
{
    if (!tls_tb && !register_thread())
        return;
    pthread_mutex_lock(&reg_mu);
    snprintf(tls_tb->name, sizeof tls_tb->name, "%s", name ? name : "");
    pthread_mutex_unlock(&reg_mu);
    char short_name[16];
    snprintf(short_name, sizeof short_name, "%s", name ? name : "");
    pthread_setname_np(pthread_self(), short_name);
}

/* Room for k consecutive records in the calling thread's chunk, or NULL (out of memory:
 * the event is dropped, and the collector drops its unmatched partner). */
static rec *reserve(uint32_t k)
{
    if (__builtin_expect(!tls_chunk, 0) && !register_thread())
        return NULL;
    if (__builtin_expect(tls_pos + k > CHUNK_RECS, 0)) {
        chunk *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        atomic_store_explicit(&tls_chunk->next, c, memory_order_release);
        tls_chunk = c;
        tls_pos = 0;
    }
    return &tls_chunk->r[tls_pos];
}

static void commit(uint32_t k)
{
    tls_pos += k;
    atomic_store_explicit(&tls_chunk->n, tls_pos, memory_order_release);
}

static inline int64_t now(void) { return lp_prof__ticks(); }

/* Appends the hardware-counter payload when counting is on for this thread. */
static uint32_t hw_extra(void) { return (rec_hw && tls_tb && tls_tb->hw_ok) ? 1u : 0u; }

static void hw_fill(rec *r)
{
    r->v[3] = 0;
    if (lp_prof__hw_read(tls_tb->hw_leader, r->v) != 0)
        r->v[0] = r->v[1] = r->v[2] = -1;
}

void lp_prof__push(const char *name, lp_prof_cat cat)
{
    NVTX_PUSH(name);
    if (!LP_PROF__RECORDING())
        return;
    uint32_t x = hw_extra();
    rec *r = reserve(1 + x);
    if (!r)
        return;
    if (x)
        hw_fill(&r[1]);
    r->e.ts = now();
    r->e.b = (uint64_t)(uintptr_t)name;
    r->e.c = 0;
    r->e.kind = K_BEGIN | ((uint32_t)cat << 8) | (x ? K_HW : 0);
    r->e.n = x;
    commit(1 + x);
}

void lp_prof__step_push(int64_t n)
{
    uint32_t x = hw_extra();
    rec *r = reserve(1 + x);
    if (!r)
        return;
    if (x)
        hw_fill(&r[1]);
    r->e.ts = now();
    r->e.b = 0;
    r->e.c = (uint64_t)n;
    r->e.kind = K_STEP | (x ? K_HW : 0);
    r->e.n = x;
    commit(1 + x);
}

void lp_prof__op_push(const lp_prof_op_desc *d, const int64_t *dims, double flops, double bytes)
{
    NVTX_PUSH(d->name);
    if (!LP_PROF__RECORDING())
        return;
    uint32_t nd = 0;
    int ni = d->ninputs;
    if (ni < 0 || ni > LP_PROF_MAX_INPUTS)
        ni = 0;
    if (rec_shapes && dims)
        for (int i = 0; i < ni; i++)
            nd += (uint32_t)(d->rank[i] > 0 && d->rank[i] <= LP_PROF_MAX_RANK ? d->rank[i] : 0);
    uint32_t dim_recs = (nd + 3) / 4;
    uint32_t x = hw_extra();
    uint32_t extra = 1 + dim_recs + x;
    rec *r = reserve(1 + extra);
    if (!r)
        return;
    r[1].d[0] = bytes;
    r[1].v[1] = (rec_shapes && (dims || ni == 0)) ? (int64_t)nd : -1;
    r[1].v[2] = 0;
    r[1].v[3] = 0;
    if (nd)
        memcpy(r[2].v, dims, nd * sizeof(int64_t));
    if (x)
        hw_fill(&r[2 + dim_recs]);
    r->e.ts = now();
    r->e.b = (uint64_t)(uintptr_t)d;
    memcpy(&r->e.c, &flops, sizeof flops);
    r->e.kind = K_OP | (x ? K_HW : 0);
    r->e.n = extra;
    commit(1 + extra);
}

void lp_prof__step_pop(void)
{
    rec *r = reserve(1);
    if (!r)
        return;
    r->e.ts = now();
    r->e.b = r->e.c = 0;
    r->e.kind = K_STEP_END;
    r->e.n = 0;
    commit(1);
}

void lp_prof__pop(void)
{
    NVTX_POP();
    if (!LP_PROF__RECORDING())
        return;
    uint32_t x = hw_extra();
    rec *r = reserve(1 + x);
    if (!r)
        return;
    r->e.ts = now();
    if (x)
        hw_fill(&r[1]);
    r->e.b = r->e.c = 0;
    r->e.kind = K_END | (x ? K_HW : 0);
    r->e.n = x;
    commit(1 + x);
}

void lp_prof__mem_record(const void *addr, int64_t bytes, int cat, int64_t total_after)
{
    rec *r = reserve(2);
    if (!r)
        return;
    r[1].v[0] = total_after;
    r[1].v[1] = cat;
    r->e.ts = now();
    r->e.b = (uint64_t)(uintptr_t)addr;
    r->e.c = (uint64_t)bytes;
    r->e.kind = K_MEM;
    r->e.n = 1;
    commit(2);
}

/* ------------------------------------------------------------------------------------ */
/* Collector.                                                                           */

/* Calls fn on every committed, unread record group of tb, then marks them read and frees
 * chunks the writer has left. Only the collector (under coll_mu) calls this. */
static pthread_mutex_t coll_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct open_rng {
    int64_t ts_ns;  /* begin, ns (rec_ns) */
    const rec *hdr; /* copy holder below */
    rec h[2];       /* header + first payload */
    int64_t dims[LP_PROF_MAX_INPUTS * LP_PROF_MAX_RANK];
    int64_t hw[3];
    int has_hw;
} open_rng;

typedef struct coll {
    lp_prof_events *ev;
    int64_t t0, t1;   /* window, ticks */
    int64_t t0_ns;    /* window start, ns */
    const lp_prof_tcal *cal;
    lp_status st;
    open_rng *stack;
    size_t depth, cap;
    int64_t tid, pid;
    size_t n_thread_events;
    int64_t last_ns;  /* the thread's previous record, ns */
} coll;

/* A record's time in ns, strictly after the previous record of its thread. Two TSC reads a
 * few ticks apart can convert to the same ns; a range would then end the very ns the next
 * one begins (or its parent ends), and readers that add ts + dur in doubles see the two
 * overlap by a rounding error and drop one (torch-tb-profiler did, under load). */
static int64_t rec_ns(coll *c, int64_t ticks)
{
    int64_t ns = lp_prof__ticks_to_ns(c->cal, ticks);
    if (ns <= c->last_ns)
        ns = c->last_ns + 1;
    return c->last_ns = ns;
}

static void emit_range(coll *c, const open_rng *o, int64_t end_ns, const int64_t *hw_end)
{
    lp_prof_event e;
    lp_prof_event_init(&e);
    char step_name[48];
    int32_t ranks[LP_PROF_MAX_INPUTS];
    const char *types[LP_PROF_MAX_INPUTS];
    uint32_t kind = o->h[0].e.kind & 0x7f;
    e.cat = "user_annotation";
    if (kind == K_BEGIN) {
        e.name = (const char *)(uintptr_t)o->h[0].e.b;
        if (((o->h[0].e.kind >> 8) & 0xff) == LP_PROF_CAT_CPU_OP)
            e.cat = "cpu_op";
    } else if (kind == K_STEP) {
        snprintf(step_name, sizeof step_name, "ProfilerStep#%lld", (long long)o->h[0].e.c);
        e.name = step_name;
    } else { /* K_OP */
        const lp_prof_op_desc *d = (const lp_prof_op_desc *)(uintptr_t)o->h[0].e.b;
        e.name = d->name;
        e.cat = d->cat == LP_PROF_CAT_USER_ANNOTATION ? "user_annotation" : "cpu_op";
        memcpy(&e.flops, &o->h[0].e.c, sizeof e.flops);
        e.bytes = o->h[1].d[0];
        int ni = d->ninputs < 0 || d->ninputs > LP_PROF_MAX_INPUTS ? 0 : d->ninputs;
        if (o->h[1].v[1] >= 0) {
            e.n_inputs = ni;
            int any_type = 0;
            for (int i = 0; i < ni; i++) {
                ranks[i] = d->rank[i] > 0 && d->rank[i] <= LP_PROF_MAX_RANK ? d->rank[i] : 0;
                types[i] = d->type[i];
                any_type |= d->type[i] != NULL;
            }
            e.input_ranks = ranks;
            e.input_dims = o->dims;
            e.input_types = any_type ? types : NULL;
        }
    }
    if (!e.name)
        e.name = "(null)";
    e.pid = c->pid;
    e.tid = c->tid;
    e.ts_ns = o->ts_ns - c->t0_ns;
    e.dur_ns = end_ns - o->ts_ns;
    if (o->has_hw && hw_end && o->hw[0] >= 0 && hw_end[0] >= 0) {
        e.hw_cycles = hw_end[0] - o->hw[0];
        e.hw_instructions = hw_end[1] - o->hw[1];
        e.hw_cache_misses = hw_end[2] - o->hw[2];
    }
    if (c->st == LP_OK)
        c->st = lp_prof_events_add(c->ev, &e);
    c->n_thread_events++;
}

/* Handles one record group (header + n payload records, contiguous). */
static void on_group(coll *c, const rec *r)
{
    uint32_t kind = r->e.kind & 0x7f;
    int has_hw = (r->e.kind & K_HW) != 0;
    const rec *hwr = has_hw ? &r[r->e.n] : NULL;
    if (r->e.ts < c->t0 || r->e.ts > c->t1) {
        /* Outside the window: a begin before it is forgotten, so its end is unmatched;
         * an end after it cannot close anything recorded in it. */
        return;
    }
    if (kind == K_END) {
        /* A plain pop never closes a ProfilerStep (those close by identity): it closes the
         * innermost other range; with none it is unbalanced, or its range began before the
         * window, and is dropped. */
        for (size_t k = c->depth; k-- > 0;) {
            if ((c->stack[k].h[0].e.kind & 0x7f) == K_STEP)
                continue;
            emit_range(c, &c->stack[k], rec_ns(c, r->e.ts), hwr ? hwr->v : NULL);
            memmove(&c->stack[k], &c->stack[k + 1], (c->depth - k - 1) * sizeof c->stack[0]);
            c->depth--;
            break;
        }
        return;
    }
    if (kind == K_STEP_END) {
        /* torch closes its ProfilerStep record_function by reference, not as the innermost
         * range: ranges the caller left open stay open (and will overlap the step). */
        for (size_t k = c->depth; k-- > 0;) {
            if ((c->stack[k].h[0].e.kind & 0x7f) != K_STEP)
                continue;
            emit_range(c, &c->stack[k], rec_ns(c, r->e.ts), NULL);
            memmove(&c->stack[k], &c->stack[k + 1], (c->depth - k - 1) * sizeof c->stack[0]);
            c->depth--;
            break;
        }
        return;
    }
    if (kind == K_MEM) {
        lp_prof_event e;
        lp_prof_event_init(&e);
        e.name = "[memory]";
        e.cat = "cpu_instant_event";
        e.ph = 'i';
        e.pid = c->pid;
        e.tid = c->tid;
        e.ts_ns = rec_ns(c, r->e.ts) - c->t0_ns;
        e.dur_ns = 0;
        e.mem_addr = r->e.b;
        e.mem_bytes = (int64_t)r->e.c;
        e.mem_total_allocated = r[1].v[0];
        e.mem_total_reserved = r[1].v[0];
        e.mem_device_type = 0;
        e.mem_device_id = -1;
        e.mem_category = (int32_t)r[1].v[1];
        if (c->st == LP_OK)
            c->st = lp_prof_events_add(c->ev, &e);
        c->n_thread_events++;
        return;
    }
    open_rng *ns = lp_grow(c->stack, &c->cap, c->depth + 1, sizeof *ns, 64);
    if (!ns) {
        c->st = lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (range stack)");
        return;
    }
    c->stack = ns;
    open_rng *o = &c->stack[c->depth++];
    o->ts_ns = rec_ns(c, r->e.ts);
    o->h[0] = r[0];
    memset(&o->h[1], 0, sizeof o->h[1]);
    o->has_hw = has_hw;
    if (kind == K_OP) {
        o->h[1] = r[1];
        int64_t nd = r[1].v[1];
        if (nd > 0) {
            if (nd > (int64_t)(sizeof o->dims / sizeof o->dims[0]))
                nd = sizeof o->dims / sizeof o->dims[0];
            memcpy(o->dims, r[2].v, (size_t)nd * sizeof(int64_t));
        }
    }
    if (has_hw)
        memcpy(o->hw, hwr->v, sizeof o->hw);
}

/* Reads every committed record group of tb (c NULL: just discard them). */
static void drain(tbuf *tb, coll *c)
{
    chunk *ch = tb->head;
    uint32_t pos = tb->head_pos;
    for (;;) {
        chunk *nx = atomic_load_explicit(&ch->next, memory_order_acquire);
        uint32_t n = atomic_load_explicit(&ch->n, memory_order_acquire);
        while (pos < n) {
            const rec *r = &ch->r[pos];
            if (c)
                on_group(c, r);
            pos += 1 + r->e.n;
        }
        if (!nx)
            break;
        /* The writer moved on: this chunk is final and nobody else reads it. */
        chunk *old = ch;
        ch = nx;
        pos = 0;
        free(old);
    }
    tb->head = ch;
    tb->head_pos = pos;
}

void lp_prof__rec_window_start(int64_t t_ns)
{
    (void)t_ns;
    pthread_mutex_lock(&coll_mu);
    pthread_mutex_lock(&reg_mu);
    tbuf *list = all_bufs;
    pthread_mutex_unlock(&reg_mu);
    for (tbuf *tb = list; tb; tb = tb->next_all)
        drain(tb, NULL);
    pthread_mutex_unlock(&coll_mu);
}

lp_status lp_prof__rec_collect(lp_prof_events *ev, int64_t t_start, int64_t t_end,
                               const lp_prof_tcal *cal)
{
    coll c = {.ev = ev, .t0 = t_start, .t1 = t_end, .st = LP_OK, .pid = (int64_t)getpid(),
              .cal = cal, .t0_ns = lp_prof__ticks_to_ns(cal, t_start)};
    pthread_mutex_lock(&coll_mu);
    pthread_mutex_lock(&reg_mu);
    tbuf *list = all_bufs;
    pthread_mutex_unlock(&reg_mu);
    for (tbuf *tb = list; tb; tb = tb->next_all) {
        c.tid = tb->tid;
        c.depth = 0;
        c.last_ns = INT64_MIN;
        c.n_thread_events = 0;
        drain(tb, &c);
        /* Ranges still open at the window's end are dropped (their end is unknown). */
        if (c.n_thread_events && c.st == LP_OK) {
            char nm[128];
            pthread_mutex_lock(&reg_mu);
            snprintf(nm, sizeof nm, "thread %lld (%s)", (long long)tb->tid, tb->name);
            pthread_mutex_unlock(&reg_mu);
            c.st = lp_prof_events_set_thread_name(ev, c.pid, tb->tid, nm);
        }
    }
    pthread_mutex_unlock(&coll_mu);
    free(c.stack);
    if (c.st != LP_OK)
        return c.st;
    lp_prof_events_sort(ev);
    return LP_OK;
}
