/* lp_model_options.lazy_embedding (lazy_rows.c): an inference load reads the token
 * embedding's rows from the checkpoint as tokens appear.
 *
 * - a classifier (qwen2_cls) and an untied causal LM (llama_lm, prefill + decode) give the
 *   eager load's outputs bit for bit (the same rows, converted the same way; tolerance 0);
 * - the table holds exactly the rows of the ids seen so far: every other row reads 0;
 * - where the table is more than a lookup (smollm_lm: the LM head is the embedding), or the
 *   model trains, nothing is lazy: the table equals the eager one whole;
 * - bad files: a NaN in an unseen row still refuses the load, naming the tensor (as the eager
 *   load does); the checkpoint cut short after the load makes the next forward that needs a
 *   missing row fail with IO naming the file, and rows read before still work;
 * - a bf16 checkpoint: the same as its eager load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/base.h"
#include "loupe/io.h"
#include "loupe/models.h"

static lp_status open_model(const char *dir, bool lazy, bool no_grad, lp_model **m)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = no_grad;
    o.lazy_embedding = lazy;
    return lp_model_load(dir, &o, m);
}

static lp_model *load(const char *dir, bool lazy, bool no_grad)
{
    lp_model *m = NULL;
    if (open_model(dir, lazy, no_grad, &m) != LP_OK)
        fail_msg("%s: %s", dir, lp_err_msg());
    return m;
}

static const lp_model_param *table(const lp_model *m)
{
    const lp_model_param *p = lp_model_param_find(m, "model.embed_tokens.weight");
    assert_non_null(p);
    return p;
}

/* Rows of ids[0..n) equal ref's; every other row is zero. */
static void expect_rows(const lp_model *lazy, const lp_model *eager, const int32_t *ids, int64_t n)
{
    const lp_model_param *a = table(lazy), *b = table(eager);
    const int64_t V = a->shape[0], C = a->shape[1];
    for (int64_t r = 0; r < V; r++) {
        bool seen = false;
        for (int64_t k = 0; k < n && !seen; k++)
            seen = ids[k] == r;
        for (int64_t c = 0; c < C; c++) {
            const float want = seen ? b->data[r * C + c] : 0.0f;
            if (memcmp(&a->data[r * C + c], &want, sizeof want))
                fail_msg("row %lld (%s): [%lld] %g, want %g", (long long)r, seen ? "seen" : "not seen", (long long)c,
                         (double)a->data[r * C + c], (double)want);
        }
    }
}

static void test_classifier(void **state)
{
    (void)state;
    lp_model *lz = load("tests/golden/qwen2_cls", true, true), *eg = load("tests/golden/qwen2_cls", false, true);
    expect_rows(lz, eg, NULL, 0); /* nothing read before the first forward */
    enum { B = 2, T = 6 };
    const int32_t ids[B * T] = {5, 17, 99, 3, 0, 0, 0, 8, 8, 127, 64, 1};
    const int32_t mask[B * T] = {1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1}; /* right padding, then left */
    lp_model_info info;
    lp_model_info_get(lz, &info);
    const int64_t L = info.num_labels;
    float a[B * 16], b[B * 16];
    assert_true(L <= 16);
    assert_int_equal(lp_model_forward(lz, ids, mask, NULL, B, T, a), LP_OK);
    assert_int_equal(lp_model_forward(eg, ids, mask, NULL, B, T, b), LP_OK);
    assert_memory_equal(a, b, (size_t)(B * L) * sizeof(float));
    expect_rows(lz, eg, ids, B * T); /* padding ids are looked up too (their rows unused) */
    lp_model_free(lz);
    lp_model_free(eg);
}

static void test_causal_lm(void **state)
{
    (void)state;
    lp_model *lz = load("tests/golden/llama_lm", true, true), *eg = load("tests/golden/llama_lm", false, true);
    lp_model_info info;
    lp_model_info_get(lz, &info);
    const int64_t V = info.vocab_size;
    enum { B = 2, T = 4, STEPS = 3 };
    const int32_t ids[B * T] = {1, 20, 30, 40, 2, 21, 31, 41};
    lp_kv_cache *ka = NULL, *kb = NULL;
    assert_int_equal(lp_model_kv_init(lz, B, T + STEPS, LP_DTYPE_F32, &ka), LP_OK);
    assert_int_equal(lp_model_kv_init(eg, B, T + STEPS, LP_DTYPE_F32, &kb), LP_OK);
    float *a = malloc((size_t)(B * V) * sizeof(float)), *b = malloc((size_t)(B * V) * sizeof(float));
    assert_int_equal(lp_model_prefill(lz, ka, ids, NULL, B, T, a), LP_OK);
    assert_int_equal(lp_model_prefill(eg, kb, ids, NULL, B, T, b), LP_OK);
    assert_memory_equal(a, b, (size_t)(B * V) * sizeof(float));
    int32_t seen[B * T + B * STEPS];
    memcpy(seen, ids, sizeof ids);
    for (int s = 0; s < STEPS; s++) { /* decode tokens the prompt did not hold */
        const int32_t next[B] = {(int32_t)(100 + s), (int32_t)(110 + s)};
        memcpy(seen + B * T + B * s, next, sizeof next);
        assert_int_equal(lp_model_decode(lz, ka, next, a), LP_OK);
        assert_int_equal(lp_model_decode(eg, kb, next, b), LP_OK);
        assert_memory_equal(a, b, (size_t)(B * V) * sizeof(float));
    }
    expect_rows(lz, eg, seen, B * T + B * STEPS);
    free(a);
    free(b);
    lp_kv_cache_free(ka);
    lp_kv_cache_free(kb);
    lp_model_free(lz);
    lp_model_free(eg);
}

/* The tied head reads the whole table, a training load may update it: both load it whole. */
static void test_not_lazy(void **state)
{
    (void)state;
    const struct {
        const char *dir;
        bool no_grad;
    } cases[] = {{"tests/golden/smollm_lm", true}, {"tests/golden/qwen2_cls", false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lp_model *lz = load(cases[i].dir, true, cases[i].no_grad), *eg = load(cases[i].dir, false, cases[i].no_grad);
        const lp_model_param *a = table(lz), *b = table(eg);
        assert_memory_equal(a->data, b->data, (size_t)a->numel * sizeof(float));
        lp_model_free(lz);
        lp_model_free(eg);
    }
}

static char dir[256], st_path[300], cfg_path[300];

/* dir = a copy of qwen2_cls; returns where the embedding's data starts in the copy and its
 * row bytes. */
static uint64_t copy_model(size_t *row_bytes)
{
    char *buf = NULL;
    size_t n = 0;
    assert_int_equal(lp_file_read_all("tests/golden/qwen2_cls/config.json", &buf, &n), LP_OK);
    FILE *f = fopen(cfg_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
    assert_int_equal(lp_file_read_all("tests/golden/qwen2_cls/model.safetensors", &buf, &n), LP_OK);
    f = fopen(st_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
    lp_st_file *sf = NULL;
    assert_int_equal(lp_st_open(st_path, &sf), LP_OK);
    const lp_st_tensor *t = lp_st_find(sf, "model.embed_tokens.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, LP_ST_DTYPE_F32);
    const uint64_t pos = t->file_pos;
    *row_bytes = (size_t)t->shape[1] * sizeof(float);
    lp_st_close(sf);
    return pos;
}

static void test_bad_files(void **state)
{
    (void)state;
    size_t rb;
    uint64_t pos = copy_model(&rb);
    /* a NaN in row 77, which no forward has asked for: the load refuses it all the same */
    FILE *f = fopen(st_path, "r+b");
    assert_non_null(f);
    const float nan = NAN;
    assert_int_equal(fseek(f, (long)(pos + 77 * rb + 3 * sizeof(float)), SEEK_SET), 0);
    assert_int_equal(fwrite(&nan, sizeof nan, 1, f), 1);
    fclose(f);
    lp_model *m = NULL;
    assert_int_equal(open_model(dir, true, true, &m), LP_STATUS_NUMERIC);
    assert_null(m);
    assert_non_null(strstr(lp_err_msg(), "embed_tokens"));
    assert_non_null(strstr(lp_err_msg(), "model.safetensors"));

    /* the file cut short after the load: rows read before still serve, a new one is an IO
     * error naming the file */
    pos = copy_model(&rb);
    assert_int_equal(open_model(dir, true, true, &m), LP_OK);
    const int32_t ids[4] = {1, 2, 3, 4}, later[4] = {1, 2, 3, 120};
    float out[4 * 16];
    assert_int_equal(lp_model_forward(m, ids, NULL, NULL, 1, 4, out), LP_OK);
    assert_int_equal(truncate(st_path, (off_t)(pos + 100 * rb)), 0);
    assert_int_equal(lp_model_forward(m, ids, NULL, NULL, 1, 4, out), LP_OK);
    assert_int_equal(lp_model_forward(m, later, NULL, NULL, 1, 4, out), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), st_path));
    assert_non_null(strstr(lp_err_msg(), "row 120"));
    lp_model_free(m);
}

/* A bf16 checkpoint (as Qwen2.5 ships): rows are 2 bytes a value in the file and converted
 * as the eager load converts them. */
static void test_bf16_source(void **state)
{
    (void)state;
    size_t rb;
    (void)copy_model(&rb);
    lp_st_file *sf = NULL;
    assert_int_equal(lp_st_open("tests/golden/qwen2_cls/model.safetensors", &sf), LP_OK);
    const size_t n = lp_st_count(sf);
    lp_st_write_tensor *wt = calloc(n, sizeof *wt);
    uint16_t **bufs = calloc(n, sizeof *bufs);
    for (size_t i = 0; i < n; i++) {
        const lp_st_tensor *t = lp_st_at(sf, i);
        assert_int_equal(t->dtype, LP_ST_DTYPE_F32);
        bufs[i] = malloc(t->numel * sizeof(uint16_t));
        lp_f32_to_bf16_n(bufs[i], t->data, (int64_t)t->numel);
        wt[i] = (lp_st_write_tensor){t->name, LP_ST_DTYPE_BF16, t->ndim, t->shape, bufs[i]};
    }
    assert_int_equal(lp_st_write(st_path, wt, n, NULL, 0), LP_OK);
    lp_st_close(sf);
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(wt);
    lp_model *lz = load(dir, true, true), *eg = load(dir, false, true);
    const int32_t ids[5] = {9, 10, 11, 126, 9};
    float a[16], b[16];
    assert_int_equal(lp_model_forward(lz, ids, NULL, NULL, 1, 5, a), LP_OK);
    assert_int_equal(lp_model_forward(eg, ids, NULL, NULL, 1, 5, b), LP_OK);
    assert_memory_equal(a, b, 3 * sizeof(float));
    expect_rows(lz, eg, ids, 5);
    lp_model_free(lz);
    lp_model_free(eg);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/lp_lazy_embedding.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(st_path);
    unlink(cfg_path);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_classifier), cmocka_unit_test(test_causal_lm),
                                       cmocka_unit_test(test_not_lazy), cmocka_unit_test(test_bad_files),
                                       cmocka_unit_test(test_bf16_source)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
