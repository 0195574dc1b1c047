/* loupe profiler: nested per-thread ranges and op records, step markers under a
 * torch.profiler-style schedule, memory accounting by category, and exporters (Kineto
 * trace, key averages, collapsed stacks, memory timeline, summary) that all read one
 * neutral event list. Depends only on libc, pthreads, zlib and lp_base.
 *
 *   lp_prof_config cfg;
 *   lp_prof_config_init(&cfg);
 *   cfg.out_dir = "reports/run1/profiler";          // default on_trace_ready exports here
 *   cfg.use_schedule = 1;
 *   cfg.schedule = (lp_prof_schedule){.wait = 1, .warmup = 1, .active = 2, .repeat = 1};
 *   cfg.record_shapes = cfg.profile_memory = cfg.with_flops = 1;
 *   if (lp_prof_start(&cfg) != LP_OK) ...;           // opens ProfilerStep#0
 *   for (int s = 0; s < 6; s++) {
 *       LP_PROF_SCOPE("forward");                    // popped at the end of the block
 *       static const lp_prof_op_desc mm = {"aten::mm", LP_PROF_CAT_CPU_OP, 2, {2, 2}, {"float", "float"}};
 *       int64_t dims[4] = {M, K, K, N};
 *       lp_prof_op_push(&mm, dims, 2.0 * M * N * K, 4.0 * (M * K + K * N + M * N));
 *       ...
 *       lp_prof_range_pop();
 *       lp_prof_step();                              // ProfilerStep#s ends, #s+1 begins
 *   }
 *   lp_prof_stop();                                  // a partial active window is still saved
 *
 * Hot path (Tracy-style): a range records a timestamp and a pointer to static data into a
 * per-thread buffer; no lock. When recording is off a push/pop costs one predictable
 * branch; with -DLP_PROF_DISABLE every LP_PROF_* macro and inline call compiles to nothing.
 * Names passed to push must outlive the profiler (string literals); use
 * lp_prof_intern() or lp_prof_range_push_copy() for built names.
 *
 * Everything public here is thread-safe unless noted. One profiling session per process.
 */
#ifndef LOUPE_PROF_H
#define LOUPE_PROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loupe/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/* Memory accounting (always on, independent of recording).                            */
/* ------------------------------------------------------------------------------------ */

typedef enum lp_mem_category {
    LP_MEM_CATEGORY_PARAMETER,
    LP_MEM_CATEGORY_GRADIENT,
    LP_MEM_CATEGORY_OPTIMIZER_STATE,
    LP_MEM_CATEGORY_ACTIVATION,
    LP_MEM_CATEGORY_TEMPORARY,
    LP_MEM_CATEGORY_INPUT,
    LP_MEM_CATEGORY_QUANTIZED_WEIGHT,
    LP_MEM_CATEGORY_OTHER,
    LP_MEM_CATEGORY_KV_CACHE, /* generation's key/value cache (after OTHER: saved traces keep their numbers) */
    LP_MEM_CATEGORY__COUNT
} lp_mem_category;

/* "parameter", "gradient", "optimizer_state", "activation", "temporary", "input",
 * "quantized_weight", "other", "kv_cache"; "unknown" for out-of-range values. Never NULL. */
const char *lp_mem_category_name(lp_mem_category c);

/* Records that bytes at addr were allocated / freed for category cat. Updates the
 * current and peak byte counts (atomics, lock-free); when a session is recording with
 * profile_memory, also records a `[memory]` instant event on the calling thread. A free
 * must pass the same bytes and cat as its allocation. Out-of-range cat counts as OTHER. */
void lp_prof_mem_alloc(const void *addr, uint64_t bytes, lp_mem_category cat);
void lp_prof_mem_free(const void *addr, uint64_t bytes, lp_mem_category cat);

typedef struct lp_mem_stats {
    int64_t current[LP_MEM_CATEGORY__COUNT]; /* bytes live now, per category */
    int64_t peak[LP_MEM_CATEGORY__COUNT];    /* highest current[c] since start/reset */
    int64_t total_current;                   /* sum of current[] */
    int64_t total_peak;                      /* highest total_current (not sum of peaks) */
    uint64_t n_allocs, n_frees;
} lp_mem_stats;

/* Snapshot of the counters (each value is read atomically; the set is not a single
 * atomic snapshot while other threads allocate). */
void lp_prof_mem_stats(lp_mem_stats *out);

/* Sets every peak to the current value (e.g. per epoch). */
void lp_prof_mem_reset_peaks(void);

/* Process resident set size now and its peak (VmRSS / VmHWM of /proc/self/status), bytes.
 * LP_STATUS_IO / LP_STATUS_UNSUPPORTED when /proc is unreadable. */
LP_WARN_UNUSED lp_status lp_prof_rss(int64_t *rss_bytes, int64_t *peak_rss_bytes);

/* ------------------------------------------------------------------------------------ */
/* Clock and threads.                                                                  */
/* ------------------------------------------------------------------------------------ */

/* CLOCK_MONOTONIC in ns (the time base of every recorded event). */
int64_t lp_prof_now_ns(void);
/* Converts a monotonic timestamp to Unix-epoch ns (base captured once per process). */
int64_t lp_prof_mono_to_unix_ns(int64_t mono_ns);
/* OS thread id (gettid) of the caller; cached per thread. */
int64_t lp_prof_thread_id(void);
/* Names the calling thread in traces ("thread <tid> (<name>)"); copies name. Also sets
 * the pthread name (first 15 chars). Safe to call any time. */
void lp_prof_set_thread_name(const char *name);

/* Returns a pointer to a process-lifetime copy of s (same pointer for equal strings).
 * For range names built at run time. Takes a lock: call once, not per range. NULL on OOM. */
const char *lp_prof_intern(const char *s);

/* ------------------------------------------------------------------------------------ */
/* Ranges and ops (hot path).                                                          */
/* ------------------------------------------------------------------------------------ */

/* Trace category of a range: user_annotation (record_function labels, steps, modules)
 * or cpu_op (an operator/kernel call). */
typedef enum lp_prof_cat {
    LP_PROF_CAT_USER_ANNOTATION = 0,
    LP_PROF_CAT_CPU_OP = 1,
    LP_PROF_CAT__COUNT
} lp_prof_cat;

#define LP_PROF_MAX_INPUTS 8
#define LP_PROF_MAX_RANK 8

/* Static description of an op call site; lives in static storage, the hot path stores
 * only its address. rank[i] is the number of dims of input i (0 = non-tensor input,
 * written as [] like torch); type[i] its dtype name ("float", "c10::BFloat16", "Scalar")
 * or NULL for "". */
typedef struct lp_prof_op_desc {
    const char *name;
    lp_prof_cat cat;
    int32_t ninputs;                      /* 0..LP_PROF_MAX_INPUTS */
    int8_t rank[LP_PROF_MAX_INPUTS];      /* each 0..LP_PROF_MAX_RANK */
    const char *type[LP_PROF_MAX_INPUTS];
} lp_prof_op_desc;

/* Internal: recording flag and the out-of-line recorders behind the inline calls. */
extern int lp_prof__active;
void lp_prof__push(const char *name, lp_prof_cat cat);
void lp_prof__op_push(const lp_prof_op_desc *d, const int64_t *dims, double flops, double bytes);
void lp_prof__pop(void);

#define LP_PROF__ON() __builtin_expect(__atomic_load_n(&lp_prof__active, __ATOMIC_RELAXED), 0)

#ifndef LP_PROF_DISABLE
/* Opens a named range (category user_annotation) on the calling thread. name must
 * outlive the profiler. Nested ranges form the stack used by stacks.txt. */
static inline void lp_prof_range_push(const char *name)
{
    if (LP_PROF__ON())
        lp_prof__push(name, LP_PROF_CAT_USER_ANNOTATION);
}
/* Same with an explicit category. */
static inline void lp_prof_range_push_cat(const char *name, lp_prof_cat cat)
{
    if (LP_PROF__ON())
        lp_prof__push(name, cat);
}
/* Opens an op range: desc (static) names it and gives input ranks; dims holds the input
 * shapes concatenated (sum of desc->rank[i] values; may be NULL when ninputs is 0);
 * flops and bytes moved are this call's (pass < 0 when unknown). Dims are copied only
 * when record_shapes is on. Close with lp_prof_range_pop(). */
static inline void lp_prof_op_push(const lp_prof_op_desc *desc, const int64_t *dims,
                                   double flops, double bytes)
{
    if (LP_PROF__ON())
        lp_prof__op_push(desc, dims, flops, bytes);
}
/* Closes the innermost open range of the calling thread. A pop with no matching push in
 * the recorded window is dropped at export (never crashes). */
static inline void lp_prof_range_pop(void)
{
    if (LP_PROF__ON())
        lp_prof__pop();
}
#else
static inline void lp_prof_range_push(const char *name) { (void)name; }
static inline void lp_prof_range_push_cat(const char *name, lp_prof_cat cat) { (void)name; (void)cat; }
static inline void lp_prof_op_push(const lp_prof_op_desc *desc, const int64_t *dims,
                                   double flops, double bytes)
{ (void)desc; (void)dims; (void)flops; (void)bytes; }
static inline void lp_prof_range_pop(void) {}
#endif

/* lp_prof_range_push(lp_prof_intern(name)) : for names built at run time. */
#ifndef LP_PROF_DISABLE
void lp_prof_range_push_copy(const char *name);
#else
static inline void lp_prof_range_push_copy(const char *name) { (void)name; }
#endif

/* Scoped forms: the range closes when the enclosing block exits (cleanup attribute). A
 * scope only pops what it pushed, so toggling recording mid-scope stays balanced. */
static inline int lp_prof__scope_begin(const char *name, lp_prof_cat cat)
{
    if (LP_PROF__ON()) {
        lp_prof__push(name, cat);
        return 1;
    }
    return 0;
}
static inline int lp_prof__scope_op(const lp_prof_op_desc *d, const int64_t *dims, double flops,
                                    double bytes)
{
    if (LP_PROF__ON()) {
        lp_prof__op_push(d, dims, flops, bytes);
        return 1;
    }
    return 0;
}
static inline void lp_prof__scope_end(int *pushed)
{
    if (*pushed)
        lp_prof__pop();
}
#define LP_PROF__CAT2(a, b) a##b
#define LP_PROF__CAT(a, b) LP_PROF__CAT2(a, b)
#ifndef LP_PROF_DISABLE
#define LP_PROF_SCOPE(name)                                                                \
    __attribute__((cleanup(lp_prof__scope_end), unused)) int LP_PROF__CAT(lp_prof_scope_, __COUNTER__) = \
        lp_prof__scope_begin((name), LP_PROF_CAT_USER_ANNOTATION)
#define LP_PROF_SCOPE_CAT(name, cat)                                                       \
    __attribute__((cleanup(lp_prof__scope_end), unused)) int LP_PROF__CAT(lp_prof_scope_, __COUNTER__) = \
        lp_prof__scope_begin((name), (cat))
#define LP_PROF_OP_SCOPE(desc, dims, flops, bytes)                                         \
    __attribute__((cleanup(lp_prof__scope_end), unused)) int LP_PROF__CAT(lp_prof_scope_, __COUNTER__) = \
        lp_prof__scope_op((desc), (dims), (flops), (bytes))
#else
/* compiled out: arguments are still "used" so call sites build warning-free */
#define LP_PROF_SCOPE(name) do { (void)(name); } while (0)
#define LP_PROF_SCOPE_CAT(name, cat) do { (void)(name); (void)(cat); } while (0)
#define LP_PROF_OP_SCOPE(desc, dims, flops, bytes)                                         \
    do { (void)(desc); (void)(dims); (void)(flops); (void)(bytes); } while (0)
#endif

/* Well-known range names the step breakdown recognises (torch's conventions). */
#define LP_PROF_NAME_DATALOADER "enumerate(DataLoader)#loupe.__next__"
#define LP_PROF_NAME_OPTIMIZER_STEP "Optimizer.step#AdamW.step"
#define LP_PROF_NAME_OPTIMIZER_ZERO_GRAD "Optimizer.zero_grad#AdamW.zero_grad"

/* ------------------------------------------------------------------------------------ */
/* Schedule (torch.profiler.schedule semantics).                                       */
/* ------------------------------------------------------------------------------------ */

typedef enum lp_prof_action {
    LP_PROF_ACTION_NONE = 0,
    LP_PROF_ACTION_WARMUP = 1,
    LP_PROF_ACTION_RECORD = 2,
    LP_PROF_ACTION_RECORD_AND_SAVE = 3
} lp_prof_action;

/* "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE". */
const char *lp_prof_action_name(lp_prof_action a);

typedef struct lp_prof_schedule {
    int64_t skip_first;      /* steps ignored before the first cycle */
    int64_t wait;            /* per cycle: idle steps */
    int64_t warmup;          /* per cycle: profiler runs, nothing kept */
    int64_t active;          /* per cycle: recorded steps (> 0) */
    int64_t repeat;          /* cycles; 0 = until stopped */
    int64_t skip_first_wait; /* newer torch: nonzero skips the first cycle's wait */
} lp_prof_schedule;

/* Checks torch's preconditions (wait, warmup, repeat, skip_first >= 0, active > 0).
 * LP_STATUS_INVALID_ARG with a message naming the field. */
LP_WARN_UNUSED lp_status lp_prof_schedule_validate(const lp_prof_schedule *s);

/* The action for step (>= 0), exactly torch.profiler.schedule's function. */
lp_prof_action lp_prof_schedule_action(const lp_prof_schedule *s, int64_t step);

/* fsdp_qlora's profiling_frequency with repeat 0: wait = frequency - warmup - active.
 * Fills *out (skip_first 0, repeat 0). LP_STATUS_INVALID_ARG when the cycle does not fit
 * (wait would be < 0) or active <= 0. */
LP_WARN_UNUSED lp_status lp_prof_schedule_from_frequency(int64_t frequency, int64_t warmup,
                                                         int64_t active, lp_prof_schedule *out);

/* Steps needed for one full cycle: skip_first + (wait unless skip_first_wait) + warmup +
 * active. */
int64_t lp_prof_schedule_cycle_steps(const lp_prof_schedule *s);

/* The seeds' max_steps rule: max(max_steps, cycle_steps) so at least one full cycle fits.
 * max_steps <= 0 (unlimited) is returned unchanged. */
int64_t lp_prof_schedule_adjust_max_steps(const lp_prof_schedule *s, int64_t max_steps);

/* What a transition does (torch's profile.action_map), as a bitmask run in this order:
 * WARN, STOP (stop_trace), READY (on_trace_ready), PREPARE, START, except that
 * WARMUP->NONE and exit-from-WARMUP run START then STOP. */
enum {
    LP_PROF_DO_PREPARE = 1 << 0,
    LP_PROF_DO_START = 1 << 1,
    LP_PROF_DO_STOP = 1 << 2,
    LP_PROF_DO_READY = 1 << 3,
    LP_PROF_DO_WARN = 1 << 4
};
/* Operations for prev -> next; next = -1 means the profiler exits. */
uint32_t lp_prof_transition(lp_prof_action prev, int next);

/* ------------------------------------------------------------------------------------ */
/* Neutral event list: what the recorder produces and every exporter (and loupe analyze, */
/* for any parsed Kineto trace) consumes.                                              */
/* ------------------------------------------------------------------------------------ */

/* GPU records (defined in the GPU section below). */
typedef struct lp_gpu_activity lp_gpu_activity;
typedef struct lp_gpu_device_props lp_gpu_device_props;

/* One completed event. Strings and arrays are borrowed by lp_prof_events_add (copied). */
typedef struct lp_prof_event {
    const char *name;        /* required */
    const char *cat;         /* "cpu_op", "user_annotation", "cpu_instant_event", "kernel",
                                "cuda_runtime", ...; NULL = "" */
    char ph;                 /* 'X' complete or 'i' instant */
    int64_t pid, tid;        /* OS pid / tid (GPU: device / stream); non-numeric -> -1 */
    int64_t ts_ns;           /* start, ns relative to info.base_time_ns */
    int64_t dur_ns;          /* 'X': duration; 'i': 0 */
    int64_t external_id;     /* "External id"; -1 = none (the trace writer then numbers it) */
    int64_t correlation;     /* "correlation" (runtime <-> kernel); -1 = none */
    /* Input shapes ("Input Dims"): n_inputs entries; input i has input_ranks[i] dims,
     * input_dims holds them concatenated. n_inputs = -1: shapes not recorded. */
    int32_t n_inputs;
    const int32_t *input_ranks;
    const int64_t *input_dims;
    const char *const *input_types; /* n_inputs dtype names or NULL ("Input type") */
    double flops;            /* < 0 unknown */
    double bytes;            /* bytes moved, < 0 unknown */
    /* [memory] instants (name "[memory]", ph 'i'): */
    int64_t mem_bytes;       /* + allocation / - free */
    int64_t mem_total_allocated, mem_total_reserved;
    uint64_t mem_addr;
    int32_t mem_device_type; /* 0 CPU, 1 CUDA */
    int32_t mem_device_id;   /* -1 CPU */
    int32_t mem_category;    /* lp_mem_category or -1 unknown */
    /* Hardware counters over the range (inclusive); -1 = unavailable/off. */
    int64_t hw_cycles, hw_instructions, hw_cache_misses;
    /* GPU events (kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver, cuda_sync,
     * overhead) made by lp_prof_events_add_gpu: the record behind the event (copied), NULL
     * for host events. gpu_flow: 's' = the ac2g flow starts here (a launch with device
     * work), 'f' = it ends here (device work with a launch), 0 = none. */
    const lp_gpu_activity *gpu;
    char gpu_flow;
} lp_prof_event;

/* Fills e with "absent" values (external_id/correlation/n_inputs/mem_category/hw_* = -1,
 * flops/bytes = -1, mem_device_id = -1, ph 'X'). Start from this before setting fields. */
void lp_prof_event_init(lp_prof_event *e);

/* Trace-wide facts kept with the list (filled by the recorder, or by a trace parser). */
typedef struct lp_prof_events_info {
    int64_t base_time_ns;     /* Unix ns of ts 0 ("baseTimeNanoseconds") */
    int64_t window_start_ns;  /* recorded window, relative ns (the Trace span) */
    int64_t window_end_ns;
    int64_t pid;              /* process of the CPU events */
    int32_t record_shapes, profile_memory, with_flops, with_stack;
    int32_t hw_counters;      /* 1 recorded, 0 off, -1 requested but unavailable */
    int32_t has_mem_baseline; /* mem_baseline valid: bytes live per category at window start */
    int64_t mem_baseline[LP_MEM_CATEGORY__COUNT];
    int64_t trace_index;      /* 0 for the first saved window, then 1, 2, ... */
} lp_prof_events_info;

typedef struct lp_prof_events lp_prof_events;

/* Creates an empty list (info zeroed, pid = getpid()). Free with lp_prof_events_free. */
LP_WARN_UNUSED lp_status lp_prof_events_new(lp_prof_events **out);
void lp_prof_events_free(lp_prof_events *ev);
/* Appends a copy of *e (strings, dims and types copied). LP_STATUS_INVALID_ARG when name
 * is NULL or shapes are inconsistent; LP_STATUS_NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_prof_events_add(lp_prof_events *ev, const lp_prof_event *e);
size_t lp_prof_events_count(const lp_prof_events *ev);
/* The i-th event (0 <= i < count); pointers stay valid until the list is freed, but the
 * order may change with lp_prof_events_sort. */
const lp_prof_event *lp_prof_events_get(const lp_prof_events *ev, size_t i);
/* Stable sort by (ts_ns, longer dur first): parents before children. */
void lp_prof_events_sort(lp_prof_events *ev);
/* Mutable trace-wide facts. Never NULL. */
lp_prof_events_info *lp_prof_events_info_of(lp_prof_events *ev);
const lp_prof_events_info *lp_prof_events_info_get(const lp_prof_events *ev);
/* Thread / process names for the trace's metadata events (copied; last one wins). */
LP_WARN_UNUSED lp_status lp_prof_events_set_thread_name(lp_prof_events *ev, int64_t pid,
                                                        int64_t tid, const char *name);
LP_WARN_UNUSED lp_status lp_prof_events_set_process_name(lp_prof_events *ev, int64_t pid,
                                                         const char *name);
/* GPUs written as the trace's "deviceProperties" (copied; replaces any earlier set;
 * lp_prof_events_add_gpu sets them). */
LP_WARN_UNUSED lp_status lp_prof_events_set_gpu_devices(lp_prof_events *ev,
                                                        const lp_gpu_device_props *d,
                                                        size_t n);
const lp_gpu_device_props *lp_prof_events_gpu_devices(const lp_prof_events *ev, size_t *n);
/* Name given to a thread, NULL if none. */
const char *lp_prof_events_thread_name(const lp_prof_events *ev, int64_t pid, int64_t tid);
/* Formats input shapes as torch's str(input_shapes): "[[64, 768], [768, 768]]", "[]".
 * Writes at most cap bytes (always NUL-terminated); returns the length needed. */
size_t lp_prof_event_format_shapes(const lp_prof_event *e, char *buf, size_t cap);

/* ------------------------------------------------------------------------------------ */
/* Key averages (torch's EventList.key_averages + table).                              */
/* ------------------------------------------------------------------------------------ */

typedef enum lp_prof_sort {
    LP_PROF_SORT_NONE = 0,             /* first-seen order */
    LP_PROF_SORT_SELF_CPU_TIME_TOTAL,  /* "self_cpu_time_total" */
    LP_PROF_SORT_CPU_TIME_TOTAL,       /* "cpu_time_total" */
    LP_PROF_SORT_CPU_TIME,             /* "cpu_time" (average) */
    LP_PROF_SORT_SELF_DEVICE_TIME_TOTAL, /* "self_cuda_time_total" / self_device_... */
    LP_PROF_SORT_DEVICE_TIME_TOTAL,    /* "cuda_time_total" */
    LP_PROF_SORT_DEVICE_TIME,          /* "cuda_time" */
    LP_PROF_SORT_CPU_MEMORY_USAGE,     /* "cpu_memory_usage" */
    LP_PROF_SORT_SELF_CPU_MEMORY_USAGE,
    LP_PROF_SORT_DEVICE_MEMORY_USAGE,  /* "cuda_memory_usage" */
    LP_PROF_SORT_SELF_DEVICE_MEMORY_USAGE,
    LP_PROF_SORT_COUNT,                /* "count" */
    LP_PROF_SORT_FLOPS,                /* "flops" */
    LP_PROF_SORT__COUNT
} lp_prof_sort;

/* Parses torch's sort_by names ("self_cpu_time_total", "cuda_time_total", "xpu_...",
 * "device_...", "count", ...). LP_STATUS_INVALID_ARG naming the key otherwise. */
LP_WARN_UNUSED lp_status lp_prof_sort_parse(const char *s, lp_prof_sort *out);
const char *lp_prof_sort_name(lp_prof_sort s);

typedef struct lp_prof_keyavg_opts {
    int group_by_input_shape; /* key includes str(input shapes) */
    lp_prof_sort sort_by;     /* descending; ties keep first-seen order */
    int64_t row_limit;        /* rows printed; torch default 100; <= 0 = all */
    int top_level_only;       /* only rows whose first event had no CPU parent */
    int profile_memory;       /* CPU Mem columns: 1 on, 0 off, -1 = info.profile_memory */
    int with_flops;           /* Total FLOPs column: 1 on, 0 off, -1 = info.with_flops */
    const char *device_name;  /* device columns' label, e.g. "CUDA"; NULL = "CUDA" */
    const char *time_unit;    /* NULL (auto), "s", "ms" or "us" */
} lp_prof_keyavg_opts;

/* torch's defaults: no grouping, sort by self_cpu_time_total, 100 rows, auto flags. */
void lp_prof_keyavg_opts_init(lp_prof_keyavg_opts *o);

/* One averaged row; times in microseconds (as torch), memory in bytes. */
typedef struct lp_prof_keyavg_row {
    char *key;                /* name; ProfilerStep#N rows aggregate as "ProfilerStep*" */
    char *input_shapes;       /* str(shapes) when grouped by shape, else "" */
    int64_t count;
    double self_cpu_us, cpu_total_us;        /* cpu_time avg = cpu_total_us / count */
    double self_device_us, device_total_us;
    int64_t cpu_mem, self_cpu_mem, device_mem, self_device_mem;
    double flops;             /* summed; 0 when unknown */
    int is_device;            /* a device-side row (kernel, memcpy, memset) */
    int has_cpu_parent;       /* of the first event (for top_level_only) */
} lp_prof_keyavg_row;

typedef struct lp_prof_keyavg {
    lp_prof_keyavg_row *rows;
    size_t n;
    double sum_self_cpu_us;     /* "Self CPU time total" */
    double sum_self_device_us;  /* "Self CUDA time total" */
    int has_device_time, has_device_mem, has_input_shapes, has_flops, profile_memory;
} lp_prof_keyavg;

/* Averages ev's CPU-side 'X' events (and device events: kernel, gpu_memcpy, gpu_memset)
 * by key, as torch does: self time = duration minus the durations of the direct children
 * on the same thread; device time comes from kernels whose External id matches a CPU op;
 * CPU Mem = bytes of [memory] events inside the op's interval (any thread, frees
 * negative), self = minus the children's. Names [memory], [OutOfMemory],
 * profiler::_record_function_*, aten::is_leaf/output_nr/_version and cat "Trace" are
 * skipped. Rows are sorted by o->sort_by. Free with lp_prof_keyavg_free. */
LP_WARN_UNUSED lp_status lp_prof_keyavg_build(const lp_prof_events *ev,
                                              const lp_prof_keyavg_opts *o,
                                              lp_prof_keyavg *out);
void lp_prof_keyavg_free(lp_prof_keyavg *ka);
/* Re-sorts rows (descending, stable). */
void lp_prof_keyavg_sort(lp_prof_keyavg *ka, lp_prof_sort by);
/* torch's .table() text: same columns, widths (name <= 55, 12, shapes <= 80), units,
 * separators and footer. Returns a malloc'd string in *out (caller frees). */
LP_WARN_UNUSED lp_status lp_prof_keyavg_table(const lp_prof_keyavg *ka,
                                              const lp_prof_keyavg_opts *o, char **out);
/* Writes the table / a CSV (raw numbers: times in us, bytes, all rows) atomically. */
LP_WARN_UNUSED lp_status lp_prof_keyavg_write_table(const lp_prof_keyavg *ka,
                                                    const lp_prof_keyavg_opts *o,
                                                    const char *path);
LP_WARN_UNUSED lp_status lp_prof_keyavg_write_csv(const lp_prof_keyavg *ka, const char *path);

/* ------------------------------------------------------------------------------------ */
/* Per-step time breakdown (torch-tb-profiler's CPU-side categories).                  */
/* ------------------------------------------------------------------------------------ */

/* Each instant of a step belongs to the first category, in this order, with an event
 * active then: so the parts sum to the step time. */
typedef enum lp_prof_step_part {
    LP_PROF_STEP_PART_KERNEL,        /* cat kernel (not communication) */
    LP_PROF_STEP_PART_MEMCPY,        /* gpu_memcpy */
    LP_PROF_STEP_PART_MEMSET,        /* gpu_memset */
    LP_PROF_STEP_PART_COMMUNICATION, /* nccl:/gloo: ops, nccl kernels */
    LP_PROF_STEP_PART_RUNTIME,       /* cuda_runtime, cuda_driver, runtime */
    LP_PROF_STEP_PART_DATALOADER,    /* enumerate(DataLoader)#... / enumerate(DataPipe)#... */
    LP_PROF_STEP_PART_OPTIMIZER,     /* Optimizer.step#... / Optimizer.zero_grad#... */
    LP_PROF_STEP_PART_CPU_EXEC,      /* any other cpu_op / user_annotation (compute) */
    LP_PROF_STEP_PART_OTHER,         /* nothing recorded */
    LP_PROF_STEP_PART__COUNT
} lp_prof_step_part;

/* "kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "optimizer",
 * "cpu_exec", "other". */
const char *lp_prof_step_part_name(lp_prof_step_part p);

typedef struct lp_prof_step_row {
    int64_t step;                              /* N of ProfilerStep#N */
    int64_t ts_ns, dur_ns;                     /* the step's range */
    int64_t part_ns[LP_PROF_STEP_PART__COUNT]; /* sums to dur_ns */
} lp_prof_step_row;

/* One row per ProfilerStep#N event ('X', any cat), sorted by ts; without any, one row
 * (step 0) spanning all CPU events, as tb_plugin does. Events of every thread inside the
 * step count. *rows is malloc'd (caller frees); *n may be 0 for an empty list. */
LP_WARN_UNUSED lp_status lp_prof_step_breakdown(const lp_prof_events *ev,
                                                lp_prof_step_row **rows, size_t *n);

/* ------------------------------------------------------------------------------------ */
/* Exporters (each writes atomically; each takes the same event list).                 */
/* ------------------------------------------------------------------------------------ */

/* Kineto / torch.profiler Chrome trace. path ending ".gz" is gzip-compressed. traceName
 * is written as path. */
LP_WARN_UNUSED lp_status lp_prof_export_chrome(const lp_prof_events *ev, const char *path);
/* Collapsed stacks "outer;inner;leaf <self us>" from range nesting per thread (identical
 * stacks merged, µs rounded; lines with 0 dropped), for flamegraph.pl / speedscope. */
LP_WARN_UNUSED lp_status lp_prof_export_stacks(const lp_prof_events *ev, const char *path);
/* Memory timeline from the baseline and [memory] events: ".json" (or ".json.gz") writes
 * torch's [times_us, sizes] shape (9 columns: 0 unused, then torch's categories
 * parameter, optimizer_state, input, temporary, activation, gradient, autograd_detail,
 * unknown; our quantized_weight counts as parameter, other as unknown); ".html" writes a
 * self-contained stacked-area page with all 8 loupe categories. */
LP_WARN_UNUSED lp_status lp_prof_export_memory_timeline(const lp_prof_events *ev,
                                                        const char *path);
/* summary JSON: steps, step time stats, breakdown, memory peaks by category, top ops. */
LP_WARN_UNUSED lp_status lp_prof_export_summary(const lp_prof_events *ev, const char *path);

/* ------------------------------------------------------------------------------------ */
/* Session.                                                                            */
/* ------------------------------------------------------------------------------------ */

/* Called after each saved window (torch's on_trace_ready). ev is valid only during the
 * call. A non-OK return is reported by the lp_prof_step/lp_prof_stop that ran it. */
typedef lp_status (*lp_prof_trace_ready_fn)(const lp_prof_events *ev, void *user);

/* Export selection for the default handler. */
enum {
    LP_PROF_EXPORT_TRACE = 1 << 0,    /* <worker>.<unix ns>.pt.trace.json[.gz] */
    LP_PROF_EXPORT_KEYAVG = 1 << 1,   /* key_averages.txt + key_averages.csv */
    LP_PROF_EXPORT_STACKS = 1 << 2,   /* stacks.txt */
    LP_PROF_EXPORT_MEMORY = 1 << 3,   /* memory_timeline.json + .html (needs profile_memory) */
    LP_PROF_EXPORT_SUMMARY = 1 << 4,  /* summary.json */
    LP_PROF_EXPORT_ALL = 0x1f
};

typedef struct lp_prof_config {
    const char *out_dir;       /* default handler's directory (created); NULL = none */
    const char *worker_name;   /* trace file prefix; NULL = "<hostname>_<pid>" */
    int use_gzip;              /* trace as .pt.trace.json.gz */
    int record_shapes;         /* keep op input dims (Input Dims / Input type) */
    int profile_memory;        /* [memory] events in the window */
    int with_flops;            /* FLOPs args and Total FLOPs column */
    int with_stack;            /* write stacks.txt (from range nesting) */
    int hw_counters;           /* perf_event_open per range (falls back to unavailable) */
    int use_schedule;          /* 0: record everything, no ProfilerStep ranges */
    lp_prof_schedule schedule;
    uint32_t exports;          /* LP_PROF_EXPORT_* for the default handler */
    lp_prof_sort keyavg_sort;  /* default handler's table sort */
    int64_t keyavg_row_limit;
    lp_prof_trace_ready_fn on_trace_ready; /* NULL = default handler (writes to out_dir) */
    void *user;
} lp_prof_config;

/* Defaults: everything off, exports ALL, sort self_cpu_time_total, 100 rows. */
void lp_prof_config_init(lp_prof_config *c);

/* Begins a session at step 0 (torch's __enter__): runs the schedule's first transition
 * and opens ProfilerStep#0. Copies cfg (strings too). LP_STATUS_INVALID_ARG for a bad
 * schedule or a session already running. */
LP_WARN_UNUSED lp_status lp_prof_start(const lp_prof_config *cfg);
/* torch's prof.step(): closes ProfilerStep#k, advances, runs the transition (which may
 * save a window and call on_trace_ready), opens ProfilerStep#k+1. Returns the handler's
 * failure, if any. Call from the thread that called lp_prof_start. Like torch, the step
 * range is closed by identity: a range left open across step() stays open (and then
 * overlaps the step boundary in the trace). */
LP_WARN_UNUSED lp_status lp_prof_step(void);
/* Ends the session (torch's __exit__): closes the open step and saves a partial active
 * window. */
LP_WARN_UNUSED lp_status lp_prof_stop(void);
/* Current step number and action (0 / NONE when no session). */
int64_t lp_prof_step_num(void);
lp_prof_action lp_prof_current_action(void);
/* Windows saved so far in this session. */
int64_t lp_prof_traces_saved(void);

/* The default on_trace_ready: writes cfg.exports into dir (created). user must be the
 * lp_prof_config the session runs with, or NULL for the running session's. */
LP_WARN_UNUSED lp_status lp_prof_export_default(const lp_prof_events *ev, void *user);
/* This process's rank in a data-parallel job, written as the traces' distributedInfo
 * {"backend", "rank", "world_size"} (default "none", 0, 1). backend is copied. */
void lp_prof_set_distributed(const char *backend, int32_t rank, int32_t world_size);
/* Path of the last trace file the default handler wrote ("" if none). */
const char *lp_prof_last_trace_path(void);

/* ------------------------------------------------------------------------------------ */
/* GPU activity: CUPTI-neutral records, their JSONL file, Kineto conversion, GPU peak. */
/* ------------------------------------------------------------------------------------ */

/*   lp_gpu_records *r;                                  // from the CUPTI collector, or:
 *   if (lp_gpu_records_read_jsonl("tests/fixtures/cupti/two_streams.jsonl", &r) != LP_OK) ...
 *   lp_prof_events_add_gpu(ev, r, origin_mono_ns, INT64_MIN, INT64_MAX);  // kernels on
 *   lp_prof_export_chrome(ev, "t.pt.trace.json");       // streams, ac2g flows, deviceProperties
 *
 * Records carry CUPTI's own clock; the records' clock pair (gpu ns, host CLOCK_MONOTONIC
 * ns, taken together once) maps them onto the host timeline. No CUDA header is needed. */

typedef enum lp_gpu_kind {
    LP_GPU_KERNEL = 0, /* "kernel" (CONCURRENT_KERNEL) */
    LP_GPU_MEMCPY,     /* "gpu_memcpy" */
    LP_GPU_MEMSET,     /* "gpu_memset" */
    LP_GPU_RUNTIME,    /* "cuda_runtime": a CUDA runtime API call on a host thread */
    LP_GPU_DRIVER,     /* "cuda_driver": a driver API call (cuLaunchKernel) */
    LP_GPU_SYNC,       /* "cuda_sync": stream/event/context synchronisation */
    LP_GPU_OVERHEAD,   /* "overhead": CUPTI's own (buffer flush, instrumentation) */
    LP_GPU_KIND__COUNT
} lp_gpu_kind;

/* The JSONL "kind" words: "kernel", "memcpy", "memset", "runtime", "driver", "sync",
 * "overhead"; "?" out of range. */
const char *lp_gpu_kind_name(lp_gpu_kind k);
/* Kineto's trace category of a kind: "kernel", "gpu_memcpy", ... */
const char *lp_gpu_kind_category(lp_gpu_kind k);

/* CUPTI's numbering (CUpti_ActivityMemcpyKind / MemoryKind / SynchronizationType), kept
 * so the collector copies the values; names are Kineto's strings. */
enum { LP_GPU_COPY__COUNT = 11, LP_GPU_MEMKIND__COUNT = 8, LP_GPU_SYNCKIND__COUNT = 5 };
/* "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" */
const char *lp_gpu_copy_kind_name(int k);
/* "Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static",
 * "Managed Static" */
const char *lp_gpu_mem_kind_name(int k);
/* "Unknown", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync" */
const char *lp_gpu_sync_kind_name(int k);

/* One activity record. -1 marks an absent integer. */
typedef struct lp_gpu_activity {
    lp_gpu_kind kind;
    const char *name;         /* kernel: as CUPTI gives it; runtime/driver: API name without
                                 the _vNNNN suffix ("cudaLaunchKernel"); overhead: its kind
                                 ("Buffer Flush"); memcpy/memset/sync: NULL (named by kind) */
    int64_t start_ns, end_ns; /* CUPTI clock */
    int32_t device, context;  /* device records and sync */
    int64_t stream;
    int64_t correlation;      /* CUPTI correlation id (API call <-> device work) */
    int64_t pid, tid;         /* runtime/driver/overhead: OS process and thread */
    int32_t cbid;             /* runtime/driver callback id */
    int32_t grid[3], block[3];
    int32_t registers_per_thread;
    int32_t static_smem, dynamic_smem; /* bytes per block */
    int64_t bytes;            /* memcpy / memset */
    int32_t copy_kind;        /* memcpy: LP_GPU_COPY (CUPTI numbering) */
    int32_t src_kind, dst_kind; /* memcpy: memory kinds; memset: dst_kind is the memory */
    int32_t sync_kind;        /* sync: CUPTI numbering */
    int64_t cuda_event_id;    /* sync on an event */
    int64_t queued_ns;        /* kernel: CUPTI clock, -1 unknown */
} lp_gpu_activity;

/* Fills a with absent values (every id -1, dims 0, kind KERNEL). */
void lp_gpu_activity_init(lp_gpu_activity *a);

/* One GPU's properties, as PyTorch's trace "deviceProperties" carries them, plus what the
 * occupancy estimate needs (max_blocks_per_sm) and the peak (clock). */
typedef struct lp_gpu_device_props {
    int32_t id;
    char name[128];
    int64_t total_global_mem;
    int32_t compute_major, compute_minor;
    int32_t max_threads_per_block, max_threads_per_sm;
    int32_t regs_per_block, warp_size;
    int64_t shared_mem_per_block;
    int32_t num_sms;
    int32_t regs_per_sm;
    int64_t shared_mem_per_block_optin, shared_mem_per_sm;
    int32_t max_blocks_per_sm; /* 0 = from the compute capability */
    int32_t max_sm_clock_mhz;  /* 0 unknown */
} lp_gpu_device_props;

/* Records of one collection: activities (names copied), devices, and the clock pair. */
typedef struct lp_gpu_records lp_gpu_records;
LP_WARN_UNUSED lp_status lp_gpu_records_new(lp_gpu_records **out);
void lp_gpu_records_free(lp_gpu_records *r);
/* Appends a copy of *a. LP_STATUS_INVALID_ARG for a kind out of range, end < start, or a
 * kernel/API record without a name. */
LP_WARN_UNUSED lp_status lp_gpu_records_add(lp_gpu_records *r, const lp_gpu_activity *a);
size_t lp_gpu_records_count(const lp_gpu_records *r);
const lp_gpu_activity *lp_gpu_records_get(const lp_gpu_records *r, size_t i);
/* Adds or replaces (same id) a device. */
LP_WARN_UNUSED lp_status lp_gpu_records_set_device(lp_gpu_records *r, const lp_gpu_device_props *d);
size_t lp_gpu_records_n_devices(const lp_gpu_records *r);
const lp_gpu_device_props *lp_gpu_records_device(const lp_gpu_records *r, size_t i);
/* The clock pair: CUPTI's timestamp and CLOCK_MONOTONIC ns read together. */
void lp_gpu_records_set_clock(lp_gpu_records *r, int64_t gpu_ns, int64_t host_mono_ns);
/* 1 and the pair when set, else 0 (then GPU ns are taken as host monotonic ns). */
int lp_gpu_records_clock(const lp_gpu_records *r, int64_t *gpu_ns, int64_t *host_mono_ns);

/* JSONL ("recorded activity records"): one object per line; first {"loupe_gpu_records": 1},
 * then "clock" and "device" lines and one line per record ({"kind": "kernel", ...}; see
 * tests/fixtures/cupti/README.md). Written atomically. */
LP_WARN_UNUSED lp_status lp_gpu_records_write_jsonl(const lp_gpu_records *r, const char *path);
/* Strict reader: unknown keys, wrong types, bad kinds, missing required fields, duplicate
 * keys and trailing text are LP_STATUS_FORMAT naming `name` and the line. */
LP_WARN_UNUSED lp_status lp_gpu_records_parse_jsonl(const char *name, const char *text, size_t len,
                                                    lp_gpu_records **out);
LP_WARN_UNUSED lp_status lp_gpu_records_read_jsonl(const char *path, lp_gpu_records **out);

/* Adds r's records to ev as PyTorch writes them: device work on pid = device, tid =
 * stream; API calls on their process/thread; args as Kineto's; the ac2g flow pair on each
 * launch with device work (correlation = flow id); the devices into "deviceProperties";
 * "External id" of the innermost host range each API call starts in (host 'X' events without
 * one are numbered first) on the call and its device work. Timestamps: host ns relative to
 * ev's ts 0, whose CLOCK_MONOTONIC time is origin_mono_ns: rel = gpu - clock.gpu +
 * clock.host - origin_mono_ns. Only API calls starting in [lo_ns, hi_ns] (relative) are kept
 * with their device work; device work without a kept call is kept when it starts there. */
LP_WARN_UNUSED lp_status lp_prof_events_add_gpu(lp_prof_events *ev, const lp_gpu_records *r,
                                                int64_t origin_mono_ns, int64_t lo_ns, int64_t hi_ns);

/* Kineto's kernel estimates from a device: blocks per SM = blocks / SMs, warps per SM =
 * that x threads per block / warp size, and the theoretical occupancy (%, rounded) limited
 * by threads, blocks, registers and shared memory per SM, capped by the blocks present.
 * Returns 0 (nothing computed) when d lacks SMs or threads per SM. */
int lp_gpu_kernel_occupancy(const lp_gpu_device_props *d, const lp_gpu_activity *k,
                            double *blocks_per_sm, double *warps_per_sm, int *occupancy_pct);

/* Dense tensor-core (or, for FP32, CUDA-core FMA) peak of a GPU. */
typedef enum lp_gpu_peak_dtype {
    LP_GPU_PEAK_BF16 = 0,
    LP_GPU_PEAK_FP16,
    LP_GPU_PEAK_TF32,
    LP_GPU_PEAK_FP32,   /* no tensor cores: FP32 FMA units x 2 */
    LP_GPU_PEAK_FP8,
    LP_GPU_PEAK__COUNT
} lp_gpu_peak_dtype;
/* "bf16", "fp16", "tf32", "fp32", "fp8". */
const char *lp_gpu_peak_dtype_name(lp_gpu_peak_dtype t);
/* FLOP/s = FLOP per clock per SM (per architecture, from NVIDIA's published dense peaks)
 * x SMs x clock. clock_mhz: the boost clock NVIDIA quotes its peak at (H100/H200 SXM:
 * 1830 MHz, not NVML's 1980 max). *why (cap bytes, may be NULL) states the figure used,
 * e.g. "H100-class sm_90: 4096 dense bf16 FLOP/clk/SM x 132 SMs x 1830 MHz = 989.4
 * TFLOP/s". LP_STATUS_UNSUPPORTED (message) for an unknown architecture or a dtype it
 * lacks (bf16 before sm_80, fp8 before sm_89); LP_STATUS_INVALID_ARG for SMs or clock <= 0. */
LP_WARN_UNUSED lp_status lp_gpu_peak_flops(int cc_major, int cc_minor, int n_sms, double clock_mhz,
                                           lp_gpu_peak_dtype t, double *flops, char *why, size_t cap);
/* The same for a device: its name picks NVIDIA's quoted clock where the datasheet figure is
 * below the max SM clock (H100 SXM / H200: 1830 MHz, H100 PCIe: 1620, H100 NVL: 1545),
 * else d->max_sm_clock_mhz; *why names the card, the figure and the clock's source. */
LP_WARN_UNUSED lp_status lp_gpu_peak_for_device(const lp_gpu_device_props *d, lp_gpu_peak_dtype t, double *flops,
                                                char *why, size_t cap);

/* The CUPTI collector (CUDA builds with CUPTI; elsewhere every call returns
 * LP_STATUS_UNSUPPORTED saying so). Attach once before lp_prof_start: each recorded window
 * then enables CUPTI activity (kernels, memcpy, memset, runtime, driver, overhead; stream /
 * event / context synchronisation too with LP_PROF_CUDA_SYNC=1, off by default as in
 * PyTorch), flushes at the window's stop, and adds the records to the window's events. */
LP_WARN_UNUSED lp_status lp_prof_cupti_attach(void);
void lp_prof_cupti_detach(void);
/* 1 when this build has the collector. */
int lp_prof_cupti_built(void);
/* CUPTI is loaded at run time (no link dependency): $LP_CUPTI_LIB when set, else
 * libcupti.so.13 / libcupti.so on the loader's path, then the toolkit's folders (the one
 * found at configure time, $CUDA_HOME, /usr/local/cuda). attach and start load it; this
 * loads it alone. LP_STATUS_UNSUPPORTED naming every place tried when it cannot. */
LP_WARN_UNUSED lp_status lp_prof_cupti_load(void);
/* Manual use (the record tool): start collecting now; stop flushes and hands the records
 * (with devices and the clock pair) to the caller (*out, free with lp_gpu_records_free). */
LP_WARN_UNUSED lp_status lp_prof_cupti_start(void);
LP_WARN_UNUSED lp_status lp_prof_cupti_stop(lp_gpu_records **out);

/* A source of GPU records for the session: start at a window's start, stop at its end
 * (returning the records, or NULL). Registered by the collector; NULL unregisters. */
typedef struct lp_prof_gpu_source {
    lp_status (*start)(void);
    lp_status (*stop)(lp_gpu_records **out);
} lp_prof_gpu_source;
void lp_prof_set_gpu_source(const lp_prof_gpu_source *src);

/* NVTX: with LP_HAVE_NVTX (CUDA builds), recorded ranges push/pop NVTX ranges; nvtx_enable
 * (1) also sends every range to NVTX while loupe is not recording (for Nsight Systems);
 * -1 does so only when a tool is injected (NVTX_INJECTION64_PATH set, as nsys does), 0
 * stops it. Returns whether ranges now go to NVTX outside recording (0 without NVTX). */
int lp_prof_nvtx_enable(int on);

/* NVML, loaded at run time (dlopen of libnvidia-ml.so.1, or $LP_NVML_LIB): GPU 0's
 * utilisation %, memory used, power and SM clock. 1 when available, else 0 with the reason
 * in *why (static string; may be NULL). */
typedef struct lp_gpu_sample {
    double util_pct;       /* -1 unknown */
    int64_t mem_used_bytes;/* -1 unknown */
    double power_w;        /* -1 unknown */
    int32_t sm_clock_mhz;  /* -1 unknown */
} lp_gpu_sample;
int lp_prof_nvml_available(const char **why);
/* Reads GPU 0 now; 0 when NVML is unavailable (s then all -1). */
int lp_prof_nvml_sample(lp_gpu_sample *s);

/* ------------------------------------------------------------------------------------ */
/* Hardware counters and the background sampler.                                       */
/* ------------------------------------------------------------------------------------ */

/* 1 when perf_event_open can count cycles, instructions and cache misses for this
 * process, else 0 with the reason in *why (static string; may be NULL). */
int lp_prof_hw_available(const char **why);

typedef struct lp_prof_sampler lp_prof_sampler;
/* Starts a thread that appends "time_s,rss_bytes,cpu_percent,gpu_util_percent,
 * gpu_mem_bytes,gpu_power_w,gpu_sm_clock_mhz" every period_ms (GPU columns from NVML when a
 * GPU is present, empty otherwise) and writes csv_path atomically when stopped. */
LP_WARN_UNUSED lp_status lp_prof_sampler_start(const char *csv_path, int period_ms,
                                               lp_prof_sampler **out);
/* Stops the thread, writes the CSV, frees s. */
LP_WARN_UNUSED lp_status lp_prof_sampler_stop(lp_prof_sampler *s);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_PROF_H */
