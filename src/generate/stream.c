/* Incremental text of one generated sequence: the ids decoded so far are turned into text
 * each step, and only a prefix that cannot change or turn out to belong to a stop string is
 * released to the stream: never half a UTF-8 character (a byte-level token may carry part of
 * one; the decoder then ends in a partial sequence or U+FFFD until the rest arrives), never
 * the start of a possible stop string. */
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

/* Bytes at the end of s[0..n) that may still change: an incomplete UTF-8 sequence or
 * trailing U+FFFD replacement characters. */
static size_t unstable_tail(const char *s, size_t n)
{
    size_t hold = 0;
    for (;;) { // trailing U+FFFD (EF BF BD): the decoder's stand-in for bytes still coming
        if (n - hold >= 3 && !memcmp(s + n - hold - 3, "\xEF\xBF\xBD", 3))
            hold += 3;
        else
            break;
    }
    // a lead byte whose continuation bytes have not all arrived
    for (size_t back = 1; back <= 3 && back <= n - hold; back++) {
        const unsigned char c = (unsigned char)s[n - hold - back];
        if ((c & 0xC0) == 0x80) // continuation: keep looking for the lead
            continue;
        const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need > back)
            hold += back;
        break;
    }
    return hold;
}

/* Longest suffix of s[0..n) that is a proper prefix of a stop string. */
static size_t stop_prefix_tail(const char *s, size_t n, const char *const *stops, int32_t n_stops)
{
    size_t hold = 0;
    for (int32_t i = 0; i < n_stops; i++) {
        const size_t L = strlen(stops[i]);
        for (size_t k = L > 0 ? L - 1 : 0; k > hold; k--)
            if (k <= n && !memcmp(s + n - k, stops[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

lp_status lp_gen__stream_update(lp_gen_stream *st, const lp_tokenizer *tok, const int32_t *ids, int32_t n,
                                const lp_gen_opts *o, bool final, int32_t b, bool *hit_stop)
{
    *hit_stop = false;
    char *text = NULL;
    lp_status s = tok ? lp_tokenizer_decode(tok, ids, (size_t)n, o->skip_special, &text) : LP_OK;
    if (s != LP_OK)
        return s;
    if (!tok && !(text = calloc(1, 1))) // ids only: no text to stream
        return lp_err(LP_STATUS_NO_MEMORY, "generate: out of memory");
    size_t len = strlen(text);
    // the earliest stop string ends the text there
    size_t cut = len;
    for (int32_t i = 0; i < o->n_stop_strs; i++) {
        if (!o->stop_strs[i][0])
            continue;
        const char *hit = strstr(text, o->stop_strs[i]);
        if (hit && (size_t)(hit - text) < cut)
            cut = (size_t)(hit - text);
    }
    if (cut < len) {
        *hit_stop = true;
        final = true;
        len = cut;
        text[len] = 0;
    }
    size_t safe = len;
    if (!final) {
        size_t h1 = unstable_tail(text, len), h2 = stop_prefix_tail(text, len, o->stop_strs, o->n_stop_strs);
        safe = len - (h1 > h2 ? h1 : h2);
    }
    if (safe > st->emitted && o->on_text)
        o->on_text(o->user, b, text + st->emitted, safe - st->emitted);
    if (safe > st->emitted)
        st->emitted = safe;
    free(st->text);
    st->text = text;
    return LP_OK;
}
