/* GPU activity records -> Kineto trace events, as PyTorch's profiler writes them: device
 * work on (pid = device, tid = stream), API calls on their host thread, the ac2g flow pair
 * by correlation, "External id" of the innermost host range around each launch, and the
 * kernel occupancy estimates Kineto derives from the device's properties. */
#include "prof_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* CUPTI's "no stream" (context-wide sync): Kineto writes tid -1. */
#define STREAM_NONE 4294967295LL

static int is_api(lp_gpu_kind k)
{
    return k == LP_GPU_RUNTIME || k == LP_GPU_DRIVER;
}
static int is_device(lp_gpu_kind k)
{
    return k == LP_GPU_KERNEL || k == LP_GPU_MEMCPY || k == LP_GPU_MEMSET || k == LP_GPU_SYNC;
}

static int default_max_blocks(int major, int minor)
{
    if ((major == 7 && minor == 5) || (major == 8 && (minor == 6 || minor == 7)))
        return 16;
    if ((major == 8 && minor == 9) || major == 12)
        return 24;
    return 32;
}

int lp_gpu_kernel_occupancy(const lp_gpu_device_props *d, const lp_gpu_activity *k, double *blocks_per_sm,
                            double *warps_per_sm, int *occupancy_pct)
{
    *blocks_per_sm = *warps_per_sm = 0;
    *occupancy_pct = 0;
    if (!d || d->num_sms <= 0 || d->max_threads_per_sm <= 0)
        return 0;
    int warp = d->warp_size > 0 ? d->warp_size : 32;
    double blocks = (double)k->grid[0] * k->grid[1] * k->grid[2];
    int64_t threads = (int64_t)k->block[0] * k->block[1] * k->block[2];
    *blocks_per_sm = blocks / d->num_sms;
    *warps_per_sm = *blocks_per_sm * (double)threads / warp;
    if (threads <= 0)
        return 1;
    /* theoretical active blocks per SM: the tightest of threads, blocks, registers, smem */
    int64_t wpb = (threads + warp - 1) / warp;
    int64_t active = (d->max_threads_per_sm / warp) / wpb;
    int64_t mb = d->max_blocks_per_sm > 0 ? d->max_blocks_per_sm
                                          : default_max_blocks(d->compute_major, d->compute_minor);
    if (mb < active)
        active = mb;
    if (k->registers_per_thread > 0 && d->regs_per_sm > 0) {
        /* registers go to warps in units of 256, warps to blocks in groups of 4 */
        int64_t per_warp = ((int64_t)k->registers_per_thread * warp + 255) / 256 * 256;
        int64_t warps = d->regs_per_sm / per_warp / 4 * 4;
        if (warps / wpb < active)
            active = warps / wpb;
    }
    int64_t smem = (k->static_smem > 0 ? k->static_smem : 0) + (k->dynamic_smem > 0 ? k->dynamic_smem : 0);
    if (d->shared_mem_per_sm > 0 && (smem > 0 || d->compute_major >= 8)) {
        /* sm_80 on reserves 1 KiB per block for the system; 128-byte granularity */
        int64_t per_block = (smem + (d->compute_major >= 8 ? 1024 : 0) + 127) / 128 * 128;
        if (per_block > 0 && d->shared_mem_per_sm / per_block < active)
            active = d->shared_mem_per_sm / per_block;
    }
    double resident = *blocks_per_sm < (double)active ? *blocks_per_sm : (double)active;
    *occupancy_pct = (int)floor(resident * (double)threads / d->max_threads_per_sm * 100.0 + 0.5);
    return 1;
}

/* Sorted int64 set (binary search). */
typedef struct iset {
    int64_t *v;
    size_t n;
} iset;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static long iset_find(const iset *s, int64_t x)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (s->v[m] < x)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < s->n && s->v[lo] == x ? (long)lo : -1;
}

static void iset_sort(iset *s)
{
    qsort(s->v, s->n, sizeof *s->v, cmp_i64);
    size_t k = 0; /* unique */
    for (size_t i = 0; i < s->n; i++)
        if (!k || s->v[k - 1] != s->v[i])
            s->v[k++] = s->v[i];
    s->n = k;
}

/* A launch's correlation id and the External id of its host range. */
typedef struct cext {
    int64_t corr, ext;
} cext;

static int64_t ext_of(const cext *v, size_t n, int64_t corr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (v[m].corr < corr)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < n && v[lo].corr == corr ? v[lo].ext : -1;
}

/* An interval on a host thread: a host range (api = 0) or an API call (api = 1). */
typedef struct item {
    int64_t pid, tid, ts, end;
    int api;
    size_t idx; /* host: event index; API: kept-API slot */
} item;

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->pid != y->pid)
        return (x->pid > y->pid) - (x->pid < y->pid);
    if (x->tid != y->tid)
        return (x->tid > y->tid) - (x->tid < y->tid);
    if (x->ts != y->ts)
        return (x->ts > y->ts) - (x->ts < y->ts);
    if (x->api != y->api)
        return x->api - y->api; /* ranges first: a launch at a range's start is inside it */
    return (x->end < y->end) - (x->end > y->end);
}

static void gpu_name(const lp_gpu_activity *a, char *buf, size_t cap)
{
    switch (a->kind) {
    case LP_GPU_MEMCPY:
        snprintf(buf, cap, "Memcpy %s (%s -> %s)", lp_gpu_copy_kind_name(a->copy_kind),
                 lp_gpu_mem_kind_name(a->src_kind), lp_gpu_mem_kind_name(a->dst_kind));
        break;
    case LP_GPU_MEMSET:
        snprintf(buf, cap, "Memset (%s)", lp_gpu_mem_kind_name(a->dst_kind));
        break;
    case LP_GPU_SYNC:
        snprintf(buf, cap, "%s", lp_gpu_sync_kind_name(a->sync_kind));
        break;
    default:
        snprintf(buf, cap, "%s", a->name ? a->name : "?");
        break;
    }
}

/* Numbers host 'X' ranges without an External id (as the writer would), then finds the
 * innermost range around each kept API call: ext[slot] = its External id, or -1. */
static lp_status link_ext(lp_prof_events *ev, const lp_gpu_activity *const *api, size_t n_api, int64_t off,
                          int64_t *ext)
{
    size_t n = lp_prof_events_count(ev);
    int64_t next = 1;
    for (size_t i = 0; i < n; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->external_id >= next)
            next = e->external_id + 1;
    }
    size_t n_host = 0;
    for (size_t i = 0; i < n; i++) {
        lp_prof_event *e = lp_prof__events_at(ev, i);
        if (e->ph != 'X' || e->gpu || !strcmp(e->cat, "Trace"))
            continue;
        if (e->external_id < 0)
            e->external_id = next++;
        n_host++;
    }
    for (size_t j = 0; j < n_api; j++)
        ext[j] = -1;
    if (!n_host || !n_api)
        return LP_OK;
    item *it = malloc((n_host + n_api) * sizeof *it);
    size_t *stack = malloc(n_host * sizeof *stack);
    if (!it || !stack) {
        free(it);
        free(stack);
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (GPU linking)");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph != 'X' || e->gpu || !strcmp(e->cat, "Trace"))
            continue;
        it[k++] = (item){e->pid, e->tid, e->ts_ns, e->ts_ns + e->dur_ns, 0, i};
    }
    for (size_t j = 0; j < n_api; j++)
        it[k++] = (item){api[j]->pid, api[j]->tid, api[j]->start_ns + off, api[j]->end_ns + off, 1, j};
    qsort(it, k, sizeof *it, cmp_item);
    size_t sp = 0;
    for (size_t i = 0; i < k; i++) {
        if (i && (it[i].pid != it[i - 1].pid || it[i].tid != it[i - 1].tid))
            sp = 0;
        while (sp && it[stack[sp - 1]].end < it[i].ts) /* ended before this starts */
            sp--;
        if (!it[i].api) {
            stack[sp++] = i;
            continue;
        }
        /* innermost range the call starts in (not the whole call: the recorder's TSC-to-ns
         * calibration may put the range's end a few ns before the call's) */
        for (size_t s = sp; s > 0; s--) {
            const item *h = &it[stack[s - 1]];
            if (h->ts <= it[i].ts && h->end > it[i].ts) {
                ext[it[i].idx] = lp_prof_events_get(ev, h->idx)->external_id;
                break;
            }
        }
    }
    free(it);
    free(stack);
    return LP_OK;
}

lp_status lp_prof_events_add_gpu(lp_prof_events *ev, const lp_gpu_records *r, int64_t origin_mono_ns,
                                 int64_t lo_ns, int64_t hi_ns)
{
    int64_t cg, ch;
    lp_gpu_records_clock(r, &cg, &ch);
    const int64_t off = ch - cg - origin_mono_ns; /* relative ns = gpu ns + off */
    size_t n = lp_gpu_records_count(r);
    const lp_gpu_activity **api = malloc((n ? n : 1) * sizeof *api);
    iset api_corr = {malloc((n ? n : 1) * sizeof(int64_t)), 0};
    iset all_api = {malloc((n ? n : 1) * sizeof(int64_t)), 0};
    iset dev_corr = {malloc((n ? n : 1) * sizeof(int64_t)), 0};
    int64_t *ext = malloc((n ? n : 1) * sizeof *ext);
    cext *by_corr = malloc((n ? n : 1) * sizeof *by_corr);
    lp_status st = LP_OK;
    if (!api || !api_corr.v || !all_api.v || !dev_corr.v || !ext || !by_corr) {
        st = lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (%zu GPU records)", n);
        goto done;
    }
    size_t n_api = 0;
    for (size_t i = 0; i < n; i++) {
        const lp_gpu_activity *a = lp_gpu_records_get(r, i);
        if (!is_api(a->kind) || a->correlation < 0)
            continue;
        all_api.v[all_api.n++] = a->correlation;
        int64_t t = a->start_ns + off;
        if (t < lo_ns || t > hi_ns)
            continue;
        api[n_api++] = a;
        api_corr.v[api_corr.n++] = a->correlation;
    }
    iset_sort(&api_corr);
    iset_sort(&all_api);
    /* device work kept: launched by a kept call, or without any call and in the window */
    for (size_t i = 0; i < n; i++) {
        const lp_gpu_activity *a = lp_gpu_records_get(r, i);
        if (is_device(a->kind) && a->correlation >= 0 && iset_find(&api_corr, a->correlation) >= 0)
            dev_corr.v[dev_corr.n++] = a->correlation;
    }
    iset_sort(&dev_corr);
    if ((st = link_ext(ev, api, n_api, off, ext)) != LP_OK)
        goto done;
    /* External id by correlation, for the calls and their device work */
    for (size_t j = 0; j < n_api; j++)
        by_corr[j] = (cext){api[j]->correlation, ext[j]};
    qsort(by_corr, n_api, sizeof *by_corr, cmp_i64); /* sorts by the first member */

    char name[512];
    for (size_t i = 0; i < n && st == LP_OK; i++) {
        const lp_gpu_activity *a = lp_gpu_records_get(r, i);
        int64_t t = a->start_ns + off;
        int in_window = t >= lo_ns && t <= hi_ns;
        lp_prof_event e;
        lp_prof_event_init(&e);
        e.correlation = a->correlation;
        if (is_api(a->kind)) {
            if (!in_window)
                continue;
            if (a->correlation >= 0) {
                e.external_id = ext_of(by_corr, n_api, a->correlation);
                if (iset_find(&dev_corr, a->correlation) >= 0)
                    e.gpu_flow = 's';
            }
            e.pid = a->pid;
            e.tid = a->tid;
        } else if (is_device(a->kind)) {
            int launched = a->correlation >= 0 && iset_find(&api_corr, a->correlation) >= 0;
            int has_call = a->correlation >= 0 && iset_find(&all_api, a->correlation) >= 0;
            if (!launched && (has_call || !in_window))
                continue;
            if (launched) {
                e.gpu_flow = 'f';
                e.external_id = ext_of(by_corr, n_api, a->correlation);
            }
            e.pid = a->device;
            e.tid = a->stream == STREAM_NONE ? -1 : a->stream;
        } else {
            if (!in_window)
                continue;
            e.pid = a->pid;
            e.tid = a->tid;
        }
        gpu_name(a, name, sizeof name);
        e.name = name;
        e.cat = lp_gpu_kind_category(a->kind);
        e.ts_ns = t;
        e.dur_ns = a->end_ns - a->start_ns;
        e.gpu = a;
        st = lp_prof_events_add(ev, &e);
        if (st == LP_OK && is_device(a->kind) && e.tid >= 0 &&
            !lp_prof_events_thread_name(ev, e.pid, e.tid)) {
            char tn[48];
            snprintf(tn, sizeof tn, "stream %lld ", (long long)e.tid); /* Kineto's trailing space */
            st = lp_prof_events_set_thread_name(ev, e.pid, e.tid, tn);
        }
    }
    if (st == LP_OK && lp_gpu_records_n_devices(r)) {
        size_t nd = lp_gpu_records_n_devices(r);
        st = lp_prof_events_set_gpu_devices(ev, lp_gpu_records_device(r, 0), nd);
    }
done:
    free(api);
    free(api_corr.v);
    free(all_api.v);
    free(dev_corr.v);
    free(ext);
    free(by_corr);
    return st;
}

/* ---- the trace writer's GPU parts ----------------------------------------------------- */

/* Shortest "%.*g" that reads back as v (what Kineto's fmt prints for a double). */
static void fmt_double(char *buf, size_t cap, double v)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
}

static const lp_gpu_device_props *dev_of(const lp_gpu_device_props *d, size_t nd, int32_t id)
{
    for (size_t i = 0; i < nd; i++)
        if (d[i].id == id)
            return &d[i];
    return NULL;
}

void lp_prof__write_gpu_event(lp_prof_out *o, const lp_prof_event *e, const lp_gpu_device_props *devs,
                              size_t nd)
{
    const lp_gpu_activity *a = e->gpu;
    char ts[32], dur[32];
    lp_prof_fmt_us(ts, sizeof ts, e->ts_ns);
    lp_prof_fmt_us(dur, sizeof dur, e->dur_ns);
    lp_prof_out_puts(o, "  {\"ph\": \"X\", \"cat\": ");
    lp_prof_out_json_str(o, e->cat);
    lp_prof_out_puts(o, ", \"name\": ");
    lp_prof_out_json_str(o, e->name);
    lp_prof_out_printf(o, ", \"pid\": %lld, \"tid\": %lld, \"ts\": %s, \"dur\": %s, \"args\": {",
                       (long long)e->pid, (long long)e->tid, ts, dur);
    const char *sep = "";
    if (e->external_id >= 0) {
        lp_prof_out_printf(o, "\"External id\": %lld", (long long)e->external_id);
        sep = ", ";
    }
    switch (a->kind) {
    case LP_GPU_KERNEL: {
        lp_prof_out_printf(o,
                           "%s\"queued\": 0, \"device\": %d, \"context\": %d, \"stream\": %lld, "
                           "\"correlation\": %lld, \"registers per thread\": %d, \"shared memory\": %lld",
                           sep, (int)a->device, (int)a->context, (long long)a->stream,
                           (long long)a->correlation,
                           a->registers_per_thread > 0 ? (int)a->registers_per_thread : 0,
                           (long long)(a->static_smem > 0 ? a->static_smem : 0) +
                               (a->dynamic_smem > 0 ? a->dynamic_smem : 0));
        double bps, wps;
        int occ;
        int have = lp_gpu_kernel_occupancy(dev_of(devs, nd, a->device), a, &bps, &wps, &occ);
        if (have)
            lp_prof_out_printf(o, ", \"blocks per SM\": %f, \"warps per SM\": %f", bps, wps);
        lp_prof_out_printf(o, ", \"grid\": [%d, %d, %d], \"block\": [%d, %d, %d]", (int)a->grid[0],
                           (int)a->grid[1], (int)a->grid[2], (int)a->block[0], (int)a->block[1],
                           (int)a->block[2]);
        if (have)
            lp_prof_out_printf(o, ", \"est. achieved occupancy %%\": %d", occ);
        break;
    }
    case LP_GPU_MEMCPY:
    case LP_GPU_MEMSET: {
        char bw[40];
        int64_t bytes = a->bytes > 0 ? a->bytes : 0;
        /* bytes per ns = GB/s */
        fmt_double(bw, sizeof bw, e->dur_ns > 0 ? (double)bytes / (double)e->dur_ns : 0.0);
        lp_prof_out_printf(o,
                           "%s\"device\": %d, \"context\": %d, \"stream\": %lld, \"correlation\": %lld, "
                           "\"bytes\": %lld, \"memory bandwidth (GB/s)\": %s",
                           sep, (int)a->device, (int)a->context, (long long)a->stream,
                           (long long)a->correlation, (long long)bytes, bw);
        break;
    }
    case LP_GPU_RUNTIME:
    case LP_GPU_DRIVER:
        lp_prof_out_printf(o, "%s\"cbid\": %d, \"correlation\": %lld", sep, (int)a->cbid,
                           (long long)a->correlation);
        break;
    case LP_GPU_SYNC:
        lp_prof_out_printf(o, "%s\"cuda_sync_kind\": ", sep);
        lp_prof_out_json_str(o, lp_gpu_sync_kind_name(a->sync_kind));
        if (a->cuda_event_id >= 0)
            lp_prof_out_printf(o, ", \"wait_on_cuda_event_id\": %lld", (long long)a->cuda_event_id);
        lp_prof_out_printf(o, ", \"stream\": %lld, \"correlation\": %lld, \"device\": %d, \"context\": %d",
                           (long long)a->stream, (long long)a->correlation, (int)a->device, (int)a->context);
        break;
    default:
        break;
    }
    lp_prof_out_puts(o, "}}");
    if (e->gpu_flow == 's')
        lp_prof_out_printf(o,
                           ",\n  {\"ph\": \"s\", \"id\": %lld, \"pid\": %lld, \"tid\": %lld, \"ts\": %s, "
                           "\"cat\": \"ac2g\", \"name\": \"ac2g\"}",
                           (long long)a->correlation, (long long)e->pid, (long long)e->tid, ts);
    else if (e->gpu_flow == 'f')
        lp_prof_out_printf(o,
                           ",\n  {\"ph\": \"f\", \"id\": %lld, \"pid\": %lld, \"tid\": %lld, \"ts\": %s, "
                           "\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
                           (long long)a->correlation, (long long)e->pid, (long long)e->tid, ts);
}

void lp_prof__write_device_props(lp_prof_out *o, const lp_gpu_device_props *d, size_t nd)
{
    if (!nd) {
        lp_prof_out_puts(o, "  \"deviceProperties\": [],\n");
        return;
    }
    lp_prof_out_puts(o, "  \"deviceProperties\": [\n");
    for (size_t i = 0; i < nd; i++) {
        lp_prof_out_printf(o, "    {\n      \"id\": %d, \"name\": ", (int)d[i].id);
        lp_prof_out_json_str(o, d[i].name);
        lp_prof_out_printf(o,
                           ", \"totalGlobalMem\": %lld,\n      \"computeMajor\": %d, \"computeMinor\": %d,\n"
                           "      \"maxThreadsPerBlock\": %d, \"maxThreadsPerMultiprocessor\": %d,\n"
                           "      \"regsPerBlock\": %d, \"warpSize\": %d,\n"
                           "      \"sharedMemPerBlock\": %lld, \"numSms\": %d\n"
                           "    , \"regsPerMultiprocessor\": %d, \"sharedMemPerBlockOptin\": %lld, "
                           "\"sharedMemPerMultiprocessor\": %lld\n    }%s\n",
                           (long long)d[i].total_global_mem, (int)d[i].compute_major, (int)d[i].compute_minor,
                           (int)d[i].max_threads_per_block, (int)d[i].max_threads_per_sm,
                           (int)d[i].regs_per_block, (int)d[i].warp_size,
                           (long long)d[i].shared_mem_per_block, (int)d[i].num_sms, (int)d[i].regs_per_sm,
                           (long long)d[i].shared_mem_per_block_optin, (long long)d[i].shared_mem_per_sm,
                           i + 1 < nd ? "," : "");
    }
    lp_prof_out_puts(o, "  ],\n");
}
