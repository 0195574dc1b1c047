/* Streaming Kineto / Chrome-trace JSON reader on Debian's libyajl: one pass, one event in
 * memory at a time, numbers taken as the text written so timestamps become exact integer
 * ns (an absolute epoch-µs stamp with three decimals does not fit a double's 53 bits).
 * Accepts the object form ({"traceEvents": [...], ...}, top-level keys in any order) and
 * the pre-1.8 bare array of events. */
#include "trace_json.h"

#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* Longest string kept from one field (kernel names reach a few KB; longer is cut). */
#define LP_TRACE_FIELD_MAX 65536
/* Longest str(input_shapes) kept; beyond it shapes count as not recorded. */
#define LP_TRACE_SHAPES_MAX 8192

typedef struct fbuf {
    char *p;
    size_t n, cap;
    int set;
} fbuf;

static int fbuf_put(fbuf *b, const char *s, size_t n)
{
    if (n > LP_TRACE_FIELD_MAX)
        n = LP_TRACE_FIELD_MAX;
    if (n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < n + 1)
            c *= 2;
        char *q = realloc(b->p, c);
        if (!q)
            return 0;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p, s, n);
    b->p[n] = '\0';
    b->n = n;
    b->set = 1;
    return 1;
}

static int fbuf_cat(fbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->n + n + 1)
            c *= 2;
        char *q = realloc(b->p, c);
        if (!q)
            return 0;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 1;
}

static const char *fbuf_str(const fbuf *b)
{
    return b->set && b->p ? b->p : "";
}

/* Which event field the next value belongs to. */
typedef enum field {
    F_NONE = 0,
    F_NAME,
    F_CAT,
    F_PH,
    F_PID,
    F_TID,
    F_TS,
    F_DUR,
    F_ID,
    F_ARG_EXT,
    F_ARG_CORR,
    F_ARG_DIMS,
    F_ARG_BYTES_MEM,
    F_ARG_TOTAL_ALLOC,
    F_ARG_DEV_TYPE,
    F_ARG_BYTES,
    F_ARG_NAME,
    F_ARG_NELEMS,
    F_ARG_DTYPE,
    F_ARG_FLOPS,
    F_ARG_STACK,
    F_ARG_ADDR,
    F_ARG_DEV_ID,
    F_TOP_BASE,
    F_TOP_WITH_STACK,
    F_TOP_SCHEMA,
    F_DIST_RANK,
    F_DIST_WORLD,
    F_DIST_BACKEND,
    F_DEV_NAME,
} field;

struct lp_trace_json {
    const char *name;
    yajl_handle h;
    lp_trace_item_fn fn;
    void *ctx;
    lp_status cb_status; /* a callback's failure, reported after yajl stops */
    char why[160];       /* our own reason for stopping yajl */
    int depth;
    int events_level; /* level of the traceEvents array (0: not inside it) */
    int top_is_map;
    field pending;     /* the key just read */
    int top_key;       /* 1: distributedInfo, 2: deviceProperties, 3: traceEvents */
    int section;       /* the open top-level section (same codes) */
    int64_t dev_index; /* deviceProperties entry being read */
    /* the current event */
    int in_event, in_args, bad;
    fbuf name_b, cat_b, ph_b, pid_b, tid_b, argname_b, shapes_b, dtype_b, stack_b;
    int dims_level; /* level of the Input Dims array, 0 outside it */
    int dims_first; /* next element is its container's first */
    int dims_overflow;
    lp_trace_item it;
    lp_trace_top top;
    uint64_t skipped;
    uint64_t line, col; /* where the text fed so far ends (1-based), for messages */
};

static void item_reset(lp_trace_json *j)
{
    memset(&j->it, 0, sizeof j->it);
    j->it.external_id = j->it.correlation = j->it.flow_id = -1;
    j->it.mem_bytes = 0;
    j->it.mem_total_allocated = INT64_MIN; /* absent */
    j->it.mem_device_type = -1;
    j->it.bytes = -1;
    j->it.msg_nelems = -1;
    j->it.flops = -1;
    j->it.mem_addr = j->it.mem_device_id = -1;
    j->dtype_b.set = 0;
    j->stack_b.set = 0;
    j->name_b.set = j->cat_b.set = j->ph_b.set = j->pid_b.set = j->tid_b.set = j->argname_b.set = 0;
    j->shapes_b.set = 0;
    j->shapes_b.n = 0;
    j->dims_level = 0;
    j->dims_overflow = 0;
    j->bad = 0;
}

int lp_trace_us_text_to_ns(const char *s, size_t n, int64_t *ns)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    uint64_t mant = 0;
    int exp10 = 0, digits = 0, lost = 0; /* lost: nonzero digits beyond 19 */
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (mant <= (UINT64_MAX - 9) / 10)
            mant = mant * 10 + (uint64_t)(s[i] - '0');
        else
            exp10++, lost |= s[i] != '0';
    }
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            if (mant <= (UINT64_MAX - 9) / 10) {
                mant = mant * 10 + (uint64_t)(s[i] - '0');
                exp10--;
            }
        }
    }
    if (!digits)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0, e = 0;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            eneg = s[i++] == '-';
        if (i >= n || s[i] < '0' || s[i] > '9')
            return 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            if (e < 10000)
                e = e * 10 + (s[i] - '0');
        exp10 += eneg ? -e : e;
    }
    if (i != n)
        return 0;
    (void)lost;
    exp10 += 3; /* µs -> ns */
    if (mant == 0) {
        *ns = 0;
        return 1;
    }
    while (exp10 > 0) {
        if (mant > (uint64_t)INT64_MAX / 10)
            return 0;
        mant *= 10;
        exp10--;
    }
    while (exp10 < 0 && mant) {
        uint64_t q = mant / 10, r = mant % 10;
        mant = exp10 == -1 && r >= 5 ? q + 1 : q; /* round half away from zero at the last step */
        exp10++;
    }
    if (mant > (uint64_t)INT64_MAX)
        return 0;
    *ns = neg ? -(int64_t)mant : (int64_t)mant;
    return 1;
}

/* An integer id from number text ("123", "123.0"); 0 when not one. */
static int text_to_i64(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && s[i] == '-')
        neg = 1, i++;
    uint64_t v = 0;
    size_t d0 = i;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > ((uint64_t)INT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == d0)
        return 0;
    if (i < n && s[i] == '.') /* "10.0": some writers print ids as floats */
        for (i++; i < n && s[i] == '0'; i++)
            ;
    if (i != n)
        return 0;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

static int stop(lp_trace_json *j, const char *why)
{
    snprintf(j->why, sizeof j->why, "%s", why);
    return 0;
}

/* Appends a scalar's text inside Input Dims, Python-list style ("[2, 3]"). */
static int dims_scalar(lp_trace_json *j, const char *s, size_t n, int quote)
{
    if (j->dims_overflow)
        return 1;
    if (!j->dims_first && !fbuf_cat(&j->shapes_b, ", ", 2))
        return 0;
    j->dims_first = 0;
    if ((quote && !fbuf_cat(&j->shapes_b, "'", 1)) || !fbuf_cat(&j->shapes_b, s, n) ||
        (quote && !fbuf_cat(&j->shapes_b, "'", 1)))
        return 0;
    if (j->shapes_b.n > LP_TRACE_SHAPES_MAX)
        j->dims_overflow = 1;
    return 1;
}

static int on_scalar_text(lp_trace_json *j, const char *s, size_t n, int is_num, int is_str)
{
    if (j->events_level && j->depth == j->events_level) { /* an entry that is not an object */
        j->skipped++;
        return 1;
    }
    if (j->dims_level) {
        if (!dims_scalar(j, s, n, is_str))
            return stop(j, "out of memory");
        return 1;
    }
    field f = j->pending;
    j->pending = F_NONE;
    int64_t v;
    switch (f) {
    case F_NONE:
        return 1;
    case F_NAME:
    case F_CAT:
    case F_PH:
        if (!is_str) {
            j->bad = 1;
            return 1;
        }
        return fbuf_put(f == F_NAME  ? &j->name_b
                        : f == F_CAT ? &j->cat_b
                                     : &j->ph_b,
                        s, n)
                   ? 1
                   : stop(j, "out of memory");
    case F_PID:
    case F_TID:
        if (!is_str && !is_num)
            return 1;
        return fbuf_put(f == F_PID ? &j->pid_b : &j->tid_b, s, n) ? 1 : stop(j, "out of memory");
    case F_TS:
    case F_DUR: {
        int64_t ns;
        if (!is_num || !lp_trace_us_text_to_ns(s, n, &ns)) {
            j->it.bad_time = 1;
            return 1;
        }
        if (f == F_TS)
            j->it.ts_ns = ns, j->it.has_ts = 1;
        else
            j->it.dur_ns = ns, j->it.has_dur = 1;
        return 1;
    }
    case F_ID:
        if ((is_num || is_str) && text_to_i64(s, n, &v))
            j->it.flow_id = v;
        else if (is_str) /* "0x1f": hex ids of some writers */
            j->it.flow_id = (int64_t)strtoull(s, NULL, 16);
        return 1;
    case F_ARG_EXT:
        if ((is_num || is_str) && text_to_i64(s, n, &v))
            j->it.external_id = v;
        return 1;
    case F_ARG_CORR:
        if ((is_num || is_str) && text_to_i64(s, n, &v))
            j->it.correlation = v;
        return 1;
    case F_ARG_BYTES_MEM:
        if (is_num && text_to_i64(s, n, &v))
            j->it.mem_bytes = v;
        return 1;
    case F_ARG_TOTAL_ALLOC:
        if (is_num && text_to_i64(s, n, &v))
            j->it.mem_total_allocated = v;
        return 1;
    case F_ARG_DEV_TYPE:
        if (is_num && text_to_i64(s, n, &v))
            j->it.mem_device_type = v;
        return 1;
    case F_ARG_BYTES:
        if ((is_num || is_str) && text_to_i64(s, n, &v))
            j->it.bytes = v;
        return 1;
    case F_ARG_NAME:
        if (is_str && !fbuf_put(&j->argname_b, s, n))
            return stop(j, "out of memory");
        return 1;
    case F_ARG_NELEMS:
        if ((is_num || is_str) && text_to_i64(s, n, &v) && v >= 0)
            j->it.msg_nelems = v;
        return 1;
    case F_ARG_FLOPS:
        if (is_num) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)(n < 63 ? n : 63), s);
            double d = strtod(buf, NULL);
            if (d >= 0 && d < 1e30)
                j->it.flops = d;
        }
        return 1;
    case F_ARG_DTYPE:
        if (is_str && !fbuf_put(&j->dtype_b, s, n))
            return stop(j, "out of memory");
        return 1;
    case F_ARG_STACK:
        if (is_str && !fbuf_put(&j->stack_b, s, n))
            return stop(j, "out of memory");
        return 1;
    case F_ARG_ADDR:
    case F_ARG_DEV_ID:
        if ((is_num || is_str) && text_to_i64(s, n, &v))
            *(f == F_ARG_ADDR ? &j->it.mem_addr : &j->it.mem_device_id) = v;
        return 1;
    case F_ARG_DIMS:
        return 1; /* not a list: shapes not recorded */
    case F_TOP_BASE:
        if (is_num && text_to_i64(s, n, &v))
            j->top.base_time_ns = v, j->top.has_base_time = 1;
        return 1;
    case F_TOP_WITH_STACK:
        j->top.with_stack = (is_num && text_to_i64(s, n, &v) && v != 0) || (n == 4 && !memcmp(s, "True", 4));
        return 1;
    case F_TOP_SCHEMA:
        if (is_num && text_to_i64(s, n, &v))
            j->top.schema_version = v;
        return 1;
    case F_DIST_RANK:
    case F_DIST_WORLD:
        if ((is_num || is_str) && text_to_i64(s, n, &v))
            *(f == F_DIST_RANK ? &j->top.rank : &j->top.world_size) = v;
        return 1;
    case F_DIST_BACKEND:
        if (is_str)
            snprintf(j->top.backend, sizeof j->top.backend, "%.*s", (int)(n < 31 ? n : 31), s);
        return 1;
    case F_DEV_NAME:
        if (is_str && j->dev_index == 0)
            snprintf(j->top.device_name, sizeof j->top.device_name, "%.*s", (int)(n < 127 ? n : 127), s);
        return 1;
    }
    return 1;
}

static int cb_null(void *c)
{
    return on_scalar_text(c, "None", 4, 0, 0);
}
static int cb_bool(void *c, int b)
{
    return on_scalar_text(c, b ? "True" : "False", b ? 4 : 5, 0, 0);
}
static int cb_number(void *c, const char *s, size_t n)
{
    return on_scalar_text(c, s, n, 1, 0);
}
static int cb_string(void *c, const unsigned char *s, size_t n)
{
    return on_scalar_text(c, (const char *)s, n, 0, 1);
}

static field event_key(const char *k, size_t n, int in_args)
{
#define K(s) (n == sizeof(s) - 1 && !memcmp(k, s, n))
    if (!in_args) {
        if (K("name"))
            return F_NAME;
        if (K("cat"))
            return F_CAT;
        if (K("ph"))
            return F_PH;
        if (K("pid"))
            return F_PID;
        if (K("tid"))
            return F_TID;
        if (K("ts"))
            return F_TS;
        if (K("dur"))
            return F_DUR;
        if (K("id"))
            return F_ID;
        return F_NONE;
    }
    if (K("External id") || K("external id"))
        return F_ARG_EXT;
    if (K("correlation"))
        return F_ARG_CORR;
    if (K("Input Dims") || K("Input dims"))
        return F_ARG_DIMS;
    if (K("Bytes"))
        return F_ARG_BYTES_MEM;
    if (K("Total Allocated"))
        return F_ARG_TOTAL_ALLOC;
    if (K("Device Type"))
        return F_ARG_DEV_TYPE;
    if (K("bytes"))
        return F_ARG_BYTES;
    if (K("name"))
        return F_ARG_NAME;
    if (K("In msg nelems"))
        return F_ARG_NELEMS;
    if (K("dtype"))
        return F_ARG_DTYPE;
    if (K("FLOPs") || K("flops"))
        return F_ARG_FLOPS;
    if (K("Call stack"))
        return F_ARG_STACK;
    if (K("Addr"))
        return F_ARG_ADDR;
    if (K("Device Id"))
        return F_ARG_DEV_ID;
    return F_NONE;
#undef K
}

static int cb_map_key(void *c, const unsigned char *key, size_t n)
{
    lp_trace_json *j = c;
    const char *k = (const char *)key;
    j->pending = F_NONE;
    j->top_key = 0;
    if (j->dims_level)
        return 1;
    if (j->in_event) {
        int lvl = j->in_args ? j->events_level + 2 : j->events_level + 1;
        if (j->depth == lvl)
            j->pending = event_key(k, n, j->in_args);
        if (!j->in_args && j->depth == j->events_level + 1 && n == 4 && !memcmp(k, "args", 4))
            j->top_key = 4;
        return 1;
    }
#define K(s) (n == sizeof(s) - 1 && !memcmp(k, s, n))
    if (j->depth == 1 && j->top_is_map) {
        if (K("traceEvents"))
            j->top_key = 3;
        else if (K("distributedInfo"))
            j->top_key = 1;
        else if (K("deviceProperties"))
            j->top_key = 2;
        else if (K("baseTimeNanoseconds"))
            j->pending = F_TOP_BASE;
        else if (K("schemaVersion"))
            j->pending = F_TOP_SCHEMA;
        else if (K("with_stack"))
            j->pending = F_TOP_WITH_STACK;
    } else if (j->depth == 2 && j->section == 1) {
        if (K("rank"))
            j->pending = F_DIST_RANK;
        else if (K("world_size"))
            j->pending = F_DIST_WORLD;
        else if (K("backend"))
            j->pending = F_DIST_BACKEND;
    } else if (j->depth == 3 && j->section == 2) {
        if (K("name"))
            j->pending = F_DEV_NAME;
    }
#undef K
    return 1;
}

static int open_container(lp_trace_json *j, int is_array)
{
    if (++j->depth > LP_TRACE_MAX_DEPTH)
        return stop(j, "nesting deeper than 256 levels");
    if (j->dims_level) {
        if (j->dims_overflow)
            return 1;
        if (!j->dims_first && !fbuf_cat(&j->shapes_b, ", ", 2))
            return stop(j, "out of memory");
        if (!fbuf_cat(&j->shapes_b, is_array ? "[" : "{", 1))
            return stop(j, "out of memory");
        j->dims_first = 1;
        return 1;
    }
    if (j->depth == 1) {
        j->top_is_map = !is_array;
        if (is_array) {
            j->top.is_array = 1;
            j->top.has_events = 1;
            j->events_level = 1;
        }
        return 1;
    }
    if (j->depth == 2 && j->top_is_map) {
        j->section = j->top_key;
        j->top_key = 0;
        if (j->section == 3) {
            if (!is_array)
                return stop(j, "\"traceEvents\" is not an array");
            j->top.has_events = 1;
            j->events_level = 2;
        }
        return 1;
    }
    if (j->section == 2 && j->depth == 3)
        j->top.device_count++;
    if (j->events_level && j->depth == j->events_level + 1) {
        item_reset(j);
        j->pending = F_NONE;
        if (is_array) { /* an entry that is not an object: skipped as a whole */
            j->bad = 1;
        }
        j->in_event = 1;
        return 1;
    }
    if (j->in_event && j->depth == j->events_level + 2 && j->top_key == 4 && !is_array) {
        j->in_args = 1;
        j->top_key = 0;
        return 1;
    }
    if (j->in_event && j->in_args && j->pending == F_ARG_DIMS && is_array) {
        j->pending = F_NONE;
        j->dims_level = j->depth;
        j->shapes_b.n = 0;
        j->shapes_b.set = 0;
        if (!fbuf_put(&j->shapes_b, "[", 1))
            return stop(j, "out of memory");
        j->dims_first = 1;
        return 1;
    }
    j->pending = F_NONE;
    return 1;
}

static int emit(lp_trace_json *j)
{
    lp_trace_item *it = &j->it;
    it->name = fbuf_str(&j->name_b);
    it->cat = fbuf_str(&j->cat_b);
    it->ph = fbuf_str(&j->ph_b);
    it->pid = fbuf_str(&j->pid_b);
    it->tid = fbuf_str(&j->tid_b);
    it->meta_name = j->argname_b.set ? j->argname_b.p : NULL;
    it->dtype = fbuf_str(&j->dtype_b);
    it->shapes = j->shapes_b.set && !j->dims_overflow ? j->shapes_b.p : NULL;
    it->call_stack = j->stack_b.set ? j->stack_b.p : NULL;
    if (j->bad || !j->ph_b.set) {
        j->skipped++;
        return 1;
    }
    lp_status st = j->fn(j->ctx, it);
    if (st != LP_OK) {
        j->cb_status = st;
        return 0;
    }
    return 1;
}

static int close_container(lp_trace_json *j, int is_array)
{
    int lvl = j->depth--;
    j->pending = F_NONE;
    if (j->dims_level) {
        if (!j->dims_overflow && !fbuf_cat(&j->shapes_b, is_array ? "]" : "}", 1))
            return stop(j, "out of memory");
        j->dims_first = 0;
        if (lvl == j->dims_level)
            j->dims_level = 0;
        return 1;
    }
    if (j->in_event && j->in_args && lvl == j->events_level + 2) {
        j->in_args = 0;
        return 1;
    }
    if (j->in_event && lvl == j->events_level + 1) {
        j->in_event = 0;
        j->in_args = 0;
        return emit(j);
    }
    if (j->events_level && lvl == j->events_level)
        j->events_level = 0;
    if (j->section == 2 && lvl == 3)
        j->dev_index++;
    if (lvl == 2)
        j->section = 0;
    return 1;
}

static int cb_start_map(void *c)
{
    return open_container(c, 0);
}
static int cb_end_map(void *c)
{
    return close_container(c, 0);
}
static int cb_start_array(void *c)
{
    return open_container(c, 1);
}
static int cb_end_array(void *c)
{
    return close_container(c, 1);
}

static const yajl_callbacks callbacks = {
    cb_null,      cb_bool,    NULL,       NULL,           cb_number,    cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

lp_status lp_trace_json_new(const char *name, lp_trace_item_fn fn, void *ctx, lp_trace_json **out)
{
    *out = NULL;
    lp_trace_json *j = calloc(1, sizeof *j);
    if (!j)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    j->name = name;
    j->fn = fn;
    j->ctx = ctx;
    j->top.rank = j->top.world_size = -1;
    j->line = j->col = 1;
    j->h = yajl_alloc(&callbacks, NULL, j);
    if (!j->h) {
        free(j);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    }
    /* Traces are machine-written; a stray invalid UTF-8 byte in a kernel name should not
     * cost the whole file. */
    yajl_config(j->h, yajl_dont_validate_strings, 1);
    *out = j;
    return LP_OK;
}

/* Advances the line/column count over n bytes of text. */
static void count_lines(lp_trace_json *j, const char *data, size_t n)
{
    const char *p = data, *end = data + n, *nl;
    while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        j->line++;
        j->col = 1;
        p = nl + 1;
    }
    j->col += (uint64_t)(end - p);
}

static lp_status fail(lp_trace_json *j, const char *data, size_t n)
{
    if (j->cb_status != LP_OK)
        return j->cb_status; /* its message already names the file */
    if (j->why[0])
        return lp_err(LP_STATUS_FORMAT, "%s: not a usable trace: %s", j->name, j->why);
    size_t at = data ? yajl_get_bytes_consumed(j->h) : 0;
    if (at > n)
        at = n;
    count_lines(j, data ? data : "", at);
    return lp_err(LP_STATUS_FORMAT, "%s: not valid JSON (at line %llu, column %llu)", j->name,
                  (unsigned long long)j->line, (unsigned long long)j->col);
}

lp_status lp_trace_json_feed(lp_trace_json *j, const char *data, size_t n)
{
    yajl_status ys = yajl_parse(j->h, (const unsigned char *)data, n);
    if (ys != yajl_status_ok)
        return fail(j, data, n);
    count_lines(j, data, n);
    return LP_OK;
}

lp_status lp_trace_json_finish(lp_trace_json *j)
{
    yajl_status ys = yajl_complete_parse(j->h);
    if (ys != yajl_status_ok) {
        if (j->cb_status != LP_OK || j->why[0])
            return fail(j, NULL, 0);
        return lp_err(LP_STATUS_FORMAT,
                      "%s: not valid JSON (unexpected end of data at line %llu (truncated file?))", j->name,
                      (unsigned long long)j->line);
    }
    if (!j->top.has_events)
        return lp_err(LP_STATUS_FORMAT, "%s: not a Kineto trace: no \"traceEvents\" array", j->name);
    return LP_OK;
}

const lp_trace_top *lp_trace_json_top(const lp_trace_json *j)
{
    return &j->top;
}
uint64_t lp_trace_json_skipped(const lp_trace_json *j)
{
    return j->skipped;
}

void lp_trace_json_free(lp_trace_json *j)
{
    if (!j)
        return;
    yajl_free(j->h);
    fbuf *b[] = {&j->name_b, &j->cat_b,     &j->ph_b,     &j->pid_b,
                 &j->tid_b,  &j->argname_b, &j->shapes_b, &j->dtype_b, &j->stack_b};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        free(b[i]->p);
    free(j);
}
