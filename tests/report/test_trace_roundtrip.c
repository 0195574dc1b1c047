/* Our exporter and our reader agree: an event list written by lp_prof_export_chrome
 * (gzip and plain) reads back with every field the trace carries unchanged: names,
 * categories, pids/tids, ns timestamps, shapes and dtypes, FLOPs, bytes moved, hardware
 * counters, [memory] instants with their category, thread names, the recorded window
 * and the trace-wide flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/report.h"

static lp_prof_events *make_list(void)
{
    lp_prof_events *ev;
    assert_int_equal(lp_prof_events_new(&ev), LP_OK);
    lp_prof_events_info *in = lp_prof_events_info_of(ev);
    in->base_time_ns = 1790000000123456789ll;
    in->window_start_ns = 1000;
    in->window_end_ns = 9000000;
    in->pid = 4242;
    in->record_shapes = in->profile_memory = in->with_flops = 1;

    lp_prof_event e;
    lp_prof_event_init(&e);
    e.name = "ProfilerStep#2";
    e.cat = "user_annotation";
    e.pid = 4242;
    e.tid = 4243;
    e.ts_ns = 2001;
    e.dur_ns = 8000999;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);

    static const int32_t ranks[3] = {2, 2, 0};
    static const int64_t dims[4] = {64, 768, 768, 3072};
    static const char *const types[3] = {"float", "c10::BFloat16", "Scalar"};
    lp_prof_event_init(&e);
    e.name = "aten::mm \"quoted\" \\ name";
    e.cat = "cpu_op";
    e.pid = 4242;
    e.tid = 4243;
    e.ts_ns = 123456789; /* 123456.789 us: every ns digit survives */
    e.dur_ns = 1;
    e.n_inputs = 3;
    e.input_ranks = ranks;
    e.input_dims = dims;
    e.input_types = types;
    e.flops = 2.0 * 64 * 768 * 3072;
    e.bytes = 4.0 * (64 * 768 + 768 * 3072);
    e.hw_cycles = 1000;
    e.hw_instructions = 2500;
    e.hw_cache_misses = 7;
    e.correlation = 99;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);

    lp_prof_event_init(&e);
    e.name = "[memory]";
    e.cat = "cpu_instant_event";
    e.ph = 'i';
    e.pid = 4242;
    e.tid = 4244;
    e.ts_ns = 123457000;
    e.mem_bytes = -4096;
    e.mem_total_allocated = 1 << 20;
    e.mem_total_reserved = 1 << 21;
    e.mem_addr = 0x7f0000001000ull;
    e.mem_device_type = 0;
    e.mem_device_id = -1;
    e.mem_category = LP_MEM_CATEGORY_OPTIMIZER_STATE;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
    assert_int_equal(lp_prof_events_set_thread_name(ev, 4242, 4243, "thread 4243 (main)"), LP_OK);
    return ev;
}

static const lp_prof_event *by_name(const lp_prof_events *ev, const char *name)
{
    for (size_t i = 0; i < lp_prof_events_count(ev); i++)
        if (!strcmp(lp_prof_events_get(ev, i)->name, name))
            return lp_prof_events_get(ev, i);
    fail_msg("event '%s' not read back", name);
    return NULL;
}

static void roundtrip(const char *suffix)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/lp_rt_%ld.pt.trace.json%s", (long)getpid(), suffix);
    lp_prof_events *a = make_list();
    assert_int_equal(lp_prof_export_chrome(a, path), LP_OK);
    lp_prof_events *b;
    lp_trace_info info;
    assert_int_equal(lp_trace_load(path, &b, &info), LP_OK);
    unlink(path);
    assert_int_equal(lp_prof_events_count(b), 3);
    assert_int_equal(info.n_complete, 2);
    assert_int_equal(info.n_instants, 1);
    assert_int_equal(info.n_skipped, 0);
    assert_true(info.has_base_time);

    const lp_prof_events_info *ia = lp_prof_events_info_get(a), *ib = lp_prof_events_info_get(b);
    assert_int_equal(ib->base_time_ns, ia->base_time_ns);
    assert_int_equal(ib->window_start_ns, ia->window_start_ns);
    assert_int_equal(ib->window_end_ns, ia->window_end_ns);
    assert_int_equal(ib->pid, 4242);
    assert_int_equal(ib->record_shapes, 1);
    assert_int_equal(ib->profile_memory, 1);
    assert_int_equal(ib->with_flops, 1);
    assert_int_equal(ib->hw_counters, 1);
    assert_string_equal(lp_prof_events_thread_name(b, 4242, 4243), "thread 4243 (main)");

    for (size_t i = 0; i < lp_prof_events_count(a); i++) {
        const lp_prof_event *x = lp_prof_events_get(a, i), *y = by_name(b, x->name);
        assert_string_equal(y->cat, x->cat);
        assert_int_equal(y->ph, x->ph);
        assert_int_equal(y->pid, x->pid);
        assert_int_equal(y->tid, x->tid);
        assert_int_equal(y->ts_ns, x->ts_ns);
        assert_int_equal(y->dur_ns, x->dur_ns);
        assert_int_equal(y->n_inputs, x->n_inputs);
        char sa[256], sb[256];
        lp_prof_event_format_shapes(x, sa, sizeof sa);
        lp_prof_event_format_shapes(y, sb, sizeof sb);
        assert_string_equal(sb, sa);
        for (int k = 0; x->input_types && k < x->n_inputs; k++)
            assert_string_equal(y->input_types[k], x->input_types[k]);
        assert_true(y->flops == x->flops);
        assert_true(y->bytes == x->bytes);
        assert_int_equal(y->hw_cycles, x->hw_cycles);
        assert_int_equal(y->hw_instructions, x->hw_instructions);
        assert_int_equal(y->hw_cache_misses, x->hw_cache_misses);
        assert_int_equal(y->correlation, x->correlation);
        assert_int_equal(y->mem_bytes, x->mem_bytes);
        assert_int_equal(y->mem_total_allocated, x->mem_total_allocated);
        assert_int_equal(y->mem_total_reserved, x->mem_total_reserved);
        assert_int_equal(y->mem_addr, x->mem_addr);
        assert_int_equal(y->mem_device_type, x->mem_device_type);
        assert_int_equal(y->mem_device_id, x->mem_device_id);
        assert_int_equal(y->mem_category, x->mem_category);
    }
    lp_prof_events_free(a);
    lp_prof_events_free(b);
}

static void test_roundtrip_gzip(void **state)
{
    (void)state;
    roundtrip(".gz");
}

static void test_roundtrip_plain(void **state)
{
    (void)state;
    roundtrip("");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_gzip),
        cmocka_unit_test(test_roundtrip_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
