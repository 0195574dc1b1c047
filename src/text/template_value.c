/* Chat-template values: the arena they live in, lists and insertion-ordered dicts, JSON
 * input through cJSON, and the two ways a value becomes text: Python's str() (what
 * Jinja prints) and json.dumps(ensure_ascii=False) (transformers' tojson filter). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "template_internal.h"

struct lp_tarena_blk {
    lp_tarena_blk *next;
    size_t cap, used;
    max_align_t data[];
};

void *lp_tarena_alloc(lp_tarena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (!n) n = sizeof(max_align_t);
    lp_tarena_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ((size_t)1 << 16) ? n : ((size_t)1 << 16);
        b = lp_malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head, b->cap = cap, b->used = 0;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void lp_tarena_free(lp_tarena *a)
{
    for (lp_tarena_blk *b = a->head, *nx; b; b = nx) nx = b->next, free(b);
    a->head = NULL, a->used = 0;
}

lp_tv lp_tv_str(const char *s, size_t n) { return (lp_tv){.kind = LP_TV_STR, .u.s = {s, n}}; }
lp_tv lp_tv_int(int64_t i) { return (lp_tv){.kind = LP_TV_INT, .u.i = i}; }
lp_tv lp_tv_bool(int b) { return (lp_tv){.kind = LP_TV_BOOL, .u.i = !!b}; }

int lp_tlist_push(lp_tarena *a, lp_tlist *l, lp_tv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4;
        lp_tv *v2 = lp_tarena_alloc(a, cap * sizeof *v2);
        if (!v2) return -1;
        if (l->n) memcpy(v2, l->v, l->n * sizeof *v2);
        l->v = v2, l->cap = cap;
    }
    l->v[l->n++] = v;
    return 0;
}

const lp_tv *lp_tdict_get(const lp_tdict *d, const char *key, size_t n)
{
    for (size_t i = 0; d && i < d->n; i++)
        if (d->keys[i].u.s.n == n && !memcmp(d->keys[i].u.s.s, key, n)) return &d->vals[i];
    return NULL;
}

int lp_tdict_set(lp_tarena *a, lp_tdict *d, lp_tv key, lp_tv v)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].u.s.n == key.u.s.n && !memcmp(d->keys[i].u.s.s, key.u.s.s, key.u.s.n)) {
            d->vals[i] = v;
            return 0;
        }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 4;
        lp_tv *k2 = lp_tarena_alloc(a, cap * sizeof *k2), *v2 = lp_tarena_alloc(a, cap * sizeof *v2);
        if (!k2 || !v2) return -1;
        if (d->n) memcpy(k2, d->keys, d->n * sizeof *k2), memcpy(v2, d->vals, d->n * sizeof *v2);
        d->keys = k2, d->vals = v2, d->cap = cap;
    }
    d->keys[d->n] = key, d->vals[d->n] = v, d->n++;
    return 0;
}

int lp_tv_truthy(lp_tv v)
{
    switch (v.kind) {
    case LP_TV_UNDEF: case LP_TV_NONE: return 0;
    case LP_TV_BOOL: case LP_TV_INT: return v.u.i != 0;
    case LP_TV_FLOAT: return v.u.f != 0;
    case LP_TV_STR: return v.u.s.n != 0;
    case LP_TV_LIST: return v.u.l->n != 0;
    case LP_TV_DICT: return v.u.d->ns || v.u.d->n != 0;
    case LP_TV_FUNC: return 1;
    }
    return 0;
}

static int is_num(lp_tv v) { return v.kind == LP_TV_INT || v.kind == LP_TV_BOOL || v.kind == LP_TV_FLOAT; }
static double num(lp_tv v) { return v.kind == LP_TV_FLOAT ? v.u.f : (double)v.u.i; }

int lp_tv_equal(lp_tv a, lp_tv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.kind != LP_TV_FLOAT && b.kind != LP_TV_FLOAT) return a.u.i == b.u.i;
        return num(a) == num(b);
    }
    if (a.kind != b.kind) return 0;
    switch (a.kind) {
    case LP_TV_UNDEF: case LP_TV_NONE: return 1;
    case LP_TV_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.s, b.u.s.s, a.u.s.n);
    case LP_TV_LIST:
        if (a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!lp_tv_equal(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case LP_TV_DICT:
        if (a.u.d == b.u.d) return 1;
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            const lp_tv *o = lp_tdict_get(b.u.d, a.u.d->keys[i].u.s.s, a.u.d->keys[i].u.s.n);
            if (!o || !lp_tv_equal(a.u.d->vals[i], *o)) return 0;
        }
        return 1;
    case LP_TV_FUNC: return a.u.i == b.u.i;
    default: return 0;
    }
}

/* A copy in the arena: values outlive the cJSON tree they came from. */
static int arena_str(lp_tarena *a, const char *s, lp_tv *out)
{
    size_t n = strlen(s);
    char *p = lp_tarena_alloc(a, n + 1);
    if (!p) return -1;
    memcpy(p, s, n);
    *out = lp_tv_str(p, n);
    return 0;
}

int lp_tv_from_json(lp_tarena *a, const void *jp, lp_tv *out, int depth)
{
    const cJSON *j = jp;
    *out = (lp_tv){.kind = LP_TV_NONE};
    if (depth > LP_TMPL_MAX_DEPTH) return -2;
    if (cJSON_IsBool(j)) {
        *out = lp_tv_bool(cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        /* JSON integers become ints (Python's json does the same for literals without
         * '.' or 'e'; cJSON keeps no spelling, so integral values in range are ints) */
        if (d == floor(d) && fabs(d) < 9007199254740992.0) *out = lp_tv_int((int64_t)d);
        else out->kind = LP_TV_FLOAT, out->u.f = d;
    } else if (cJSON_IsString(j)) {
        if (arena_str(a, j->valuestring, out)) return -1;
    } else if (cJSON_IsArray(j)) {
        lp_tlist *l = lp_tarena_alloc(a, sizeof *l);
        if (!l) return -1;
        for (const cJSON *c = j->child; c; c = c->next) {
            lp_tv v;
            int r = lp_tv_from_json(a, c, &v, depth + 1);
            if (r || lp_tlist_push(a, l, v)) return r ? r : -1;
        }
        out->kind = LP_TV_LIST, out->u.l = l;
    } else if (cJSON_IsObject(j)) {
        lp_tdict *d = lp_tarena_alloc(a, sizeof *d);
        if (!d) return -1;
        for (const cJSON *c = j->child; c; c = c->next) {
            lp_tv v;
            lp_tv k;
            int r = lp_tv_from_json(a, c, &v, depth + 1);
            if (r || arena_str(a, c->string ? c->string : "", &k) || lp_tdict_set(a, d, k, v)) return r ? r : -1;
        }
        out->kind = LP_TV_DICT, out->u.d = d;
    }
    return 0;
}

int lp_tbuf_put(lp_tbuf *b, const char *s, size_t n)
{
    if (n > LP_TMPL_MAX_OUTPUT - b->n) {
        b->over = 1;
        return -1;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = lp_realloc(b->p, cap);
        if (!p) return -1;
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

void lp_tbuf_free(lp_tbuf *b)
{
    free(b->p);
    *b = (lp_tbuf){0};
}

static int put_s(lp_tbuf *b, const char *s) { return lp_tbuf_put(b, s, strlen(s)); }

/* Python's repr of a float: the shortest digits that read back to the same double,
 * ".0" added to integral values. */
static int put_float(lp_tbuf *b, double f, int json)
{
    char tmp[40];
    if (isnan(f)) return put_s(b, json ? "NaN" : "nan");
    if (isinf(f)) return put_s(b, f > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf"));
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* %g writes 1e+20 where Python writes 1e+20 too, but 1e-05 matches as well; Python
     * switches to exponents at 1e16, %g at the precision: close enough for templates */
    if (!strpbrk(tmp, ".en")) strcat(tmp, ".0");
    return put_s(b, tmp);
}

static int put_int(lp_tbuf *b, int64_t i)
{
    char tmp[24];
    snprintf(tmp, sizeof tmp, "%lld", (long long)i);
    return put_s(b, tmp);
}

/* Python repr of a str: single quotes unless the text holds ' and no ". */
static int put_repr_str(lp_tbuf *b, const char *s, size_t n)
{
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (lp_tbuf_put(b, &q, 1)) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = NULL;
        if (c == '\\') e = "\\\\";
        else if (c == '\n') e = "\\n";
        else if (c == '\r') e = "\\r";
        else if (c == '\t') e = "\\t";
        else if (c == (unsigned char)q) e = q == '\'' ? "\\'" : "\\\"";
        else if (c < 32 || c == 127) snprintf(esc, sizeof esc, "\\x%02x", c), e = esc;
        if (e ? put_s(b, e) : lp_tbuf_put(b, (const char *)&s[i], 1)) return -1;
    }
    return lp_tbuf_put(b, &q, 1);
}

static int write_repr(lp_tbuf *b, lp_tv v, int depth)
{
    if (depth > LP_TMPL_MAX_DEPTH) return -1;
    if (v.kind == LP_TV_STR) return put_repr_str(b, v.u.s.s, v.u.s.n);
    if (v.kind == LP_TV_LIST) {
        if (put_s(b, "[")) return -1;
        for (size_t i = 0; i < v.u.l->n; i++)
            if ((i && put_s(b, ", ")) || write_repr(b, v.u.l->v[i], depth + 1)) return -1;
        return put_s(b, "]");
    }
    if (v.kind == LP_TV_DICT) {
        if (v.u.d->ns) return put_s(b, "<Namespace>");
        if (put_s(b, "{")) return -1;
        for (size_t i = 0; i < v.u.d->n; i++)
            if ((i && put_s(b, ", ")) || write_repr(b, v.u.d->keys[i], depth + 1) || put_s(b, ": ") ||
                write_repr(b, v.u.d->vals[i], depth + 1))
                return -1;
        return put_s(b, "}");
    }
    return lp_tv_write_str(b, v);
}

int lp_tv_write_str(lp_tbuf *b, lp_tv v)
{
    switch (v.kind) {
    case LP_TV_UNDEF: return 0;
    case LP_TV_NONE: return put_s(b, "None");
    case LP_TV_BOOL: return put_s(b, v.u.i ? "True" : "False");
    case LP_TV_INT: return put_int(b, v.u.i);
    case LP_TV_FLOAT: return put_float(b, v.u.f, 0);
    case LP_TV_STR: return lp_tbuf_put(b, v.u.s.s, v.u.s.n);
    case LP_TV_LIST: case LP_TV_DICT: return write_repr(b, v, 0);
    case LP_TV_FUNC: return put_s(b, "<function>");
    }
    return 0;
}

static int put_json_str(lp_tbuf *b, const char *s, size_t n)
{
    if (put_s(b, "\"")) return -1;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = NULL;
        char esc[8];
        if (c == '"') e = "\\\"";
        else if (c == '\\') e = "\\\\";
        else if (c == '\n') e = "\\n";
        else if (c == '\r') e = "\\r";
        else if (c == '\t') e = "\\t";
        else if (c == '\b') e = "\\b";
        else if (c == '\f') e = "\\f";
        else if (c < 32) snprintf(esc, sizeof esc, "\\u%04x", c), e = esc;
        if (!e) continue;
        if (lp_tbuf_put(b, s + run, i - run) || put_s(b, e)) return -1;
        run = i + 1;
    }
    if (lp_tbuf_put(b, s + run, n - run)) return -1;
    return put_s(b, "\"");
}

static int newline_indent(lp_tbuf *b, int indent, int level)
{
    if (put_s(b, "\n")) return -1;
    for (int i = 0; i < indent * level; i++)
        if (put_s(b, " ")) return -1;
    return 0;
}

static int write_json(lp_tbuf *b, lp_tv v, int indent, int level)
{
    if (level > LP_TMPL_MAX_DEPTH) return -1;
    const char *item_sep = indent >= 0 ? "," : ", ";
    switch (v.kind) {
    case LP_TV_UNDEF: case LP_TV_NONE: return put_s(b, "null");
    case LP_TV_BOOL: return put_s(b, v.u.i ? "true" : "false");
    case LP_TV_INT: return put_int(b, v.u.i);
    case LP_TV_FLOAT: return put_float(b, v.u.f, 1);
    case LP_TV_STR: return put_json_str(b, v.u.s.s, v.u.s.n);
    case LP_TV_FUNC: return -1;
    case LP_TV_LIST:
        if (!v.u.l->n) return put_s(b, "[]");
        if (put_s(b, "[")) return -1;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && put_s(b, item_sep)) return -1;
            if (indent >= 0 && newline_indent(b, indent, level + 1)) return -1;
            if (write_json(b, v.u.l->v[i], indent, level + 1)) return -1;
        }
        if (indent >= 0 && newline_indent(b, indent, level)) return -1;
        return put_s(b, "]");
    case LP_TV_DICT:
        if (!v.u.d->n) return put_s(b, "{}");
        if (put_s(b, "{")) return -1;
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i && put_s(b, item_sep)) return -1;
            if (indent >= 0 && newline_indent(b, indent, level + 1)) return -1;
            if (put_json_str(b, v.u.d->keys[i].u.s.s, v.u.d->keys[i].u.s.n) || put_s(b, ": ") ||
                write_json(b, v.u.d->vals[i], indent, level + 1))
                return -1;
        }
        if (indent >= 0 && newline_indent(b, indent, level)) return -1;
        return put_s(b, "}");
    }
    return -1;
}

int lp_tv_write_json(lp_tbuf *b, lp_tv v, int indent, int depth) { return write_json(b, v, indent, depth); }
