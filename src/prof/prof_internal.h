/* Internal interfaces shared by the profiler's source files (not installed). */
#ifndef LP_PROF_INTERNAL_H
#define LP_PROF_INTERNAL_H

#include "loupe/prof.h"

#include <stdint.h>

/* Growable byte buffer with an optional gzip stage and an atomic file behind it. */
typedef struct lp_prof_out lp_prof_out;
lp_status lp_prof_out_open(lp_prof_out **out, const char *path, int gzip);
void lp_prof_out_write(lp_prof_out *o, const void *p, size_t n);
void lp_prof_out_printf(lp_prof_out *o, const char *fmt, ...) LP_PRINTF(2, 3);
void lp_prof_out_puts(lp_prof_out *o, const char *s);
/* Writes s as a JSON string literal (quotes included). */
void lp_prof_out_json_str(lp_prof_out *o, const char *s);
lp_status lp_prof_out_commit(lp_prof_out *o); /* flush, close, rename; frees o */
void lp_prof_out_abort(lp_prof_out *o);       /* removes the temp file; frees o */

/* Memory hook: called by lp_prof_mem_alloc/free when recording with memory on. */
void lp_prof__mem_record(const void *addr, int64_t bytes, int cat, int64_t total_after);
extern int lp_prof__mem_on;

/* The recorder's clock: the TSC on x86-64 (a clock_gettime costs ~2x more on VMs), else
 * CLOCK_MONOTONIC ns. Ticks become ns at collection through a calibration against
 * CLOCK_MONOTONIC taken over the whole session (clock.c), a monotonic linear map, so
 * order and nesting are kept exactly. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline int64_t lp_prof__ticks(void) { return (int64_t)__rdtsc(); }
#define LP_PROF_TICKS_ARE_NS 0
#else
static inline int64_t lp_prof__ticks(void) { return lp_prof_now_ns(); }
#define LP_PROF_TICKS_ARE_NS 1
#endif
typedef struct lp_prof_tcal {
    int64_t t0, n0;     /* a (ticks, monotonic ns) pair */
    double ns_per_tick;
} lp_prof_tcal;
/* Captures the anchor pair once (cheap, idempotent). */
void lp_prof__tcal_init(void);
/* A calibration from the anchor to now (waits until >= 5 ms have passed since it). */
void lp_prof__tcal_get(lp_prof_tcal *c);
static inline int64_t lp_prof__ticks_to_ns(const lp_prof_tcal *c, int64_t t)
{
    return c->n0 + (int64_t)((double)(t - c->t0) * c->ns_per_tick + 0.5 * (t >= c->t0 ? 1 : -1));
}

/* Recorder control (record.c). */
void lp_prof__rec_set_flags(int record_shapes, int hw_counters);
void lp_prof__rec_enable(int on);          /* flips lp_prof__active's recording bit */
/* lp_prof__active's bits: recording (the buffers take events), and NVTX-only (ranges go to
 * NVTX while loupe is not recording; lp_prof_nvtx_enable). */
enum { LP_PROF__ACT_REC = 1, LP_PROF__ACT_NVTX = 2 };
#define LP_PROF__RECORDING() (__atomic_load_n(&lp_prof__active, __ATOMIC_RELAXED) & LP_PROF__ACT_REC)
/* Marks the start of a window: later events only. Drops buffered events. */
void lp_prof__rec_window_start(int64_t t_ns);
/* Collects events recorded in [t_start, t_end] (ticks) into ev, ts relative to t_start. */
lp_status lp_prof__rec_collect(lp_prof_events *ev, int64_t t_start, int64_t t_end,
                               const lp_prof_tcal *cal);
/* Step ranges: the name is "ProfilerStep#<n>"; step_pop closes the innermost step even
 * with other ranges open above it. */
void lp_prof__step_push(int64_t n);
void lp_prof__step_pop(void);

/* Hardware counters (hwc.c). */
int lp_prof__hw_open_thread(int *fd_leader, int fds[3]);
int lp_prof__hw_read(int fd_leader, int64_t v[3]);

/* Thread/process names stored in a list (events.c); process names have tid INT64_MIN. */
size_t lp_prof__events_n_names(const lp_prof_events *ev);
const char *lp_prof__events_name_at(const lp_prof_events *ev, size_t i, int64_t *pid,
                                    int64_t *tid);

/* Mutable access for lp_prof_events_add_gpu (numbering host ranges). */
lp_prof_event *lp_prof__events_at(lp_prof_events *ev, size_t i);

/* The session's GPU source hooks (gpu_source.c): start at a window's start; at its stop,
 * add the records to ev (origin = CLOCK_MONOTONIC ns of ev's ts 0, window [0, end_ns]). */
void lp_prof__gpu_window_start(void);
lp_status lp_prof__gpu_window_stop(lp_prof_events *ev, int64_t origin_mono_ns, int64_t end_ns);

/* The trace writer's GPU parts (gpu_trace.c): one GPU event (with its ac2g flow line, no
 * trailing separator) and the "deviceProperties" key (with its trailing ",\n"). */
void lp_prof__write_gpu_event(lp_prof_out *o, const lp_prof_event *e, const lp_gpu_device_props *devs,
                              size_t nd);
void lp_prof__write_device_props(lp_prof_out *o, const lp_gpu_device_props *d, size_t nd);

/* JSON number helpers. */
void lp_prof_fmt_us(char *buf, size_t cap, int64_t ns); /* "<int>.<3 digits>" */

/* Shared analysis helpers (analysis.c): per-thread nesting of 'X' events. */
typedef struct lp_prof_node {
    size_t idx;        /* event index in the list */
    long parent;       /* node index of the direct parent on the same thread, -1 none */
    int64_t child_ns;  /* sum of direct children's durations */
    int depth;
} lp_prof_node;
/* Builds nesting for events with ph 'X' that pass filter (NULL = all). Nodes are in
 * (pid, tid, ts) order. Caller frees *nodes. */
lp_status lp_prof__nest(const lp_prof_events *ev, int (*filter)(const lp_prof_event *),
                        lp_prof_node **nodes, size_t *n);
int lp_prof__is_device_cat(const char *cat);
int lp_prof__is_cpu_range(const lp_prof_event *e); /* 'X' host event used by tables */

/* Memory series (export_memtl.c): one point per distinct event time (ns relative), bytes
 * live per loupe category after that time's events; the first point is the baseline at
 * the window start. Caller frees *pts. */
typedef struct lp_prof_mem_pt {
    int64_t t_ns;
    int64_t by_cat[LP_MEM_CATEGORY__COUNT];
} lp_prof_mem_pt;
lp_status lp_prof__mem_series(const lp_prof_events *ev, lp_prof_mem_pt **pts, size_t *n);

#endif
