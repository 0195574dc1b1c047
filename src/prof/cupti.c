/* The CUPTI collector (CUDA builds only): activity buffers handed to CUPTI, records of
 * CUDA 13's CUPTI (Kernel10, Memcpy6, Memset4, API, Synchronization2, Overhead3) turned
 * into lp_gpu_activity as they complete, and a flush at stop. Like Kineto, thread ids are
 * the OS's (gettid, loupe's own) and CUPTI's clock is CLOCK_MONOTONIC through a timestamp
 * callback, so records sit on the recorder's timeline with no drift; the clock pair is
 * still written so a reader never has to assume that. CUPTI itself is loaded at run time
 * (cupti_load.c, table A); the CUDA runtime is linked statically, as the CUDA backend's. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include "cupti_load.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES (8u << 20)
#define BUF_ALIGN 8

static struct {
    pthread_mutex_t mu;
    int inited, running;
    lp_gpu_records *r; /* records of the running collection */
    lp_status err;     /* first failure while converting (out of memory) */
    uint64_t dropped;
    char *(*demangle)(const char *, char *, size_t *, int *);
} C = {PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, LP_OK, 0, NULL};
static const lp_cupti_api *A; /* set by lp_prof_cupti_load before any CUPTI call */

static const CUpti_ActivityKind kinds_required[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                                    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
/* Synchronization records are opt-in, as in PyTorch (enable_cuda_sync_events): default
 * traces carry none, and HTA counts them as non-compute GPU time. LP_PROF_CUDA_SYNC=1 on. */
static const CUpti_ActivityKind kinds_optional[] = {CUPTI_ACTIVITY_KIND_OVERHEAD,
                                                    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

static size_t n_optional(void)
{
    const char *e = getenv("LP_PROF_CUDA_SYNC");
    return e && !strcmp(e, "1") ? 2 : 1;
}

static lp_status cupti_fail(const char *what, CUptiResult res)
{
    const char *s = NULL;
    A->GetResultString(res, &s);
    return lp_err(LP_STATUS_UNSUPPORTED, "profiler: CUPTI %s failed: %s", what, s ? s : "?");
}

static uint64_t CUPTIAPI mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(BUF_ALIGN, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *max_records = 0;
}

/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (Kineto's names). */
static void api_name(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, char *buf, size_t cap)
{
    const char *n = NULL;
    if (A->GetCallbackName(dom, cbid, &n) != CUPTI_SUCCESS || !n) {
        snprintf(buf, cap, "%s %u", dom == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver",
                 (unsigned)cbid);
        return;
    }
    snprintf(buf, cap, "%s", n);
    char *v = strstr(buf, "_v");
    if (v && v[2] >= '0' && v[2] <= '9')
        *v = '\0';
}

static const char *overhead_name(CUpti_ActivityOverheadKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
        return "Driver Compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
        return "Buffer Flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
        return "Instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
        return "Resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
        return "Runtime Triggered Module Loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
        return "Lazy Function Loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
        return "Command Buffer Full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
        return "Activity Buffer Request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
        return "UVM Activity Init";
    default:
        return "Unknown";
    }
}

/* Runtime calls Kineto leaves out (its blocklist): frequent, never launch work, and would
 * swamp a trace (cuBLAS asks cudaGetDevice on every call). */
static int blocklisted(const char *api)
{
    static const char *const names[] = {
        "cudaGetDevice",          "cudaSetDevice",         "cudaGetLastError",  "cudaPeekAtLastError",
        "cudaDeviceGetAttribute", "cudaFuncGetAttributes", "cudaGetDeviceCount"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(api, names[i]))
            return 1;
    return 0;
}

static int64_t u32_or_none(uint32_t v)
{
    return v == UINT32_MAX ? -1 : (int64_t)v;
}

/* The fields every device-side record (kernel, memcpy, memset) carries under the same names. */
#define DEVICE_RECORD(a, r)                                                                                    \
    do {                                                                                                       \
        (a).start_ns = (int64_t)(r)->start;                                                                    \
        (a).end_ns = (int64_t)(r)->end;                                                                        \
        (a).device = (int32_t)(r)->deviceId;                                                                   \
        (a).context = (int32_t)(r)->contextId;                                                                 \
        (a).stream = (r)->streamId;                                                                            \
        (a).correlation = (r)->correlationId;                                                                  \
    } while (0)

/* One CUPTI record -> C.r (caller holds C.mu). Kinds not asked for are skipped. */
static void convert(const CUpti_Activity *rec)
{
    lp_gpu_activity a;
    lp_gpu_activity_init(&a);
    char name[256];
    char *dem = NULL;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        a.kind = LP_GPU_KERNEL;
        a.name = k->name ? k->name : "?";
        if (C.demangle && k->name) { /* Kineto shows demangled names */
            int status = -1;
            dem = C.demangle(k->name, NULL, NULL, &status);
            if (dem && status == 0)
                a.name = dem;
        }
        DEVICE_RECORD(a, k);
        a.grid[0] = k->gridX, a.grid[1] = k->gridY, a.grid[2] = k->gridZ;
        a.block[0] = k->blockX, a.block[1] = k->blockY, a.block[2] = k->blockZ;
        a.registers_per_thread = k->registersPerThread;
        a.static_smem = k->staticSharedMemory;
        a.dynamic_smem = k->dynamicSharedMemory;
        a.queued_ns = k->queued == CUPTI_TIMESTAMP_UNKNOWN ? -1 : (int64_t)k->queued;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        a.kind = LP_GPU_MEMCPY;
        DEVICE_RECORD(a, m);
        a.bytes = (int64_t)m->bytes;
        a.copy_kind = m->copyKind < LP_GPU_COPY__COUNT ? m->copyKind : 0;
        a.src_kind = m->srcKind < LP_GPU_MEMKIND__COUNT ? m->srcKind : 0;
        a.dst_kind = m->dstKind < LP_GPU_MEMKIND__COUNT ? m->dstKind : 0;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
        a.kind = LP_GPU_MEMSET;
        DEVICE_RECORD(a, m);
        a.bytes = (int64_t)m->bytes;
        a.dst_kind = m->memoryKind < LP_GPU_MEMKIND__COUNT ? m->memoryKind : 0;
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *p = (const CUpti_ActivityAPI *)rec;
        int rt = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        a.kind = rt ? LP_GPU_RUNTIME : LP_GPU_DRIVER;
        api_name(rt ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, p->cbid, name, sizeof name);
        if (rt && blocklisted(name))
            return;
        a.name = name;
        a.start_ns = (int64_t)p->start;
        a.end_ns = (int64_t)p->end;
        a.pid = p->processId;
        a.tid = p->threadId;
        a.correlation = p->correlationId;
        a.cbid = (int32_t)p->cbid;
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)rec;
        a.kind = LP_GPU_SYNC;
        a.start_ns = (int64_t)s->start;
        a.end_ns = (int64_t)s->end;
        a.device = 0; /* the record names a context, not a device; one-GPU runs */
        a.context = (int32_t)u32_or_none(s->contextId);
        a.stream = s->streamId; /* UINT32_MAX (context sync) is written as Kineto does */
        a.correlation = s->correlationId;
        a.sync_kind = (int)s->type < (int)LP_GPU_SYNCKIND__COUNT ? (int32_t)s->type : 0;
        a.cuda_event_id = u32_or_none(s->cudaEventId);
        break;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const CUpti_ActivityOverhead3 *o = (const CUpti_ActivityOverhead3 *)rec;
        a.kind = LP_GPU_OVERHEAD;
        a.name = overhead_name(o->overheadKind);
        a.start_ns = (int64_t)o->start;
        a.end_ns = (int64_t)o->end;
        if (o->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS || o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) {
            a.pid = o->objectId.pt.processId;
            a.tid = o->objectId.pt.threadId;
        }
        break;
    }
    default:
        return;
    }
    if (a.end_ns < a.start_ns) /* an incomplete record (flushed before it ended) */
        a.end_ns = a.start_ns;
    if (C.r && C.err == LP_OK)
        C.err = lp_gpu_records_add(C.r, &a);
    free(dem);
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&C.mu);
    while (A->ActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        convert(rec);
    size_t dropped = 0;
    if (A->ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
        C.dropped += dropped;
    pthread_mutex_unlock(&C.mu);
    free(buffer);
}

static lp_status init_once(void)
{
    if (C.inited)
        return LP_OK;
    /* the timestamp callback must come before any activity kind is enabled */
    CUptiResult res = A->ActivityRegisterTimestampCallback(mono_ns);
    if (res != CUPTI_SUCCESS) /* then CUPTI's own clock (CLOCK_REALTIME): the pair maps it */
        fprintf(stderr, "loupe profiler: CUPTI keeps its own clock (timestamp callback refused)\n");
    if ((res = A->SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)) != CUPTI_SUCCESS)
        return cupti_fail("cuptiSetThreadIdType", res);
    if ((res = A->ActivityRegisterCallbacks(buf_requested, buf_completed)) != CUPTI_SUCCESS)
        return cupti_fail("cuptiActivityRegisterCallbacks", res);
    /* libstdc++'s demangler when the process has it (CUPTI itself is C++) */
    void *d = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (d)
        memcpy(&C.demangle, &d, sizeof d);
    C.inited = 1;
    return LP_OK;
}

static lp_status add_devices(lp_gpu_records *r)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0)
        return lp_err(LP_STATUS_UNSUPPORTED, "profiler: no CUDA GPU present (%s)",
                      e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess)
            continue;
        lp_gpu_device_props d;
        memset(&d, 0, sizeof d);
        d.id = i;
        memcpy(d.name, p.name, sizeof d.name - 1); /* d.name[127] stays 0 */
        d.total_global_mem = (int64_t)p.totalGlobalMem;
        d.compute_major = p.major;
        d.compute_minor = p.minor;
        d.max_threads_per_block = p.maxThreadsPerBlock;
        d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
        d.regs_per_block = p.regsPerBlock;
        d.warp_size = p.warpSize;
        d.shared_mem_per_block = (int64_t)p.sharedMemPerBlock;
        d.num_sms = p.multiProcessorCount;
        d.regs_per_sm = p.regsPerMultiprocessor;
        d.shared_mem_per_block_optin = (int64_t)p.sharedMemPerBlockOptin;
        d.shared_mem_per_sm = (int64_t)p.sharedMemPerMultiprocessor;
        d.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
        int khz = 0;
        if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, i) == cudaSuccess)
            d.max_sm_clock_mhz = khz / 1000;
        lp_status st = lp_gpu_records_set_device(r, &d);
        if (st != LP_OK)
            return st;
    }
    return LP_OK;
}

int lp_prof_cupti_built(void)
{
    return 1;
}

lp_status lp_prof_cupti_load(void)
{
    const lp_cupti_api *a = lp_prof__cupti_api();
    if (!a)
        return LP_STATUS_UNSUPPORTED; /* lp_err names the places tried */
    __atomic_store_n(&A, a, __ATOMIC_RELEASE);
    return LP_OK;
}

lp_status lp_prof_cupti_start(void)
{
    pthread_mutex_lock(&C.mu);
    int running = C.running;
    pthread_mutex_unlock(&C.mu);
    if (running)
        return LP_OK;
    lp_gpu_records *r;
    lp_status st = lp_gpu_records_new(&r);
    if (st == LP_OK)
        st = add_devices(r);
    if (st == LP_OK)
        st = lp_prof_cupti_load();
    if (st == LP_OK)
        st = init_once();
    if (st != LP_OK) {
        lp_gpu_records_free(r);
        return st;
    }
    /* the clock pair: CUPTI's (our callback's) time between two reads of loupe's clock */
    uint64_t g = 0;
    int64_t h0 = lp_prof_now_ns();
    A->GetTimestamp(&g);
    int64_t h1 = lp_prof_now_ns();
    lp_gpu_records_set_clock(r, (int64_t)g, h0 + (h1 - h0) / 2);
    pthread_mutex_lock(&C.mu);
    C.r = r;
    C.err = LP_OK;
    C.dropped = 0;
    C.running = 1;
    pthread_mutex_unlock(&C.mu);
    for (size_t i = 0; i < sizeof kinds_required / sizeof kinds_required[0]; i++) {
        CUptiResult res = A->ActivityEnable(kinds_required[i]);
        if (res != CUPTI_SUCCESS) {
            st = cupti_fail("cuptiActivityEnable", res);
            lp_gpu_records *none = NULL;
            if (lp_prof_cupti_stop(&none) == LP_OK)
                lp_gpu_records_free(none);
            return st;
        }
    }
    for (size_t i = 0; i < n_optional(); i++)
        (void)A->ActivityEnable(kinds_optional[i]); /* nice to have; older drivers may refuse */
    return LP_OK;
}

lp_status lp_prof_cupti_stop(lp_gpu_records **out)
{
    *out = NULL;
    pthread_mutex_lock(&C.mu);
    int running = C.running;
    pthread_mutex_unlock(&C.mu);
    if (!running)
        return LP_OK;
    /* forced: also the buffers CUPTI has not filled; then no new records */
    CUptiResult res = A->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < sizeof kinds_required / sizeof kinds_required[0]; i++)
        A->ActivityDisable(kinds_required[i]);
    for (size_t i = 0; i < sizeof kinds_optional / sizeof kinds_optional[0]; i++)
        A->ActivityDisable(kinds_optional[i]);
    pthread_mutex_lock(&C.mu);
    lp_gpu_records *r = C.r;
    lp_status st = C.err;
    uint64_t dropped = C.dropped;
    C.r = NULL;
    C.running = 0;
    pthread_mutex_unlock(&C.mu);
    if (st != LP_OK) /* the message was set on CUPTI's thread */
        st = lp_err(st, "profiler: out of memory keeping CUPTI's records");
    else if (res != CUPTI_SUCCESS)
        st = cupti_fail("cuptiActivityFlushAll", res);
    if (dropped)
        fprintf(stderr, "loupe profiler: CUPTI dropped %llu activity records (buffers full)\n",
                (unsigned long long)dropped);
    if (st != LP_OK) {
        lp_gpu_records_free(r);
        return st;
    }
    *out = r;
    return LP_OK;
}

static const lp_prof_gpu_source cupti_source = {lp_prof_cupti_start, lp_prof_cupti_stop};

lp_status lp_prof_cupti_attach(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0)
        return lp_err(LP_STATUS_UNSUPPORTED, "profiler: no CUDA GPU present: GPU activity not collected");
    lp_status st = lp_prof_cupti_load(); /* said now, not at the first window */
    if (st != LP_OK)
        return st;
    lp_prof_set_gpu_source(&cupti_source);
    return LP_OK;
}

void lp_prof_cupti_detach(void)
{
    lp_prof_set_gpu_source(NULL);
}
