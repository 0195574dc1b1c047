/* The GGUF reader: a file using every metadata type (nested arrays included), a custom
 * alignment and two tensors reads back value for value; each kind of malformed file
 * (truncated, tensor data past the end, unknown tensor type, counts that overflow, metadata
 * of the wrong type, duplicate keys and tensors, bad magic) is refused with a one-line
 * message naming the file and the problem; the model view's config refuses mistyped
 * hyperparameters. Files are built byte by byte (gguf_build.h). */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "gguf_build.h"
#include "loupe/base.h"
#include "loupe/io.h"
#include "loupe/kernels.h"
#include "loupe/text.h"

static char tmp[256];

static int setup(void **state)
{
    (void)state;
    return lp_test_tmpdir_make(tmp, sizeof tmp, "gguf");
}

static int teardown(void **state)
{
    (void)state;
    return lp_test_tmpdir_remove(tmp);
}

static void write_file(const char *path, const gb *b)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b->p, 1, b->n, f), b->n);
    fclose(f);
}

/* A valid file: every scalar type, a string array, an array of arrays, alignment 64, an
 * F32 [2,4] tensor and a Q8_0 [32] tensor. */
static void build_valid(gb *b)
{
    b->n = 0;
    gb_header(b, 2, 16);
    gb_kv_str(b, "general.architecture", "llama");
    gb_kv_u32(b, "general.alignment", 64);
    gb_key(b, "u8", 0), gb_u8(b, 200);
    gb_key(b, "i8", 1), gb_u8(b, 0xFE);
    gb_key(b, "u16", 2), gb_u8(b, 0x34), gb_u8(b, 0x12);
    gb_key(b, "i16", 3), gb_u8(b, 0xFF), gb_u8(b, 0xFF);
    gb_kv_u32(b, "u32", 4000000000u);
    gb_key(b, "i32", 5), gb_u32(b, (uint32_t)-7);
    gb_kv_f32(b, "f32", 1.5f);
    gb_key(b, "bool", 7), gb_u8(b, 1);
    gb_key(b, "u64", 10), gb_u64(b, UINT64_MAX);
    gb_key(b, "i64", 11), gb_u64(b, (uint64_t)-5);
    double d = -2.25;
    gb_key(b, "f64", 12), gb_raw(b, &d, 8);
    gb_key(b, "strs", 9), gb_u32(b, 8), gb_u64(b, 3), gb_str(b, "a"), gb_str(b, ""), gb_str(b, "ccc");
    gb_key(b, "i32s", 9), gb_u32(b, 5), gb_u64(b, 2), gb_u32(b, 10), gb_u32(b, (uint32_t)-20);
    /* [[1, 2], []] of uint8 */
    gb_key(b, "nested", 9), gb_u32(b, 9), gb_u64(b, 2);
    gb_u32(b, 0), gb_u64(b, 2), gb_u8(b, 1), gb_u8(b, 2);
    gb_u32(b, 0), gb_u64(b, 0);
    const uint64_t ne_a[2] = {4, 2}, ne_b[1] = {32};
    gb_tensor(b, "a.weight", 2, ne_a, LP_GGML_TYPE_F32, 0);
    gb_tensor(b, "b.weight", 1, ne_b, LP_GGML_TYPE_Q8_0, 64);
    gb_align(b, 64);
    for (int i = 0; i < 8; i++)
        gb_f32(b, (float)i);
    gb_align(b, 64);
    const uint16_t one = 0x3C00; /* f16 1.0 */
    gb_raw(b, &one, 2);
    for (int i = 0; i < 32; i++)
        gb_u8(b, (uint8_t)(i - 16));
}

static void test_valid(void **state)
{
    (void)state;
    gb b = {0};
    build_valid(&b);
    char path[512];
    snprintf(path, sizeof path, "%s/ok.gguf", tmp);
    write_file(path, &b);
    lp_gguf_file *g = NULL;
    if (lp_gguf_open(path, &g) != LP_OK)
        fail_msg("%s", lp_err_msg());
    assert_int_equal(lp_gguf_version(g), 3);
    assert_int_equal(lp_gguf_kv_count(g), 16);
    int64_t i;
    double f;
    bool bo;
    char *s;
    assert_int_equal(lp_gguf_get_int(g, "u8", &i), LP_OK), assert_int_equal(i, 200);
    assert_int_equal(lp_gguf_get_int(g, "i8", &i), LP_OK), assert_int_equal(i, -2);
    assert_int_equal(lp_gguf_get_int(g, "u16", &i), LP_OK), assert_int_equal(i, 0x1234);
    assert_int_equal(lp_gguf_get_int(g, "i16", &i), LP_OK), assert_int_equal(i, -1);
    assert_int_equal(lp_gguf_get_int(g, "u32", &i), LP_OK), assert_int_equal(i, 4000000000ll);
    assert_int_equal(lp_gguf_get_int(g, "i32", &i), LP_OK), assert_int_equal(i, -7);
    assert_int_equal(lp_gguf_get_int(g, "i64", &i), LP_OK), assert_int_equal(i, -5);
    assert_int_equal(lp_gguf_get_int(g, "u64", &i), LP_STATUS_RANGE); /* above INT64_MAX */
    assert_int_equal(lp_gguf_get(g, "u64")->u, UINT64_MAX);
    assert_int_equal(lp_gguf_get_float(g, "f32", &f), LP_OK), assert_true(f == 1.5);
    assert_int_equal(lp_gguf_get_float(g, "f64", &f), LP_OK), assert_true(f == -2.25);
    assert_int_equal(lp_gguf_get_float(g, "i32", &f), LP_OK), assert_true(f == -7);
    assert_int_equal(lp_gguf_get_bool(g, "bool", &bo), LP_OK), assert_true(bo);
    assert_int_equal(lp_gguf_get_str(g, "general.architecture", &s), LP_OK), assert_string_equal(s, "llama");
    free(s);
    /* wrong types and absent keys: one line naming the file and the key */
    assert_int_equal(lp_gguf_get_int(g, "f32", &i), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), path));
    assert_non_null(strstr(lp_err_msg(), "'f32' is float32, expected an integer"));
    assert_int_equal(lp_gguf_get_str(g, "u8", &s), LP_STATUS_FORMAT);
    assert_int_equal(lp_gguf_get_bool(g, "strs", &bo), LP_STATUS_FORMAT);
    assert_int_equal(lp_gguf_get_int(g, "nope", &i), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "'nope' is missing"));
    const lp_gguf_value *v = lp_gguf_get(g, "strs");
    assert_int_equal(v->elem_type, LP_GGUF_TYPE_STRING);
    assert_int_equal(v->n, 3);
    assert_int_equal(v->strs[2].len, 3);
    assert_memory_equal(v->strs[2].s, "ccc", 3);
    assert_int_equal(v->strs[1].len, 0);
    v = lp_gguf_get(g, "i32s");
    assert_true(lp_gguf_array_i64(v, 1, &i)), assert_int_equal(i, -20);
    assert_false(lp_gguf_array_i64(v, 2, &i));
    v = lp_gguf_get(g, "nested");
    assert_int_equal(v->elem_type, LP_GGUF_TYPE_ARRAY);
    assert_int_equal(v->n, 2);
    assert_int_equal(v->items[0].n, 2);
    assert_true(lp_gguf_array_i64(&v->items[0], 1, &i)), assert_int_equal(i, 2);
    assert_int_equal(v->items[1].n, 0);
    /* tensors: at 64-byte aligned offsets of the data section */
    assert_int_equal(lp_gguf_tensor_count(g), 2);
    const lp_gguf_tensor *t = lp_gguf_find_tensor(g, "a.weight");
    assert_non_null(t);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->ne[0], 4);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->numel, 8);
    assert_int_equal(t->nbytes, 32);
    assert_int_equal(((uintptr_t)t->data - (uintptr_t)lp_gguf_tensor_at(g, 0)->data), 0);
    float x[8];
    memcpy(x, t->data, sizeof x);
    assert_true(x[7] == 7.0f);
    t = lp_gguf_find_tensor(g, "b.weight");
    assert_int_equal(t->nbytes, 34);
    float q[32];
    lp_ggml_dequantize((lp_ggml_type)t->type, t->data, q, 32);
    assert_true(q[0] == -16.0f && q[31] == 15.0f);
    assert_null(lp_gguf_find_tensor(g, "c.weight"));
    lp_gguf_close(g);
    free(b.p);
}

/* The writer (lp_gguf_writer) copying every key-value and tensor of the valid file writes
 * it again byte for byte (every scalar type, string and nested arrays, alignment 64),
 * followed only by the zero padding that ends its data section on the alignment; and the
 * refusals: a tensor whose bytes do not hold its shape, an unwritable path (no file left). */
static void test_writer_roundtrip(void **state)
{
    (void)state;
    gb b = {0};
    build_valid(&b);
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/w_src.gguf", tmp);
    snprintf(dst, sizeof dst, "%s/w_dst.gguf", tmp);
    write_file(src, &b);
    lp_gguf_file *g = NULL;
    if (lp_gguf_open(src, &g) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_gguf_writer *w = NULL;
    assert_int_equal(lp_gguf_writer_init(&w, dst, 64), LP_OK);
    for (size_t i = 0; i < lp_gguf_kv_count(g); i++)
        assert_int_equal(lp_gguf_writer_add_kv(w, lp_gguf_kv_at(g, i)->key, &lp_gguf_kv_at(g, i)->v), LP_OK);
    for (size_t i = 0; i < lp_gguf_tensor_count(g); i++) {
        const lp_gguf_tensor *t = lp_gguf_tensor_at(g, i);
        assert_int_equal(lp_gguf_writer_add_tensor(w, t->name, t->ndim, t->ne, t->type, t->data, t->nbytes), LP_OK);
    }
    const int64_t ne[1] = {32};
    assert_int_equal(lp_gguf_writer_add_tensor(w, "bad", 1, ne, LP_GGML_TYPE_Q8_0, b.p, 33), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "'bad'"));
    assert_int_equal(lp_gguf_writer_finish(w), LP_OK);
    lp_gguf_writer_free(w);
    lp_gguf_close(g);
    FILE *f = fopen(dst, "rb");
    assert_non_null(f);
    uint8_t *got = malloc(b.n + 4096);
    assert_non_null(got);
    size_t n = fread(got, 1, b.n + 4096, f);
    fclose(f);
    assert_true(n >= b.n && n % 64 == 0 && n - b.n < 64);
    assert_memory_equal(got, b.p, b.n);
    for (size_t i = b.n; i < n; i++)
        assert_int_equal(got[i], 0);
    free(got);
    /* an unwritable path: IO naming it, nothing left behind */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no-such-dir/x.gguf", tmp);
    assert_int_equal(lp_gguf_writer_init(&w, bad, 32), LP_OK);
    assert_int_equal(lp_gguf_writer_finish(w), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "no-such-dir"));
    lp_gguf_writer_free(w);
    assert_int_equal(lp_gguf_writer_init(&w, dst, 12), LP_STATUS_INVALID_ARG);
    free(b.p);
}

/* path gets the buffer; the open must fail with st and a one-line message naming the file
 * and containing what. */
static void expect_refused(const gb *b, const char *name, lp_status st, const char *what)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", tmp, name);
    write_file(path, b);
    lp_gguf_file *g = NULL;
    lp_status got = lp_gguf_open(path, &g);
    printf("%-18s -> %s\n", name, lp_err_msg());
    assert_int_equal(got, st);
    assert_null(g);
    assert_non_null(strstr(lp_err_msg(), path));
    assert_non_null(strstr(lp_err_msg(), what));
    assert_null(strchr(lp_err_msg(), '\n'));
    /* the same bytes from memory: the same verdict */
    assert_int_equal(lp_gguf_parse_buffer(b->p, b->n, "mem.gguf", &g), st);
    assert_null(g);
}

static void test_malformed(void **state)
{
    (void)state;
    gb b = {0};
    build_valid(&b);
    const size_t full = b.n;
    for (size_t cut = 0; cut < full; cut += 7) { /* every prefix is refused, never read past */
        gb c = {b.p, cut, cut};
        lp_gguf_file *g = NULL;
        assert_int_not_equal(lp_gguf_parse_buffer(b.p, cut, "cut.gguf", &g), LP_OK);
        (void)c;
    }
    gb t = {0};
    gb_raw(&t, b.p, 300);
    expect_refused(&t, "truncated", LP_STATUS_FORMAT, "truncated file");
    free(t.p);
    t = (gb){0};
    gb_raw(&t, b.p, full - 1);
    expect_refused(&t, "data_past_end", LP_STATUS_FORMAT, "past the end of the file");
    free(t.p);

    gb m = {0};
    const uint64_t ne4[1] = {4}, ne_big[2] = {1ull << 40, 1ull << 40};
    gb_header(&m, 1, 0);
    gb_tensor(&m, "w", 1, ne4, 99, 0);
    gb_align(&m, 32);
    gb_raw(&m, "0123456789abcdef", 16);
    expect_refused(&m, "unknown_type", LP_STATUS_FORMAT, "unknown tensor type 99");
    m.n = 0;
    gb_header(&m, 0, 1ull << 62);
    expect_refused(&m, "kv_count_overflow", LP_STATUS_FORMAT, "overflowing counts");
    m.n = 0;
    gb_header(&m, UINT64_MAX, 0);
    expect_refused(&m, "tensor_count", LP_STATUS_FORMAT, "overflowing counts");
    m.n = 0;
    gb_header(&m, 0, 1);
    gb_key(&m, "arr", 9), gb_u32(&m, 10), gb_u64(&m, UINT64_MAX / 4);
    expect_refused(&m, "array_overflow", LP_STATUS_FORMAT, "overflows the file");
    m.n = 0;
    gb_header(&m, 1, 0);
    gb_tensor(&m, "w", 2, ne_big, LP_GGML_TYPE_F32, 0);
    expect_refused(&m, "numel_overflow", LP_STATUS_FORMAT, "overflows");
    m.n = 0;
    gb_header(&m, 0, 1);
    gb_kv_str(&m, "general.alignment", "32");
    expect_refused(&m, "alignment_type", LP_STATUS_FORMAT, "'general.alignment' is string, expected uint32");
    m.n = 0;
    gb_header(&m, 0, 1);
    gb_kv_u32(&m, "general.alignment", 24);
    expect_refused(&m, "alignment_value", LP_STATUS_FORMAT, "not a power of two");
    m.n = 0;
    gb_header(&m, 0, 2);
    gb_kv_u32(&m, "k", 1);
    gb_kv_u32(&m, "k", 2);
    expect_refused(&m, "duplicate_key", LP_STATUS_FORMAT, "duplicate metadata key 'k'");
    m.n = 0;
    gb_header(&m, 2, 0);
    gb_tensor(&m, "w", 1, ne4, LP_GGML_TYPE_F32, 0);
    gb_tensor(&m, "w", 1, ne4, LP_GGML_TYPE_F32, 32);
    gb_align(&m, 32);
    for (int i = 0; i < 16; i++)
        gb_f32(&m, 0);
    expect_refused(&m, "duplicate_tensor", LP_STATUS_FORMAT, "duplicate tensor 'w'");
    m.n = 0;
    gb_header(&m, 1, 0);
    gb_tensor(&m, "w", 1, ne4, LP_GGML_TYPE_F32, 8);
    gb_align(&m, 32);
    for (int i = 0; i < 16; i++)
        gb_f32(&m, 0);
    expect_refused(&m, "misaligned", LP_STATUS_FORMAT, "not a multiple of the alignment");
    m.n = 0;
    gb_header(&m, 1, 0);
    gb_tensor(&m, "w", 1, (const uint64_t[1]){31}, LP_GGML_TYPE_Q4_0, 0);
    expect_refused(&m, "partial_block", LP_STATUS_FORMAT, "not a multiple of the Q4_0 block");
    m.n = 0;
    gb_header(&m, 0, 1);
    gb_key(&m, "x", 13), gb_u32(&m, 0);
    expect_refused(&m, "value_type", LP_STATUS_FORMAT, "unknown value type 13");
    m.n = 0;
    gb_raw(&m, "GGML", 4), gb_u32(&m, 3), gb_u64(&m, 0), gb_u64(&m, 0);
    expect_refused(&m, "magic", LP_STATUS_FORMAT, "not a GGUF file");
    m.n = 0;
    gb_raw(&m, "GGUF", 4), gb_u32(&m, 1), gb_u32(&m, 0), gb_u32(&m, 0);
    expect_refused(&m, "version1", LP_STATUS_UNSUPPORTED, "version 1");
    free(m.p);
    free(b.p);
}

/* The model view: an architecture loupe does not run, and a hyperparameter of the wrong
 * type, are refused naming the file and the key. */
static void test_model_config_errors(void **state)
{
    (void)state;
    gb m = {0};
    char path[512], *cfg = NULL;
    snprintf(path, sizeof path, "%s/arch.gguf", tmp);
    gb_header(&m, 0, 1);
    gb_kv_str(&m, "general.architecture", "gpt2");
    write_file(path, &m);
    assert_int_equal(lp_gguf_model_open(path, &cfg, NULL), LP_STATUS_UNSUPPORTED);
    assert_non_null(strstr(lp_err_msg(), "'gpt2' is not supported"));
    assert_non_null(strstr(lp_err_msg(), path));
    m.n = 0;
    gb_header(&m, 0, 6);
    gb_kv_str(&m, "general.architecture", "llama");
    gb_kv_str(&m, "llama.block_count", "30");
    gb_kv_u32(&m, "llama.embedding_length", 64);
    gb_kv_u32(&m, "llama.feed_forward_length", 128);
    gb_kv_u32(&m, "llama.attention.head_count", 4);
    gb_kv_f32(&m, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    snprintf(path, sizeof path, "%s/mistyped.gguf", tmp);
    write_file(path, &m);
    assert_int_equal(lp_gguf_model_open(path, &cfg, NULL), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "'llama.block_count' is string, expected an integer"));
    assert_null(cfg);
    free(m.p);
}

/* fuzz/seeds/gguf/model_tokenizer.gguf (tools/make_gguf_seeds.py, written by the gguf
 * package): the config built from its metadata, its tokenizer (pre "qwen2" split regex,
 * add_bos_token, a control and a user-defined token) and its chat template. The expected
 * ids are what transformers' GGUF loader gives on the same file (AutoTokenizer with
 * gguf_file=..., transformers 5.24), exact. */
static void test_model_tokenizer_seed(void **state)
{
    (void)state;
    const char *path = "fuzz/seeds/gguf/model_tokenizer.gguf";
    char *json = NULL;
    lp_gguf_file *g = NULL;
    if (lp_gguf_open(path, &g) != LP_OK || lp_gguf_config_json(g, &json) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_gguf_close(g);
    lp_model_config cfg;
    if (lp_hf_config_parse(json, strlen(json), path, &cfg) != LP_OK)
        fail_msg("%s", lp_err_msg());
    free(json);
    assert_int_equal(cfg.arch, LP_HF_ARCH_LLAMA_CAUSAL_LM);
    assert_int_equal(cfg.num_layers, 2);
    assert_int_equal(cfg.hidden_size, 64);
    assert_int_equal(cfg.num_heads, 4);
    assert_int_equal(cfg.num_kv_heads, 2);
    assert_int_equal(cfg.intermediate_size, 160);
    assert_int_equal(cfg.vocab_size, 7); /* from tokenizer.ggml.tokens */
    assert_int_equal(cfg.max_position_embeddings, 128);
    assert_true(cfg.tie_word_embeddings); /* no output.weight */
    assert_string_equal(cfg.rope_type, "linear");
    assert_true(cfg.rope_factor == 2.0);
    assert_true(fabs(cfg.norm_eps - 1e-6) < 1e-12);
    lp_model_config_free(&cfg);

    lp_tokenizer *tok = NULL;
    if (lp_tokenizer_load(path, &tok) != LP_OK)
        fail_msg("%s", lp_err_msg());
    static const struct {
        const char *text;
        int32_t ids[8];
        size_t n;
    } cases[] = {
        {"ab a<think>b", {4, 2, 3, 0, 6, 1}, 6},
        {"ab<s>\xc3\xa9", {4, 2, 4}, 3},
        {"b a  ab", {4, 1, 3, 0, 3, 3, 2}, 7},
    };
    lp_encode_opts o = lp_encode_opts_default();
    lp_encoding e = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(lp_tokenizer_encode(tok, cases[i].text, NULL, &o, &e), LP_OK);
        assert_int_equal(e.len, cases[i].n);
        assert_memory_equal(e.ids, cases[i].ids, cases[i].n * sizeof(int32_t));
    }
    lp_encoding_free(&e);
    lp_tokenizer_free(tok);
    char *tpl = NULL;
    assert_int_equal(lp_gguf_chat_template(path, &tpl), LP_OK);
    assert_string_equal(tpl, "{% for m in messages %}{{ m['content'] }}{% endfor %}");
    free(tpl);
    assert_int_equal(lp_gguf_chat_template("fuzz/seeds/gguf/meta.gguf", &tpl), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "tokenizer.chat_template"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_writer_roundtrip),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_model_config_errors),
        cmocka_unit_test(test_model_tokenizer_seed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
