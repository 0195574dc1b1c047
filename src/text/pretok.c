/* Pre-tokenizers of tokenizer.json: split normalized text into words. BertPreTokenizer,
 * ByteLevel (GPT-2 regex, prefix space), Split (PCRE2 regex or literal, five behaviours,
 * invert), Digits, WhitespaceSplit, Whitespace and Sequence. Words are spans of a text
 * arena; the ByteLevel byte->char mapping is not materialised: byte-level models look
 * words up as raw bytes (see models.c). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void lp_pretok_free(lp_pretok *pt)
{
    if (!pt) return;
    for (int i = 0; i < pt->nkids; i++) lp_pretok_free(pt->kids[i]);
    free(pt->kids);
    if (pt->re) pcre2_code_free(pt->re);
    free(pt->re_desc);
    free(pt);
}

/* HF's regex engine (Oniguruma) counts the Kaktovik numerals U+1D2C0..1D2D3 as \p{N};
 * this PCRE2's Unicode tables do not. Widen \p{N} inside and outside classes. Returns a
 * new pattern (caller frees) or NULL when out of memory. */
static char *widen_numbers(const char *pat, size_t len, size_t *out_len)
{
    static const char in_cls[] = "\\p{N}\\x{1D2C0}-\\x{1D2D3}";
    static const char out_cls[] = "[\\p{N}\\x{1D2C0}-\\x{1D2D3}]";
    size_t cap = len + 1, n = 0;
    for (size_t i = 0; i + 5 <= len; i++) cap += !memcmp(pat + i, "\\p{N}", 5) ? sizeof out_cls : 0;
    char *o = lp_malloc(cap);
    if (!o) return NULL;
    int cls = 0;
    for (size_t i = 0; i < len;) {
        if (pat[i] == '\\' && i + 5 <= len && !memcmp(pat + i, "\\p{N}", 5)) {
            const char *r = cls ? in_cls : out_cls;
            size_t rl = strlen(r);
            memcpy(o + n, r, rl);
            n += rl;
            i += 5;
        } else if (pat[i] == '\\' && i + 1 < len) {
            o[n++] = pat[i++];
            o[n++] = pat[i++];
        } else {
            if (pat[i] == '[' && !cls) {
                cls = 1;
                o[n++] = pat[i++];
                /* a ']' right after '[' or '[^' is a literal */
                if (i < len && pat[i] == '^') o[n++] = pat[i++];
                if (i < len && pat[i] == ']') o[n++] = pat[i++];
                continue;
            }
            if (pat[i] == ']' && cls) cls = 0;
            o[n++] = pat[i++];
        }
    }
    o[n] = 0;
    *out_len = n;
    return o;
}

lp_status lp_regex_compile(const char *pat, size_t len, int literal, const char *name, pcre2_code **out)
{
    int err;
    PCRE2_SIZE erroff;
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL refuses UCP */
    char *wide = NULL;
    *out = NULL;
    if (!literal) {
        size_t wl;
        if (!(wide = widen_numbers(pat, len, &wl)))
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
        pat = wide;
        len = wl;
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, len, opts, &err, &erroff, NULL);
    free(wide);
    if (!re) {
        if (err == PCRE2_ERROR_HEAP_FAILED) /* PCRE2's own allocation, not the pattern */
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory compiling a pre-tokenizer regex", name);
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return lp_err(LP_STATUS_FORMAT, "%s: pre-tokenizer regex does not compile at offset %zu: %s", name,
                      (size_t)erroff, (const char *)msg);
    }
    /* JIT is an optimisation: when unavailable, pcre2_match interprets. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return LP_OK;
}

/* One split candidate: a byte range of the piece and whether the pattern matched it. */
typedef struct ent { uint32_t off, len; int match; } ent;
typedef struct ents { ent *v; size_t n, cap; } ents;

static int ents_push(ents *e, uint32_t off, uint32_t len, int match)
{
    void *nv = lp_grow(e->v, &e->cap, e->n + 1, sizeof *e->v, 64);
    if (!nv) return -1;
    e->v = nv;
    e->v[e->n++] = (ent){off, len, match};
    return 0;
}

/* Regex matches over s[0..n) as HF's find_matches: matches and the gaps between them. */
static int regex_entries(const lp_pretok *pt, lp_scratch *sc, const char *s, size_t n, ents *e)
{
    size_t prev = 0, start = 0;
    while (start <= n) {
        int rc = pcre2_match(pt->re, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, sc->md, sc->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) { /* a match limit (catastrophic backtracking) or another runtime failure */
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return lp_err(LP_STATUS_UNSUPPORTED, "%s failed on this text: %s (PCRE2 error %d)",
                          pt->re_desc ? pt->re_desc : "pre-tokenizer regex", (const char *)msg, rc), -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {
            /* empty match: produces no piece; step one char */
            if (ms >= n) break;
            start = ms + 1;
            while (start < n && ((uint8_t)s[start] & 0xC0) == 0x80) start++;
            continue;
        }
        if (ms > prev && ents_push(e, (uint32_t)prev, (uint32_t)(ms - prev), 0)) return -1;
        if (ents_push(e, (uint32_t)ms, (uint32_t)(me - ms), 1)) return -1;
        prev = start = me;
    }
    if (prev < n && ents_push(e, (uint32_t)prev, (uint32_t)(n - prev), 0)) return -1;
    return 0;
}

/* Per-char predicate matches (each matching char is its own match). */
static int char_entries(int (*pred)(int32_t), const char *s, size_t n, ents *e)
{
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        int len;
        int32_t c = (uint8_t)s[i] < 0x80 ? (len = 1, (uint8_t)s[i]) : lp_utf8_next((const uint8_t *)s + i, n - i, &len);
        if (pred(c)) {
            if (last < i && ents_push(e, (uint32_t)last, (uint32_t)(i - last), 0)) return -1;
            if (ents_push(e, (uint32_t)i, (uint32_t)len, 1)) return -1;
            last = i + (size_t)len;
        }
        i += (size_t)len;
    }
    if (last < n && ents_push(e, (uint32_t)last, (uint32_t)(n - last), 0)) return -1;
    return 0;
}

/* Applies a split behaviour to entries and appends the resulting words (offset base). */
static int emit(ents *e, int behavior, int invert, uint32_t base, lp_spans *out)
{
    if (invert)
        for (size_t i = 0; i < e->n; i++) e->v[i].match = !e->v[i].match;
    size_t k = 0; /* merged entries are compacted in place */
    int prev_match = 0;
    switch (behavior) {
    case LP_BEH_ISOLATED: k = e->n; break;
    case LP_BEH_REMOVED:
        for (size_t i = 0; i < e->n; i++)
            if (!e->v[i].match) e->v[k++] = e->v[i];
        break;
    case LP_BEH_PREV:
        for (size_t i = 0; i < e->n; i++) {
            ent x = e->v[i];
            if (x.match && !prev_match && k > 0) e->v[k - 1].len = x.off + x.len - e->v[k - 1].off;
            else e->v[k++] = x;
            prev_match = x.match;
        }
        break;
    case LP_BEH_NEXT:
        /* walk backwards, merging a match into the piece after it */
        for (size_t i = e->n; i-- > 0;) {
            ent x = e->v[i];
            if (x.match && !prev_match && k > 0) {
                ent *last = &e->v[e->n - k];
                last->len = last->off + last->len - x.off;
                last->off = x.off;
            } else {
                e->v[e->n - 1 - k] = x;
                k++;
            }
            prev_match = x.match;
        }
        memmove(e->v, e->v + (e->n - k), k * sizeof *e->v);
        break;
    case LP_BEH_CONTIGUOUS:
        for (size_t i = 0; i < e->n; i++) {
            ent x = e->v[i];
            if (i > 0 && x.match == prev_match && k > 0) e->v[k - 1].len = x.off + x.len - e->v[k - 1].off;
            else e->v[k++] = x;
            prev_match = x.match;
        }
        break;
    }
    for (size_t i = 0; i < k; i++)
        if (e->v[i].len && lp_spans_push(out, base + e->v[i].off, e->v[i].len)) return -1;
    return 0;
}

/* BertPreTokenizer: whitespace separates (removed), each punctuation char is a word. */
static int bert_split(const char *s, size_t n, uint32_t base, lp_spans *out)
{
    size_t word = 0;
    int in_word = 0;
    for (size_t i = 0; i < n;) {
        int len;
        int32_t c = (uint8_t)s[i] < 0x80 ? (len = 1, (uint8_t)s[i]) : lp_utf8_next((const uint8_t *)s + i, n - i, &len);
        int ws = lp_is_ws(c), p = !ws && lp_is_punct(c);
        if (ws || p) {
            if (in_word && lp_spans_push(out, base + (uint32_t)word, (uint32_t)(i - word))) return -1;
            in_word = 0;
            if (p && lp_spans_push(out, base + (uint32_t)i, (uint32_t)len)) return -1;
        } else if (!in_word) {
            in_word = 1;
            word = i;
        }
        i += (size_t)len;
    }
    if (in_word && lp_spans_push(out, base + (uint32_t)word, (uint32_t)(n - word))) return -1;
    return 0;
}

static int is_ws_pred(int32_t c) { return lp_is_ws(c); }

/* One non-Sequence stage on one piece. */
static int stage(const lp_pretok *pt, lp_scratch *sc, lp_buf *arena, lp_span in, lp_spans *out, ents *e)
{
    e->n = 0;
    switch (pt->type) {
    case LP_PRE_BERT: return bert_split(arena->p + in.off, in.len, in.off, out);
    case LP_PRE_WSSPLIT:
        if (char_entries(is_ws_pred, arena->p + in.off, in.len, e)) return -1;
        return emit(e, LP_BEH_REMOVED, 0, in.off, out);
    case LP_PRE_DIGITS:
        if (char_entries(lp_is_numeric, arena->p + in.off, in.len, e)) return -1;
        return emit(e, pt->individual_digits ? LP_BEH_ISOLATED : LP_BEH_CONTIGUOUS, 0, in.off, out);
    case LP_PRE_WHITESPACE:
        if (regex_entries(pt, sc, arena->p + in.off, in.len, e)) return -1;
        return emit(e, LP_BEH_REMOVED, 1, in.off, out);
    case LP_PRE_SPLIT:
        if (regex_entries(pt, sc, arena->p + in.off, in.len, e)) return -1;
        return emit(e, pt->behavior, pt->invert, in.off, out);
    case LP_PRE_BYTELEVEL:
        if (pt->add_prefix_space && arena->p[in.off] != ' ') {
            /* the prefixed copy goes to the end of the arena */
            if (lp_buf_reserve(arena, in.len + 1)) return -1;
            uint32_t off = (uint32_t)arena->len;
            arena->p[arena->len++] = ' ';
            memcpy(arena->p + arena->len, arena->p + in.off, in.len);
            arena->len += in.len;
            in = (lp_span){off, in.len + 1};
        }
        if (!pt->use_regex) return lp_spans_push(out, in.off, in.len);
        if (regex_entries(pt, sc, arena->p + in.off, in.len, e)) return -1;
        return emit(e, LP_BEH_ISOLATED, 0, in.off, out);
    default: return lp_spans_push(out, in.off, in.len);
    }
}

int lp_pretok_apply(const lp_pretok *pt, lp_scratch *sc, lp_buf *arena, lp_span in, lp_spans *words)
{
    if (in.len == 0) return 0;
    ents e = {0};
    int rc = 0;
    if (!pt) {
        rc = lp_spans_push(words, in.off, in.len);
    } else if (pt->type != LP_PRE_SEQ) {
        rc = stage(pt, sc, arena, in, words, &e);
    } else {
        lp_spans cur = {0}, nxt = {0};
        rc = lp_spans_push(&cur, in.off, in.len);
        for (int k = 0; !rc && k < pt->nkids; k++) {
            nxt.n = 0;
            for (size_t i = 0; !rc && i < cur.n; i++) {
                const lp_pretok *kid = pt->kids[k];
                rc = kid->type == LP_PRE_SEQ ? lp_pretok_apply(kid, sc, arena, cur.v[i], &nxt)
                                             : stage(kid, sc, arena, cur.v[i], &nxt, &e);
            }
            lp_spans t = cur; cur = nxt; nxt = t;
        }
        for (size_t i = 0; !rc && i < cur.n; i++) rc = lp_spans_push(words, cur.v[i].off, cur.v[i].len);
        free(cur.v);
        free(nxt.v);
    }
    free(e.v);
    return rc;
}
