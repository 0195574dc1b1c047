/* loupe bench: the inference benchmark of a sequence classifier. A batch-size sweep on a
 * seeded sample of the data (latency per sample and per batch, throughput, memory by
 * category, efficiency), a full-dataset pass at the best batch size (accuracy, macro-F1,
 * per-class precision/recall, confusion matrix), a profiled pass (trace, key averages,
 * stacks, the top ops against the machine's ceilings), written into a run directory.
 * Works on any model lp_model_load loads (it uses only the public model API).
 *
 *   lp_bench_config c;
 *   lp_bench_config_init(&c);              // models/default on the bundled data set
 *   c.model_dir = "models/minilm"; c.data_file = "val.csv";
 *   lp_bench_result *r;
 *   lp_bench_install_signal_handlers();    // Ctrl-C: stop, write what was measured
 *   lp_status st = lp_bench_run(&c, "reports/run1", &r);   // LP_STATUS_INTERRUPTED: partial
 *   if (st != LP_OK && st != LP_STATUS_INTERRUPTED) fprintf(stderr, "%s\n", lp_err_msg());
 *   lp_bench_result_free(r);
 *
 * Files in the directory (each written atomically): baseline_metrics.json,
 * detailed_metrics.csv, baseline_summary_report.txt, label_mappings.json,
 * predictions.csv (save_predictions), profiler/. The plots are the report layer's
 * (lp_bench_plots_write in report.h), drawn from baseline_metrics.json.
 *
 * Threads: one bench per process (the profiler and the SIGINT flag are global).
 */
#ifndef LOUPE_BENCH_H
#define LOUPE_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "loupe/base.h"
#include "loupe/core.h"
#include "loupe/nn.h"
#include "loupe/prof.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LP_BENCH_MAX_BATCH_SIZES 32
#define LP_BENCH_MAX_SAMPLE_SIZES 16
#define LP_BENCH_MAX_BATCH 4096 /* larger batch sizes are refused as absurd */
#define LP_BENCH_DEFAULT_DATA "data/bench-intents/val.csv"

/* Weight storage the sweep runs with. INT8 (per output channel) and NF4 (QLoRA's
 * format) quantize the encoder's Linear weights at load. */
typedef enum lp_bench_dtype {
    LP_BENCH_DTYPE_F32 = 0,
    LP_BENCH_DTYPE_BF16,
    LP_BENCH_DTYPE_Q8_0,
    LP_BENCH_DTYPE_INT8, /* the Q8_0 path under its own name (dynamic int8 quantization) */
    LP_BENCH_DTYPE_NF4,
    LP_BENCH_DTYPE_F32_PACKED /* f32 Linears packed once at load for the f32 GEMM (f32_gemm.c) */
} lp_bench_dtype;
const char *lp_bench_dtype_name(lp_bench_dtype d);
/* "f32", "bf16", "q8_0", "int8", "nf4", "f32_packed"; INVALID_ARG naming the value otherwise. */
LP_WARN_UNUSED lp_status lp_bench_dtype_parse(const char *s, lp_bench_dtype *out);

/* Every setting of a bench. Strings are borrowed (must outlive lp_bench_run). */
typedef struct lp_bench_config {
    const char *model_dir;                  /* --model (default "models/default") */
    const char *adapter_dir;                /* --adapter: a PEFT LoRA adapter on the model; NULL none */
    const char *data_file;                  /* --data (default LP_BENCH_DEFAULT_DATA) */
    const char *label_map_file;             /* --label-map; NULL: built from the data (written back) */
    const char *text_column, *label_column; /* NULL: auto (text / labels, label_id, label) */
    bool skip_bad_rows; /* --skip-bad-rows: drop malformed rows (counted) instead of failing */
    int32_t batch_sizes[LP_BENCH_MAX_BATCH_SIZES]; /* --batch-sizes (1,4,8,16,32,64) */
    int32_t n_batch_sizes;
    int64_t sample_sizes[LP_BENCH_MAX_SAMPLE_SIZES]; /* --samples (100,500,1000): the sweep's */
    int32_t n_sample_sizes;                          /* pool is the largest; each is reported */
    int32_t warmup;                                  /* --warmup runs per batch size, untimed (3) */
    int32_t runs;                                    /* --runs timed runs per batch size (10) */
    int32_t max_length;        /* --max-length truncation (512; capped at the model's positions) */
    lp_bench_dtype dtype;      /* --dtype (f32) */
    int32_t threads;           /* --threads (0: all cores / LP_THREADS) */
    uint64_t seed;             /* --seed (42): the sample drawn and the synthetic ids */
    bool sort_by_length;       /* --sort-by-length: batches of similar length (default off) */
    bool synthetic;            /* --synthetic: random ids of seq_len tokens, speed only */
    int32_t seq_len;           /* --seq-len for --synthetic (128) */
    bool skip_profiling;       /* --skip-profiling */
    bool skip_full;            /* --skip-full-pass: no accuracy pass (speed only) */
    bool save_predictions;     /* --save-predictions: predictions.csv of the full pass */
    int32_t profile_runs;      /* profiled batches (3) */
    lp_exec_mode exec;         /* --exec (fused) */
    bool progress;             /* a line per batch size on stderr (true) */
    const char *loupe_version; /* written into baseline_metrics.json; NULL "unknown" */
} lp_bench_config;

void lp_bench_config_init(lp_bench_config *c);
/* Checks ranges and combinations (batch size 0 or above LP_BENCH_MAX_BATCH, no batch
 * sizes, runs < 1, ...). INVALID_ARG naming the setting. */
LP_WARN_UNUSED lp_status lp_bench_config_validate(const lp_bench_config *c);
/* Parses "1,4,8" into out (at most cap values, each in [lo, hi]); INVALID_ARG naming what
 * argument `what` held. Returns the count in *n. */
LP_WARN_UNUSED lp_status lp_bench_parse_list(const char *what, const char *s, int64_t lo, int64_t hi,
                                             int64_t *out, int32_t cap, int32_t *n);

/* Mean, standard deviation (sample, n-1) and nearest-rank percentiles. */
typedef struct lp_bench_stats {
    double mean, std, min, max, p50, p90, p99;
    int32_t n;
} lp_bench_stats;
/* Stats of x (n); x is not modified. All NaN when n == 0. */
void lp_bench_stats_of(const double *x, int32_t n, lp_bench_stats *out);

/* One batch size of the sweep; per-run arrays have runs_done entries. */
typedef struct lp_bench_point {
    int32_t batch_size;
    int32_t runs_done;
    double *batch_ms;        /* (runs) wall time of each timed forward */
    int32_t *padded_len;     /* (runs) T of each batch (dynamic padding) */
    int64_t *tokens;         /* (runs) real tokens in each batch */
    int64_t *rss_bytes;      /* (runs) resident set after each run */
    int64_t *accounted_peak; /* (runs) allocator peak (all categories) during each run */
    lp_bench_stats batch_latency_ms, sample_latency_ms, samples_per_s, tokens_per_s, rss_mb, accounted_mb,
        samples_per_s_per_gb;
    double batches_per_s;   /* 1000 / mean batch ms */
    int64_t peak_rss_bytes; /* VmHWM over this batch size (reset before it when Linux allows) */
    int64_t mem_peak[LP_MEM_CATEGORY__COUNT]; /* allocator peak per category over the runs */
} lp_bench_point;

/* The full-dataset pass (at the best batch size). */
typedef struct lp_bench_full {
    bool done;
    int64_t n;
    int32_t batch_size, num_labels;
    double total_s, samples_per_s, tokens_per_s, accuracy, macro_f1;
    double *precision, *recall, *f1; /* (num_labels) */
    int64_t *support;                /* (num_labels) true rows per class */
    int64_t *confusion;              /* (num_labels, num_labels): [true][pred] */
    int32_t *pred;                   /* (n) per dataset row, file order */
    /* the seed's sample sizes: accuracy and throughput over the first k rows of the seeded
     * order (the pass runs in that order) */
    int32_t n_sample_sizes;
    int64_t sample_n[LP_BENCH_MAX_SAMPLE_SIZES];
    double sample_accuracy[LP_BENCH_MAX_SAMPLE_SIZES], sample_s[LP_BENCH_MAX_SAMPLE_SIZES];
    /* a quantized --dtype (bf16, q8_0 / int8, nf4): the same rows through the model loaded
     * in f32 (untimed), so the accuracy change is the quantization's alone */
    bool f32_done;
    double f32_accuracy;
    int64_t f32_agree; /* rows whose predicted label is f32's */
} lp_bench_full;

/* One of the top ops of the profiled pass against the machine's ceilings. */
typedef struct lp_bench_op {
    char name[96];
    int64_t calls;
    double self_ms, share; /* share of the profiled self time */
    double gflops, gbs;    /* achieved, over the op's own time; NaN when unrecorded */
    double intensity;      /* FLOP per byte moved */
    const char *bound;     /* "compute", "memory" or "unknown" */
} lp_bench_op;

typedef struct lp_bench_profile {
    bool done;
    int32_t batch_size, batches;
    double peak_gflops, peak_gbs, ridge; /* lp_peak_measure: FMA peak, STREAM triad, ratio */
    int32_t n_top;
    lp_bench_op top[3];
    double total_self_ms;
} lp_bench_profile;

typedef struct lp_bench_result {
    char run_dir[1024];
    bool interrupted; /* Ctrl-C: the numbers so far were written, marked incomplete */
    /* model */
    char model_type[32], arch[64], dtype[8];
    uint64_t n_params;
    double model_mb; /* weights as stored (quantized bytes included) */
    int64_t model_bytes;
    int32_t num_labels, max_length;
    /* data */
    int64_t n_rows, pool_rows;
    double mean_len;
    int32_t max_len_seen;
    /* results */
    int32_t n_points;
    lp_bench_point points[LP_BENCH_MAX_BATCH_SIZES];
    int32_t best; /* index of the highest mean samples/s, -1 when none */
    lp_bench_full full;
    lp_bench_profile prof;
    /* machine */
    char cpu[128], simd[32];
    int32_t threads;
    lp_contention busy; /* the timed sweep runs' CPU share: was the machine busy? */
} lp_bench_result;

/* Runs the bench of c, writing into dir (created; the caller may pass a temporary
 * directory that it renames). *out (owned by the caller, lp_bench_result_free) holds the
 * numbers. Returns LP_OK, LP_STATUS_INTERRUPTED after Ctrl-C (files written, marked
 * "complete": false; *out set), or an error naming the file, row or setting (*out NULL;
 * files written before the failure are the caller's to remove). */
LP_WARN_UNUSED lp_status lp_bench_run(const lp_bench_config *c, const char *dir, lp_bench_result **out);
void lp_bench_result_free(lp_bench_result *r);

/* SIGINT/SIGTERM: the first asks the bench to stop after the current run; a second one
 * kills as usual. */
void lp_bench_install_signal_handlers(void);
bool lp_bench_stop_requested(void);
/* Asks the running bench to stop (as a signal would; tests). */
void lp_bench_request_stop(void);

/* This CPU's model name (/proc/cpuinfo) and the ISA level the kernels run at (lp_isa_name:
 * "baseline", "avx2", "avx512", "avx512bf16"), for reports and bench/README.md figures. */
void lp_bench_machine(char *cpu, size_t cpu_cap, char *simd, size_t simd_cap);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_BENCH_H */
