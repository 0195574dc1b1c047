/* Decoding ids back to text: the WordPiece decoder ("##" glued to the previous token,
 * optional cleanup of spaces before punctuation and contractions), the ByteLevel decoder
 * (GPT-2 alphabet back to bytes, invalid UTF-8 replaced by U+FFFD) or plain joining. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* In-place replace-all of pat by rep (rep no longer than pat) in b. */
static void replace_all(lp_buf *b, size_t from, const char *pat, const char *rep)
{
    size_t pl = strlen(pat), rl = strlen(rep), o = from, i = from;
    while (i < b->len) {
        if (i + pl <= b->len && !memcmp(b->p + i, pat, pl)) {
            memcpy(b->p + o, rep, rl);
            o += rl;
            i += pl;
        } else {
            b->p[o++] = b->p[i++];
        }
    }
    b->len = o;
}

static void cleanup(lp_buf *b, size_t from)
{
    static const char *rules[][2] = {{" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},
                                     {" ' ", "'"},    {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"},
                                     {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"}};
    /* every replacement is no longer than its pattern (" do not" and " don't" are both
     * 7 bytes), so the edit happens in place */
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) replace_all(b, from, rules[r][0], rules[r][1]);
}

lp_status lp_tokenizer_decode(const lp_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **out)
{
    if (!t || !out || (!ids && n)) return lp_err(LP_STATUS_INVALID_ARG, "lp_tokenizer_decode: NULL argument");
    *out = NULL;
    if (t->dec == LP_DEC_OTHER)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: decoding with this decoder type is not supported", t->name);
    lp_buf b = {0};
    size_t count = 0;
    size_t plen = t->dec_prefix ? strlen(t->dec_prefix) : 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !t->id_tok[id]) continue;
        if (skip_special && t->id_special[id]) continue;
        const char *tok = t->id_tok[id];
        size_t tl = strlen(tok), start = b.len;
        int rc = 0;
        if (t->dec == LP_DEC_BYTELEVEL) {
            /* a token whose chars are all in the alphabet becomes bytes; others stay */
            size_t j = 0;
            int ok = 1;
            if (lp_buf_reserve(&b, tl)) goto oom;
            while (j < tl) {
                int len;
                int byte = lp_cp_to_byte(lp_utf8_next((const uint8_t *)tok + j, tl - j, &len));
                if (byte < 0) { ok = 0; break; }
                b.p[b.len++] = (char)byte;
                j += (size_t)len;
            }
            if (!ok) {
                b.len = start;
                rc = lp_buf_add(&b, tok, tl);
            }
        } else if (t->dec == LP_DEC_WORDPIECE) {
            if (count > 0) {
                if (plen && tl >= plen && !memcmp(tok, t->dec_prefix, plen)) tok += plen, tl -= plen;
                else rc = lp_buf_add(&b, " ", 1);
            }
            rc = rc || lp_buf_add(&b, tok, tl);
            if (!rc && t->dec_cleanup) cleanup(&b, start);
        } else {
            rc = (count > 0 && lp_buf_add(&b, " ", 1)) || lp_buf_add(&b, tok, tl);
        }
        if (rc) goto oom;
        count++;
    }
    size_t len;
    *out = lp_utf8_sanitize(b.p ? b.p : "", b.len, &len);
    free(b.p);
    if (!*out) return lp_err(LP_STATUS_NO_MEMORY, "decode: out of memory");
    return LP_OK;
oom:
    free(b.p);
    return lp_err(LP_STATUS_NO_MEMORY, "decode: out of memory");
}
