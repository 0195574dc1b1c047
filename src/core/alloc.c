/* The tagged allocator: every buffer carries its category and name in a 64-byte header
 * in front of the data, is counted per category here and reported to the profiler.
 * A torture switch fails the Nth allocation so tests can walk every error path. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "loupe/core.h"

#define HDR_MAGIC 0x6c6f7570656d656dull /* "loupemem" */

/* Sits immediately before the user pointer; 64 bytes so the data stays aligned. */
typedef struct alloc_hdr {
    uint64_t magic;
    uint64_t bytes;
    const char *name;
    uint32_t category;
    uint32_t pad_[9];
} alloc_hdr;
_Static_assert(sizeof(alloc_hdr) == LP_ALIGN, "header must keep data 64-byte aligned");

static _Atomic uint64_t live[LP_MEM_CATEGORY__COUNT], peak[LP_MEM_CATEGORY__COUNT];
static _Atomic uint64_t live_total, peak_total, n_allocs, n_frees;

static const char *const cat_names[LP_MEM_CATEGORY__COUNT] = {
    [LP_MEM_CATEGORY_PARAMETER] = "parameter",
    [LP_MEM_CATEGORY_GRADIENT] = "gradient",
    [LP_MEM_CATEGORY_OPTIMIZER_STATE] = "optimizer_state",
    [LP_MEM_CATEGORY_ACTIVATION] = "activation",
    [LP_MEM_CATEGORY_TEMPORARY] = "temporary",
    [LP_MEM_CATEGORY_INPUT] = "input",
    [LP_MEM_CATEGORY_QUANTIZED_WEIGHT] = "quantized_weight",
    [LP_MEM_CATEGORY_OTHER] = "other",
    [LP_MEM_CATEGORY_KV_CACHE] = "kv_cache",
};


static void raise_peak(_Atomic uint64_t *pk, uint64_t now)
{
    uint64_t old = atomic_load(pk);
    while (now > old && !atomic_compare_exchange_weak(pk, &old, now)) {
    }
}

uint64_t lp_alloc_fail_at(uint64_t nth)
{
    return lp_alloc_fail_set(nth); /* one counter for lp_alloc and base's lp_malloc family */
}

void *lp_alloc(size_t bytes, lp_mem_category cat, const char *name)
{
    if ((unsigned)cat >= LP_MEM_CATEGORY__COUNT)
        cat = LP_MEM_CATEGORY_OTHER;
    if (!name)
        name = "(unnamed)";
    uint64_t count = lp_alloc_tick();
    if (count) {
        lp_err(LP_STATUS_NO_MEMORY, "cannot allocate %zu bytes for %s '%s' (debug: allocation %llu set to fail)",
               bytes, cat_names[cat], name, (unsigned long long)count);
        return NULL;
    }
    size_t body = (bytes + LP_ALIGN - 1) & ~(size_t)(LP_ALIGN - 1);
    if (body < bytes || body > SIZE_MAX - sizeof(alloc_hdr)) {
        lp_err(LP_STATUS_NO_MEMORY, "cannot allocate %zu bytes for %s '%s': size overflows", bytes, cat_names[cat],
               name);
        return NULL;
    }
    /* a large weight buffer on 2 MiB pages (hugepages.c): the header starts a 2 MiB page, and
     * the whole 2 MiB pages from there are advised (a partial last one stays on 4 KiB pages:
     * no physical memory beyond the buffer's) */
    const size_t total = sizeof(alloc_hdr) + body;
    const bool huge = lp_core__huge_wanted(cat, total);
    alloc_hdr *h = NULL;
    if (huge) {
        void *m = NULL;
        if (!posix_memalign(&m, LP_HUGE_PAGE_BYTES, total)) {
            h = m;
            lp_core__huge_advise(h, total & ~(LP_HUGE_PAGE_BYTES - 1));
        }
    } else {
        h = aligned_alloc(LP_ALIGN, total);
    }
    if (!h) {
        lp_err(LP_STATUS_NO_MEMORY, "cannot allocate %zu bytes for %s '%s'", bytes, cat_names[cat], name);
        return NULL;
    }
    memset(h, 0, sizeof *h);
    h->magic = HDR_MAGIC;
    h->bytes = bytes;
    h->name = name;
    h->category = (uint32_t)cat;
    void *p = h + 1;
    memset(p, 0, body);
    raise_peak(&peak[cat], atomic_fetch_add(&live[cat], bytes) + bytes);
    raise_peak(&peak_total, atomic_fetch_add(&live_total, bytes) + bytes);
    atomic_fetch_add(&n_allocs, 1);
    lp_prof_mem_alloc(p, bytes, cat);
    return p;
}

static alloc_hdr *hdr_of(const void *p)
{
    alloc_hdr *h = (alloc_hdr *)p - 1;
    /* A pointer that did not come from lp_alloc (or a double free) is a program bug. */
    if (h->magic != HDR_MAGIC) {
        fprintf(stderr, "loupe: lp_free/lp_alloc_*: %p was not allocated by lp_alloc (or was freed)\n", p);
        abort();
    }
    return h;
}

void lp_free(void *p)
{
    if (!p)
        return;
    alloc_hdr *h = hdr_of(p);
    lp_mem_category cat = (lp_mem_category)h->category;
    lp_prof_mem_free(p, h->bytes, cat);
    atomic_fetch_sub(&live[cat], h->bytes);
    atomic_fetch_sub(&live_total, h->bytes);
    atomic_fetch_add(&n_frees, 1);
    h->magic = 0;
    free(h);
}

size_t lp_alloc_size(const void *p) { return (size_t)hdr_of(p)->bytes; }
lp_mem_category lp_alloc_category(const void *p) { return (lp_mem_category)hdr_of(p)->category; }
const char *lp_alloc_name(const void *p) { return hdr_of(p)->name; }

void lp_alloc_stats_get(lp_alloc_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
        out->live[c] = atomic_load(&live[c]);
        out->peak[c] = atomic_load(&peak[c]);
    }
    out->live_total = atomic_load(&live_total);
    out->peak_total = atomic_load(&peak_total);
    out->n_allocs = atomic_load(&n_allocs);
    out->n_frees = atomic_load(&n_frees);
}

void lp_alloc_stats_reset_peak(void)
{
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
        atomic_store(&peak[c], atomic_load(&live[c]));
    atomic_store(&peak_total, atomic_load(&live_total));
}

/* ---- arena ---- */

lp_status lp_arena_init(lp_arena *a, size_t cap, lp_mem_category cat, const char *name)
{
    memset(a, 0, sizeof *a);
    a->base = lp_alloc(cap, cat, name);
    if (!a->base)
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "arena '%s'", name ? name : "(unnamed)");
    a->cap = cap;
    a->category = cat;
    a->name = name ? name : "(unnamed)";
    return LP_OK;
}

void *lp_arena_alloc(lp_arena *a, size_t bytes)
{
    size_t start = (a->used + LP_ALIGN - 1) & ~(size_t)(LP_ALIGN - 1);
    if (start > a->cap || bytes > a->cap - start) {
        lp_err(LP_STATUS_NO_MEMORY, "arena '%s' full: %zu of %zu bytes used, %zu more requested", a->name, a->used,
               a->cap, bytes);
        return NULL;
    }
    a->used = start + bytes;
    if (a->used > a->high_water)
        a->high_water = a->used;
    return a->base + start;
}

size_t lp_arena_mark(const lp_arena *a) { return a->used; }

void lp_arena_release(lp_arena *a, size_t mark)
{
    if (mark <= a->used)
        a->used = mark;
}

void lp_arena_reset(lp_arena *a) { a->used = 0; }

void lp_arena_free(lp_arena *a)
{
    lp_free(a->base);
    memset(a, 0, sizeof *a);
}
