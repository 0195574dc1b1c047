/* The CUDA caching allocator's bookkeeping (src/kernels/cuda/cuda_alloc.c) over a host mock
 * of cudaMalloc / cudaFree with a capacity: size classes, reuse from the cache, counters per
 * category (allocated and reserved, current and peak) checked exactly against a shadow
 * model, reserved >= allocated throughout, empty_cache, retry after an out-of-memory,
 * and double / foreign frees reported. Runs without a GPU (and under the sanitizers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda/cuda_alloc.h"

typedef struct mock {
    size_t capacity, live_bytes;
    int live, raw_allocs, raw_frees;
    void *ptrs[4096];
    size_t sizes[4096];
} mock;

static lp_status mock_alloc(void *user, void **out, size_t bytes)
{
    mock *m = user;
    if (m->live_bytes + bytes > m->capacity)
        return lp_err(LP_STATUS_NO_MEMORY, "mock device: %zu bytes over capacity", bytes);
    *out = malloc(bytes);
    assert_non_null(*out);
    m->ptrs[m->live] = *out;
    m->sizes[m->live++] = bytes;
    m->live_bytes += bytes;
    m->raw_allocs++;
    return LP_OK;
}

static void mock_free(void *user, void *p)
{
    mock *m = user;
    for (int i = 0; i < m->live; i++)
        if (m->ptrs[i] == p) {
            m->live_bytes -= m->sizes[i];
            m->ptrs[i] = m->ptrs[--m->live];
            m->sizes[i] = m->sizes[m->live];
            m->raw_frees++;
            free(p);
            return;
        }
    fail_msg("mock device: free of a pointer it did not hand out");
}

static void test_round(void **state)
{
    (void)state;
    assert_int_equal(lp_cu_alloc_round(0), 512);
    assert_int_equal(lp_cu_alloc_round(1), 512);
    assert_int_equal(lp_cu_alloc_round(512), 512);
    assert_int_equal(lp_cu_alloc_round(513), 1024);
    assert_int_equal(lp_cu_alloc_round(1 << 20), 1 << 20);
    assert_int_equal(lp_cu_alloc_round((1 << 20) + 1), 2 << 20);
    assert_int_equal(lp_cu_alloc_round((3 << 20) + 5), 4 << 20);
    assert_int_equal(lp_cu_alloc_round(SIZE_MAX - 5), 0);
}

static void test_reuse_and_categories(void **state)
{
    (void)state;
    mock m = {.capacity = 1 << 30};
    lp_cu_alloc a;
    lp_cu_alloc_init(&a, mock_alloc, mock_free, &m);
    lp_cu_alloc_stats s;
    const int ACT = LP_MEM_CATEGORY_ACTIVATION, GRAD = LP_MEM_CATEGORY_GRADIENT;

    void *p = lp_cu_alloc_get(&a, 1000, ACT, "h");
    assert_non_null(p);
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.allocated[ACT], 1024);
    assert_int_equal(s.reserved[ACT], 1024);
    assert_int_equal(s.requested_total, 1000);
    assert_int_equal(m.raw_allocs, 1);

    assert_int_equal(lp_cu_alloc_put(&a, p), LP_OK);
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.allocated[ACT], 0);
    assert_int_equal(s.reserved[ACT], 1024); /* cached, still held */
    assert_int_equal(s.requested_total, 0);

    void *q = lp_cu_alloc_get(&a, 900, ACT, "h2"); /* same class: the cached block */
    assert_ptr_equal(q, p);
    assert_int_equal(m.raw_allocs, 1);
    assert_int_equal(lp_cu_alloc_put(&a, q), LP_OK);

    void *g = lp_cu_alloc_get(&a, 1024, GRAD, "dh"); /* another category takes the cached bytes */
    assert_ptr_equal(g, p);
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.reserved[ACT], 0);
    assert_int_equal(s.reserved[GRAD], 1024);
    assert_int_equal(s.allocated[GRAD], 1024);
    assert_int_equal(s.reserved_peak[ACT], 1024);
    assert_int_equal(s.n_cache_hits, 2);

    /* a cached block more than a quarter too big is not used: 4096 for a 512-byte request */
    void *big = lp_cu_alloc_get(&a, 4096, ACT, "big");
    assert_int_equal(lp_cu_alloc_put(&a, big), LP_OK);
    void *small = lp_cu_alloc_get(&a, 100, ACT, "small");
    assert_ptr_not_equal(small, big);
    assert_int_equal(m.raw_allocs, 3);
    /* ... but a 4000-byte one is (class 4096) */
    void *near = lp_cu_alloc_get(&a, 4000, ACT, "near");
    assert_ptr_equal(near, big);

    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.allocated_total, 1024 + 512 + 4096);
    assert_int_equal(s.reserved_total, (int64_t)m.live_bytes);
    lp_cu_alloc_destroy(&a);
    assert_int_equal(m.live, 0);
}

static void test_peaks_and_empty_cache(void **state)
{
    (void)state;
    mock m = {.capacity = 1 << 30};
    lp_cu_alloc a;
    lp_cu_alloc_init(&a, mock_alloc, mock_free, &m);
    lp_cu_alloc_stats s;
    const int P = LP_MEM_CATEGORY_PARAMETER, T = LP_MEM_CATEGORY_TEMPORARY;
    void *w = lp_cu_alloc_get(&a, 3 << 20, P, "w");          /* class 4 MiB */
    void *t1 = lp_cu_alloc_get(&a, 100 << 10, T, "t1");      /* 100 KiB */
    void *t2 = lp_cu_alloc_get(&a, (1 << 20) + 1, T, "t2");  /* class 2 MiB */
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.allocated[P], 4 << 20);
    assert_int_equal(s.allocated[T], (100 << 10) + (2 << 20));
    assert_int_equal(s.allocated_total_peak, (4 << 20) + (100 << 10) + (2 << 20));
    assert_int_equal(lp_cu_alloc_put(&a, t1), LP_OK);
    assert_int_equal(lp_cu_alloc_put(&a, t2), LP_OK);
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.allocated[T], 0);
    assert_int_equal(s.allocated_peak[T], (100 << 10) + (2 << 20));
    assert_int_equal(s.reserved[T], (100 << 10) + (2 << 20));
    assert_int_equal(s.allocated_total_peak, (4 << 20) + (100 << 10) + (2 << 20));

    lp_cu_alloc_empty_cache(&a); /* reserved returns to allocated */
    lp_cu_alloc_get_stats(&a, &s);
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
        assert_int_equal(s.reserved[c], s.allocated[c]);
    assert_int_equal(s.reserved_total, 4 << 20);
    assert_int_equal(m.live_bytes, 4 << 20);
    assert_int_equal(s.n_raw_frees, 2);
    assert_int_equal(s.reserved_total_peak, (4 << 20) + (100 << 10) + (2 << 20));

    lp_cu_alloc_reset_peaks(&a);
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.allocated_peak[T], 0);
    assert_int_equal(s.reserved_total_peak, 4 << 20);
    assert_int_equal(lp_cu_alloc_put(&a, w), LP_OK);
    lp_cu_alloc_destroy(&a);
    assert_int_equal(m.live, 0);
}

static void test_bad_frees(void **state)
{
    (void)state;
    mock m = {.capacity = 1 << 30};
    lp_cu_alloc a;
    lp_cu_alloc_init(&a, mock_alloc, mock_free, &m);
    void *p = lp_cu_alloc_get(&a, 64, LP_MEM_CATEGORY_OTHER, "x");
    assert_int_equal(lp_cu_alloc_block_size(&a, p), 512);
    assert_int_equal(lp_cu_alloc_put(&a, p), LP_OK);
    assert_int_equal(lp_cu_alloc_block_size(&a, p), 0);
    lp_cu_alloc_stats before, after;
    lp_cu_alloc_get_stats(&a, &before);
    assert_int_equal(lp_cu_alloc_put(&a, p), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "double free"));
    int local;
    assert_int_equal(lp_cu_alloc_put(&a, &local), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "did not allocate"));
    assert_int_equal(lp_cu_alloc_put(&a, NULL), LP_OK);
    lp_cu_alloc_get_stats(&a, &after);
    assert_memory_equal(&before, &after, sizeof before); /* nothing counted */
    lp_cu_alloc_destroy(&a);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    mock m = {.capacity = 8 << 20}; /* an 8 MiB device */
    lp_cu_alloc a;
    lp_cu_alloc_init(&a, mock_alloc, mock_free, &m);
    void *x = lp_cu_alloc_get(&a, 6 << 20, LP_MEM_CATEGORY_ACTIVATION, "x");
    assert_non_null(x);
    assert_int_equal(lp_cu_alloc_put(&a, x), LP_OK); /* cached: 6 MiB still held */
    /* 4 MiB does not fit beside the cached 6 and the cached block is too big for its class:
     * the allocator empties its cache and retries */
    void *y = lp_cu_alloc_get(&a, 4 << 20, LP_MEM_CATEGORY_ACTIVATION, "y");
    assert_non_null(y);
    lp_cu_alloc_stats s;
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.reserved_total, 4 << 20);
    assert_int_equal(m.live_bytes, 4 << 20);
    /* and one that cannot fit at all fails with the sizes and the raw error named */
    lp_err_clear();
    assert_null(lp_cu_alloc_get(&a, 6 << 20, LP_MEM_CATEGORY_ACTIVATION, "z"));
    assert_non_null(strstr(lp_err_msg(), "for z"));
    assert_non_null(strstr(lp_err_msg(), "over capacity"));
    lp_cu_alloc_get_stats(&a, &s);
    assert_int_equal(s.allocated_total, 4 << 20);
    assert_int_equal(s.reserved_total, (int64_t)m.live_bytes);
    lp_cu_alloc_destroy(&a);
    assert_int_equal(m.live, 0);
}

/* Random gets and puts over every category against a shadow model of the exact counters. */
static void test_random_against_model(void **state)
{
    (void)state;
    mock m = {.capacity = (size_t)1 << 34};
    lp_cu_alloc a;
    lp_cu_alloc_init(&a, mock_alloc, mock_free, &m);
    enum { SLOTS = 200 };
    void *ptr[SLOTS] = {0};
    int64_t sz[SLOTS] = {0};
    int cat[SLOTS] = {0};
    int64_t alloc_model[LP_MEM_CATEGORY__COUNT] = {0}, peak_model[LP_MEM_CATEGORY__COUNT] = {0};
    int64_t total = 0, total_peak = 0;
    uint32_t seed = 12345;
    for (int it = 0; it < 20000; it++) {
        seed = seed * 1664525u + 1013904223u;
        int k = (int)((seed >> 8) % SLOTS);
        if (ptr[k]) {
            assert_int_equal(lp_cu_alloc_put(&a, ptr[k]), LP_OK);
            alloc_model[cat[k]] -= sz[k];
            total -= sz[k];
            ptr[k] = NULL;
        } else {
            seed = seed * 1664525u + 1013904223u;
            size_t bytes = (seed >> 8) % 4 == 0 ? (seed >> 12) % (5u << 20) : (seed >> 12) % 20000;
            cat[k] = (int)((seed >> 4) % LP_MEM_CATEGORY__COUNT);
            ptr[k] = lp_cu_alloc_get(&a, bytes, (lp_mem_category)cat[k], "r");
            assert_non_null(ptr[k]);
            /* its class, or a cached block at most a quarter bigger */
            size_t cls = lp_cu_alloc_round(bytes), got = lp_cu_alloc_block_size(&a, ptr[k]);
            assert_true(got >= cls && got <= cls + cls / 4);
            sz[k] = (int64_t)got;
            alloc_model[cat[k]] += sz[k];
            total += sz[k];
            if (alloc_model[cat[k]] > peak_model[cat[k]])
                peak_model[cat[k]] = alloc_model[cat[k]];
            if (total > total_peak)
                total_peak = total;
        }
        if (it % 5000 == 4999)
            lp_cu_alloc_empty_cache(&a);
        lp_cu_alloc_stats s;
        lp_cu_alloc_get_stats(&a, &s);
        int64_t rsum = 0;
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
            assert_int_equal(s.allocated[c], alloc_model[c]);
            assert_int_equal(s.allocated_peak[c], peak_model[c]);
            assert_true(s.reserved[c] >= s.allocated[c]);
            assert_true(s.reserved_peak[c] >= s.reserved[c]);
            rsum += s.reserved[c];
        }
        assert_int_equal(s.allocated_total, total);
        assert_int_equal(s.allocated_total_peak, total_peak);
        assert_int_equal(rsum, s.reserved_total);
        assert_int_equal(s.reserved_total, (int64_t)m.live_bytes);
    }
    lp_cu_alloc_destroy(&a);
    assert_int_equal(m.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round),           cmocka_unit_test(test_reuse_and_categories),
        cmocka_unit_test(test_peaks_and_empty_cache), cmocka_unit_test(test_bad_frees),
        cmocka_unit_test(test_out_of_memory),   cmocka_unit_test(test_random_against_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
