/* GPU activity records: a CUPTI-neutral container (activities with their own name copies,
 * devices, the GPU/host clock pair), the kind names, and the JSONL writer (the strict
 * reader is gpu_records_read.c). */
#define _GNU_SOURCE /* strdup */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>

struct lp_gpu_records {
    lp_gpu_activity *a;
    size_t n, cap;
    lp_gpu_device_props *dev;
    size_t n_dev;
    int has_clock;
    int64_t clock_gpu, clock_host;
};

static const char *const kind_names[LP_GPU_KIND__COUNT] = {"kernel", "memcpy", "memset",  "runtime",
                                                           "driver", "sync",   "overhead"};
static const char *const kind_cats[LP_GPU_KIND__COUNT] = {
    "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cuda_sync", "overhead"};
static const char *const copy_names[LP_GPU_COPY__COUNT] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                                           "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
static const char *const mem_names[LP_GPU_MEMKIND__COUNT] = {
    "Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"};
static const char *const sync_names[LP_GPU_SYNCKIND__COUNT] = {"Unknown", "Event Sync", "Stream Wait Event",
                                                               "Stream Sync", "Context Sync"};

const char *lp_gpu_kind_name(lp_gpu_kind k)
{
    return (unsigned)k < LP_GPU_KIND__COUNT ? kind_names[k] : "?";
}
const char *lp_gpu_kind_category(lp_gpu_kind k)
{
    return (unsigned)k < LP_GPU_KIND__COUNT ? kind_cats[k] : "?";
}
const char *lp_gpu_copy_kind_name(int k)
{
    return (unsigned)k < LP_GPU_COPY__COUNT ? copy_names[k] : "Unknown";
}
const char *lp_gpu_mem_kind_name(int k)
{
    return (unsigned)k < LP_GPU_MEMKIND__COUNT ? mem_names[k] : "Unknown";
}
const char *lp_gpu_sync_kind_name(int k)
{
    return (unsigned)k < LP_GPU_SYNCKIND__COUNT ? sync_names[k] : "Unknown";
}

void lp_gpu_activity_init(lp_gpu_activity *a)
{
    memset(a, 0, sizeof *a);
    a->device = a->context = -1;
    a->stream = a->correlation = a->pid = a->tid = -1;
    a->cbid = -1;
    a->registers_per_thread = a->static_smem = a->dynamic_smem = -1;
    a->bytes = -1;
    a->copy_kind = a->src_kind = a->dst_kind = a->sync_kind = -1;
    a->cuda_event_id = -1;
    a->queued_ns = -1;
}

lp_status lp_gpu_records_new(lp_gpu_records **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory");
}

void lp_gpu_records_free(lp_gpu_records *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        free((char *)r->a[i].name);
    free(r->a);
    free(r->dev);
    free(r);
}

lp_status lp_gpu_records_add(lp_gpu_records *r, const lp_gpu_activity *a)
{
    if ((unsigned)a->kind >= LP_GPU_KIND__COUNT)
        return lp_err(LP_STATUS_INVALID_ARG, "GPU records: kind %d out of range", (int)a->kind);
    if (a->end_ns < a->start_ns)
        return lp_err(LP_STATUS_INVALID_ARG, "GPU records: %s record ends (%lld) before it starts (%lld)",
                      kind_names[a->kind], (long long)a->end_ns, (long long)a->start_ns);
    int named = a->kind == LP_GPU_KERNEL || a->kind == LP_GPU_RUNTIME || a->kind == LP_GPU_DRIVER ||
                a->kind == LP_GPU_OVERHEAD;
    if (named && (!a->name || !*a->name))
        return lp_err(LP_STATUS_INVALID_ARG, "GPU records: %s record without a name", kind_names[a->kind]);
    lp_gpu_activity *na = lp_grow(r->a, &r->cap, r->n + 1, sizeof *na, 256);
    if (!na)
        return lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory (%zu records)", r->n);
    r->a = na;
    lp_gpu_activity c = *a;
    c.name = NULL;
    if (named && !(c.name = strdup(a->name)))
        return lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory");
    r->a[r->n++] = c;
    return LP_OK;
}

size_t lp_gpu_records_count(const lp_gpu_records *r)
{
    return r->n;
}
const lp_gpu_activity *lp_gpu_records_get(const lp_gpu_records *r, size_t i)
{
    return i < r->n ? &r->a[i] : NULL;
}

lp_status lp_gpu_records_set_device(lp_gpu_records *r, const lp_gpu_device_props *d)
{
    for (size_t i = 0; i < r->n_dev; i++)
        if (r->dev[i].id == d->id) {
            r->dev[i] = *d;
            return LP_OK;
        }
    lp_gpu_device_props *nd = realloc(r->dev, (r->n_dev + 1) * sizeof *nd);
    if (!nd)
        return lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory");
    r->dev = nd;
    r->dev[r->n_dev] = *d;
    r->dev[r->n_dev].name[sizeof d->name - 1] = '\0';
    r->n_dev++;
    return LP_OK;
}

size_t lp_gpu_records_n_devices(const lp_gpu_records *r)
{
    return r->n_dev;
}
const lp_gpu_device_props *lp_gpu_records_device(const lp_gpu_records *r, size_t i)
{
    return i < r->n_dev ? &r->dev[i] : NULL;
}

void lp_gpu_records_set_clock(lp_gpu_records *r, int64_t gpu_ns, int64_t host_mono_ns)
{
    r->has_clock = 1;
    r->clock_gpu = gpu_ns;
    r->clock_host = host_mono_ns;
}

int lp_gpu_records_clock(const lp_gpu_records *r, int64_t *gpu_ns, int64_t *host_mono_ns)
{
    *gpu_ns = r->has_clock ? r->clock_gpu : 0;
    *host_mono_ns = r->has_clock ? r->clock_host : 0;
    return r->has_clock;
}

/* ---- writer ------------------------------------------------------------------------ */

static void put_i(lp_prof_out *o, const char *key, int64_t v)
{
    lp_prof_out_printf(o, ", \"%s\": %lld", key, (long long)v);
}

static void put_dim3(lp_prof_out *o, const char *key, const int32_t d[3])
{
    lp_prof_out_printf(o, ", \"%s\": [%d, %d, %d]", key, (int)d[0], (int)d[1], (int)d[2]);
}

static void put_s(lp_prof_out *o, const char *key, const char *v)
{
    lp_prof_out_printf(o, ", \"%s\": ", key);
    lp_prof_out_json_str(o, v);
}

static void write_record(lp_prof_out *o, const lp_gpu_activity *a)
{
    lp_prof_out_printf(o, "{\"kind\": \"%s\"", kind_names[a->kind]);
    if (a->name)
        put_s(o, "name", a->name);
    put_i(o, "start", a->start_ns);
    put_i(o, "end", a->end_ns);
    switch (a->kind) {
    case LP_GPU_KERNEL:
        put_i(o, "device", a->device);
        put_i(o, "context", a->context);
        put_i(o, "stream", a->stream);
        put_i(o, "correlation", a->correlation);
        put_dim3(o, "grid", a->grid);
        put_dim3(o, "block", a->block);
        put_i(o, "registers", a->registers_per_thread);
        put_i(o, "static_smem", a->static_smem);
        put_i(o, "dynamic_smem", a->dynamic_smem);
        put_i(o, "queued", a->queued_ns);
        break;
    case LP_GPU_MEMCPY:
    case LP_GPU_MEMSET:
        put_i(o, "device", a->device);
        put_i(o, "context", a->context);
        put_i(o, "stream", a->stream);
        put_i(o, "correlation", a->correlation);
        put_i(o, "bytes", a->bytes);
        if (a->kind == LP_GPU_MEMCPY) {
            put_s(o, "copy", lp_gpu_copy_kind_name(a->copy_kind));
            put_s(o, "src", lp_gpu_mem_kind_name(a->src_kind));
        }
        put_s(o, "dst", lp_gpu_mem_kind_name(a->dst_kind));
        break;
    case LP_GPU_RUNTIME:
    case LP_GPU_DRIVER:
        put_i(o, "pid", a->pid);
        put_i(o, "tid", a->tid);
        put_i(o, "correlation", a->correlation);
        put_i(o, "cbid", a->cbid);
        break;
    case LP_GPU_SYNC:
        put_s(o, "sync", lp_gpu_sync_kind_name(a->sync_kind));
        put_i(o, "device", a->device);
        put_i(o, "context", a->context);
        put_i(o, "stream", a->stream);
        put_i(o, "correlation", a->correlation);
        put_i(o, "event", a->cuda_event_id);
        break;
    case LP_GPU_OVERHEAD:
    default:
        put_i(o, "pid", a->pid);
        put_i(o, "tid", a->tid);
        break;
    }
    lp_prof_out_puts(o, "}\n");
}

lp_status lp_gpu_records_write_jsonl(const lp_gpu_records *r, const char *path)
{
    lp_prof_out *o;
    lp_status st = lp_prof_out_open(&o, path, 0);
    if (st != LP_OK)
        return st;
    lp_prof_out_puts(o, "{\"format\": \"loupe-gpu-records\", \"version\": 1}\n");
    if (r->has_clock)
        lp_prof_out_printf(o, "{\"kind\": \"clock\", \"gpu_ns\": %lld, \"host_mono_ns\": %lld}\n",
                           (long long)r->clock_gpu, (long long)r->clock_host);
    for (size_t i = 0; i < r->n_dev; i++) {
        const lp_gpu_device_props *d = &r->dev[i];
        lp_prof_out_printf(o, "{\"kind\": \"device\", \"id\": %d", (int)d->id);
        put_s(o, "name", d->name);
        put_i(o, "totalGlobalMem", d->total_global_mem);
        put_i(o, "computeMajor", d->compute_major);
        put_i(o, "computeMinor", d->compute_minor);
        put_i(o, "maxThreadsPerBlock", d->max_threads_per_block);
        put_i(o, "maxThreadsPerMultiprocessor", d->max_threads_per_sm);
        put_i(o, "regsPerBlock", d->regs_per_block);
        put_i(o, "warpSize", d->warp_size);
        put_i(o, "sharedMemPerBlock", d->shared_mem_per_block);
        put_i(o, "numSms", d->num_sms);
        put_i(o, "regsPerMultiprocessor", d->regs_per_sm);
        put_i(o, "sharedMemPerBlockOptin", d->shared_mem_per_block_optin);
        put_i(o, "sharedMemPerMultiprocessor", d->shared_mem_per_sm);
        put_i(o, "maxBlocksPerMultiprocessor", d->max_blocks_per_sm);
        put_i(o, "maxSmClockMhz", d->max_sm_clock_mhz);
        lp_prof_out_puts(o, "}\n");
    }
    for (size_t i = 0; i < r->n; i++)
        write_record(o, &r->a[i]);
    return lp_prof_out_commit(o);
}
