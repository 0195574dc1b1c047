/* Chat-template lexer: splits Jinja2 source into text and tag tokens, applying the
 * whitespace rules of the environment transformers renders chat templates in:
 * newlines normalised to "\n", one trailing newline dropped, "-" strips whitespace on
 * that side of a tag, trim_blocks (the newline after a block or comment tag goes) and
 * lstrip_blocks (indentation before a block or comment tag goes). */
#include <stdlib.h>
#include <string.h>

#include "template_internal.h"

typedef struct lexer {
    lp_tarena *a;
    const char *name;
    lp_ttok *toks;
    size_t n, cap;
} lexer;

static lp_status push(lexer *L, lp_ttok t)
{
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        if (cap > LP_TMPL_MAX_NODES * 4)
            return lp_err(LP_STATUS_RANGE, "%s: template has more than %d tokens", L->name, LP_TMPL_MAX_NODES * 4);
        lp_ttok *t2 = lp_tarena_alloc(L->a, cap * sizeof *t2);
        if (!t2) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory lexing the template", L->name);
        if (L->n) memcpy(t2, L->toks, L->n * sizeof *t2);
        L->toks = t2, L->cap = cap;
    }
    L->toks[L->n++] = t;
    return LP_OK;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 63)), o[2] = (char)(0x80 | (cp & 63)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)), o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* A string literal body with Python's unicode-escape rules (what Jinja applies); an
 * escape Python does not know keeps its backslash. */
static lp_status lex_string(lexer *L, const char *s, size_t len, size_t *pos, int line, lp_ttok *t)
{
    char q = s[*pos];
    size_t i = *pos + 1, start = i;
    while (i < len && s[i] != q) i += (s[i] == '\\' && i + 1 < len) ? 2 : 1;
    if (i >= len) return lp_err(LP_STATUS_FORMAT, "%s: line %d: unterminated string literal", L->name, line);
    char *o = lp_tarena_alloc(L->a, i - start + 1);
    if (!o) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", L->name);
    size_t n = 0;
    for (size_t j = start; j < i; j++) {
        if (s[j] != '\\') {
            o[n++] = s[j];
            continue;
        }
        char c = s[++j];
        int width = 0;
        switch (c) {
        case 'n': o[n++] = '\n'; break;
        case 't': o[n++] = '\t'; break;
        case 'r': o[n++] = '\r'; break;
        case 'a': o[n++] = '\a'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'v': o[n++] = '\v'; break;
        case '\\': case '\'': case '"': o[n++] = c; break;
        case '\n': break; /* a backslash-newline joins lines */
        case 'x': width = 2; break;
        case 'u': width = 4; break;
        case 'U': width = 8; break;
        default:
            if (c >= '0' && c <= '7') {
                uint32_t v = 0;
                int k = 0;
                while (k < 3 && j < i && s[j] >= '0' && s[j] <= '7') v = v * 8 + (uint32_t)(s[j++] - '0'), k++;
                j--;
                n += put_utf8(o + n, v);
            } else {
                o[n++] = '\\', o[n++] = c;
            }
        }
        if (width) {
            uint32_t v = 0;
            for (int k = 0; k < width; k++) {
                int h = j + 1 + (size_t)k < i ? hexval(s[j + 1 + k]) : -1;
                if (h < 0) return lp_err(LP_STATUS_FORMAT, "%s: line %d: truncated \\%c escape in a string literal", L->name, line, c);
                v = v * 16 + (uint32_t)h;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v < 0xE000))
                return lp_err(LP_STATUS_FORMAT, "%s: line %d: escape \\%c names no character", L->name, line, c);
            j += (size_t)width;
            n += put_utf8(o + n, v); /* never longer than the escape it replaces */
        }
    }
    t->kind = LP_TT_STRING, t->s = o, t->n = n;
    *pos = i + 1;
    return LP_OK;
}

static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char ops1[] = "+-*/%~<>=()[]{},.:|";

/* Tokens of one tag body from *pos up to its end marker ("}}" or "%}"); sets *strip_after
 * when the tag ends with "-". */
static lp_status lex_tag(lexer *L, const char *s, size_t len, size_t *pos, int *line, char endc, int *strip_after)
{
    size_t i = *pos;
    for (;;) {
        while (i < len && is_ws(s[i])) *line += s[i++] == '\n';
        if (i >= len) return lp_err(LP_STATUS_FORMAT, "%s: line %d: unclosed tag (no '%c}')", L->name, *line, endc);
        if (s[i] == '-' && i + 2 < len + 0 && s[i + 1] == endc && s[i + 2] == '}') {
            *strip_after = 1, *pos = i + 3;
            return LP_OK;
        }
        if (s[i] == endc && i + 1 < len && s[i + 1] == '}') {
            *strip_after = 0, *pos = i + 2;
            return LP_OK;
        }
        lp_ttok t = {.line = *line};
        if (s[i] == '\'' || s[i] == '"') {
            lp_status st = lex_string(L, s, len, &i, *line, &t);
            if (st) return st;
        } else if (is_name0(s[i])) {
            size_t b = i;
            while (i < len && (is_name0(s[i]) || is_digit(s[i]))) i++;
            t.kind = LP_TT_NAME, t.s = s + b, t.n = i - b;
        } else if (is_digit(s[i])) {
            size_t b = i;
            while (i < len && is_digit(s[i])) i++;
            int isf = 0;
            if (i + 1 < len && s[i] == '.' && is_digit(s[i + 1])) {
                isf = 1, i++;
                while (i < len && is_digit(s[i])) i++;
            }
            char num[64];
            if (i - b >= sizeof num) return lp_err(LP_STATUS_FORMAT, "%s: line %d: number literal too long", L->name, *line);
            memcpy(num, s + b, i - b), num[i - b] = 0;
            if (isf) {
                t.kind = LP_TT_FLOAT, t.f = strtod(num, NULL);
            } else {
                if (i - b > 18) return lp_err(LP_STATUS_RANGE, "%s: line %d: integer literal out of range", L->name, *line);
                t.kind = LP_TT_INT, t.i = strtoll(num, NULL, 10);
            }
        } else {
            size_t k;
            for (k = 0; k < sizeof ops2 / sizeof *ops2; k++)
                if (i + 1 < len && s[i] == ops2[k][0] && s[i + 1] == ops2[k][1]) break;
            if (k < sizeof ops2 / sizeof *ops2) {
                t.kind = LP_TT_OP, t.s = ops2[k], t.n = 2, i += 2;
            } else if (s[i] && strchr(ops1, s[i])) {
                t.kind = LP_TT_OP, t.s = strchr(ops1, s[i]), t.n = 1, i++;
            } else {
                return lp_err(LP_STATUS_FORMAT, "%s: line %d: unexpected character '%c' in a tag", L->name, *line,
                              (unsigned char)s[i] >= 32 && (unsigned char)s[i] < 127 ? s[i] : '?');
            }
        }
        lp_status st = push(L, t);
        if (st) return st;
    }
}

static int count_lines(const char *s, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++) c += s[i] == '\n';
    return c;
}

lp_status lp_tmpl_lex(lp_tarena *a, const char *name, const char *src0, size_t len0, lp_ttok **out, size_t *nout)
{
    lexer L = {.a = a, .name = name};
    /* Jinja joins the lines of the source with "\n" and drops one trailing newline. */
    char *s = lp_tarena_alloc(a, len0 + 1);
    if (!s) return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    size_t len = 0;
    for (size_t i = 0; i < len0; i++) {
        if (src0[i] == '\r') {
            s[len++] = '\n';
            if (i + 1 < len0 && src0[i + 1] == '\n') i++;
        } else {
            s[len++] = src0[i];
        }
    }
    if (len && s[len - 1] == '\n') len--;

    size_t p = 0;
    int line = 1, strip_next = 0;
    while (p <= len) {
        size_t q = p;
        while (q + 1 < len && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= len) q = len;
        /* text [p, q) */
        size_t tb = p, te = q;
        if (strip_next)
            while (tb < te && is_ws(s[tb])) tb++;
        int text_line = line + count_lines(s + p, tb - p);
        line += count_lines(s + p, q - p);
        if (q == len) {
            if (te > tb) {
                lp_status st = push(&L, (lp_ttok){.kind = LP_TT_TEXT, .line = text_line, .s = s + tb, .n = te - tb});
                if (st) return st;
            }
            break;
        }
        char kind = s[q + 1];
        char mod = q + 2 < len ? s[q + 2] : 0;
        if (mod == '-') {
            while (te > tb && is_ws(s[te - 1])) te--;
        } else if (mod != '+' && kind != '{') {
            /* lstrip_blocks: drop spaces between the line start and a block/comment tag */
            size_t k = te;
            while (k > tb && (s[k - 1] == ' ' || s[k - 1] == '\t' || s[k - 1] == '\r' || s[k - 1] == '\f' || s[k - 1] == '\v')) k--;
            if ((k > tb && s[k - 1] == '\n') || (k == tb && (tb == 0 || s[tb - 1] == '\n'))) te = k;
        }
        if (te > tb) {
            lp_status st = push(&L, (lp_ttok){.kind = LP_TT_TEXT, .line = text_line, .s = s + tb, .n = te - tb});
            if (st) return st;
        }
        size_t body = q + 2 + (mod == '-' || mod == '+');
        int tag_line = line;
        if (kind == '#') {
            size_t e = body;
            while (e + 1 < len && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= len) return lp_err(LP_STATUS_FORMAT, "%s: line %d: unclosed comment (no '#}')", name, tag_line);
            line += count_lines(s + q, e - q);
            strip_next = e > body && s[e - 1] == '-';
            p = e + 2;
            if (!strip_next && p < len && s[p] == '\n') p++, line++; /* trim_blocks */
            continue;
        }
        lp_status st = push(&L, (lp_ttok){.kind = kind == '{' ? LP_TT_VAR_BEGIN : LP_TT_BLOCK_BEGIN, .line = tag_line});
        if (st) return st;
        size_t pos = body;
        st = lex_tag(&L, s, len, &pos, &line, kind == '{' ? '}' : '%', &strip_next);
        if (st) return st;
        st = push(&L, (lp_ttok){.kind = kind == '{' ? LP_TT_VAR_END : LP_TT_BLOCK_END, .line = line});
        if (st) return st;
        p = pos;
        if (kind == '%' && !strip_next && p < len && s[p] == '\n') p++, line++; /* trim_blocks */
    }
    lp_status st = push(&L, (lp_ttok){.kind = LP_TT_EOF, .line = line});
    if (st) return st;
    *out = L.toks, *nout = L.n;
    return LP_OK;
}
