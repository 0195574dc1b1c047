/* lp_model_save_gguf (what `loupe quantize --model DIR` runs) on the tiny decoder goldens.
 *
 * - qwen2_lm (GQA 4/1, q/k/v biases) and smollm_lm (llama arch: q/k rows permuted on write,
 *   unpermuted by the reader) written as F32 GGUF load back (f32 weights) with the
 *   directory's logits within 1e-6 normwise (max|a-b| / max|ref|), as test_gguf_tiny holds
 *   the files llama.cpp's converter layout gives: the same f32 values; the RMSNorm eps goes
 *   through a float32 key (1e-6 -> 9.99999997e-7), which moves logits by ~1e-9.
 * - Q8_0 / Q4_0: each matrix's blocks are byte for byte lp_ggml_quantize of the directory's
 *   f32 weight (the reference quantizers), norms and biases stay F32 with equal values, the
 *   tensor names, shapes and llama.cpp's keys are as its qwen2 loader reads them.
 * - The tokenizer: a byte-level BPE tokenizer.json becomes tokenizer.ggml.* (gpt2, pre
 *   "qwen2" from the Split regex, tokens padded to the model's vocabulary with UNUSED
 *   "[PAD<id>]", added special tokens CONTROL, merges "a b"), and loupe's GGUF tokenizer
 *   reader encodes with it as the tokenizer.json does.
 * - Refusals in one line naming the file: an id beyond the model's vocabulary, a BERT model. */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "loupe/io.h"
#include "loupe/kernels.h"
#include "loupe/models.h"
#include "loupe/text.h"

#define F32_REL_TOL 1e-6

static char tmp[128];

static lp_model *load(const char *path, lp_weight_format wf)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    o.exec = LP_EXEC_MODE_FUSED;
    o.weights = wf;
    lp_model *m = NULL;
    if (lp_model_load(path, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static void logits_of(lp_model *m, float *out)
{
    static const int32_t ids[] = {5, 17, 3, 99, 42, 7, 64, 1, 120, 33, 8};
    const int32_t n = (int32_t)(sizeof ids / sizeof ids[0]);
    lp_kv_cache *kv = NULL;
    assert_int_equal(lp_model_kv_init(m, 1, n + 1, LP_DTYPE_F32, &kv), LP_OK);
    assert_int_equal(lp_model_prefill(m, kv, ids, NULL, 1, n, out), LP_OK);
    lp_kv_cache_free(kv);
}

static void roundtrip_f32(const char *dir, const char *name)
{
    char out[256];
    snprintf(out, sizeof out, "%s/%s.gguf", tmp, name);
    lp_model *a = load(dir, LP_WEIGHT_FORMAT_F32);
    if (lp_model_save_gguf(a, out, LP_GGML_TYPE_F32) != LP_OK)
        fail_msg("%s", lp_err_msg());
    /* F32 (as --dequantize): STORED would give the head a Q8_0 copy (quant_setup.c) */
    lp_model *b = load(out, LP_WEIGHT_FORMAT_F32);
    const int64_t V = lp_model_config_get(a)->vocab_size;
    assert_int_equal(lp_model_config_get(b)->vocab_size, V);
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    logits_of(a, la);
    logits_of(b, lb);
    gold_cmp c = gold_compare(lb, la, V, 1e-6);
    printf("%s: F32 GGUF logits vs the directory's: rel %.2e (bound %.0e)\n", name, c.rel, F32_REL_TOL);
    assert_true(c.rel <= F32_REL_TOL);
    free(la), free(lb);
    lp_model_free(a);
    lp_model_free(b);
}

static void test_f32_roundtrip_qwen2(void **state)
{
    (void)state;
    roundtrip_f32("tests/golden/qwen2_lm", "qwen2");
}

static void test_f32_roundtrip_llama_permuted(void **state)
{
    (void)state;
    roundtrip_f32("tests/golden/smollm_lm", "smollm");
}

static int64_t kv_int(const lp_gguf_file *g, const char *key)
{
    int64_t v = -1;
    if (lp_gguf_get_int(g, key, &v) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return v;
}

static void quantized(uint32_t type)
{
    char out[256];
    snprintf(out, sizeof out, "%s/qwen2_q%u.gguf", tmp, type);
    lp_model *m = load("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_F32);
    if (lp_model_save_gguf(m, out, type) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_gguf_file *g = NULL;
    assert_int_equal(lp_gguf_open(out, &g), LP_OK);
    const lp_model_config *c = lp_model_config_get(m);
    char *arch = NULL;
    assert_int_equal(lp_gguf_get_str(g, "general.architecture", &arch), LP_OK);
    assert_string_equal(arch, "qwen2");
    free(arch);
    assert_int_equal(kv_int(g, "qwen2.block_count"), c->num_layers);
    assert_int_equal(kv_int(g, "qwen2.embedding_length"), c->hidden_size);
    assert_int_equal(kv_int(g, "qwen2.feed_forward_length"), c->intermediate_size);
    assert_int_equal(kv_int(g, "qwen2.attention.head_count"), c->num_heads);
    assert_int_equal(kv_int(g, "qwen2.attention.head_count_kv"), c->num_kv_heads);
    assert_int_equal(kv_int(g, "qwen2.context_length"), c->max_position_embeddings);
    assert_int_equal(kv_int(g, "general.file_type"), type == LP_GGML_TYPE_Q8_0 ? 7 : 2);
    double theta = 0;
    assert_int_equal(lp_gguf_get_float(g, "qwen2.rope.freq_base", &theta), LP_OK);
    assert_true(theta == c->rope_theta);
    size_t np = 0;
    const lp_model_param *p = lp_model_params(m, &np);
    size_t n_q = 0, n_f = 0;
    for (size_t i = 0; i < np; i++) {
        char gname[160];
        assert_true(lp_gguf_name_from_hf(p[i].name, gname, sizeof gname));
        const lp_gguf_tensor *t = lp_gguf_find_tensor(g, gname);
        if (!t)
            fail_msg("%s: no tensor %s (for %s)", out, gname, p[i].name);
        const int64_t cols = p[i].ndim == 2 ? p[i].shape[1] : p[i].shape[0];
        assert_int_equal(t->ne[0], cols);
        assert_int_equal(t->ndim, (uint32_t)p[i].ndim);
        if (p[i].ndim == 2) {
            assert_int_equal(t->ne[1], p[i].shape[0]);
            assert_int_equal(t->type, type);
            void *want = malloc(t->nbytes);
            lp_ggml_quantize((lp_ggml_type)type, p[i].data, want, p[i].numel);
            assert_memory_equal(t->data, want, t->nbytes);
            free(want);
            n_q++;
        } else {
            assert_int_equal(t->type, LP_GGML_TYPE_F32);
            assert_memory_equal(t->data, p[i].data, (size_t)p[i].numel * 4);
            n_f++;
        }
    }
    /* every q/k/v bias is there: llama.cpp's qwen2 loader requires them */
    assert_non_null(lp_gguf_find_tensor(g, "blk.0.attn_q.bias"));
    assert_non_null(lp_gguf_find_tensor(g, "blk.1.attn_v.bias"));
    assert_int_equal(lp_gguf_tensor_count(g), np);
    printf("qwen2 %s: %zu matrices equal to lp_ggml_quantize, %zu vectors F32\n", type == LP_GGML_TYPE_Q8_0 ? "Q8_0" : "Q4_0",
           n_q, n_f);
    lp_gguf_close(g);
    /* and loupe runs it: finite logits */
    lp_model *q = load(out, LP_WEIGHT_FORMAT_STORED);
    float *l = malloc((size_t)c->vocab_size * sizeof *l);
    logits_of(q, l);
    for (int64_t i = 0; i < c->vocab_size; i++)
        assert_true(isfinite(l[i]));
    free(l);
    lp_model_free(q);
    lp_model_free(m);
}

static void test_q8_0_blocks(void **state)
{
    (void)state;
    quantized(LP_GGML_TYPE_Q8_0);
}

static void test_q4_0_blocks(void **state)
{
    (void)state;
    quantized(LP_GGML_TYPE_Q4_0);
}

/* A copy of qwen2_lm with a tokenizer.json of the given vocab JSON object. */
static void make_dir(const char *dir, const char *vocab)
{
    char p[256], cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/golden/qwen2_lm/config.json tests/golden/qwen2_lm/model.safetensors %s/",
             dir, dir);
    assert_int_equal(system(cmd), 0);
    char tj[4096];
    snprintf(tj, sizeof tj,
             "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 3, \"content\": \"<|endoftext|>\", \"special\": true}, "
             "{\"id\": 4, \"content\": \"<tool>\", \"special\": false}], \"normalizer\": null, "
             "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
             "{\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
             "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": "
             "\"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
             "\"trim_offsets\": false, \"use_regex\": false}]}, \"post_processor\": null, "
             "\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, "
             "\"use_regex\": false}, \"model\": {\"type\": \"BPE\", \"vocab\": %s, "
             "\"merges\": [\"a b\", [\"ab\", \"c\"]]}}",
             vocab);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    assert_int_equal(lp_file_write_atomic(p, tj, strlen(tj)), LP_OK);
    static const char tc[] = "{\"add_bos_token\": false, \"chat_template\": \"{{ messages[0]['content'] }}\"}";
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    assert_int_equal(lp_file_write_atomic(p, tc, strlen(tc)), LP_OK);
}

static void test_tokenizer(void **state)
{
    (void)state;
    char dir[256], out[256];
    snprintf(dir, sizeof dir, "%s/tok", tmp);
    make_dir(dir, "{\"a\": 0, \"b\": 1, \"ab\": 2, \"c\": 5, \"abc\": 6}");
    snprintf(out, sizeof out, "%s/tok.gguf", tmp);
    lp_model *m = load(dir, LP_WEIGHT_FORMAT_F32);
    if (lp_model_save_gguf(m, out, LP_GGML_TYPE_F32) != LP_OK)
        fail_msg("%s", lp_err_msg());
    const int64_t V = lp_model_config_get(m)->vocab_size; /* 128 */
    lp_model_free(m);
    lp_gguf_file *g = NULL;
    assert_int_equal(lp_gguf_open(out, &g), LP_OK);
    char *s = NULL;
    assert_int_equal(lp_gguf_get_str(g, "tokenizer.ggml.model", &s), LP_OK);
    assert_string_equal(s, "gpt2");
    free(s);
    assert_int_equal(lp_gguf_get_str(g, "tokenizer.ggml.pre", &s), LP_OK);
    assert_string_equal(s, "qwen2");
    free(s);
    assert_int_equal(lp_gguf_get_str(g, "tokenizer.chat_template", &s), LP_OK);
    assert_string_equal(s, "{{ messages[0]['content'] }}");
    free(s);
    const lp_gguf_value *toks = lp_gguf_get(g, "tokenizer.ggml.tokens"), *ty = lp_gguf_get(g, "tokenizer.ggml.token_type"),
                        *mg = lp_gguf_get(g, "tokenizer.ggml.merges");
    assert_non_null(toks), assert_non_null(ty), assert_non_null(mg);
    assert_int_equal(toks->n, (uint64_t)V);
    assert_int_equal(ty->n, (uint64_t)V);
    assert_int_equal(ty->elem_type, LP_GGUF_TYPE_INT32);
    static const struct {
        int id;
        const char *text;
        int64_t type;
    } want[] = {{0, "a", 1}, {2, "ab", 1}, {3, "<|endoftext|>", 3}, {4, "<tool>", 4}, {6, "abc", 1}, {7, "[PAD7]", 5},
                {127, "[PAD127]", 5}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const lp_gguf_str *t = &toks->strs[want[i].id];
        int64_t k = -1;
        assert_true(lp_gguf_array_i64(ty, (uint64_t)want[i].id, &k));
        if (t->len != strlen(want[i].text) || memcmp(t->s, want[i].text, t->len) || k != want[i].type)
            fail_msg("token %d: '%.*s' type %lld, expected '%s' type %lld", want[i].id, (int)t->len, t->s, (long long)k,
                     want[i].text, (long long)want[i].type);
    }
    assert_int_equal(mg->n, 2);
    assert_true(mg->strs[0].len == 3 && !memcmp(mg->strs[0].s, "a b", 3));
    assert_true(mg->strs[1].len == 4 && !memcmp(mg->strs[1].s, "ab c", 4));
    assert_int_equal(kv_int(g, "tokenizer.ggml.eos_token_id"), 2); /* config.json's */
    assert_int_equal(kv_int(g, "tokenizer.ggml.padding_token_id"), 0);
    bool add_bos = true;
    assert_int_equal(lp_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos), LP_OK);
    assert_false(add_bos);
    /* loupe's reader of the GGUF tokenizer encodes as the merges say */
    char *tj = NULL;
    assert_int_equal(lp_gguf_tokenizer_json_of(g, &tj), LP_OK);
    lp_tokenizer *tok = NULL;
    if (lp_tokenizer_load_json(tj, strlen(tj), out, &tok) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_encoding enc = {0};
    assert_int_equal(lp_tokenizer_encode(tok, "abc<|endoftext|>ab", NULL, NULL, &enc), LP_OK);
    assert_int_equal(enc.len, 3);
    assert_int_equal(enc.ids[0], 6), assert_int_equal(enc.ids[1], 3), assert_int_equal(enc.ids[2], 2);
    lp_encoding_free(&enc);
    lp_tokenizer_free(tok);
    free(tj);
    lp_gguf_close(g);
}

static void test_refusals(void **state)
{
    (void)state;
    char dir[256], out[256];
    snprintf(dir, sizeof dir, "%s/big", tmp);
    make_dir(dir, "{\"a\": 0, \"b\": 1, \"ab\": 2, \"c\": 500}");
    snprintf(out, sizeof out, "%s/big.gguf", tmp);
    lp_model *m = load(dir, LP_WEIGHT_FORMAT_F32);
    assert_int_equal(lp_model_save_gguf(m, out, LP_GGML_TYPE_Q8_0), LP_STATUS_FORMAT);
    printf("refused: %s\n", lp_err_msg());
    assert_non_null(strstr(lp_err_msg(), "tokenizer.json"));
    assert_null(strchr(lp_err_msg(), '\n'));
    assert_int_equal(access(out, F_OK), -1); /* nothing left behind */
    lp_model_free(m);

    m = load("tests/golden/cls_bert", LP_WEIGHT_FORMAT_F32);
    assert_int_equal(lp_model_save_gguf(m, out, LP_GGML_TYPE_F32), LP_STATUS_UNSUPPORTED);
    printf("refused: %s\n", lp_err_msg());
    assert_non_null(strstr(lp_err_msg(), out));
    lp_model_free(m);
    m = load("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_F32);
    assert_int_equal(lp_model_save_gguf(m, out, LP_GGML_TYPE_Q4_1), LP_STATUS_UNSUPPORTED);
    lp_model_free(m);
}

static int setup(void **state)
{
    (void)state;
    return lp_test_tmpdir_make(tmp, sizeof tmp, "gguf_export");
}

static int teardown(void **state)
{
    (void)state;
    return lp_test_tmpdir_remove(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_roundtrip_qwen2), cmocka_unit_test(test_f32_roundtrip_llama_permuted),
        cmocka_unit_test(test_q8_0_blocks),         cmocka_unit_test(test_q4_0_blocks),
        cmocka_unit_test(test_tokenizer),           cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
