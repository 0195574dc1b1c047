/* loupe report: reading traces back (and, later, JSON/CSV writers, charts and HTML
 * reports). The trace reader accepts Kineto / torch.profiler Chrome-trace JSON, plain or
 * gzip, from loupe's own exporter or from PyTorch's profiler.
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

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_REPORT_H */
