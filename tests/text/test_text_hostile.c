/* tokenizer.json files a hostile user could write (issue 16): a raw NUL or control byte inside
 * a string is refused naming the file and line (a NUL cut a vocabulary entry short behind
 * cJSON's back and the file was accepted), and a pre-tokenizer pattern that backtracks
 * catastrophically fails with a message naming the file, the stage and the pattern (it said
 * only "pre-tokenizer regex failed (PCRE2 error -47)"). The damaged files are the project's
 * tokenizers written by Hugging Face's library, not hand-made ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loupe/text.h"

__attribute__((noinline)) static char *slurp(const char *path, size_t *len)
{
    char *b = NULL;
    if (lp_file_read_all(path, &b, len) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return b;
}

/* Every tokenizer.json under tests/golden (HF-written), each with one raw byte put inside
 * its first vocabulary string: refused, naming the file, the line and the byte. The file
 * as written loads, so the refusal is the byte's doing. */
static void test_raw_control_bytes(void **state)
{
    (void)state;
    glob_t g;
    assert_int_equal(glob("tests/golden/*/tokenizer.json", 0, NULL, &g), 0);
    assert_true(g.gl_pathc >= 4);
    const unsigned char bytes[] = {0x00, 0x01, 0x09, 0x0a, 0x1f};
    for (size_t f = 0; f < g.gl_pathc; f++) {
        size_t len;
        char *text = slurp(g.gl_pathv[f], &len);
        lp_tokenizer *t = NULL;
        assert_int_equal(lp_tokenizer_load_json(text, len, g.gl_pathv[f], &t), LP_OK);
        lp_tokenizer_free(t);
        char *vocab = strstr(text, "\"vocab\"");
        assert_non_null(vocab);
        char *q = strchr(strchr(vocab + 7, '{'), '"'); /* the first key's opening quote */
        assert_non_null(q);
        size_t line = 1;
        for (const char *p = text; p <= q; p++)
            line += *p == '\n';
        for (size_t k = 0; k < sizeof bytes; k++) {
            char *bad = malloc(len + 1);
            size_t at = (size_t)(q - text) + 2; /* after the string's first character */
            memcpy(bad, text, at);
            bad[at] = (char)bytes[k];
            memcpy(bad + at + 1, text + at, len - at);
            assert_int_equal(lp_tokenizer_load_json(bad, len + 1, g.gl_pathv[f], &t), LP_STATUS_FORMAT);
            assert_null(t);
            char want[64];
            snprintf(want, sizeof want, "line %zu: raw control byte 0x%02x inside a string", line, bytes[k]);
            assert_non_null(strstr(lp_err_msg(), g.gl_pathv[f]));
            if (!strstr(lp_err_msg(), want))
                fail_msg("%s: got '%s', wanted '%s'", g.gl_pathv[f], lp_err_msg(), want);
            free(bad);
        }
        free(text);
    }
    globfree(&g);
}

/* An escaped NUL (\u0000) is valid JSON and stays accepted: only raw bytes are refused. */
static void test_escaped_nul_accepted(void **state)
{
    (void)state;
    size_t len;
    char *text = slurp("tests/golden/cls_bert/tokenizer.json", &len);
    char *q = strchr(strchr(strstr(text, "\"vocab\""), '{'), '"');
    size_t at = (size_t)(q - text) + 2;
    char *esc = malloc(len + 7);
    memcpy(esc, text, at);
    memcpy(esc + at, "\\u0000", 6);
    memcpy(esc + at + 6, text + at, len - at);
    lp_tokenizer *t = NULL;
    lp_status st = lp_tokenizer_load_json(esc, len + 6, "esc.json", &t);
    /* accepted, or refused for what the NUL does to the vocabulary, never as a raw byte */
    if (st != LP_OK)
        assert_null(strstr(lp_err_msg(), "raw control byte"));
    lp_tokenizer_free(t);
    free(esc);
    free(text);
}

/* The project's byte-level BPE tokenizer with its Split pattern replaced by one that
 * backtracks exponentially, (a+)+$, on text that almost matches: PCRE2's match limit stops
 * it, and the message names the file, the stage, the pattern and the limit. The real pattern
 * encodes the same text, so the failure is the pattern's. */
static void test_backtracking_pattern(void **state)
{
    (void)state;
    const char *file = "fuzz/seeds/tokenizer_json/bytelevel_split.json";
    size_t len;
    char *text = slurp(file, &len);
    char subject[64];
    memset(subject, 'a', 40);
    strcpy(subject + 40, "!");
    lp_tokenizer *t = NULL;
    lp_encoding enc = {0};
    assert_int_equal(lp_tokenizer_load_json(text, len, file, &t), LP_OK);
    assert_int_equal(lp_tokenizer_encode(t, subject, NULL, NULL, &enc), LP_OK);
    lp_tokenizer_free(t);

    cJSON *j = cJSON_ParseWithLength(text, len);
    cJSON *split =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "pre_tokenizer"), "pretokenizers"), 0);
    cJSON *pat = cJSON_GetObjectItem(split, "pattern");
    cJSON_ReplaceItemInObject(pat, "Regex", cJSON_CreateString("(a+)+$"));
    char *evil = cJSON_PrintUnformatted(j);
    assert_int_equal(lp_tokenizer_load_json(evil, strlen(evil), file, &t), LP_OK);
    lp_status st = lp_tokenizer_encode(t, subject, NULL, NULL, &enc);
    assert_int_not_equal(st, LP_OK);
    const char *msg = lp_err_msg();
    print_message("%s\n", msg);
    assert_non_null(strstr(msg, file));
    assert_non_null(strstr(msg, "Split pre-tokenizer pattern /(a+)+$/"));
    assert_non_null(strstr(msg, "limit"));
    assert_int_equal(enc.len, 0);
    lp_tokenizer_free(t);
    lp_encoding_free(&enc);
    cJSON_free(evil);
    cJSON_Delete(j);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_control_bytes),
        cmocka_unit_test(test_escaped_nul_accepted),
        cmocka_unit_test(test_backtracking_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
