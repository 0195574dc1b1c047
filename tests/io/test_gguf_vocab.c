/* The vocabulary of a GGUF tokenizer (src/io/gguf_tokenizer.c) as tokenizer.json: every token
 * maps to its id; a spelling that appears twice maps to the later id (a Python dict built in
 * order, as transformers' GGUF loader builds it) and keeps its first place; and a vocabulary
 * of Qwen's size (151,936 tokens, many sharing prefixes) converts with each duplicate found,
 * which before took a linear lookup per token (1e10 string compares, 50 s). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/base.h"
#include "loupe/io.h"

/* Writes a gpt2 tokenizer GGUF of n tokens (spelled by spell(i)) and no merges to path. */
static void write_vocab(const char *path, int64_t n, void (*spell)(int64_t, char *))
{
    lp_gguf_str *toks = calloc((size_t)n, sizeof *toks);
    char *text = calloc((size_t)n, 16);
    assert_non_null(toks);
    assert_non_null(text);
    for (int64_t i = 0; i < n; i++) {
        spell(i, text + 16 * i);
        toks[i] = (lp_gguf_str){text + 16 * i, strlen(text + 16 * i)};
    }
    static lp_gguf_str no_merge[1];
    const lp_gguf_value
        tv = {.type = LP_GGUF_TYPE_ARRAY, .elem_type = LP_GGUF_TYPE_STRING, .n = (uint64_t)n, .strs = toks},
        mv = {.type = LP_GGUF_TYPE_ARRAY, .elem_type = LP_GGUF_TYPE_STRING, .n = 0, .strs = no_merge};
    lp_gguf_writer *w = NULL;
    assert_int_equal(lp_gguf_writer_init(&w, path, 32), LP_OK);
    assert_int_equal(lp_gguf_writer_add_str(w, "general.architecture", "llama"), LP_OK);
    assert_int_equal(lp_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2"), LP_OK);
    assert_int_equal(lp_gguf_writer_add_kv(w, "tokenizer.ggml.tokens", &tv), LP_OK);
    assert_int_equal(lp_gguf_writer_add_kv(w, "tokenizer.ggml.merges", &mv), LP_OK);
    if (lp_gguf_writer_finish(w) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_gguf_writer_free(w);
    free(toks);
    free(text);
}

/* The model.vocab object of the tokenizer.json loupe makes of such a file (in *root, the
 * caller's to delete). */
static cJSON *vocab_of(int64_t n, void (*spell)(int64_t, char *), cJSON **root)
{
    char path[] = "/tmp/lp_gguf_vocab_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_vocab(path, n, spell);
    char *js = NULL;
    if (lp_gguf_tokenizer_json(path, &js) != LP_OK)
        fail_msg("%s", lp_err_msg());
    unlink(path);
    *root = cJSON_Parse(js);
    free(js);
    assert_non_null(*root);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(*root, "model"), "vocab");
    assert_true(cJSON_IsObject(v));
    return v;
}

/* "a", "b", "a", "c", "b", "b": a -> 2, b -> 5, c -> 3, in the order a, b, c */
static void small(int64_t i, char *out)
{
    static const char *const s[] = {"a", "b", "a", "c", "b", "b"};
    strcpy(out, s[i]);
}

static void test_duplicates(void **state)
{
    (void)state;
    cJSON *root, *v = vocab_of(6, small, &root);
    assert_int_equal(cJSON_GetArraySize(v), 3);
    static const char *const keys[] = {"a", "b", "c"};
    static const int ids[] = {2, 5, 3};
    int k = 0;
    for (const cJSON *e = v->child; e; e = e->next, k++) {
        assert_string_equal(e->string, keys[k]);
        assert_int_equal((int)e->valuedouble, ids[k]);
    }
    cJSON_Delete(root);
}

/* 151,936 spellings "t<i>" plus every 1000th one repeated at the end (the later id wins) */
enum { BIG = 151936, REPEATS = 152 };
static void big(int64_t i, char *out)
{
    snprintf(out, 16, "t%d", (int)(i < BIG - REPEATS ? i : (i - (BIG - REPEATS)) * 1000) % 1000000);
}

static void test_qwen_sized(void **state)
{
    (void)state;
    cJSON *root, *v = vocab_of(BIG, big, &root);
    assert_int_equal(cJSON_GetArraySize(v), BIG - REPEATS);
    int64_t i = 0, bad = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char want[16];
        big(i, want);
        const int64_t id = i % 1000 == 0 && i / 1000 < REPEATS ? BIG - REPEATS + i / 1000 : i;
        bad += strcmp(e->string, want) != 0 || (int64_t)e->valuedouble != id;
    }
    assert_int_equal(bad, 0);
    cJSON_Delete(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_qwen_sized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
