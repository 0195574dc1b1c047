/* KV-cache generation against full recompute: greedy decoding with lp_model_prefill /
 * lp_model_decode must pick the same tokens as running lp_model_forward over the whole
 * sequence (prompt + tokens so far) at every step and taking the last column's logits, on the
 * tiny llama (GQA), the golden Llama, Qwen2 (MQA, q/k/v biases), Mistral (sliding window 5,
 * shorter than the sequences) and SmolLM (tied embeddings) shapes, for a batch of prompts of
 * mixed lengths, left- and right-padded.
 *
 * Tolerances. f32 cache: the same f32 math with the attention summed in another order (the
 * decode kernel's online softmax vs the prefill's), so logits agree to ~1e-6 of their scale;
 * 1e-4 relative (normwise, per step) is far above that and far below what a wrong position,
 * window or head mapping moves (1e-2 and more). Tokens must be identical. f16 cache: keys and
 * values rounded to 11 significant bits (2^-11 = 4.9e-4 relative) move logits by about that
 * much of their scale; the check is 5e-3 relative, along the f32 path's tokens (teacher
 * forced, so one near-tie cannot fork the sequences). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/base.h"
#include "loupe/models.h"
#include "loupe/prof.h"

#define B 3
#define TP 7     /* padded prompt length */
#define NEW 9    /* generated tokens: past Mistral's window of 5 */
#define F32_TOL 1e-4
#define F16_TOL 5e-3

static const int32_t prompt_len[B] = {7, 3, 5};

static lp_model *load(const char *dir)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    o.seed = 7; // tiny-llama has no weights: initialized from the seed
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static int32_t argmax(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int32_t)i;
    return best;
}

/* Normwise relative difference of two logit rows. */
static double rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0 ? s : 1));
}

/* The batch laid out as the cache lays it out: prompt columns (padded left or right), then
 * one column per generated token. ids/mask (B, TP + NEW). */
static void layout(int32_t *ids, int32_t *mask, bool left, int64_t V)
{
    const int64_t W = TP + NEW;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < W; t++) {
            const int64_t pad = TP - prompt_len[b];
            const bool real = t >= TP || (left ? t >= pad : t < prompt_len[b]);
            mask[b * W + t] = real;
            ids[b * W + t] = real && t < TP ? (int32_t)((b * 31 + t * 7 + 3) % V) : 0;
        }
}

/* Greedy with the cache (dtype), and at each step the full recompute's logits for the same
 * sequence; returns the worst relative logit difference, and whether every token matched. */
static double run(lp_model *m, const lp_model_config *cfg, bool left, lp_dtype dtype, bool *tokens_equal)
{
    const int64_t V = cfg->vocab_size, W = TP + NEW;
    int32_t ids[B * W], mask[B * W], pids[B * TP], pmask[B * TP], next[B];
    layout(ids, mask, left, V);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < TP; t++)
            pids[b * TP + t] = ids[b * W + t], pmask[b * TP + t] = mask[b * W + t];
    float *logits = malloc(sizeof(float) * B * V), *full = malloc(sizeof(float) * B * W * V);
    float *row = malloc(sizeof(float) * B * V);
    lp_kv_cache *kv = NULL;
    assert_int_equal(lp_model_kv_init(m, B, W, dtype, &kv), LP_OK);
    assert_int_equal(lp_model_prefill(m, kv, pids, pmask, B, TP, logits), LP_OK);
    double worst = 0;
    *tokens_equal = true;
    for (int64_t s = 0; s <= NEW; s++) {
        const int64_t T = TP + s; // columns so far
        // full recompute over the first T columns (a (B,T) view of the layout)
        int32_t fids[B * W], fmask[B * W];
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                fids[b * T + t] = ids[b * W + t], fmask[b * T + t] = mask[b * W + t];
        assert_int_equal(lp_model_forward(m, fids, fmask, NULL, B, (int32_t)T, full), LP_OK);
        for (int64_t b = 0; b < B; b++) {
            // the last real column of row b (right padding, prompt only: inside the prompt)
            int64_t last = T - 1;
            while (!fmask[b * T + last])
                last--;
            memcpy(row + b * V, full + (b * T + last) * V, sizeof(float) * V);
            double d = rel_diff(logits + b * V, row + b * V, V);
            worst = d > worst ? d : worst;
            if (dtype == LP_DTYPE_F32 && argmax(logits + b * V, V) != argmax(row + b * V, V))
                *tokens_equal = false;
        }
        if (s == NEW)
            break;
        for (int64_t b = 0; b < B; b++) { // the recompute's greedy token (teacher forcing for f16)
            next[b] = argmax(row + b * V, V);
            ids[b * W + T] = next[b];
        }
        assert_int_equal(lp_model_decode(m, kv, next, logits), LP_OK);
        assert_int_equal(lp_kv_cache_len(kv), T + 1);
    }
    lp_kv_cache_free(kv);
    free(logits), free(full), free(row);
    return worst;
}

static void check_model(const char *dir)
{
    lp_model *m = load(dir);
    const lp_model_config *cfg = lp_model_config_get(m);
    for (int left = 0; left < 2; left++) {
        bool eq;
        double d32 = run(m, cfg, left, LP_DTYPE_F32, &eq);
        double d16 = run(m, cfg, left, LP_DTYPE_F16, &(bool){0});
        fprintf(stderr, "%-26s %s padding: f32 cache max rel logit diff %.2e (tokens %s), f16 %.2e\n", dir,
                left ? "left " : "right", d32, eq ? "identical" : "DIFFER", d16);
        assert_true(eq);
        assert_true(d32 < F32_TOL);
        assert_true(d16 < F16_TOL);
    }
    lp_model_free(m);
}

/* A PEFT adapter (the golden Qwen2 LoRA): decoding through the unmerged adapter equals full
 * recompute, and merging it at load (lp_model_merge_adapters) gives the same greedy tokens,
 * logits within 1e-5 relative (W + s*B@A summed once instead of per token: float rounding). */
static void test_lora_merge(void **s)
{
    (void)s;
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    o.lora.enabled = true;
    o.lora.adapter_dir = "tests/golden/lora_qwen2_lm/peft_adapter";
    lp_model *m = NULL, *mm = NULL;
    if (lp_model_load("tests/golden/lora_qwen2_lm", &o, &m) != LP_OK ||
        lp_model_load("tests/golden/lora_qwen2_lm", &o, &mm) != LP_OK)
        fail_msg("%s", lp_err_msg());
    const lp_model_config *cfg = lp_model_config_get(m);
    bool eq;
    double d = run(m, cfg, true, LP_DTYPE_F32, &eq);
    fprintf(stderr, "lora_qwen2_lm + adapter, unmerged: cache vs recompute %.2e (tokens %s)\n", d,
            eq ? "identical" : "DIFFER");
    assert_true(eq && d < F32_TOL);
    assert_int_equal(lp_model_merge_adapters(mm), LP_OK);
    const int64_t V = cfg->vocab_size;
    int32_t ids[4] = {5, 9, 17, 3}, t0 = 0, t1 = 0;
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    lp_kv_cache *k0 = NULL, *k1 = NULL;
    assert_int_equal(lp_model_kv_init(m, 1, 24, LP_DTYPE_F32, &k0), LP_OK);
    assert_int_equal(lp_model_kv_init(mm, 1, 24, LP_DTYPE_F32, &k1), LP_OK);
    assert_int_equal(lp_model_prefill(m, k0, ids, NULL, 1, 4, a), LP_OK);
    assert_int_equal(lp_model_prefill(mm, k1, ids, NULL, 1, 4, b), LP_OK);
    double worst = 0;
    for (int step = 0; step < 16; step++) {
        worst = fmax(worst, rel_diff(b, a, V));
        t0 = argmax(a, V), t1 = argmax(b, V);
        assert_int_equal(t0, t1);
        assert_int_equal(lp_model_decode(m, k0, &t0, a), LP_OK);
        assert_int_equal(lp_model_decode(mm, k1, &t1, b), LP_OK);
    }
    fprintf(stderr, "merged vs unmerged adapter: 16 greedy tokens identical, max rel logit diff %.2e\n", worst);
    assert_true(worst < 1e-5);
    lp_kv_cache_free(k0), lp_kv_cache_free(k1);
    free(a), free(b);
    lp_model_free(m), lp_model_free(mm);
}

static void test_tiny_llama(void **s) { (void)s; check_model("models/tiny-llama"); }
static void test_llama(void **s) { (void)s; check_model("tests/golden/llama_lm"); }
static void test_qwen2(void **s) { (void)s; check_model("tests/golden/qwen2_lm"); }
static void test_mistral(void **s) { (void)s; check_model("tests/golden/mistral_lm"); }
static void test_smollm(void **s) { (void)s; check_model("tests/golden/smollm_lm"); }

/* Misuse gets a status, never a crash: decode before prefill, a full cache, a bad id, a
 * classifier, an f32/f16-only dtype. */
static void test_errors(void **s)
{
    (void)s;
    lp_model *m = load("tests/golden/llama_lm");
    lp_kv_cache *kv = NULL;
    int32_t ids[2] = {1, 2}, mask[2] = {1, 1};
    float logits[128];
    assert_int_equal(lp_model_kv_init(m, 1, 2, LP_DTYPE_BF16, &kv), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_model_kv_init(m, 1, 100000, LP_DTYPE_F32, &kv), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "config.json"));
    // the allocator's KV_CACHE bytes are what lp_model_kv_bytes (loupe inspect) predicts
    lp_mem_stats m0, m1;
    lp_prof_mem_stats(&m0);
    assert_int_equal(lp_model_kv_init(m, 3, 50, LP_DTYPE_F16, &kv), LP_OK);
    lp_prof_mem_stats(&m1);
    const uint64_t want = lp_model_kv_bytes(lp_model_config_get(m), 3, 50, LP_DTYPE_F16);
    assert_int_equal(m1.current[LP_MEM_CATEGORY_KV_CACHE] - m0.current[LP_MEM_CATEGORY_KV_CACHE], want);
    assert_int_equal(lp_kv_cache_nbytes(kv), want);
    // 2 layers x (k, v) x 3 x 2 kv heads x 50 x 16 x 2 bytes, rounded to 64, plus mask and positions
    assert_true(want >= 2 * 2 * 3 * 2 * 50 * 16 * 2 && want < 2 * 2 * 3 * 2 * 50 * 16 * 2 + 3 * 50 * 4 + 4096);
    lp_kv_cache_free(kv);
    lp_prof_mem_stats(&m1);
    assert_int_equal(m1.current[LP_MEM_CATEGORY_KV_CACHE], m0.current[LP_MEM_CATEGORY_KV_CACHE]);
    assert_int_equal(lp_model_kv_init(m, 1, 3, LP_DTYPE_F32, &kv), LP_OK);
    assert_int_equal(lp_model_decode(m, kv, ids, logits), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_model_prefill(m, kv, ids, mask, 1, 4, logits), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_model_prefill(m, kv, ids, mask, 1, 2, logits), LP_OK);
    assert_int_equal(lp_model_prefill(m, kv, ids, mask, 1, 2, logits), LP_STATUS_INVALID_ARG);
    int32_t bad = 5000;
    assert_int_equal(lp_model_decode(m, kv, &bad, logits), LP_STATUS_RANGE);
    assert_int_equal(lp_kv_cache_len(kv), 2); // the failed step left the cache as it was
    assert_int_equal(lp_model_decode(m, kv, ids, logits), LP_OK);
    assert_int_equal(lp_model_decode(m, kv, ids, logits), LP_STATUS_INVALID_ARG); // full
    lp_kv_cache_free(kv);
    lp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_llama), cmocka_unit_test(test_llama),   cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_mistral),    cmocka_unit_test(test_smollm),  cmocka_unit_test(test_errors), cmocka_unit_test(test_lora_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
