/* The streamed text of a generation (src/generate/stream.c), fed one token at a time with the
 * bundled tiny llama's byte-level BPE tokenizer: what reaches the callback, concatenated, is
 * exactly the final text; no piece ever ends in half a UTF-8 character or holds U+FFFD while
 * more tokens may complete it (multi-byte characters are split over byte tokens here); a
 * stop string is cut from the text and no prefix of it is ever streamed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/generate/gen_internal.h"

typedef struct sink {
    char buf[4096];
    size_t n;
    int bad_pieces; /* pieces ending mid-character or holding U+FFFD */
} sink;

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        const size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!need || i + need > n)
            return false;
        for (size_t k = 1; k < need; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80)
                return false;
        i += need;
    }
    return true;
}

static bool has_fffd(const char *s, size_t n)
{
    for (size_t i = 0; i + 3 <= n; i++)
        if (!memcmp(s + i, "\xEF\xBF\xBD", 3))
            return true;
    return false;
}

static void on_text(void *user, int32_t b, const char *text, size_t len)
{
    (void)b;
    sink *s = user;
    if (!valid_utf8(text, len) || has_fffd(text, len))
        s->bad_pieces++;
    memcpy(s->buf + s->n, text, len);
    s->n += len;
    s->buf[s->n] = 0;
}

/* Streams the tokens of `text` one by one; returns the final text (owned by st). */
static const char *stream(const lp_tokenizer *tok, const char *text, const char *const *stops, int32_t n_stops,
                          sink *s, lp_gen_stream *st, bool *hit)
{
    lp_encoding enc = {0};
    lp_encode_opts eo = lp_encode_opts_default();
    eo.add_special_tokens = 0;
    assert_int_equal(lp_tokenizer_encode(tok, text, NULL, &eo, &enc), LP_OK);
    lp_gen_opts o;
    lp_gen_opts_init(&o);
    o.on_text = on_text;
    o.user = s;
    o.stop_strs = stops;
    o.n_stop_strs = n_stops;
    memset(s, 0, sizeof *s);
    memset(st, 0, sizeof *st);
    *hit = false;
    for (size_t i = 1; i <= enc.len && !*hit; i++)
        assert_int_equal(lp_gen__stream_update(st, tok, enc.ids, (int32_t)i, &o, i == enc.len, 0, hit), LP_OK);
    lp_encoding_free(&enc);
    return st->text;
}

static void test_utf8_and_stops(void **state)
{
    (void)state;
    lp_tokenizer *tok = NULL;
    assert_int_equal(lp_tokenizer_load("models/tiny-llama", &tok), LP_OK);
    sink s;
    lp_gen_stream st;
    bool hit;
    const char *text = "Zoë eats crème brûlée 🍮 at the café — 東京!";
    const char *out = stream(tok, text, NULL, 0, &s, &st, &hit);
    assert_string_equal(out, text);
    assert_string_equal(s.buf, text); // everything streamed, in order
    assert_int_equal(s.bad_pieces, 0);
    assert_false(hit);
    free(st.text);

    const char *stops[] = {"STOP", "never"};
    out = stream(tok, "the cat sat. STOP and more", stops, 2, &s, &st, &hit);
    assert_true(hit);
    assert_string_equal(out, "the cat sat. ");
    assert_string_equal(s.buf, "the cat sat. "); // no "S", "ST", ... reached the stream
    free(st.text);

    // a stop string's prefix that does not complete is released once it cannot be a stop
    out = stream(tok, "it was STOMPING", stops, 2, &s, &st, &hit);
    assert_false(hit);
    assert_string_equal(s.buf, "it was STOMPING");
    free(st.text);
    lp_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_utf8_and_stops)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
