/* The Memory view's events table: the K largest allocations of a trace, kept in a min-heap
 * of K as the [memory] events stream by in time order, with the op open on the thread and
 * the lifetime to the matching free (a later event with the same Addr and device and a
 * negative size: an allocator hands an address out again only after its free, so the
 * first such free after an allocation is its own). Memory: K entries, whatever the trace. */
#include "trace_model_internal.h"

#include <stdlib.h>
#include <string.h>

void lp_trace_device_str(int32_t type, int32_t id, char *buf, size_t cap)
{
    /* c10::DeviceType values */
    static const struct {
        int32_t t;
        const char *n;
    } k[] = {{0, "cpu"}, {1, "cuda"}, {6, "hip"}, {9, "xla"}, {12, "xpu"}, {13, "mps"}, {19, "mtia"}, {20, "privateuseone"}};
    const char *n = NULL;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].t == type)
            n = k[i].n;
    char t[24];
    if (!n) {
        snprintf(t, sizeof t, "type%d", (int)type);
        n = t;
    }
    if (type == 0 || id < 0) /* torch writes Device Id -1 for the CPU */
        snprintf(buf, cap, "%s", n);
    else
        snprintf(buf, cap, "%s:%d", n, (int)id);
}

/* i is kept before j: larger, or as large and earlier. */
static int keeps_before(const tm_state *s, size_t i, size_t j)
{
    if (s->mtop[i].bytes != s->mtop[j].bytes)
        return s->mtop[i].bytes > s->mtop[j].bytes;
    return s->mtop_seq[i] < s->mtop_seq[j];
}

static void swap(tm_state *s, size_t i, size_t j)
{
    lp_trace_mem_event e = s->mtop[i];
    s->mtop[i] = s->mtop[j];
    s->mtop[j] = e;
    int64_t a = s->mtop_addr[i];
    s->mtop_addr[i] = s->mtop_addr[j];
    s->mtop_addr[j] = a;
    uint64_t q = s->mtop_seq[i];
    s->mtop_seq[i] = s->mtop_seq[j];
    s->mtop_seq[j] = q;
}

/* The heap's root is the entry kept last (the first to go). */
static void sift_down(tm_state *s, size_t i)
{
    for (size_t n = s->n_mtop;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && keeps_before(s, m, l))
            m = l;
        if (r < n && keeps_before(s, m, r))
            m = r;
        if (m == i)
            return;
        swap(s, i, m);
        i = m;
    }
}

static void sift_up(tm_state *s, size_t i)
{
    while (i) {
        size_t p = (i - 1) / 2;
        if (!keeps_before(s, p, i))
            return;
        swap(s, i, p);
        i = p;
    }
}

lp_status lp_tm_mem_event(tm_state *s, const tev *e, const char *op)
{
    lp_trace_model *m = s->m;
    int64_t addr = e->corr;
    int32_t type = e->memdev, id = (int32_t)e->ext;
    if (addr >= 0)
        m->mem_has_addr = 1;
    if (e->a < 0) {
        m->n_frees++;
        m->free_total_bytes -= e->a;
        if (addr >= 0)
            for (size_t i = 0; i < s->n_mtop; i++)
                if (s->mtop_addr[i] == addr && s->mtop[i].lifetime_ns == -1 && s->mtop[i].device_type == type &&
                    s->mtop[i].device_id == id && s->mtop[i].ts_ns <= e->ts) {
                    s->mtop[i].lifetime_ns = e->ts - s->mtop[i].ts_ns;
                    break;
                }
        return LP_OK;
    }
    if (e->a == 0 || !s->k_mtop)
        return LP_OK;
    m->n_allocs++;
    m->alloc_total_bytes += e->a;
    if (!s->mtop) {
        s->mtop = calloc(s->k_mtop, sizeof *s->mtop);
        s->mtop_addr = calloc(s->k_mtop, sizeof *s->mtop_addr);
        s->mtop_seq = calloc(s->k_mtop, sizeof *s->mtop_seq);
        if (!s->mtop || !s->mtop_addr || !s->mtop_seq)
            return lp_tm_oom(s);
    }
    lp_trace_mem_event ev = {e->ts, e->a, e->b, addr >= 0 ? -1 : -2, type, id, op};
    size_t at;
    if (s->n_mtop < s->k_mtop) {
        at = s->n_mtop++;
    } else {
        if (s->mtop[0].bytes >= e->a) /* as large arrived earlier: it stays */
            return LP_OK;
        at = 0;
    }
    s->mtop[at] = ev;
    s->mtop_addr[at] = addr;
    s->mtop_seq[at] = e->seq;
    if (at == 0 && s->n_mtop == s->k_mtop)
        sift_down(s, 0);
    else
        sift_up(s, at);
    return LP_OK;
}

static int cmp_top(const void *a, const void *b)
{
    const lp_trace_mem_event *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

lp_status lp_tm_mem_finish(tm_state *s)
{
    if (s->n_mtop > 1) /* a trace with no allocation has no array (NULL: qsort's UB) */
        qsort(s->mtop, s->n_mtop, sizeof *s->mtop, cmp_top);
    s->m->mem_top = s->mtop;
    s->m->n_mem_top = s->n_mtop;
    s->mtop = NULL;
    s->n_mtop = 0;
    return LP_OK;
}

void lp_tm_mem_free(tm_state *s)
{
    free(s->mtop);
    free(s->mtop_addr);
    free(s->mtop_seq);
}
