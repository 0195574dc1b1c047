/* loupe report: reading traces back, run comparison, charts (cairo: PNG and SVG from one
 * drawing routine), self-contained HTML pages, and each run's report.html. The trace reader accepts Kineto /
 * torch.profiler Chrome-trace JSON, plain or gzip, from loupe's own exporter or PyTorch's.
 *
 *   lp_prof_events *ev; lp_trace_info info;
 *   if (lp_trace_load("run/worker0.pt.trace.json.gz", &ev, &info) != LP_OK)
 *       fprintf(stderr, "%s\n", lp_err_msg());      // names the file and the problem
 *   lp_prof_keyavg ka; lp_prof_keyavg_opts o; lp_prof_keyavg_opts_init(&o);
 *   if (lp_prof_keyavg_build(ev, &o, &ka) == LP_OK) { ... lp_prof_keyavg_free(&ka); }
 *   lp_prof_events_free(ev);
 */
#ifndef LOUPE_REPORT_H
#define LOUPE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loupe/base.h"
#include "loupe/prof.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the reader saw besides the events it put in the list. Trace-wide facts
 * (baseTimeNanoseconds, the recorded window, record_shapes/profile_memory/with_flops,
 * the CPU pid) go to the list's lp_prof_events_info. */
typedef struct lp_trace_info {
    int schema_version;   /* "schemaVersion", 0 when absent */
    int has_base_time;    /* "baseTimeNanoseconds" present (new traces: ts relative to it) */
    int absolute_ts;      /* ts are Unix-epoch µs (PyTorch <= ~2.3 traces); base time 0 */
    int64_t min_ts_ns;    /* earliest event kept */
    size_t n_items;       /* entries in traceEvents */
    size_t n_complete;    /* "X" events kept (the profiler's "Trace" span is not one) */
    size_t n_instants;    /* "[memory]" / "[OutOfMemory]" instants kept */
    size_t n_skipped;     /* malformed entries ignored (no name/ts/dur, negative dur, not an object) */
    size_t n_unsupported; /* "B"/"E" begin-end events, which Kineto never writes */
} lp_trace_info;

/* The default cap on a trace's decompressed text: far above any real trace (PyTorch's
 * largest are a few GB), below what a 1000:1 gzip bomb would make a reader allocate. */
#define LP_TRACE_MAX_BYTES_DEFAULT ((uint64_t)8 << 30)

/* Reads path into a fresh NUL-terminated buffer, gunzipping when the file starts with
 * the gzip magic (whatever its name). Caller frees *out. Errors name the file: missing
 * (LP_STATUS_IO), truncated or corrupt gzip (LP_STATUS_FORMAT), text longer than
 * max_bytes (LP_STATUS_RANGE, naming the cap; 0 = LP_TRACE_MAX_BYTES_DEFAULT), out of
 * memory. lp_trace_read_text uses the default cap. */
LP_WARN_UNUSED lp_status lp_trace_read_text_max(const char *path, uint64_t max_bytes, char **out, size_t *out_len);
LP_WARN_UNUSED lp_status lp_trace_read_text(const char *path, char **out, size_t *out_len);

/* Receives decompressed text a chunk at a time (data is valid during the call only); a
 * status other than LP_OK stops the stream and is returned. */
typedef lp_status (*lp_trace_sink_fn)(void *ctx, const char *data, size_t n);

/* Decompresses the gzip file at path (one or more members) and hands the text to sink in
 * chunks of at most 256 KiB, keeping none of it: memory stays bounded whatever the size.
 * *total is the decompressed byte count so far (64-bit). Refuses, naming path and the cap,
 * as soon as the text passes max_bytes (0 = LP_TRACE_MAX_BYTES_DEFAULT); truncated or
 * corrupt data as lp_trace_read_text. */
LP_WARN_UNUSED lp_status lp_trace_gunzip_stream(const char *path, uint64_t max_bytes, lp_trace_sink_fn sink,
                                                void *ctx, uint64_t *total);

/* Like lp_trace_gunzip_stream for any trace: gzip (recognised by its magic, not its name)
 * or plain text, from a file, a pipe or "-" (stdin), read once and never rewound. */
LP_WARN_UNUSED lp_status lp_trace_stream(const char *path, uint64_t max_bytes, lp_trace_sink_fn sink, void *ctx,
                                         uint64_t *total);

/* Decompresses in-memory gzip data (one or more members) into a fresh NUL-terminated
 * buffer; name is used in error messages. Caller frees *out. */
LP_WARN_UNUSED lp_status lp_trace_gunzip(const char *name, const void *data, size_t len, char **out,
                                         size_t *out_len);

/* Parses trace JSON text (len bytes, need not be NUL-terminated) and appends its events
 * to ev: every "X" event except the profiler's own "Trace" span (which sets the info's
 * window), and "[memory]" instants; thread/process names from "M" events. Times become
 * ns relative to info.base_time_ns (0 for old absolute traces). Fails with
 * LP_STATUS_FORMAT, naming `name`, when the text is not JSON (with line/column) or has no
 * "traceEvents" array; malformed single events are skipped and counted in *info. */
LP_WARN_UNUSED lp_status lp_trace_parse(const char *name, const char *text, size_t len, lp_prof_events *ev,
                                        lp_trace_info *info);

/* lp_trace_read_text + lp_trace_parse into a new list (*out, free with
 * lp_prof_events_free). On error *out is NULL and the message names path. */
LP_WARN_UNUSED lp_status lp_trace_load(const char *path, lp_prof_events **out, lp_trace_info *info);
/* Same with a cap on the decompressed text (0 = LP_TRACE_MAX_BYTES_DEFAULT). */
LP_WARN_UNUSED lp_status lp_trace_load_max(const char *path, uint64_t max_bytes, lp_prof_events **out,
                                           lp_trace_info *info);

/* ---- the streaming trace model (loupe analyze) -----------------------------------------
 *
 *   lp_trace_model *m;
 *   lp_trace_model_opts o; lp_trace_model_opts_init(&o);
 *   if (lp_trace_model_load("rank0.pt.trace.json.gz", &o, &m) != LP_OK)
 *       fprintf(stderr, "%s\n", lp_err_msg());       // names the file and the problem
 *   for (size_t i = 0; i < m->n_ops; i++) ... m->ops[i] ...;
 *   lp_trace_model_free(m);
 *
 * One pass over the text (gzip or plain, any size): events go through a reorder window of
 * LP_TRACE_WINDOW events sorted by start, then into running tables, so memory is bounded
 * by the distinct names, shapes, threads and call paths plus that window, never by the
 * file's size. Times are exact integer ns. Everything loupe analyze prints, writes as CSV
 * or draws comes from these tables. */

/* Events held for reordering: traces interleave categories (Kineto writes all CPU ops,
 * then runtime calls and kernels), so a runtime call must still find its enclosing op. */
#define LP_TRACE_WINDOW (1u << 19)

typedef enum lp_trace_kind {
    LP_TRACE_KIND_CPU_OP = 0,      /* cpu_op; 1.8/1.9 "Operator" */
    LP_TRACE_KIND_USER_ANNOTATION, /* user_annotation (record_function, ProfilerStep#) */
    LP_TRACE_KIND_RUNTIME,         /* cuda_runtime; "Runtime"; ROCm's hip calls */
    LP_TRACE_KIND_DRIVER,          /* cuda_driver (cuLaunchKernel) */
    LP_TRACE_KIND_KERNEL,          /* kernel; "Kernel"; cuda_profiler_range */
    LP_TRACE_KIND_MEMCPY,          /* gpu_memcpy; "Memcpy" */
    LP_TRACE_KIND_MEMSET,          /* gpu_memset; "Memset" */
    LP_TRACE_KIND_GPU_ANNOTATION,  /* gpu_user_annotation */
    LP_TRACE_KIND__COUNT
} lp_trace_kind;

/* What a device event does (the Kernel view's split). */
typedef enum lp_trace_class {
    LP_TRACE_CLASS_COMPUTE = 0,
    LP_TRACE_CLASS_COMMUNICATION, /* nccl / rccl / gloo kernels */
    LP_TRACE_CLASS_MEMORY,        /* memcpy, memset */
    LP_TRACE_CLASS__COUNT
} lp_trace_class;

/* One key-averages row (torch's key_averages(): host rows and one row per device event
 * name). Times in ns. */
typedef struct lp_trace_op_row {
    const char *name;      /* ProfilerStep#N rows aggregate as "ProfilerStep*" (owned by the model) */
    const char *shapes;    /* str(input shapes) in the by-shape table, else "" */
    int64_t calls;
    int64_t self_cpu_ns, cpu_total_ns;
    int64_t self_device_ns, device_total_ns; /* kernels linked by correlation */
    int64_t alloc_bytes;   /* bytes allocated ([memory] > 0) while it was the innermost op */
    int64_t cpu_mem, self_cpu_mem, device_mem, self_device_mem; /* torch's memory columns: [memory]
                              bytes (frees negative) in [start, end] on any thread, self less children */
    double flops;          /* "FLOPs" args summed */
    lp_trace_kind kind;    /* of the row's first event */
    int is_device;
} lp_trace_op_row;

/* One device event name (Kernel view). */
typedef struct lp_trace_kernel_row {
    const char *name;
    lp_trace_kind kind;
    lp_trace_class cls;
    int64_t calls, total_ns, min_ns, max_ns;
    int64_t bytes;         /* memcpy/memset args.bytes; communication: the launching
                              record_param_comms' "In msg nelems" x dtype size; summed (0 unknown) */
    const char *launch_op; /* innermost host op of the first linked launch; "" when unlinked */
} lp_trace_kernel_row;

/* Parts of a step, in priority order: each instant belongs to the first one active then,
 * so the parts sum to the step. */
typedef enum lp_trace_part {
    LP_TRACE_PART_KERNEL = 0,    /* compute kernels */
    LP_TRACE_PART_MEMCPY,
    LP_TRACE_PART_MEMSET,
    LP_TRACE_PART_COMMUNICATION, /* nccl/gloo kernels and host ops */
    LP_TRACE_PART_RUNTIME,       /* runtime and driver calls */
    LP_TRACE_PART_DATALOADER,    /* enumerate(DataLoader)#... ranges */
    LP_TRACE_PART_CPU_EXEC,      /* any other host op */
    LP_TRACE_PART_OTHER,         /* nothing recorded */
    LP_TRACE_PART__COUNT
} lp_trace_part;
/* "kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other". */
const char *lp_trace_part_name(lp_trace_part p);
const char *lp_trace_kind_name(lp_trace_kind k);
const char *lp_trace_class_name(lp_trace_class c);

typedef struct lp_trace_step {
    int64_t step;                        /* N of ProfilerStep#N; 0 for the whole trace */
    int64_t ts_ns, dur_ns;               /* from the step's start to the next's (the last: to
                                            the end of its CPU range or of the device work it
                                            launched, whichever is later) */
    int64_t part_ns[LP_TRACE_PART__COUNT]; /* sums to dur_ns */
} lp_trace_step;

/* GPU time over the device events' span (HTA's temporal, idle and overlap figures). Unions
 * over all streams, ns. */
typedef struct lp_trace_gpu {
    int64_t first_ns, last_ns;            /* first device event's start, last one's end */
    int64_t busy_ns;                      /* union of kernels, memcpy, memset */
    int64_t compute_ns, comm_ns, memory_ns; /* union of each class */
    int64_t compute_comm_ns;              /* union of compute and communication */
    int64_t comm_overlap_ns;              /* communication time with compute running */
    /* per-stream gaps as HTA measures them (start minus the previous event's end, negative
     * when they overlap): host wait when the launch came after the gap began, kernel wait
     * when shorter than LP_TRACE_KERNEL_WAIT_NS, other */
    int64_t idle_host_wait_ns, idle_kernel_wait_ns, idle_other_ns;
    int64_t n_streams;
    int64_t n_events;                     /* device events counted */
} lp_trace_gpu;
/* HTA's consecutive-kernel delay: a shorter launched gap counts as kernel wait. */
#define LP_TRACE_KERNEL_WAIT_NS 30000

typedef struct lp_trace_mem_point {
    int64_t ts_ns, allocated; /* "Total Allocated" after the event */
} lp_trace_mem_point;

/* Per-collective figures (Distributed view), from communication kernels. */
typedef struct lp_trace_coll_row {
    const char *name;      /* the collective, e.g. "AllReduce" (from the kernel's name) */
    int64_t calls, total_ns, bytes; /* bytes: from the launching record_param_comms when written */
} lp_trace_coll_row;

/* One (op, call stack) row: torch's key_averages(group_by_stack_n=N) for host ops. Stacks
 * come from the trace: the "Call stack" arg (PyTorch <= 1.13), the python_function events
 * open around the op on its thread (with_stack in PyTorch 2.x), or, in a with_stack trace
 * that has neither (loupe's own), the record_function / module ranges open around it. The
 * calls of an op with no stack, and those past the caps, are rows too, so an op's rows sum
 * to its key-average row. Times in ns. */
typedef struct lp_trace_stack_row {
    const char *name;     /* the op; ProfilerStep#N as "ProfilerStep*" */
    const char **frames;  /* innermost first; n_frames <= the model's stack_frames */
    int32_t n_frames;     /* 0: no stack recorded for these calls */
    int folded;           /* the op's stacks past LP_TRACE_STACKS_PER_OP (or the trace's past
                             LP_TRACE_STACKS_MAX), summed in one row */
    lp_trace_kind kind;
    int64_t calls, self_cpu_ns, cpu_total_ns, self_device_ns, device_total_ns;
} lp_trace_stack_row;
#define LP_TRACE_STACK_FRAMES 5      /* frames per stack by default (torch's examples use 5) */
#define LP_TRACE_STACKS_PER_OP 32    /* distinct stacks kept per op */
#define LP_TRACE_STACKS_MAX 65536    /* distinct stacks kept in all */

/* One allocation of the Memory view's events table. */
typedef struct lp_trace_mem_event {
    int64_t ts_ns, bytes, total_allocated; /* total: "Total Allocated" after it (-1 unknown) */
    int64_t lifetime_ns;  /* to its free (same Addr and device); -1 not freed in the trace,
                             -2 unknown (the trace writes no Addr) */
    int32_t device_type, device_id; /* c10 DeviceType (0 CPU, 1 CUDA, ...); id -1 unknown */
    const char *op;       /* innermost host op open on its thread; "" none */
} lp_trace_mem_event;
#define LP_TRACE_MEM_EVENTS 20       /* largest allocations kept by default */
#define LP_TRACE_MEM_EVENTS_MAX 1000
/* "cpu", "cuda:1", "hip:0", ... for a [memory] event's device. */
void lp_trace_device_str(int32_t type, int32_t id, char *buf, size_t cap);

typedef struct lp_trace_model {
    char path[1024];
    int64_t rank, world_size;  /* distributedInfo, or the rank in the file name; -1 unknown */
    char backend[32], device_name[128];
    int64_t device_count, schema_version;
    int is_array;              /* the pre-1.8 bare-array form */
    int has_base_time;
    int64_t base_time_ns;
    int sub_us;                /* some ts/dur carry sub-µs digits (HTA floors these to µs) */
    uint64_t bytes;            /* the text's size */
    uint64_t n_events;         /* entries of traceEvents */
    uint64_t n_used;           /* events that went into the tables */
    uint64_t n_skipped;        /* malformed: not an object, no name/ts, wrong types, negative dur */
    uint64_t n_late;           /* arrived further out of order than the window: processed late */
    uint64_t n_unlinked;       /* device events whose launch was not found */
    uint64_t n_begin_end;      /* "B"/"E" pairs, which Kineto never writes */
    int64_t first_ns, last_ns; /* the trace's events, ns as written (relative to base time) */
    lp_trace_op_row *ops;      /* by name; first-seen order (n_ops) */
    size_t n_ops;
    lp_trace_op_row *ops_shape; /* by name and input shapes */
    size_t n_ops_shape;
    int has_shapes, has_flops;
    lp_trace_kernel_row *kernels;
    size_t n_kernels;
    lp_trace_step *steps;      /* ProfilerStep#N in order; none: one row for the whole trace */
    size_t n_steps;
    int has_steps;
    lp_trace_step total;       /* the whole trace, first to last event */
    lp_trace_gpu gpu;          /* HolisticTraceAnalysis's scope: with two steps or more, the
                                  device work launched before the last step began */
    lp_trace_gpu gpu_all;      /* every device event */
    int has_device;
    /* HTA's communication/computation overlap carried over to host threads (HTA's own needs
     * GPU kernels: NaN on a CPU-only trace). A thread communicates while a communication
     * range (nccl/gloo/mpi:..., c10d::) is open on it and computes while only other ranges
     * are (the ProfilerStep aside); host_comm_ns: the time some thread communicates;
     * host_comm_overlap_ns: of that, the time another thread computes. */
    int64_t host_comm_ns, host_comm_overlap_ns;
    lp_trace_mem_point *mem;   /* the allocated curve (device memory when any, else CPU),
                                  thinned to at most LP_TRACE_MEM_POINTS */
    size_t n_mem;
    int64_t mem_peak, mem_peak_ts_ns, n_mem_events;
    int mem_is_device;
    lp_trace_coll_row *colls;
    size_t n_colls;
    lp_trace_stack_row *stacks; /* by (op, stack), ops in first-seen order; none: n_stacks 0 */
    size_t n_stacks;
    int stack_frames;          /* frames kept per stack */
    int stack_source;          /* LP_TRACE_STACK_* bits met */
    int64_t stack_folded_calls; /* calls summed in folded rows */
    lp_trace_mem_event *mem_top; /* the largest allocations, bytes descending (n_mem_top) */
    size_t n_mem_top;
    int64_t n_allocs, alloc_total_bytes, n_frees, free_total_bytes; /* every [memory] event */
    int mem_has_addr;          /* the events carry "Addr": lifetimes are known */
    void *priv;                /* the string store */
    const char **stack_pool;   /* the stack rows' frames (strings in priv_frames) */
    void *priv_frames;
} lp_trace_model;
enum { LP_TRACE_STACK_ARG = 1, LP_TRACE_STACK_PYTHON = 2, LP_TRACE_STACK_RANGES = 4 };
#define LP_TRACE_MEM_POINTS 4096

typedef struct lp_trace_model_opts {
    uint64_t max_bytes;        /* cap on the decompressed text; 0 = LP_TRACE_MAX_BYTES_DEFAULT */
    size_t window;             /* reorder window in events; 0 = LP_TRACE_WINDOW */
    int stack_frames;          /* frames per call stack; 0 = LP_TRACE_STACK_FRAMES, < 0 = no stacks */
    int mem_events;            /* largest allocations kept (<= LP_TRACE_MEM_EVENTS_MAX);
                                  0 = LP_TRACE_MEM_EVENTS */
} lp_trace_model_opts;
void lp_trace_model_opts_init(lp_trace_model_opts *o);

/* Streams the trace at path ("-" = stdin; gzip recognised by its magic) into a new model
 * (*out, free with lp_trace_model_free). Errors name the file: IO, FORMAT (not JSON, no
 * traceEvents, truncated, nesting too deep), RANGE (over the cap), NO_MEMORY. Malformed
 * single events are counted in n_skipped, not errors. */
LP_WARN_UNUSED lp_status lp_trace_model_load(const char *path, const lp_trace_model_opts *o, lp_trace_model **out);
/* The same over text already in memory (name for messages). */
LP_WARN_UNUSED lp_status lp_trace_model_parse(const char *name, const char *text, size_t len,
                                              const lp_trace_model_opts *o, lp_trace_model **out);
void lp_trace_model_free(lp_trace_model *m);

/* The key averages as lp_prof_keyavg rows (by name, or by name and input shapes), so torch's
 * table, sort and CSV code prints them. Free with lp_prof_keyavg_free. */
LP_WARN_UNUSED lp_status lp_trace_model_keyavg(const lp_trace_model *m, int by_shape, lp_prof_keyavg *out);
/* Everything as text: a header, torch's key-averages table (o: sort, rows, by shape), the
 * per-step breakdown (the first and last 10 steps unless all_steps), the kernel table, the
 * (op, call stack) rows when the trace records stacks (o: sort, rows), the GPU figures, the
 * memory peak and the largest allocations. */
LP_WARN_UNUSED lp_status lp_trace_model_write_text(FILE *f, const lp_trace_model *m, const lp_prof_keyavg_opts *o,
                                                   int all_steps);
/* Every table as CSV in dir (created): ops.csv, ops_by_shape.csv, kernels.csv, steps.csv,
 * gpu.csv, memory.csv, collectives.csv, stacks.csv (the (op, stack) rows; frames joined by
 * ';'), memory_events.csv (the largest allocations and a "rest" row). Times in ns. */
LP_WARN_UNUSED lp_status lp_trace_model_write_csv(const lp_trace_model *m, const char *dir);

/* A multi-rank job: every trace of a directory (files named by rank, or carrying
 * distributedInfo.rank), sorted by rank. */
typedef struct lp_trace_rank_row {
    int64_t rank;
    int64_t span_ns, compute_ns, comm_ns, overlap_ns, other_ns; /* other: idle GPU time */
    int64_t comm_wait_ns;  /* communication beyond the fastest rank's: time spent waiting */
} lp_trace_rank_row;

typedef struct lp_trace_job {
    lp_trace_model **ranks;
    size_t n;
    lp_trace_rank_row *rows;  /* (n) */
    int64_t slowest_rank;     /* most compute+memory time: the others wait for it */
    char slowest_why[256];
} lp_trace_job;
LP_WARN_UNUSED lp_status lp_trace_job_load(const char *dir, const lp_trace_model_opts *o, lp_trace_job **out);
void lp_trace_job_free(lp_trace_job *j);
void lp_trace_job_write_text(FILE *f, const lp_trace_job *j);
LP_WARN_UNUSED lp_status lp_trace_job_write_csv(const lp_trace_job *j, const char *dir);

/* loupe analyze --html: one self-contained page (inline SVG, no network) with the Overview,
 * Operator, Kernel, Memory, Distributed and Trace views of m (a job's views when j is not
 * NULL; m is then the rank shown in the single-trace views). Atomic; errors name path. */
LP_WARN_UNUSED lp_status lp_trace_html_write(const lp_trace_model *m, const lp_trace_job *j, const char *path);


/* ---- run comparison (loupe compare) ---------------------------------------------------
 *
 *   lp_run_summary *r;
 *   if (lp_compare_load(dirs, n, &r) == LP_OK) { lp_compare_write_text(stdout, r, n); free(r); }
 */

#define LP_COMPARE_MAX_CATS 16
#define LP_COMPARE_MAX_OPS 32

/* One run's summary.json, the fields compare shows (NaN when absent). */
typedef struct lp_run_summary {
    char dir[1024], run_id[128], method[16], exec[16];
    char dtype[8];       /* the Linears' GEMMs ("f32", "bf16"); "" in summaries before it */
    char bf16_path[128]; /* with bf16: "native (...)" or "converted (...)"; else "" */
    double params_total, params_trainable, steps, step_ms, samples_per_s, tokens_per_s, peak_bytes;
    double final_loss, eval_accuracy;
    struct { char name[32]; double bytes; } mem[LP_COMPARE_MAX_CATS]; /* peak per memory category */
    int n_mem;
    struct { char name[96]; double self_ms, calls; } ops[LP_COMPARE_MAX_OPS]; /* top ops by self time */
    int n_ops;
} lp_run_summary;

/* Reads dir/summary.json of each of n run directories into *out (n entries, caller frees
 * with free()). Errors: IO/NOT_FOUND naming a directory that is not a run directory,
 * FORMAT for a summary that is not loupe's; *out NULL then. */
LP_WARN_UNUSED lp_status lp_compare_load(const char *const *dirs, int n, lp_run_summary **out);
/* Peak bytes of a memory category / self ms of an op in a run; NaN when absent. */
double lp_run_summary_mem(const lp_run_summary *r, const char *category);
double lp_run_summary_op_ms(const lp_run_summary *r, const char *op);
/* The side-by-side table, each number followed by its ratio to the first run's. */
void lp_compare_write_text(FILE *f, const lp_run_summary *r, int n);
/* The same as JSON ({"runs": [{..., "vs_first": {ratios}}]}); caller frees with free();
 * NULL when out of memory. */
char *lp_compare_json(const lp_run_summary *r, int n);

/* ---- charts (drawn once through cairo, written as PNG and SVG) -------------------------
 *
 *   double x[] = {1, 4, 16}, y[] = {3.1, 1.2, 0.8}, e[] = {0.2, 0.1, 0.05};
 *   lp_chart_series s = {.name = "f32", .x = x, .y = y, .err = e, .n = 3};
 *   lp_chart_panel p = {.title = "Latency per sample", .xlabel = "batch size", .ylabel = "ms",
 *                       .kind = LP_CHART_LINE, .x_scale = LP_CHART_X_LOG2, .series = &s, .n_series = 1};
 *   lp_figure f = {.title = "Batch-size sweep", .rows = 1, .cols = 1, .width = 800, .height = 600,
 *                  .panels = &p, .n_panels = 1};
 *   if (lp_figure_write_png(&f, "plots/latency.png") != LP_OK) ...;   // atomic, names the file
 *   if (lp_figure_write_svg(&f, "plots/latency.svg") != LP_OK) ...;   // the same drawing
 *
 * Every label is measured before it is placed: tick labels are thinned until they fit,
 * titles and legends shrink or wrap, so no two pieces of text overlap (lp_figure_text_boxes
 * returns what was placed, for tests). Non-finite values are skipped, never drawn. */

typedef enum lp_chart_kind {
    LP_CHART_LINE = 0, /* markers joined by lines, one per series */
    LP_CHART_BAR,      /* grouped bars: series side by side at each x */
    LP_CHART_HEATMAP,  /* a matrix of coloured cells (lp_chart_panel.heatmap) */
    LP_CHART_STACKED,  /* stacked bars: series on top of each other at each x (values < 0 as 0; no
                        * error bars), e.g. a step's time split into data, forward, backward */
} lp_chart_kind;

typedef enum lp_chart_x_scale {
    LP_CHART_X_LINEAR = 0,
    LP_CHART_X_LOG2,     /* x > 0 on a log2 axis, ticks at powers of two (batch sizes) */
    LP_CHART_X_CATEGORY, /* x are 0..k-1 indices into x_categories, equally spaced */
} lp_chart_x_scale;

/* One line or bar group. Arrays borrowed for the call; err (n) may be NULL (no error bars:
 * each bar spans y - err .. y + err). */
typedef struct lp_chart_series {
    const char *name; /* legend entry; NULL: not in the legend */
    const double *x, *y, *err;
    int32_t n;
} lp_chart_series;

/* A heatmap: values (rows, cols) row-major coloured from min to max of each column when
 * normalise_columns (else over the whole matrix); text (rows*cols) NULL or per-cell labels
 * ("12.3"), drawn when they fit the cell. NaN cells are grey. */
typedef struct lp_chart_heatmap {
    int32_t rows, cols;
    const double *values;
    const char *const *text;
    const char *const *row_labels, *const *col_labels; /* (rows), (cols) */
    int normalise_columns;
} lp_chart_heatmap;

typedef struct lp_chart_panel {
    const char *title, *xlabel, *ylabel;
    lp_chart_kind kind;
    lp_chart_x_scale x_scale;
    const char *const *x_categories; /* LP_CHART_X_CATEGORY: (n_categories) labels */
    int32_t n_categories;
    int y_from_zero;                 /* y from 0 (throughput, memory): error bars below 0 are cut */
    int y_log;                       /* log10 y axis with ticks at decades; y <= 0 not drawn */
    const lp_chart_series *series;
    int32_t n_series;
    const lp_chart_heatmap *heatmap; /* LP_CHART_HEATMAP only */
} lp_chart_panel;

/* Panels laid out row by row on a rows x cols grid under an optional title. */
typedef struct lp_figure {
    const char *title;
    int32_t rows, cols;
    int32_t width, height; /* pixels in the PNG, points in the SVG; 64..16384 */
    const lp_chart_panel *panels;
    int32_t n_panels;      /* <= rows * cols */
} lp_figure;

/* Where a drawn piece of text landed (device units, y down). */
typedef struct lp_chart_box {
    double x0, y0, x1, y1;
    int32_t panel; /* -1 for the figure title */
} lp_chart_box;

/* Writes f as a PNG / an SVG atomically: the file appears complete or not at all.
 * Errors: INVALID_ARG (sizes, a panel without data it needs), NO_MEMORY, IO naming path. */
LP_WARN_UNUSED lp_status lp_figure_write_png(const lp_figure *f, const char *path);
LP_WARN_UNUSED lp_status lp_figure_write_svg(const lp_figure *f, const char *path);
/* Draws f without output and returns the boxes of every text it placed (*out malloc'd,
 * caller frees), and the plot area of each panel in areas (n_panels, may be NULL). */
LP_WARN_UNUSED lp_status lp_figure_text_boxes(const lp_figure *f, lp_chart_box **out, size_t *n,
                                              lp_chart_box *areas);

/* The figure as an SVG document in memory (the same drawing as lp_figure_write_svg): *out
 * malloc'd and NUL-terminated, caller frees; *len its length (may be NULL). */
LP_WARN_UNUSED lp_status lp_figure_svg(const lp_figure *f, char **out, size_t *len);

/* "Nice" axis ticks (1, 2, 2.5, 5 x 10^k steps) covering [lo, hi] with at most max_ticks
 * ticks: writes them to ticks (cap >= max_ticks) and returns the count (>= 2 when
 * lo < hi and max_ticks >= 2). *step gets the spacing. lo == hi is widened first. */
int32_t lp_chart_nice_ticks(double lo, double hi, int32_t max_ticks, double *ticks, double *step);
/* Frees the font caches cairo (and through it fontconfig) keeps between charts. Call once
 * before the process exits, after the last chart and with no chart being drawn, so leak
 * checkers see no leak; a chart drawn later rebuilds them. */
void lp_chart_release_caches(void);
/* Formats a tick value with as many decimals as step needs ("0.25", "1.5k", "2M" beyond
 * 10^4); writes at most cap bytes. */
void lp_chart_format_tick(double v, double step, char *buf, size_t cap);

/* ---- a run directory read back (report.html, loupe report) -----------------------------
 *
 *   lp_run_data *d;
 *   if (lp_run_load("reports/r1", &d) == LP_OK) { ... lp_run_free(d); }
 *
 * A training run (loupe train / profile: summary.json, steps.csv, epoch_results.csv and,
 * when profiled, profiler/ with a Kineto trace) or a bench run (baseline_metrics.json). */

typedef enum lp_run_kind { LP_RUN_TRAIN = 0, LP_RUN_BENCH } lp_run_kind;

/* One line of steps.csv (NaN where the column is absent or empty). */
typedef struct lp_run_step {
    double step, loss, lr, step_ms, data_ms, forward_ms, backward_ms, optimizer_ms, samples, tokens,
        memory_bytes, rss_bytes;
} lp_run_step;

/* One line of epoch_results.csv. */
typedef struct lp_run_epoch {
    double epoch, train_loss, eval_loss, eval_accuracy, eval_macro_f1, samples_per_s;
} lp_run_epoch;

/* One op of the profiled window: torch's key averages (self / total host time, calls,
 * FLOPs) plus the bytes moved that loupe's ops record; flops, bytes NaN when unknown. */
typedef struct lp_run_op {
    char name[96];
    double calls, self_ms, total_ms, flops, bytes;
} lp_run_op;

/* Live bytes per memory category after one [memory] event of the trace. */
typedef struct lp_run_mem_point {
    double t_ms; /* from the profiled window's start */
    double bytes[LP_MEM_CATEGORY__COUNT];
} lp_run_mem_point;

typedef struct lp_run_data {
    char dir[1024];
    lp_run_kind kind;
    lp_run_summary sum;            /* LP_RUN_TRAIN: summary.json */
    double achieved_gflops, mfu, peak_gflops, peak_rss_bytes, train_time_s, samples; /* NaN absent */
    char model[128], task[32];
    lp_run_step *steps;            /* (n_steps) */
    int32_t n_steps;
    lp_run_epoch *epochs;          /* (n_epochs) */
    int32_t n_epochs;
    lp_run_op *ops;                /* (n_ops) by self time, descending; from the trace when profiled */
    int32_t n_ops;
    lp_run_mem_point *mem;         /* (n_mem) the trace's memory timeline, thinned to <= 2000 points */
    int32_t n_mem;
    char trace[1024];              /* the trace file, relative to dir; "" when not profiled */
    double step_parts_ms[8];       /* profiler/summary.json breakdown_ms, mean per profiled step */
    char step_parts[8][24];
    int32_t n_step_parts;
    struct lp_bench_curve *bench;  /* LP_RUN_BENCH: baseline_metrics.json (owned) */
} lp_run_data;

/* Reads the run directory dir into *out (free with lp_run_free). Errors, each naming the
 * file: NOT_FOUND for a directory that is not a run (neither summary.json nor
 * baseline_metrics.json), FORMAT for a file that is not loupe's or is truncated (a
 * steps.csv line with missing fields names its line), IO, NO_MEMORY; *out NULL then. */
LP_WARN_UNUSED lp_status lp_run_load(const char *dir, lp_run_data **out);
void lp_run_free(lp_run_data *d);

/* This machine's ceilings, the denominators of the diagnosis (loupe peak's figures). */
typedef struct lp_run_ceilings {
    double gflops;   /* f32 FMA peak, all threads (NaN unknown) */
    double gbs;      /* memory bandwidth, STREAM triad (NaN unknown) */
    char source[64]; /* where they come from ("loupe peak on this machine") */
} lp_run_ceilings;

/* Writes dir/report.html (and dir/plots/NAME.{png,svg} for each chart) for the run d,
 * judged against ceilings c (NULL: none known). Atomic; errors name the file. */
LP_WARN_UNUSED lp_status lp_run_report_write(const lp_run_data *d, const lp_run_ceilings *c);
/* Writes the runs side by side (n >= 1, training runs) to path: headline figures of each,
 * loss and step-time curves overlaid, memory by category and top ops per run. Charts go to
 * plots_dir (NULL: none). Atomic. */
LP_WARN_UNUSED lp_status lp_compare_html_write(const lp_run_data *const *runs, int n, const char *path,
                                               const char *plots_dir);

/* ---- HTML pages (report.html, the compare page, loupe analyze --html) -------------------
 *
 *   lp_html *h = lp_html_new("Run r1", "runs/r1/plots");  // chart copies there; NULL: none
 *   lp_html_h(h, 1, "Run r1");
 *   lp_html_tabs_begin(h);
 *   lp_html_tab_begin(h, "overview", "Overview");
 *   lp_html_p(h, "Trained %d steps on %s", steps, data);          // escaped
 *   lp_html_chart(h, "loss", &fig);          // inline SVG + plots/loss.png, plots/loss.svg
 *   lp_html_table_begin(h, (const char *[]){"op", "calls", "self ms"}, 3);
 *   lp_html_tr(h); lp_html_td(h, "aten::mm"); lp_html_td_num(h, 12, "%.0f"); lp_html_td_num(h, 3.5, "%.2f");
 *   lp_html_table_end(h);                    // click a header to sort by it
 *   lp_html_tab_end(h);
 *   lp_html_tabs_end(h);
 *   st = lp_html_write(h, "runs/r1/report.html");   // atomic; or the first error met
 *   lp_html_free(h);
 *
 * The page is self-contained: inline CSS, charts as inline SVG, a few lines of inline JS
 * (tabs, sorting), no network. Without JS every tab shows, one after another; with it,
 * "#all" in the address shows every tab at once (for printing and screenshots). Builder
 * calls never fail on their own: the first error (out of memory, a chart that cannot be
 * drawn or written) is kept, later calls do nothing, and lp_html_write returns it. */

typedef struct lp_html lp_html;

/* A new page titled title (escaped). plots_dir: where lp_html_chart writes the PNG and SVG
 * copies (created when the first chart is written; copied); NULL for none. NULL when out
 * of memory (lp_err_msg says so). */
lp_html *lp_html_new(const char *title, const char *plots_dir);
void lp_html_free(lp_html *h);
/* The first error met while building the page (LP_OK when none). */
lp_status lp_html_status(const lp_html *h);

/* Text is escaped (& < > " ' and control characters); raw is trusted markup. */
void lp_html_text(lp_html *h, const char *s);
void lp_html_textf(lp_html *h, const char *fmt, ...) LP_PRINTF(2, 3);
void lp_html_raw(lp_html *h, const char *markup);
/* <hN> (level 1..4) and <p> holding escaped text; a note is a <p> in small grey type. */
void lp_html_h(lp_html *h, int level, const char *text);
void lp_html_p(lp_html *h, const char *fmt, ...) LP_PRINTF(2, 3);
void lp_html_note(lp_html *h, const char *fmt, ...) LP_PRINTF(2, 3);
/* A <section> with an <h2> title; id (letters, digits, '-', '_') may be NULL. */
void lp_html_section_begin(lp_html *h, const char *id, const char *title);
void lp_html_section_end(lp_html *h);
/* Tabs: a row of buttons (built by the page's script from each tab's label) over one
 * panel per tab; the first is shown. id: letters, digits, '-', '_'. */
void lp_html_tabs_begin(lp_html *h);
void lp_html_tab_begin(lp_html *h, const char *id, const char *label);
void lp_html_tab_end(lp_html *h);
void lp_html_tabs_end(lp_html *h);
/* Headline figures: a row of boxes, each a label over a value (both escaped). */
void lp_html_stats_begin(lp_html *h);
void lp_html_stat(lp_html *h, const char *label, const char *fmt, ...) LP_PRINTF(3, 4);
void lp_html_stats_end(lp_html *h);
/* A sortable table: n header cells, then rows of cells. lp_html_tr starts a row (ending the
 * previous one); td cells hold escaped text, td_num a number printed with fmt (one double
 * conversion, e.g. "%.2f") that sorts numerically; non-finite numbers print as "-" and sort
 * last. A header starting with '#' sorts as a number without the '#' shown. */
void lp_html_table_begin(lp_html *h, const char *const *headers, int32_t n);
void lp_html_tr(lp_html *h);
void lp_html_td(lp_html *h, const char *text);
void lp_html_tdf(lp_html *h, const char *fmt, ...) LP_PRINTF(2, 3);
void lp_html_td_num(lp_html *h, double v, const char *fmt);
void lp_html_table_end(lp_html *h);
/* f drawn as inline SVG in a <figure class="lp-chart" data-chart="name"> with f's title as
 * caption, and, with a plots directory, written to plots_dir/name.png and .svg (atomic).
 * name: letters, digits, '-', '_' (a file name and an id). Returns (and keeps) the first
 * error: INVALID_ARG for a bad figure or name, IO naming a plot file. */
lp_status lp_html_chart(lp_html *h, const char *name, const lp_figure *f);
/* Ends the document and writes it to path atomically (the page appears complete or not at
 * all). Returns the first error met while building, writing nothing then; IO naming path. */
LP_WARN_UNUSED lp_status lp_html_write(lp_html *h, const char *path);
/* The page so far, NUL-terminated (borrowed; valid until the next call on h). */
const char *lp_html_data(const lp_html *h, size_t *len);

/* s with & < > " ' escaped as entities and control characters other than tab and newline
 * dropped, in a fresh string (caller frees); NULL when out of memory. */
char *lp_html_escape(const char *s);

/* ---- bench plots and bench comparison (loupe bench, loupe bench --compare) -------------
 *
 *   lp_bench_curve *c; int n = 2;
 *   if (lp_bench_curves_load((const char *[]){"runs/f32", "runs/nf4"}, n, &c) == LP_OK) {
 *       lp_bench_plots_write(c, n, "runs/compare/plots");    // the same plots, one series per run
 *       free(c);
 *   }
 */

#define LP_BENCH_CURVE_MAX 32

/* One bench run's per-batch-size numbers from its baseline_metrics.json (NaN when absent). */
typedef struct lp_bench_curve {
    char dir[1024], label[160]; /* label: the run directory's name and dtype */
    char cpu[128], simd[32], dtype[16];
    int complete;               /* the file's "complete" */
    int32_t n;
    double batch_size[LP_BENCH_CURVE_MAX];
    double lat_sample[LP_BENCH_CURVE_MAX], lat_sample_std[LP_BENCH_CURVE_MAX];
    double lat_batch[LP_BENCH_CURVE_MAX], lat_batch_std[LP_BENCH_CURVE_MAX];
    double thr[LP_BENCH_CURVE_MAX], thr_std[LP_BENCH_CURVE_MAX];
    double tokens_per_s[LP_BENCH_CURVE_MAX];
    double alloc_mb[LP_BENCH_CURVE_MAX], alloc_std[LP_BENCH_CURVE_MAX]; /* allocator peak per run */
    double rss_mb[LP_BENCH_CURVE_MAX], rss_std[LP_BENCH_CURVE_MAX];     /* resident set per run */
    double eff[LP_BENCH_CURVE_MAX], eff_std[LP_BENCH_CURVE_MAX];        /* samples/s per GB of RSS */
    double accuracy, macro_f1, model_mb;
} lp_bench_curve;

/* Reads dir/baseline_metrics.json of each of n run directories into *out (n entries,
 * caller frees with free()). Errors: IO naming a directory without the file, FORMAT naming
 * a file that is not a loupe bench's; *out NULL then. */
LP_WARN_UNUSED lp_status lp_bench_curves_load(const char *const *dirs, int n, lp_bench_curve **out);
/* Writes dir/batch_size_comparison.{png,svg} (six panels: latency per sample, throughput,
 * memory, process memory, latency per batch, memory efficiency; mean +- std error bars,
 * one series per run) and dir/metrics_heatmap.{png,svg} (rows: batch sizes of each run;
 * columns: the metrics, coloured per column). dir is created. Each file is atomic. */
LP_WARN_UNUSED lp_status lp_bench_plots_write(const lp_bench_curve *c, int n, const char *dir);
/* The runs side by side per batch size: samples/s and ms/sample of each, and each run's
 * throughput ratio to the first's. */
void lp_bench_compare_write_text(FILE *f, const lp_bench_curve *c, int n);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_REPORT_H */
