/* The CUDA backend's caching device allocator, as bookkeeping in plain C: the raw
 * allocate / free are function pointers (cudaMalloc / cudaFree in the backend, a host mock
 * in tests/kernels/test_cuda_alloc.c), so the accounting is tested without a GPU.
 *
 * Requests are rounded to a size class (lp_cu_alloc_round: 512 B steps up to 1 MiB, 2 MiB
 * steps above, as PyTorch's caching allocator rounds its segments); a freed block stays
 * reserved in a free list and serves the next request of its class (or one up to a quarter
 * smaller), so a training step's allocations stop reaching cudaMalloc after the first step.
 * A raw allocation that fails empties the cache and tries once more. Blocks are not split.
 *
 * Counters, per lp_mem_category and in total, current and peak:
 *   allocated: bytes of blocks handed out (rounded sizes);
 *   reserved:  bytes held from the raw allocator, handed out or cached. A cached block counts
 *              under the category that last used it and moves when another reuses it, so
 *              reserved[c] >= allocated[c] for every c.
 *
 *   lp_cu_alloc a;
 *   lp_cu_alloc_init(&a, raw_alloc, raw_free, user);
 *   float *x = lp_cu_alloc_get(&a, n * 4, LP_MEM_CATEGORY_ACTIVATION, "ffn.h"); // NULL + lp_err
 *   lp_cu_alloc_put(&a, x);          // back to the cache; LP_STATUS_INVALID_ARG on a foreign pointer
 *   lp_cu_alloc_empty_cache(&a);     // cached blocks back to the raw allocator
 *   lp_cu_alloc_destroy(&a);
 */
#ifndef LP_KERNELS_CUDA_ALLOC_H
#define LP_KERNELS_CUDA_ALLOC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loupe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LP_CU_ALLOC_SMALL_STEP 512u               /* size class step up to LP_CU_ALLOC_SMALL_MAX */
#define LP_CU_ALLOC_SMALL_MAX (1u << 20)          /* 1 MiB */
#define LP_CU_ALLOC_LARGE_STEP ((size_t)2 << 20)  /* 2 MiB */

/* Raw allocation of `bytes` (never 0) into *out: LP_OK, or an error with lp_err set. */
typedef lp_status (*lp_cu_raw_alloc_fn)(void *user, void **out, size_t bytes);
typedef void (*lp_cu_raw_free_fn)(void *user, void *p);

typedef struct lp_cu_alloc_stats {
    int64_t allocated[LP_MEM_CATEGORY__COUNT], allocated_peak[LP_MEM_CATEGORY__COUNT];
    int64_t reserved[LP_MEM_CATEGORY__COUNT], reserved_peak[LP_MEM_CATEGORY__COUNT];
    int64_t allocated_total, allocated_total_peak; /* peak of the total, not the sum of peaks */
    int64_t reserved_total, reserved_total_peak;
    int64_t requested_total;                       /* live bytes as asked, before rounding */
    uint64_t n_allocs, n_frees;                    /* lp_cu_alloc_get / _put that succeeded */
    uint64_t n_raw_allocs, n_raw_frees;            /* calls of the raw functions */
    uint64_t n_cache_hits;                         /* gets served from the cache */
} lp_cu_alloc_stats;

typedef struct lp_cu_block {
    void *ptr;
    size_t size;      /* the size class */
    size_t requested; /* bytes asked for (0 when cached) */
    lp_mem_category cat;
    const char *what; /* the last user's tag (a string that outlives the block) */
    bool used;
} lp_cu_block;

typedef struct lp_cu_alloc {
    lp_cu_raw_alloc_fn raw_alloc;
    lp_cu_raw_free_fn raw_free;
    void *user;
    pthread_mutex_t mu;
    lp_cu_block *blocks; /* every reserved block, used or cached (unordered) */
    int64_t n, cap;
    lp_cu_alloc_stats st;
} lp_cu_alloc;

/* The size class of a request (0 counts as 1 byte: a valid unique pointer). */
size_t lp_cu_alloc_round(size_t bytes);

void lp_cu_alloc_init(lp_cu_alloc *a, lp_cu_raw_alloc_fn raw_alloc, lp_cu_raw_free_fn raw_free, void *user);
/* Returns every block to the raw allocator (used ones too: the caller is done with them). */
void lp_cu_alloc_destroy(lp_cu_alloc *a);
/* A block of at least `bytes`, tagged; NULL and lp_err (LP_STATUS_NO_MEMORY naming what and
 * the size, with the raw allocator's message) when even an emptied cache cannot serve it. */
void *lp_cu_alloc_get(lp_cu_alloc *a, size_t bytes, lp_mem_category cat, const char *what);
/* Returns p to the cache (NULL is a no-op). Errors: LP_STATUS_INVALID_ARG for a pointer
 * this allocator did not hand out, or one already freed (named in the message). */
lp_status lp_cu_alloc_put(lp_cu_alloc *a, void *p);
/* Cached (unused) blocks back to the raw allocator: reserved drops to allocated. */
void lp_cu_alloc_empty_cache(lp_cu_alloc *a);
/* The size of the block p (what `allocated` counts for it: its class, or a cached block up
 * to a quarter larger); 0 when p is not a live block of this allocator. */
size_t lp_cu_alloc_block_size(lp_cu_alloc *a, const void *p);
void lp_cu_alloc_get_stats(lp_cu_alloc *a, lp_cu_alloc_stats *out);
/* Every peak set to the current value (e.g. per step). */
void lp_cu_alloc_reset_peaks(lp_cu_alloc *a);

#ifdef __cplusplus
}
#endif
#endif
