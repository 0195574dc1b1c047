/* Chat-template filters, tests and str/dict methods: the ones the chat templates of
 * Qwen2.5, SmolLM2, Llama 3.x and Mistral call, with Python's semantics (str.strip on
 * Unicode whitespace, split, replace; json.dumps for tojson; Jinja's default/length/...). */
#include <stdio.h>
#include <string.h>

#include "template_eval.h"

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Length of the whitespace character at p[0, n) as Python's str.isspace() sees it (ASCII
 * whitespace, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
 * U+205F, U+3000), 0 when p does not start with one. */
static size_t space_len(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    if (!n) return 0;
    if (u[0] < 0x80) return is_space(p[0]) || (u[0] >= 0x1c && u[0] <= 0x1f);
    if (n >= 2 && u[0] == 0xC2 && (u[1] == 0x85 || u[1] == 0xA0)) return 2;
    if (n >= 3 && u[0] == 0xE1 && u[1] == 0x9A && u[2] == 0x80) return 3;
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x80 && (u[2] <= 0x8A || u[2] == 0xA8 || u[2] == 0xA9 || u[2] == 0xAF)) return 3;
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x81 && u[2] == 0x9F) return 3;
    if (n >= 3 && u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x80) return 3;
    return 0;
}

/* Length of the whitespace character ending at p[n), 0 when none. */
static size_t space_len_back(const char *p, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (space_len(p + n - k, k) == k) return k;
    return 0;
}

/* Python str.strip/lstrip/rstrip; chars NULL: Unicode whitespace as Python has it. chars
 * given: the bytes of chars (exact for ASCII sets, which is what templates pass). */
static lp_tv strip(lp_tv s, int left, int right, const lp_tv *chars)
{
    const char *p = s.u.s.s;
    size_t b = 0, e = s.u.s.n, k;
    if (chars) {
        if (left)
            while (b < e && memchr(chars->u.s.s, p[b], chars->u.s.n)) b++;
        if (right)
            while (e > b && memchr(chars->u.s.s, p[e - 1], chars->u.s.n)) e--;
    } else {
        if (left)
            while (b < e && (k = space_len(p + b, e - b))) b += k;
        if (right)
            while (e > b && (k = space_len_back(p + b, e - b))) e -= k;
    }
    return lp_tv_str(p + b, e - b);
}

static lp_status case_map(lp_tev *E, lp_tv s, int mode, lp_tv *out) /* 0 lower, 1 upper, 2 title, 3 capitalize */
{
    int fail = 0;
    *out = lp_tev_new_str(E, s.u.s.s, s.u.s.n, &fail);
    if (fail) return lp_tev_oom(E);
    char *p = (char *)out->u.s.s;
    int word_start = 1;
    for (size_t i = 0; i < out->u.s.n; i++) {
        char c = p[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        int up = mode == 1 || (mode == 2 && word_start) || (mode == 3 && i == 0);
        if (c >= 'a' && c <= 'z' && up) p[i] = (char)(c - 32);
        else if (c >= 'A' && c <= 'Z' && !up) p[i] = (char)(c + 32);
        word_start = !alpha && !(c >= '0' && c <= '9') && !((unsigned char)c >= 0x80);
    }
    return LP_OK;
}

static lp_status length_of(lp_tev *E, lp_tv v, int line, int64_t *n)
{
    if (v.kind == LP_TV_STR) {
        int64_t c = 0;
        for (size_t i = 0; i < v.u.s.n; i++) c += ((unsigned char)v.u.s.s[i] & 0xC0) != 0x80;
        *n = c;
    } else if (v.kind == LP_TV_LIST) *n = (int64_t)v.u.l->n;
    else if (v.kind == LP_TV_DICT) *n = (int64_t)v.u.d->n;
    else if (v.kind == LP_TV_UNDEF) *n = 0;
    else return lp_err(LP_STATUS_FORMAT, "%s: line %d: a %s has no length", E->name, line, lp_tev_kind_name(v));
    return LP_OK;
}

static lp_status items_of(lp_tev *E, lp_tv d, lp_tv *out)
{
    lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
    if (!l) return lp_tev_oom(E);
    for (size_t i = 0; i < d.u.d->n; i++) {
        lp_tlist *pair = lp_tarena_alloc(E->a, sizeof *pair);
        if (!pair || lp_tlist_push(E->a, pair, d.u.d->keys[i]) || lp_tlist_push(E->a, pair, d.u.d->vals[i]) ||
            lp_tlist_push(E->a, l, (lp_tv){.kind = LP_TV_LIST, .u.l = pair}))
            return lp_tev_oom(E);
    }
    out->kind = LP_TV_LIST, out->u.l = l;
    return LP_OK;
}

static lp_status join_list(lp_tev *E, lp_tlist *l, lp_tv sep, int line, lp_tv *out)
{
    lp_tbuf b = {0};
    for (size_t i = 0; i < l->n; i++)
        if ((i && lp_tbuf_put(&b, sep.u.s.s, sep.u.s.n)) || lp_tv_write_str(&b, l->v[i])) {
            lp_tbuf_free(&b);
            return lp_tev_out_fail(E, line);
        }
    int fail = 0;
    *out = lp_tev_new_str(E, b.p ? b.p : "", b.n, &fail);
    lp_tbuf_free(&b);
    return fail ? lp_tev_oom(E) : LP_OK;
}

static lp_status replace_str(lp_tev *E, lp_tv s, lp_tv from, lp_tv to, int line, lp_tv *out)
{
    if (from.kind != LP_TV_STR || to.kind != LP_TV_STR)
        return lp_err(LP_STATUS_FORMAT, "%s: line %d: replace takes two strings", E->name, line);
    lp_tbuf b = {0};
    size_t i = 0;
    int bad = 0;
    while (i <= s.u.s.n && !bad) {
        const char *hit = NULL;
        if (from.u.s.n == 0) hit = s.u.s.s + i; /* Python inserts `to` between every character */
        else
            for (size_t j = i; j + from.u.s.n <= s.u.s.n; j++)
                if (!memcmp(s.u.s.s + j, from.u.s.s, from.u.s.n)) {
                    hit = s.u.s.s + j;
                    break;
                }
        if (!hit) {
            bad = lp_tbuf_put(&b, s.u.s.s + i, s.u.s.n - i);
            break;
        }
        size_t at = (size_t)(hit - s.u.s.s);
        bad = lp_tbuf_put(&b, s.u.s.s + i, at - i) || lp_tbuf_put(&b, to.u.s.s, to.u.s.n);
        if (from.u.s.n == 0) {
            if (at == s.u.s.n) break;
            size_t k = (size_t)lp_tev_utf8_len((unsigned char)s.u.s.s[at]);
            if (k > s.u.s.n - at) k = s.u.s.n - at;
            bad = bad || lp_tbuf_put(&b, s.u.s.s + at, k);
            i = at + k;
        } else {
            i = at + from.u.s.n;
        }
    }
    if (bad) {
        lp_tbuf_free(&b);
        return lp_tev_out_fail(E, line);
    }
    int fail = 0;
    *out = lp_tev_new_str(E, b.p ? b.p : "", b.n, &fail);
    lp_tbuf_free(&b);
    return fail ? lp_tev_oom(E) : LP_OK;
}

static lp_status split_str(lp_tev *E, lp_tv s, lp_tv sep, int line, lp_tv *out)
{
    lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
    if (!l) return lp_tev_oom(E);
    const char *p = s.u.s.s;
    size_t n = s.u.s.n, i = 0;
    if (sep.kind == LP_TV_UNDEF || sep.kind == LP_TV_NONE) { /* runs of whitespace, ends dropped */
        size_t k;
        while (i < n) {
            while (i < n && (k = space_len(p + i, n - i))) i += k;
            size_t b = i;
            while (i < n && !space_len(p + i, n - i)) i++;
            if (i > b && lp_tlist_push(E->a, l, lp_tv_str(p + b, i - b))) return lp_tev_oom(E);
        }
    } else {
        if (sep.kind != LP_TV_STR || !sep.u.s.n) return lp_err(LP_STATUS_FORMAT, "%s: line %d: split needs a non-empty string separator", E->name, line);
        size_t b = 0;
        for (i = 0; i + sep.u.s.n <= n;) {
            if (!memcmp(p + i, sep.u.s.s, sep.u.s.n)) {
                if (lp_tlist_push(E->a, l, lp_tv_str(p + b, i - b))) return lp_tev_oom(E);
                i += sep.u.s.n, b = i;
            } else {
                i++;
            }
        }
        if (lp_tlist_push(E->a, l, lp_tv_str(p + b, n - b))) return lp_tev_oom(E);
    }
    out->kind = LP_TV_LIST, out->u.l = l;
    return LP_OK;
}

/* obj.method(args): the str and dict methods chat templates call */
lp_status lp_tev_method(lp_tev *E, const lp_tnode *call, lp_tv obj, const char *m, size_t mn, lp_tv *out)
{
    lp_tv a[3] = {{0}, {0}, {0}};
    size_t na;
    lp_status st = lp_tev_args(E, call, a, &na, 3);
    if (st) return st;
    int line = call->line;
    if (obj.kind == LP_TV_STR) {
        if (lp_tev_str_eq(m, mn, "strip") || lp_tev_str_eq(m, mn, "lstrip") || lp_tev_str_eq(m, mn, "rstrip")) {
            if (na && a[0].kind != LP_TV_STR && a[0].kind != LP_TV_NONE) goto bad_args;
            *out = strip(obj, m[0] != 'r', m[0] != 'l', na && a[0].kind == LP_TV_STR ? &a[0] : NULL);
            return LP_OK;
        }
        if (lp_tev_str_eq(m, mn, "startswith") || lp_tev_str_eq(m, mn, "endswith")) {
            if (na != 1 || a[0].kind != LP_TV_STR) goto bad_args;
            size_t k = a[0].u.s.n;
            int r = k <= obj.u.s.n && !memcmp(m[0] == 's' ? obj.u.s.s : obj.u.s.s + obj.u.s.n - k, a[0].u.s.s, k);
            *out = lp_tv_bool(r);
            return LP_OK;
        }
        if (lp_tev_str_eq(m, mn, "lower")) return case_map(E, obj, 0, out);
        if (lp_tev_str_eq(m, mn, "upper")) return case_map(E, obj, 1, out);
        if (lp_tev_str_eq(m, mn, "title")) return case_map(E, obj, 2, out);
        if (lp_tev_str_eq(m, mn, "capitalize")) return case_map(E, obj, 3, out);
        if (lp_tev_str_eq(m, mn, "split")) return split_str(E, obj, a[0], line, out);
        if (lp_tev_str_eq(m, mn, "replace")) return replace_str(E, obj, a[0], a[1], line, out);
    } else if (obj.kind == LP_TV_DICT && !obj.u.d->ns) {
        if (lp_tev_str_eq(m, mn, "items")) return items_of(E, obj, out);
        if (lp_tev_str_eq(m, mn, "keys") || lp_tev_str_eq(m, mn, "values")) {
            lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
            if (!l) return lp_tev_oom(E);
            for (size_t i = 0; i < obj.u.d->n; i++)
                if (lp_tlist_push(E->a, l, m[0] == 'k' ? obj.u.d->keys[i] : obj.u.d->vals[i])) return lp_tev_oom(E);
            out->kind = LP_TV_LIST, out->u.l = l;
            return LP_OK;
        }
        if (lp_tev_str_eq(m, mn, "get")) {
            if (na < 1) goto bad_args;
            const lp_tv *v = a[0].kind == LP_TV_STR ? lp_tdict_get(obj.u.d, a[0].u.s.s, a[0].u.s.n) : NULL;
            *out = v ? *v : na > 1 ? a[1] : (lp_tv){.kind = LP_TV_NONE};
            return LP_OK;
        }
    }
    return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: unsupported method '%.*s' of a %s", E->name, line, (int)mn, m, lp_tev_kind_name(obj));
bad_args:
    return lp_err(LP_STATUS_FORMAT, "%s: line %d: bad arguments to '%.*s'", E->name, line, (int)mn, m);
}

static const char *const filters[] = {"trim", "length", "count", "tojson", "default", "d", "upper", "lower", "string",
                                      "first", "last", "join", "replace", "list", "items", "capitalize", "title",
                                      "int", "abs", "safe", "reverse", NULL};
static const char *const tests[] = {"defined", "undefined", "none", "string", "number", "integer", "float", "boolean",
                                    "true", "false", "mapping", "iterable", "sequence", "odd", "even", "divisibleby",
                                    "callable", NULL};

static int known(const char *const *names, const char *s, size_t n)
{
    for (; *names; names++)
        if (lp_tev_str_eq(s, n, *names)) return 1;
    return 0;
}

int lp_tmpl_filter_known(const char *s, size_t n) { return known(filters, s, n); }
int lp_tmpl_test_known(const char *s, size_t n) { return known(tests, s, n); }

lp_status lp_tev_filter(lp_tev *E, const lp_tnode *nd, lp_tv v, lp_tv *out)
{
    const char *f = nd->s;
    size_t fn = nd->n;
    int line = nd->line;
    lp_tv a[3] = {{0}, {0}, {0}};
    size_t na;
    lp_status st = lp_tev_args(E, nd, a, &na, 3);
    if (st) return st;
    if (lp_tev_str_eq(f, fn, "default") || lp_tev_str_eq(f, fn, "d")) {
        lp_tv boolean;
        if ((st = lp_tev_kw(E, nd, "boolean", &boolean))) return st;
        int use_default = v.kind == LP_TV_UNDEF || ((na > 1 ? lp_tv_truthy(a[1]) : lp_tv_truthy(boolean)) && !lp_tv_truthy(v));
        *out = use_default ? (na ? a[0] : lp_tv_str("", 0)) : v;
        return LP_OK;
    }
    if (lp_tev_str_eq(f, fn, "safe")) return *out = v, LP_OK;
    if (lp_tev_str_eq(f, fn, "length") || lp_tev_str_eq(f, fn, "count")) {
        int64_t n = 0;
        if ((st = length_of(E, v, line, &n))) return st;
        *out = lp_tv_int(n);
        return LP_OK;
    }
    if (lp_tev_str_eq(f, fn, "tojson")) {
        lp_tv ind;
        if ((st = lp_tev_kw(E, nd, "indent", &ind))) return st;
        if (na) ind = a[0];
        int indent = -1;
        if (ind.kind == LP_TV_INT) {
            if (ind.u.i < 0 || ind.u.i > 64) return lp_err(LP_STATUS_RANGE, "%s: line %d: tojson indent out of range", E->name, line);
            indent = (int)ind.u.i;
        }
        if (v.kind == LP_TV_UNDEF) return lp_err(LP_STATUS_FORMAT, "%s: line %d: tojson of an undefined value", E->name, line);
        lp_tbuf b = {0};
        if (lp_tv_write_json(&b, v, indent, 0)) {
            lp_tbuf_free(&b);
            return v.kind == LP_TV_FUNC ? lp_err(LP_STATUS_FORMAT, "%s: line %d: tojson of a function", E->name, line) : lp_tev_out_fail(E, line);
        }
        int fail = 0;
        *out = lp_tev_new_str(E, b.p ? b.p : "", b.n, &fail);
        lp_tbuf_free(&b);
        return fail ? lp_tev_oom(E) : LP_OK;
    }
    if (lp_tev_str_eq(f, fn, "string")) return lp_tev_to_str(E, v, out, line);
    if (lp_tev_str_eq(f, fn, "list")) {
        lp_tlist *l;
        if ((st = lp_tev_iterate(E, v, line, &l))) return st;
        out->kind = LP_TV_LIST, out->u.l = l;
        return LP_OK;
    }
    if (lp_tev_str_eq(f, fn, "first") || lp_tev_str_eq(f, fn, "last") || lp_tev_str_eq(f, fn, "reverse")) {
        lp_tlist *l;
        if ((st = lp_tev_iterate(E, v, line, &l))) return st;
        if (f[0] == 'r') {
            lp_tlist *r = lp_tarena_alloc(E->a, sizeof *r);
            if (!r) return lp_tev_oom(E);
            for (size_t i = l->n; i-- > 0;)
                if (lp_tlist_push(E->a, r, l->v[i])) return lp_tev_oom(E);
            if (v.kind == LP_TV_STR) return join_list(E, r, lp_tv_str("", 0), line, out);
            out->kind = LP_TV_LIST, out->u.l = r;
            return LP_OK;
        }
        out->kind = LP_TV_UNDEF;
        if (l->n) *out = l->v[f[0] == 'f' ? 0 : l->n - 1];
        return LP_OK;
    }
    if (lp_tev_str_eq(f, fn, "join")) {
        lp_tlist *l;
        if ((st = lp_tev_iterate(E, v, line, &l))) return st;
        if (na && a[0].kind != LP_TV_STR) return lp_err(LP_STATUS_FORMAT, "%s: line %d: join takes a string separator", E->name, line);
        return join_list(E, l, na ? a[0] : lp_tv_str("", 0), line, out);
    }
    if (lp_tev_str_eq(f, fn, "items")) {
        if (v.kind == LP_TV_UNDEF) {
            static lp_tlist empty;
            out->kind = LP_TV_LIST, out->u.l = &empty;
            return LP_OK;
        }
        if (v.kind != LP_TV_DICT) return lp_err(LP_STATUS_FORMAT, "%s: line %d: items of a %s", E->name, line, lp_tev_kind_name(v));
        return items_of(E, v, out);
    }
    if (lp_tev_str_eq(f, fn, "int")) {
        if (v.kind == LP_TV_INT || v.kind == LP_TV_BOOL) *out = lp_tv_int(v.u.i);
        else if (v.kind == LP_TV_FLOAT && v.u.f > -9e18 && v.u.f < 9e18) *out = lp_tv_int((int64_t)v.u.f);
        else *out = na ? a[0] : lp_tv_int(0);
        return LP_OK;
    }
    if (lp_tev_str_eq(f, fn, "abs")) {
        if (v.kind == LP_TV_INT && v.u.i != INT64_MIN) *out = lp_tv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        else if (v.kind == LP_TV_FLOAT) *out = v, out->u.f = v.u.f < 0 ? -v.u.f : v.u.f;
        else return lp_err(LP_STATUS_FORMAT, "%s: line %d: abs of a %s", E->name, line, lp_tev_kind_name(v));
        return LP_OK;
    }
    /* the rest act on strings (Jinja converts the value with str() first) */
    lp_tv s;
    if (v.kind == LP_TV_UNDEF) s = lp_tv_str("", 0);
    else if ((st = lp_tev_to_str(E, v, &s, line))) return st;
    if (lp_tev_str_eq(f, fn, "trim")) return *out = strip(s, 1, 1, na && a[0].kind == LP_TV_STR ? &a[0] : NULL), LP_OK;
    if (lp_tev_str_eq(f, fn, "lower")) return case_map(E, s, 0, out);
    if (lp_tev_str_eq(f, fn, "upper")) return case_map(E, s, 1, out);
    if (lp_tev_str_eq(f, fn, "title")) return case_map(E, s, 2, out);
    if (lp_tev_str_eq(f, fn, "capitalize")) return case_map(E, s, 3, out);
    if (lp_tev_str_eq(f, fn, "replace")) return replace_str(E, s, a[0], a[1], line, out);
    return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: unknown filter '%.*s'", E->name, line, (int)fn, f);
}

lp_status lp_tev_test(lp_tev *E, const lp_tnode *nd, lp_tv v, int *r)
{
    const char *t = nd->s;
    size_t n = nd->n;
    lp_tv a[1] = {{0}};
    size_t na;
    lp_status st = lp_tev_args(E, nd, a, &na, 1);
    if (st) return st;
    if (lp_tev_str_eq(t, n, "defined")) *r = v.kind != LP_TV_UNDEF;
    else if (lp_tev_str_eq(t, n, "undefined")) *r = v.kind == LP_TV_UNDEF;
    else if (lp_tev_str_eq(t, n, "none")) *r = v.kind == LP_TV_NONE;
    else if (lp_tev_str_eq(t, n, "string")) *r = v.kind == LP_TV_STR;
    else if (lp_tev_str_eq(t, n, "number")) *r = v.kind == LP_TV_INT || v.kind == LP_TV_FLOAT || v.kind == LP_TV_BOOL;
    else if (lp_tev_str_eq(t, n, "integer")) *r = v.kind == LP_TV_INT;
    else if (lp_tev_str_eq(t, n, "float")) *r = v.kind == LP_TV_FLOAT;
    else if (lp_tev_str_eq(t, n, "boolean")) *r = v.kind == LP_TV_BOOL;
    else if (lp_tev_str_eq(t, n, "true")) *r = v.kind == LP_TV_BOOL && v.u.i;
    else if (lp_tev_str_eq(t, n, "false")) *r = v.kind == LP_TV_BOOL && !v.u.i;
    else if (lp_tev_str_eq(t, n, "mapping")) *r = v.kind == LP_TV_DICT && !v.u.d->ns;
    else if (lp_tev_str_eq(t, n, "iterable") || lp_tev_str_eq(t, n, "sequence"))
        *r = v.kind == LP_TV_STR || v.kind == LP_TV_LIST || (v.kind == LP_TV_DICT && !v.u.d->ns);
    else if (lp_tev_str_eq(t, n, "callable")) *r = v.kind == LP_TV_FUNC;
    else if (lp_tev_str_eq(t, n, "odd") || lp_tev_str_eq(t, n, "even") || lp_tev_str_eq(t, n, "divisibleby")) {
        int64_t d = t[0] == 'd' ? (na && a[0].kind == LP_TV_INT ? a[0].u.i : 0) : 2;
        if (v.kind != LP_TV_INT || d == 0) return lp_err(LP_STATUS_FORMAT, "%s: line %d: test '%.*s' needs integers", E->name, nd->line, (int)n, t);
        int64_t m = d == -1 ? 0 : v.u.i % d;
        *r = t[0] == 'o' ? m != 0 : m == 0;
    } else {
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: unknown test '%.*s'", E->name, nd->line, (int)n, t);
    }
    if (nd->op) *r = !*r;
    return LP_OK;
}

