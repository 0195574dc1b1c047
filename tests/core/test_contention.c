/* Threads on a busy machine: the cgroup CPU quota parsing (fixture texts, not this
 * machine's files), the bounded-spin decision, and the contention detector on synthetic
 * step sequences. All exact: integer parsing and comparisons against fixed thresholds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../src/core/core_internal.h"
#include "loupe/core.h"

static void test_cgroup_v2(void **state)
{
    (void)state;
    assert_int_equal(lp_core__cgroup_v2_cpus("max 100000\n"), 0); // no limit
    assert_int_equal(lp_core__cgroup_v2_cpus("200000 100000\n"), 2);
    assert_int_equal(lp_core__cgroup_v2_cpus("150000 100000\n"), 2); // 1.5 CPUs: ceil
    assert_int_equal(lp_core__cgroup_v2_cpus("50000 100000\n"), 1);  // half a CPU: at least 1
    assert_int_equal(lp_core__cgroup_v2_cpus("1000 1000000"), 1);
    assert_int_equal(lp_core__cgroup_v2_cpus("400000 50000"), 8);
    assert_int_equal(lp_core__cgroup_v2_cpus("300000"), 3); // period left at the kernel's default
    assert_int_equal(lp_core__cgroup_v2_cpus(""), 0);
    assert_int_equal(lp_core__cgroup_v2_cpus("garbage"), 0);
    assert_int_equal(lp_core__cgroup_v2_cpus(NULL), 0);
}

static void test_cgroup_v1(void **state)
{
    (void)state;
    assert_int_equal(lp_core__cgroup_v1_cpus("-1\n", "100000\n"), 0); // no limit
    assert_int_equal(lp_core__cgroup_v1_cpus("400000\n", "100000\n"), 4);
    assert_int_equal(lp_core__cgroup_v1_cpus("250000", "100000"), 3);
    assert_int_equal(lp_core__cgroup_v1_cpus("10000", "100000"), 1);
    assert_int_equal(lp_core__cgroup_v1_cpus("100000", "0"), 0); // no period: not a quota
    assert_int_equal(lp_core__cgroup_v1_cpus("x", "100000"), 0);
    assert_int_equal(lp_core__cgroup_v1_cpus(NULL, "100000"), 0);
    // this machine: the pool size is a positive count whatever its cgroup says
    assert_true(lp_threads_cores() >= 1);
    int q = lp_core__cgroup_cpus();
    assert_true(q >= 0);
    if (q > 0)
        assert_true(lp_threads_cores() <= q);
}

static void test_spin_plan(void **state)
{
    (void)state;
    assert_int_equal(lp_core__spin_plan(NULL, NULL), LP_THREADS_SPIN);
    assert_int_equal(lp_core__spin_plan("", ""), LP_THREADS_SPIN); // set but empty: unset
    assert_int_equal(lp_core__spin_plan("passive", NULL), -1);
    assert_int_equal(lp_core__spin_plan("ACTIVE", NULL), -1);
    assert_int_equal(lp_core__spin_plan(NULL, "300000"), -1);
    assert_true(strlen(lp_threads_spin_desc()) > 0);
}

/* share = cpu / (wall x threads); the threshold is 0.75 and three flagged steps in a row. */
static void test_contention_quiet(void **state)
{
    (void)state;
    lp_contention c;
    lp_contention_init(&c, 2);
    for (int i = 0; i < 50; i++) // 2 threads near full CPU, one dip every 10 steps
        assert_false(lp_contention_add(&c, 0.100, i % 10 == 5 ? 0.100 : 0.195));
    assert_false(c.noticed);
    assert_int_equal(c.steps, 50);
    assert_int_equal(c.flagged, 5);                  // the dips count, but never three in a row
    assert_true(lp_contention_cpu_share(&c) > 0.9); // (45*0.195 + 5*0.1) / (50*0.2) = 0.9275
    assert_true(lp_contention_cpu_share(&c) < 0.93);
}

static void test_contention_busy(void **state)
{
    (void)state;
    lp_contention c;
    lp_contention_init(&c, 2);
    for (int i = 0; i < 5; i++)
        assert_false(lp_contention_add(&c, 0.100, 0.190)); // quiet start
    // a busy loop arrives: the step time jumps, CPU time per step does not
    assert_false(lp_contention_add(&c, 0.300, 0.200));
    assert_false(lp_contention_add(&c, 0.300, 0.200));
    assert_true(lp_contention_add(&c, 0.300, 0.200)); // the third in a row: noticed
    assert_false(lp_contention_add(&c, 0.300, 0.200)); // said once only
    assert_true(c.noticed);
    assert_int_equal(c.flagged, 4);
    double share = lp_contention_cpu_share(&c); // (5*0.19 + 4*0.2) / ((0.5 + 1.2) * 2)
    assert_true(share > 1.75 / 3.4 - 1e-9 && share < 1.75 / 3.4 + 1e-9);
    char note[512];
    assert_non_null(strstr(lp_contention_note(&c, note, sizeof note), "busy"));
}

static void test_contention_edges(void **state)
{
    (void)state;
    lp_contention c;
    lp_contention_init(&c, 0); // a thread count of 0 means 1
    assert_int_equal(c.threads, 1);
    assert_false(lp_contention_add(&c, 0, 0)); // a clock that did not move: ignored
    assert_false(lp_contention_add(&c, -1, 0.1));
    assert_int_equal(c.steps, 0);
    assert_true(lp_contention_cpu_share(&c) == 0.0);
    // one thread: a share just above the threshold is not flagged, just below is
    assert_false(lp_contention_add(&c, 1.0, 0.76));
    assert_int_equal(c.flagged, 0);
    assert_false(lp_contention_add(&c, 1.0, 0.74));
    assert_int_equal(c.flagged, 1);
    // the run resets on a full step: two, one full, two more is never three in a row
    lp_contention_init(&c, 4);
    double cpu[] = {1, 1, 4, 1, 1, 4};
    for (int i = 0; i < 6; i++)
        assert_false(lp_contention_add(&c, 1.0, cpu[i]));
    assert_false(c.noticed);
    assert_int_equal(c.flagged, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cgroup_v2),        cmocka_unit_test(test_cgroup_v1),
        cmocka_unit_test(test_spin_plan),        cmocka_unit_test(test_contention_quiet),
        cmocka_unit_test(test_contention_busy),  cmocka_unit_test(test_contention_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
