/* Loading a dataset: format choice, column resolution, row validation, label ids (given
 * map, integers, or sorted strings), bad-row skipping; plus train/validation splits and
 * per-epoch orders from a seeded generator. */
#include "data_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Integer labels above this are refused: a stray "1000000000" must not make a map with
 * a billion classes. */
#define LP_DATA_MAX_CLASSES 100000

static const char *const default_text[] = {"text", "sentence", "sentence1"};
static const char *const default_label[] = {"label", "labels", "label_id"};

void lp_dataset_options_init(lp_dataset_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->format = LP_DATA_FORMAT_AUTO;
}

void lp_dataset_free(lp_dataset *ds)
{
    if (!ds)
        return;
    for (int64_t i = 0; i < ds->n; i++) {
        if (ds->text)
            free(ds->text[i]);
        if (ds->text_pair)
            free(ds->text_pair[i]);
    }
    free(ds->text);
    free(ds->text_pair);
    free(ds->labels);
    free(ds->lines);
    lp_label_map_free(&ds->label_map);
    free(ds->source);
    for (int i = 0; i < ds->n_reasons; i++)
        free(ds->skip_reasons[i]);
    memset(ds, 0, sizeof *ds);
}

/* ---- the row sink ---------------------------------------------------------------- */

lp_status lp_sink_bad(lp_row_sink *s, lp_status st, int64_t line, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!s->opt->skip_bad_rows)
        return lp_err(st, "%s:%lld: %s (use --skip-bad-rows to drop bad rows)", s->name, (long long)line, msg);
    lp_dataset *ds = s->ds;
    ds->n_skipped++;
    if (ds->n_reasons < LP_DATA_MAX_REASONS) {
        size_t n = strlen(s->name) + strlen(msg) + 32;
        char *r = lp_malloc(n);
        if (!r)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", s->name);
        snprintf(r, n, "%s:%lld: %s", s->name, (long long)line, msg);
        ds->skip_reasons[ds->n_reasons++] = r;
    }
    return LP_OK;
}

static const char *pick(const char *want, const char *const *defaults, int n_defaults, const char *const *names,
                        int n)
{
    for (int d = 0; d < (want ? 1 : n_defaults); d++) {
        const char *cand = want ? want : defaults[d];
        for (int k = 0; k < n; k++)
            if (strcmp(names[k], cand) == 0)
                return cand;
    }
    return NULL;
}

static lp_status missing_column(lp_row_sink *s, const char *what, const char *want, const char *const *defaults,
                                int n_defaults, const char *const *names, int n)
{
    char have[400] = "", tried[120] = "";
    size_t h = 0;
    for (int k = 0; k < n && h + 4 < sizeof have; k++)
        h += (size_t)snprintf(have + h, sizeof have - h, "%s'%s'", k ? ", " : "", names[k]);
    if (h >= sizeof have)
        snprintf(have + sizeof have - 5, 5, "...");
    if (want) {
        snprintf(tried, sizeof tried, "'%s'", want);
    } else {
        size_t t = 0;
        for (int d = 0; d < n_defaults && t < sizeof tried; d++)
            t += (size_t)snprintf(tried + t, sizeof tried - t, "%s'%s'", d ? " or " : "", defaults[d]);
    }
    return lp_err(LP_STATUS_NOT_FOUND, "%s: no %s column %s (columns: %s); name it with --%s-column", s->name, what,
                  tried, n ? have : "none", strcmp(what, "text pair") == 0 ? "text-pair" : what);
}

lp_status lp_sink_resolve(lp_row_sink *s, const char *const *names, int n)
{
    const lp_dataset_options *o = s->opt;
    const char *t = pick(o->text_column, default_text, 3, names, n);
    if (!t)
        return missing_column(s, "text", o->text_column, default_text, 3, names, n);
    const char *l = o->text_only ? NULL : pick(o->label_column, default_label, 3, names, n);
    if (!l && !o->text_only)
        return missing_column(s, "label", o->label_column, default_label, 3, names, n);
    const char *p = NULL;
    if (o->text_pair_column) {
        p = pick(o->text_pair_column, NULL, 0, names, n);
        if (!p)
            return missing_column(s, "text pair", o->text_pair_column, NULL, 0, names, n);
    } else if (!o->text_column && strcmp(t, "sentence1") == 0) {
        static const char *const s2[] = {"sentence2"};
        p = pick(NULL, s2, 1, names, n);
    }
    s->text_key = t;
    s->pair_key = p;
    s->label_key = l;
    s->resolved = 1;
    return LP_OK;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = lp_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Grows the row arrays to hold one more row. */
static int sink_reserve(lp_row_sink *s)
{
    lp_dataset *ds = s->ds;
    if ((size_t)ds->n < s->cap)
        return 1;
    size_t cap = s->cap ? s->cap * 2 : 256;
    char **t = lp_realloc(ds->text, cap * sizeof *t);
    if (!t)
        return 0;
    ds->text = t;
    if (s->pair_key) {
        char **p = lp_realloc(ds->text_pair, cap * sizeof *p);
        if (!p)
            return 0;
        ds->text_pair = p;
    }
    int64_t *ln = lp_realloc(ds->lines, cap * sizeof *ln);
    if (!ln)
        return 0;
    ds->lines = ln;
    char **lr = lp_realloc(s->label_raw, cap * sizeof *lr);
    if (!lr)
        return 0;
    s->label_raw = lr;
    s->cap = cap;
    return 1;
}

static lp_status check_field(lp_row_sink *s, int64_t line, const char *col, const char *v, size_t n)
{
    size_t at;
    if (memchr(v, '\0', n))
        return lp_sink_bad(s, LP_STATUS_FORMAT, line, "NUL byte in column '%s'", col);
    if (!lp_utf8_valid(v, n, &at))
        return lp_sink_bad(s, LP_STATUS_FORMAT, line, "invalid UTF-8 in column '%s' at byte %zu", col, at);
    return LP_OK;
}

lp_status lp_sink_row(lp_row_sink *s, int64_t line, const char *text, size_t text_len, const char *pair,
                      size_t pair_len, const char *label, size_t label_len)
{
    lp_dataset *ds = s->ds;
    int64_t skipped = ds->n_skipped;
    lp_status st = check_field(s, line, s->text_key, text, text_len);
    if (st == LP_OK && ds->n_skipped == skipped && pair)
        st = check_field(s, line, s->pair_key, pair, pair_len);
    if (st == LP_OK && ds->n_skipped == skipped && label)
        st = check_field(s, line, s->label_key, label, label_len);
    if (st != LP_OK || ds->n_skipped != skipped)
        return st;
    if (is_blank(text, text_len))
        return lp_sink_bad(s, LP_STATUS_FORMAT, line, "empty text in column '%s'", s->text_key);
    if (pair && is_blank(pair, pair_len))
        return lp_sink_bad(s, LP_STATUS_FORMAT, line, "empty text in column '%s'", s->pair_key);
    /* labels are compared trimmed: "1 " and " positive" are the labels 1 and positive */
    while (label && label_len && isspace((unsigned char)label[0]))
        label++, label_len--;
    while (label && label_len && isspace((unsigned char)label[label_len - 1]))
        label_len--;
    if (label && !label_len)
        return lp_sink_bad(s, LP_STATUS_FORMAT, line, "empty label in column '%s'", s->label_key);
    if (!sink_reserve(s))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", s->name);
    int64_t i = ds->n;
    char *t = dup_n(text, text_len), *p = pair ? dup_n(pair, pair_len) : NULL;
    char *l = label ? dup_n(label, label_len) : NULL;
    if (!t || (pair && !p) || (label && !l)) {
        free(t), free(p), free(l);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", s->name);
    }
    ds->text[i] = t;
    if (s->pair_key)
        ds->text_pair[i] = p;
    else
        free(p);
    ds->lines[i] = line;
    s->label_raw[i] = l;
    ds->n++;
    return LP_OK;
}

/* ---- labels ------------------------------------------------------------------------ */

/* Parses a decimal integer label ("-3", "17"); 0 when s is not one. */
static int parse_int_label(const char *s, long long *out)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (!*p)
        return 0;
    long long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        if (v > 1000000000000LL)
            return 0; /* absurd; treat as a string label */
        v = v * 10 + (*p - '0');
    }
    *out = s[0] == '-' ? -v : v;
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_names(const lp_label_map *m, char *buf, size_t size)
{
    size_t h = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < m->n && h + 5 < size; i++)
        h += (size_t)snprintf(buf + h, size - h, "%s'%s'", i ? ", " : "", m->names[i]);
    if (h >= size && size > 4)
        snprintf(buf + size - 5, 5, "...");
}

/* Turns the label strings into ids and builds ds->label_map; rows whose label is bad are
 * reported (and, when skipping, marked in keep[]). */
static lp_status resolve_labels(lp_row_sink *s, unsigned char *keep)
{
    lp_dataset *ds = s->ds;
    const lp_dataset_options *o = s->opt;
    int64_t n = ds->n;
    lp_status st = LP_OK;
    ds->labels = lp_malloc((size_t)(n ? n : 1) * sizeof *ds->labels);
    if (!ds->labels)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", s->name);
#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        int64_t before_ = ds->n_skipped;                                                                               \
        st = lp_sink_bad(s, LP_STATUS_RANGE, ds->lines[i], __VA_ARGS__);                                              \
        if (st != LP_OK)                                                                                               \
            return st;                                                                                                 \
        if (ds->n_skipped != before_)                                                                                  \
            keep[i] = 0;                                                                                               \
    } while (0)
    if (o->label_map) {
        const lp_label_map *m = o->label_map;
        char known[300];
        list_names(m, known, sizeof known);
        for (int64_t i = 0; i < n; i++) {
            long long v;
            int32_t id = lp_label_map_find(m, s->label_raw[i]);
            if (id >= 0)
                ds->labels[i] = id;
            else if (parse_int_label(s->label_raw[i], &v) && v >= 0 && v < m->n)
                ds->labels[i] = (int32_t)v;
            else if (parse_int_label(s->label_raw[i], &v))
                BAD("label %lld out of range [0, %d)", v, (int)m->n);
            else
                BAD("unknown label '%s' (the label set is %s)", s->label_raw[i], known);
        }
        return lp_label_map_copy(&ds->label_map, m);
    }
    int all_int = 1;
    long long v, max = -1;
    for (int64_t i = 0; i < n && all_int; i++)
        all_int = parse_int_label(s->label_raw[i], &v);
    if (all_int) {
        for (int64_t i = 0; i < n; i++) {
            parse_int_label(s->label_raw[i], &v);
            if (v < 0)
                BAD("negative label %lld", v);
            else if (o->num_labels > 0 && v >= o->num_labels)
                BAD("label %lld out of range [0, %d) (num_labels)", v, (int)o->num_labels);
            else if (v >= LP_DATA_MAX_CLASSES)
                BAD("label %lld is too large (at most %d classes)", v, LP_DATA_MAX_CLASSES);
            else {
                ds->labels[i] = (int32_t)v;
                if (keep[i] && v > max)
                    max = v;
            }
        }
        int32_t k = o->num_labels > 0 ? o->num_labels : (int32_t)(max + 1);
        if (k < 1)
            return LP_OK; /* no good rows; the caller reports it */
        char **names = lp_calloc((size_t)k, sizeof *names);
        if (!names)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", s->name);
        for (int32_t c = 0; c < k && st == LP_OK; c++) {
            names[c] = lp_malloc(16);
            if (!names[c])
                st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", s->name);
            else
                snprintf(names[c], 16, "%d", (int)c);
        }
        if (st == LP_OK)
            st = lp_label_map_from_names(&ds->label_map, (const char *const *)names, k);
        for (int32_t c = 0; c < k; c++)
            free(names[c]);
        free(names);
        return st;
    }
    /* string labels: the distinct strings in byte order get ids 0..k-1 */
    char **sorted = lp_malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", s->name);
    memcpy(sorted, s->label_raw, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (k == 0 || strcmp(sorted[k - 1], sorted[i]) != 0)
            sorted[k++] = sorted[i];
    if (k > LP_DATA_MAX_CLASSES || (o->num_labels > 0 && k > o->num_labels)) {
        lp_label_map tmp = {.n = (int32_t)(k < 8 ? k : 8), .names = sorted};
        char some[300];
        list_names(&tmp, some, sizeof some);
        free(sorted);
        return lp_err(LP_STATUS_RANGE, "%s: found %lld distinct labels (%s%s) but %s is %d", s->name, (long long)k,
                      some, k > 8 ? ", ..." : "", o->num_labels > 0 ? "num_labels" : "the limit",
                      o->num_labels > 0 ? (int)o->num_labels : LP_DATA_MAX_CLASSES);
    }
    for (int64_t i = 0; i < n; i++) {
        char **hit = bsearch(&s->label_raw[i], sorted, (size_t)k, sizeof *sorted, cmp_str);
        ds->labels[i] = (int32_t)(hit - sorted);
    }
    st = lp_label_map_from_names(&ds->label_map, (const char *const *)sorted, (int32_t)k);
    free(sorted);
#undef BAD
    return st;
}

/* Drops rows with keep[i] == 0, keeping order. */
static void compact(lp_dataset *ds, const unsigned char *keep)
{
    int64_t w = 0;
    for (int64_t i = 0; i < ds->n; i++) {
        if (!keep[i]) {
            free(ds->text[i]);
            if (ds->text_pair)
                free(ds->text_pair[i]);
            continue;
        }
        ds->text[w] = ds->text[i];
        if (ds->text_pair)
            ds->text_pair[w] = ds->text_pair[i];
        if (ds->labels)
            ds->labels[w] = ds->labels[i];
        ds->lines[w] = ds->lines[i];
        w++;
    }
    ds->n = w;
}

static lp_data_format format_from_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || strchr(dot, '/'))
        return LP_DATA_FORMAT_AUTO;
    if (strcasecmp(dot, ".csv") == 0)
        return LP_DATA_FORMAT_CSV;
    if (strcasecmp(dot, ".tsv") == 0)
        return LP_DATA_FORMAT_TSV;
    if (strcasecmp(dot, ".jsonl") == 0 || strcasecmp(dot, ".json") == 0 || strcasecmp(dot, ".ndjson") == 0)
        return LP_DATA_FORMAT_JSONL;
    return LP_DATA_FORMAT_AUTO;
}

lp_status lp_dataset_load_buffer(const char *name, const char *buf, size_t len, const lp_dataset_options *opt,
                                 lp_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    lp_dataset_options defaults;
    if (!opt) {
        lp_dataset_options_init(&defaults);
        opt = &defaults;
    }
    if (!name)
        name = "<buffer>";
    if (opt->num_labels < 0 || (opt->label_map && opt->label_map->n < 1) ||
        (opt->label_map && opt->num_labels > 0 && opt->num_labels != opt->label_map->n))
        return lp_err(LP_STATUS_INVALID_ARG, "%s: num_labels (%d) does not match the given label map (%d labels)",
                      name, (int)opt->num_labels, opt->label_map ? (int)opt->label_map->n : 0);
    lp_data_format fmt = opt->format != LP_DATA_FORMAT_AUTO ? opt->format : format_from_name(name);
    if (fmt == LP_DATA_FORMAT_AUTO)
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "%s: cannot tell the format from the file name (use .csv, .tsv or .jsonl, or give the format)",
                      name);
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        buf += 3, len -= 3; /* UTF-8 byte order mark, as spreadsheet exports write it */
    ds->source = lp_strdup(name);
    if (!ds->source)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    lp_row_sink s = {.name = ds->source, .opt = opt, .ds = ds};
    lp_status st = fmt == LP_DATA_FORMAT_JSONL ? lp_read_jsonl(&s, buf, len)
                                               : lp_read_delimited(&s, buf, len, fmt == LP_DATA_FORMAT_CSV ? ',' : '\t');
    unsigned char *keep = NULL;
    if (st == LP_OK && ds->n > 0) {
        keep = lp_malloc((size_t)ds->n);
        if (!keep)
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
        else
            memset(keep, 1, (size_t)ds->n);
    }
    if (st == LP_OK && ds->n > 0 && !opt->text_only)
        st = resolve_labels(&s, keep);
    for (int64_t i = 0; i < ds->n; i++)
        free(s.label_raw[i]);
    free(s.label_raw);
    if (st == LP_OK && ds->n > 0)
        compact(ds, keep);
    free(keep);
    if (st == LP_OK && ds->n == 0)
        st = lp_err(LP_STATUS_FORMAT, "%s: no usable rows (%lld bad row%s skipped%s%s)", name,
                    (long long)ds->n_skipped, ds->n_skipped == 1 ? "" : "s", ds->n_reasons ? "; first: " : "",
                    ds->n_reasons ? ds->skip_reasons[0] : "");
    if (st != LP_OK)
        lp_dataset_free(ds);
    return st;
}

lp_status lp_dataset_load(const char *path, const lp_dataset_options *opt, lp_dataset *ds)
{
    char *buf;
    size_t len;
    memset(ds, 0, sizeof *ds);
    lp_status st = lp_file_read_all(path, &buf, &len);
    if (st != LP_OK)
        return st;
    st = lp_dataset_load_buffer(path, buf, len, opt, ds);
    free(buf);
    return st;
}

void lp_dataset_label_counts(const lp_dataset *ds, int64_t *counts)
{
    for (int32_t c = 0; c < ds->label_map.n; c++)
        counts[c] = 0;
    for (int64_t i = 0; ds->labels && i < ds->n; i++)
        if (ds->labels[i] >= 0 && ds->labels[i] < ds->label_map.n)
            counts[ds->labels[i]]++;
}

/* ---- splits and orders ------------------------------------------------------------- */

void lp_shuffle_i64(int64_t *a, int64_t n, uint64_t *state)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)lp_rng_below(state, (uint64_t)i + 1);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static lp_status subset(const lp_dataset *ds, const int64_t *idx, int64_t n, lp_dataset *out)
{
    memset(out, 0, sizeof *out);
    size_t m = (size_t)(n ? n : 1);
    out->text = lp_calloc(m, sizeof *out->text);
    out->text_pair = ds->text_pair ? lp_calloc(m, sizeof *out->text_pair) : NULL;
    out->labels = ds->labels ? lp_malloc(m * sizeof *out->labels) : NULL;
    out->lines = lp_malloc(m * sizeof *out->lines);
    out->source = lp_strdup(ds->source ? ds->source : "<dataset>");
    int ok = out->text && (!ds->text_pair || out->text_pair) && (!ds->labels || out->labels) && out->lines &&
             out->source;
    ok = ok && lp_label_map_copy(&out->label_map, &ds->label_map) == LP_OK;
    for (int64_t i = 0; ok && i < n; i++) {
        int64_t r = idx[i];
        out->text[i] = lp_strdup(ds->text[r]);
        ok = out->text[i] != NULL;
        if (ok && ds->text_pair)
            ok = (out->text_pair[i] = lp_strdup(ds->text_pair[r])) != NULL;
        if (ds->labels)
            out->labels[i] = ds->labels[r];
        out->lines[i] = ds->lines[r];
        out->n = i + 1;
    }
    if (!ok) {
        lp_dataset_free(out);
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory splitting a dataset");
    }
    return LP_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

lp_status lp_dataset_split(const lp_dataset *ds, double val_fraction, uint64_t seed, lp_dataset *train,
                           lp_dataset *val)
{
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    if (!(val_fraction > 0.0 && val_fraction < 1.0))
        return lp_err(LP_STATUS_INVALID_ARG, "validation fraction %g is not in (0, 1)", val_fraction);
    if (ds->n < 2)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: %lld row(s) cannot be split into train and validation",
                      ds->source ? ds->source : "dataset", (long long)ds->n);
    int64_t n = ds->n;
    int64_t k = (int64_t)llround((double)n * val_fraction);
    if (k < 1)
        k = 1;
    if (k > n - 1)
        k = n - 1;
    int64_t *perm = lp_malloc((size_t)n * sizeof *perm);
    if (!perm)
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory splitting a dataset");
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t state = lp_splitmix64_mix(seed ^ 0x53504c4954ULL); /* "SPLIT": apart from epoch orders */
    lp_shuffle_i64(perm, n, &state);
    qsort(perm, (size_t)k, sizeof *perm, cmp_i64);
    qsort(perm + k, (size_t)(n - k), sizeof *perm, cmp_i64);
    lp_status st = subset(ds, perm, k, val);
    if (st == LP_OK)
        st = subset(ds, perm + k, n - k, train);
    if (st != LP_OK) {
        lp_dataset_free(val);
        lp_dataset_free(train);
    }
    free(perm);
    return st;
}

lp_status lp_epoch_order(int64_t n, uint64_t seed, int64_t epoch, int shuffle, int64_t *order)
{
    if (n < 0 || (n > 0 && !order))
        return lp_err(LP_STATUS_INVALID_ARG, "epoch order: bad arguments (n=%lld)", (long long)n);
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    if (shuffle) {
        uint64_t state = lp_splitmix64_mix(seed) ^ lp_splitmix64_mix((uint64_t)epoch + 0x9e3779b97f4a7c15ULL);
        lp_shuffle_i64(order, n, &state);
    }
    return LP_OK;
}
