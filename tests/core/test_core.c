/* core: dtype conversions (against the CPU's F16C instructions and known bit patterns),
 * the tagged allocator (alignment, accounting by category, fail-Nth), the arena,
 * tensors, the thread pool, and Philox (known-answer vectors, thread independence). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "../../src/core/core_internal.h"
#include "loupe/core.h"

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_dtype_names(void **state)
{
    (void)state;
    lp_dtype dt;
    assert_int_equal(lp_dtype_parse("bfloat16", &dt), LP_OK);
    assert_int_equal(dt, LP_DTYPE_BF16);
    assert_int_equal(lp_dtype_parse("nf4", &dt), LP_OK);
    assert_int_equal(dt, LP_DTYPE_NF4);
    assert_int_equal(lp_dtype_parse("float64", &dt), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "float64"));
    assert_string_equal(lp_dtype_name(LP_DTYPE_F16), "f16");
    assert_int_equal(lp_dtype_nbytes(LP_DTYPE_NF4, 5), 3);
    assert_int_equal(lp_dtype_nbytes(LP_DTYPE_F32, 5), 20);
    assert_int_equal(lp_dtype_nbytes(LP_DTYPE_BF16, 0), 0);
}

static void test_bf16(void **state)
{
    (void)state;
    assert_int_equal(lp_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(lp_f32_to_bf16(-2.0f), 0xc000);
    /* ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 */
    assert_int_equal(lp_f32_to_bf16(u2f(0x3f808000u)), 0x3f80);
    assert_int_equal(lp_f32_to_bf16(u2f(0x3f818000u)), 0x3f82); /* odd below: rounds up */
    assert_int_equal(lp_f32_to_bf16(u2f(0x3f808001u)), 0x3f81);
    assert_int_equal(lp_f32_to_bf16(INFINITY), 0x7f80);
    assert_true(isnan(lp_bf16_to_f32(lp_f32_to_bf16(NAN))));
    assert_int_equal(lp_f32_to_bf16(u2f(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    /* every non-NaN bf16 survives the round trip */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lp_bf16_to_f32((uint16_t)h);
        if (!isnan(f))
            assert_int_equal(lp_f32_to_bf16(f), h);
    }
    float src[3] = {1.0f, 0.5f, -3.0f}, back[3];
    uint16_t mid[3];
    lp_f32_to_bf16_n(mid, src, 3);
    lp_bf16_to_f32_n(back, mid, 3);
    assert_memory_equal(src, back, sizeof src);
}

static void test_f16(void **state)
{
    (void)state;
    assert_int_equal(lp_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(lp_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(lp_f32_to_f16(65520.0f), 0x7c00);      /* rounds to inf */
    assert_int_equal(lp_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(lp_f32_to_f16(ldexpf(1.0f, -24)), 0x0001); /* smallest subnormal */
    assert_int_equal(lp_f32_to_f16(ldexpf(1.0f, -25)), 0x0000); /* tie -> even (0) */
    assert_int_equal(lp_f32_to_f16(-0.0f), 0x8000);
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lp_f16_to_f32((uint16_t)h);
        if (!isnan(f))
            assert_int_equal(lp_f32_to_f16(f), h);
    }
#if defined(__F16C__)
    /* Against the hardware conversion on many bit patterns (round to nearest even). */
    uint32_t x = 12345;
    for (int i = 0; i < 2000000; i++) {
        x = x * 1664525u + 1013904223u;
        float f = u2f(x);
        if (isnan(f))
            continue;
        uint16_t hw = (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
        if (lp_f32_to_f16(f) != hw)
            fail_msg("f32 %a (0x%08x): ours 0x%04x, F16C 0x%04x", (double)f, x, lp_f32_to_f16(f), hw);
        if (lp_f16_to_f32(hw) != _cvtsh_ss(hw))
            fail_msg("f16 0x%04x widens differently", hw);
    }
#endif
}

static void test_alloc_accounting(void **state)
{
    (void)state;
    lp_alloc_stats s0, s1, s2;
    lp_mem_stats p0, p1, p2;
    lp_alloc_stats_get(&s0);
    lp_prof_mem_stats(&p0);
    uint8_t *a = lp_alloc(100, LP_MEM_CATEGORY_PARAMETER, "w");
    float *b = lp_alloc(4096, LP_MEM_CATEGORY_GRADIENT, "dw");
    void *z = lp_alloc(0, LP_MEM_CATEGORY_TEMPORARY, "empty");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(z);
    assert_int_equal((uintptr_t)a % 64, 0);
    assert_int_equal((uintptr_t)b % 64, 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(a[i], 0);
    assert_int_equal(lp_alloc_size(a), 100);
    assert_int_equal(lp_alloc_category(b), LP_MEM_CATEGORY_GRADIENT);
    assert_string_equal(lp_alloc_name(b), "dw");
    lp_alloc_stats_get(&s1);
    lp_prof_mem_stats(&p1);
    /* the profiler saw the same bytes in the same categories */
    assert_int_equal(p1.current[LP_MEM_CATEGORY_PARAMETER] - p0.current[LP_MEM_CATEGORY_PARAMETER], 100);
    assert_int_equal(p1.current[LP_MEM_CATEGORY_GRADIENT] - p0.current[LP_MEM_CATEGORY_GRADIENT], 4096);
    assert_int_equal(p1.current[LP_MEM_CATEGORY_TEMPORARY] - p0.current[LP_MEM_CATEGORY_TEMPORARY], 0);
    assert_true(p1.peak[LP_MEM_CATEGORY_GRADIENT] >= 4096);
    assert_int_equal(s1.live[LP_MEM_CATEGORY_PARAMETER] - s0.live[LP_MEM_CATEGORY_PARAMETER], 100);
    assert_int_equal(s1.live[LP_MEM_CATEGORY_GRADIENT] - s0.live[LP_MEM_CATEGORY_GRADIENT], 4096);
    assert_int_equal(s1.live_total - s0.live_total, 4196);
    assert_int_equal(s1.n_allocs - s0.n_allocs, 3);
    lp_free(b);
    lp_free(a);
    lp_free(z);
    lp_free(NULL);
    lp_alloc_stats_get(&s2);
    lp_prof_mem_stats(&p2);
    assert_int_equal(s2.live_total, s0.live_total);
    assert_int_equal(p2.total_current, p0.total_current);
    assert_true(s2.peak[LP_MEM_CATEGORY_GRADIENT] >= 4096);
    lp_alloc_stats_reset_peak();
    lp_alloc_stats_get(&s2);
    assert_int_equal(s2.peak[LP_MEM_CATEGORY_GRADIENT], s2.live[LP_MEM_CATEGORY_GRADIENT]);
}

/* A path with three allocations that must clean up whichever one fails. */
static lp_status three_buffers(void)
{
    lp_tensor a = {0}, b = {0}, c = {0};
    lp_status st;
    if ((st = lp_tensor_alloc(&a, LP_DTYPE_F32, 1, (int64_t[]){8}, LP_MEM_CATEGORY_ACTIVATION, "a")) != LP_OK)
        goto done;
    if ((st = lp_tensor_alloc(&b, LP_DTYPE_F32, 1, (int64_t[]){8}, LP_MEM_CATEGORY_ACTIVATION, "b")) != LP_OK)
        goto done;
    st = lp_tensor_alloc(&c, LP_DTYPE_F32, 1, (int64_t[]){8}, LP_MEM_CATEGORY_ACTIVATION, "c");
done:
    lp_tensor_free(&a);
    lp_tensor_free(&b);
    lp_tensor_free(&c);
    return st;
}

/* Weight buffers of 4 MiB and more start a 2 MiB page (the header first, so the data is 64
 * bytes in) and are advised for huge pages (hugepages.c); smaller ones and other categories
 * keep the plain path. Whether the kernel then backs them with 2 MiB pages depends on its THP
 * setting, so that is not asserted; alignment, zeroing, accounting and the free are. */
static void test_alloc_huge(void **state)
{
    (void)state;
    assert_true(lp_core__huge_wanted(LP_MEM_CATEGORY_PARAMETER, LP_HUGE_MIN_BYTES));
    assert_true(lp_core__huge_wanted(LP_MEM_CATEGORY_QUANTIZED_WEIGHT, LP_HUGE_MIN_BYTES));
    assert_false(lp_core__huge_wanted(LP_MEM_CATEGORY_PARAMETER, LP_HUGE_MIN_BYTES - 1));
    assert_false(lp_core__huge_wanted(LP_MEM_CATEGORY_ACTIVATION, (size_t)1 << 30));
    lp_alloc_stats s0, s1;
    lp_alloc_stats_get(&s0);
    const size_t n = LP_HUGE_MIN_BYTES + 12345;
    unsigned char *p = lp_alloc(n, LP_MEM_CATEGORY_PARAMETER, "huge test");
    assert_non_null(p);
    assert_int_equal(((uintptr_t)p - LP_ALIGN) % LP_HUGE_PAGE_BYTES, 0);
    assert_int_equal(p[0] | p[n / 2] | p[n - 1], 0);
    p[n - 1] = 1;
    assert_int_equal(lp_alloc_size(p), n);
    lp_alloc_stats_get(&s1);
    assert_int_equal(s1.live[LP_MEM_CATEGORY_PARAMETER] - s0.live[LP_MEM_CATEGORY_PARAMETER], n);
    lp_free(p);
    lp_alloc_stats_get(&s1);
    assert_int_equal(s1.live[LP_MEM_CATEGORY_PARAMETER], s0.live[LP_MEM_CATEGORY_PARAMETER]);
}

static void test_alloc_fail_nth(void **state)
{
    (void)state;
    lp_alloc_stats s0, s1;
    lp_alloc_stats_get(&s0);
    lp_alloc_fail_at(0);
    assert_int_equal(three_buffers(), LP_OK);
    uint64_t n = lp_alloc_fail_at(0);
    assert_int_equal(n, 3);
    for (uint64_t k = 1; k <= n; k++) {
        lp_alloc_fail_at(k);
        lp_status st = three_buffers();
        assert_int_equal(st, LP_STATUS_NO_MEMORY);
        assert_non_null(strstr(lp_err_msg(), "set to fail"));
    }
    lp_alloc_fail_at(0);
    lp_alloc_stats_get(&s1);
    assert_int_equal(s1.live_total, s0.live_total); /* nothing leaked on any path */
}

static void test_arena(void **state)
{
    (void)state;
    lp_arena a;
    assert_int_equal(lp_arena_init(&a, 1000, LP_MEM_CATEGORY_ACTIVATION, "acts"), LP_OK);
    assert_int_equal(lp_alloc_category(a.base), LP_MEM_CATEGORY_ACTIVATION);
    uint8_t *p = lp_arena_alloc(&a, 10);
    uint8_t *q = lp_arena_alloc(&a, 100);
    assert_int_equal((uintptr_t)q % 64, 0);
    assert_true(q >= p + 10);
    size_t mark = lp_arena_mark(&a);
    assert_non_null(lp_arena_alloc(&a, 500));
    assert_null(lp_arena_alloc(&a, 500));
    assert_non_null(strstr(lp_err_msg(), "acts"));
    lp_arena_release(&a, mark);
    assert_non_null(lp_arena_alloc(&a, 500));
    lp_arena_reset(&a);
    assert_ptr_equal(lp_arena_alloc(&a, 1), a.base);
    assert_true(a.high_water >= 640);
    lp_arena_free(&a);
    lp_alloc_fail_at(1);
    assert_int_equal(lp_arena_init(&a, 64, LP_MEM_CATEGORY_TEMPORARY, "t"), LP_STATUS_NO_MEMORY);
    lp_alloc_fail_at(0);
}

static void test_tensor(void **state)
{
    (void)state;
    lp_tensor t, v, s;
    char buf[64];
    assert_int_equal(lp_tensor_alloc(&t, LP_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, LP_MEM_CATEGORY_PARAMETER, "w"), LP_OK);
    assert_true(t.owns);
    assert_int_equal(lp_tensor_numel(&t), 24);
    assert_int_equal(lp_tensor_nbytes(&t), 96);
    assert_int_equal(t.stride[0], 12);
    assert_int_equal(t.stride[2], 1);
    assert_true(lp_tensor_is_contiguous(&t));
    assert_string_equal(lp_tensor_describe(&t, buf, sizeof buf), "f32[2,3,4]");
    float *d = t.data;
    for (int i = 0; i < 24; i++)
        d[i] = (float)i;
    assert_int_equal(lp_tensor_reshape(&v, &t, 2, (int64_t[]){6, 4}), LP_OK);
    assert_false(v.owns);
    assert_int_equal(lp_tensor_reshape(&v, &t, 2, (int64_t[]){5, 4}), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_tensor_slice0(&s, &t, 1, 1), LP_OK);
    assert_float_equal(((float *)s.data)[0], 12.0f, 0);
    assert_int_equal(lp_tensor_slice0(&s, &t, 1, 2), LP_STATUS_RANGE);
    assert_int_equal(lp_tensor_alloc(&v, LP_DTYPE_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, LP_MEM_CATEGORY_OTHER, "x"),
                     LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_tensor_alloc(&v, LP_DTYPE_F32, 1, (int64_t[]){-1}, LP_MEM_CATEGORY_OTHER, "x"),
                     LP_STATUS_INVALID_ARG);
    lp_tensor_zero(&t);
    assert_float_equal(d[23], 0.0f, 0);
    lp_tensor_free(&t);
    assert_null(t.data);
    lp_tensor_free(&t); /* idempotent */
    uint8_t raw[3];
    assert_int_equal(lp_tensor_view(&v, LP_DTYPE_NF4, 1, (int64_t[]){5}, raw), LP_OK);
    assert_int_equal(lp_tensor_nbytes(&v), 3);
    lp_tensor_free(&v); /* a view: frees nothing */
}

static void test_threads(void **state)
{
    (void)state;
    int n = lp_threads_init();
    assert_true(n >= 1);
    assert_string_equal(lp_threads_blas_mode(), "openmp");
    lp_threads_set(1);
    assert_int_equal(lp_threads_get(), 1);
    assert_int_equal(omp_get_max_threads(), 1);
    lp_threads_set(2);
    assert_int_equal(omp_get_max_threads(), 2);
    lp_threads_set(n);
}

/* On a CPU OpenBLAS does not know it falls back to narrow kernels; loupe then picks the
 * set the CPU's ISA allows, and leaves every choice OpenBLAS made on purpose alone. */
static void test_blas_upgrade(void **state)
{
    (void)state;
    assert_string_equal(lp_core__blas_upgrade("Prescott", LP_CPU_ISA_AVX512_BF16), "Cooperlake");
    assert_string_equal(lp_core__blas_upgrade("Prescott", LP_CPU_ISA_AVX512), "SkylakeX");
    assert_string_equal(lp_core__blas_upgrade("Nehalem", LP_CPU_ISA_AVX2), "Haswell");
    assert_string_equal(lp_core__blas_upgrade("sandybridge", LP_CPU_ISA_AVX512), "SkylakeX");
    assert_string_equal(lp_core__blas_upgrade("Haswell", LP_CPU_ISA_AVX512), "SkylakeX");
    assert_null(lp_core__blas_upgrade("SkylakeX", LP_CPU_ISA_AVX512_BF16)); // AVX-512 already
    assert_null(lp_core__blas_upgrade("Cooperlake", LP_CPU_ISA_AVX512_BF16));
    assert_null(lp_core__blas_upgrade("Zen", LP_CPU_ISA_AVX2));
    assert_null(lp_core__blas_upgrade("Prescott", LP_CPU_ISA_OLD)); // nothing wider to use
    assert_null(lp_core__blas_upgrade("NeoverseN1", LP_CPU_ISA_AVX512)); // a name not listed
    assert_null(lp_core__blas_upgrade(NULL, LP_CPU_ISA_AVX512));
    // this machine: whatever OpenBLAS chose is at least as wide as the CPU allows now
    lp_threads_init();
    assert_null(lp_core__blas_upgrade(lp_threads_blas_core(), lp_core__cpu_isa()));
}

static void test_philox_kat(void **state)
{
    (void)state;
    /* Known-answer vectors of Philox4x32-10 (Random123's kat_vectors). Counter words
     * (c0,c1) = ctr, (c2,c3) = stream; key = seed. */
    uint32_t o[4];
    lp_rng_philox(0, 0, 0, o);
    assert_int_equal(o[0], 0x6627e8d5u);
    assert_int_equal(o[1], 0xe169c58du);
    assert_int_equal(o[2], 0xbc57ac4cu);
    assert_int_equal(o[3], 0x9b00dbd8u);
    lp_rng_philox(UINT64_MAX, UINT64_MAX, UINT64_MAX, o);
    assert_int_equal(o[0], 0x408f276du);
    assert_int_equal(o[1], 0x41c83b0eu);
    assert_int_equal(o[2], 0xa20bc7c6u);
    assert_int_equal(o[3], 0x6d5451fdu);
    lp_rng_philox(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull, o);
    assert_int_equal(o[0], 0xd16cfe09u);
    assert_int_equal(o[1], 0x94fdccebu);
    assert_int_equal(o[2], 0x5001e420u);
    assert_int_equal(o[3], 0x24126ea1u);
}

static void test_rng_reproducible(void **state)
{
    (void)state;
    enum { N = 300001 };
    static float a[N], b[N];
    lp_rng r1, r2;
    int saved = lp_threads_get();
    /* Same seed and stream: same numbers, for 1 thread and for 2 */
    lp_threads_set(1);
    lp_rng_init(&r1, 42, LP_RNG_STREAM_INIT);
    lp_rng_normal(&r1, a, N, 0.0f, 1.0f);
    lp_threads_set(2);
    lp_rng_init(&r2, 42, LP_RNG_STREAM_INIT);
    lp_rng_normal(&r2, b, N, 0.0f, 1.0f);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(r1.offset, r2.offset);
    /* moments */
    double s = 0, s2 = 0;
    for (int i = 0; i < N; i++)
        s += a[i], s2 += (double)a[i] * a[i];
    assert_true(fabs(s / N) < 0.01);
    assert_true(fabs(s2 / N - 1.0) < 0.01);
    /* a different stream differs */
    lp_rng_init(&r2, 42, LP_RNG_STREAM_DROPOUT);
    lp_rng_normal(&r2, b, 16, 0.0f, 1.0f);
    assert_memory_not_equal(a, b, 16 * sizeof(float));
    /* a continued stream differs from its start, and uniform stays in range */
    lp_rng_init(&r1, 7, 1);
    lp_rng_uniform(&r1, a, 1000, -2.0f, 3.0f);
    lp_rng_uniform(&r1, b, 1000, -2.0f, 3.0f);
    assert_memory_not_equal(a, b, 1000 * sizeof(float));
    s = 0;
    for (int i = 0; i < 1000; i++) {
        assert_true(a[i] >= -2.0f && a[i] < 3.0f);
        s += a[i];
    }
    assert_true(fabs(s / 1000 - 0.5) < 0.2);
    for (int i = 0; i < 1000; i++)
        assert_true(lp_rng_below(&r1, 7) < 7);
    lp_threads_set(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_names),     cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_f16),             cmocka_unit_test(test_alloc_accounting),
        cmocka_unit_test(test_alloc_fail_nth),  cmocka_unit_test(test_alloc_huge),  cmocka_unit_test(test_arena),
        cmocka_unit_test(test_tensor),          cmocka_unit_test(test_threads), cmocka_unit_test(test_blas_upgrade),
        cmocka_unit_test(test_philox_kat),      cmocka_unit_test(test_rng_reproducible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
