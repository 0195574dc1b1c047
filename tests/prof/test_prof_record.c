/* The recorder: nested ranges per thread (pthreads and OpenMP workers as their own
 * lanes), ordering and nesting of the collected events, unbalanced pops, scoped ranges
 * that survive recording being toggled, op shapes/FLOPs, and memory accounting. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/prof.h"

static lp_prof_events *saved;

/* Keeps a copy of the window for inspection after the session. */
static lp_status keep(const lp_prof_events *ev, void *user)
{
    (void)user;
    lp_prof_events_free(saved);
    assert_int_equal(lp_prof_events_new(&saved), LP_OK);
    for (size_t i = 0; i < lp_prof_events_count(ev); i++)
        assert_int_equal(lp_prof_events_add(saved, lp_prof_events_get(ev, i)), LP_OK);
    *lp_prof_events_info_of(saved) = *lp_prof_events_info_get(ev);
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        const char *n = lp_prof_events_thread_name(ev, e->pid, e->tid);
        if (n)
            assert_int_equal(lp_prof_events_set_thread_name(saved, e->pid, e->tid, n), LP_OK);
    }
    return LP_OK;
}

static void start_plain(int shapes, int mem)
{
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = keep;
    cfg.record_shapes = shapes;
    cfg.profile_memory = mem;
    cfg.with_flops = 1;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
}

static volatile double sink;

static void spin(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += i * 0.5;
    sink = x;
}

static void *worker(void *arg)
{
    const char *tag = arg;
    lp_prof_set_thread_name(tag);
    for (int i = 0; i < 50; i++) {
        LP_PROF_SCOPE("outer");
        spin(100);
        {
            LP_PROF_SCOPE("inner");
            spin(100);
        }
        spin(50);
    }
    return NULL;
}

/* Checks that within each (tid) lane events nest properly: every event lies inside its
 * predecessor on the stack or after it. Returns the number of X events seen. */
static size_t check_nesting(const lp_prof_events *ev)
{
    size_t n = lp_prof_events_count(ev), nx = 0;
    for (size_t i = 1; i < n; i++) {
        const lp_prof_event *a = lp_prof_events_get(ev, i - 1), *b = lp_prof_events_get(ev, i);
        assert_true(a->ts_ns <= b->ts_ns); /* sorted by start */
    }
    for (size_t i = 0; i < n; i++) {
        const lp_prof_event *a = lp_prof_events_get(ev, i);
        if (a->ph != 'X')
            continue;
        nx++;
        assert_true(a->dur_ns >= 0);
        for (size_t j = i + 1; j < n; j++) {
            const lp_prof_event *b = lp_prof_events_get(ev, j);
            if (b->ph != 'X' || b->tid != a->tid)
                continue;
            if (b->ts_ns >= a->ts_ns + a->dur_ns)
                break; /* later sibling: no overlap to check beyond */
            /* starts inside a: must end inside a too */
            assert_true(b->ts_ns + b->dur_ns <= a->ts_ns + a->dur_ns);
        }
    }
    return nx;
}

static void test_threads_nesting(void **state)
{
    (void)state;
    start_plain(0, 0);
    pthread_t th[3];
    const char *tags[3] = {"w0", "w1", "w2"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)tags[i]), 0);
    worker("main-ish");
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_non_null(saved);
    size_t nx = check_nesting(saved);
    assert_int_equal(nx, 4 * 100);
    /* per thread: 50 outer and 50 inner, each inner inside an outer of the same tid */
    int64_t tids[4];
    int ntid = 0;
    for (size_t i = 0; i < lp_prof_events_count(saved); i++) {
        const lp_prof_event *e = lp_prof_events_get(saved, i);
        int k;
        for (k = 0; k < ntid && tids[k] != e->tid; k++) {
        }
        if (k == ntid) {
            assert_true(ntid < 4);
            tids[ntid++] = e->tid;
        }
        assert_int_equal(e->pid, getpid());
        assert_string_equal(e->cat, "user_annotation");
    }
    assert_int_equal(ntid, 4);
    int named = 0;
    for (int k = 0; k < ntid; k++) {
        const char *nm = lp_prof_events_thread_name(saved, getpid(), tids[k]);
        assert_non_null(nm);
        char want[64];
        snprintf(want, sizeof want, "thread %lld (", (long long)tids[k]);
        assert_true(strncmp(nm, want, strlen(want)) == 0);
        named += strstr(nm, "(w0)") || strstr(nm, "(w1)") || strstr(nm, "(w2)");
    }
    assert_int_equal(named, 3);
}

static void test_openmp_lanes(void **state)
{
    (void)state;
    start_plain(0, 0);
    LP_PROF_SCOPE("region");
#pragma omp parallel num_threads(2)
    {
        LP_PROF_SCOPE("omp_chunk");
        spin(1000);
    }
    lp_prof_range_pop(); /* unbalanced inside: closes "region" early, scope end pops again */
    assert_int_equal(lp_prof_stop(), LP_OK);
    int chunks = 0;
    int64_t t0 = -1, t1 = -1;
    for (size_t i = 0; i < lp_prof_events_count(saved); i++) {
        const lp_prof_event *e = lp_prof_events_get(saved, i);
        if (strcmp(e->name, "omp_chunk") == 0) {
            chunks++;
            if (t0 < 0)
                t0 = e->tid;
            else
                t1 = e->tid;
        }
    }
    assert_int_equal(chunks, 2);
    assert_true(t1 >= 0 && t0 != t1); /* two lanes */
}

static void test_unbalanced_and_toggle(void **state)
{
    (void)state;
    /* pops with nothing open, before and during a window, must not crash or invent ranges */
    lp_prof_range_pop();
    start_plain(0, 0);
    lp_prof_range_pop();
    lp_prof_range_pop();
    lp_prof_range_push("a");
    lp_prof_range_push("b");
    lp_prof_range_pop();
    lp_prof_range_pop();
    lp_prof_range_pop(); /* extra */
    lp_prof_range_push("left-open"); /* never closed: dropped */
    assert_int_equal(lp_prof_stop(), LP_OK);
    lp_prof_range_pop(); /* after the session */
    int a = 0, b = 0;
    for (size_t i = 0; i < lp_prof_events_count(saved); i++) {
        const lp_prof_event *e = lp_prof_events_get(saved, i);
        a += strcmp(e->name, "a") == 0;
        b += strcmp(e->name, "b") == 0;
        assert_string_not_equal(e->name, "left-open");
    }
    assert_int_equal(a, 1);
    assert_int_equal(b, 1);
    check_nesting(saved);

    /* a scope opened while off does not pop when recording is on at its end */
    {
        LP_PROF_SCOPE("off-scope");
        start_plain(0, 0);
        lp_prof_range_push("x");
        lp_prof_range_pop();
    }
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_int_equal(lp_prof_events_count(saved), 1);
    assert_string_equal(lp_prof_events_get(saved, 0)->name, "x");
}

static void test_range_open_across_step(void **state)
{
    (void)state;
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = keep;
    cfg.use_schedule = 1;
    cfg.schedule = (lp_prof_schedule){.warmup = 1, .active = 2, .repeat = 1};
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    for (int s = 0; s < 4; s++) {
        LP_PROF_SCOPE("work"); /* still open when step() runs */
        spin(1000);
        assert_int_equal(lp_prof_step(), LP_OK);
    }
    assert_int_equal(lp_prof_stop(), LP_OK);
    const lp_prof_event *st[2] = {NULL, NULL}, *work = NULL;
    int nwork = 0;
    for (size_t i = 0; i < lp_prof_events_count(saved); i++) {
        const lp_prof_event *e = lp_prof_events_get(saved, i);
        if (strcmp(e->name, "ProfilerStep#1") == 0)
            st[0] = e;
        if (strcmp(e->name, "ProfilerStep#2") == 0)
            st[1] = e;
        if (strcmp(e->name, "work") == 0) {
            work = e;
            nwork++;
        }
    }
    assert_non_null(st[0]);
    assert_non_null(st[1]);
    /* the step closed by identity: ProfilerStep#1 ends where #2 begins (about) and the
     * one "work" range both begin and end inside the window crosses that boundary */
    assert_int_equal(nwork, 1);
    assert_true(work->ts_ns > st[0]->ts_ns);
    assert_true(work->ts_ns + work->dur_ns > st[0]->ts_ns + st[0]->dur_ns);
    assert_true(st[1]->ts_ns >= st[0]->ts_ns + st[0]->dur_ns);
}

static void test_ops_shapes_flops(void **state)
{
    (void)state;
    static const lp_prof_op_desc mm = {"aten::mm", LP_PROF_CAT_CPU_OP, 2, {2, 2}, {"float", "float"}};
    static const lp_prof_op_desc add = {"aten::add", LP_PROF_CAT_CPU_OP, 3, {1, 1, 0}, {"float", "float", "Scalar"}};
    start_plain(1, 0);
    int64_t d[4] = {64, 768, 768, 32};
    lp_prof_op_push(&mm, d, 2.0 * 64 * 768 * 32, 1000);
    {
        int64_t d2[2] = {5, 5};
        LP_PROF_OP_SCOPE(&add, d2, 5, -1);
    }
    lp_prof_range_pop();
    char dyn[32];
    snprintf(dyn, sizeof dyn, "layer.%d", 7);
    lp_prof_range_push_copy(dyn);
    dyn[0] = 'X'; /* the profiler kept its own copy */
    lp_prof_range_pop();
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_int_equal(lp_prof_events_count(saved), 3);
    const lp_prof_event *e = lp_prof_events_get(saved, 0);
    assert_string_equal(e->name, "aten::mm");
    assert_string_equal(e->cat, "cpu_op");
    assert_int_equal(e->n_inputs, 2);
    assert_int_equal(e->input_ranks[0], 2);
    assert_int_equal(e->input_dims[3], 32);
    assert_string_equal(e->input_types[1], "float");
    assert_true(e->flops == 2.0 * 64 * 768 * 32);
    assert_true(e->bytes == 1000);
    char buf[128];
    lp_prof_event_format_shapes(e, buf, sizeof buf);
    assert_string_equal(buf, "[[64, 768], [768, 32]]");
    e = lp_prof_events_get(saved, 1);
    assert_string_equal(e->name, "aten::add");
    lp_prof_event_format_shapes(e, buf, sizeof buf);
    assert_string_equal(buf, "[[5], [5], []]");
    assert_string_equal(e->input_types[2], "Scalar");
    e = lp_prof_events_get(saved, 2);
    assert_string_equal(e->name, "layer.7");
    assert_int_equal(e->n_inputs, -1);
    /* a truncating buffer still reports the full length */
    assert_int_equal(lp_prof_event_format_shapes(lp_prof_events_get(saved, 0), buf, 5),
                     strlen("[[64, 768], [768, 32]]"));
    assert_int_equal(strlen(buf), 4);
}

static void test_memory_accounting(void **state)
{
    (void)state;
    lp_mem_stats s0, s;
    lp_prof_mem_stats(&s0);
    lp_prof_mem_reset_peaks();
    int x, y, z;
    lp_prof_mem_alloc(&x, 1000, LP_MEM_CATEGORY_PARAMETER);
    lp_prof_mem_alloc(&y, 500, LP_MEM_CATEGORY_ACTIVATION);
    lp_prof_mem_alloc(&z, 300, LP_MEM_CATEGORY_ACTIVATION);
    lp_prof_mem_free(&y, 500, LP_MEM_CATEGORY_ACTIVATION);
    lp_prof_mem_alloc(&y, 100, (lp_mem_category)99); /* out of range -> other */
    lp_prof_mem_stats(&s);
    assert_int_equal(s.current[LP_MEM_CATEGORY_PARAMETER] - s0.current[LP_MEM_CATEGORY_PARAMETER], 1000);
    assert_int_equal(s.current[LP_MEM_CATEGORY_ACTIVATION] - s0.current[LP_MEM_CATEGORY_ACTIVATION], 300);
    assert_int_equal(s.peak[LP_MEM_CATEGORY_ACTIVATION] - s0.current[LP_MEM_CATEGORY_ACTIVATION], 800);
    assert_int_equal(s.current[LP_MEM_CATEGORY_OTHER] - s0.current[LP_MEM_CATEGORY_OTHER], 100);
    assert_int_equal(s.total_current - s0.total_current, 1400);
    assert_int_equal(s.total_peak - s0.total_current, 1800);
    assert_int_equal(s.n_allocs - s0.n_allocs, 4);
    assert_int_equal(s.n_frees - s0.n_frees, 1);
    lp_prof_mem_reset_peaks();
    lp_prof_mem_stats(&s);
    assert_int_equal(s.peak[LP_MEM_CATEGORY_ACTIVATION], s.current[LP_MEM_CATEGORY_ACTIVATION]);

    /* concurrent accounting from OpenMP threads stays exact */
    lp_prof_mem_stats(&s0);
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < 20000; i++) {
        lp_prof_mem_alloc(&x, 64, LP_MEM_CATEGORY_TEMPORARY);
        lp_prof_mem_free(&x, 64, LP_MEM_CATEGORY_TEMPORARY);
    }
    lp_prof_mem_stats(&s);
    assert_int_equal(s.current[LP_MEM_CATEGORY_TEMPORARY], s0.current[LP_MEM_CATEGORY_TEMPORARY]);
    assert_true(s.peak[LP_MEM_CATEGORY_TEMPORARY] >= 64);
    assert_true(s.peak[LP_MEM_CATEGORY_TEMPORARY] <= 128 + s0.current[LP_MEM_CATEGORY_TEMPORARY]);

    /* recorded [memory] events while a window records with profile_memory */
    start_plain(0, 1);
    lp_prof_mem_alloc(&z, 4096, LP_MEM_CATEGORY_GRADIENT);
    lp_prof_mem_free(&z, 4096, LP_MEM_CATEGORY_GRADIENT);
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_int_equal(lp_prof_events_count(saved), 2);
    const lp_prof_event *a = lp_prof_events_get(saved, 0), *f = lp_prof_events_get(saved, 1);
    assert_string_equal(a->name, "[memory]");
    assert_int_equal(a->ph, 'i');
    assert_int_equal(a->mem_bytes, 4096);
    assert_int_equal(f->mem_bytes, -4096);
    assert_int_equal(a->mem_addr, (uint64_t)(uintptr_t)&z);
    assert_int_equal(a->mem_category, LP_MEM_CATEGORY_GRADIENT);
    assert_int_equal(a->mem_device_type, 0);
    assert_int_equal(a->mem_device_id, -1);
    assert_int_equal(a->mem_total_allocated - f->mem_total_allocated, 4096);
    const lp_prof_events_info *in = lp_prof_events_info_get(saved);
    assert_int_equal(in->has_mem_baseline, 1);
    assert_int_equal(in->mem_baseline[LP_MEM_CATEGORY_PARAMETER], s.current[LP_MEM_CATEGORY_PARAMETER]);

    int64_t rss, peak;
    assert_int_equal(lp_prof_rss(&rss, &peak), LP_OK);
    assert_true(rss > 0 && peak >= rss);
    assert_string_equal(lp_mem_category_name(LP_MEM_CATEGORY_QUANTIZED_WEIGHT), "quantized_weight");
    assert_string_equal(lp_mem_category_name(LP_MEM_CATEGORY_OPTIMIZER_STATE), "optimizer_state");
    assert_string_equal(lp_mem_category_name((lp_mem_category)42), "unknown");
}

static void test_hw_and_sampler(void **state)
{
    (void)state;
    const char *why = NULL;
    int ok = lp_prof_hw_available(&why);
    assert_non_null(why);
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = keep;
    cfg.hw_counters = 1;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    lp_prof_range_push("counted");
    spin(100000);
    lp_prof_range_pop();
    assert_int_equal(lp_prof_stop(), LP_OK);
    const lp_prof_event *e = lp_prof_events_get(saved, 0);
    if (ok) {
        assert_int_equal(lp_prof_events_info_get(saved)->hw_counters, 1);
        assert_true(e->hw_instructions > 0);
    } else { /* unavailable is reported as such, never as zero counts */
        assert_int_equal(lp_prof_events_info_get(saved)->hw_counters, -1);
        assert_int_equal(e->hw_instructions, -1);
        assert_int_equal(e->hw_cycles, -1);
    }

    char path[] = "/tmp/lp_prof_sampler_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    lp_prof_sampler *s;
    assert_int_equal(lp_prof_sampler_start(path, 0, &s), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_prof_sampler_start(path, 5, &s), LP_OK);
    int64_t t = lp_prof_now_ns();
    while (lp_prof_now_ns() - t < 60000000)
        spin(10000);
    assert_int_equal(lp_prof_sampler_stop(s), LP_OK);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[256];
    assert_non_null(fgets(line, sizeof line, fp));
    assert_string_equal(line, "time_s,rss_bytes,cpu_percent,gpu_util_percent,gpu_mem_bytes,gpu_power_w,"
                              "gpu_sm_clock_mhz\n");
    int rows = 0, with_cpu = 0;
    double prev = -1;
    while (fgets(line, sizeof line, fp)) {
        double ts, cpu;
        long long rss;
        int got = sscanf(line, "%lf,%lld,%lf,,", &ts, &rss, &cpu);
        /* CPU % is empty in the first row and over spans shorter than two clock ticks */
        assert_true(got == 3 || got == 2);
        if (rows == 0)
            assert_int_equal(got, 2);
        assert_true(rows == 0 ? ts < 0.05 : ts >= prev);
        assert_true(rss > 0);
        if (got == 3)
            assert_true(cpu >= 0 && cpu < 1000);
        with_cpu += got == 3;
        assert_non_null(strstr(line, ",,\n")); /* GPU columns empty */
        prev = ts;
        rows++;
    }
    fclose(fp);
    unlink(path);
    assert_true(rows >= 2); /* start and stop rows always; periodic ones as scheduled */
    assert_true(with_cpu >= 1); /* 60 ms of busy work spans several ticks */
}

static int teardown(void **state)
{
    (void)state;
    lp_prof_events_free(saved);
    saved = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_nesting),
        cmocka_unit_test(test_openmp_lanes),
        cmocka_unit_test(test_unbalanced_and_toggle),
        cmocka_unit_test(test_range_open_across_step),
        cmocka_unit_test(test_ops_shapes_flops),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_hw_and_sampler),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
