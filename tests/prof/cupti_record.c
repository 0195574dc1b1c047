/* cupti_record [out_dir]: the CUPTI collector on real hardware. Under a profiler session
 * it runs host ops that copy (cudaMemcpyAsync HtoD / DtoH, pinned memory), memset and
 * launch kernels on two streams (two of them small enough to overlap), then writes
 *   out_dir/records.jsonl        the raw activity records (loupe-gpu-records JSONL: commit
 *                                it as tests/fixtures/cupti/<gpu>_record.jsonl)
 *   out_dir/trace.pt.trace.json  the Kineto trace loupe writes from them
 * and prints a summary: records by kind, kernels, correlation matches, the device time
 * each op gets through its External id, and NVML's reading. Exit 0 when every check
 * holds, 1 when one fails, 77 (skip) without a GPU. Links only lp_prof, lp_base and the
 * static CUDA runtime (CUPTI is loaded at run time, as in loupe), so the binary runs on a
 * GPU machine without loupe's other dependencies; `loupe analyze trace.pt.trace.json`
 * then reads the trace anywhere. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loupe/prof.h"

int lp_rec_launch_scale(float *x, float a, int n, int reps, cudaStream_t s);
int lp_rec_launch_add(const float *a, const float *b, float *c, int n, int reps, cudaStream_t s);

static char records_path[1024], trace_path[1024];
static int failures;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            printf("FAIL: " __VA_ARGS__);                                                                    \
            printf("\n");                                                                                    \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

#define CU(x)                                                                                                \
    do {                                                                                                     \
        cudaError_t e_ = (x);                                                                                \
        if (e_ != cudaSuccess) {                                                                             \
            printf("FAIL: %s: %s\n", #x, cudaGetErrorString(e_));                                            \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* Summary of the raw records: by kind, and device work whose launch record is present. */
static void summarize(const lp_gpu_records *r)
{
    size_t by_kind[LP_GPU_KIND__COUNT] = {0};
    size_t n = lp_gpu_records_count(r), dev = 0, matched = 0;
    for (size_t i = 0; i < n; i++)
        by_kind[lp_gpu_records_get(r, i)->kind]++;
    printf("records: %zu (", n);
    for (int k = 0; k < LP_GPU_KIND__COUNT; k++)
        printf("%s%s %zu", k ? ", " : "", lp_gpu_kind_name((lp_gpu_kind)k), by_kind[k]);
    printf(")\n");
    for (size_t i = 0; i < n; i++) {
        const lp_gpu_activity *a = lp_gpu_records_get(r, i);
        if (a->kind != LP_GPU_KERNEL && a->kind != LP_GPU_MEMCPY && a->kind != LP_GPU_MEMSET)
            continue;
        dev++;
        for (size_t j = 0; j < n; j++) {
            const lp_gpu_activity *b = lp_gpu_records_get(r, j);
            if ((b->kind == LP_GPU_RUNTIME || b->kind == LP_GPU_DRIVER) && b->correlation == a->correlation) {
                matched++;
                break;
            }
        }
        if (a->kind == LP_GPU_KERNEL)
            printf("  kernel %-40.40s stream %lld grid [%d,%d,%d] block [%d,%d,%d] regs %d dur %lld ns\n",
                   a->name, (long long)a->stream, a->grid[0], a->grid[1], a->grid[2], a->block[0],
                   a->block[1], a->block[2], a->registers_per_thread, (long long)(a->end_ns - a->start_ns));
    }
    printf("device records with their launch (correlation): %zu of %zu\n", matched, dev);
    int64_t overlap = 0; /* kernels on different streams running together (informative) */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const lp_gpu_activity *a = lp_gpu_records_get(r, i), *b = lp_gpu_records_get(r, j);
            if (a->kind != LP_GPU_KERNEL || b->kind != LP_GPU_KERNEL || a->stream == b->stream)
                continue;
            int64_t lo = a->start_ns > b->start_ns ? a->start_ns : b->start_ns;
            int64_t hi = a->end_ns < b->end_ns ? a->end_ns : b->end_ns;
            overlap += hi > lo ? hi - lo : 0;
        }
    printf("kernels on different streams overlap for %lld ns\n", (long long)overlap);
    for (size_t i = 0; i < lp_gpu_records_n_devices(r); i++) {
        const lp_gpu_device_props *d = lp_gpu_records_device(r, i);
        printf("device %d: %s sm_%d%d, %d SMs, max SM clock %d MHz\n", d->id, d->name, d->compute_major,
               d->compute_minor, d->num_sms, d->max_sm_clock_mhz);
        double f;
        char why[200];
        if (lp_gpu_peak_for_device(d, LP_GPU_PEAK_BF16, &f, why, sizeof why) == LP_OK)
            printf("  dense peak: %s\n", why);
    }
    /* exactly what main launches inside the session: 1 scale + 2 add kernels (the warm-up
     * scale launch before lp_prof_start is outside it), 3 copies (2 HtoD, 1 DtoH), 1 memset */
    CHECK(by_kind[LP_GPU_KERNEL] == 3, "expected 3 kernels in the session, got %zu", by_kind[LP_GPU_KERNEL]);
    CHECK(by_kind[LP_GPU_MEMCPY] == 3, "expected 3 memcpy, got %zu", by_kind[LP_GPU_MEMCPY]);
    CHECK(by_kind[LP_GPU_MEMSET] == 1, "expected a memset, got %zu", by_kind[LP_GPU_MEMSET]);
    CHECK(by_kind[LP_GPU_RUNTIME] >= 7, "expected >= 7 runtime calls, got %zu", by_kind[LP_GPU_RUNTIME]);
    CHECK(matched == dev, "%zu device records without their runtime record", dev - matched);
    CHECK(lp_gpu_records_n_devices(r) >= 1, "no device properties");
}

/* The session's GPU source: CUPTI's, keeping a copy of the raw records on the way. */
static lp_status tee_stop(lp_gpu_records **out)
{
    lp_status st = lp_prof_cupti_stop(out);
    if (st == LP_OK && *out) {
        summarize(*out);
        st = lp_gpu_records_write_jsonl(*out, records_path);
    }
    return st;
}
static const lp_prof_gpu_source tee = {lp_prof_cupti_start, tee_stop};

static const char *const op_names[] = {"aten::copy_", "aten::mul", "aten::add", "aten::zero_"};
static int64_t op_dev_ns[4];
static int64_t n_streams;

/* Device time per op through the External id the converter gave each launch (the host
 * range around the runtime call: same thread id, same clock), as Kineto links them. */
static lp_status write_trace(const lp_prof_events *ev, void *user)
{
    (void)user;
    size_t n = lp_prof_events_count(ev);
    int64_t streams[16];
    for (size_t i = 0; i < n; i++) {
        const lp_prof_event *k = lp_prof_events_get(ev, i);
        if (!k->gpu ||
            (strcmp(k->cat, "kernel") && strcmp(k->cat, "gpu_memcpy") && strcmp(k->cat, "gpu_memset")))
            continue;
        int64_t j = 0;
        while (j < n_streams && streams[j] != k->tid)
            j++;
        if (j == n_streams && n_streams < 16)
            streams[n_streams++] = k->tid;
        for (size_t h = 0; h < n && k->external_id >= 0; h++) {
            const lp_prof_event *op = lp_prof_events_get(ev, h);
            if (op->gpu || op->external_id != k->external_id)
                continue;
            for (int o = 0; o < 4; o++)
                if (!strcmp(op->name, op_names[o]))
                    op_dev_ns[o] += k->dur_ns;
        }
    }
    return lp_prof_export_chrome(ev, trace_path);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA GPU present (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if (!lp_prof_cupti_built()) {
        printf("SKIP: loupe built without CUPTI\n");
        return 77;
    }
    if (lp_prof_cupti_load() != LP_OK) { /* a GPU machine with the toolkit: it must load */
        printf("FAIL: %s\n", lp_err_msg());
        return 1;
    }
    mkdir(dir, 0755);
    snprintf(records_path, sizeof records_path, "%s/records.jsonl", dir);
    snprintf(trace_path, sizeof trace_path, "%s/trace.pt.trace.json", dir);

    const int n = 1 << 20;
    const size_t bytes = (size_t)n * sizeof(float);
    float *h, *da, *db, *dc;
    cudaStream_t s1, s2;
    cudaEvent_t ev1;
    CU(cudaFree(0)); /* the context, outside the recorded window */
    CU(cudaMallocHost((void **)&h, bytes));
    CU(cudaMalloc((void **)&da, bytes));
    CU(cudaMalloc((void **)&db, bytes));
    CU(cudaMalloc((void **)&dc, bytes));
    CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CU(cudaEventCreate(&ev1));
    for (int i = 0; i < n; i++)
        h[i] = (float)i * 1e-6f;
    CU((cudaError_t)lp_rec_launch_scale(da, 1.0f, n, 1, s1)); /* module loading, outside too */
    CU(cudaDeviceSynchronize());

    lp_prof_set_gpu_source(&tee);
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = write_trace;
    if (lp_prof_start(&cfg) != LP_OK) {
        printf("FAIL: lp_prof_start: %s\n", lp_err_msg());
        return 1;
    }
    {
        LP_PROF_SCOPE("forward");
        {
            LP_PROF_SCOPE_CAT("aten::copy_", LP_PROF_CAT_CPU_OP); /* HtoD, pinned */
            CU(cudaMemcpyAsync(da, h, bytes, cudaMemcpyHostToDevice, s1));
            CU(cudaMemcpyAsync(db, h, bytes, cudaMemcpyHostToDevice, s1));
            CU(cudaEventRecord(ev1, s1));
        }
        {
            LP_PROF_SCOPE_CAT("aten::mul", LP_PROF_CAT_CPU_OP); /* long, on stream 1 */
            /* 64 blocks, a long dependent chain (~80 us): half the SMs, so the add on stream
             * 2 can run beside it (a full-size grid fills an H100 and they serialize) */
            CU((cudaError_t)lp_rec_launch_scale(da, 0.999f, 64 * 256, 40000, s1));
        }
        {
            LP_PROF_SCOPE_CAT("aten::add", LP_PROF_CAT_CPU_OP); /* on stream 2, overlapping */
            CU(cudaStreamWaitEvent(s2, ev1, 0));
            CU((cudaError_t)lp_rec_launch_add(db, db, dc, 64 * 128, 40000, s2)); /* 64 blocks too */
            CU((cudaError_t)lp_rec_launch_add(dc, db, dc, n, 10, s2));
        }
        {
            LP_PROF_SCOPE_CAT("aten::zero_", LP_PROF_CAT_CPU_OP);
            CU(cudaMemsetAsync(db, 0, bytes, s2));
        }
        {
            LP_PROF_SCOPE_CAT("aten::copy_", LP_PROF_CAT_CPU_OP); /* DtoH */
            CU(cudaMemcpyAsync(h, dc, bytes, cudaMemcpyDeviceToHost, s2));
        }
        CU(cudaStreamSynchronize(s1));
        CU(cudaStreamSynchronize(s2));
    }
    CU(cudaDeviceSynchronize());
    if (lp_prof_stop() != LP_OK) {
        printf("FAIL: lp_prof_stop: %s\n", lp_err_msg());
        return 1;
    }
    lp_prof_set_gpu_source(NULL);

    /* the raw records read back strictly, and the trace through loupe analyze's model */
    lp_gpu_records *back;
    if (lp_gpu_records_read_jsonl(records_path, &back) != LP_OK) {
        printf("FAIL: reading %s back: %s\n", records_path, lp_err_msg());
        failures++;
    } else {
        lp_gpu_records_free(back);
    }
    for (int i = 0; i < 4; i++) {
        printf("op %-12s device time %lld ns (kernels/copies linked by External id)\n", op_names[i],
               (long long)op_dev_ns[i]);
        CHECK(op_dev_ns[i] > 0, "%s got no device time (runtime records not inside the op)", op_names[i]);
    }
    printf("device work on %lld streams\n", (long long)n_streams);
    CHECK(n_streams >= 2, "expected work on 2 streams");
    lp_gpu_sample g;
    const char *why = "";
    if (lp_prof_nvml_available(&why) && lp_prof_nvml_sample(&g))
        printf("NVML: util %.0f %%, memory used %lld B, power %.1f W, SM clock %d MHz\n", g.util_pct,
               (long long)g.mem_used_bytes, g.power_w, (int)g.sm_clock_mhz);
    else
        printf("NVML: unavailable (%s)\n", why);
    CHECK(lp_prof_nvml_available(NULL), "NVML did not load on a GPU machine: %s", why);
    printf("wrote %s and %s\n%s\n", records_path, trace_path, failures ? "FAILED" : "OK");
    cudaFreeHost(h);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    return failures ? 1 : 0;
}
