/* Chat-template evaluator: walks the syntax tree with Jinja2's semantics as
 * transformers' environment has them (undefined names falsy and printed as "", a fresh
 * scope per loop iteration, namespace() for values that outlive one, raise_exception,
 * strftime_now; filters and tests are in template_filters.c). Every error names the line
 * and the construct; loop iterations, nesting and output are bounded. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "template_eval.h"

enum { FN_RAISE = 1, FN_STRFTIME, FN_NAMESPACE, FN_RANGE, FN_DICT };


lp_status lp_tev_oom(lp_tev *E) { return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory rendering the template", E->name); }

lp_status lp_tev_out_fail(lp_tev *E, int line)
{
    if (E->out->over)
        return lp_err(LP_STATUS_RANGE, "%s: line %d: rendered text passes %zu MiB", E->name, line, LP_TMPL_MAX_OUTPUT >> 20);
    return lp_tev_oom(E);
}

const char *lp_tev_kind_name(lp_tv v)
{
    static const char *const n[] = {"undefined", "none", "bool", "int", "float", "string", "list", "dict", "function"};
    if (v.kind == LP_TV_DICT && v.u.d->ns) return "namespace";
    return n[v.kind];
}

int lp_tev_str_eq(const char *s, size_t n, const char *lit) { return n == strlen(lit) && !memcmp(s, lit, n); }

/* ---- names ---- */

static lp_tv lookup(lp_tev *E, const char *s, size_t n)
{
    for (size_t i = E->nframes; i-- > 0;) {
        const lp_tv *v = lp_tdict_get(E->frames[i], s, n);
        if (v) return *v;
    }
    lp_tv f = {.kind = LP_TV_FUNC};
    if (lp_tev_str_eq(s, n, "raise_exception")) f.u.i = FN_RAISE;
    else if (lp_tev_str_eq(s, n, "strftime_now")) f.u.i = FN_STRFTIME;
    else if (lp_tev_str_eq(s, n, "namespace")) f.u.i = FN_NAMESPACE;
    else if (lp_tev_str_eq(s, n, "range")) f.u.i = FN_RANGE;
    else if (lp_tev_str_eq(s, n, "dict")) f.u.i = FN_DICT;
    else f.kind = LP_TV_UNDEF;
    return f;
}

static lp_status push_frame(lp_tev *E)
{
    if (E->nframes == E->cap_frames) {
        size_t cap = E->cap_frames ? 2 * E->cap_frames : 8;
        lp_tdict **f = lp_tarena_alloc(E->a, cap * sizeof *f);
        if (!f) return lp_tev_oom(E);
        if (E->nframes) memcpy(f, E->frames, E->nframes * sizeof *f);
        E->frames = f, E->cap_frames = cap;
    }
    lp_tdict *d = lp_tarena_alloc(E->a, sizeof *d);
    if (!d) return lp_tev_oom(E);
    E->frames[E->nframes++] = d;
    return LP_OK;
}

static lp_status set_var(lp_tev *E, const char *s, size_t n, lp_tv v)
{
    return lp_tdict_set(E->a, E->frames[E->nframes - 1], lp_tv_str(s, n), v) ? lp_tev_oom(E) : LP_OK;
}

/* ---- strings ---- */

lp_tv lp_tev_new_str(lp_tev *E, const char *s, size_t n, int *fail)
{
    char *p = lp_tarena_alloc(E->a, n + 1);
    if (!p) {
        *fail = 1;
        return (lp_tv){0};
    }
    if (n) memcpy(p, s, n);
    return lp_tv_str(p, n);
}

/* str(v) as a fresh arena string */
lp_status lp_tev_to_str(lp_tev *E, lp_tv v, lp_tv *out, int line)
{
    if (v.kind == LP_TV_STR) {
        *out = v;
        return LP_OK;
    }
    lp_tbuf b = {0};
    if (lp_tv_write_str(&b, v)) {
        lp_tbuf_free(&b);
        return lp_tev_out_fail(E, line);
    }
    int fail = 0;
    *out = lp_tev_new_str(E, b.p ? b.p : "", b.n, &fail);
    lp_tbuf_free(&b);
    return fail ? lp_tev_oom(E) : LP_OK;
}

int lp_tev_utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* Splits a string into code points (Python indexes str by code point). */
lp_status lp_tev_code_points(lp_tev *E, lp_tv s, lp_tlist **out)
{
    lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
    if (!l) return lp_tev_oom(E);
    for (size_t i = 0; i < s.u.s.n;) {
        size_t k = (size_t)lp_tev_utf8_len((unsigned char)s.u.s.s[i]);
        if (k > s.u.s.n - i) k = s.u.s.n - i;
        if (lp_tlist_push(E->a, l, lp_tv_str(s.u.s.s + i, k))) return lp_tev_oom(E);
        i += k;
    }
    *out = l;
    return LP_OK;
}

/* ---- expressions ---- */

lp_status lp_tev_eval(lp_tev *E, const lp_tnode *nd, lp_tv *out);

lp_status lp_tev_args(lp_tev *E, const lp_tnode *nd, lp_tv *pos, size_t *npos, size_t maxpos)
{
    *npos = 0;
    for (size_t i = 0; i < nd->nkids; i++) {
        if (nd->kwnames[i]) continue;
        if (*npos == maxpos) return lp_err(LP_STATUS_FORMAT, "%s: line %d: too many arguments", E->name, nd->line);
        lp_status st = lp_tev_eval(E, nd->kids[i], &pos[(*npos)++]);
        if (st) return st;
    }
    return LP_OK;
}

/* The keyword argument `kw` of a call/filter node, evaluated; UNDEF when absent. */
lp_status lp_tev_kw(lp_tev *E, const lp_tnode *nd, const char *kw, lp_tv *out)
{
    out->kind = LP_TV_UNDEF;
    for (size_t i = 0; i < nd->nkids; i++)
        if (nd->kwnames[i] && lp_tev_str_eq(nd->kwnames[i], nd->kwlens[i], kw)) return lp_tev_eval(E, nd->kids[i], out);
    return LP_OK;
}

static lp_status getattr(lp_tev *E, lp_tv obj, const char *s, size_t n, int line, lp_tv *out)
{
    if (obj.kind == LP_TV_UNDEF)
        return lp_err(LP_STATUS_FORMAT, "%s: line %d: attribute '%.*s' of an undefined value", E->name, line, (int)n, s);
    out->kind = LP_TV_UNDEF;
    if (obj.kind == LP_TV_DICT) {
        const lp_tv *v = lp_tdict_get(obj.u.d, s, n);
        if (v) *out = *v;
    }
    return LP_OK;
}

static int64_t norm_index(int64_t i, size_t n) { return i < 0 ? i + (int64_t)n : i; }

static lp_status getitem(lp_tev *E, lp_tv obj, lp_tv key, int line, lp_tv *out)
{
    out->kind = LP_TV_UNDEF;
    if (obj.kind == LP_TV_UNDEF) return lp_err(LP_STATUS_FORMAT, "%s: line %d: subscript of an undefined value", E->name, line);
    if (obj.kind == LP_TV_DICT) {
        if (key.kind == LP_TV_STR) {
            const lp_tv *v = lp_tdict_get(obj.u.d, key.u.s.s, key.u.s.n);
            if (v) *out = *v;
        }
        return LP_OK;
    }
    if (key.kind != LP_TV_INT && key.kind != LP_TV_BOOL) return LP_OK; /* Jinja: undefined */
    if (obj.kind == LP_TV_LIST) {
        int64_t i = norm_index(key.u.i, obj.u.l->n);
        if (i >= 0 && (uint64_t)i < obj.u.l->n) *out = obj.u.l->v[i];
    } else if (obj.kind == LP_TV_STR) {
        lp_tlist *cp;
        lp_status st = lp_tev_code_points(E, obj, &cp);
        if (st) return st;
        int64_t i = norm_index(key.u.i, cp->n);
        if (i >= 0 && (uint64_t)i < cp->n) *out = cp->v[i];
    }
    return LP_OK;
}

static lp_status slice(lp_tev *E, const lp_tnode *nd, lp_tv obj, lp_tv *out)
{
    lp_tv parts[3] = {{0}, {0}, {0}};
    const lp_tnode *pn[3] = {nd->b, nd->c, nd->d};
    for (int k = 0; k < 3; k++) {
        if (!pn[k]) continue;
        lp_status st = lp_tev_eval(E, pn[k], &parts[k]);
        if (st) return st;
        if (parts[k].kind == LP_TV_NONE) parts[k].kind = LP_TV_UNDEF;
        else if (parts[k].kind != LP_TV_INT)
            return lp_err(LP_STATUS_FORMAT, "%s: line %d: slice bounds must be integers, not %s", E->name, nd->line, lp_tev_kind_name(parts[k]));
    }
    lp_tlist *src;
    if (obj.kind == LP_TV_LIST) src = obj.u.l;
    else if (obj.kind == LP_TV_STR) {
        lp_status st = lp_tev_code_points(E, obj, &src);
        if (st) return st;
    } else {
        return lp_err(LP_STATUS_FORMAT, "%s: line %d: cannot slice a %s", E->name, nd->line, lp_tev_kind_name(obj));
    }
    int64_t n = (int64_t)src->n, step = parts[2].kind == LP_TV_INT ? parts[2].u.i : 1;
    if (step == 0) return lp_err(LP_STATUS_FORMAT, "%s: line %d: slice step cannot be zero", E->name, nd->line);
    /* Python's slice.indices() */
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    int64_t start = step < 0 ? hi : lo, stop = step < 0 ? lo : hi;
    if (parts[0].kind == LP_TV_INT) {
        start = parts[0].u.i < 0 ? parts[0].u.i + n : parts[0].u.i;
        start = start < lo ? lo : start > hi ? hi : start;
    }
    if (parts[1].kind == LP_TV_INT) {
        stop = parts[1].u.i < 0 ? parts[1].u.i + n : parts[1].u.i;
        stop = stop < lo ? lo : stop > hi ? hi : stop;
    }
    lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
    if (!l) return lp_tev_oom(E);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        if (lp_tlist_push(E->a, l, src->v[i])) return lp_tev_oom(E);
    if (obj.kind == LP_TV_LIST) {
        out->kind = LP_TV_LIST, out->u.l = l;
        return LP_OK;
    }
    size_t total = 0;
    for (size_t i = 0; i < l->n; i++) total += l->v[i].u.s.n;
    char *p = lp_tarena_alloc(E->a, total + 1);
    if (!p) return lp_tev_oom(E);
    size_t o = 0;
    for (size_t i = 0; i < l->n; i++) memcpy(p + o, l->v[i].u.s.s, l->v[i].u.s.n), o += l->v[i].u.s.n;
    *out = lp_tv_str(p, total);
    return LP_OK;
}

lp_status lp_tev_iterate(lp_tev *E, lp_tv v, int line, lp_tlist **out)
{
    static lp_tlist empty;
    switch (v.kind) {
    case LP_TV_UNDEF: *out = &empty; return LP_OK; /* Jinja iterates undefined as empty */
    case LP_TV_LIST: *out = v.u.l; return LP_OK;
    case LP_TV_STR: return lp_tev_code_points(E, v, out);
    case LP_TV_DICT: {
        lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
        if (!l) return lp_tev_oom(E);
        for (size_t i = 0; i < v.u.d->n; i++)
            if (lp_tlist_push(E->a, l, v.u.d->keys[i])) return lp_tev_oom(E);
        *out = l;
        return LP_OK;
    }
    default: return lp_err(LP_STATUS_FORMAT, "%s: line %d: a %s is not iterable", E->name, line, lp_tev_kind_name(v));
    }
}

static lp_status call_func(lp_tev *E, const lp_tnode *call, lp_tv fn, lp_tv *out)
{
    int line = call->line;
    lp_tv a[3] = {{0}, {0}, {0}};
    size_t na;
    lp_status st;
    switch (fn.u.i) {
    case FN_RAISE: {
        if ((st = lp_tev_args(E, call, a, &na, 1))) return st;
        lp_tv msg;
        if ((st = lp_tev_to_str(E, a[0], &msg, line))) return st;
        /* errors are one line: control characters of the message print as spaces */
        char *m1 = lp_tarena_alloc(E->a, msg.u.s.n + 1);
        if (!m1) return lp_tev_oom(E);
        for (size_t i = 0; i < msg.u.s.n; i++) m1[i] = (unsigned char)msg.u.s.s[i] < 32 ? ' ' : msg.u.s.s[i];
        msg.u.s.s = m1;
        return lp_err(LP_STATUS_INVALID_ARG, "%s: line %d: raise_exception: %.*s", E->name, line, (int)(msg.u.s.n > 400 ? 400 : msg.u.s.n), msg.u.s.s);
    }
    case FN_STRFTIME: {
        if ((st = lp_tev_args(E, call, a, &na, 1))) return st;
        if (na != 1 || a[0].kind != LP_TV_STR || a[0].u.s.n > 200)
            return lp_err(LP_STATUS_FORMAT, "%s: line %d: strftime_now takes one format string", E->name, line);
        char fmt[256], buf[512];
        memcpy(fmt, a[0].u.s.s, a[0].u.s.n), fmt[a[0].u.s.n] = 0;
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t k = strftime(buf, sizeof buf, fmt, &tmv);
        int fail = 0;
        *out = lp_tev_new_str(E, buf, k, &fail);
        return fail ? lp_tev_oom(E) : LP_OK;
    }
    case FN_NAMESPACE:
    case FN_DICT: {
        lp_tdict *d = lp_tarena_alloc(E->a, sizeof *d);
        if (!d) return lp_tev_oom(E);
        d->ns = fn.u.i == FN_NAMESPACE;
        for (size_t i = 0; i < call->nkids; i++) {
            if (!call->kwnames[i])
                return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: namespace()/dict() with positional arguments is not supported", E->name, line);
            lp_tv v;
            if ((st = lp_tev_eval(E, call->kids[i], &v))) return st;
            if (lp_tdict_set(E->a, d, lp_tv_str(call->kwnames[i], call->kwlens[i]), v)) return lp_tev_oom(E);
        }
        out->kind = LP_TV_DICT, out->u.d = d;
        return LP_OK;
    }
    case FN_RANGE: {
        if ((st = lp_tev_args(E, call, a, &na, 3))) return st;
        for (size_t i = 0; i < na; i++)
            if (a[i].kind != LP_TV_INT) return lp_err(LP_STATUS_FORMAT, "%s: line %d: range takes integers", E->name, line);
        int64_t lo = na > 1 ? a[0].u.i : 0, hi = na > 1 ? a[1].u.i : na ? a[0].u.i : 0, step = na > 2 ? a[2].u.i : 1;
        if (!na || !step) return lp_err(LP_STATUS_FORMAT, "%s: line %d: bad arguments to range", E->name, line);
        lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
        if (!l) return lp_tev_oom(E);
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
            if (l->n >= LP_TMPL_MAX_ITERS) return lp_err(LP_STATUS_RANGE, "%s: line %d: range longer than %d", E->name, line, LP_TMPL_MAX_ITERS);
            if (lp_tlist_push(E->a, l, lp_tv_int(i))) return lp_tev_oom(E);
        }
        out->kind = LP_TV_LIST, out->u.l = l;
        return LP_OK;
    }
    }
    return lp_err(LP_STATUS_FORMAT, "%s: line %d: not callable", E->name, line);
}

static int is_num(lp_tv v) { return v.kind == LP_TV_INT || v.kind == LP_TV_BOOL || v.kind == LP_TV_FLOAT; }
static double num(lp_tv v) { return v.kind == LP_TV_FLOAT ? v.u.f : (double)v.u.i; }

static int str_cmp(lp_tv a, lp_tv b)
{
    size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    int c = n ? memcmp(a.u.s.s, b.u.s.s, n) : 0;
    return c ? c : (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
}

static lp_status type_error(lp_tev *E, const lp_tnode *nd, lp_tv a, lp_tv b)
{
    return lp_err(LP_STATUS_FORMAT, "%s: line %d: unsupported operand types for '%s': %s and %s", E->name, nd->line, nd->op,
                  lp_tev_kind_name(a), lp_tev_kind_name(b));
}

static lp_status contains(lp_tev *E, const lp_tnode *nd, lp_tv item, lp_tv box, int *r)
{
    *r = 0;
    if (box.kind == LP_TV_STR) {
        if (item.kind != LP_TV_STR) return type_error(E, nd, item, box);
        if (!item.u.s.n) return *r = 1, LP_OK;
        for (size_t j = 0; j + item.u.s.n <= box.u.s.n && !*r; j++) *r = !memcmp(box.u.s.s + j, item.u.s.s, item.u.s.n);
    } else if (box.kind == LP_TV_LIST) {
        for (size_t j = 0; j < box.u.l->n && !*r; j++) *r = lp_tv_equal(item, box.u.l->v[j]);
    } else if (box.kind == LP_TV_DICT) {
        *r = item.kind == LP_TV_STR && lp_tdict_get(box.u.d, item.u.s.s, item.u.s.n) != NULL;
    } else if (box.kind != LP_TV_UNDEF) {
        return type_error(E, nd, item, box);
    }
    return LP_OK;
}

static lp_status arith(lp_tev *E, const lp_tnode *nd, lp_tv a, lp_tv b, lp_tv *out)
{
    const char *op = nd->op;
    if (a.kind == LP_TV_UNDEF || b.kind == LP_TV_UNDEF)
        return lp_err(LP_STATUS_FORMAT, "%s: line %d: '%s' on an undefined value", E->name, nd->line, op);
    if (op[0] == '+' && a.kind == b.kind && (a.kind == LP_TV_STR || a.kind == LP_TV_LIST)) {
        if (a.kind == LP_TV_STR) {
            if (a.u.s.n + b.u.s.n > LP_TMPL_MAX_OUTPUT) return lp_err(LP_STATUS_RANGE, "%s: line %d: string too long", E->name, nd->line);
            char *p = lp_tarena_alloc(E->a, a.u.s.n + b.u.s.n + 1);
            if (!p) return lp_tev_oom(E);
            if (a.u.s.n) memcpy(p, a.u.s.s, a.u.s.n);
            if (b.u.s.n) memcpy(p + a.u.s.n, b.u.s.s, b.u.s.n);
            *out = lp_tv_str(p, a.u.s.n + b.u.s.n);
            return LP_OK;
        }
        lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
        if (!l) return lp_tev_oom(E);
        for (size_t i = 0; i < a.u.l->n; i++)
            if (lp_tlist_push(E->a, l, a.u.l->v[i])) return lp_tev_oom(E);
        for (size_t i = 0; i < b.u.l->n; i++)
            if (lp_tlist_push(E->a, l, b.u.l->v[i])) return lp_tev_oom(E);
        out->kind = LP_TV_LIST, out->u.l = l;
        return LP_OK;
    }
    if (!is_num(a) || !is_num(b)) return type_error(E, nd, a, b);
    int ints = a.kind != LP_TV_FLOAT && b.kind != LP_TV_FLOAT;
    if (ints && strcmp(op, "/") && strcmp(op, "**")) {
        int64_t x = a.u.i, y = b.u.i, r = 0;
        int ovf = 0;
        if (op[0] == '+') ovf = __builtin_add_overflow(x, y, &r);
        else if (op[0] == '-') ovf = __builtin_sub_overflow(x, y, &r);
        else if (op[0] == '*') ovf = __builtin_mul_overflow(x, y, &r);
        else { /* // and %: Python floors */
            if (!y) return lp_err(LP_STATUS_FORMAT, "%s: line %d: division by zero", E->name, nd->line);
            if (x == INT64_MIN && y == -1) ovf = 1;
            else {
                int64_t q = x / y, m = x % y;
                if (m && ((m < 0) != (y < 0))) q--, m += y;
                r = op[0] == '%' ? m : q;
            }
        }
        if (ovf) return lp_err(LP_STATUS_RANGE, "%s: line %d: integer overflow in '%s'", E->name, nd->line, op);
        *out = lp_tv_int(r);
        return LP_OK;
    }
    double x = num(a), y = num(b), r;
    if (op[0] == '+') r = x + y;
    else if (op[0] == '-') r = x - y;
    else if (!strcmp(op, "**")) {
        if (ints && b.u.i >= 0 && b.u.i < 64) {
            int64_t acc = 1;
            for (int64_t k = 0; k < b.u.i; k++)
                if (__builtin_mul_overflow(acc, a.u.i, &acc)) return lp_err(LP_STATUS_RANGE, "%s: line %d: integer overflow in '**'", E->name, nd->line);
            *out = lp_tv_int(acc);
            return LP_OK;
        }
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: '**' is supported for small non-negative integer exponents only", E->name, nd->line);
    } else if (op[0] == '*') r = x * y;
    else {
        if (y == 0) return lp_err(LP_STATUS_FORMAT, "%s: line %d: division by zero", E->name, nd->line);
        r = x / y;
        if (!strcmp(op, "//")) r = __builtin_floor(r);
        else if (op[0] == '%') r = x - __builtin_floor(x / y) * y;
    }
    out->kind = LP_TV_FLOAT, out->u.f = r;
    return LP_OK;
}

static lp_status eval_binary(lp_tev *E, const lp_tnode *nd, lp_tv *out)
{
    const char *op = nd->op;
    lp_tv a, b;
    lp_status st = lp_tev_eval(E, nd->a, &a);
    if (st) return st;
    if (!strcmp(op, "and") || !strcmp(op, "or")) {
        int t = lp_tv_truthy(a);
        if (op[0] == 'a' ? !t : t) return *out = a, LP_OK;
        return lp_tev_eval(E, nd->b, out);
    }
    if ((st = lp_tev_eval(E, nd->b, &b))) return st;
    if (!strcmp(op, "==") || !strcmp(op, "!=")) return *out = lp_tv_bool(lp_tv_equal(a, b) == (op[0] == '=')), LP_OK;
    if (!strcmp(op, "in") || !strcmp(op, "not in")) {
        int r;
        if ((st = contains(E, nd, a, b, &r))) return st;
        *out = lp_tv_bool(op[0] == 'i' ? r : !r);
        return LP_OK;
    }
    if (op[0] == '<' || op[0] == '>') {
        int c;
        if (is_num(a) && is_num(b)) c = num(a) < num(b) ? -1 : num(a) > num(b);
        else if (a.kind == LP_TV_STR && b.kind == LP_TV_STR) c = str_cmp(a, b);
        else return type_error(E, nd, a, b);
        int r = op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
        *out = lp_tv_bool(r);
        return LP_OK;
    }
    if (op[0] == '~') {
        lp_tv sa, sb;
        if ((st = lp_tev_to_str(E, a, &sa, nd->line)) || (st = lp_tev_to_str(E, b, &sb, nd->line))) return st;
        lp_tnode plus = *nd;
        plus.op = "+";
        return arith(E, &plus, sa, sb, out);
    }
    return arith(E, nd, a, b, out);
}

lp_status lp_tev_eval(lp_tev *E, const lp_tnode *nd, lp_tv *out)
{
    if (++E->depth > LP_TMPL_MAX_DEPTH * 2) return lp_err(LP_STATUS_RANGE, "%s: line %d: evaluation nested too deeply", E->name, nd->line);
    lp_status st = LP_OK;
    lp_tv v;
    switch (nd->kind) {
    case LP_TN_LIT: *out = nd->v; break;
    case LP_TN_NAME: *out = lookup(E, nd->s, nd->n); break;
    case LP_TN_LIST: {
        lp_tlist *l = lp_tarena_alloc(E->a, sizeof *l);
        if (!l) return lp_tev_oom(E);
        for (size_t i = 0; i < nd->nkids && !st; i++)
            if (!(st = lp_tev_eval(E, nd->kids[i], &v)) && lp_tlist_push(E->a, l, v)) st = lp_tev_oom(E);
        out->kind = LP_TV_LIST, out->u.l = l;
        break;
    }
    case LP_TN_DICT: {
        lp_tdict *d = lp_tarena_alloc(E->a, sizeof *d);
        if (!d) return lp_tev_oom(E);
        for (size_t i = 0; i + 1 < nd->nkids && !st; i += 2) {
            lp_tv k;
            if ((st = lp_tev_eval(E, nd->kids[i], &k)) || (st = lp_tev_eval(E, nd->kids[i + 1], &v))) break;
            if (k.kind != LP_TV_STR) st = lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: dict keys must be strings", E->name, nd->line);
            else if (lp_tdict_set(E->a, d, k, v)) st = lp_tev_oom(E);
        }
        out->kind = LP_TV_DICT, out->u.d = d;
        break;
    }
    case LP_TN_ATTR:
        if (!(st = lp_tev_eval(E, nd->a, &v))) st = getattr(E, v, nd->s, nd->n, nd->line, out);
        break;
    case LP_TN_ITEM: {
        lp_tv k;
        if (!(st = lp_tev_eval(E, nd->a, &v)) && !(st = lp_tev_eval(E, nd->b, &k))) st = getitem(E, v, k, nd->line, out);
        break;
    }
    case LP_TN_SLICE:
        if (!(st = lp_tev_eval(E, nd->a, &v))) st = slice(E, nd, v, out);
        break;
    case LP_TN_CALL:
        if (nd->a->kind == LP_TN_ATTR) {
            if (!(st = lp_tev_eval(E, nd->a->a, &v))) {
                if (v.kind == LP_TV_UNDEF)
                    st = lp_err(LP_STATUS_FORMAT, "%s: line %d: method '%.*s' of an undefined value", E->name, nd->line, (int)nd->a->n, nd->a->s);
                else
                    st = lp_tev_method(E, nd, v, nd->a->s, nd->a->n, out);
            }
        } else if (!(st = lp_tev_eval(E, nd->a, &v))) {
            if (v.kind != LP_TV_FUNC) {
                if (nd->a->kind == LP_TN_NAME)
                    st = lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: unknown function '%.*s'", E->name, nd->line, (int)nd->a->n, nd->a->s);
                else
                    st = lp_err(LP_STATUS_FORMAT, "%s: line %d: a %s is not callable", E->name, nd->line, lp_tev_kind_name(v));
            } else {
                st = call_func(E, nd, v, out);
            }
        }
        break;
    case LP_TN_FILTER:
        if (!(st = lp_tev_eval(E, nd->a, &v))) st = lp_tev_filter(E, nd, v, out);
        break;
    case LP_TN_TEST: {
        int r = 0;
        if (!(st = lp_tev_eval(E, nd->a, &v)) && !(st = lp_tev_test(E, nd, v, &r))) *out = lp_tv_bool(r);
        break;
    }
    case LP_TN_UNARY:
        if ((st = lp_tev_eval(E, nd->a, &v))) break;
        if (nd->op[0] == 'n') *out = lp_tv_bool(!lp_tv_truthy(v));
        else if (v.kind == LP_TV_INT && !(nd->op[0] == '-' && v.u.i == INT64_MIN)) *out = lp_tv_int(nd->op[0] == '-' ? -v.u.i : v.u.i);
        else if (v.kind == LP_TV_FLOAT) *out = v, out->u.f = nd->op[0] == '-' ? -v.u.f : v.u.f;
        else st = lp_err(LP_STATUS_FORMAT, "%s: line %d: unary '%s' on a %s", E->name, nd->line, nd->op, lp_tev_kind_name(v));
        break;
    case LP_TN_BINARY: st = eval_binary(E, nd, out); break;
    case LP_TN_COND:
        if ((st = lp_tev_eval(E, nd->a, &v))) break;
        if (lp_tv_truthy(v)) st = lp_tev_eval(E, nd->b, out);
        else if (nd->c) st = lp_tev_eval(E, nd->c, out);
        else out->kind = LP_TV_UNDEF;
        break;
    default: st = lp_err(LP_STATUS_FORMAT, "%s: line %d: not an expression", E->name, nd->line);
    }
    E->depth--;
    return st;
}

/* ---- statements ---- */

static lp_status exec(lp_tev *E, const lp_tnode *nd);

static lp_status exec_for(lp_tev *E, const lp_tnode *nd)
{
    lp_tv it;
    lp_status st = lp_tev_eval(E, nd->a, &it);
    if (st) return st;
    lp_tlist *items;
    if ((st = lp_tev_iterate(E, it, nd->line, &items))) return st;
    if (nd->d) { /* "for x in xs if cond": filter first, loop.length counts what is left */
        lp_tlist *kept = lp_tarena_alloc(E->a, sizeof *kept);
        if (!kept || (st = push_frame(E))) return kept ? st : lp_tev_oom(E);
        for (size_t i = 0; i < items->n && !st; i++) {
            lp_tv c;
            if ((st = set_var(E, nd->s, nd->n, items->v[i])) || (st = lp_tev_eval(E, nd->d, &c))) break;
            if (lp_tv_truthy(c) && lp_tlist_push(E->a, kept, items->v[i])) st = lp_tev_oom(E);
        }
        E->nframes--;
        if (st) return st;
        items = kept;
    }
    if (!items->n) return nd->c ? exec(E, nd->c) : LP_OK;
    for (size_t i = 0; i < items->n; i++) {
        if (++E->iters > LP_TMPL_MAX_ITERS)
            return lp_err(LP_STATUS_RANGE, "%s: line %d: more than %d loop iterations", E->name, nd->line, LP_TMPL_MAX_ITERS);
        if ((st = push_frame(E))) return st;
        lp_tv x = items->v[i];
        if (nd->s2) {
            if (x.kind != LP_TV_LIST || x.u.l->n != 2) {
                E->nframes--;
                return lp_err(LP_STATUS_FORMAT, "%s: line %d: cannot unpack a %s into two loop variables", E->name, nd->line, lp_tev_kind_name(x));
            }
            if (!(st = set_var(E, nd->s, nd->n, x.u.l->v[0]))) st = set_var(E, nd->s2, nd->n2, x.u.l->v[1]);
        } else {
            st = set_var(E, nd->s, nd->n, x);
        }
        lp_tdict *loop = lp_tarena_alloc(E->a, sizeof *loop);
        if (!loop) st = lp_tev_oom(E);
        int64_t n = (int64_t)items->n, k = (int64_t)i;
        struct {
            const char *k;
            lp_tv v;
        } f[] = {{"index", lp_tv_int(k + 1)},
                 {"index0", lp_tv_int(k)},
                 {"revindex", lp_tv_int(n - k)},
                 {"revindex0", lp_tv_int(n - k - 1)},
                 {"first", lp_tv_bool(k == 0)},
                 {"last", lp_tv_bool(k == n - 1)},
                 {"length", lp_tv_int(n)},
                 {"previtem", k > 0 ? items->v[k - 1] : (lp_tv){.kind = LP_TV_UNDEF}},
                 {"nextitem", k + 1 < n ? items->v[k + 1] : (lp_tv){.kind = LP_TV_UNDEF}}};
        for (size_t j = 0; j < sizeof f / sizeof *f && !st; j++)
            if (lp_tdict_set(E->a, loop, lp_tv_str(f[j].k, strlen(f[j].k)), f[j].v)) st = lp_tev_oom(E);
        if (!st) st = set_var(E, "loop", 4, (lp_tv){.kind = LP_TV_DICT, .u.d = loop});
        if (!st) st = exec(E, nd->b);
        E->nframes--;
        if (st) return st;
        E->cont = 0;
        if (E->brk) {
            E->brk = 0;
            break;
        }
    }
    return LP_OK;
}

static lp_status exec(lp_tev *E, const lp_tnode *nd)
{
    if (++E->depth > LP_TMPL_MAX_DEPTH * 2) return lp_err(LP_STATUS_RANGE, "%s: line %d: evaluation nested too deeply", E->name, nd->line);
    lp_status st = LP_OK;
    lp_tv v;
    switch (nd->kind) {
    case LP_TN_BODY:
        for (size_t i = 0; i < nd->nkids && !st && !E->brk && !E->cont; i++) st = exec(E, nd->kids[i]);
        break;
    case LP_TN_TEXT:
        if (lp_tbuf_put(E->out, nd->s, nd->n)) st = lp_tev_out_fail(E, nd->line);
        break;
    case LP_TN_PRINT:
        if (!(st = lp_tev_eval(E, nd->a, &v)) && lp_tv_write_str(E->out, v)) st = lp_tev_out_fail(E, nd->line);
        break;
    case LP_TN_IF:
        if ((st = lp_tev_eval(E, nd->a, &v))) break;
        if (lp_tv_truthy(v)) st = exec(E, nd->b);
        else if (nd->c) st = exec(E, nd->c);
        break;
    case LP_TN_FOR: st = exec_for(E, nd); break;
    case LP_TN_SET:
        if ((st = lp_tev_eval(E, nd->a, &v))) break;
        if (nd->s2) {
            lp_tv obj = lookup(E, nd->s, nd->n);
            if (obj.kind != LP_TV_DICT || !obj.u.d->ns)
                st = lp_err(LP_STATUS_FORMAT, "%s: line %d: cannot set attribute '%.*s' of a %s (only of a namespace)", E->name, nd->line,
                            (int)nd->n2, nd->s2, lp_tev_kind_name(obj));
            else if (lp_tdict_set(E->a, obj.u.d, lp_tv_str(nd->s2, nd->n2), v))
                st = lp_tev_oom(E);
        } else {
            st = set_var(E, nd->s, nd->n, v);
        }
        break;
    case LP_TN_BREAK: E->brk = 1; break;
    case LP_TN_CONTINUE: E->cont = 1; break;
    default: st = lp_err(LP_STATUS_FORMAT, "%s: line %d: not a statement", E->name, nd->line);
    }
    E->depth--;
    return st;
}

lp_status lp_tmpl_render(lp_tarena *a, const char *name, const lp_tnode *root, lp_tdict *globals, lp_tbuf *out)
{
    lp_tev E = {.a = a, .name = name, .out = out};
    lp_status st = push_frame(&E);
    if (st) return st;
    E.frames[0] = globals;
    if ((st = push_frame(&E))) return st; /* top-level set writes here, globals stay as given */
    return exec(&E, root);
}
