/* The caching device allocator's bookkeeping (cuda_alloc.h). Plain C with no CUDA headers:
 * compiled into every build, so its tests run in CI and under the sanitizers. Blocks sit in
 * one unordered array searched linearly: a training step holds hundreds of buffers, not
 * millions, and a scan of them costs less than one kernel launch. */
#include <stdlib.h>
#include <string.h>

#include "cuda_alloc.h"

size_t lp_cu_alloc_round(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (bytes <= LP_CU_ALLOC_SMALL_MAX)
        return (bytes + LP_CU_ALLOC_SMALL_STEP - 1) / LP_CU_ALLOC_SMALL_STEP * LP_CU_ALLOC_SMALL_STEP;
    if (bytes > SIZE_MAX - LP_CU_ALLOC_LARGE_STEP)
        return 0; /* no class: the get reports it */
    return (bytes + LP_CU_ALLOC_LARGE_STEP - 1) / LP_CU_ALLOC_LARGE_STEP * LP_CU_ALLOC_LARGE_STEP;
}

void lp_cu_alloc_init(lp_cu_alloc *a, lp_cu_raw_alloc_fn raw_alloc, lp_cu_raw_free_fn raw_free, void *user)
{
    memset(a, 0, sizeof *a);
    a->raw_alloc = raw_alloc;
    a->raw_free = raw_free;
    a->user = user;
    pthread_mutex_init(&a->mu, NULL);
}

static lp_mem_category cat_ok(lp_mem_category c)
{
    return (unsigned)c < LP_MEM_CATEGORY__COUNT ? c : LP_MEM_CATEGORY_OTHER;
}

static void peak(int64_t *peak, int64_t v)
{
    if (v > *peak)
        *peak = v;
}

static void reserve_add(lp_cu_alloc_stats *s, lp_mem_category c, int64_t bytes)
{
    s->reserved[c] += bytes;
    s->reserved_total += bytes;
    peak(&s->reserved_peak[c], s->reserved[c]);
    peak(&s->reserved_total_peak, s->reserved_total);
}

static void allocated_add(lp_cu_alloc_stats *s, lp_mem_category c, int64_t bytes)
{
    s->allocated[c] += bytes;
    s->allocated_total += bytes;
    peak(&s->allocated_peak[c], s->allocated[c]);
    peak(&s->allocated_total_peak, s->allocated_total);
}

/* Raw-frees every cached block. Called with the lock held. */
static void empty_locked(lp_cu_alloc *a)
{
    for (int64_t i = 0; i < a->n;) {
        lp_cu_block *b = &a->blocks[i];
        if (b->used) {
            i++;
            continue;
        }
        a->raw_free(a->user, b->ptr);
        a->st.n_raw_frees++;
        reserve_add(&a->st, b->cat, -(int64_t)b->size);
        a->blocks[i] = a->blocks[--a->n];
    }
}

/* The best cached block for a class: the smallest of size in [size, size + size/4]. */
static lp_cu_block *find_cached(lp_cu_alloc *a, size_t size)
{
    lp_cu_block *best = NULL;
    for (int64_t i = 0; i < a->n; i++) {
        lp_cu_block *b = &a->blocks[i];
        if (!b->used && b->size >= size && b->size - size <= size / 4 && (!best || b->size < best->size))
            best = b;
    }
    return best;
}

void *lp_cu_alloc_get(lp_cu_alloc *a, size_t bytes, lp_mem_category cat, const char *what)
{
    cat = cat_ok(cat);
    size_t size = lp_cu_alloc_round(bytes);
    if (size == 0) {
        lp_err(LP_STATUS_NO_MEMORY, "cuda allocator: %zu bytes for %s exceed any size class", bytes,
               what ? what : "?");
        return NULL;
    }
    pthread_mutex_lock(&a->mu);
    lp_cu_block *b = find_cached(a, size);
    if (b) {
        a->st.n_cache_hits++;
        if (b->cat != cat) { /* the cached bytes move to the new user's category */
            reserve_add(&a->st, b->cat, -(int64_t)b->size);
            reserve_add(&a->st, cat, (int64_t)b->size);
        }
    } else {
        if (a->n == a->cap) {
            int64_t cap = a->cap ? 2 * a->cap : 64;
            lp_cu_block *nb = realloc(a->blocks, (size_t)cap * sizeof *nb);
            if (!nb) {
                pthread_mutex_unlock(&a->mu);
                lp_err(LP_STATUS_NO_MEMORY, "cuda allocator: no host memory for its block list");
                return NULL;
            }
            a->blocks = nb;
            a->cap = cap;
        }
        void *p = NULL;
        lp_status st = a->raw_alloc(a->user, &p, size);
        a->st.n_raw_allocs++;
        if (st != LP_OK) { /* the cache may hold what the device lacks: give it back, retry */
            empty_locked(a);
            st = a->raw_alloc(a->user, &p, size);
            a->st.n_raw_allocs++;
        }
        if (st != LP_OK || !p) {
            pthread_mutex_unlock(&a->mu);
            lp_err_wrap(LP_STATUS_NO_MEMORY, "cuda allocator: %zu bytes (class %zu) for %s", bytes, size,
                        what ? what : "?");
            return NULL;
        }
        b = &a->blocks[a->n++];
        *b = (lp_cu_block){.ptr = p, .size = size, .cat = cat};
        reserve_add(&a->st, cat, (int64_t)size);
    }
    b->used = true;
    b->cat = cat;
    b->what = what;
    b->requested = bytes;
    allocated_add(&a->st, cat, (int64_t)b->size);
    a->st.requested_total += (int64_t)bytes;
    a->st.n_allocs++;
    void *p = b->ptr;
    pthread_mutex_unlock(&a->mu);
    return p;
}

lp_status lp_cu_alloc_put(lp_cu_alloc *a, void *p)
{
    if (!p)
        return LP_OK;
    pthread_mutex_lock(&a->mu);
    for (int64_t i = 0; i < a->n; i++) {
        lp_cu_block *b = &a->blocks[i];
        if (b->ptr != p)
            continue;
        if (!b->used) {
            pthread_mutex_unlock(&a->mu);
            return lp_err(LP_STATUS_INVALID_ARG, "cuda allocator: double free of %p (%zu bytes, last %s)", p, b->size,
                          b->what ? b->what : "?");
        }
        b->used = false;
        allocated_add(&a->st, b->cat, -(int64_t)b->size);
        a->st.requested_total -= (int64_t)b->requested;
        b->requested = 0;
        a->st.n_frees++;
        pthread_mutex_unlock(&a->mu);
        return LP_OK;
    }
    pthread_mutex_unlock(&a->mu);
    return lp_err(LP_STATUS_INVALID_ARG, "cuda allocator: free of %p, which it did not allocate", p);
}

void lp_cu_alloc_empty_cache(lp_cu_alloc *a)
{
    pthread_mutex_lock(&a->mu);
    empty_locked(a);
    pthread_mutex_unlock(&a->mu);
}

size_t lp_cu_alloc_block_size(lp_cu_alloc *a, const void *p)
{
    size_t size = 0;
    pthread_mutex_lock(&a->mu);
    for (int64_t i = 0; i < a->n; i++)
        if (a->blocks[i].ptr == p && a->blocks[i].used)
            size = a->blocks[i].size;
    pthread_mutex_unlock(&a->mu);
    return size;
}

void lp_cu_alloc_get_stats(lp_cu_alloc *a, lp_cu_alloc_stats *out)
{
    pthread_mutex_lock(&a->mu);
    *out = a->st;
    pthread_mutex_unlock(&a->mu);
}

void lp_cu_alloc_reset_peaks(lp_cu_alloc *a)
{
    pthread_mutex_lock(&a->mu);
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
        a->st.allocated_peak[c] = a->st.allocated[c];
        a->st.reserved_peak[c] = a->st.reserved[c];
    }
    a->st.allocated_total_peak = a->st.allocated_total;
    a->st.reserved_total_peak = a->st.reserved_total;
    pthread_mutex_unlock(&a->mu);
}

void lp_cu_alloc_destroy(lp_cu_alloc *a)
{
    for (int64_t i = 0; i < a->n; i++) {
        a->raw_free(a->user, a->blocks[i].ptr);
        a->st.n_raw_frees++;
    }
    free(a->blocks);
    a->blocks = NULL;
    a->n = a->cap = 0;
    pthread_mutex_destroy(&a->mu);
}
