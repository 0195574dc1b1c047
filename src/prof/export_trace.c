/* Kineto / torch.profiler Chrome-trace writer: the top-level keys in kineto's order,
 * relative "<us>.<3 digits>" timestamps from baseTimeNanoseconds, cpu_op/user_annotation
 * X events with External id / Ev Idx / Input Dims / Input type / FLOPs, [memory] instants,
 * process/thread metadata, the "PyTorch Profiler (0)" span and the window markers. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The process's place in a data-parallel job (lp_prof_set_distributed): what HTA and loupe
 * analyze key a multi-rank folder by. A single process is rank 0 of 1. */
static char g_dist_backend[16] = "none";
static int32_t g_dist_rank = 0, g_dist_world = 1;

void lp_prof_set_distributed(const char *backend, int32_t rank, int32_t world_size)
{
    snprintf(g_dist_backend, sizeof g_dist_backend, "%s", backend && *backend ? backend : "none");
    g_dist_rank = rank >= 0 ? rank : 0;
    g_dist_world = world_size >= 1 ? world_size : 1;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void write_dims(lp_prof_out *o, const lp_prof_event *e)
{
    lp_prof_out_puts(o, ", \"Input Dims\": [");
    size_t d = 0;
    for (int i = 0; i < e->n_inputs; i++) {
        lp_prof_out_puts(o, i ? ", [" : "[");
        for (int j = 0; j < e->input_ranks[i]; j++)
            lp_prof_out_printf(o, j ? ", %lld" : "%lld", (long long)e->input_dims[d++]);
        lp_prof_out_puts(o, "]");
    }
    lp_prof_out_puts(o, "]");
    if (e->input_types) {
        lp_prof_out_puts(o, ", \"Input type\": [");
        for (int i = 0; i < e->n_inputs; i++) {
            if (i)
                lp_prof_out_puts(o, ", ");
            lp_prof_out_json_str(o, e->input_types[i] ? e->input_types[i] : "");
        }
        lp_prof_out_puts(o, "]");
    }
}

static void write_event(lp_prof_out *o, const lp_prof_event *e, int64_t ext, int64_t idx,
                        const lp_prof_events_info *in)
{
    char ts[32], dur[32];
    lp_prof_fmt_us(ts, sizeof ts, e->ts_ns);
    lp_prof_fmt_us(dur, sizeof dur, e->dur_ns);
    if (e->ph == 'i') {
        lp_prof_out_puts(o, "  {\"ph\": \"i\", \"cat\": ");
        lp_prof_out_json_str(o, e->cat && *e->cat ? e->cat : "cpu_instant_event");
        lp_prof_out_puts(o, ", \"s\": \"t\", \"name\": ");
        lp_prof_out_json_str(o, e->name);
        lp_prof_out_printf(o, ", \"pid\": %lld, \"tid\": %lld, \"ts\": %s", (long long)e->pid,
                           (long long)e->tid, ts);
        if (strcmp(e->name, "[memory]") == 0 || strcmp(e->name, "[OutOfMemory]") == 0) {
            lp_prof_out_printf(o,
                               ", \"args\": {\"Total Reserved\": %lld, \"Total Allocated\": %lld, "
                               "\"Bytes\": %lld",
                               (long long)e->mem_total_reserved,
                               (long long)e->mem_total_allocated, (long long)e->mem_bytes);
            if (strcmp(e->name, "[memory]") == 0)
                lp_prof_out_printf(o, ", \"Addr\": %llu", (unsigned long long)e->mem_addr);
            lp_prof_out_printf(o, ", \"Device Id\": %d, \"Device Type\": %d",
                               (int)e->mem_device_id, (int)e->mem_device_type);
            if (e->mem_category >= 0 && e->mem_category < LP_MEM_CATEGORY__COUNT)
                lp_prof_out_printf(o, ", \"Category\": \"%s\"",
                                   lp_mem_category_name((lp_mem_category)e->mem_category));
            lp_prof_out_puts(o, "}");
        }
        lp_prof_out_puts(o, "}");
        return;
    }
    lp_prof_out_puts(o, "  {\"ph\": \"X\", \"cat\": ");
    lp_prof_out_json_str(o, e->cat ? e->cat : "");
    lp_prof_out_puts(o, ", \"name\": ");
    lp_prof_out_json_str(o, e->name);
    lp_prof_out_printf(o, ", \"pid\": %lld, \"tid\": %lld, \"ts\": %s, \"dur\": %s",
                       (long long)e->pid, (long long)e->tid, ts, dur);
    lp_prof_out_printf(o, ", \"args\": {\"External id\": %lld, \"Ev Idx\": %lld",
                       (long long)ext, (long long)idx);
    if (e->correlation >= 0)
        lp_prof_out_printf(o, ", \"correlation\": %lld", (long long)e->correlation);
    if (e->n_inputs >= 0)
        write_dims(o, e);
    if (in->with_flops && e->flops >= 0 && isfinite(e->flops))
        lp_prof_out_printf(o, ", \"FLOPs\": %.0f", e->flops);
    if (e->bytes >= 0 && isfinite(e->bytes))
        lp_prof_out_printf(o, ", \"Bytes Moved\": %.0f", e->bytes);
    if (e->hw_cycles >= 0)
        lp_prof_out_printf(o, ", \"cycles\": %lld, \"instructions\": %lld, \"cache misses\": %lld",
                           (long long)e->hw_cycles, (long long)e->hw_instructions,
                           (long long)e->hw_cache_misses);
    lp_prof_out_puts(o, "}}");
}

static void write_meta(lp_prof_out *o, const char *what, int64_t pid, int64_t tid,
                       const char *key, const char *sval, long long ival)
{
    lp_prof_out_printf(o,
                       "  {\"name\": \"%s\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": %lld, "
                       "\"tid\": %lld, \"args\": {\"%s\": ",
                       what, (long long)pid, (long long)tid, key);
    if (sval)
        lp_prof_out_json_str(o, sval);
    else
        lp_prof_out_printf(o, "%lld", ival);
    lp_prof_out_puts(o, "}}");
}

lp_status lp_prof_export_chrome(const lp_prof_events *ev, const char *path)
{
    lp_prof_out *o;
    lp_status st = lp_prof_out_open(&o, path, ends_with(path, ".gz"));
    if (st != LP_OK)
        return st;
    const lp_prof_events_info *in = lp_prof_events_info_get(ev);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';

    size_t n_dev;
    const lp_gpu_device_props *devs = lp_prof_events_gpu_devices(ev, &n_dev);
    lp_prof_out_puts(o, "{\n  \"schemaVersion\": 1,\n");
    lp_prof__write_device_props(o, devs, n_dev);
    /* HTA finds the rank with the regex "rank":\s+(\d+): keep the space, keep it early. */
    char dist[160];
    snprintf(dist, sizeof dist, "  \"distributedInfo\": {\"backend\": \"%s\", \"rank\": %d, \"world_size\": %d},\n",
             g_dist_backend, (int)g_dist_rank, (int)g_dist_world);
    lp_prof_out_puts(o, dist);
    if (in->record_shapes)
        lp_prof_out_puts(o, "  \"record_shapes\": 1,\n");
    if (in->profile_memory)
        lp_prof_out_puts(o, "  \"profile_memory\": 1,\n");
    if (in->with_stack)
        lp_prof_out_puts(o, "  \"with_stack\": 1,\n");
    if (in->with_flops)
        lp_prof_out_puts(o, "  \"with_flops\": 1,\n");
    if (in->hw_counters < 0)
        lp_prof_out_puts(o, "  \"hw_counters\": \"unavailable\",\n");
    lp_prof_out_puts(o, "  \"host_name\": ");
    lp_prof_out_json_str(o, host);
    lp_prof_out_printf(o,
                       ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": %lld,\n"
                       "  \"traceEvents\": [\n",
                       (long long)in->base_time_ns);

    size_t n = lp_prof_events_count(ev);
    int64_t next_ext = 1, idx = 0, op_count = 0;
    for (size_t i = 0; i < n; i++) { /* keep caller-given ids unique: start above them */
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->external_id >= next_ext)
            next_ext = e->external_id + 1;
    }
    int64_t gpu_pids[64];
    size_t n_gpu_pids = 0;
    for (size_t i = 0; i < n; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->gpu) { /* Kineto's GPU events: own args, no Ev Idx, not in the op count */
            lp_prof__write_gpu_event(o, e, devs, n_dev);
            lp_prof_out_puts(o, ",\n");
            int dev = e->gpu->kind == LP_GPU_KERNEL || e->gpu->kind == LP_GPU_MEMCPY ||
                      e->gpu->kind == LP_GPU_MEMSET || e->gpu->kind == LP_GPU_SYNC;
            size_t k = 0;
            while (dev && k < n_gpu_pids && gpu_pids[k] != e->pid)
                k++;
            if (dev && k == n_gpu_pids && n_gpu_pids < 64 && e->pid != in->pid)
                gpu_pids[n_gpu_pids++] = e->pid;
            continue;
        }
        int64_t ext = e->external_id >= 0 ? e->external_id : (e->ph == 'i' ? 0 : next_ext++);
        write_event(o, e, ext, idx, in);
        if (e->ph != 'i') {
            idx++;
            op_count++;
        }
        lp_prof_out_puts(o, ",\n");
    }
    /* Metadata: processes, then threads (kineto: process_name/labels/sort_index). */
    size_t nn = lp_prof__events_n_names(ev);
    int wrote_main = 0;
    for (size_t i = 0; i < nn; i++) {
        int64_t pid, tid;
        const char *name = lp_prof__events_name_at(ev, i, &pid, &tid);
        if (tid != INT64_MIN)
            continue;
        write_meta(o, "process_name", pid, 0, "name", name, 0);
        lp_prof_out_puts(o, ",\n");
        write_meta(o, "process_labels", pid, 0, "labels", "CPU", 0);
        lp_prof_out_puts(o, ",\n");
        write_meta(o, "process_sort_index", pid, 0, "sort_index", NULL, (long long)pid);
        lp_prof_out_puts(o, ",\n");
        wrote_main |= pid == in->pid;
    }
    if (!wrote_main) {
        write_meta(o, "process_name", in->pid, 0, "name", "loupe", 0);
        lp_prof_out_puts(o, ",\n");
        write_meta(o, "process_labels", in->pid, 0, "labels", "CPU", 0);
        lp_prof_out_puts(o, ",\n");
    }
    /* GPUs: the host process's name, label "GPU <n>", sorted after the CPU (Kineto) */
    const char *host_name = "loupe";
    for (size_t i = 0; i < nn; i++) {
        int64_t pid, tid;
        const char *name = lp_prof__events_name_at(ev, i, &pid, &tid);
        if (tid == INT64_MIN && pid == in->pid)
            host_name = name;
    }
    for (size_t k = 0; k < n_gpu_pids; k++) {
        char label[32];
        snprintf(label, sizeof label, "GPU %lld", (long long)gpu_pids[k]);
        write_meta(o, "process_name", gpu_pids[k], 0, "name", host_name, 0);
        lp_prof_out_puts(o, ",\n");
        write_meta(o, "process_labels", gpu_pids[k], 0, "labels", label, 0);
        lp_prof_out_puts(o, ",\n");
        write_meta(o, "process_sort_index", gpu_pids[k], 0, "sort_index", NULL,
                   (long long)(16777216 + gpu_pids[k]));
        lp_prof_out_puts(o, ",\n");
    }
    for (size_t i = 0; i < nn; i++) {
        int64_t pid, tid;
        const char *name = lp_prof__events_name_at(ev, i, &pid, &tid);
        if (tid == INT64_MIN)
            continue;
        write_meta(o, "thread_name", pid, tid, "name", name, 0);
        lp_prof_out_puts(o, ",\n");
        write_meta(o, "thread_sort_index", pid, tid, "sort_index", NULL, (long long)tid);
        lp_prof_out_puts(o, ",\n");
    }
    char ts[32], dur[32];
    lp_prof_fmt_us(ts, sizeof ts, in->window_start_ns);
    lp_prof_fmt_us(dur, sizeof dur, in->window_end_ns - in->window_start_ns);
    lp_prof_out_puts(o, "  {\"name\": \"process_sort_index\", \"ph\": \"M\", \"ts\": 0.000, "
                        "\"pid\": \"Spans\", \"tid\": 0, \"args\": {\"sort_index\": 536870912}},\n");
    lp_prof_out_printf(o,
                       "  {\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": %s, \"dur\": %s, "
                       "\"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", "
                       "\"name\": \"PyTorch Profiler (0)\", \"args\": {\"Op count\": %lld}},\n",
                       ts, dur, (long long)op_count);
    lp_prof_out_printf(o,
                       "  {\"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", "
                       "\"s\": \"g\", \"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", "
                       "\"ts\": %s},\n",
                       ts);
    lp_prof_fmt_us(ts, sizeof ts, in->window_end_ns);
    lp_prof_out_printf(o,
                       "  {\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", "
                       "\"pid\": \"\", \"tid\": \"\", \"ts\": %s}\n  ],\n  \"traceName\": ",
                       ts);
    lp_prof_out_json_str(o, path);
    lp_prof_out_puts(o, "\n}\n");
    return lp_prof_out_commit(o);
}
