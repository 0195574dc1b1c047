/* Exporters on a live session, parsed back: the Kineto trace (key order, distributedInfo
 * with HTA's "rank": N spacing, ts/dur as "<int>.<3 digits>", nesting, args, metadata,
 * window markers, [memory] instants, gzip round trip through zlib), the default handler's
 * files and names, key averages consistent with the trace, and write errors. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "loupe/prof.h"

static char tmpdir[64];
static lp_prof_events *saved;

static lp_status keep_and_export(const lp_prof_events *ev, void *user)
{
    (void)user;
    char p[256];
    snprintf(p, sizeof p, "%s/t.json", tmpdir);
    lp_status st = lp_prof_export_chrome(ev, p);
    if (st != LP_OK)
        return st;
    snprintf(p, sizeof p, "%s/t.json.gz", tmpdir);
    st = lp_prof_export_chrome(ev, p);
    if (st != LP_OK)
        return st;
    lp_prof_keyavg_opts o;
    lp_prof_keyavg_opts_init(&o);
    o.row_limit = 0;
    lp_prof_keyavg ka;
    st = lp_prof_keyavg_build(ev, &o, &ka);
    if (st != LP_OK)
        return st;
    snprintf(p, sizeof p, "%s/ka.txt", tmpdir);
    st = lp_prof_keyavg_write_table(&ka, &o, p);
    lp_prof_keyavg_free(&ka);
    return st;
}

static volatile double sink;
static void spin(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += i * 0.5;
    sink = x;
}

static void workload_step(void)
{
    static const lp_prof_op_desc mm = {"aten::mm", LP_PROF_CAT_CPU_OP, 2, {2, 2}, {"float", "float"}};
    static int buf[4];
    LP_PROF_SCOPE("forward");
    int64_t d[4] = {3, 4, 4, 5};
    for (int i = 0; i < 3; i++) {
        LP_PROF_OP_SCOPE(&mm, d, 120, 188);
        lp_prof_mem_alloc(&buf[i], 1000 + (uint64_t)i, LP_MEM_CATEGORY_ACTIVATION);
        spin(2000);
    }
#pragma omp parallel num_threads(2)
    {
        LP_PROF_SCOPE("omp_part");
        spin(3000);
    }
    for (int i = 0; i < 3; i++)
        lp_prof_mem_free(&buf[i], 1000 + (uint64_t)i, LP_MEM_CATEGORY_ACTIVATION);
}

static void run_session(lp_prof_trace_ready_fn fn, const char *out_dir, int gzip)
{
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.use_schedule = 1;
    cfg.schedule = (lp_prof_schedule){.wait = 1, .warmup = 1, .active = 2, .repeat = 1};
    cfg.record_shapes = cfg.profile_memory = cfg.with_flops = cfg.with_stack = 1;
    cfg.on_trace_ready = fn;
    cfg.out_dir = out_dir;
    cfg.worker_name = "host_123";
    cfg.use_gzip = gzip;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    for (int s = 0; s < 5; s++) {
        workload_step();
        assert_int_equal(lp_prof_step(), LP_OK);
    }
    assert_int_equal(lp_prof_stop(), LP_OK);
}

static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    assert_non_null(t);
    assert_int_equal(fread(t, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    t[n] = '\0';
    return t;
}

/* Every "ts"/"dur" value in the raw text is <digits>.<3 digits>. */
static int check_number_format(const char *t, const char *key)
{
    int n = 0;
    for (const char *p = strstr(t, key); p; p = strstr(p + 1, key)) {
        const char *v = p + strlen(key);
        if (*v == '"')
            continue; /* string pid/tid never match these keys, but be safe */
        const char *q = v;
        while (*q >= '0' && *q <= '9')
            q++;
        assert_true(q > v);
        assert_int_equal(*q, '.');
        for (int i = 1; i <= 3; i++)
            assert_true(q[i] >= '0' && q[i] <= '9');
        assert_true(q[4] == ',' || q[4] == '}');
        n++;
    }
    return n;
}

static double num(cJSON *o, const char *k)
{
    cJSON *v = cJSON_GetObjectItem(o, k);
    assert_non_null(v);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_trace_content(void **state)
{
    (void)state;
    run_session(keep_and_export, NULL, 0);
    char p[256];
    snprintf(p, sizeof p, "%s/t.json", tmpdir);
    char *t = read_text(p);
    /* kineto's key order; HTA's rank regex needs the space after the colon */
    assert_true(strncmp(t, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n"
                           "  \"distributedInfo\": {\"backend\": \"none\", \"rank\": 0, "
                           "\"world_size\": 1},\n",
                        120) == 0);
    char *te = strstr(t, "\"traceEvents\"");
    assert_non_null(te);
    assert_true(strstr(t, "\"displayTimeUnit\": \"ms\"") < te);
    assert_true(strstr(t, "\"baseTimeNanoseconds\": ") < te);
    char *tn = strstr(t, "\"traceName\": ");
    assert_non_null(tn);
    assert_true(tn > te);
    assert_string_equal(strchr(tn, '}'), "}\n"); /* last key */
    assert_true(check_number_format(t, "\"ts\": ") >= 30);
    assert_true(check_number_format(t, "\"dur\": ") >= 15);

    cJSON *j = cJSON_Parse(t);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "traceName")->valuestring, p);
    double base = num(j, "baseTimeNanoseconds");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    assert_true(fabs(base / 1e9 - (double)now.tv_sec) < 120);
    assert_int_equal((int)num(j, "profile_memory"), 1);
    assert_int_equal((int)num(j, "record_shapes"), 1);
    cJSON *evs = cJSON_GetObjectItem(j, "traceEvents");
    int n = cJSON_GetArraySize(evs);
    int steps[8], nsteps = 0, n_mm = 0, n_x = 0, n_mem = 0, has_span = 0, has_start = 0, has_end = 0;
    double span_dur = -1, end_ts = -1;
    int64_t last_ext = 0;
    int64_t alloc_sum = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_GetArrayItem(evs, i);
        cJSON *name = cJSON_GetObjectItem(e, "name");
        assert_true(cJSON_IsString(name)); /* tb_plugin indexes name on every event */
        const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
        if (strcmp(ph, "X") == 0) {
            cJSON *cat = cJSON_GetObjectItem(e, "cat");
            assert_true(cJSON_IsString(cat));
            if (strcmp(cat->valuestring, "Trace") == 0) {
                assert_string_equal(name->valuestring, "PyTorch Profiler (0)");
                assert_string_equal(cJSON_GetObjectItem(e, "pid")->valuestring, "Spans");
                span_dur = num(e, "dur");
                has_span = 1;
                continue;
            }
            n_x++;
            assert_true(cJSON_IsNumber(cJSON_GetObjectItem(e, "tid")));
            cJSON *args = cJSON_GetObjectItem(e, "args");
            int64_t ext = (int64_t)num(args, "External id");
            assert_true(ext > last_ext); /* unique, increasing in file order */
            last_ext = ext;
            assert_int_equal((int)num(args, "Ev Idx"), n_x - 1);
            if (strncmp(name->valuestring, "ProfilerStep#", 13) == 0) {
                assert_string_equal(cat->valuestring, "user_annotation");
                steps[nsteps++] = atoi(name->valuestring + 13);
            }
            if (strcmp(name->valuestring, "aten::mm") == 0) {
                n_mm++;
                assert_string_equal(cat->valuestring, "cpu_op");
                char *dims = cJSON_PrintUnformatted(cJSON_GetObjectItem(args, "Input Dims"));
                assert_string_equal(dims, "[[3,4],[4,5]]");
                free(dims);
                char *types = cJSON_PrintUnformatted(cJSON_GetObjectItem(args, "Input type"));
                assert_string_equal(types, "[\"float\",\"float\"]");
                free(types);
                assert_true(num(args, "FLOPs") == 120);
            }
            /* nesting: any later X event on this tid that starts inside ends inside */
            double ts = num(e, "ts"), end = ts + num(e, "dur");
            for (int k = i + 1; k < n; k++) {
                cJSON *f = cJSON_GetArrayItem(evs, k);
                if (strcmp(cJSON_GetObjectItem(f, "ph")->valuestring, "X") != 0 ||
                    !cJSON_IsNumber(cJSON_GetObjectItem(f, "tid")) ||
                    num(f, "tid") != num(e, "tid"))
                    continue;
                double fs = num(f, "ts");
                if (fs >= end)
                    break;
                assert_true(fs >= ts);
                assert_true(fs + num(f, "dur") <= end + 0.0015);
            }
        } else if (strcmp(ph, "i") == 0 && strcmp(name->valuestring, "[memory]") == 0) {
            n_mem++;
            assert_string_equal(cJSON_GetObjectItem(e, "s")->valuestring, "t");
            cJSON *args = cJSON_GetObjectItem(e, "args");
            assert_int_equal((int)num(args, "Device Type"), 0);
            assert_int_equal((int)num(args, "Device Id"), -1);
            int64_t b = (int64_t)num(args, "Bytes");
            assert_true(llabs(b) >= 1000 && llabs(b) <= 1002);
            alloc_sum += b;
            assert_true(num(args, "Addr") > 0);
            assert_true(num(args, "Total Allocated") == num(args, "Total Reserved"));
            assert_string_equal(cJSON_GetObjectItem(args, "Category")->valuestring, "activation");
        } else if (strcmp(name->valuestring, "Iteration Start: PyTorch Profiler") == 0) {
            has_start = 1;
            assert_true(num(e, "ts") == 0);
        } else if (strcmp(name->valuestring, "Record Window End") == 0) {
            has_end = 1;
            end_ts = num(e, "ts");
        }
    }
    /* wait 1, warmup 1, active 2: steps 2 and 3 */
    assert_int_equal(nsteps, 2);
    assert_int_equal(steps[0], 2);
    assert_int_equal(steps[1], 3);
    assert_int_equal(n_mm, 6);
    assert_int_equal(n_mem, 12);
    assert_int_equal(alloc_sum, 0);
    assert_true(has_span && has_start && has_end);
    assert_true(fabs(span_dur - end_ts) < 1e-9);
    /* thread metadata for each lane used */
    int n_threads = 0, n_proc = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_GetArrayItem(evs, i);
        const char *nm = cJSON_GetObjectItem(e, "name")->valuestring;
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "M") != 0)
            continue;
        if (strcmp(nm, "thread_name") == 0) {
            n_threads++;
            const char *tname = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "name")->valuestring;
            char want[64];
            snprintf(want, sizeof want, "thread %d (", (int)num(e, "tid"));
            assert_true(strncmp(tname, want, strlen(want)) == 0);
        }
        if (strcmp(nm, "process_name") == 0)
            n_proc++;
    }
    assert_int_equal(n_threads, 2); /* main + one OpenMP worker */
    assert_int_equal(n_proc, 1);

    /* gzip round trip: the .gz decompresses to the same events */
    snprintf(p, sizeof p, "%s/t.json.gz", tmpdir);
    gzFile gz = gzopen(p, "rb");
    assert_non_null(gz);
    size_t cap = 1 << 20, len = 0;
    char *u = malloc(cap);
    int k;
    while ((k = gzread(gz, u + len, (unsigned)(cap - len - 1))) > 0) {
        len += (size_t)k;
        if (cap - len < 2) {
            cap *= 2;
            u = realloc(u, cap);
        }
    }
    gzclose(gz);
    u[len] = '\0';
    cJSON *jz = cJSON_Parse(u);
    assert_non_null(jz);
    char *a = cJSON_PrintUnformatted(evs), *b = cJSON_PrintUnformatted(cJSON_GetObjectItem(jz, "traceEvents"));
    assert_string_equal(a, b);
    assert_string_equal(cJSON_GetObjectItem(jz, "traceName")->valuestring, p);
    free(a);
    free(b);
    free(u);
    cJSON_Delete(jz);

    /* key averages agree with the trace: calls and CPU total per name */
    snprintf(p, sizeof p, "%s/ka.txt", tmpdir);
    char *ka = read_text(p);
    char *line = strstr(ka, "aten::mm");
    assert_non_null(line);
    double mm_total = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_GetArrayItem(evs, i);
        if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "aten::mm") == 0)
            mm_total += num(e, "dur");
    }
    char pct1[16], self[32], pct2[16], tot[32], avg[32], m1[16], m1u[4], m2[16], m2u[4];
    long calls;
    assert_int_equal(sscanf(line, "aten::mm %15s %31s %15s %31s %31s %15s %3s %15s %3s %ld", pct1,
                            self, pct2, tot, avg, m1, m1u, m2, m2u, &calls),
                     10);
    assert_int_equal(calls, 6);
    double tv = atof(tot) * (strstr(tot, "ms") ? 1000 : 1);
    assert_true(fabs(tv - mm_total) <= 0.0015 + mm_total * 1e-6);
    assert_non_null(strstr(ka, "ProfilerStep*"));
    assert_non_null(strstr(ka, "\nSelf CPU time total: "));
    free(ka);
    cJSON_Delete(j);
    free(t);
}

static void test_default_handler_files(void **state)
{
    (void)state;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/run/profiler", tmpdir);
    run_session(NULL, dir, 1);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int trace = 0, others = 0;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (n[0] == '.')
            continue;
        assert_null(strstr(n, ".tmp")); /* atomic writes leave no temporaries */
        if (strncmp(n, "host_123.", 9) == 0) {
            const char *q = n + 9;
            while (*q >= '0' && *q <= '9')
                q++;
            assert_true(q - (n + 9) >= 19); /* time.time_ns() digits */
            assert_string_equal(q, ".pt.trace.json.gz");
            trace++;
        } else {
            others++;
        }
    }
    closedir(d);
    assert_int_equal(trace, 1);
    const char *want[] = {"key_averages.txt", "key_averages.csv", "stacks.txt",
                          "memory_timeline.json", "memory_timeline.html", "summary.json"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, want[i]);
        assert_int_equal(access(p, R_OK), 0);
    }
    assert_int_equal(others, 6);
    assert_non_null(strstr(lp_prof_last_trace_path(), "host_123."));
    char p[512];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    char *t = read_text(p);
    cJSON *j = cJSON_Parse(t);
    free(t);
    assert_non_null(j);
    cJSON *steps = cJSON_GetObjectItem(j, "steps");
    assert_int_equal(cJSON_GetObjectItem(steps, "count")->valueint, 2);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(steps, "numbers"), 0)->valueint, 2);
    cJSON *mem = cJSON_GetObjectItem(j, "memory");
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(mem, "window_peak_bytes"), "activation")
                    ->valuedouble >= 3003);
    cJSON_Delete(j);
    snprintf(p, sizeof p, "%s/stacks.txt", dir);
    t = read_text(p);
    assert_non_null(strstr(t, "ProfilerStep#2;forward;aten::mm "));
    free(t);
}

static void test_write_errors(void **state)
{
    (void)state;
    lp_prof_events *ev;
    assert_int_equal(lp_prof_events_new(&ev), LP_OK);
    lp_prof_event e;
    lp_prof_event_init(&e);
    e.name = "x";
    e.cat = "cpu_op";
    e.dur_ns = 5;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
    e.name = NULL;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_STATUS_INVALID_ARG);
    const char *bad = "/nonexistent_dir_lp/x.pt.trace.json";
    assert_int_equal(lp_prof_export_chrome(ev, bad), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent_dir_lp/"));
    assert_int_equal(lp_prof_export_stacks(ev, "/nonexistent_dir_lp/s.txt"), LP_STATUS_IO);
    assert_int_equal(lp_prof_export_summary(ev, "/nonexistent_dir_lp/s.json"), LP_STATUS_IO);
    /* a name with quotes and control characters stays valid JSON */
    e.name = "we\"ird\\name\n\x01";
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
    char p[256];
    snprintf(p, sizeof p, "%s/weird.json", tmpdir);
    assert_int_equal(lp_prof_export_chrome(ev, p), LP_OK);
    char *t = read_text(p);
    cJSON *j = cJSON_Parse(t);
    assert_non_null(j);
    cJSON *evs = cJSON_GetObjectItem(j, "traceEvents");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(evs, 1), "name")->valuestring,
                        "we\"ird\\name\n\x01");
    cJSON_Delete(j);
    free(t);
    lp_prof_events_free(ev);
}

/* Back-to-back ranges: the recorder's TSC stamps a few ticks apart can convert to the same
 * ns, and a range would then end the very ns the next begins (or its parent ends); readers
 * that add ts + dur in doubles see an overlap there and drop one (torch-tb-profiler lost
 * one of 219 lp::adamw_step under load). The collector makes every thread's timestamps
 * strictly increasing, so no two boundaries of one thread's ranges coincide. */
static lp_status count_boundaries(const lp_prof_events *ev, void *user)
{
    size_t n = lp_prof_events_count(ev), k = 0;
    int64_t *b = malloc(2 * n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph == 'X' && e->tid == lp_prof_thread_id() && e->name[0] == 'r') {
            b[k++] = e->ts_ns;
            b[k++] = e->ts_ns + e->dur_ns;
        }
    }
    int64_t *res = user;
    res[0] = (int64_t)k;
    res[1] = 0;
    for (size_t i = 0; i < k; i++) // the ranges are recorded in order: boundaries must rise
        res[1] += i && b[i] <= b[i - 1];
    free(b);
    return LP_OK;
}

static void test_strictly_increasing_stamps(void **state)
{
    (void)state;
    int64_t res[2] = {0, 0};
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = count_boundaries;
    cfg.user = res;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    for (int i = 0; i < 20000; i++) {
        lp_prof_range_push("ra");
        lp_prof_range_pop();
        lp_prof_range_push("rb");
        lp_prof_range_pop();
    }
    assert_int_equal(lp_prof_stop(), LP_OK);
    printf("  %lld range boundaries, %lld not after the previous one\n", (long long)res[0], (long long)res[1]);
    assert_int_equal(res[0], 80000);
    assert_int_equal(res[1], 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lp_prof_export_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    lp_prof_events_free(saved);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_content),
        cmocka_unit_test(test_default_handler_files),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_strictly_increasing_stamps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
