/* Analysis over a hand-built event list (data/keyavg_spec.txt): key-average tables equal
 * torch's own text byte for byte (data/keyavg_golden_*.txt from gen_keyavg_golden.py),
 * row values, CSV, sort parsing, the per-step breakdown, collapsed stacks, and the memory
 * timeline and summary written from the same list, parsed back with cJSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/prof.h"

static char tmpdir[64];

static lp_prof_events *load_spec(void)
{
    FILE *fp = fopen("tests/prof/data/keyavg_spec.txt", "r");
    assert_non_null(fp);
    lp_prof_events *ev;
    assert_int_equal(lp_prof_events_new(&ev), LP_OK);
    lp_prof_events_info *in = lp_prof_events_info_of(ev);
    in->pid = 100;
    in->base_time_ns = 1700000000000000000LL;
    in->window_end_ns = 2000000;
    in->profile_memory = in->with_flops = in->record_shapes = 1;
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\n")] = '\0';
        lp_prof_event e;
        lp_prof_event_init(&e);
        e.pid = 100;
        if (line[0] == 'X') {
            long long tid, ts, dur;
            double fl;
            char cat[64], shapes[256];
            int off;
            assert_int_equal(sscanf(line, "X %lld %63s %lld %lld %lf %255s %n", &tid, cat, &ts,
                                    &dur, &fl, shapes, &off),
                             6);
            e.name = line + off;
            e.cat = cat;
            e.tid = tid;
            e.ts_ns = ts;
            e.dur_ns = dur;
            e.flops = fl > 0 ? fl : -1;
            int32_t ranks[8];
            int64_t dims[32];
            int nd = 0;
            if (strcmp(shapes, "-") != 0) {
                e.n_inputs = 0;
                for (char *tok = strtok(shapes, ","); tok; tok = strtok(NULL, ",")) {
                    ranks[e.n_inputs] = 0;
                    if (strcmp(tok, "s") != 0)
                        for (char *d = tok; *d;) {
                            dims[nd++] = strtoll(d, &d, 10);
                            ranks[e.n_inputs]++;
                            if (*d == 'x')
                                d++;
                        }
                    e.n_inputs++;
                }
                e.input_ranks = ranks;
                e.input_dims = dims;
            }
            assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
        } else if (line[0] == 'M') {
            long long tid, ts, bytes;
            assert_int_equal(sscanf(line, "M %lld %lld %lld", &tid, &ts, &bytes), 3);
            e.name = "[memory]";
            e.cat = "cpu_instant_event";
            e.ph = 'i';
            e.tid = tid;
            e.ts_ns = ts;
            e.mem_bytes = bytes;
            e.mem_category = bytes > 1000000000 ? LP_MEM_CATEGORY_ACTIVATION
                                                 : LP_MEM_CATEGORY_PARAMETER;
            assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
        }
    }
    fclose(fp);
    lp_prof_events_sort(ev);
    return ev;
}

static void test_tables_match_torch(void **state)
{
    (void)state;
    lp_prof_events *ev = load_spec();
    int cases = 0;
    for (int k = 0; k < 16; k++) {
        char path[128];
        snprintf(path, sizeof path, "tests/prof/data/keyavg_golden_%d.txt", k);
        char *want;
        size_t len;
        if (lp_file_read_all(path, &want, &len) != LP_OK)
            break;
        int group, row_limit, top;
        char sort[64], unit[8];
        assert_int_equal(sscanf(want, "# group=%d sort_by=%63s row_limit=%d top=%d unit=%7s",
                                &group, sort, &row_limit, &top, unit),
                         5);
        lp_prof_keyavg_opts o;
        lp_prof_keyavg_opts_init(&o);
        o.group_by_input_shape = group;
        assert_int_equal(lp_prof_sort_parse(sort, &o.sort_by), LP_OK);
        o.row_limit = row_limit;
        o.top_level_only = top;
        o.time_unit = strcmp(unit, "-") == 0 ? NULL : unit;
        lp_prof_keyavg ka;
        assert_int_equal(lp_prof_keyavg_build(ev, &o, &ka), LP_OK);
        char *got;
        assert_int_equal(lp_prof_keyavg_table(&ka, &o, &got), LP_OK);
        const char *body = strchr(want, '\n') + 1;
        if (strcmp(got, body) != 0)
            fprintf(stderr, "case %d differs:\n--- torch\n%s--- loupe\n%s", k, body, got);
        assert_string_equal(got, body);
        free(got);
        lp_prof_keyavg_free(&ka);
        free(want);
        cases++;
    }
    assert_true(cases >= 6);
    lp_prof_events_free(ev);
}

static const lp_prof_keyavg_row *row(const lp_prof_keyavg *ka, const char *key)
{
    for (size_t i = 0; i < ka->n; i++)
        if (strcmp(ka->rows[i].key, key) == 0)
            return &ka->rows[i];
    return NULL;
}

static void test_row_values_and_csv(void **state)
{
    (void)state;
    lp_prof_events *ev = load_spec();
    lp_prof_keyavg_opts o;
    lp_prof_keyavg_opts_init(&o);
    lp_prof_keyavg ka;
    assert_int_equal(lp_prof_keyavg_build(ev, &o, &ka), LP_OK);
    const lp_prof_keyavg_row *mm = row(&ka, "aten::mm"), *st = row(&ka, "ProfilerStep*");
    assert_non_null(mm);
    assert_int_equal(mm->count, 4);
    assert_true(fabs(mm->cpu_total_us - (220.5 + 180.25 + 360 + 300)) < 1e-9);
    assert_true(fabs(mm->self_cpu_us - mm->cpu_total_us) < 1e-9); /* leaves */
    assert_true(mm->flops == 8192 * 2 + 2048 + 128);
    assert_non_null(st);
    assert_int_equal(st->count, 2);
    assert_true(fabs(st->cpu_total_us - 1900) < 1e-9);
    /* self = step minus its direct children (forward, optimizer; sum, long annotation) */
    assert_true(fabs(st->self_cpu_us - (1000 - 590 - 290 + 900 - 490 - 100 - 2.5)) < 1e-9);
    /* the duplicate aten::copy_ child is folded into its parent, as torch does */
    assert_int_equal(row(&ka, "aten::copy_")->count, 1);
    assert_true(fabs(row(&ka, "aten::copy_")->self_cpu_us - 50) < 1e-9);
    /* memory: inclusive over the op's interval, any thread (thread 2's 3000 + 77 too) */
    assert_int_equal(row(&ka, "aten::linear")->cpu_mem,
                     1024 + 4096 - 1024 + 2048000 + 3000 + 77 + 100);
    assert_null(row(&ka, "[memory]"));
    /* self totals add up to the sum of all self times */
    double sum = 0;
    for (size_t i = 0; i < ka.n; i++)
        sum += ka.rows[i].self_cpu_us;
    assert_true(fabs(sum - ka.sum_self_cpu_us) < 1e-6);
    assert_true(fabs(ka.sum_self_cpu_us - 2250) < 1e-9);
    /* descending by self CPU */
    for (size_t i = 1; i < ka.n; i++)
        assert_true(ka.rows[i - 1].self_cpu_us >= ka.rows[i].self_cpu_us);
    lp_prof_keyavg_sort(&ka, LP_PROF_SORT_COUNT);
    assert_string_equal(ka.rows[0].key, "aten::mm");

    snprintf(tmpdir, sizeof tmpdir, "/tmp/lp_prof_ka_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char path[128];
    snprintf(path, sizeof path, "%s/ka.csv", tmpdir);
    assert_int_equal(lp_prof_keyavg_write_csv(&ka, path), LP_OK);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[512];
    assert_non_null(fgets(line, sizeof line, fp));
    assert_true(strncmp(line, "name,input_shapes,calls,self_cpu_us", 35) == 0);
    assert_non_null(fgets(line, sizeof line, fp));
    assert_true(strncmp(line, "aten::mm,,4,1060.750,", 21) == 0);
    int rows = 1;
    while (fgets(line, sizeof line, fp))
        rows++;
    fclose(fp);
    assert_int_equal(rows, (int)ka.n);
    lp_prof_keyavg_free(&ka);

    lp_prof_sort s;
    assert_int_equal(lp_prof_sort_parse("self_cuda_time_total", &s), LP_OK);
    assert_int_equal(s, LP_PROF_SORT_SELF_DEVICE_TIME_TOTAL);
    assert_int_equal(lp_prof_sort_parse("xpu_memory_usage", &s), LP_OK);
    assert_int_equal(s, LP_PROF_SORT_DEVICE_MEMORY_USAGE);
    assert_int_equal(lp_prof_sort_parse("bogus", &s), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "bogus"));
    lp_prof_events_free(ev);
}

static void test_device_time(void **state)
{
    (void)state;
    /* a kernel linked by External id to its CPU op: Self CUDA columns appear */
    lp_prof_events *ev;
    assert_int_equal(lp_prof_events_new(&ev), LP_OK);
    lp_prof_event e;
    lp_prof_event_init(&e);
    e.name = "aten::mm", e.cat = "cpu_op", e.tid = 1, e.ts_ns = 0, e.dur_ns = 10000, e.external_id = 7;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
    e.name = "cudaLaunchKernel", e.cat = "cuda_runtime", e.ts_ns = 1000, e.dur_ns = 2000;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
    e.name = "gemm_kernel", e.cat = "kernel", e.pid = 0, e.tid = 7, e.ts_ns = 4000, e.dur_ns = 5000;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
    lp_prof_events_sort(ev);
    lp_prof_keyavg_opts o;
    lp_prof_keyavg_opts_init(&o);
    lp_prof_keyavg ka;
    assert_int_equal(lp_prof_keyavg_build(ev, &o, &ka), LP_OK);
    assert_int_equal(ka.has_device_time, 1);
    assert_true(fabs(row(&ka, "aten::mm")->self_device_us - 5) < 1e-9);
    assert_true(fabs(row(&ka, "aten::mm")->self_cpu_us - 8) < 1e-9);
    assert_true(fabs(row(&ka, "gemm_kernel")->self_device_us - 5) < 1e-9);
    assert_true(fabs(ka.sum_self_device_us - 5) < 1e-9);
    char *t;
    assert_int_equal(lp_prof_keyavg_table(&ka, &o, &t), LP_OK);
    assert_non_null(strstr(t, "Self CUDA %"));
    assert_non_null(strstr(t, "Self CUDA time total: 5.000us\n"));
    free(t);
    lp_prof_keyavg_free(&ka);
    lp_prof_step_row *rows;
    size_t n;
    assert_int_equal(lp_prof_step_breakdown(ev, &rows, &n), LP_OK);
    assert_int_equal(n, 1); /* no ProfilerStep: the CPU span is step 0 */
    assert_int_equal(rows[0].dur_ns, 10000);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_KERNEL], 5000);
    /* runtime [1000,3000) does not overlap the kernel [4000,9000) */
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_RUNTIME], 2000);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_CPU_EXEC], 3000);
    free(rows);
    lp_prof_events_free(ev);
}

static void test_step_breakdown(void **state)
{
    (void)state;
    lp_prof_events *ev = load_spec();
    lp_prof_step_row *rows;
    size_t n;
    assert_int_equal(lp_prof_step_breakdown(ev, &rows, &n), LP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].step, 0);
    assert_int_equal(rows[0].dur_ns, 1000000);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_OPTIMIZER], 290000);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_CPU_EXEC], 590000);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_OTHER], 120000);
    assert_int_equal(rows[1].step, 1);
    assert_int_equal(rows[1].part_ns[LP_PROF_STEP_PART_CPU_EXEC], 592500);
    assert_int_equal(rows[1].part_ns[LP_PROF_STEP_PART_OTHER], 307500);
    for (size_t i = 0; i < n; i++) {
        int64_t s = 0;
        for (int p = 0; p < LP_PROF_STEP_PART__COUNT; p++)
            s += rows[i].part_ns[p];
        assert_int_equal(s, rows[i].dur_ns);
    }
    free(rows);
    assert_string_equal(lp_prof_step_part_name(LP_PROF_STEP_PART_DATALOADER), "dataloader");
    lp_prof_events_free(ev);
}

static lp_prof_events *mini(const int64_t (*spec)[3], const char *const *names, int n)
{
    lp_prof_events *ev;
    assert_int_equal(lp_prof_events_new(&ev), LP_OK);
    for (int i = 0; i < n; i++) {
        lp_prof_event e;
        lp_prof_event_init(&e);
        e.name = names[i];
        e.cat = "user_annotation";
        e.tid = spec[i][0];
        e.ts_ns = spec[i][1];
        e.dur_ns = spec[i][2];
        assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
    }
    lp_prof_events_sort(ev);
    return ev;
}

static void test_step_breakdown_gaps_and_overlap(void **state)
{
    (void)state;
    /* disjoint steps with a gap; one range spans the gap */
    const int64_t a[][3] = {{1, 0, 100}, {1, 200, 100}, {2, 50, 200}, {1, 210, 20}};
    const char *an[] = {"ProfilerStep#0", "ProfilerStep#1", "op", "Optimizer.step#x"};
    lp_prof_events *ev = mini(a, an, 4);
    lp_prof_step_row *rows;
    size_t n;
    assert_int_equal(lp_prof_step_breakdown(ev, &rows, &n), LP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_CPU_EXEC], 50);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_OTHER], 50);
    assert_int_equal(rows[1].part_ns[LP_PROF_STEP_PART_OPTIMIZER], 20);
    assert_int_equal(rows[1].part_ns[LP_PROF_STEP_PART_CPU_EXEC], 30);
    assert_int_equal(rows[1].part_ns[LP_PROF_STEP_PART_OTHER], 50);
    free(rows);
    lp_prof_events_free(ev);
    /* overlapping steps (two threads stepping): each step sees what overlaps it */
    const int64_t b[][3] = {{1, 0, 100}, {2, 50, 100}, {3, 60, 30}};
    const char *bn[] = {"ProfilerStep#0", "ProfilerStep#1", "enumerate(DataLoader)#it.__next__"};
    ev = mini(b, bn, 3);
    assert_int_equal(lp_prof_step_breakdown(ev, &rows, &n), LP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_DATALOADER], 30);
    assert_int_equal(rows[0].part_ns[LP_PROF_STEP_PART_OTHER], 70);
    assert_int_equal(rows[1].part_ns[LP_PROF_STEP_PART_DATALOADER], 30);
    assert_int_equal(rows[1].part_ns[LP_PROF_STEP_PART_OTHER], 70);
    free(rows);
    lp_prof_events_free(ev);
}

static void test_stacks(void **state)
{
    (void)state;
    lp_prof_events *ev = load_spec();
    char path[128];
    snprintf(path, sizeof path, "%s/stacks.txt", tmpdir);
    assert_int_equal(lp_prof_export_stacks(ev, path), LP_OK);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[512];
    long long sum = 0;
    int found_mm = 0, found_long = 0, lines = 0;
    while (fgets(line, sizeof line, fp)) {
        char *sp = strrchr(line, ' ');
        assert_non_null(sp);
        long long v = atoll(sp + 1);
        assert_true(v > 0);
        sum += v;
        *sp = '\0';
        assert_null(strchr(line, ' ')); /* frames keep no spaces */
        if (strcmp(line, "ProfilerStep#0;forward;aten::linear;aten::mm") == 0) {
            assert_int_equal(v, 401); /* both linears' mm: 220.5 + 180.25 us */
            found_mm = 1;
        }
        if (strcmp(line, "ProfilerStep#1;a_very_long_annotation_name_that_goes_past_the_name_"
                         "column_width") == 0) {
            assert_int_equal(v, 3);
            found_long = 1;
        }
        lines++;
    }
    fclose(fp);
    assert_true(found_mm && found_long);
    /* total self time of the list is 2250 us; each line rounds by at most 0.5 us */
    assert_true(llabs(sum - 2250) <= lines);
    lp_prof_events_free(ev);
}

static void test_memory_timeline_and_summary(void **state)
{
    (void)state;
    lp_prof_events *ev = load_spec();
    lp_prof_events_info *in = lp_prof_events_info_of(ev);
    in->has_mem_baseline = 1;
    in->mem_baseline[LP_MEM_CATEGORY_PARAMETER] = 500;
    in->mem_baseline[LP_MEM_CATEGORY_QUANTIZED_WEIGHT] = 20;
    in->mem_baseline[LP_MEM_CATEGORY_GRADIENT] = 7;
    in->mem_baseline[LP_MEM_CATEGORY_OTHER] = 3;
    char path[128];
    snprintf(path, sizeof path, "%s/mt.json", tmpdir);
    assert_int_equal(lp_prof_export_memory_timeline(ev, path), LP_OK);
    char *txt;
    size_t len;
    assert_int_equal(lp_file_read_all(path, &txt, &len), LP_OK);
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    assert_non_null(j);
    cJSON *times = cJSON_GetArrayItem(j, 0), *sizes = cJSON_GetArrayItem(j, 1);
    /* baseline point + 9 memory events at distinct microseconds */
    assert_int_equal(cJSON_GetArraySize(times), 10);
    assert_int_equal(cJSON_GetArraySize(sizes), 10);
    assert_true(cJSON_GetArrayItem(times, 0)->valuedouble == 1700000000000000.0);
    assert_true(cJSON_GetArrayItem(times, 1)->valuedouble == 1700000000000025.0);
    cJSON *s0 = cJSON_GetArrayItem(sizes, 0);
    assert_int_equal(cJSON_GetArraySize(s0), 9);
    assert_int_equal(cJSON_GetArrayItem(s0, 0)->valueint, 0);   /* unused */
    assert_int_equal(cJSON_GetArrayItem(s0, 1)->valueint, 520); /* parameter + quantized */
    assert_int_equal(cJSON_GetArrayItem(s0, 6)->valueint, 7);   /* gradient */
    assert_int_equal(cJSON_GetArrayItem(s0, 8)->valueint, 3);   /* unknown <- other */
    cJSON *last = cJSON_GetArrayItem(sizes, 9);
    /* all small events are "parameter" in the spec, the 2 GB one "activation" */
    assert_true(cJSON_GetArrayItem(last, 1)->valuedouble ==
                520 + 1024 + 4096 - 1024 + 2048000 - 512 + 100 + 3000 + 77);
    assert_true(cJSON_GetArrayItem(last, 5)->valuedouble == 2000000000.0);
    cJSON_Delete(j);

    snprintf(path, sizeof path, "%s/mt.html", tmpdir);
    assert_int_equal(lp_prof_export_memory_timeline(ev, path), LP_OK);
    assert_int_equal(lp_file_read_all(path, &txt, &len), LP_OK);
    assert_non_null(strstr(txt, "<svg"));
    assert_non_null(strstr(txt, "class=\"cat-activation\""));
    assert_non_null(strstr(txt, "Max memory allocated: 1.86 GiB"));
    assert_non_null(strstr(txt, "Time (ms)"));
    assert_null(strstr(txt, "<script src"));
    assert_null(strstr(txt, "src=\"http"));
    free(txt);
    snprintf(path, sizeof path, "%s/mt.png", tmpdir);
    assert_int_equal(lp_prof_export_memory_timeline(ev, path), LP_STATUS_INVALID_ARG);

    snprintf(path, sizeof path, "%s/summary.json", tmpdir);
    assert_int_equal(lp_prof_export_summary(ev, path), LP_OK);
    assert_int_equal(lp_file_read_all(path, &txt, &len), LP_OK);
    j = cJSON_Parse(txt);
    free(txt);
    assert_non_null(j);
    cJSON *steps = cJSON_GetObjectItem(j, "steps");
    assert_int_equal(cJSON_GetObjectItem(steps, "count")->valueint, 2);
    assert_true(cJSON_GetObjectItem(steps, "mean_ms")->valuedouble == 0.95);
    assert_true(cJSON_GetObjectItem(steps, "max_ms")->valuedouble == 1.0);
    assert_true(cJSON_GetArrayItem(cJSON_GetObjectItem(steps, "numbers"), 1)->valueint == 1);
    cJSON *bd = cJSON_GetObjectItem(j, "breakdown_ms");
    assert_true(fabs(cJSON_GetObjectItem(bd, "optimizer")->valuedouble - 0.29) < 1e-9);
    cJSON *mem = cJSON_GetObjectItem(j, "memory");
    cJSON *wp = cJSON_GetObjectItem(mem, "window_peak_bytes");
    assert_true(cJSON_GetObjectItem(wp, "activation")->valuedouble == 2000000000.0);
    assert_true(cJSON_GetObjectItem(wp, "quantized_weight")->valuedouble == 20);
    cJSON *top = cJSON_GetObjectItem(j, "top_ops");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(top, 0), "name")->valuestring,
                        "aten::mm");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(top, 0), "calls")->valueint, 4);
    cJSON_Delete(j);
    lp_prof_events_free(ev);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_match_torch),
        cmocka_unit_test(test_row_values_and_csv),
        cmocka_unit_test(test_device_time),
        cmocka_unit_test(test_step_breakdown),
        cmocka_unit_test(test_step_breakdown_gaps_and_overlap),
        cmocka_unit_test(test_stacks),
        cmocka_unit_test(test_memory_timeline_and_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
