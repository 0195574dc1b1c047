/* The bench's small pieces: statistics (mean, sample std, nearest-rank percentiles checked
 * against hand-computed values), the comma lists of --batch-sizes / --samples with their
 * bad forms, the settings check (batch size 0 or absurd, no runs), and --dtype names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "loupe/bench.h"

static void stats(void **state)
{
    (void)state;
    /* 1..10 shuffled: mean 5.5, sample std sqrt(55/6), nearest-rank p50 = 5th smallest = 5,
     * p90 = 9th = 9, p99 = ceil(9.9) = 10th = 10 */
    const double x[] = {7, 2, 9, 1, 10, 4, 3, 8, 6, 5};
    lp_bench_stats s;
    lp_bench_stats_of(x, 10, &s);
    assert_int_equal(s.n, 10);
    assert_true(fabs(s.mean - 5.5) < 1e-12);
    assert_true(fabs(s.std - sqrt(55.0 / 6.0)) < 1e-12);
    assert_true(s.p50 == 5 && s.p90 == 9 && s.p99 == 10 && s.min == 1 && s.max == 10);
    assert_true(x[0] == 7); // input untouched
    lp_bench_stats_of(x, 1, &s);
    assert_true(s.mean == 7 && s.std == 0 && s.p99 == 7);
    lp_bench_stats_of(x, 0, &s);
    assert_true(isnan(s.mean) && isnan(s.p50));
}

static void lists(void **state)
{
    (void)state;
    int64_t v[8];
    int32_t n;
    assert_int_equal(lp_bench_parse_list("--batch-sizes", "1,4,8", 1, 4096, v, 8, &n), LP_OK);
    assert_true(n == 3 && v[0] == 1 && v[2] == 8);
    static const char *bad[] = {"", "1,,4", "1,x", "4,", "0", "1,4097", "-2", "1;4", "1,2,3,4,5,6,7,8,9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(lp_bench_parse_list("--batch-sizes", bad[i], 1, 4096, v, 8, &n),
                         LP_STATUS_INVALID_ARG);
        assert_non_null(strstr(lp_err_msg(), "--batch-sizes")); // the message names the flag
    }
}

static void validate(void **state)
{
    (void)state;
    lp_bench_config c;
    lp_bench_config_init(&c);
    assert_int_equal(lp_bench_config_validate(&c), LP_OK);
    assert_true(c.n_batch_sizes == 6 && c.batch_sizes[5] == 64 && c.warmup == 3 && c.runs == 10);
    c.batch_sizes[2] = 0;
    assert_int_equal(lp_bench_config_validate(&c), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "0 is outside"));
    c.batch_sizes[2] = LP_BENCH_MAX_BATCH + 1;
    assert_int_equal(lp_bench_config_validate(&c), LP_STATUS_INVALID_ARG);
    c.batch_sizes[2] = 8;
    c.runs = 0;
    assert_int_equal(lp_bench_config_validate(&c), LP_STATUS_INVALID_ARG);
    c.runs = 1;
    c.n_batch_sizes = 0;
    assert_int_equal(lp_bench_config_validate(&c), LP_STATUS_INVALID_ARG);
    c.n_batch_sizes = 1;
    c.data_file = "";
    assert_int_equal(lp_bench_config_validate(&c), LP_STATUS_INVALID_ARG);
    c.synthetic = true; // no data needed then
    assert_int_equal(lp_bench_config_validate(&c), LP_OK);
}

static void dtypes(void **state)
{
    (void)state;
    static const char *names[] = {"f32", "bf16", "q8_0", "int8", "nf4", "f32_packed"};
    for (int i = 0; i < 6; i++) {
        lp_bench_dtype d;
        assert_int_equal(lp_bench_dtype_parse(names[i], &d), LP_OK);
        assert_string_equal(lp_bench_dtype_name(d), names[i]);
    }
    lp_bench_dtype d;
    assert_int_equal(lp_bench_dtype_parse("fp8", &d), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "'fp8'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stats),
        cmocka_unit_test(lists),
        cmocka_unit_test(validate),
        cmocka_unit_test(dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
