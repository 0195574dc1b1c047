/* Tokenization models: WordPiece (greedy longest-match-first with "##" continuations)
 * and BPE (merges by rank with a (rank, position) min-heap, as HF's Word::merge_all, with
 * a per-thread word cache). Byte-level BPE works on raw bytes: the vocabulary was
 * re-keyed from GPT-2's printable alphabet at load time. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int wordpiece(const lp_tokenizer *t, const char *w, size_t n, lp_ids *out)
{
    size_t nchars = 0;
    for (size_t i = 0; i < n; i++) nchars += ((uint8_t)w[i] & 0xC0) != 0x80;
    if (nchars > (size_t)t->wp_max_chars) return lp_ids_push(out, t->unk_id);
    char stackbuf[512];
    char *buf = stackbuf;
    if (t->wp_prefix_len + n > sizeof stackbuf) {
        buf = lp_malloc(t->wp_prefix_len + n);
        if (!buf) return -1;
    }
    memcpy(buf, t->wp_prefix, t->wp_prefix_len);
    size_t start = 0, first = out->n;
    int bad = 0;
    while (start < n) {
        /* no vocab entry is longer than max_tok_len: start below it (on a char boundary) */
        size_t room = t->max_tok_len - (start ? t->wp_prefix_len : 0), end = n;
        if (t->max_tok_len < (start ? t->wp_prefix_len : 0)) room = 0;
        if (end - start > room) {
            end = start + room + 1;
            do end--; while (end > start && ((uint8_t)w[end] & 0xC0) == 0x80);
        }
        int32_t id = -1;
        while (start < end) {
            int found;
            if (start == 0) {
                found = lp_strmap_get(&t->vocab, w, end, &id);
            } else {
                memcpy(buf + t->wp_prefix_len, w + start, end - start);
                found = lp_strmap_get(&t->vocab, buf, t->wp_prefix_len + end - start, &id);
            }
            if (found) break;
            id = -1;
            do end--; while (end > start && ((uint8_t)w[end] & 0xC0) == 0x80);
        }
        if (id < 0) { bad = 1; break; }
        if (lp_ids_push(out, id)) { if (buf != stackbuf) free(buf); return -1; }
        start = end;
    }
    if (buf != stackbuf) free(buf);
    if (bad) {
        out->n = first;
        return lp_ids_push(out, t->unk_id);
    }
    return 0;
}

/* ---- BPE ---- */

static inline int mrg_less(const struct lp_mrg *a, const struct lp_mrg *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(struct lp_mrg *h, size_t *n, struct lp_mrg m)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!mrg_less(&m, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = m;
}

static struct lp_mrg heap_pop(struct lp_mrg *h, size_t *n)
{
    struct lp_mrg top = h[0], last = h[--*n];
    size_t i = 0, cnt = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= cnt) break;
        if (c + 1 < cnt && mrg_less(&h[c + 1], &h[c])) c++;
        if (!mrg_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (cnt) h[i] = last;
    return top;
}

static inline int pair_merge(const lp_tokenizer *t, int32_t a, int32_t b, uint32_t *rank, int32_t *nid)
{
    uint64_t v;
    if (!lp_u64map_get(&t->merges, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, &v)) return 0;
    *rank = (uint32_t)(v >> 32);
    *nid = (int32_t)(uint32_t)v;
    return 1;
}

/* Initial symbols of a word (HF merge_word): one per byte (byte-level) or per char,
 * with byte fallback and (fused) unknown tokens. Returns the count or -1. */
static long bpe_symbols(const lp_tokenizer *t, lp_scratch *sc, const char *w, size_t n)
{
    if (n > sc->syms_cap) {
        size_t nc = n < 64 ? 64 : n;
        void *ns = lp_realloc(sc->syms, nc * sizeof *sc->syms);
        void *nh = lp_realloc(sc->heap, nc * 2 * sizeof *sc->heap);
        if (ns) sc->syms = ns;
        if (nh) sc->heap = nh;
        if (!ns || !nh) return -1;
        sc->syms_cap = nc;
        sc->heap_cap = nc * 2;
    }
    struct lp_sym *s = sc->syms;
    long k = 0;
    int32_t unk_pending = -1;
    uint32_t unk_len = 0;
    for (size_t i = 0; i < n;) {
        int len = 1;
        int32_t id = -1;
        if (t->byte_level) {
            id = t->byte_id[(uint8_t)w[i]];
        } else {
            if ((uint8_t)w[i] >= 0x80) lp_utf8_next((const uint8_t *)w + i, n - i, &len);
            if (!lp_strmap_get(&t->vocab, w + i, (size_t)len, &id)) id = -1;
        }
        if (id >= 0) {
            if (unk_pending >= 0) { s[k++] = (struct lp_sym){unk_pending, 0, 0, unk_len}; unk_pending = -1; }
            s[k++] = (struct lp_sym){id, 0, 0, (uint32_t)len};
        } else {
            int fb = 0;
            if (t->byte_fallback) {
                fb = 1;
                for (int j = 0; j < len; j++) fb &= t->byte_fb[(uint8_t)w[i + j]] >= 0;
                if (fb) {
                    if (unk_pending >= 0) { s[k++] = (struct lp_sym){unk_pending, 0, 0, unk_len}; unk_pending = -1; }
                    for (int j = 0; j < len; j++) s[k++] = (struct lp_sym){t->byte_fb[(uint8_t)w[i + j]], 0, 0, 1};
                }
            }
            if (!fb && t->unk_id >= 0) {
                if (unk_pending >= 0 && t->fuse_unk) {
                    unk_len += (uint32_t)len;
                } else {
                    if (unk_pending >= 0) s[k++] = (struct lp_sym){unk_pending, 0, 0, unk_len};
                    unk_pending = t->unk_id;
                    unk_len = (uint32_t)len;
                }
            }
            /* no unk token: the char is dropped, as HF does */
        }
        i += (size_t)len;
    }
    if (unk_pending >= 0) s[k++] = (struct lp_sym){unk_pending, 0, 0, unk_len};
    for (long i = 0; i < k; i++) {
        s[i].prev = (int32_t)i - 1;
        s[i].next = i + 1 < k ? (int32_t)i + 1 : -1;
    }
    return k;
}

static int bpe(const lp_tokenizer *t, lp_scratch *sc, const char *w, size_t n, lp_ids *out)
{
    int32_t id;
    const lp_strmap *wv = t->byte_level ? &t->bvocab : &t->vocab;
    if (t->ignore_merges && lp_strmap_get(wv, w, n, &id)) return lp_ids_push(out, id);
    int32_t hit;
    if (lp_strmap_get(&sc->cache, w, n, &hit)) {
        int32_t cnt = sc->cache_ids.v[hit];
        for (int32_t i = 0; i < cnt; i++)
            if (lp_ids_push(out, sc->cache_ids.v[hit + 1 + i])) return -1;
        return 0;
    }
    long k = bpe_symbols(t, sc, w, n);
    if (k < 0) return -1;
    struct lp_sym *s = sc->syms;
    struct lp_mrg *h = sc->heap;
    size_t hn = 0;
    uint32_t rank;
    int32_t nid;
    for (long i = 0; i + 1 < k; i++)
        if (pair_merge(t, s[i].id, s[i + 1].id, &rank, &nid))
            heap_push(h, &hn, (struct lp_mrg){rank, (uint32_t)i, nid});
    while (hn) {
        struct lp_mrg top = heap_pop(h, &hn);
        struct lp_sym *cur = &s[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        int32_t nx = cur->next;
        if (!pair_merge(t, cur->id, s[nx].id, &rank, &nid) || nid != top.new_id) continue;
        cur->id = top.new_id;
        cur->len += s[nx].len;
        cur->next = s[nx].next;
        s[nx].len = 0;
        if (cur->next >= 0) s[cur->next].prev = (int32_t)top.pos;
        /* the heap never holds more than one entry per live pair plus stale ones; each
         * merge adds at most two, and merges are at most k-1, so 2k slots suffice... but
         * stale entries stay: grow when needed */
        if (hn + 2 > sc->heap_cap) {
            size_t nc = sc->heap_cap * 2;
            void *nh = lp_realloc(sc->heap, nc * sizeof *sc->heap);
            if (!nh) return -1;
            sc->heap = h = nh;
            sc->heap_cap = nc;
        }
        if (cur->prev >= 0 && pair_merge(t, s[cur->prev].id, cur->id, &rank, &nid))
            heap_push(h, &hn, (struct lp_mrg){rank, (uint32_t)cur->prev, nid});
        if (cur->next >= 0 && pair_merge(t, cur->id, s[cur->next].id, &rank, &nid))
            heap_push(h, &hn, (struct lp_mrg){rank, top.pos, nid});
    }
    size_t first = out->n;
    for (long i = 0; i < k; i++)
        if (s[i].len && lp_ids_push(out, s[i].id)) return -1;
    /* cache: [count, ids...]; cleared wholesale when large, which keeps memory bounded */
    if (n <= 256) {
        if (sc->cache.n >= 50000) {
            lp_strmap_clear(&sc->cache);
            sc->cache_ids.n = 0;
        }
        int32_t at = (int32_t)sc->cache_ids.n;
        size_t cnt = out->n - first;
        if (lp_ids_push(&sc->cache_ids, (int32_t)cnt)) return -1;
        for (size_t i = 0; i < cnt; i++)
            if (lp_ids_push(&sc->cache_ids, out->v[first + i])) return -1;
        if (lp_strmap_put(&sc->cache, w, n, at)) return -1;
    }
    return 0;
}

int lp_model_word(const lp_tokenizer *t, lp_scratch *sc, const char *w, size_t n, lp_ids *out)
{
    if (n == 0) return 0;
    return t->model == LP_MODEL_WORDPIECE ? wordpiece(t, w, n, out) : bpe(t, sc, w, n, out);
}
