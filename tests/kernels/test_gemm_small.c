/* The optimized sgemm's few-rows path (gemm_small.c: M <= 16 rows against a weight stored
 * (N,K), what decoding runs) against the reference triple loop: every M from 1 to 17 (17 takes
 * OpenBLAS again), K with and without a vector tail, N around the 4-row blocks and the
 * threads' ranges, strides wider than the rows, beta 0 (C's NaNs ignored) and 0.5, guard
 * bytes; at every ISA level (test_gemm_small_isa_*). Bound: float FMAs in another
 * order against double, 1e-5 * K absolute plus 1e-5 relative (the existing sgemm cases'). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "loupe/core.h"

static int run(int64_t M, int64_t N, int64_t K, float beta)
{
    const lp_kernel_table *R = lp_kernels_table(LP_KERNELS_IMPL_REF), *O = lp_kernels_table(LP_KERNELS_IMPL_OPT);
    const int64_t lda = K + 3, ldb = K + 1, ldc = N + 2;
    float *A = kt_rand_f(M * lda, -1, 1), *B = kt_rand_f(N * ldb, -1, 1), *C0 = kt_rand_f(M * ldc, -1, 1);
    if (beta == 0.0f)
        for (int64_t i = 0; i < M * ldc; i++)
            C0[i] = NAN;
    float *C1 = kt_copy(C0, M * ldc);
    R->sgemm(false, true, M, N, K, 0.7f, A, lda, B, ldb, beta, C0, ldc);
    O->sgemm(false, true, M, N, K, 0.7f, A, lda, B, ldb, beta, C1, ldc);
    int f = 0;
    for (int64_t i = 0; i < M && !f; i++)
        f += kt_close("sgemm few rows", C1 + i * ldc, C0 + i * ldc, N, 1e-5 * (double)K, 1e-5);
    for (int64_t i = 0; i < M; i++) // the stride's padding is never written
        for (int64_t j = N; j < ldc && i * ldc + j < M * ldc; j++)
            f += !(isnan(C1[i * ldc + j]) ? isnan(C0[i * ldc + j]) : C1[i * ldc + j] == C0[i * ldc + j]);
    return f + kt_release("sgemm few rows");
}

static void test_small_m(void **state)
{
    (void)state;
    /* N: below, at and between the 4-row blocks and the threads' ranges (192 / 576 / 1536 are
     * SmolLM2's k / q / MLP rows); K: with and without vector tails at both vector widths */
    static const int64_t NK[][2] = {{1, 1},      {3, 9},      {4, 16},     {5, 40},     {7, 15},
                                    {64, 16},    {65, 33},    {130, 576},  {192, 64},   {1000, 577},
                                    {129, 1537}, {6, 24}};
    int failed = 0;
    for (int64_t M = 1; M <= 17; M++)
        for (size_t s = 0; s < sizeof NK / sizeof NK[0]; s++)
            for (int bi = 0; bi < 2; bi++) {
                int f = run(M, NK[s][0], NK[s][1], bi ? 0.5f : 0.0f);
                if (f)
                    fprintf(stderr, "M %lld N %lld K %lld beta %d: FAIL\n", (long long)M, (long long)NK[s][0],
                            (long long)NK[s][1], bi);
                failed += f != 0;
            }
    assert_int_equal(failed, 0);
}

static void test_small_m_one_thread(void **state)
{
    int saved = lp_threads_get();
    lp_threads_set(1);
    test_small_m(state);
    lp_threads_set(saved);
}

int main(void)
{
    int isa_rc = kt_isa_init(); // LP_ISA picks the level (77 where the CPU lacks it)
    if (isa_rc)
        return isa_rc;
    lp_threads_init();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_small_m), cmocka_unit_test(test_small_m_one_thread)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
