/* Built with -DLP_PROF_DISABLE: every range macro and inline call compiles to nothing, so
 * even a running, recording session sees none of this file's ranges (the library itself
 * still works: sessions, memory accounting). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "loupe/prof.h"

#ifndef LP_PROF_DISABLE
#error "this test must be compiled with LP_PROF_DISABLE"
#endif

static size_t n_events = 99;

static lp_status count(const lp_prof_events *ev, void *user)
{
    (void)user;
    n_events = lp_prof_events_count(ev);
    return LP_OK;
}

static void test_compiled_out(void **state)
{
    (void)state;
    static const lp_prof_op_desc d = {"aten::mm", LP_PROF_CAT_CPU_OP, 1, {1}, {"float"}};
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = count;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    for (int i = 0; i < 10; i++) {
        LP_PROF_SCOPE("scoped");
        LP_PROF_SCOPE_CAT("cat", LP_PROF_CAT_CPU_OP);
        int64_t dims[1] = {i};
        LP_PROF_OP_SCOPE(&d, dims, 1.0, 2.0);
        lp_prof_range_push("pushed");
        lp_prof_op_push(&d, dims, 1, 1);
        lp_prof_range_push_copy("copied");
        lp_prof_range_pop();
        lp_prof_range_pop();
        lp_prof_range_pop();
    }
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_int_equal(n_events, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_compiled_out)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
