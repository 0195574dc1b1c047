/* The Kineto trace reader: time conversion (relative, absolute epoch µs, floats and
 * ints), string pids, shapes, [memory] instants, gzip (multi-member, truncated,
 * garbage), and the errors for files that are not traces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "loupe/report.h"

/* Parses text into a fresh list (caller frees). */
static lp_status parse(const char *text, lp_prof_events **ev, lp_trace_info *info)
{
    assert_int_equal(lp_prof_events_new(ev), LP_OK);
    return lp_trace_parse("t.json", text, strlen(text), *ev, info);
}

static const lp_prof_event *at(lp_prof_events *ev, size_t i)
{
    assert_true(i < lp_prof_events_count(ev));
    return lp_prof_events_get(ev, i);
}

static const char *shapes(const lp_prof_event *e)
{
    static char buf[256];
    lp_prof_event_format_shapes(e, buf, sizeof buf);
    return buf;
}

static void test_new_style_relative_float(void **state)
{
    (void)state;
    lp_prof_events *ev;
    lp_trace_info info;
    const char *t = "{\"schemaVersion\":1,\"record_shapes\":1,\"baseTimeNanoseconds\": 1700000000000000001,"
                    "\"traceEvents\":["
                    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":100,\"tid\":101,"
                    "\"ts\":20.125,\"dur\":30.5,\"args\":{\"External id\":7,\"Input Dims\":[[64,768],[768,768],[]],"
                    "\"Input type\":[\"float\",\"float\",\"Scalar\"],\"flops\":1024}},"
                    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":40,\"dur\":12,"
                    "\"args\":{\"External id\":7,\"correlation\":501}},"
                    "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":100,"
                    "\"tid\":101,\"ts\":21,\"args\":{\"Device Type\":0,\"Device Id\":-1,\"Addr\":4096,"
                    "\"Bytes\":-512,\"Total Allocated\":1024,\"Total Reserved\":2048}},"
                    "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"Iteration Start: PyTorch Profiler\",\"pid\":\"Traces\","
                    "\"tid\":\"Trace PyTorch Profiler\",\"ts\":0},"
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":100,\"tid\":101,\"ts\":0,"
                    "\"args\":{\"name\":\"thread 101 (main)\"}},"
                    "{\"ph\":\"s\",\"id\":501,\"pid\":100,\"tid\":101,\"ts\":25,\"cat\":\"ac2g\",\"name\":\"ac2g\"},"
                    "{\"ph\":\"X\",\"cat\":\"Trace\",\"name\":\"PyTorch Profiler (0)\",\"pid\":\"Spans\","
                    "\"tid\":\"PyTorch Profiler\",\"ts\":1.5,\"dur\":100}]}";
    assert_int_equal(parse(t, &ev, &info), LP_OK);
    assert_int_equal(lp_prof_events_count(ev), 3);
    const lp_prof_event *mm = at(ev, 0), *k = at(ev, 1), *mem = at(ev, 2);
    assert_string_equal(mm->name, "aten::mm");
    assert_string_equal(mm->cat, "cpu_op");
    assert_int_equal(mm->ph, 'X');
    assert_int_equal(mm->ts_ns, 20125);
    assert_int_equal(mm->dur_ns, 30500);
    assert_int_equal(mm->pid, 100);
    assert_int_equal(mm->tid, 101);
    assert_int_equal(mm->external_id, 7);
    assert_string_equal(shapes(mm), "[[64, 768], [768, 768], []]");
    assert_string_equal(mm->input_types[2], "Scalar");
    assert_true(mm->flops == 1024.0);
    assert_int_equal(k->correlation, 501);
    assert_int_equal(k->ts_ns, 40000);
    assert_true(k->flops < 0);
    assert_int_equal(mem->ph, 'i');
    assert_int_equal(mem->mem_bytes, -512);
    assert_int_equal(mem->mem_total_allocated, 1024);
    assert_int_equal(mem->mem_total_reserved, 2048);
    assert_int_equal(mem->mem_addr, 4096);
    assert_int_equal(mem->mem_device_id, -1);
    assert_string_equal(lp_prof_events_thread_name(ev, 100, 101), "thread 101 (main)");
    const lp_prof_events_info *pi = lp_prof_events_info_get(ev);
    assert_int_equal(pi->base_time_ns, 1700000000000000001ll); /* exact, though a double cannot hold it */
    assert_int_equal(pi->window_start_ns, 1500);
    assert_int_equal(pi->window_end_ns, 101500);
    assert_int_equal(pi->pid, 100);
    assert_int_equal(pi->record_shapes, 1);
    assert_int_equal(pi->profile_memory, 1);
    assert_int_equal(pi->with_flops, 1);
    assert_true(info.has_base_time);
    assert_false(info.absolute_ts);
    assert_int_equal(info.n_items, 7);
    assert_int_equal(info.n_complete, 2);
    assert_int_equal(info.n_instants, 1);
    assert_int_equal(info.n_skipped, 0);
    assert_int_equal(info.schema_version, 1);
    lp_prof_events_free(ev);
}

static void test_old_style_absolute_int(void **state)
{
    (void)state;
    lp_prof_events *ev;
    lp_trace_info info;
    /* Absolute epoch µs as ints (PyTorch <= 2.3) and fractional ones: the integer part must
     * survive exactly (a naive ts*1000 in double would be off by up to 128 ns). */
    const char *t = "{\"traceEvents\":["
                    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"ProfilerStep#3\",\"pid\":7,\"tid\":\"7\","
                    "\"ts\":1694039968955744,\"dur\":1500},"
                    "{\"ph\":\"X\",\"cat\":\"Operator\",\"name\":\"aten::add\",\"pid\":7,\"tid\":7,"
                    "\"ts\":1694039968955800.5,\"dur\":12,\"args\":{\"Input dims\":[[2,3],[2,3],[]]}},"
                    "{\"ph\":\"X\",\"name\":\"no cat\",\"pid\":\"Spans\",\"ts\":1694039968955801,\"dur\":0,"
                    "\"args\":{\"Input Dims\":[[[2,3],[4]],[5]]}}"
                    "]}";
    assert_int_equal(parse(t, &ev, &info), LP_OK);
    assert_int_equal(lp_prof_events_count(ev), 3);
    assert_int_equal(at(ev, 0)->ts_ns, 1694039968955744000ll);
    assert_int_equal(at(ev, 0)->dur_ns, 1500000);
    assert_int_equal(at(ev, 0)->tid, 7); /* "7" as a string is still thread 7 */
    assert_int_equal(at(ev, 0)->n_inputs, -1);
    assert_int_equal(at(ev, 1)->ts_ns, 1694039968955800500ll);
    assert_string_equal(shapes(at(ev, 1)), "[[2, 3], [2, 3], []]");
    assert_string_equal(at(ev, 2)->cat, "");
    assert_int_equal(at(ev, 2)->pid, -1);
    assert_int_equal(at(ev, 2)->tid, -1);
    assert_string_equal(shapes(at(ev, 2)), "[[], [5]]"); /* a TensorList input is kept as [] */
    assert_int_equal(lp_prof_events_info_get(ev)->base_time_ns, 0);
    assert_false(info.has_base_time);
    assert_true(info.absolute_ts);
    assert_int_equal(info.min_ts_ns, 1694039968955744000ll);
    lp_prof_events_free(ev);
}

static void test_malformed_events_skipped(void **state)
{
    (void)state;
    lp_prof_events *ev;
    lp_trace_info info;
    const char *t = "{\"traceEvents\":[5,\"x\",null,{\"ph\":\"X\",\"name\":\"nodur\",\"ts\":1},"
                    "{\"ph\":\"X\",\"name\":\"neg\",\"ts\":1,\"dur\":-3},{\"ph\":\"X\",\"ts\":1,\"dur\":3},"
                    "{\"ph\":\"X\",\"name\":\"huge\",\"ts\":1e300,\"dur\":3},{\"ph\":\"B\",\"name\":\"b\",\"ts\":1},"
                    "{\"ph\":\"X\",\"name\":\"ok\",\"ts\":\"1\",\"dur\":3},{\"ph\":\"X\",\"name\":\"ok\",\"ts\":2,\"dur\":3}]}";
    assert_int_equal(parse(t, &ev, &info), LP_OK);
    assert_int_equal(lp_prof_events_count(ev), 1);
    assert_int_equal(at(ev, 0)->ts_ns, 2000);
    assert_int_equal(info.n_items, 10);
    assert_int_equal(info.n_skipped, 8);
    assert_int_equal(info.n_unsupported, 1);
    lp_prof_events_free(ev);
}

static void test_not_a_trace(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"schemaVersion\":1}", "t.json: not a Kineto trace: no \"traceEvents\" array"},
        {"{\"traceEvents\":{}}", "t.json: \"traceEvents\" is not an array"},
        {"[1,2]", "t.json: not a Kineto trace: top level is not an object"},
        {"{\"traceEvents\":[\n{\"ph\":\"X\",,}]}", "t.json: not valid JSON (at line 2, column"},
        {"{\"traceEvents\":[{\"ph\":\"X\"", "t.json: not valid JSON (unexpected end of data at line 1"},
        {"", "t.json: not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lp_prof_events *ev;
        lp_trace_info info;
        assert_int_equal(parse(bad[i].text, &ev, &info), LP_STATUS_FORMAT);
        if (!strstr(lp_err_msg(), bad[i].msg))
            fail_msg("case %zu: message '%s' lacks '%s'", i, lp_err_msg(), bad[i].msg);
        lp_prof_events_free(ev);
    }
}

/* gzip-compresses src into a fresh buffer. */
static unsigned char *gz(const char *src, size_t *n)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&zs, strlen(src));
    unsigned char *out = malloc(cap);
    zs.next_in = (Bytef *)src;
    zs.avail_in = (uInt)strlen(src);
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *n = cap - zs.avail_out;
    deflateEnd(&zs);
    return out;
}

static void test_gunzip(void **state)
{
    (void)state;
    const char *a = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",";
    const char *b = "\"ts\":1,\"dur\":2}]}";
    size_t na, nb;
    unsigned char *ga = gz(a, &na), *gb = gz(b, &nb);
    unsigned char *both = malloc(na + nb + 4);
    memcpy(both, ga, na);
    memcpy(both + na, gb, nb);
    char *text;
    size_t len;
    assert_int_equal(lp_trace_gunzip("m.gz", both, na + nb, &text, &len), LP_OK);
    assert_int_equal(len, strlen(a) + strlen(b));
    assert_memory_equal(text, a, strlen(a));
    assert_string_equal(text + strlen(a), b);
    free(text);
    /* Truncated anywhere inside the second member. */
    for (size_t cut = na + 1; cut < na + nb; cut += 3) {
        assert_int_equal(lp_trace_gunzip("m.gz", both, cut, &text, &len), LP_STATUS_FORMAT);
        assert_null(text);
        assert_non_null(strstr(lp_err_msg(), "m.gz: truncated gzip data"));
    }
    /* Garbage after a complete member. */
    memcpy(both + na, "junk", 4);
    assert_int_equal(lp_trace_gunzip("m.gz", both, na + 4, &text, &len), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "trailing garbage"));
    /* Corrupt deflate data. */
    memcpy(both, ga, na);
    for (size_t i = 12; i < na - 8; i++)
        both[i] ^= 0x5a;
    assert_int_not_equal(lp_trace_gunzip("m.gz", both, na, &text, &len), LP_OK);
    free(ga);
    free(gb);
    free(both);
}

static void test_load_files(void **state)
{
    (void)state;
    lp_prof_events *ev;
    lp_trace_info info;
    assert_int_equal(lp_trace_load("tests/fixtures/no/such.json", &ev, &info), LP_STATUS_IO);
    assert_null(ev);
    assert_non_null(strstr(lp_err_msg(), "tests/fixtures/no/such.json: cannot open"));
    /* PyTorch's own trace (gzip): every complete event but the Trace span comes through. */
    assert_int_equal(lp_trace_load("tests/fixtures/torch_trace/worker0.pt.trace.json.gz", &ev, &info), LP_OK);
    assert_true(info.has_base_time);
    assert_int_equal(info.n_complete, 495); /* 483 cpu_op + 12 user_annotation (python's count) */
    assert_int_equal(info.n_skipped, 0);
    assert_int_equal(lp_prof_events_count(ev), 495);
    assert_true(lp_prof_events_info_get(ev)->record_shapes);
    lp_prof_events_free(ev);
    assert_int_equal(lp_trace_load("fuzz/seeds/kineto_trace/two_members.json.gz", &ev, &info), LP_OK);
    assert_int_equal(info.n_complete, 3);
    assert_int_equal(info.n_instants, 1);
    lp_prof_events_free(ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_style_relative_float), cmocka_unit_test(test_old_style_absolute_int),
        cmocka_unit_test(test_malformed_events_skipped), cmocka_unit_test(test_not_a_trace),
        cmocka_unit_test(test_gunzip),                   cmocka_unit_test(test_load_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
