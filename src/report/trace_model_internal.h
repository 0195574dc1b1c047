/* The streaming trace model's working state (report layer only; trace_model.c). */
#ifndef LP_REPORT_TRACE_MODEL_INTERNAL_H
#define LP_REPORT_TRACE_MODEL_INTERNAL_H

#include "loupe/report.h"
#include "trace_json.h"
#include "trace_store.h"

/* Deepest host nesting kept per thread; deeper events count as roots. */
#define LP_TRACE_MAX_STACK 4096
/* Memory instants and python_function frames travel through the window as these kinds. */
#define K_MEMORY LP_TRACE_KIND__COUNT
#define K_PYFN (LP_TRACE_KIND__COUNT + 1)
/* No stack row (stacks not tracked for this event). */
#define NO_KROW UINT32_MAX

/* One event in the reorder window. */
typedef struct tev {
    int64_t ts, dur, corr, ext;
    int64_t a, b;          /* [memory]: bytes, total allocated; memcpy/memset: bytes */
                           /* [memory]: corr = Addr, ext = Device Id (-1 absent) */
    uint64_t seq;          /* arrival order: ties keep it */
    uint32_t name, shapes; /* name id; shapes id + 1 (0: none) */
    uint32_t thread;
    uint32_t stack; /* its "Call stack" arg: stack id + 1 (0: none) */
    uint8_t kind;
    int8_t memdev; /* [memory] on a device */
    double flops;  /* "FLOPs" / "flops" arg; < 0 unknown */
} tev;

/* A finished node waiting to be counted (its parent may fold it). */
typedef struct summ {
    uint32_t name, row, srow, krow; /* krow: (op, stack) row or NO_KROW */
    int64_t dur, child_ns;
    int32_t n_children;
    int64_t mem[2], child_mem[2]; /* [memory] bytes inside it (CPU, device), and its children's */
    double flops;                 /* its "FLOPs" arg; < 0 unknown */
} summ;

typedef struct frame {
    int64_t ts, end, child_ns;
    uint32_t name, row, srow, krow;
    int32_t n_children;
    uint8_t kind;
    summ only;                     /* the first child, counted once a second one comes or at close */
    uint64_t serial;               /* this node, among all */
    int cand;                      /* a same-named child was opened: torch may fold it */
    int64_t pend_total, pend_self; /* device time through that child, until the fold is known */
    uint32_t pend_srow, pend_krow; /* the child's by-shape and stack rows */
    int64_t msg_bytes;             /* record_param_comms: its message's bytes; -1 */
    int64_t mem[2], child_mem[2];  /* [memory] bytes in [ts, end] on any thread, CPU / device */
    double flops;
} frame;

/* An open python_function frame. */
typedef struct pyframe {
    int64_t end;
    uint32_t name;
} pyframe;

typedef struct tm_thread {
    frame *st;
    int n;
    size_t cap;
    pyframe *py; /* python_function frames open on this thread */
    int npy;
    size_t cap_py;
    int64_t comm_end, exec_end; /* latest end of its communication / other host ranges so far */
} tm_thread;

typedef struct tm_union {
    int any;
    int64_t start, end, total;
} tm_union;

/* One device event for the GPU figures. */
typedef struct gpu_ev {
    int64_t ts, end, launch_ts; /* launch_ts INT64_MIN: launch not found */
    uint32_t stream;
    uint8_t cls, in_class_union;
} gpu_ev;

/* Unions and per-stream idle gaps over a set of device events. */
typedef struct tm_gpu {
    int any;
    int64_t first, last;
    tm_union u_all, u_cls[LP_TRACE_CLASS__COUNT], u_cc;
    int64_t *prev_end; /* per thread id: the stream's previous event's end */
    uint8_t *seen;
    size_t cap_streams, cap_seen;
    int64_t n_streams, n_events, host_wait, kernel_wait, other;
} tm_gpu;

typedef struct tm_curve {
    lp_trace_mem_point *pts, run;
    size_t n, stride, in_run;
} tm_curve;

/* What a name is, decided once per distinct name. */
enum { NF_COMM = 1, NF_DATA = 2, NF_STEP = 4, NF_FILTERED = 8, NF_NOT_COMPUTE = 16 };

typedef struct tm_state {
    const char *name;
    lp_trace_model *m;
    lp_trace_json *json;
    tev *heap;
    size_t nheap, window;
    uint64_t seq;
    lp_strtab names, keys, skeys, kkeys, paths, threads_tab;
    uint32_t step_name;
    size_t cap_rows, cap_srows, cap_kernels, cap_steps, cap_threads, cap_path;
    tm_thread *threads;
    size_t n_threads;
    uint32_t *pathbuf;
    lp_idmap corr, ext;
    lp_idmap flows; /* (stream, start) of an ac2g flow's end -> its id (in launch_ts) */
    lp_idmap folds; /* node serial -> folded (path = 1), for parents with a same-named child */
    int any_out;
    int64_t last_out;
    int64_t cursor, max_end[LP_TRACE_PART__COUNT];
    int64_t ov_cursor; /* host overlap: time before it is attributed */
    int ov_comm_seen;  /* a host communication range was met */
    int64_t step_limit, step_cpu_end, pending[LP_TRACE_PART__COUNT];
    tm_gpu g_all, g_hta; /* every device event; HTA's scope (launched before the last step) */
    gpu_ev *fifo;        /* device events launched in the latest step, not yet in g_hta */
    size_t n_fifo, cap_fifo;
    int64_t last_step_ts;
    int mem_dev_seen;
    int64_t peak[2], peak_ts[2];
    int peak_seen[2];
    uint64_t serial;     /* nodes opened so far */
    int oom;             /* an allocation failed where no status could be returned */
    uint8_t *name_flags; /* NF_* per name id */
    size_t cap_flags;
    char last_cat[32]; /* the last category met and its kind (INT32_MIN: none) */
    int last_cat_kind;
    int64_t mem_running[2]; /* bytes allocated so far by [memory] events, CPU / device */
    tm_curve curve_cpu, curve_dev;
    /* call stacks (trace_stack.c) */
    int stack_frames;            /* frames per stack; 0: not tracked */
    lp_strtab frames;            /* frame strings */
    lp_strtab stacks;            /* frame-id sequences, innermost first */
    lp_strtab kkeys_stack;       /* (op row, stack id) -> stack row */
    uint32_t *krow_op;           /* per stack row: its op row */
    size_t cap_stacks, cap_krow_meta;
    uint32_t *op_nstacks, *op_fold; /* per op row: distinct stacks, folded row + 1 */
    size_t cap_op_nstacks, cap_op_fold;
    uint32_t *seqbuf;
    size_t cap_seq;
    /* the memory events table (trace_memev.c) */
    lp_trace_mem_event *mtop; /* min-heap by size of the K largest allocations */
    int64_t *mtop_addr;       /* their Addr (-1 none), parallel */
    uint64_t *mtop_seq;
    size_t n_mtop, k_mtop;
} tm_state;

/* Shared by trace_model.c and trace_model_time.c. */
lp_status lp_tm_oom(tm_state *s);                                /* NO_MEMORY naming the trace */
int lp_tm_grow(void **p, size_t *cap, size_t need, size_t elem); /* zero-filled growth; 0 OOM */
void lp_tm_sweep_to(tm_state *s, int64_t t);                     /* breakdown: attribute time up to t */
void lp_tm_extend_step(tm_state *s, int64_t end);                /* the latest step lasts at least to end */
void lp_tm_host_overlap_to(tm_state *s, int64_t t);              /* host comm and its overlap up to t */
lp_status lp_tm_start_step(tm_state *s, const tev *e, const char *name); /* a ProfilerStep#N */
int lp_tm_gpu_account(tm_gpu *g, const gpu_ev *e);                       /* 0 when out of memory */
void lp_tm_gpu_figures(const tm_gpu *g, lp_trace_gpu *out);
void lp_tm_gpu_free(tm_gpu *g);
int lp_tm_fifo_commit(tm_state *s, int64_t t); /* held events launched before t into HTA's scope */
lp_status lp_tm_mem_point(tm_state *s, tm_curve *c, int64_t ts, int64_t v);

/* Call stacks (trace_stack.c). */
lp_status lp_tm_stack_arg(tm_state *s, const char *call_stack, uint32_t *stack); /* id + 1; 0 none */
void lp_tm_py_frame(tm_state *s, tm_thread *t, const tev *e);                   /* a python_function */
lp_status lp_tm_stack_row(tm_state *s, tm_thread *t, const tev *e, uint32_t row, uint32_t *krow);
lp_status lp_tm_stacks_finish(tm_state *s); /* before the op rows are compacted */
void lp_tm_stacks_free(tm_state *s);
/* The memory events table (trace_memev.c). */
lp_status lp_tm_mem_event(tm_state *s, const tev *e, const char *op);
lp_status lp_tm_mem_finish(tm_state *s);
void lp_tm_mem_free(tm_state *s);

/* Text and CSV of the stack rows and the largest allocations (trace_views_out.c). */
const char *lp_tm_stack_source(const lp_trace_model *m);          /* where the stacks came from */
size_t *lp_tm_stack_order(const lp_trace_model *m, lp_prof_sort by); /* row indices sorted; NULL OOM */
const char *lp_tm_stack_label(const lp_trace_stack_row *r);        /* folded / no stack; NULL: frames */
void lp_tm_lifetime_str(const lp_trace_mem_event *e, char *buf, size_t cap);
void lp_tm_write_stacks_text(FILE *f, const lp_trace_model *m, lp_prof_sort by, int64_t limit);
void lp_tm_write_mem_text(FILE *f, const lp_trace_model *m);
void lp_tm_csv_stacks(FILE *f, const void *m);
void lp_tm_csv_mem_events(FILE *f, const void *m);

/* Per-collective rows from the model's communication kernels; names interned in names. */
lp_status lp_trace_model_collectives(lp_trace_model *m, lp_strtab *names);

#endif
