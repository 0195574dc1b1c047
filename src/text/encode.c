/* The encode pipeline: UTF-8 repair, added/special tokens matched before everything
 * else (raw ones on the input, normalized ones after normalization), normalizer,
 * pre-tokenizer, model, then truncation, the post-processor template and padding.
 * Scratch buffers and the BPE word cache are per thread, so a tokenizer is shared. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "internal.h"

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    lp_scratch *sc = p;
    if (!sc) return;
    free(sc->a.p);
    free(sc->b.p);
    free(sc->segs.v);
    free(sc->segs2.v);
    free(sc->words.v);
    free(sc->seg_ids.v);
    free(sc->seg_ids2.v);
    free(sc->ids_a.v);
    free(sc->ids_b.v);
    free(sc->syms);
    free(sc->heap);
    lp_strmap_free(&sc->cache);
    free(sc->cache_ids.v);
    if (sc->md) pcre2_match_data_free(sc->md);
    if (sc->mctx) pcre2_match_context_free(sc->mctx);
    if (sc->jstack) pcre2_jit_stack_free(sc->jstack);
    free(sc);
}

static int key_made;

static void make_key(void) { key_made = pthread_key_create(&scratch_key, scratch_free) == 0; }

/* Frees the main thread's scratch at exit so leak checkers see a clean heap. */
__attribute__((destructor)) static void scratch_atexit(void)
{
    if (!key_made) return; /* no encode ever ran */
    lp_scratch *sc = pthread_getspecific(scratch_key);
    if (sc) {
        pthread_setspecific(scratch_key, NULL);
        scratch_free(sc);
    }
}

static lp_scratch *get_scratch(const lp_tokenizer *t)
{
    pthread_once(&scratch_once, make_key);
    if (!key_made) return NULL;
    lp_scratch *sc = pthread_getspecific(scratch_key);
    if (!sc) {
        sc = lp_calloc(1, sizeof *sc);
        if (!sc) return NULL;
        sc->md = pcre2_match_data_create(16, NULL);
        sc->mctx = pcre2_match_context_create(NULL);
        /* deep backtracking (long whitespace runs with look-ahead) needs more than the
         * default 32 KiB JIT stack */
        sc->jstack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
        if (!sc->md || !sc->mctx || lp_strmap_init(&sc->cache, 4096)) {
            scratch_free(sc);
            return NULL;
        }
        if (sc->jstack) pcre2_jit_stack_assign(sc->mctx, NULL, sc->jstack);
        if (pthread_setspecific(scratch_key, sc)) {
            scratch_free(sc);
            return NULL;
        }
    }
    if (sc->serial != t->serial) {
        lp_strmap_clear(&sc->cache);
        sc->cache_ids.n = 0;
        sc->serial = t->serial;
    }
    return sc;
}

/* \w as HF's single_word check uses it: letters, marks, decimal digits, connectors. */
static int is_word_char(int32_t c)
{
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    utf8proc_category_t k = utf8proc_category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

static int32_t char_before(const char *s, size_t at)
{
    size_t i = at;
    do i--; while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80);
    int len;
    return lp_utf8_next((const uint8_t *)s + i, at - i, &len);
}

/* Splits s[0..n) on the added tokens of one group (raw or normalized), leftmost-longest
 * as HF's Aho-Corasick matcher. Appends (span, id) pairs; id -1 marks plain text.
 * Spans are relative to s plus base. */
static int split_added(const lp_tokenizer *t, int normalized, const char *s, size_t n, uint32_t base,
                       lp_spans *segs, lp_ids *ids)
{
    int lo = normalized ? t->n_added_raw : 0, hi = normalized ? t->n_added : t->n_added_raw;
    const uint8_t *first = t->added_first[normalized];
    size_t done = 0; /* end of the last emitted segment */
    size_t i = 0;
    while (i < n) {
        if (!first[(uint8_t)s[i]]) { i++; continue; }
        const lp_added *m = NULL;
        for (int k = lo; k < hi; k++) {
            const lp_added *a = &t->added[k];
            if (a->len <= n - i && a->content[0] == s[i] && !memcmp(a->content, s + i, a->len)) { m = a; break; }
        }
        if (!m) { i++; continue; }
        size_t start = i, stop = i + m->len;
        if (m->single_word) {
            int ok_l = start == 0 || !is_word_char(char_before(s, start));
            int len;
            int ok_r = stop == n || !is_word_char(lp_utf8_next((const uint8_t *)s + stop, n - stop, &len));
            if (!ok_l || !ok_r) { i = stop; continue; } /* the matcher moves past it anyway */
        }
        if (m->lstrip)
            while (start > done && lp_is_ws(char_before(s, start))) {
                size_t j = start;
                do j--; while (j > 0 && ((uint8_t)s[j] & 0xC0) == 0x80);
                start = j;
            }
        if (m->rstrip)
            while (stop < n) {
                int len;
                int32_t c = lp_utf8_next((const uint8_t *)s + stop, n - stop, &len);
                if (!lp_is_ws(c)) break;
                stop += (size_t)len;
            }
        if (start > done && (lp_spans_push(segs, base + (uint32_t)done, (uint32_t)(start - done)) || lp_ids_push(ids, -1)))
            return -1;
        if (lp_spans_push(segs, base + (uint32_t)start, (uint32_t)(stop - start)) || lp_ids_push(ids, m->id)) return -1;
        done = i = stop;
    }
    if (n > done && (lp_spans_push(segs, base + (uint32_t)done, (uint32_t)(n - done)) || lp_ids_push(ids, -1)))
        return -1;
    return 0;
}

/* normalize -> pre-tokenize -> model for one piece of plain text (a span of sc->a). */
static int encode_piece(const lp_tokenizer *t, lp_scratch *sc, lp_span sp, lp_ids *out)
{
    sc->words.n = 0;
    if (lp_pretok_apply(t->pre, sc, &sc->a, sp, &sc->words)) return -1;
    for (size_t w = 0; w < sc->words.n; w++)
        if (lp_model_word(t, sc, sc->a.p + sc->words.v[w].off, sc->words.v[w].len, out)) return -1;
    return 0;
}

static int encode_seq(const lp_tokenizer *t, lp_scratch *sc, const char *text, size_t n, lp_ids *out)
{
    out->n = 0;
    sc->a.len = 0;
    sc->segs.n = sc->seg_ids.n = 0;
    if (n == 0) return 0;
    if (t->n_added_raw) {
        if (split_added(t, 0, text, n, 0, &sc->segs, &sc->seg_ids)) return -1;
    } else if (lp_spans_push(&sc->segs, 0, (uint32_t)n) || lp_ids_push(&sc->seg_ids, -1)) {
        return -1;
    }
    int has_norm_added = t->n_added > t->n_added_raw;
    for (size_t g = 0; g < sc->segs.n; g++) {
        if (sc->seg_ids.v[g] >= 0) {
            if (lp_ids_push(out, sc->seg_ids.v[g])) return -1;
            continue;
        }
        const char *piece = text + sc->segs.v[g].off;
        size_t plen = sc->segs.v[g].len;
        uint32_t off = (uint32_t)sc->a.len;
        if (t->norm ? lp_norm_apply(t->norm, piece, plen, &sc->a) : lp_buf_add(&sc->a, piece, plen)) return -1;
        lp_span sp = {off, (uint32_t)(sc->a.len - off)};
        if (!has_norm_added) {
            if (encode_piece(t, sc, sp, out)) return -1;
            continue;
        }
        sc->segs2.n = sc->seg_ids2.n = 0;
        if (split_added(t, 1, sc->a.p + sp.off, sp.len, sp.off, &sc->segs2, &sc->seg_ids2)) return -1;
        for (size_t h = 0; h < sc->segs2.n; h++) {
            if (sc->seg_ids2.v[h] >= 0) {
                if (lp_ids_push(out, sc->seg_ids2.v[h])) return -1;
            } else if (encode_piece(t, sc, sc->segs2.v[h], out)) {
                return -1;
            }
        }
    }
    return 0;
}

static int enc_reserve(lp_encoding *e, size_t n)
{
    if (n <= e->cap) return 0;
    size_t nc = e->cap ? e->cap : 64;
    while (nc < n) nc *= 2;
    int32_t *a = lp_realloc(e->ids, nc * sizeof *a);
    if (a) e->ids = a;
    int32_t *b = lp_realloc(e->type_ids, nc * sizeof *b);
    if (b) e->type_ids = b;
    int32_t *c = lp_realloc(e->attention_mask, nc * sizeof *c);
    if (c) e->attention_mask = c;
    uint8_t *d = lp_realloc(e->special_mask, nc);
    if (d) e->special_mask = d;
    if (!a || !b || !c || !d) return -1;
    e->cap = nc;
    return 0;
}

static void enc_put(lp_encoding *e, int32_t id, int32_t type_id, int special)
{
    e->ids[e->len] = id;
    e->type_ids[e->len] = type_id;
    e->attention_mask[e->len] = 1;
    e->special_mask[e->len] = (uint8_t)special;
    e->len++;
}

/* HF truncate_encodings with the specials' room already taken off max_len. */
static lp_status truncate_ids(size_t *na, size_t *nb, int pair, size_t max_len, lp_truncation how)
{
    size_t total = *na + (pair ? *nb : 0);
    if (total <= max_len) return LP_OK;
    if (!pair) {
        if (how == LP_TRUNCATION_ONLY_SECOND)
            return lp_err(LP_STATUS_INVALID_ARG, "truncation only_second needs a second sequence");
        *na = max_len;
        return LP_OK;
    }
    if (how == LP_TRUNCATION_LONGEST_FIRST) {
        size_t n1 = *na, n2 = *nb;
        int swap = n1 > n2;
        if (swap) { size_t x = n1; n1 = n2; n2 = x; }
        if (n1 > max_len / 2) { /* both are cut: the longer keeps the odd one */
            n1 = max_len / 2;
            n2 = n1 + max_len % 2;
        } else {
            n2 = max_len - n1;
        }
        if (swap) { size_t x = n1; n1 = n2; n2 = x; }
        *na = n1;
        *nb = n2;
        return LP_OK;
    }
    size_t remove = total - max_len;
    size_t *target = how == LP_TRUNCATION_ONLY_FIRST ? na : nb;
    if (*target <= remove)
        return lp_err(LP_STATUS_INVALID_ARG, "truncation to %zu tokens: the %s sequence is too short to cut", max_len,
                      how == LP_TRUNCATION_ONLY_FIRST ? "first" : "second");
    *target -= remove;
    return LP_OK;
}

lp_status lp_tokenizer_encode_n(const lp_tokenizer *t, const char *text, size_t text_len, const char *pair,
                                size_t pair_len, const lp_encode_opts *opts, lp_encoding *enc)
{
    if (!t || !enc || (!text && text_len)) return lp_err(LP_STATUS_INVALID_ARG, "lp_tokenizer_encode: NULL argument");
    enc->len = 0;
    lp_err_clear(); /* a failing stage sets the message; its absence means out of memory */
    lp_encode_opts o = opts ? *opts : lp_encode_opts_default();
    if (o.max_length < 0 || o.pad_to < 0) return lp_err(LP_STATUS_INVALID_ARG, "encode: negative max_length or pad_to");
    lp_scratch *sc = get_scratch(t);
    if (!sc) return lp_err(LP_STATUS_NO_MEMORY, "encode: out of memory");
    const char *in[2] = {text ? text : "", pair};
    size_t len[2] = {text_len, pair_len};
    char *fixed[2] = {NULL, NULL};
    lp_ids *out[2] = {&sc->ids_a, &sc->ids_b};
    lp_status st = LP_OK;
    int npieces = pair ? 2 : 1;
    sc->ids_b.n = 0;
    for (int k = 0; k < npieces && !st; k++) {
        if (lp_utf8_valid_prefix((const uint8_t *)in[k], len[k]) != len[k]) {
            fixed[k] = lp_utf8_sanitize(in[k], len[k], &len[k]);
            if (!fixed[k]) { st = lp_err(LP_STATUS_NO_MEMORY, "encode: out of memory"); break; }
            in[k] = fixed[k];
        }
        if (encode_seq(t, sc, in[k], len[k], out[k]))
            st = lp_err_msg()[0] ? LP_STATUS_UNSUPPORTED : lp_err(LP_STATUS_NO_MEMORY, "encode: out of memory");
    }
    free(fixed[0]);
    free(fixed[1]);
    if (st) return st;
    int specials = o.add_special_tokens && t->has_post;
    const lp_template *tp = pair ? &t->pair : &t->single;
    size_t na = sc->ids_a.n, nb = sc->ids_b.n;
    if (o.max_length > 0) {
        size_t nadd = specials ? (size_t)lp_tokenizer_num_special(t, pair != NULL) : 0;
        if ((size_t)o.max_length < nadd)
            return lp_err(LP_STATUS_INVALID_ARG, "max_length %d cannot hold the %zu special tokens", o.max_length, nadd);
        st = truncate_ids(&na, &nb, pair != NULL, (size_t)o.max_length - nadd, o.truncation);
        if (st) return st;
    }
    size_t total = na + nb + (specials ? (size_t)lp_tokenizer_num_special(t, pair != NULL) : 0);
    size_t want = (size_t)o.pad_to > total ? (size_t)o.pad_to : total;
    if (want > total && t->specials[LP_SPECIAL_PAD] < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: padding requested but the tokenizer has no pad token", t->name);
    if (enc_reserve(enc, want)) return lp_err(LP_STATUS_NO_MEMORY, "encode: out of memory");
    if (t->has_post && tp->n) {
        for (int i = 0; i < tp->n; i++) {
            const lp_tpl_piece *p = &tp->p[i];
            if (p->kind == LP_TPL_SPECIAL) {
                if (specials)
                    for (int j = 0; j < p->nids; j++) enc_put(enc, p->ids[j], p->type_id, 1);
            } else {
                const lp_ids *src = p->kind == LP_TPL_A ? &sc->ids_a : &sc->ids_b;
                size_t n = p->kind == LP_TPL_A ? na : nb;
                for (size_t j = 0; j < n; j++) enc_put(enc, src->v[j], p->type_id, 0);
            }
        }
    } else {
        for (size_t j = 0; j < na; j++) enc_put(enc, sc->ids_a.v[j], 0, 0);
        for (size_t j = 0; j < nb; j++) enc_put(enc, sc->ids_b.v[j], 0, 0);
    }
    if (want > enc->len) return lp_encoding_pad(enc, want, t->specials[LP_SPECIAL_PAD], t->file_pad_type_id);
    return LP_OK;
}

lp_status lp_tokenizer_encode(const lp_tokenizer *t, const char *text, const char *text_pair,
                              const lp_encode_opts *opts, lp_encoding *enc)
{
    return lp_tokenizer_encode_n(t, text, text ? strlen(text) : 0, text_pair, text_pair ? strlen(text_pair) : 0, opts,
                                 enc);
}

lp_status lp_encoding_pad(lp_encoding *enc, size_t length, int32_t pad_id, int32_t pad_type_id)
{
    if (!enc) return lp_err(LP_STATUS_INVALID_ARG, "lp_encoding_pad: NULL encoding");
    if (length <= enc->len) return LP_OK;
    if (enc_reserve(enc, length)) return lp_err(LP_STATUS_NO_MEMORY, "padding: out of memory");
    while (enc->len < length) {
        enc_put(enc, pad_id, pad_type_id, 1);
        enc->attention_mask[enc->len - 1] = 0;
    }
    return LP_OK;
}

void lp_encoding_free(lp_encoding *enc)
{
    if (!enc) return;
    free(enc->ids);
    free(enc->type_ids);
    free(enc->attention_mask);
    free(enc->special_mask);
    memset(enc, 0, sizeof *enc);
}

lp_status lp_tokenizer_encode_row(void *ctx, const char *text, const char *text_pair, int32_t max_len,
                                  int32_t *ids_out, int32_t *type_ids_out, int32_t *n_out)
{
    lp_tokenizer_rows *r = ctx;
    lp_encode_opts o = lp_encode_opts_default();
    o.max_length = max_len;
    lp_status st = lp_tokenizer_encode(r->tok, text, text_pair, &o, &r->enc);
    if (st != LP_OK)
        return st;
    size_t n = r->enc.len < (size_t)max_len ? r->enc.len : (size_t)max_len;
    memcpy(ids_out, r->enc.ids, n * sizeof *ids_out);
    memcpy(type_ids_out, r->enc.type_ids, n * sizeof *type_ids_out);
    *n_out = (int32_t)n;
    return LP_OK;
}
