/* The streaming trace reader's internal interface (report layer only): yajl turns Kineto /
 * Chrome-trace JSON into one lp_trace_item per traceEvents entry, handed to a callback as
 * soon as its closing brace is read, so nothing but the current event is ever kept. */
#ifndef LP_REPORT_TRACE_JSON_H
#define LP_REPORT_TRACE_JSON_H

#include "loupe/report.h"

#include <stdint.h>

/* One traceEvents entry as read. Strings point into the reader's buffers and are valid
 * during the callback only; absent numbers are -1 (ids) or flagged. */
typedef struct lp_trace_item {
    const char *name, *cat, *ph; /* "" when absent */
    const char *pid, *tid;       /* the text written (numbers or strings): "" when absent */
    int has_ts, has_dur;         /* ts/dur parsed exactly (decimal µs -> integer ns) */
    int bad_time;                /* ts/dur present but not a usable number */
    int64_t ts_ns, dur_ns;
    int64_t external_id, correlation, flow_id; /* -1: absent */
    const char *shapes; /* torch's str(input_shapes) ("[[2, 3], []]"); NULL: not recorded */
    int64_t mem_bytes, mem_total_allocated,
        mem_device_type;   /* [memory]: total INT64_MIN, type -1 when absent */
    int64_t bytes;         /* memcpy/memset args.bytes; -1 absent */
    int64_t msg_nelems;    /* record_param_comms "In msg nelems"; -1 absent */
    const char *dtype;     /* its "dtype" ("Float", "BFloat16", ...); "" absent */
    double flops;          /* "FLOPs" / "flops"; -1 absent */
    const char *meta_name; /* "M" events: args.name */
    const char *call_stack; /* "Call stack" (frames joined by ';', innermost first); NULL absent */
    int64_t mem_addr;       /* [memory] "Addr"; -1 absent */
    int64_t mem_device_id;  /* [memory] "Device Id"; -1 absent */
} lp_trace_item;

/* Trace-wide fields met at the top level (any order: Kineto writes some after the events). */
typedef struct lp_trace_top {
    int is_array;   /* a bare array of events (pre-1.8 Chrome form) */
    int has_events; /* a traceEvents array was met */
    int has_base_time;
    int64_t base_time_ns;     /* exact, from the number's text */
    int64_t rank, world_size; /* distributedInfo; -1 absent */
    char backend[32];
    char device_name[128]; /* deviceProperties[0].name */
    int64_t device_count;  /* entries in deviceProperties */
    int64_t schema_version;
    int with_stack; /* "with_stack": 1 (torch and loupe write it when stacks were recorded) */
} lp_trace_top;

typedef lp_status (*lp_trace_item_fn)(void *ctx, const lp_trace_item *it);

typedef struct lp_trace_json lp_trace_json;

/* A parser for one file's text; name is used in messages. Errors: NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_trace_json_new(const char *name, lp_trace_item_fn fn, void *ctx,
                                           lp_trace_json **out);
/* Feeds the next n bytes; FORMAT (naming the file, with the byte offset) on bad JSON,
 * nesting deeper than LP_TRACE_MAX_DEPTH, or a callback's status. */
LP_WARN_UNUSED lp_status lp_trace_json_feed(lp_trace_json *j, const char *data, size_t n);
/* End of the text: FORMAT when it stops inside a value (truncated) or holds no events. */
LP_WARN_UNUSED lp_status lp_trace_json_finish(lp_trace_json *j);
const lp_trace_top *lp_trace_json_top(const lp_trace_json *j);
/* Entries of traceEvents that were not objects, or events whose fields had wrong types. */
uint64_t lp_trace_json_skipped(const lp_trace_json *j);
void lp_trace_json_free(lp_trace_json *j);

/* Exact decimal µs text ("1712195495519689.047", "-3", "2.5e3") -> integer ns, rounding
 * half away from zero below 1 ns. 0 when not a number or out of int64 range. */
int lp_trace_us_text_to_ns(const char *s, size_t n, int64_t *ns);

/* Nesting allowed in a trace (Kineto writes at most ~6 levels; args may add a few). */
#define LP_TRACE_MAX_DEPTH 256

#endif
