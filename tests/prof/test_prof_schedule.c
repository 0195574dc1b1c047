/* Schedule semantics against the real torch.profiler: per-step actions, the step_num at
 * which on_trace_ready fires and the ProfilerStep#N ranges in each saved window, for the
 * cases in data/schedule_golden.txt (written by gen_schedule_golden.py). Also the
 * transition table, profiling_frequency, the max_steps helper and validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "loupe/prof.h"

#define MAXF 16
typedef struct fired {
    int64_t at;
    int nsteps;
    int64_t steps[16];
} fired;

static fired got[MAXF];
static int ngot;

static lp_status on_ready(const lp_prof_events *ev, void *user)
{
    (void)user;
    if (ngot >= MAXF)
        return LP_OK;
    fired *f = &got[ngot++];
    f->at = lp_prof_step_num();
    f->nsteps = 0;
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (strncmp(e->name, "ProfilerStep#", 13) == 0 && f->nsteps < 16) {
            assert_string_equal(e->cat, "user_annotation");
            f->steps[f->nsteps++] = strtoll(e->name + 13, NULL, 10);
        }
    }
    /* steps appear in time order */
    for (int i = 1; i < f->nsteps; i++)
        assert_true(f->steps[i] > f->steps[i - 1]);
    return LP_OK;
}

static void test_against_torch(void **state)
{
    (void)state;
    FILE *fp = fopen("tests/prof/data/schedule_golden.txt", "r");
    assert_non_null(fp);
    char line[1024];
    int cases = 0;
    while (fgets(line, sizeof line, fp)) {
        long long sf, w, wu, a, r, n;
        if (sscanf(line, "case %lld %lld %lld %lld %lld %lld", &sf, &w, &wu, &a, &r, &n) != 6)
            continue;
        lp_prof_schedule s = {.skip_first = sf, .wait = w, .warmup = wu, .active = a, .repeat = r};
        assert_int_equal(lp_prof_schedule_validate(&s), LP_OK);
        /* actions */
        assert_non_null(fgets(line, sizeof line, fp));
        char *p = line + strlen("actions");
        for (int64_t i = 0; i <= n; i++) {
            long v = strtol(p, &p, 10);
            assert_int_equal(lp_prof_schedule_action(&s, i), v);
        }
        /* run a session the way the torch script did: work, then step() */
        ngot = 0;
        lp_prof_config cfg;
        lp_prof_config_init(&cfg);
        cfg.use_schedule = 1;
        cfg.schedule = s;
        cfg.on_trace_ready = on_ready;
        assert_int_equal(lp_prof_start(&cfg), LP_OK);
        for (int64_t i = 0; i < n; i++) {
            {
                LP_PROF_SCOPE("work");
            }
            assert_int_equal(lp_prof_step(), LP_OK);
        }
        assert_int_equal(lp_prof_stop(), LP_OK);
        int nready;
        assert_non_null(fgets(line, sizeof line, fp));
        assert_int_equal(sscanf(line, "ready %d", &nready), 1);
        assert_int_equal(ngot, nready);
        assert_int_equal(lp_prof_traces_saved(), nready);
        for (int k = 0; k < nready; k++) {
            assert_non_null(fgets(line, sizeof line, fp));
            long long at;
            int ns, off;
            assert_int_equal(sscanf(line, "at %lld steps %d%n", &at, &ns, &off), 2);
            assert_int_equal(got[k].at, at);
            assert_int_equal(got[k].nsteps, ns);
            p = line + off;
            for (int j = 0; j < ns; j++)
                assert_int_equal(got[k].steps[j], strtoll(p, &p, 10));
        }
        cases++;
    }
    fclose(fp);
    assert_true(cases >= 10);
}

static void test_transitions(void **state)
{
    (void)state;
    enum { P = LP_PROF_DO_PREPARE, S = LP_PROF_DO_START, T = LP_PROF_DO_STOP,
           R = LP_PROF_DO_READY, W = LP_PROF_DO_WARN };
    /* torch's profile.action_map, row by row */
    const uint32_t want[4][4] = {
        /* NONE   */ {0, P, P | S, P | S},
        /* WARMUP */ {W | S | T, 0, S, S},
        /* RECORD */ {W | T, W | T, 0, 0},
        /* R&SAVE */ {T | R, T | R | P, T | R | P | S, T | R | P | S},
    };
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            assert_int_equal(lp_prof_transition((lp_prof_action)a, b), want[a][b]);
    assert_int_equal(lp_prof_transition(LP_PROF_ACTION_NONE, -1), 0);
    assert_int_equal(lp_prof_transition(LP_PROF_ACTION_WARMUP, -1), S | T);
    assert_int_equal(lp_prof_transition(LP_PROF_ACTION_RECORD, -1), T | R);
    assert_int_equal(lp_prof_transition(LP_PROF_ACTION_RECORD_AND_SAVE, -1), T | R);
}

static void test_frequency_and_max_steps(void **state)
{
    (void)state;
    lp_prof_schedule s;
    assert_int_equal(lp_prof_schedule_from_frequency(10, 2, 1, &s), LP_OK);
    assert_int_equal(s.wait, 7);
    assert_int_equal(s.warmup, 2);
    assert_int_equal(s.active, 1);
    assert_int_equal(s.repeat, 0);
    /* cycle of 10: record-and-save at steps 9, 19, 29 ... forever */
    for (int64_t i = 0; i < 40; i++) {
        lp_prof_action want = i % 10 < 7   ? LP_PROF_ACTION_NONE
                              : i % 10 < 9 ? LP_PROF_ACTION_WARMUP
                                           : LP_PROF_ACTION_RECORD_AND_SAVE;
        assert_int_equal(lp_prof_schedule_action(&s, i), want);
    }
    assert_int_equal(lp_prof_schedule_from_frequency(3, 2, 2, &s), LP_STATUS_INVALID_ARG);
    assert_true(strstr(lp_err_msg(), "profiling_frequency") != NULL);
    assert_int_equal(lp_prof_schedule_from_frequency(4, 2, 2, &s), LP_OK);
    assert_int_equal(s.wait, 0);
    assert_int_equal(lp_prof_schedule_from_frequency(5, 2, 0, &s), LP_STATUS_INVALID_ARG);

    lp_prof_schedule t = {.wait = 1, .warmup = 1, .active = 1, .repeat = 1};
    assert_int_equal(lp_prof_schedule_cycle_steps(&t), 3);
    assert_int_equal(lp_prof_schedule_adjust_max_steps(&t, 2), 3);
    assert_int_equal(lp_prof_schedule_adjust_max_steps(&t, 10), 10);
    assert_int_equal(lp_prof_schedule_adjust_max_steps(&t, 0), 0); /* unlimited */
    t.skip_first = 4;
    assert_int_equal(lp_prof_schedule_adjust_max_steps(&t, 5), 7);
    /* with max_steps = adjusted value, the save fires inside the run */
    t = (lp_prof_schedule){.wait = 5, .warmup = 2, .active = 3, .repeat = 1};
    int64_t m = lp_prof_schedule_adjust_max_steps(&t, 4);
    assert_int_equal(m, 10);
    assert_int_equal(lp_prof_schedule_action(&t, m - 1), LP_PROF_ACTION_RECORD_AND_SAVE);
    t.skip_first_wait = 1; /* newer torch: first wait skipped */
    assert_int_equal(lp_prof_schedule_cycle_steps(&t), 5);
    assert_int_equal(lp_prof_schedule_action(&t, 0), LP_PROF_ACTION_WARMUP);
    assert_int_equal(lp_prof_schedule_action(&t, 4), LP_PROF_ACTION_RECORD_AND_SAVE);
}

static void test_validation(void **state)
{
    (void)state;
    lp_prof_schedule s = {.wait = 1, .warmup = 1, .active = 0};
    assert_int_equal(lp_prof_schedule_validate(&s), LP_STATUS_INVALID_ARG);
    assert_true(strstr(lp_err_msg(), "active") != NULL);
    s = (lp_prof_schedule){.wait = -1, .active = 1};
    assert_int_equal(lp_prof_schedule_validate(&s), LP_STATUS_INVALID_ARG);
    assert_true(strstr(lp_err_msg(), "wait") != NULL);
    s = (lp_prof_schedule){.active = 1, .repeat = -2};
    assert_int_equal(lp_prof_schedule_validate(&s), LP_STATUS_INVALID_ARG);
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.use_schedule = 1;
    cfg.schedule = (lp_prof_schedule){.active = 0};
    assert_int_equal(lp_prof_start(&cfg), LP_STATUS_INVALID_ARG);
    /* a valid session cannot be started twice */
    cfg.schedule = (lp_prof_schedule){.active = 1};
    cfg.on_trace_ready = on_ready;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    assert_int_equal(lp_prof_start(&cfg), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_string_equal(lp_prof_action_name(LP_PROF_ACTION_RECORD_AND_SAVE), "RECORD_AND_SAVE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_torch),
        cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_frequency_and_max_steps),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
