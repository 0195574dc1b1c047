/* Call stacks for the (op, stack) rows, as torch's key_averages(group_by_stack_n=N): the
 * first N frames (innermost first) of the "Call stack" arg, of the python_function frames
 * open around the op on its thread, or, in a with_stack trace that records neither
 * (loupe's), of the record_function ranges open around it. Memory stays bounded: frames
 * and stacks are interned once, an op keeps LP_TRACE_STACKS_PER_OP distinct stacks and the
 * trace LP_TRACE_STACKS_MAX; later ones are summed in the op's "folded" row. */
#include "trace_model_internal.h"

#include <stdlib.h>
#include <string.h>

/* Longest frame text kept (torch prints 75 characters of one); longer ones are cut. */
#define FRAME_MAX 1024

/* Interned ids are only added while the stack and frame tables have room, so a trace with a
 * new stack on every event grows neither past the cap (at most ~64 MB of frame text). */
static int tables_full(const tm_state *s)
{
    return s->stacks.n >= LP_TRACE_STACKS_MAX || s->frames.n >= LP_TRACE_STACKS_MAX;
}

/* -1 out of memory, -2 new and not kept. */
static int64_t find_or_add(tm_state *s, lp_strtab *t, const char *p, size_t n)
{
    if (t == &s->frames && n > FRAME_MAX)
        n = FRAME_MAX;
    if (tables_full(s)) {
        int64_t id = lp_strtab_find(t, p, n);
        return id < 0 ? -2 : id;
    }
    return lp_strtab_intern(t, p, n);
}

static int seq_room(tm_state *s)
{
    return lp_tm_grow((void **)&s->seqbuf, &s->cap_seq, (size_t)s->stack_frames, sizeof *s->seqbuf);
}

/* The stack of frames seqbuf[0..n): id + 1, UINT32_MAX when not kept, 0 out of memory. */
static uint32_t seq_id(tm_state *s, size_t n, int *oom)
{
    int64_t id = find_or_add(s, &s->stacks, (const char *)s->seqbuf, n * sizeof *s->seqbuf);
    if (id == -1)
        *oom = 1;
    return id < 0 ? UINT32_MAX : (uint32_t)id + 1;
}

lp_status lp_tm_stack_arg(tm_state *s, const char *cs, uint32_t *stack)
{
    *stack = 0;
    if (!s->stack_frames || !cs || !*cs)
        return LP_OK;
    if (!seq_room(s))
        return lp_tm_oom(s);
    s->m->stack_source |= LP_TRACE_STACK_ARG;
    size_t n = 0;
    for (const char *p = cs; *p && n < (size_t)s->stack_frames;) {
        size_t l = strcspn(p, ";");
        int64_t id = find_or_add(s, &s->frames, p, l);
        if (id == -1)
            return lp_tm_oom(s);
        if (id == -2) { /* a frame not kept: the stack cannot be either */
            *stack = UINT32_MAX;
            return LP_OK;
        }
        s->seqbuf[n++] = (uint32_t)id;
        p += l;
        if (*p == ';')
            p++;
    }
    int oom = 0;
    *stack = seq_id(s, n, &oom);
    return oom ? lp_tm_oom(s) : LP_OK;
}

void lp_tm_py_frame(tm_state *s, tm_thread *t, const tev *e)
{
    int64_t end = e->ts + e->dur;
    while (t->npy && (e->ts >= t->py[t->npy - 1].end || end > t->py[t->npy - 1].end))
        t->npy--;
    if (t->npy >= LP_TRACE_MAX_STACK)
        return;
    if (!lp_tm_grow((void **)&t->py, &t->cap_py, (size_t)t->npy + 1, sizeof *t->py)) {
        s->oom = 1;
        return;
    }
    t->py[t->npy++] = (pyframe){end, e->name};
    s->m->stack_source |= LP_TRACE_STACK_PYTHON;
}

/* A new stack row for (op row, stack id or UINT32_MAX: folded); -1 out of memory. */
static int64_t new_krow(tm_state *s, uint32_t row, uint32_t sid)
{
    uint32_t key[2] = {row, sid};
    int64_t id = lp_strtab_intern(&s->kkeys_stack, (const char *)key, sizeof key);
    if (id < 0)
        return -1;
    lp_trace_model *m = s->m;
    if (!lp_tm_grow((void **)&m->stacks, &s->cap_stacks, m->n_stacks + 1, sizeof *m->stacks) ||
        !lp_tm_grow((void **)&s->krow_op, &s->cap_krow_meta, m->n_stacks + 1, sizeof *s->krow_op))
        return -1;
    lp_trace_stack_row *r = &m->stacks[m->n_stacks];
    r->name = m->ops[row].name;
    r->kind = m->ops[row].kind;
    r->folded = sid == UINT32_MAX;
    s->krow_op[m->n_stacks] = row;
    m->n_stacks++;
    return id;
}

static lp_status krow_of(tm_state *s, uint32_t row, uint32_t sid, uint32_t *krow)
{
    if (!lp_tm_grow((void **)&s->op_nstacks, &s->cap_op_nstacks, (size_t)row + 1, sizeof *s->op_nstacks) ||
        !lp_tm_grow((void **)&s->op_fold, &s->cap_op_fold, (size_t)row + 1, sizeof *s->op_fold))
        return lp_tm_oom(s);
    if (sid != UINT32_MAX) {
        uint32_t key[2] = {row, sid};
        int64_t id = lp_strtab_find(&s->kkeys_stack, (const char *)key, sizeof key);
        if (id >= 0) {
            *krow = (uint32_t)id;
            return LP_OK;
        }
        if (s->op_nstacks[row] < LP_TRACE_STACKS_PER_OP && s->kkeys_stack.n < LP_TRACE_STACKS_MAX) {
            if ((id = new_krow(s, row, sid)) < 0)
                return lp_tm_oom(s);
            s->op_nstacks[row]++;
            *krow = (uint32_t)id;
            return LP_OK;
        }
    }
    if (!s->op_fold[row]) { /* one folded row per op: bounded by the ops */
        int64_t id = new_krow(s, row, UINT32_MAX);
        if (id < 0)
            return lp_tm_oom(s);
        s->op_fold[row] = (uint32_t)id + 1;
    }
    *krow = s->op_fold[row] - 1;
    return LP_OK;
}

lp_status lp_tm_stack_row(tm_state *s, tm_thread *t, const tev *e, uint32_t row, uint32_t *krow)
{
    *krow = NO_KROW;
    if (!s->stack_frames)
        return LP_OK;
    uint32_t sid;
    if (e->stack) {
        sid = e->stack == UINT32_MAX ? UINT32_MAX : e->stack - 1;
    } else {
        int64_t end = e->ts + e->dur;
        while (t->npy && (e->ts >= t->py[t->npy - 1].end || end > t->py[t->npy - 1].end))
            t->npy--;
        int ranges = !t->npy && lp_trace_json_top(s->json)->with_stack;
        if (!t->npy && !ranges)
            return LP_OK; /* no stack here: the op's "no stack" row gets it at the end */
        if (!seq_room(s))
            return lp_tm_oom(s);
        size_t n = 0, cap = (size_t)s->stack_frames;
        for (int i = t->npy - 1; i >= 0 && n < cap; i--) {
            const char *f = s->names.str[t->py[i].name];
            int64_t id = find_or_add(s, &s->frames, f, s->names.len[t->py[i].name]);
            if (id == -1)
                return lp_tm_oom(s);
            if (id == -2)
                return krow_of(s, row, UINT32_MAX, krow);
            s->seqbuf[n++] = (uint32_t)id;
        }
        if (ranges) { /* loupe's module / phase ranges play the Python frames' part */
            s->m->stack_source |= LP_TRACE_STACK_RANGES;
            for (int i = t->n - 1; i >= 0 && n < cap; i--) {
                if (t->st[i].kind != LP_TRACE_KIND_USER_ANNOTATION)
                    continue;
                uint32_t nm = t->st[i].name;
                int64_t id = find_or_add(s, &s->frames, s->names.str[nm], s->names.len[nm]);
                if (id == -1)
                    return lp_tm_oom(s);
                if (id == -2)
                    return krow_of(s, row, UINT32_MAX, krow);
                s->seqbuf[n++] = (uint32_t)id;
            }
        }
        int oom = 0;
        uint32_t v = seq_id(s, n, &oom);
        if (oom)
            return lp_tm_oom(s);
        sid = v == UINT32_MAX ? UINT32_MAX : v - 1;
    }
    return krow_of(s, row, sid, krow);
}

/* Stack rows in their op's first-seen order; in an op, CPU total descending, then its
 * "no stack" row, then its folded row. */
typedef struct korder {
    uint32_t op;
    int rank; /* 0 a stack, 1 no stack, 2 folded */
    int64_t cpu_total;
    size_t i;
} korder;

static int cmp_korder(const void *a, const void *b)
{
    const korder *x = a, *y = b;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->cpu_total != y->cpu_total)
        return x->cpu_total > y->cpu_total ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

lp_status lp_tm_stacks_finish(tm_state *s)
{
    lp_trace_model *m = s->m;
    m->stack_frames = s->stack_frames;
    if (!m->n_stacks)
        return LP_OK;
    /* every host op gets a "no stack" row for the calls that had none: the op's row less
     * its stack rows (the whole row for an op that never had one) */
    int64_t empty = lp_strtab_intern(&s->stacks, "", 0);
    if (empty < 0)
        return lp_tm_oom(s);
    size_t n_before = m->n_stacks;
    lp_trace_stack_row *sum = calloc(m->n_ops ? m->n_ops : 1, sizeof *sum);
    if (!sum)
        return lp_tm_oom(s);
    for (size_t k = 0; k < n_before; k++) {
        lp_trace_stack_row *d = &sum[s->krow_op[k]], *r = &m->stacks[k];
        d->calls += r->calls;
        d->self_cpu_ns += r->self_cpu_ns;
        d->cpu_total_ns += r->cpu_total_ns;
        d->self_device_ns += r->self_device_ns;
        d->device_total_ns += r->device_total_ns;
    }
    lp_status st = LP_OK;
    for (size_t i = 0; i < m->n_ops && st == LP_OK; i++) {
        const lp_trace_op_row *o = &m->ops[i];
        if (o->is_device || o->calls == 0)
            continue;
        const lp_trace_stack_row *d = &sum[i];
        if (d->calls == o->calls && d->self_cpu_ns == o->self_cpu_ns && d->cpu_total_ns == o->cpu_total_ns &&
            d->self_device_ns == o->self_device_ns && d->device_total_ns == o->device_total_ns)
            continue;
        uint32_t key[2] = {(uint32_t)i, (uint32_t)empty};
        int64_t id = lp_strtab_find(&s->kkeys_stack, (const char *)key, sizeof key);
        if (id < 0 && (id = new_krow(s, (uint32_t)i, (uint32_t)empty)) < 0) {
            st = lp_tm_oom(s);
            break;
        }
        lp_trace_stack_row *r = &m->stacks[id];
        r->calls += o->calls - d->calls;
        r->self_cpu_ns += o->self_cpu_ns - d->self_cpu_ns;
        r->cpu_total_ns += o->cpu_total_ns - d->cpu_total_ns;
        r->self_device_ns += o->self_device_ns - d->self_device_ns;
        r->device_total_ns += o->device_total_ns - d->device_total_ns;
    }
    free(sum);
    if (st != LP_OK)
        return st;
    /* frames as strings, rows in op order */
    size_t pool_n = 0;
    for (size_t k = 0; k < s->kkeys_stack.n; k++) {
        const uint32_t *key = (const uint32_t *)s->kkeys_stack.str[k];
        if (key[1] != UINT32_MAX)
            pool_n += s->stacks.len[key[1]] / sizeof(uint32_t);
    }
    korder *ord = malloc(m->n_stacks * sizeof *ord);
    lp_trace_stack_row *rows = malloc(m->n_stacks * sizeof *rows);
    m->stack_pool = malloc((pool_n ? pool_n : 1) * sizeof *m->stack_pool);
    if (!ord || !rows || !m->stack_pool) {
        free(ord);
        free(rows);
        return lp_tm_oom(s);
    }
    size_t at = 0;
    for (size_t k = 0; k < m->n_stacks; k++) {
        const uint32_t *key = (const uint32_t *)s->kkeys_stack.str[k];
        lp_trace_stack_row *r = &m->stacks[k];
        r->frames = m->stack_pool + at;
        r->n_frames = 0;
        if (key[1] != UINT32_MAX) {
            const uint32_t *seq = (const uint32_t *)s->stacks.str[key[1]];
            size_t n = s->stacks.len[key[1]] / sizeof *seq;
            for (size_t j = 0; j < n; j++)
                m->stack_pool[at++] = s->frames.str[seq[j]];
            r->n_frames = (int32_t)n;
        } else {
            m->stack_folded_calls += r->calls;
        }
        ord[k] = (korder){key[0], key[1] == UINT32_MAX ? 2 : r->n_frames == 0 ? 1 : 0, r->cpu_total_ns, k};
    }
    qsort(ord, m->n_stacks, sizeof *ord, cmp_korder);
    size_t kept = 0;
    for (size_t k = 0; k < m->n_stacks; k++) {
        const lp_trace_stack_row *r = &m->stacks[ord[k].i];
        if (r->calls || r->cpu_total_ns || r->device_total_ns) /* an op torch folded away */
            rows[kept++] = *r;
    }
    free(m->stacks);
    m->stacks = rows;
    m->n_stacks = kept;
    free(ord);
    lp_strtab *keep = malloc(sizeof *keep);
    if (!keep)
        return lp_tm_oom(s);
    *keep = s->frames;
    memset(&s->frames, 0, sizeof s->frames);
    m->priv_frames = keep;
    return LP_OK;
}

void lp_tm_stacks_free(tm_state *s)
{
    lp_strtab_free(&s->frames);
    lp_strtab_free(&s->stacks);
    lp_strtab_free(&s->kkeys_stack);
    free(s->krow_op);
    free(s->op_nstacks);
    free(s->op_fold);
    free(s->seqbuf);
}
