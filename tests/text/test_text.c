/* Unit tests of the text layer on small hand-written tokenizers: malformed tokenizer.json
 * (each error names the file and the problem), WordPiece and BPE on worked examples,
 * added-token flags, post-processing, truncation, padding, decoding, invalid UTF-8, empty
 * and very long input, vocab.txt, and concurrent encodes. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "loupe/text.h"

static const char WP_JSON[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true,\"normalized\":false},"
    "{\"id\":1,\"content\":\"[UNK]\",\"special\":true,\"normalized\":false},"
    "{\"id\":2,\"content\":\"[CLS]\",\"special\":true,\"normalized\":false},"
    "{\"id\":3,\"content\":\"[SEP]\",\"special\":true,\"normalized\":false}],"
    "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
    "\"strip_accents\":null,\"lowercase\":true},"
    "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
    "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]},"
    "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
    "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
    "\"max_input_chars_per_word\":100,\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,"
    "\"un\":4,\"##aff\":5,\"##able\":6,\"hello\":7,\"world\":8,\"!\":9,\"cafe\":10,\"日\":11,\"本\":12,"
    "\"a\":13,\"##b\":14,\".\":15}}}";

static const char BPE_JSON[] =
    "{\"added_tokens\":[{\"id\":10,\"content\":\"<eos>\",\"special\":true,\"normalized\":false,"
    "\"lstrip\":true,\"rstrip\":true},"
    "{\"id\":11,\"content\":\"wo\",\"special\":false,\"normalized\":false,\"single_word\":true}],"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"h\":0,\"e\":1,\"l\":2,\"o\":3,\"he\":4,\"ll\":5,\"hell\":6,"
    "\"hello\":7,\" \":8,\"w\":9},"
    "\"merges\":[\"h e\",[\"l\",\"l\"],\"he ll\",\"hell o\"]}}";

static lp_tokenizer *load(const char *json)
{
    lp_tokenizer *t = NULL;
    lp_status st = lp_tokenizer_load_json(json, strlen(json), "toy.json", &t);
    if (st != LP_OK) fprintf(stderr, "load failed: %s\n", lp_err_msg());
    assert_int_equal(st, LP_OK);
    return t;
}

static void expect_ids(const lp_tokenizer *t, const char *a, const char *b, const lp_encode_opts *o,
                       const int32_t *want, size_t n)
{
    lp_encoding e = {0};
    assert_int_equal(lp_tokenizer_encode(t, a, b, o, &e), LP_OK);
    if (e.len != n) {
        fprintf(stderr, "'%s': got %zu ids:", a, e.len);
        for (size_t i = 0; i < e.len; i++) fprintf(stderr, " %d", e.ids[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(e.len, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(e.ids[i], want[i]);
    lp_encoding_free(&e);
}

/* Each malformed file fails with the expected status and a message naming the file. */
static void test_malformed(void **state)
{
    (void)state;
    static const struct { const char *json; lp_status st; const char *needle; } cases[] = {
        {"", LP_STATUS_FORMAT, "empty"},
        {"{\"model\":", LP_STATUS_FORMAT, "invalid JSON"},
        {"[1,2]", LP_STATUS_FORMAT, "object"},
        {"{}", LP_STATUS_FORMAT, "model"},
        {"{\"model\":{\"type\":\"Unigram\",\"vocab\":{}}}", LP_STATUS_UNSUPPORTED, "Unigram"},
        {"{\"model\":{\"vocab\":{\"a\":0}}}", LP_STATUS_FORMAT, "type"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":[1]}}", LP_STATUS_FORMAT, "vocab"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", LP_STATUS_FORMAT, "id must be"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"ab\"]}}", LP_STATUS_FORMAT,
         "merges[0]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}", LP_STATUS_FORMAT,
         "missing from the vocab"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[7]}}", LP_STATUS_FORMAT, "merges[0]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", LP_STATUS_FORMAT, "merges"},
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", LP_STATUS_FORMAT, "unk_token"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"normalizer\":{\"type\":\"Precompiled\"}}",
         LP_STATUS_UNSUPPORTED, "Precompiled"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Split\","
         "\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
         LP_STATUS_FORMAT, "regex"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"added_tokens\":[{\"id\":1}]}",
         LP_STATUS_FORMAT, "added_tokens[0]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", LP_STATUS_FORMAT, "empty"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"dropout\":0.1}}", LP_STATUS_UNSUPPORTED,
         "dropout"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lp_tokenizer *t = (lp_tokenizer *)1;
        lp_status st = lp_tokenizer_load_json(cases[i].json, strlen(cases[i].json), "bad.json", &t);
        if (st != cases[i].st || !strstr(lp_err_msg(), cases[i].needle) || !strstr(lp_err_msg(), "bad.json"))
            fprintf(stderr, "case %zu: status %d, message '%s'\n", i, st, lp_err_msg());
        assert_int_equal(st, cases[i].st);
        assert_null(t);
        assert_non_null(strstr(lp_err_msg(), cases[i].needle));
        assert_non_null(strstr(lp_err_msg(), "bad.json"));
    }
    lp_tokenizer *t = NULL;
    assert_int_equal(lp_tokenizer_load("/nonexistent/tokenizer.json", &t), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent/tokenizer.json"));
}

static void test_wordpiece(void **state)
{
    (void)state;
    lp_tokenizer *t = load(WP_JSON);
    /* greedy longest match, accents stripped, case folded, CJK split, punctuation isolated */
    expect_ids(t, "UnAffable Café!", NULL, NULL, (int32_t[]){2, 4, 5, 6, 10, 9, 3}, 7);
    expect_ids(t, "日本", NULL, NULL, (int32_t[]){2, 11, 12, 3}, 4);
    /* a word with no full cover is one [UNK]; so is a word over 100 chars */
    expect_ids(t, "unaffablex hello", NULL, NULL, (int32_t[]){2, 1, 7, 3}, 4);
    char longw[150];
    memset(longw, 'a', 149);
    longw[149] = 0;
    expect_ids(t, longw, NULL, NULL, (int32_t[]){2, 1, 3}, 3);
    /* specials written in the text are matched before normalization (case-sensitive) */
    expect_ids(t, "hello[SEP]world", NULL, NULL, (int32_t[]){2, 7, 3, 8, 3}, 5);
    /* empty input: only the template's specials; nothing at all without them */
    expect_ids(t, "", NULL, NULL, (int32_t[]){2, 3}, 2);
    lp_encode_opts o = lp_encode_opts_default();
    o.add_special_tokens = 0;
    expect_ids(t, "", NULL, &o, NULL, 0);
    expect_ids(t, "hello world", NULL, &o, (int32_t[]){7, 8}, 2);
    assert_int_equal(lp_tokenizer_special_id(t, LP_SPECIAL_CLS), 2);
    assert_int_equal(lp_tokenizer_special_id(t, LP_SPECIAL_SEP), 3);
    assert_int_equal(lp_tokenizer_special_id(t, LP_SPECIAL_PAD), 0);
    assert_int_equal(lp_tokenizer_special_id(t, LP_SPECIAL_UNK), 1);
    assert_int_equal(lp_tokenizer_special_id(t, LP_SPECIAL_BOS), -1);
    assert_int_equal(lp_tokenizer_token_to_id(t, "##able"), 6);
    assert_string_equal(lp_tokenizer_id_to_token(t, 5), "##aff");
    assert_null(lp_tokenizer_id_to_token(t, 99));
    assert_int_equal(lp_tokenizer_vocab_size(t), 16);
    lp_tokenizer_free(t);
}

static void test_pairs_truncation_padding(void **state)
{
    (void)state;
    lp_tokenizer *t = load(WP_JSON);
    lp_encoding e = {0};
    assert_int_equal(lp_tokenizer_encode(t, "hello world", "cafe", NULL, &e), LP_OK);
    int32_t ids[] = {2, 7, 8, 3, 10, 3}, types[] = {0, 0, 0, 0, 1, 1};
    assert_int_equal(e.len, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(e.ids[i], ids[i]);
        assert_int_equal(e.type_ids[i], types[i]);
        assert_int_equal(e.attention_mask[i], 1);
    }
    assert_int_equal(lp_tokenizer_num_special(t, 1), 3);
    /* longest_first: A has 6 tokens, B 2; room 8-3 = 5 -> A keeps 3, B keeps 2 */
    lp_encode_opts o = lp_encode_opts_default();
    o.max_length = 8;
    expect_ids(t, "hello world hello world hello world", "cafe cafe", &o, (int32_t[]){2, 7, 8, 7, 3, 10, 10, 3}, 8);
    /* both long: room 5 -> shorter A gets 2, longer B gets 3 */
    expect_ids(t, "hello hello hello hello", "cafe cafe cafe cafe cafe", &o, (int32_t[]){2, 7, 7, 3, 10, 10, 10, 3}, 8);
    o.max_length = 4;
    expect_ids(t, "hello world hello", NULL, &o, (int32_t[]){2, 7, 8, 3}, 4);
    o.max_length = 1; /* cannot hold [CLS] and [SEP] */
    assert_int_equal(lp_tokenizer_encode(t, "hello", NULL, &o, &e), LP_STATUS_INVALID_ARG);
    /* fixed padding, then batch padding through lp_encoding_pad */
    o = lp_encode_opts_default();
    o.pad_to = 6;
    assert_int_equal(lp_tokenizer_encode(t, "hello", NULL, &o, &e), LP_OK);
    assert_int_equal(e.len, 6);
    int32_t pids[] = {2, 7, 3, 0, 0, 0}, mask[] = {1, 1, 1, 0, 0, 0};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(e.ids[i], pids[i]);
        assert_int_equal(e.attention_mask[i], mask[i]);
    }
    assert_int_equal(lp_encoding_pad(&e, 8, 0, 0), LP_OK);
    assert_int_equal(e.len, 8);
    assert_int_equal(e.attention_mask[7], 0);
    lp_encoding_free(&e);
    assert_null(e.ids);
    lp_tokenizer_free(t);
}

static void test_bpe(void **state)
{
    (void)state;
    lp_tokenizer *t = load(BPE_JSON);
    /* the worked example: h e l l o -> he l l o -> he ll o -> hell o -> hello */
    expect_ids(t, "hello", NULL, NULL, (int32_t[]){7}, 1);
    expect_ids(t, "hellhe", NULL, NULL, (int32_t[]){6, 4}, 2);
    /* no pre-tokenizer: the space is a symbol of the same word and blocks merges */
    expect_ids(t, "hello hello", NULL, NULL, (int32_t[]){7, 8, 7}, 3);
    /* lstrip/rstrip swallow the spaces around <eos>; single_word "wo" only alone */
    expect_ids(t, "hello <eos> hello", NULL, NULL, (int32_t[]){7, 10, 7}, 3);
    expect_ids(t, "wo hello", NULL, NULL, (int32_t[]){11, 8, 7}, 3);
    expect_ids(t, "who", NULL, NULL, (int32_t[]){9, 0, 3}, 3);
    /* chars missing from the vocab without unk_token are dropped, as HF does */
    expect_ids(t, "hexo", NULL, NULL, (int32_t[]){4, 3}, 2);
    expect_ids(t, "", NULL, NULL, NULL, 0);
    char *s = NULL;
    assert_int_equal(lp_tokenizer_decode(t, (int32_t[]){7, 8, 10, 6}, 4, 0, &s), LP_OK);
    assert_string_equal(s, "hello   <eos> hell"); /* no decoder: tokens joined by spaces */
    free(s);
    assert_int_equal(lp_tokenizer_decode(t, (int32_t[]){7, 10, 6}, 3, 1, &s), LP_OK);
    assert_string_equal(s, "hello hell");
    free(s);
    lp_tokenizer_free(t);
}

/* ignore_merges (Llama 3): a word that is itself a vocab entry is taken whole, even when
 * the merges cannot build it. */
static void test_ignore_merges(void **state)
{
    (void)state;
    static const char js[] = "{\"model\":{\"type\":\"BPE\",\"ignore_merges\":%s,\"vocab\":{\"a\":0,"
                             "\"b\":1,\"c\":2,\"bc\":3,\"abc\":4},\"merges\":[\"b c\"]}}";
    char buf[256];
    snprintf(buf, sizeof buf, js, "false");
    lp_tokenizer *t = load(buf);
    expect_ids(t, "abc", NULL, NULL, (int32_t[]){0, 3}, 2);
    lp_tokenizer_free(t);
    snprintf(buf, sizeof buf, js, "true");
    t = load(buf);
    expect_ids(t, "abc", NULL, NULL, (int32_t[]){4}, 1);
    expect_ids(t, "cbc", NULL, NULL, (int32_t[]){2, 3}, 2);
    lp_tokenizer_free(t);
}

static void test_decode_wordpiece(void **state)
{
    (void)state;
    lp_tokenizer *t = load(WP_JSON);
    char *s = NULL;
    int32_t ids[] = {2, 4, 5, 6, 10, 9, 7, 15, 3};
    assert_int_equal(lp_tokenizer_decode(t, ids, 9, 1, &s), LP_OK);
    assert_string_equal(s, "unaffable cafe! hello.");
    free(s);
    assert_int_equal(lp_tokenizer_decode(t, ids, 2, 0, &s), LP_OK);
    assert_string_equal(s, "[CLS] un");
    free(s);
    lp_tokenizer_free(t);
}

/* Byte-level BPE: every byte maps to a printable char; bytes -> ids -> bytes round-trips. */
static void test_bytelevel(void **state)
{
    (void)state;
    /* vocab: the 256 byte chars (ids 0..255) plus "Ġh" (256) from the merge "Ġ h" */
    char *json = malloc(16384);
    size_t n = (size_t)sprintf(json, "{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                                     "\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\"},"
                                     "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    int m = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        unsigned cp = keep ? (unsigned)b : 256u + (unsigned)m++;
        if (cp == '"' || cp == '\\') n += (size_t)sprintf(json + n, "\"\\%c\":%d,", cp, b);
        else if (cp < 0x80) n += (size_t)sprintf(json + n, "\"%c\":%d,", cp, b);
        else n += (size_t)sprintf(json + n, "\"\\u%04x\":%d,", cp, b);
    }
    n += (size_t)sprintf(json + n, "\"\\u0120h\":256},\"merges\":[\"\\u0120 h\"]}}");
    lp_tokenizer *t = load(json);
    free(json);
    /* add_prefix_space: "hi" -> " hi" -> Ġh i */
    expect_ids(t, "hi", NULL, NULL, (int32_t[]){256, 'i'}, 2);
    expect_ids(t, "\t\xc3\xa9", NULL, NULL, (int32_t[]){' ', '\t', 0xc3, 0xa9}, 4);
    char *s = NULL;
    assert_int_equal(lp_tokenizer_decode(t, (int32_t[]){256, 'i', 0xc3, 0xa9, 0xff}, 5, 0, &s), LP_OK);
    assert_string_equal(s, " hi\xc3\xa9\xef\xbf\xbd"); /* the stray 0xFF byte decodes to U+FFFD */
    free(s);
    lp_tokenizer_free(t);
}

static void test_utf8(void **state)
{
    (void)state;
    static const struct { const char *in; size_t n; const char *out; } cases[] = {
        {"abc", 3, "abc"},
        {"\xff", 1, "\xef\xbf\xbd"},
        {"a\xe2\x82" "b", 4, "a\xef\xbf\xbd" "b"},           /* truncated 3-byte: one U+FFFD */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate: three */
        {"\xc0\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd"},           /* overlong */
        {"\xf0\x9f\x98", 3, "\xef\xbf\xbd"},                   /* truncated at the end */
        {"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xe0\x80\xaf", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"a\0b", 3, "a\0b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        char *o = lp_utf8_sanitize(cases[i].in, cases[i].n, &len);
        assert_non_null(o);
        size_t want = cases[i].n == 3 && i == 8 ? 3 : strlen(cases[i].out);
        assert_int_equal(len, want);
        assert_memory_equal(o, cases[i].out, want);
        free(o);
    }
    /* the encoder repairs input the same way: bad bytes tokenize like U+FFFD (dropped by
     * BERT's clean_text), never an error */
    lp_tokenizer *t = load(WP_JSON);
    lp_encoding a = {0}, b = {0};
    assert_int_equal(lp_tokenizer_encode_n(t, "hello\xff\xfe world", 13, NULL, 0, NULL, &a), LP_OK);
    assert_int_equal(lp_tokenizer_encode(t, "hello\xef\xbf\xbd\xef\xbf\xbd world", NULL, NULL, &b), LP_OK);
    assert_int_equal(a.len, 4);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.ids, b.ids, a.len * sizeof *a.ids);
    /* NUL bytes inside the text are control chars, removed by clean_text */
    assert_int_equal(lp_tokenizer_encode_n(t, "hel\0lo", 6, NULL, 0, NULL, &a), LP_OK);
    assert_int_equal(a.len, 3);
    assert_int_equal(a.ids[1], 7);
    lp_encoding_free(&a);
    lp_encoding_free(&b);
    lp_tokenizer_free(t);
}

static void test_long_input(void **state)
{
    (void)state;
    lp_tokenizer *t = load(WP_JSON);
    size_t reps = 200000;
    char *s = malloc(reps * 6 + 1);
    for (size_t i = 0; i < reps; i++) memcpy(s + i * 6, "hello ", 6);
    s[reps * 6] = 0;
    lp_encoding e = {0};
    assert_int_equal(lp_tokenizer_encode(t, s, NULL, NULL, &e), LP_OK);
    assert_int_equal(e.len, reps + 2);
    assert_int_equal(e.ids[reps], 7);
    /* one 1.2 MB word: over max_input_chars_per_word, a single [UNK] */
    memset(s, 'a', reps * 6);
    assert_int_equal(lp_tokenizer_encode(t, s, NULL, NULL, &e), LP_OK);
    assert_int_equal(e.len, 3);
    assert_int_equal(e.ids[1], 1);
    lp_encoding_free(&e);
    free(s);
    lp_tokenizer_free(t);

    /* BPE on a long word: merges over 100k symbols */
    t = load(BPE_JSON);
    size_t n = 100000;
    s = malloc(n * 5 + 1);
    for (size_t i = 0; i < n; i++) memcpy(s + i * 5, "hello", 5);
    s[n * 5] = 0;
    assert_int_equal(lp_tokenizer_encode(t, s, NULL, NULL, &e), LP_OK);
    assert_int_equal(e.len, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(e.ids[i], 7);
    lp_encoding_free(&e);
    free(s);
    lp_tokenizer_free(t);
}

static void test_vocab_txt(void **state)
{
    (void)state;
    char dir[] = "/tmp/lp_vocab_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nworld \n!\n", f);
    fclose(f);
    lp_tokenizer *t = NULL;
    assert_int_equal(lp_tokenizer_load(dir, &t), LP_OK);
    expect_ids(t, "Hellos WORLD! [MASK]", NULL, NULL, (int32_t[]){2, 5, 6, 7, 8, 4, 3}, 7);
    lp_encoding e = {0};
    assert_int_equal(lp_tokenizer_encode(t, "hello", "world", NULL, &e), LP_OK);
    assert_int_equal(e.len, 5);
    assert_int_equal(e.type_ids[3], 1);
    lp_encoding_free(&e);
    lp_tokenizer_free(t);
    f = fopen(path, "w");
    fputs("a\nb\n", f);
    fclose(f);
    assert_int_equal(lp_tokenizer_load(path, &t), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "[UNK]"));
    unlink(path);
    rmdir(dir);
}

struct job { const lp_tokenizer *t; int ok; };

static void *worker(void *p)
{
    struct job *j = p;
    lp_encoding e = {0};
    j->ok = 1;
    for (int i = 0; i < 2000 && j->ok; i++) {
        if (lp_tokenizer_encode(j->t, "hello hellhe hello", NULL, NULL, &e) != LP_OK || e.len != 6 ||
            e.ids[0] != 7 || e.ids[2] != 6 || e.ids[3] != 4)
            j->ok = 0;
    }
    lp_encoding_free(&e);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    lp_tokenizer *t = load(BPE_JSON);
    pthread_t th[4];
    struct job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct job){t, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_true(jobs[i].ok);
    }
    lp_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed), cmocka_unit_test(test_wordpiece),
        cmocka_unit_test(test_pairs_truncation_padding), cmocka_unit_test(test_bpe),
        cmocka_unit_test(test_decode_wordpiece), cmocka_unit_test(test_ignore_merges), cmocka_unit_test(test_bytelevel),
        cmocka_unit_test(test_utf8), cmocka_unit_test(test_long_input),
        cmocka_unit_test(test_vocab_txt), cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
