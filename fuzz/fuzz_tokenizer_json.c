/* libFuzzer target: tokenizer.json parsing from an untrusted buffer, then an encode of
 * fixed text (specials, accents, CJK, digits, invalid UTF-8), a truncated pair, and a
 * decode of the ids: every component a file can configure gets exercised. */
#include <stdint.h>
#include <stdlib.h>

#include "loupe/text.h"

static const char TEXT[] = "Hello, World! [CLS] <|endoftext|> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 12345 "
                           "don't  \t\r x\xff\xc3 \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb hello";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_tokenizer *t = NULL;
    if (lp_tokenizer_load_json((const char *)data, size, "fuzz.json", &t) != LP_OK) return 0;
    lp_encoding e = {0};
    lp_encode_opts o = lp_encode_opts_default();
    if (lp_tokenizer_encode_n(t, TEXT, sizeof TEXT - 1, NULL, 0, &o, &e) == LP_OK) {
        char *s = NULL;
        if (lp_tokenizer_decode(t, e.ids, e.len, 0, &s) == LP_OK) free(s);
    }
    o.max_length = 7;
    o.pad_to = 9;
    (void)lp_tokenizer_encode(t, "a pair of texts", TEXT, &o, &e);
    (void)lp_tokenizer_token_to_id(t, "hello");
    (void)lp_tokenizer_id_to_token(t, 3);
    lp_encoding_free(&e);
    lp_tokenizer_free(t);
    return 0;
}
