/* Normalizers of tokenizer.json: BertNormalizer (clean text, CJK spacing, accent
 * stripping, lowercasing), the four Unicode normal forms, Lowercase, StripAccents and
 * Sequence. Offsets are not tracked: loupe needs ids, not alignments. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "internal.h"

void lp_norm_free(lp_norm *nm)
{
    if (!nm) return;
    for (int i = 0; i < nm->nkids; i++) lp_norm_free(nm->kids[i]);
    free(nm->kids);
    free(nm);
}

/* Full lowercase of one char as Rust's char::to_lowercase: simple mapping except U+0130,
 * the only unconditional one-to-many lowercase mapping. */
static int put_lower(int32_t c, lp_buf *out)
{
    char tmp[8];
    int k;
    if (c < 0x80) {
        tmp[0] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        return lp_buf_add(out, tmp, 1);
    }
    if (c == 0x130) return lp_buf_add(out, "i\xCC\x87", 3);
    k = lp_utf8_put(utf8proc_tolower(c), tmp);
    return lp_buf_add(out, tmp, (size_t)k);
}

/* Unicode normal form through utf8proc, with a copy fast path for text it cannot change. */
static int unicode_form(int type, const char *in, size_t n, lp_buf *out)
{
    const uint8_t *s = (const uint8_t *)in;
    /* below the limit a form changes nothing: NFD decomposes nothing under U+00C0, NFC
     * composes nothing under U+0300; compatibility forms map Latin-1 (NBSP, ½), so ASCII only */
    int32_t limit = type == LP_NORM_NFC ? 0x300 : type == LP_NORM_NFD ? 0xC0 : 0x80;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        int len;
        int32_t c = lp_utf8_next(s + i, n - i, &len);
        if (c >= limit) break;
        i += (size_t)len;
    }
    if (i == n) return lp_buf_add(out, in, n);
    int opts = UTF8PROC_STABLE;
    switch (type) {
    case LP_NORM_NFC: opts |= UTF8PROC_COMPOSE; break;
    case LP_NORM_NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case LP_NORM_NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)n, &dst, opts);
    if (r < 0) {
        /* only on malformed input or allocation failure; input is valid UTF-8 here */
        free(dst);
        return r == UTF8PROC_ERROR_NOMEM ? -1 : lp_buf_add(out, in, n);
    }
    int rc = lp_buf_add(out, dst, (size_t)r);
    free(dst);
    return rc;
}

static int bert(const lp_norm *nm, const char *in, size_t n, lp_buf *out)
{
    const uint8_t *s = (const uint8_t *)in;
    int strip = nm->strip_accents;
    lp_buf tmp = {0};
    lp_buf *dst = strip ? &tmp : out;
    /* pass 1: clean text, CJK spacing, and lowercasing when accents stay */
    for (size_t i = 0; i < n;) {
        int len;
        int32_t c = s[i] < 0x80 ? (len = 1, s[i]) : lp_utf8_next(s + i, n - i, &len);
        const char *src = in + i;
        i += (size_t)len;
        if (nm->clean_text) {
            if (c == 0 || c == 0xFFFD || lp_is_control(c)) continue;
            if (lp_is_ws(c)) {
                if (lp_buf_add(dst, " ", 1)) goto oom;
                continue;
            }
        }
        if (nm->chinese && c >= 0x3400 && lp_is_cjk(c)) {
            if (lp_buf_add(dst, " ", 1) || lp_buf_add(dst, src, (size_t)len) || lp_buf_add(dst, " ", 1)) goto oom;
            continue;
        }
        if (nm->lowercase && !strip) {
            if (put_lower(c, dst)) goto oom;
        } else if (lp_buf_add(dst, src, (size_t)len)) {
            goto oom;
        }
    }
    if (!strip) return 0;
    /* pass 2: NFD, drop nonspacing marks, then lowercase */
    {
        lp_buf nfd = {0};
        if (unicode_form(LP_NORM_NFD, tmp.p, tmp.len, &nfd)) { free(nfd.p); goto oom; }
        const uint8_t *t = (const uint8_t *)nfd.p;
        for (size_t i = 0; i < nfd.len;) {
            int len;
            int32_t c = t[i] < 0x80 ? (len = 1, t[i]) : lp_utf8_next(t + i, nfd.len - i, &len);
            const char *src = nfd.p + i;
            i += (size_t)len;
            if (lp_is_mn(c)) continue;
            if (nm->lowercase ? put_lower(c, out) : lp_buf_add(out, src, (size_t)len)) { free(nfd.p); goto oom; }
        }
        free(nfd.p);
    }
    free(tmp.p);
    return 0;
oom:
    free(tmp.p);
    return -1;
}

int lp_norm_apply(const lp_norm *nm, const char *in, size_t n, lp_buf *out)
{
    switch (nm->type) {
    case LP_NORM_BERT: return bert(nm, in, n, out);
    case LP_NORM_NFC:
    case LP_NORM_NFD:
    case LP_NORM_NFKC:
    case LP_NORM_NFKD: return unicode_form(nm->type, in, n, out);
    case LP_NORM_LOWER:
    case LP_NORM_STRIP_ACCENTS: {
        const uint8_t *s = (const uint8_t *)in;
        for (size_t i = 0; i < n;) {
            int len;
            int32_t c = s[i] < 0x80 ? (len = 1, s[i]) : lp_utf8_next(s + i, n - i, &len);
            const char *src = in + i;
            i += (size_t)len;
            if (nm->type == LP_NORM_LOWER) {
                if (put_lower(c, out)) return -1;
            } else if (!lp_is_mn(c) && lp_buf_add(out, src, (size_t)len)) {
                return -1;
            }
        }
        return 0;
    }
    case LP_NORM_SEQ: {
        if (nm->nkids == 0) return lp_buf_add(out, in, n);
        lp_buf cur = {0}, nxt = {0};
        if (lp_buf_add(&cur, in, n)) return -1;
        for (int k = 0; k < nm->nkids; k++) {
            nxt.len = 0;
            if (lp_norm_apply(nm->kids[k], cur.p, cur.len, &nxt)) { free(cur.p); free(nxt.p); return -1; }
            lp_buf t = cur; cur = nxt; nxt = t;
        }
        int rc = lp_buf_add(out, cur.p, cur.len);
        free(cur.p);
        free(nxt.p);
        return rc;
    }
    default: return lp_buf_add(out, in, n);
    }
}
