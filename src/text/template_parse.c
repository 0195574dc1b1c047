/* Chat-template parser: tokens to a syntax tree. Statements: if/elif/else, for (with
 * loop else and an inline filter), set (names and namespace attributes), break/continue
 * and transformers' generation block; expressions with Jinja's precedence (conditional,
 * or, and, not, comparisons and in, ~, + -, * / // %, **, unary, filters and tests bound
 * to their operand, postfix attribute/subscript/slice/call). Anything else is refused
 * with the construct and line named. */
#include <stdio.h>
#include <string.h>

#include "template_eval.h"

typedef struct parser {
    lp_tarena *a;
    const char *name;
    const lp_ttok *t;
    size_t n, i;
    int depth;
    int loops; /* for-loops open around the current position */
    size_t nodes;
} parser;

static const lp_ttok *cur(parser *P) { return &P->t[P->i]; }
static int is_op(const lp_ttok *t, const char *op) { return t->kind == LP_TT_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n); }
static int is_name(const lp_ttok *t, const char *nm) { return t->kind == LP_TT_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n); }

static const char *tok_desc(const lp_ttok *t)
{
    switch (t->kind) {
    case LP_TT_TEXT: return "template text";
    case LP_TT_VAR_BEGIN: return "'{{'";
    case LP_TT_VAR_END: return "'}}'";
    case LP_TT_BLOCK_BEGIN: return "'{%'";
    case LP_TT_BLOCK_END: return "'%}'";
    case LP_TT_NAME: return "a name";
    case LP_TT_STRING: return "a string";
    case LP_TT_INT: case LP_TT_FLOAT: return "a number";
    case LP_TT_OP: return "an operator";
    case LP_TT_EOF: return "the end of the template";
    }
    return "?";
}

static lp_status fail(parser *P, const char *what)
{
    const lp_ttok *t = cur(P);
    if (t->kind == LP_TT_NAME || t->kind == LP_TT_OP)
        return lp_err(LP_STATUS_FORMAT, "%s: line %d: %s, found '%.*s'", P->name, t->line, what, (int)(t->n > 40 ? 40 : t->n), t->s);
    return lp_err(LP_STATUS_FORMAT, "%s: line %d: %s, found %s", P->name, t->line, what, tok_desc(t));
}

static lp_tnode *node(parser *P, lp_tnode_kind k, int line)
{
    if (++P->nodes > LP_TMPL_MAX_NODES) {
        lp_err(LP_STATUS_RANGE, "%s: line %d: template has more than %d nodes", P->name, line, LP_TMPL_MAX_NODES);
        return NULL;
    }
    lp_tnode *nd = lp_tarena_alloc(P->a, sizeof *nd);
    if (!nd) {
        lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing the template", P->name);
        return NULL;
    }
    nd->kind = k, nd->line = line;
    return nd;
}

/* Appends a child (with an optional keyword name) to nd->kids. */
static lp_status add_kid(parser *P, lp_tnode *nd, lp_tnode *kid, const char *kw, size_t kwlen)
{
    if ((nd->nkids & (nd->nkids - 1)) == 0) { /* grow at powers of two */
        size_t cap = nd->nkids ? 2 * nd->nkids : 1;
        lp_tnode **k2 = lp_tarena_alloc(P->a, cap * sizeof *k2);
        const char **n2 = lp_tarena_alloc(P->a, cap * sizeof *n2);
        size_t *l2 = lp_tarena_alloc(P->a, cap * sizeof *l2);
        if (!k2 || !n2 || !l2) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing the template", P->name);
        if (nd->nkids) {
            memcpy(k2, nd->kids, nd->nkids * sizeof *k2);
            memcpy(n2, nd->kwnames, nd->nkids * sizeof *n2);
            memcpy(l2, nd->kwlens, nd->nkids * sizeof *l2);
        }
        nd->kids = k2, nd->kwnames = n2, nd->kwlens = l2;
    }
    nd->kids[nd->nkids] = kid;
    nd->kwnames[nd->nkids] = kw;
    nd->kwlens[nd->nkids] = kwlen;
    nd->nkids++;
    return LP_OK;
}

static lp_status expr(parser *P, lp_tnode **out);
static lp_status or_expr(parser *P, lp_tnode **out);
static lp_status unary(parser *P, lp_tnode **out);

static lp_status expect_op(parser *P, const char *op, const char *ctx)
{
    if (!is_op(cur(P), op)) {
        char what[96];
        snprintf(what, sizeof what, "expected '%s' %s", op, ctx);
        return fail(P, what);
    }
    P->i++;
    return LP_OK;
}

/* Call arguments after '(' up to ')': positional then name=value. */
static lp_status call_args(parser *P, lp_tnode *nd)
{
    while (!is_op(cur(P), ")")) {
        const char *kw = NULL;
        size_t kwlen = 0;
        if (cur(P)->kind == LP_TT_NAME && is_op(&P->t[P->i + 1], "=")) {
            kw = cur(P)->s, kwlen = cur(P)->n;
            P->i += 2;
        }
        lp_tnode *arg;
        lp_status st = expr(P, &arg);
        if (st) return st;
        if ((st = add_kid(P, nd, arg, kw, kwlen))) return st;
        if (is_op(cur(P), ",")) P->i++;
        else if (!is_op(cur(P), ")")) return fail(P, "expected ',' or ')' in an argument list");
    }
    P->i++;
    return LP_OK;
}

static lp_status primary(parser *P, lp_tnode **out)
{
    const lp_ttok *t = cur(P);
    lp_tnode *nd = NULL;
    lp_status st;
    if (t->kind == LP_TT_NAME) {
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            if (!(nd = node(P, LP_TN_LIT, t->line))) return LP_STATUS_NO_MEMORY;
            nd->v = lp_tv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (is_name(t, "none") || is_name(t, "None")) {
            if (!(nd = node(P, LP_TN_LIT, t->line))) return LP_STATUS_NO_MEMORY;
            nd->v.kind = LP_TV_NONE;
        } else {
            if (!(nd = node(P, LP_TN_NAME, t->line))) return LP_STATUS_NO_MEMORY;
            nd->s = t->s, nd->n = t->n;
        }
        P->i++;
    } else if (t->kind == LP_TT_STRING) {
        /* adjacent literals concatenate, as in Python */
        size_t total = 0, j = P->i;
        while (P->t[j].kind == LP_TT_STRING) total += P->t[j++].n;
        char *buf = lp_tarena_alloc(P->a, total + 1);
        if (!buf || !(nd = node(P, LP_TN_LIT, t->line))) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", P->name);
        size_t o = 0;
        for (; P->i < j; P->i++) memcpy(buf + o, P->t[P->i].s, P->t[P->i].n), o += P->t[P->i].n;
        nd->v = lp_tv_str(buf, total);
    } else if (t->kind == LP_TT_INT || t->kind == LP_TT_FLOAT) {
        if (!(nd = node(P, LP_TN_LIT, t->line))) return LP_STATUS_NO_MEMORY;
        if (t->kind == LP_TT_INT) nd->v = lp_tv_int(t->i);
        else nd->v.kind = LP_TV_FLOAT, nd->v.u.f = t->f;
        P->i++;
    } else if (is_op(t, "(")) {
        P->i++;
        if ((st = expr(P, &nd))) return st;
        if (is_op(cur(P), ",")) return fail(P, "tuples are not supported");
        if ((st = expect_op(P, ")", "to close '('"))) return st;
    } else if (is_op(t, "[")) {
        P->i++;
        if (!(nd = node(P, LP_TN_LIST, t->line))) return LP_STATUS_NO_MEMORY;
        while (!is_op(cur(P), "]")) {
            lp_tnode *e;
            if ((st = expr(P, &e)) || (st = add_kid(P, nd, e, NULL, 0))) return st;
            if (is_op(cur(P), ",")) P->i++;
            else if (!is_op(cur(P), "]")) return fail(P, "expected ',' or ']' in a list");
        }
        P->i++;
    } else if (is_op(t, "{")) {
        P->i++;
        if (!(nd = node(P, LP_TN_DICT, t->line))) return LP_STATUS_NO_MEMORY;
        while (!is_op(cur(P), "}")) {
            lp_tnode *k, *v;
            if ((st = expr(P, &k))) return st;
            if ((st = expect_op(P, ":", "in a dict"))) return st;
            if ((st = expr(P, &v)) || (st = add_kid(P, nd, k, NULL, 0)) || (st = add_kid(P, nd, v, NULL, 0))) return st;
            if (is_op(cur(P), ",")) P->i++;
            else if (!is_op(cur(P), "}")) return fail(P, "expected ',' or '}' in a dict");
        }
        P->i++;
    } else {
        return fail(P, "expected an expression");
    }
    /* postfix: .name, [index], [a:b:c], (args) */
    for (;;) {
        const lp_ttok *p = cur(P);
        if (is_op(p, ".")) {
            P->i++;
            if (cur(P)->kind != LP_TT_NAME && cur(P)->kind != LP_TT_INT) return fail(P, "expected an attribute name after '.'");
            lp_tnode *at = node(P, LP_TN_ATTR, p->line);
            if (!at) return LP_STATUS_NO_MEMORY;
            at->a = nd;
            if (cur(P)->kind == LP_TT_INT) { /* x.0 is x[0] in Jinja */
                at->kind = LP_TN_ITEM;
                if (!(at->b = node(P, LP_TN_LIT, p->line))) return LP_STATUS_NO_MEMORY;
                at->b->v = lp_tv_int(cur(P)->i);
            } else {
                at->s = cur(P)->s, at->n = cur(P)->n;
            }
            P->i++;
            nd = at;
        } else if (is_op(p, "[")) {
            P->i++;
            lp_tnode *parts[3] = {NULL, NULL, NULL};
            int k = 0, colons = 0;
            while (!is_op(cur(P), "]")) {
                if (is_op(cur(P), ":")) {
                    if (++colons > 2) return fail(P, "too many ':' in a slice");
                    k++, P->i++;
                    continue;
                }
                if (parts[k]) return fail(P, "expected ':' or ']' in a subscript");
                if ((st = expr(P, &parts[k]))) return st;
            }
            P->i++;
            lp_tnode *it = node(P, colons ? LP_TN_SLICE : LP_TN_ITEM, p->line);
            if (!it) return LP_STATUS_NO_MEMORY;
            if (!colons && !parts[0]) return lp_err(LP_STATUS_FORMAT, "%s: line %d: empty subscript '[]'", P->name, p->line);
            it->a = nd, it->b = parts[0], it->c = parts[1], it->d = parts[2];
            nd = it;
        } else if (is_op(p, "(")) {
            P->i++;
            lp_tnode *c = node(P, LP_TN_CALL, p->line);
            if (!c) return LP_STATUS_NO_MEMORY;
            c->a = nd;
            if ((st = call_args(P, c))) return st;
            nd = c;
        } else {
            break;
        }
    }
    *out = nd;
    return LP_OK;
}

/* A primary followed by any number of "| filter(args)" and "is [not] test(args)". */
static lp_status filtered(parser *P, lp_tnode **out)
{
    lp_status st = primary(P, out);
    if (st) return st;
    for (;;) {
        const lp_ttok *t = cur(P);
        int is_filter = is_op(t, "|"), is_test = is_name(t, "is");
        if (!is_filter && !is_test) return LP_OK;
        P->i++;
        lp_tnode *f = node(P, is_filter ? LP_TN_FILTER : LP_TN_TEST, t->line);
        if (!f) return LP_STATUS_NO_MEMORY;
        if (is_test && is_name(cur(P), "not")) f->op = "not", P->i++;
        /* tests named by keywords: none, true, false */
        if (cur(P)->kind != LP_TT_NAME) return fail(P, is_filter ? "expected a filter name after '|'" : "expected a test name after 'is'");
        f->s = cur(P)->s, f->n = cur(P)->n, f->a = *out;
        if (is_filter ? !lp_tmpl_filter_known(f->s, f->n) : !lp_tmpl_test_known(f->s, f->n))
            return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: unknown %s '%.*s'", P->name, t->line, is_filter ? "filter" : "test",
                          (int)(f->n > 40 ? 40 : f->n), f->s);
        P->i++;
        if (is_op(cur(P), "(")) {
            P->i++;
            if ((st = call_args(P, f))) return st;
        } else if (is_test && (cur(P)->kind == LP_TT_STRING || cur(P)->kind == LP_TT_INT)) {
            lp_tnode *arg; /* "is divisibleby 3": one argument without parentheses */
            if ((st = primary(P, &arg)) || (st = add_kid(P, f, arg, NULL, 0))) return st;
        }
        *out = f;
    }
}

static lp_status unary(parser *P, lp_tnode **out)
{
    const lp_ttok *t = cur(P);
    if (is_op(t, "-") || is_op(t, "+")) {
        if (++P->depth > LP_TMPL_MAX_DEPTH) return lp_err(LP_STATUS_RANGE, "%s: line %d: expression nested too deeply", P->name, t->line);
        P->i++;
        lp_tnode *nd = node(P, LP_TN_UNARY, t->line);
        if (!nd) return LP_STATUS_NO_MEMORY;
        nd->op = t->s[0] == '-' ? "-" : "+";
        lp_status st = unary(P, &nd->a);
        P->depth--;
        *out = nd;
        return st;
    }
    return filtered(P, out);
}

static lp_status binary(parser *P, lp_tnode **out, lp_tnode *l, const char *op, lp_tnode *r, int line)
{
    lp_tnode *nd = node(P, LP_TN_BINARY, line);
    if (!nd) return LP_STATUS_NO_MEMORY;
    nd->a = l, nd->b = r, nd->op = op;
    *out = nd;
    return LP_OK;
}

static lp_status power(parser *P, lp_tnode **out)
{
    lp_status st = unary(P, out);
    while (!st && is_op(cur(P), "**")) {
        int line = cur(P)->line;
        P->i++;
        lp_tnode *r;
        if ((st = unary(P, &r))) return st;
        st = binary(P, out, *out, "**", r, line);
    }
    return st;
}

static lp_status mul(parser *P, lp_tnode **out)
{
    lp_status st = power(P, out);
    for (;;) {
        if (st) return st;
        const lp_ttok *t = cur(P);
        const char *op = is_op(t, "*") ? "*" : is_op(t, "/") ? "/" : is_op(t, "//") ? "//" : is_op(t, "%") ? "%" : NULL;
        if (!op) return LP_OK;
        P->i++;
        lp_tnode *r;
        if ((st = power(P, &r))) return st;
        st = binary(P, out, *out, op, r, t->line);
    }
}

static lp_status add(parser *P, lp_tnode **out)
{
    lp_status st = mul(P, out);
    for (;;) {
        if (st) return st;
        const lp_ttok *t = cur(P);
        const char *op = is_op(t, "+") ? "+" : is_op(t, "-") ? "-" : NULL;
        if (!op) return LP_OK;
        P->i++;
        lp_tnode *r;
        if ((st = mul(P, &r))) return st;
        st = binary(P, out, *out, op, r, t->line);
    }
}

static lp_status concat(parser *P, lp_tnode **out)
{
    lp_status st = add(P, out);
    while (!st && is_op(cur(P), "~")) {
        int line = cur(P)->line;
        P->i++;
        lp_tnode *r;
        if ((st = add(P, &r))) return st;
        st = binary(P, out, *out, "~", r, line);
    }
    return st;
}

static lp_status compare(parser *P, lp_tnode **out)
{
    lp_status st = concat(P, out);
    for (;;) {
        if (st) return st;
        const lp_ttok *t = cur(P);
        static const char *const cmp[] = {"==", "!=", "<", ">", "<=", ">="};
        const char *op = NULL;
        for (size_t k = 0; k < 6; k++)
            if (is_op(t, cmp[k])) op = cmp[k];
        if (is_name(t, "in")) op = "in";
        if (is_name(t, "not") && is_name(&P->t[P->i + 1], "in")) op = "not in", P->i++;
        if (!op) return LP_OK;
        P->i++;
        lp_tnode *r;
        if ((st = concat(P, &r))) return st;
        st = binary(P, out, *out, op, r, t->line);
    }
}

static lp_status not_expr(parser *P, lp_tnode **out)
{
    const lp_ttok *t = cur(P);
    if (is_name(t, "not")) {
        if (++P->depth > LP_TMPL_MAX_DEPTH) return lp_err(LP_STATUS_RANGE, "%s: line %d: expression nested too deeply", P->name, t->line);
        P->i++;
        lp_tnode *nd = node(P, LP_TN_UNARY, t->line);
        if (!nd) return LP_STATUS_NO_MEMORY;
        nd->op = "not";
        lp_status st = not_expr(P, &nd->a);
        P->depth--;
        *out = nd;
        return st;
    }
    return compare(P, out);
}

static lp_status and_expr(parser *P, lp_tnode **out)
{
    lp_status st = not_expr(P, out);
    while (!st && is_name(cur(P), "and")) {
        int line = cur(P)->line;
        P->i++;
        lp_tnode *r;
        if ((st = not_expr(P, &r))) return st;
        st = binary(P, out, *out, "and", r, line);
    }
    return st;
}

static lp_status or_expr(parser *P, lp_tnode **out)
{
    lp_status st = and_expr(P, out);
    while (!st && is_name(cur(P), "or")) {
        int line = cur(P)->line;
        P->i++;
        lp_tnode *r;
        if ((st = and_expr(P, &r))) return st;
        st = binary(P, out, *out, "or", r, line);
    }
    return st;
}

/* Full expression: or_expr [if or_expr [else expr]]. Depth-bounded: every nesting
 * (parentheses, lists, calls) passes through here. */
static lp_status expr(parser *P, lp_tnode **out)
{
    if (++P->depth > LP_TMPL_MAX_DEPTH)
        return lp_err(LP_STATUS_RANGE, "%s: line %d: expression nested too deeply", P->name, cur(P)->line);
    lp_status st = or_expr(P, out);
    if (!st && is_name(cur(P), "if")) {
        lp_tnode *c = node(P, LP_TN_COND, cur(P)->line);
        if (!c) return LP_STATUS_NO_MEMORY;
        P->i++;
        c->b = *out;
        if ((st = or_expr(P, &c->a))) return st;
        if (is_name(cur(P), "else")) {
            P->i++;
            st = expr(P, &c->c);
        }
        *out = c;
    }
    P->depth--;
    return st;
}

/* ---- statements ---- */

static lp_status end_block(parser *P, const char *tag)
{
    if (cur(P)->kind != LP_TT_BLOCK_END) {
        char what[80];
        snprintf(what, sizeof what, "expected '%%}' to end the '%s' tag", tag);
        return fail(P, what);
    }
    P->i++;
    return LP_OK;
}

/* Parses statements until a block tag whose name is one of `ends` (NULL-terminated);
 * leaves the parser on that name. ends NULL: until the end of the template. */
static lp_status body(parser *P, const char *const *ends, const char *opener, int open_line, lp_tnode **out);

static lp_status stmt_if(parser *P, int line, lp_tnode **out)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    lp_tnode *nd = node(P, LP_TN_IF, line);
    if (!nd) return LP_STATUS_NO_MEMORY;
    lp_status st;
    if ((st = expr(P, &nd->a)) || (st = end_block(P, "if")) || (st = body(P, ends, "if", line, &nd->b))) return st;
    const lp_ttok *t = cur(P);
    P->i++;
    if (is_name(t, "elif")) {
        st = stmt_if(P, t->line, &nd->c); /* consumes through endif */
    } else if (is_name(t, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        if ((st = end_block(P, "else")) || (st = body(P, ends2, "if", line, &nd->c))) return st;
        P->i++;
        st = end_block(P, "endif");
    } else {
        st = end_block(P, "endif");
    }
    *out = nd;
    return st;
}

static lp_status stmt_for(parser *P, int line, lp_tnode **out)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    lp_tnode *nd = node(P, LP_TN_FOR, line);
    if (!nd) return LP_STATUS_NO_MEMORY;
    if (cur(P)->kind != LP_TT_NAME) return fail(P, "expected a loop variable after 'for'");
    nd->s = cur(P)->s, nd->n = cur(P)->n;
    P->i++;
    if (is_op(cur(P), ",")) {
        P->i++;
        if (cur(P)->kind != LP_TT_NAME) return fail(P, "expected a second loop variable after ','");
        nd->s2 = cur(P)->s, nd->n2 = cur(P)->n;
        P->i++;
    }
    if (!is_name(cur(P), "in")) return fail(P, "expected 'in' in a for tag");
    P->i++;
    lp_status st = or_expr(P, &nd->a);
    if (st) return st;
    if (is_name(cur(P), "if")) {
        P->i++;
        if ((st = expr(P, &nd->d))) return st;
    }
    if (is_name(cur(P), "recursive")) return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: recursive for loops are not supported", P->name, cur(P)->line);
    P->loops++;
    if ((st = end_block(P, "for")) || (st = body(P, ends, "for", line, &nd->b))) return st;
    P->loops--;
    const lp_ttok *t = cur(P);
    P->i++;
    if (is_name(t, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        if ((st = end_block(P, "else")) || (st = body(P, ends2, "for", line, &nd->c))) return st;
        P->i++;
    }
    *out = nd;
    return end_block(P, "endfor");
}

static lp_status stmt_set(parser *P, int line, lp_tnode **out)
{
    lp_tnode *nd = node(P, LP_TN_SET, line);
    if (!nd) return LP_STATUS_NO_MEMORY;
    if (cur(P)->kind != LP_TT_NAME) return fail(P, "expected a name after 'set'");
    nd->s = cur(P)->s, nd->n = cur(P)->n;
    P->i++;
    if (is_op(cur(P), ".")) {
        P->i++;
        if (cur(P)->kind != LP_TT_NAME) return fail(P, "expected an attribute name in 'set'");
        nd->s2 = cur(P)->s, nd->n2 = cur(P)->n;
        P->i++;
    }
    if (cur(P)->kind == LP_TT_BLOCK_END)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: block 'set' (set ... endset) is not supported", P->name, line);
    if (is_op(cur(P), ",")) return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: 'set' of several names is not supported", P->name, line);
    lp_status st = expect_op(P, "=", "in a set tag");
    if (st || (st = expr(P, &nd->a))) return st;
    *out = nd;
    return end_block(P, "set");
}

static lp_status body(parser *P, const char *const *ends, const char *opener, int open_line, lp_tnode **out)
{
    lp_tnode *b = node(P, LP_TN_BODY, cur(P)->line);
    if (!b) return LP_STATUS_NO_MEMORY;
    if (++P->depth > LP_TMPL_MAX_DEPTH) return lp_err(LP_STATUS_RANGE, "%s: line %d: tags nested too deeply", P->name, cur(P)->line);
    lp_status st = LP_OK;
    for (;;) {
        const lp_ttok *t = cur(P);
        lp_tnode *s = NULL;
        if (t->kind == LP_TT_EOF) {
            if (ends) {
                const char *const *last = ends;
                while (last[1]) last++; /* the end tag is listed last */
                return lp_err(LP_STATUS_FORMAT, "%s: line %d: '%s' tag opened here is never closed (no '%s')", P->name,
                              open_line, opener, *last);
            }
            break;
        }
        if (t->kind == LP_TT_TEXT) {
            if (!(s = node(P, LP_TN_TEXT, t->line))) return LP_STATUS_NO_MEMORY;
            s->s = t->s, s->n = t->n;
            P->i++;
        } else if (t->kind == LP_TT_VAR_BEGIN) {
            P->i++;
            if (!(s = node(P, LP_TN_PRINT, t->line))) return LP_STATUS_NO_MEMORY;
            if ((st = expr(P, &s->a))) return st;
            if (cur(P)->kind != LP_TT_VAR_END) return fail(P, "expected '}}' to end an expression");
            P->i++;
        } else if (t->kind == LP_TT_BLOCK_BEGIN) {
            const lp_ttok *nm = &P->t[P->i + 1];
            if (nm->kind != LP_TT_NAME) {
                P->i++;
                return fail(P, "expected a tag name after '{%'");
            }
            if (ends)
                for (const char *const *e = ends; *e; e++)
                    if (is_name(nm, *e)) {
                        P->i++; /* leave the parser on the closing name */
                        *out = b;
                        P->depth--;
                        return LP_OK;
                    }
            P->i += 2;
            if (is_name(nm, "if")) st = stmt_if(P, nm->line, &s);
            else if (is_name(nm, "for")) st = stmt_for(P, nm->line, &s);
            else if (is_name(nm, "set")) st = stmt_set(P, nm->line, &s);
            else if (is_name(nm, "break") || is_name(nm, "continue")) {
                if (!P->loops)
                    return lp_err(LP_STATUS_FORMAT, "%s: line %d: '%.*s' outside a for loop", P->name, nm->line, (int)nm->n, nm->s);
                if (!(s = node(P, nm->s[0] == 'b' ? LP_TN_BREAK : LP_TN_CONTINUE, nm->line))) return LP_STATUS_NO_MEMORY;
                st = end_block(P, nm->s[0] == 'b' ? "break" : "continue");
            } else if (is_name(nm, "generation")) {
                /* transformers' AssistantTracker block: renders its body unchanged */
                static const char *const gends[] = {"endgeneration", NULL};
                if ((st = end_block(P, "generation")) || (st = body(P, gends, "generation", nm->line, &s))) return st;
                P->i++;
                st = end_block(P, "endgeneration");
            } else {
                return lp_err(LP_STATUS_UNSUPPORTED, "%s: line %d: unsupported tag '%.*s'", P->name, nm->line, (int)(nm->n > 40 ? 40 : nm->n), nm->s);
            }
            if (st) return st;
        } else {
            return fail(P, "unexpected token");
        }
        if ((st = add_kid(P, b, s, NULL, 0))) return st;
    }
    P->depth--;
    *out = b;
    return LP_OK;
}

lp_status lp_tmpl_parse(lp_tarena *a, const char *name, const lp_ttok *toks, size_t n, lp_tnode **root)
{
    parser P = {.a = a, .name = name, .t = toks, .n = n};
    return body(&P, NULL, NULL, 0, root);
}
