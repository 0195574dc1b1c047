/* Parses Kineto / torch.profiler Chrome-trace JSON into the profiler's neutral event list
 * (lp_prof_events), whoever wrote it: loupe's exporter or PyTorch's (old traces with
 * absolute epoch-µs ts, new ones with relative ts + baseTimeNanoseconds; ts/dur as ints
 * or floats). Lenient with single events (odd items are counted and skipped, as trace
 * viewers do), strict with the container (not JSON, or no traceEvents array, is an
 * error naming the file). */
#define _GNU_SOURCE /* memmem */
#include "loupe/report.h"
#include "loupe/io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Largest |µs| whose ns value fits in int64 (~292 years). */
#define LP_TRACE_MAX_US 9.2e15
/* Bounds on one event's recorded shapes; beyond them shapes count as not recorded. */
#define LP_TRACE_MAX_INPUTS 4096
#define LP_TRACE_MAX_DIMS 65536

/* µs (as written, possibly fractional) -> ns without losing the integer part of large
 * absolute stamps: the integer µs of an epoch stamp is exact in a double, its product
 * with 1000 would not be. Returns 0 when the value is not a usable time. */
static int us_to_ns(double us, int64_t *ns)
{
    if (!isfinite(us) || fabs(us) >= LP_TRACE_MAX_US)
        return 0;
    double ip = floor(us);
    *ns = (int64_t)ip * 1000 + (int64_t)llround((us - ip) * 1000.0);
    return 1;
}

/* A JSON number that fits int64 exactly enough for ids and byte counts. */
static int get_i64(const cJSON *obj, const char *key, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 9.2e18)
        return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

/* A non-negative finite number at key, else dflt. */
static double get_nonneg(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 ? v->valuedouble : dflt;
}

/* loupe's [memory] "Category": a category name ("activation") or its number; -1 if
 * absent or unknown (PyTorch's traces have none). */
static int32_t read_category(const cJSON *v)
{
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < LP_MEM_CATEGORY__COUNT)
        return (int32_t)v->valuedouble;
    if (cJSON_IsString(v) && v->valuestring)
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
            if (!strcmp(v->valuestring, lp_mem_category_name((lp_mem_category)c)))
                return c;
    return -1;
}

/* A pid/tid: a number, or a numeric string (tb_plugin does int(tid)); anything else
 * ("Spans", absent) is -1, the event list's "no numeric id". */
static int64_t read_id(const cJSON *v)
{
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && fabs(v->valuedouble) < 9.2e18)
        return (int64_t)v->valuedouble;
    if (cJSON_IsString(v) && v->valuestring && v->valuestring[0]) {
        char *end = NULL;
        long long n = strtoll(v->valuestring, &end, 10);
        if (end && *end == '\0')
            return n;
    }
    return -1;
}

/* Growable scratch for one event's shapes, reused across events. */
typedef struct shape_buf {
    int32_t *ranks;
    int64_t *dims;
    const char **types;
    size_t cap_ranks, cap_types, cap_dims;
} shape_buf;

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

/* Fills e's shapes from args "Input Dims" (a list with one list of ints per input; a
 * non-tensor input is []; an entry that is not a flat list of numbers — TensorList
 * inputs — is kept as rank 0) and "Input type". Returns 0 only when out of memory. */
static int read_shapes(const cJSON *args, lp_prof_event *e, shape_buf *sb)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(args, "Input Dims");
    if (!d)
        d = cJSON_GetObjectItemCaseSensitive(args, "Input dims"); /* older traces */
    if (!cJSON_IsArray(d))
        return 1;
    int n_in = cJSON_GetArraySize(d);
    if (n_in < 0 || n_in > LP_TRACE_MAX_INPUTS)
        return 1;
    if (!reserve((void **)&sb->ranks, &sb->cap_ranks, (size_t)n_in + 1, sizeof *sb->ranks) ||
        !reserve((void **)&sb->types, &sb->cap_types, (size_t)n_in + 1, sizeof *sb->types))
        return 0;
    size_t nd = 0;
    int i = 0;
    for (const cJSON *in = d->child; in; in = in->next, i++) {
        int32_t rank = 0;
        int flat = cJSON_IsArray(in);
        for (const cJSON *x = flat ? in->child : NULL; x; x = x->next)
            if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || fabs(x->valuedouble) > 9.2e18)
                flat = 0;
        if (flat) {
            for (const cJSON *x = in->child; x; x = x->next) {
                if (nd >= LP_TRACE_MAX_DIMS)
                    return 1; /* absurd: leave shapes unrecorded */
                if (!reserve((void **)&sb->dims, &sb->cap_dims, nd + 1, sizeof *sb->dims))
                    return 0;
                sb->dims[nd++] = (int64_t)x->valuedouble;
                rank++;
            }
        }
        sb->ranks[i] = rank;
    }
    e->n_inputs = n_in;
    e->input_ranks = sb->ranks;
    e->input_dims = sb->dims;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(args, "Input type");
    if (cJSON_IsArray(t) && cJSON_GetArraySize(t) == n_in) {
        i = 0;
        for (const cJSON *x = t->child; x; x = x->next, i++)
            sb->types[i] = cJSON_IsString(x) && x->valuestring ? x->valuestring : "";
        e->input_types = sb->types;
    }
    return 1;
}

/* Describes where cJSON stopped as "line L, column C". */
static void error_place(const char *text, const char *at, size_t len, char *out, size_t cap)
{
    size_t off = at && at >= text && (size_t)(at - text) <= len ? (size_t)(at - text) : len;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    /* cJSON reports running out of input as the last byte's position. */
    if (off + 1 >= len)
        snprintf(out, cap, "unexpected end of data at line %zu (truncated file?)", line);
    else
        snprintf(out, cap, "at line %zu, column %zu", line, col);
}

/* A 19-digit epoch-ns integer does not survive cJSON's double (its ulp is 256 ns), so
 * re-read the digits after the key in the raw text. Accepts the first occurrence whose
 * value is within 4096 of cJSON's (so a key-like string elsewhere cannot fool it);
 * otherwise keeps approx. */
static int64_t exact_int_at_key(const char *text, size_t len, const char *key, int64_t approx)
{
    size_t klen = strlen(key);
    const char *p = text, *end = text + len;
    while (p < end && (p = memmem(p, (size_t)(end - p), key, klen)) != NULL) {
        const char *q = p + klen;
        p += klen;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q >= end || *q++ != ':')
            continue;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        int neg = q < end && *q == '-';
        q += neg;
        uint64_t v = 0;
        int digits = 0;
        while (q < end && *q >= '0' && *q <= '9' && v <= (uint64_t)INT64_MAX / 10) {
            v = v * 10 + (uint64_t)(*q++ - '0');
            digits++;
        }
        if (!digits || v > (uint64_t)INT64_MAX ||
            (q < end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E')))
            continue;
        int64_t x = neg ? -(int64_t)v : (int64_t)v;
        if ((x > approx ? x - approx : approx - x) <= 4096)
            return x;
    }
    return approx;
}

static int truthy(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return (cJSON_IsNumber(v) && v->valuedouble != 0) || cJSON_IsTrue(v);
}

/* Thread / process names from "M" events, so a re-export keeps them. */
static lp_status read_metadata(const cJSON *e, const char *ph_name, lp_prof_events *ev)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(args, "name");
    if (!cJSON_IsString(nm) || !nm->valuestring)
        return LP_OK;
    int64_t pid = read_id(cJSON_GetObjectItemCaseSensitive(e, "pid"));
    if (!strcmp(ph_name, "thread_name"))
        return lp_prof_events_set_thread_name(ev, pid, read_id(cJSON_GetObjectItemCaseSensitive(e, "tid")),
                                              nm->valuestring);
    if (!strcmp(ph_name, "process_name"))
        return lp_prof_events_set_process_name(ev, pid, nm->valuestring);
    return LP_OK;
}

/* One traceEvents item -> at most one event in ev. Returns LP_OK also for items it
 * skips (counted in info); an error only for out-of-memory. */
static lp_status read_item(const cJSON *e, lp_prof_events *ev, lp_trace_info *info, shape_buf *sb, int *pid_set)
{
    lp_prof_events_info *pi = lp_prof_events_info_of(ev);
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsObject(e) || !cJSON_IsString(ph) || !ph->valuestring || !cJSON_IsString(nm) ||
        !nm->valuestring) {
        info->n_skipped++;
        return LP_OK;
    }
    const char *p = ph->valuestring, *name = nm->valuestring;
    int is_x = !strcmp(p, "X");
    int is_mem = !strcmp(p, "i") && (!strcmp(name, "[memory]") || !strcmp(name, "[OutOfMemory]"));
    if (!strcmp(p, "M"))
        return read_metadata(e, name, ev);
    if (!strcmp(p, "B") || !strcmp(p, "E")) {
        info->n_unsupported++; /* begin/end pairs: Kineto never writes them */
        return LP_OK;
    }
    if (!is_x && !is_mem)
        return LP_OK; /* flows, other instants, counters: not part of op statistics */

    lp_prof_event x;
    lp_prof_event_init(&x);
    x.name = name;
    x.ph = is_x ? 'X' : 'i';
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
    x.cat = cJSON_IsString(cat) && cat->valuestring ? cat->valuestring : (is_mem ? "cpu_instant_event" : "");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
    const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
    if (!cJSON_IsNumber(ts) || !us_to_ns(ts->valuedouble, &x.ts_ns)) {
        info->n_skipped++;
        return LP_OK;
    }
    x.dur_ns = 0;
    if (is_x && (!cJSON_IsNumber(dur) || !us_to_ns(dur->valuedouble, &x.dur_ns) || x.dur_ns < 0)) {
        info->n_skipped++;
        return LP_OK;
    }
    if (is_x && !strcasecmp(x.cat, "Trace")) {
        /* The profiler's own whole-window span: kept as the window, not as an op. */
        pi->window_start_ns = x.ts_ns;
        pi->window_end_ns = x.ts_ns + x.dur_ns;
        return LP_OK;
    }
    x.pid = read_id(cJSON_GetObjectItemCaseSensitive(e, "pid"));
    x.tid = read_id(cJSON_GetObjectItemCaseSensitive(e, "tid"));
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (cJSON_IsObject(args)) {
        if (!get_i64(args, "External id", &x.external_id))
            get_i64(args, "external id", &x.external_id);
        get_i64(args, "correlation", &x.correlation);
        if (is_x && !read_shapes(args, &x, sb))
            return lp_err(LP_STATUS_NO_MEMORY, "out of memory reading input shapes");
        /* loupe writes "FLOPs" / "Bytes Moved"; other producers use lowercase "flops". */
        x.flops = get_nonneg(args, "FLOPs", get_nonneg(args, "flops", -1));
        x.bytes = get_nonneg(args, "Bytes Moved", -1);
        if (get_i64(args, "cycles", &x.hw_cycles)) {
            get_i64(args, "instructions", &x.hw_instructions);
            get_i64(args, "cache misses", &x.hw_cache_misses);
            pi->hw_counters = 1;
        }
        if (is_mem) {
            int64_t v;
            if (get_i64(args, "Bytes", &v))
                x.mem_bytes = v;
            if (get_i64(args, "Total Allocated", &v))
                x.mem_total_allocated = v;
            if (get_i64(args, "Total Reserved", &v))
                x.mem_total_reserved = v;
            if (get_i64(args, "Addr", &v))
                x.mem_addr = (uint64_t)v;
            if (get_i64(args, "Device Type", &v) && v >= INT32_MIN && v <= INT32_MAX)
                x.mem_device_type = (int32_t)v;
            if (get_i64(args, "Device Id", &v) && v >= INT32_MIN && v <= INT32_MAX)
                x.mem_device_id = (int32_t)v;
            x.mem_category = read_category(cJSON_GetObjectItemCaseSensitive(args, "Category"));
        }
    }
    if (is_x && !*pid_set && (!strcmp(x.cat, "cpu_op") || !strcmp(x.cat, "user_annotation"))) {
        pi->pid = x.pid;
        *pid_set = 1;
    }
    if (x.n_inputs >= 0)
        pi->record_shapes = 1;
    if (x.flops >= 0)
        pi->with_flops = 1;
    if (is_mem)
        pi->profile_memory = 1;
    lp_status st = lp_prof_events_add(ev, &x);
    if (st == LP_STATUS_INVALID_ARG) { /* inconsistent shapes etc.: skip like any odd item */
        info->n_skipped++;
        return LP_OK;
    }
    if (st != LP_OK)
        return st;
    if (is_x)
        info->n_complete++;
    else
        info->n_instants++;
    if (x.ts_ns < info->min_ts_ns || info->n_complete + info->n_instants == 1)
        info->min_ts_ns = x.ts_ns;
    return LP_OK;
}

/* The parse; when owned is the text's own buffer it is freed as soon as the JSON tree
 * exists, and each event's subtree is deleted once converted, so a huge trace's peak
 * memory is the tree plus the text, never the tree plus the text plus the event list. */
static lp_status parse_impl(const char *name, const char *text, size_t len, char *owned, lp_prof_events *ev,
                            lp_trace_info *info)
{
    memset(info, 0, sizeof *info);
    const char *end = NULL;
    bool oom;
    cJSON *root = lp_json_parse(text, len, &end, &oom);
    if (!root && oom) {
        free(owned);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing the JSON", name);
    }
    if (!root) {
        char where[96];
        error_place(text, end, len, where, sizeof where);
        free(owned);
        return lp_err(LP_STATUS_FORMAT, "%s: not valid JSON (%s)", name, where);
    }
    lp_status st = LP_OK;
    shape_buf sb = {0};
    cJSON *events = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "traceEvents") : NULL;
    if (!cJSON_IsObject(root)) {
        /* The Chrome format also allows a bare array of events; Kineto never writes one,
         * and the tools we target (HTA, TensorBoard) require the object form. */
        st = lp_err(LP_STATUS_FORMAT, "%s: not a Kineto trace: top level is not an object with \"traceEvents\"",
                    name);
        goto done;
    }
    if (!events) {
        st = lp_err(LP_STATUS_FORMAT, "%s: not a Kineto trace: no \"traceEvents\" array", name);
        goto done;
    }
    if (!cJSON_IsArray(events)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: \"traceEvents\" is not an array", name);
        goto done;
    }
    lp_prof_events_info *pi = lp_prof_events_info_of(ev);
    int64_t base = 0;
    if (get_i64(root, "baseTimeNanoseconds", &base)) {
        info->has_base_time = 1;
        pi->base_time_ns = exact_int_at_key(text, len, "\"baseTimeNanoseconds\"", base);
    } else {
        pi->base_time_ns = 0; /* old traces: ts are already Unix-epoch µs */
    }
    int64_t sv = 0;
    info->schema_version = get_i64(root, "schemaVersion", &sv) && sv >= 0 && sv < 1000000 ? (int)sv : 0;
    pi->record_shapes = truthy(root, "record_shapes");
    pi->profile_memory = truthy(root, "profile_memory");
    pi->with_flops = truthy(root, "with_flops");
    pi->with_stack = truthy(root, "with_stack");
    const cJSON *hw = cJSON_GetObjectItemCaseSensitive(root, "hw_counters");
    if (cJSON_IsString(hw) && hw->valuestring && !strcmp(hw->valuestring, "unavailable"))
        pi->hw_counters = -1;
    free(owned); /* everything below reads the tree only */
    owned = NULL;

    int pid_set = 0;
    for (cJSON *e; (e = events->child) != NULL;) {
        cJSON_DetachItemViaPointer(events, e); /* first child: O(1) */
        info->n_items++;
        st = read_item(e, ev, info, &sb, &pid_set);
        cJSON_Delete(e);
        if (st != LP_OK) {
            lp_err_wrap(st, "%s", name);
            goto done;
        }
    }
    /* Old traces stamp absolute Unix-epoch µs (after 2001 is > 1e15 µs); new ones are
     * relative to baseTimeNanoseconds. */
    info->absolute_ts = !info->has_base_time && info->min_ts_ns > 1000000000000000000ll;
done:
    free(owned);
    free(sb.ranks);
    free(sb.dims);
    free((void *)sb.types);
    cJSON_Delete(root);
    return st;
}

lp_status lp_trace_parse(const char *name, const char *text, size_t len, lp_prof_events *ev, lp_trace_info *info)
{
    return parse_impl(name, text, len, NULL, ev, info);
}

lp_status lp_trace_load(const char *path, lp_prof_events **out, lp_trace_info *info)
{
    return lp_trace_load_max(path, 0, out, info);
}

lp_status lp_trace_load_max(const char *path, uint64_t max_bytes, lp_prof_events **out, lp_trace_info *info)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    lp_status st = lp_trace_read_text_max(path, max_bytes, &text, &len);
    if (st != LP_OK)
        return st;
    lp_prof_events *ev = NULL;
    if ((st = lp_prof_events_new(&ev)) != LP_OK) {
        free(text);
        return st;
    }
    if ((st = parse_impl(path, text, len, text, ev, info)) != LP_OK) { /* frees text */
        lp_prof_events_free(ev);
        return st;
    }
    *out = ev;
    return LP_OK;
}
