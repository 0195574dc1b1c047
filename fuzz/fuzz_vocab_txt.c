/* libFuzzer target: a BERT vocab.txt (one token per line, id = line number) from an
 * untrusted buffer. An accepted vocabulary then encodes fixed text and a piece of the file
 * itself, alone and as a truncated, padded pair: every id must lie in [0, vocab size) and
 * name a token, [UNK] must be found, and the ids must decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/text/internal.h" /* lp_tokenizer_from_vocab_txt is text-internal */

static const char TEXT[] = "Hello, World! [CLS] unaffable caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 12345 ##ing "
                           "don't \t\r x\xff\xc3 [UNK] [MASK] [SEP] hello";

static void check_ids(const lp_tokenizer *t, const lp_encoding *e, int32_t n)
{
    for (size_t i = 0; i < e->len; i++)
        if (e->ids[i] < 0 || e->ids[i] >= n || !lp_tokenizer_id_to_token(t, e->ids[i]))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_tokenizer *t = NULL;
    if (lp_tokenizer_from_vocab_txt((const char *)data, size, "fuzz/vocab.txt", &t) != LP_OK) {
        if (t || !*lp_err_msg())
            abort();
        return 0;
    }
    const int32_t n = lp_tokenizer_vocab_size(t);
    const int32_t unk = lp_tokenizer_token_to_id(t, "[UNK]");
    if (n < 1 || unk < 0 || unk >= n)
        abort();
    lp_encoding e = {0};
    lp_encode_opts o = lp_encode_opts_default();
    if (lp_tokenizer_encode_n(t, TEXT, sizeof TEXT - 1, NULL, 0, &o, &e) != LP_OK)
        abort(); // plain encode of a single sequence cannot be refused
    check_ids(t, &e, n);
    char *s = NULL;
    if (lp_tokenizer_decode(t, e.ids, e.len, 0, &s) != LP_OK)
        abort();
    free(s);
    // a piece of the file itself: its tokens (and the bytes around a line break) as text
    const size_t off = size / 3, len = size - off < 64 ? size - off : 64;
    if (lp_tokenizer_encode_n(t, (const char *)data + off, len, NULL, 0, &o, &e) != LP_OK)
        abort();
    check_ids(t, &e, n);
    o.max_length = 9;
    o.pad_to = 12;
    if (lp_tokenizer_encode_n(t, (const char *)data + off, len, TEXT, sizeof TEXT - 1, &o, &e) == LP_OK) {
        if (e.len != 12 && e.len != 9) // padded to 12 when there is a pad token
            abort();
        check_ids(t, &e, n);
    }
    lp_encoding_free(&e);
    lp_tokenizer_free(t);
    return 0;
}
