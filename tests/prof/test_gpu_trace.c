/* GPU activity records -> Kineto trace, on recorded records (no GPU needed):
 *  - the JSONL reader/writer round trip and its strict errors (file:line);
 *  - Kineto's kernel estimates (blocks/warps per SM, occupancy) equal to what PyTorch wrote
 *    for the same kernels in real traces (A100 cudnn kernel, A100 Triton kernel, H100);
 *  - tests/fixtures/cupti/crafted_two_streams.jsonl under hand-made host ops: the written
 *    trace parses, device work sits on (device, stream), flows pair up by correlation,
 *    timestamps are exact integer ns, and `loupe analyze`'s trace model gives each op
 *    exactly the device time of the work it launched (by correlation);
 *  - dense peak FLOP/s against NVIDIA's published figures;
 *  - NVML absent: the probe says why and the sampler's GPU cells stay empty;
 *  - without CUPTI in the build, the collector says so. */
#include "lp_test_util.h" /* first: it sets _GNU_SOURCE */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/prof.h"
#include "loupe/report.h"

#define FIXTURE "tests/fixtures/cupti/crafted_two_streams.jsonl"

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    return lp_test_tmpdir_make(tmpdir, sizeof tmpdir, "gpu_trace");
}

static int teardown(void **state)
{
    (void)state;
    if (getenv("LP_KEEP_TMP"))
        return 0;
    return lp_test_tmpdir_remove(tmpdir);
}

static char *slurp(const char *path)
{
    char *buf;
    size_t len;
    assert_int_equal(lp_file_read_all(path, &buf, &len), LP_OK);
    return buf;
}

/* ---- JSONL ------------------------------------------------------------------------------ */

static void test_jsonl_roundtrip(void **state)
{
    (void)state;
    lp_gpu_records *r, *r2;
    lp_status st = lp_gpu_records_read_jsonl(FIXTURE, &r);
    if (st != LP_OK)
        fail_msg("%s", lp_err_msg());
    assert_int_equal(lp_gpu_records_count(r), 18);
    assert_int_equal(lp_gpu_records_n_devices(r), 1);
    assert_int_equal(lp_gpu_records_device(r, 0)->num_sms, 132);
    int64_t g, h;
    assert_int_equal(lp_gpu_records_clock(r, &g, &h), 1);
    assert_int_equal(g, 1000000000);
    assert_int_equal(h, 5000000000);
    const lp_gpu_activity *k = lp_gpu_records_get(r, 2);
    assert_int_equal(k->kind, LP_GPU_KERNEL);
    assert_string_equal(k->name, "gemm_bf16_kernel");
    assert_int_equal(k->grid[0], 264);
    assert_int_equal(k->dynamic_smem, 49152);
    const lp_gpu_activity *m = lp_gpu_records_get(r, 7);
    assert_int_equal(m->kind, LP_GPU_MEMCPY);
    assert_int_equal(m->copy_kind, 1); /* HtoD */
    assert_int_equal(m->src_kind, 2);  /* Pinned */
    assert_int_equal(m->bytes, 1048576);

    /* written and read back: the same text again */
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/a.jsonl", tmpdir);
    snprintf(p2, sizeof p2, "%s/b.jsonl", tmpdir);
    assert_int_equal(lp_gpu_records_write_jsonl(r, p1), LP_OK);
    assert_int_equal(lp_gpu_records_read_jsonl(p1, &r2), LP_OK);
    assert_int_equal(lp_gpu_records_write_jsonl(r2, p2), LP_OK);
    char *a = slurp(p1), *b = slurp(p2);
    assert_string_equal(a, b);
    assert_int_equal(lp_gpu_records_count(r2), 18);
    free(a);
    free(b);
    lp_gpu_records_free(r);
    lp_gpu_records_free(r2);
}

static void expect_error(const char *text, const char *needle)
{
    lp_gpu_records *r = (lp_gpu_records *)1;
    lp_status st = lp_gpu_records_parse_jsonl("x.jsonl", text, strlen(text), &r);
    assert_int_equal(st, LP_STATUS_FORMAT);
    assert_null(r);
    if (!strstr(lp_err_msg(), needle))
        fail_msg("message \"%s\" lacks \"%s\"", lp_err_msg(), needle);
}

static void test_jsonl_strict(void **state)
{
    (void)state;
#define HDR "{\"format\": \"loupe-gpu-records\", \"version\": 1}\n"
#define API "\"start\": 1, \"end\": 2, \"pid\": 1, \"tid\": 1, \"correlation\": 1, \"cbid\": 211"
    expect_error("", "x.jsonl: empty");
    expect_error("{\"kind\": \"runtime\"}\n", "x.jsonl:1: first line");
    expect_error(HDR "{\"kind\": \"runtime\", \"name\": \"cudaLaunchKernel\", " API ", \"extra\": 1}\n",
                 "x.jsonl:2: unknown key \"extra\"");
    expect_error(HDR "\n{\"kind\": \"runtime\", \"name\": \"a\", \"start\": 1.5}\n",
                 "x.jsonl:3: expected an integer");
    expect_error(HDR "{\"kind\": \"bogus\"}\n", "x.jsonl:2: unknown kind \"bogus\"");
    expect_error(HDR "{\"kind\": \"runtime\", \"name\": \"a\", \"name\": \"b\"}\n",
                 "x.jsonl:2: duplicate key");
    expect_error(HDR "{\"kind\": \"runtime\", \"name\": \"a\", \"start\": 5, \"end\": 2, \"pid\": 1}\n",
                 "x.jsonl:2: \"end\" before \"start\"");
    expect_error(HDR "{\"kind\": \"runtime\", \"name\": \"a\", " API "} x\n", "x.jsonl:2: text after");
    expect_error(HDR "{\"kind\": \"runtime\", \"name\": \"a\", \"start\": 1, \"end\": 2}\n",
                 "x.jsonl:2: missing \"pid\"");
    expect_error(
        HDR "{\"kind\": \"memset\", \"start\": 1, \"end\": 2, \"device\": 0, \"context\": 1, \"stream\": 7, "
            "\"correlation\": 3, \"bytes\": 8, \"dst\": \"Moon\"}\n",
        "x.jsonl:2: unknown \"dst\" value \"Moon\"");
    expect_error(
        HDR
        "{\"kind\": \"kernel\", \"name\": \"k\", \"start\": 1, \"end\": 2, \"device\": 0, \"context\": 1, "
        "\"stream\": 7, \"correlation\": 3, \"grid\": [1, 1], \"block\": [1, 1, 1]}\n",
        "x.jsonl:2: expected an array of 3 integers");
    expect_error(HDR "{\"kind\": \"runtime\", \"name\": \"a\\ud800\"}\n", "x.jsonl:2: \\u escape");
    expect_error(HDR "{\"kind\": \"runtime\", \"name\": \"a\", \"start\": 99999999999999999999}\n",
                 "x.jsonl:2: integer out of range");
    /* a good line parses; blank lines and \r\n are fine */
    const char *ok = HDR "\r\n{\"kind\": \"runtime\", \"name\": \"cuda\\u00e9\", " API "}\r\n";
    lp_gpu_records *r;
    assert_int_equal(lp_gpu_records_parse_jsonl("ok.jsonl", ok, strlen(ok), &r), LP_OK);
    assert_int_equal(lp_gpu_records_count(r), 1);
    assert_string_equal(lp_gpu_records_get(r, 0)->name, "cuda\xc3\xa9");
    lp_gpu_records_free(r);
    lp_gpu_records *e;
    assert_int_equal(lp_gpu_records_read_jsonl("/nonexistent/x.jsonl", &e), LP_STATUS_IO);
}

/* ---- Kineto's kernel estimates vs PyTorch's own traces ------------------------------------ */

static lp_gpu_device_props a100(void)
{
    /* deviceProperties of hta-nccl-ddp-rank0.json.gz (NVIDIA A100-PG509-200) */
    lp_gpu_device_props d = {0,           "NVIDIA A100-PG509-200",
                             42297524224, 8,
                             0,           1024,
                             2048,        65536,
                             32,          49152,
                             108,         65536,
                             166912,      167936,
                             0,           0};
    return d;
}

static void kernel_args(const lp_gpu_device_props *d, int gx, int bx, int regs, int smem, const char *bps,
                        const char *wps, int occ)
{
    lp_gpu_activity k;
    lp_gpu_activity_init(&k);
    k.grid[0] = gx, k.grid[1] = k.grid[2] = 1;
    k.block[0] = bx, k.block[1] = k.block[2] = 1;
    k.registers_per_thread = regs;
    k.static_smem = smem;
    k.dynamic_smem = 0;
    double b, w;
    int o;
    assert_int_equal(lp_gpu_kernel_occupancy(d, &k, &b, &w, &o), 1);
    char got[32];
    snprintf(got, sizeof got, "%f", b);
    assert_string_equal(got, bps); /* Kineto prints these with 6 decimals: exact text */
    snprintf(got, sizeof got, "%f", w);
    assert_string_equal(got, wps);
    assert_int_equal(o, occ);
}

static void test_occupancy_matches_pytorch(void **state)
{
    (void)state;
    lp_gpu_device_props d = a100();
    /* hta-nccl-ddp-rank0: cudnn::bn_bw_1C11_kernel_new, grid 512, block 512, 40 regs, 400 B */
    kernel_args(&d, 512, 512, 40, 400, "4.740741", "75.851852", 75);
    /* hta-triton-compiled: triton_poi_fused_add_cos_sin_0, grid 1, block 128, 16 regs */
    kernel_args(&d, 1, 128, 16, 0, "0.009259", "0.037037", 0);
    /* kineto-h100-cuda-sync-2026: H100 (132 SMs), grid 1, block 1, 0 regs */
    lp_gpu_device_props h = {0,  "NVIDIA H100", 102085492736, 9,     0,      1024,   2048, 65536,
                             32, 49152,         132,          65536, 232448, 233472, 0,    0};
    kernel_args(&h, 1, 1, 0, 0, "0.007576", "0.000237", 0);
    /* no SM count: nothing computed (Kineto then omits the three args) */
    lp_gpu_device_props none;
    memset(&none, 0, sizeof none);
    lp_gpu_activity k;
    lp_gpu_activity_init(&k);
    double b, w;
    int o;
    assert_int_equal(lp_gpu_kernel_occupancy(&none, &k, &b, &w, &o), 0);
    assert_int_equal(lp_gpu_kernel_occupancy(NULL, &k, &b, &w, &o), 0);
}

/* ---- the crafted records under host ops --------------------------------------------------- */

static void add_host(lp_prof_events *ev, const char *name, const char *cat, int64_t ts, int64_t dur)
{
    lp_prof_event e;
    lp_prof_event_init(&e);
    e.name = name;
    e.cat = cat;
    e.pid = 4242;
    e.tid = 4243;
    e.ts_ns = ts;
    e.dur_ns = dur;
    assert_int_equal(lp_prof_events_add(ev, &e), LP_OK);
}

static const cJSON *find_event(const cJSON *evs, const char *cat, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        const cJSON *c = cJSON_GetObjectItem(e, "cat"), *n = cJSON_GetObjectItem(e, "name");
        if (cJSON_IsString(c) && cJSON_IsString(n) && !strcmp(c->valuestring, cat) &&
            !strcmp(n->valuestring, name))
            return e;
    }
    fail_msg("no %s event %s", cat, name);
    return NULL;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItem(o, key);
    if (!cJSON_IsNumber(x))
        fail_msg("no number %s", key);
    return x->valuedouble;
}

static const lp_trace_op_row *op_row(const lp_trace_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_ops; i++)
        if (!strcmp(m->ops[i].name, name) && !m->ops[i].is_device)
            return &m->ops[i];
    fail_msg("no op row %s", name);
    return NULL;
}

static void test_trace_from_records(void **state)
{
    (void)state;
    lp_gpu_records *r;
    assert_int_equal(lp_gpu_records_read_jsonl(FIXTURE, &r), LP_OK);
    lp_prof_events *ev;
    assert_int_equal(lp_prof_events_new(&ev), LP_OK);
    lp_prof_events_info *in = lp_prof_events_info_of(ev);
    in->pid = 4242;
    in->base_time_ns = 1700000000000000000;
    in->window_start_ns = 0;
    in->window_end_ns = 550000;
    add_host(ev, "forward", "user_annotation", 90000, 310000); /* 90..400 us */
    add_host(ev, "aten::mm", "cpu_op", 100000, 50000);
    add_host(ev, "aten::add", "cpu_op", 200000, 30000);
    add_host(ev, "aten::copy_", "cpu_op", 300000, 40000);
    assert_int_equal(lp_prof_events_set_process_name(ev, 4242, "trainer"), LP_OK);
    /* ts 0 is host monotonic 5.0 s = GPU 1.0 s: GPU ns - 1e9 = relative ns */
    lp_status st = lp_prof_events_add_gpu(ev, r, 5000000000, 0, 550000);
    if (st != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_gpu_records_free(r);

    /* kept: 8 calls in the window (no overhead at 600 us, no late launch at 700 us), 5
     * kernels (not the late one), memcpy, memset, sync */
    size_t n_gpu = 0;
    for (size_t i = 0; i < lp_prof_events_count(ev); i++)
        n_gpu += lp_prof_events_get(ev, i)->gpu != NULL;
    assert_int_equal(n_gpu, 7 + 5 + 3);

    char path[128];
    snprintf(path, sizeof path, "%s/gpu.pt.trace.json", tmpdir);
    assert_int_equal(lp_prof_export_chrome(ev, path), LP_OK);
    char *text = slurp(path);
    /* timestamps are exact integer ns written as <us>.<3 digits> */
    assert_non_null(strstr(text, "\"name\": \"gemm_bf16_kernel\", \"pid\": 0, \"tid\": 7, \"ts\": 120.000, "
                                 "\"dur\": 60.000"));
    assert_non_null(strstr(text, "\"name\": \"Memcpy HtoD (Pinned -> Device)\", \"pid\": 0, \"tid\": 8, "
                                 "\"ts\": 310.000, \"dur\": 20.000"));
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    const cJSON *dp = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "deviceProperties"), 0);
    assert_non_null(dp);
    assert_string_equal(cJSON_GetObjectItem(dp, "name")->valuestring, "NVIDIA H100 80GB HBM3");
    assert_int_equal((int)num(dp, "numSms"), 132);
    assert_int_equal((int)num(dp, "computeMajor"), 9);
    assert_int_equal((int)num(dp, "sharedMemPerMultiprocessor"), 233472);
    const cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");

    /* kernel args as Kineto writes them */
    const cJSON *gemm = find_event(evs, "kernel", "gemm_bf16_kernel");
    const cJSON *ga = cJSON_GetObjectItem(gemm, "args");
    const cJSON *mm = find_event(evs, "cpu_op", "aten::mm");
    assert_int_equal((int)num(ga, "External id"), (int)num(cJSON_GetObjectItem(mm, "args"), "External id"));
    assert_int_equal((int)num(ga, "device"), 0);
    assert_int_equal((int)num(ga, "stream"), 7);
    assert_int_equal((int)num(ga, "correlation"), 10);
    assert_int_equal((int)num(ga, "registers per thread"), 128);
    assert_int_equal((int)num(ga, "shared memory"), 49152);
    assert_true(num(ga, "blocks per SM") == 2.0);
    assert_true(num(ga, "warps per SM") == 32.0);
    /* 128 regs x 512 threads use the whole register file: 1 block = 512 of 2048 threads */
    assert_int_equal((int)num(ga, "est. achieved occupancy %"), 25);
    const cJSON *mc =
        cJSON_GetObjectItem(find_event(evs, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)"), "args");
    assert_int_equal((int)num(mc, "bytes"), 1048576);
    assert_true(num(mc, "memory bandwidth (GB/s)") == 1048576.0 / 20000.0); /* bytes/ns = GB/s */
    find_event(evs, "gpu_memset", "Memset (Device)");
    find_event(evs, "cuda_sync", "Stream Sync");
    const cJSON *rt = cJSON_GetObjectItem(find_event(evs, "cuda_runtime", "cudaGraphLaunch"), "args");
    assert_int_equal((int)num(rt, "cbid"), 311);
    assert_int_equal((int)num(rt, "correlation"), 11);
    find_event(evs, "cuda_driver", "cuLaunchKernel");

    /* flows: every 'f' has one 's' with its id; s on calls with device work only */
    int n_s = 0, n_f = 0;
    int64_t s_ids[32];
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph"), *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(ph) || !cJSON_IsString(cat) || strcmp(cat->valuestring, "ac2g") != 0)
            continue;
        if (!strcmp(ph->valuestring, "s")) {
            assert_true(n_s < 32);
            s_ids[n_s++] = (int64_t)num(e, "id");
            assert_int_equal((int)num(e, "pid"), 4242);
        }
    }
    assert_int_equal(n_s, 6); /* corr 10, 11, 12, 13, 14, 16; not cudaGetDevice (9) */
    cJSON_ArrayForEach(e, evs)
    {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "f") != 0)
            continue;
        n_f++;
        int64_t id = (int64_t)num(e, "id");
        int found = 0;
        for (int i = 0; i < n_s; i++)
            found |= s_ids[i] == id;
        assert_true(found);
        assert_string_equal(cJSON_GetObjectItem(e, "bp")->valuestring, "e");
        assert_int_equal((int)num(e, "pid"), 0);
    }
    assert_int_equal(n_f, 7); /* 4 kernels with calls, memcpy, memset, sync; not the orphan */

    /* GPU process and stream metadata */
    int labels = 0, streams = 0;
    cJSON_ArrayForEach(e, evs)
    {
        const cJSON *n = cJSON_GetObjectItem(e, "name");
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        if (!cJSON_IsString(n) || !args)
            continue;
        if (!strcmp(n->valuestring, "process_labels") && (int)num(e, "pid") == 0) {
            assert_string_equal(cJSON_GetObjectItem(args, "labels")->valuestring, "GPU 0");
            labels++;
        }
        if (!strcmp(n->valuestring, "thread_name") && (int)num(e, "pid") == 0) {
            const char *tn = cJSON_GetObjectItem(args, "name")->valuestring;
            assert_true(!strcmp(tn, "stream 7 ") || !strcmp(tn, "stream 8 "));
            streams++;
        }
    }
    assert_int_equal(labels, 1);
    assert_int_equal(streams, 2);
    cJSON_Delete(root);
    free(text);

    /* loupe analyze: device time to the launching op by correlation, exact ns */
    lp_trace_model *m;
    st = lp_trace_model_load(path, NULL, &m);
    if (st != LP_OK)
        fail_msg("%s", lp_err_msg());
    assert_int_equal(op_row(m, "aten::mm")->self_device_ns, 60000);
    assert_int_equal(op_row(m, "aten::add")->self_device_ns, 10000 + 20000); /* two kernels, one call */
    assert_int_equal(op_row(m, "aten::copy_")->self_device_ns, 20000);
    assert_int_equal(op_row(m, "forward")->self_device_ns, 1000); /* the memset */
    assert_int_equal(op_row(m, "forward")->device_total_ns, 60000 + 30000 + 20000 + 1000);
    int gemm_linked = 0;
    for (size_t i = 0; i < m->n_kernels; i++)
        if (!strcmp(m->kernels[i].name, "gemm_bf16_kernel")) {
            assert_string_equal(m->kernels[i].launch_op, "aten::mm");
            gemm_linked = 1;
        }
    assert_true(gemm_linked);
    assert_true(m->has_device);
    assert_int_equal(m->gpu_all.n_streams, 2);
    /* union of kernels: 60 + (210..232) 22 + 10 + 5; memory: memcpy 20 + memset 1 (HTA
     * 0.5 on this trace: compute 97 us, kernel span 385 us) */
    assert_int_equal(m->gpu_all.compute_ns, 97000);
    assert_int_equal(m->gpu_all.memory_ns, 21000);
    assert_int_equal(m->gpu_all.last_ns - m->gpu_all.first_ns, 385000);
    lp_trace_model_free(m);

    /* the live key averages (key_averages.txt) link through the External id: same answer */
    lp_prof_keyavg_opts ko;
    lp_prof_keyavg_opts_init(&ko);
    lp_prof_keyavg ka;
    assert_int_equal(lp_prof_keyavg_build(ev, &ko, &ka), LP_OK);
    int rows = 0;
    for (size_t i = 0; i < ka.n; i++) {
        const lp_prof_keyavg_row *kr = &ka.rows[i];
        if (kr->is_device)
            continue;
        double want = !strcmp(kr->key, "aten::mm")      ? 60.0
                      : !strcmp(kr->key, "aten::add")   ? 30.0
                      : !strcmp(kr->key, "aten::copy_") ? 20.0
                                                        : -1;
        if (want < 0)
            continue;
        assert_true(fabs(kr->self_device_us - want) < 1e-9); /* whole ns -> us: exact in a double */
        rows++;
    }
    assert_int_equal(rows, 3);
    lp_prof_keyavg_free(&ka);
    lp_prof_events_free(ev);
}

/* ---- real-hardware records (cupti_record's records.jsonl, committed by the lead) ---------- */

static void check_recorded(const char *path)
{
    lp_gpu_records *r;
    lp_status st = lp_gpu_records_read_jsonl(path, &r);
    if (st != LP_OK)
        fail_msg("%s", lp_err_msg());
    size_t n = lp_gpu_records_count(r), dev = 0, matched = 0, kernels = 0, copies = 0, sets = 0;
    int64_t first = INT64_MAX, cg, ch, streams[2] = {-1, -1};
    lp_gpu_records_clock(r, &cg, &ch);
    for (size_t i = 0; i < n; i++) {
        const lp_gpu_activity *a = lp_gpu_records_get(r, i);
        if (a->start_ns < first)
            first = a->start_ns;
        if (a->kind != LP_GPU_KERNEL && a->kind != LP_GPU_MEMCPY && a->kind != LP_GPU_MEMSET)
            continue;
        dev++;
        kernels += a->kind == LP_GPU_KERNEL;
        copies += a->kind == LP_GPU_MEMCPY;
        sets += a->kind == LP_GPU_MEMSET;
        if (streams[0] < 0 || streams[0] == a->stream)
            streams[0] = a->stream;
        else
            streams[1] = a->stream;
        assert_true(a->end_ns > a->start_ns); /* real work takes time */
        for (size_t j = 0; j < n; j++) {
            const lp_gpu_activity *b = lp_gpu_records_get(r, j);
            if ((b->kind == LP_GPU_RUNTIME || b->kind == LP_GPU_DRIVER) && b->correlation == a->correlation) {
                matched++;
                /* one clock for both (the timestamp callback): work starts after its call does */
                assert_true(a->start_ns > b->start_ns);
                break;
            }
        }
        /* one stream runs its work in order: nothing else on it overlaps */
        for (size_t j = 0; j < n; j++) {
            const lp_gpu_activity *b = lp_gpu_records_get(r, j);
            if (j == i || b->stream != a->stream ||
                (b->kind != LP_GPU_KERNEL && b->kind != LP_GPU_MEMCPY && b->kind != LP_GPU_MEMSET))
                continue;
            assert_true(b->end_ns <= a->start_ns || b->start_ns >= a->end_ns);
        }
    }
    /* what cupti_record launches inside its session: 3 kernels (the warm-up launch is
     * before it), 2 HtoD + 1 DtoH copies, 1 memset, on two streams; CUPTI gives every one
     * its launching call's correlation id */
    assert_int_equal(kernels, 3);
    assert_int_equal(copies, 3);
    assert_int_equal(sets, 1);
    assert_true(streams[1] >= 0);
    assert_int_equal(matched, dev);
    assert_true(lp_gpu_records_n_devices(r) >= 1 && lp_gpu_records_device(r, 0)->num_sms > 0);
    lp_prof_events *ev;
    assert_int_equal(lp_prof_events_new(&ev), LP_OK);
    st = lp_prof_events_add_gpu(ev, r, first - cg + ch, INT64_MIN, INT64_MAX); /* first record at ts 0 */
    if (st != LP_OK)
        fail_msg("%s", lp_err_msg());
    char out[128];
    snprintf(out, sizeof out, "%s/recorded.pt.trace.json", tmpdir);
    assert_int_equal(lp_prof_export_chrome(ev, out), LP_OK);
    lp_trace_model *m;
    if (lp_trace_model_load(out, NULL, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    int64_t calls = 0;
    for (size_t i = 0; i < m->n_kernels; i++)
        calls += m->kernels[i].kind == LP_TRACE_KIND_KERNEL ? m->kernels[i].calls : 0;
    assert_int_equal(calls, (int64_t)kernels);
    print_message("%s: %zu records, %zu device records all with their launch, %zu kernels\n", path, n, dev,
                  kernels);
    lp_trace_model_free(m);
    lp_prof_events_free(ev);
    lp_gpu_records_free(r);
}

static void test_recorded_fixtures(void **state)
{
    (void)state;
    glob_t g;
    int found = 0;
    if (glob("tests/fixtures/cupti/*.jsonl", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (!strstr(g.gl_pathv[i], "/crafted_")) {
                check_recorded(g.gl_pathv[i]);
                found++;
            }
        globfree(&g);
    }
    if (!found) {
        print_message("no real-hardware records in tests/fixtures/cupti yet (cupti_record writes them)\n");
        skip();
    }
}

/* ---- peak ----------------------------------------------------------------------------------- */

static void peak_near(int maj, int min, int sms, double mhz, lp_gpu_peak_dtype t, double published,
                      double rel)
{
    double f;
    char why[160];
    lp_status st = lp_gpu_peak_flops(maj, min, sms, mhz, t, &f, why, sizeof why);
    if (st != LP_OK)
        fail_msg("%s", lp_err_msg());
    if (fabs(f - published) > rel * published)
        fail_msg("sm_%d%d %s: %g vs published %g (%s)", maj, min, lp_gpu_peak_dtype_name(t), f, published,
                 why);
}

static void test_peak(void **state)
{
    (void)state;
    /* NVIDIA's datasheet dense figures; tolerance 0.5 % (their rounding to 3-4 digits) */
    peak_near(8, 0, 108, 1410, LP_GPU_PEAK_BF16, 312e12, 0.005); /* A100 SXM */
    peak_near(8, 0, 108, 1410, LP_GPU_PEAK_TF32, 156e12, 0.005);
    peak_near(8, 0, 108, 1410, LP_GPU_PEAK_FP32, 19.5e12, 0.005);
    peak_near(9, 0, 132, 1830, LP_GPU_PEAK_BF16, 989.4e12, 0.005); /* H100 SXM */
    peak_near(9, 0, 132, 1830, LP_GPU_PEAK_TF32, 494.7e12, 0.005);
    peak_near(9, 0, 132, 1830, LP_GPU_PEAK_FP8, 1978.9e12, 0.005);
    peak_near(9, 0, 132, 1830, LP_GPU_PEAK_FP16, 989.4e12, 0.005); /* H200 SXM: same chip, same figure */
    peak_near(9, 0, 114, 1620, LP_GPU_PEAK_BF16, 756e12, 0.005);   /* H100 PCIe */
    peak_near(8, 9, 58, 2040, LP_GPU_PEAK_BF16, 121e12, 0.01);     /* L4: 121 (rounded) */
    peak_near(8, 9, 58, 2040, LP_GPU_PEAK_FP8, 242e12, 0.01);
    peak_near(8, 6, 72, 1695, LP_GPU_PEAK_BF16, 125e12, 0.005); /* A10 */
    peak_near(7, 0, 80, 1530, LP_GPU_PEAK_FP16, 125e12, 0.005); /* V100 SXM2 */
    peak_near(7, 5, 40, 1590, LP_GPU_PEAK_FP16, 65e12, 0.005);  /* T4 */
    double f;
    char why[160];
    assert_int_equal(lp_gpu_peak_flops(9, 0, 132, 1830, LP_GPU_PEAK_BF16, &f, why, sizeof why), LP_OK);
    assert_string_equal(why,
                        "sm_90 (Hopper): 4096 dense bf16 FLOP/clk/SM x 132 SMs x 1830 MHz = 989.4 TFLOP/s");
    assert_int_equal(lp_gpu_peak_flops(7, 5, 40, 1590, LP_GPU_PEAK_BF16, &f, why, sizeof why),
                     LP_STATUS_UNSUPPORTED);
    assert_non_null(strstr(lp_err_msg(), "no bf16"));
    assert_int_equal(lp_gpu_peak_flops(5, 2, 16, 1000, LP_GPU_PEAK_FP32, &f, NULL, 0), LP_STATUS_UNSUPPORTED);
    assert_int_equal(lp_gpu_peak_flops(9, 0, 0, 1830, LP_GPU_PEAK_BF16, &f, NULL, 0), LP_STATUS_INVALID_ARG);
    /* by device: H200 and H100 SXM report a 1980 MHz max clock; the datasheet's 989.4 is at 1830 */
    lp_gpu_device_props h200 = {0,  "NVIDIA H200", 150754820096, 9,     0,      1024,   2048, 65536,
                                32, 49152,         132,          65536, 232448, 233472, 32,   1980};
    assert_int_equal(lp_gpu_peak_for_device(&h200, LP_GPU_PEAK_BF16, &f, why, sizeof why), LP_OK);
    assert_true(fabs(f - 989.4e12) < 0.005 * 989.4e12);
    assert_non_null(strstr(why, "NVIDIA H200: sm_90 (Hopper)"));
    assert_non_null(strstr(why, "quoted clock"));
    lp_gpu_device_props l4 = {0,  "NVIDIA L4", 23580639232, 8,     9,      1024,   1536, 65536,
                              32, 49152,       58,          65536, 101376, 102400, 24,   2040};
    assert_int_equal(lp_gpu_peak_for_device(&l4, LP_GPU_PEAK_BF16, &f, why, sizeof why), LP_OK);
    assert_true(fabs(f - 121e12) < 0.01 * 121e12);
    assert_non_null(strstr(why, "max SM clock"));
    l4.max_sm_clock_mhz = 0; /* unknown clock: an error, not a zero peak */
    assert_int_equal(lp_gpu_peak_for_device(&l4, LP_GPU_PEAK_BF16, &f, why, sizeof why),
                     LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_gpu_peak_flops(9, 0, 132, 0, LP_GPU_PEAK_BF16, &f, NULL, 0), LP_STATUS_INVALID_ARG);
}

/* ---- NVML absent, CUPTI absent ------------------------------------------------------------- */

static void test_nvml_absent(void **state)
{
    (void)state;
    /* must run before anything probes NVML in this process */
    setenv("LP_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    const char *why = NULL;
    assert_int_equal(lp_prof_nvml_available(&why), 0);
    assert_non_null(why);
    assert_true(why[0] != '\0');
    lp_gpu_sample s;
    assert_int_equal(lp_prof_nvml_sample(&s), 0);
    assert_true(s.util_pct < 0 && s.mem_used_bytes < 0 && s.power_w < 0 && s.sm_clock_mhz < 0);

    char path[128];
    snprintf(path, sizeof path, "%s/samples.csv", tmpdir);
    lp_prof_sampler *sp;
    assert_int_equal(lp_prof_sampler_start(path, 10, &sp), LP_OK);
    usleep(30000);
    assert_int_equal(lp_prof_sampler_stop(sp), LP_OK);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[256];
    assert_non_null(fgets(line, sizeof line, fp));
    assert_string_equal(line, "time_s,rss_bytes,cpu_percent,gpu_util_percent,gpu_mem_bytes,gpu_power_w,"
                              "gpu_sm_clock_mhz\n");
    int rows = 0;
    while (fgets(line, sizeof line, fp)) {
        size_t n = strlen(line);
        assert_true(n > 5);
        assert_string_equal(line + n - 5, ",,,,\n"); /* the four GPU cells empty */
        rows++;
    }
    fclose(fp);
    assert_true(rows >= 2);
}

static void test_cupti_absent(void **state)
{
    (void)state;
    if (lp_prof_cupti_built()) {
        /* CUPTI is loaded at run time: a path that is not there is a clear error naming
         * it (and nothing else is tried: the user's choice), then the toolkit's copy loads
         * (found at configure time; no GPU is needed to load it) */
        setenv("LP_CUPTI_LIB", "/nonexistent/libcupti.so.13", 1);
        assert_int_equal(lp_prof_cupti_load(), LP_STATUS_UNSUPPORTED);
        if (!strstr(lp_err_msg(), "CUPTI could not be loaded (tried /nonexistent/libcupti.so.13, from $LP_CUPTI_LIB"))
            fail_msg("%s", lp_err_msg());
        unsetenv("LP_CUPTI_LIB");
        if (lp_prof_cupti_load() != LP_OK)
            fail_msg("%s", lp_err_msg());
        /* a CUDA build: without a GPU the collector must say so, not crash */
        lp_status st = lp_prof_cupti_start();
        if (st == LP_OK) {
            lp_gpu_records *r = NULL;
            assert_int_equal(lp_prof_cupti_stop(&r), LP_OK);
            lp_gpu_records_free(r);
            print_message("a GPU is present: the collector is checked by tests/prof/cupti_record\n");
            skip();
        }
        assert_int_equal(st, LP_STATUS_UNSUPPORTED);
        if (!strstr(lp_err_msg(), "no CUDA GPU present"))
            fail_msg("%s", lp_err_msg());
        assert_int_equal(lp_prof_cupti_attach(), LP_STATUS_UNSUPPORTED);
        return;
    }
    assert_int_equal(lp_prof_cupti_load(), LP_STATUS_UNSUPPORTED);
    assert_non_null(strstr(lp_err_msg(), "without CUPTI"));
    assert_int_equal(lp_prof_cupti_start(), LP_STATUS_UNSUPPORTED);
    assert_non_null(strstr(lp_err_msg(), "without CUPTI"));
    lp_gpu_records *r = (lp_gpu_records *)1;
    assert_int_equal(lp_prof_cupti_stop(&r), LP_STATUS_UNSUPPORTED);
    assert_null(r);
    assert_int_equal(lp_prof_cupti_attach(), LP_STATUS_UNSUPPORTED);
}

/* ---- the session with a GPU source (the collector's path, fed recorded records) ---------- */

static int64_t fake_t0;
static int seen_kernels, seen_runtime, seen_flow_s, seen_nvtx_only, seen_recorded, fake_started;

static lp_status fake_start(void)
{
    fake_started++;
    return LP_OK;
}

/* The fixture's records moved onto this process: GPU time 1.0 s = fake_t0 (a time inside
 * the window the test marks), the API calls on this thread. */
static lp_status fake_stop(lp_gpu_records **out)
{
    lp_gpu_records *src, *r;
    lp_status st = lp_gpu_records_read_jsonl(FIXTURE, &src);
    if (st != LP_OK)
        return st;
    if ((st = lp_gpu_records_new(&r)) != LP_OK)
        return st;
    for (size_t i = 0; i < lp_gpu_records_count(src) && st == LP_OK; i++) {
        lp_gpu_activity a = *lp_gpu_records_get(src, i);
        if (a.pid >= 0) {
            a.pid = getpid();
            a.tid = lp_prof_thread_id();
        }
        st = lp_gpu_records_add(r, &a);
    }
    if (st == LP_OK)
        st = lp_gpu_records_set_device(r, lp_gpu_records_device(src, 0));
    lp_gpu_records_set_clock(r, 1000000000, fake_t0);
    lp_gpu_records_free(src);
    if (st != LP_OK) {
        lp_gpu_records_free(r);
        return st;
    }
    *out = r;
    return LP_OK;
}

static const lp_prof_gpu_source fake_source = {fake_start, fake_stop};

static lp_status count_events(const lp_prof_events *ev, void *user)
{
    (void)user;
    size_t nd;
    assert_non_null(lp_prof_events_gpu_devices(ev, &nd));
    assert_int_equal(nd, 1);
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        seen_kernels += !strcmp(e->cat, "kernel");
        seen_runtime += !strcmp(e->cat, "cuda_runtime");
        seen_flow_s += e->gpu_flow == 's';
        seen_nvtx_only += !strcmp(e->name, "nvtx_only");
        seen_recorded += !strcmp(e->name, "recorded");
    }
    return LP_OK;
}

static void test_session_gpu_source(void **state)
{
    (void)state;
    /* NVTX-only mode first: ranges reach NVTX (in CUDA builds), the recorder takes nothing */
    unsetenv("NVTX_INJECTION64_PATH");
    assert_int_equal(lp_prof_nvtx_enable(-1), 0); /* auto: no tool injected, stays off */
    int have_nvtx = lp_prof_nvtx_enable(1);
    lp_prof_range_push("nvtx_only");
    lp_prof_range_pop();
    lp_prof_set_gpu_source(&fake_source);
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = count_events;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    lp_prof_range_push("recorded");
    fake_t0 = lp_prof_now_ns();
    usleep(2000); /* the records reach 0.7 ms after the source's start; the window must hold them */
    lp_prof_range_pop();
    lp_status st = lp_prof_stop();
    if (st != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_prof_set_gpu_source(NULL);
    lp_prof_nvtx_enable(0);
    lp_prof_range_push("after"); /* nothing on: the inline check stops it */
    lp_prof_range_pop();
    assert_int_equal(fake_started, 1);
    /* the same 5 kernels (late_kernel at 0.705 ms is in a >= 2 ms window this time) + 1 */
    assert_int_equal(seen_kernels, 6);
    assert_int_equal(seen_runtime, 7);
    assert_int_equal(seen_recorded, 1);
    assert_int_equal(seen_nvtx_only, 0);
    assert_true(seen_flow_s >= 6);
    print_message("NVTX in this build: %s\n", have_nvtx ? "yes" : "no");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvml_absent),
        cmocka_unit_test(test_jsonl_roundtrip),
        cmocka_unit_test(test_jsonl_strict),
        cmocka_unit_test(test_occupancy_matches_pytorch),
        cmocka_unit_test(test_trace_from_records),
        cmocka_unit_test(test_recorded_fixtures),
        cmocka_unit_test(test_peak),
        cmocka_unit_test(test_cupti_absent),
        cmocka_unit_test(test_session_gpu_source),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
