/* A causal LM's head and loss in chunks of rows (src/models/lm_loss.c) against the same model
 * with one chunk (the whole (B*T, V) logits at once, as before chunking): loss, logits and
 * every gradient, for an untied head (llama_lm) and one tied to the embeddings (smollm_lm),
 * full fine-tuning (the head trains: its gradient is recomputed in the backward) and LoRA (a
 * frozen head: d(head input) taken during the loss forward), in training and eval mode, with a
 * chunk size (5) that does not divide B*T (24) and a whole chunk of ignored tokens. Then the
 * memory: the chunked model's activation block is smaller by exactly the logits it no longer
 * holds, and its temporary peak holds no (B*T, V) gradient. And a trained head's gradient
 * taken in the loss forward (lp_model_set_head_grad_in_loss, as the trainer does on one rank)
 * against the backward's recompute: bit for bit, chunked or whole, over two accumulated
 * micro-batches; the broken promises (a scale changed, a zero_grad in between) refused.
 *
 * Tolerance: 1e-5 relative to each tensor's largest magnitude (absolute 1e-7 floor). Chunked
 * and whole run the same kernels over the same rows; what differs is the GEMM's row blocking
 * (OpenBLAS may split M differently), the loss summed per chunk in double, and the gradient
 * scale k/total then /k in float (1 ulp): float rounding, far below the goldens' 1e-4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/core.h"
#include "loupe/models.h"

#define B 3
#define T 8
#define N (B * T)
#define CHUNK 5

typedef struct result {
    float loss;
    float *logits; /* (N, V) */
    float *grads;  /* every trainable parameter's gradient, concatenated */
    int64_t n_grads;
    uint64_t act_peak, tmp_peak;
} result;

static bool early; /* lp_model_set_head_grad_in_loss for the models step() loads */

static lp_model *load(const char *dir, bool lora, int32_t chunk)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.exec = LP_EXEC_MODE_FUSED;
    o.training = true;
    o.quiet = true;
    o.lm_head_chunk = chunk;
    if (lora) {
        o.lora.enabled = true;
        o.lora.rank = 4;
        o.lora.targets = "all-linear";
    }
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model_set_head_grad_in_loss(m, early);
    // LoRA's B starts at zero: give the adapters weights so the gradients reach every layer
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    for (size_t i = 0; i < np; i++)
        if (strstr(p[i].name, "lora_B"))
            for (int64_t j = 0; j < p[i].numel; j++)
                p[i].data[j] = 0.01f * (float)((j * 37 + (int64_t)i) % 19 - 9);
    return m;
}

/* One loss forward (+ backward) on a batch with right padding, a row of one token (it predicts
 * nothing: rows 8..15 are all ignored, so the chunk 10..14 is entirely ignored) and a label
 * -100 inside a row; `micro` such passes into the same gradients (the later ones on shifted
 * ids), the loss returned the last's. dscale_after: dloss_scale set between the forward and
 * the backward. */
static result step_n(const char *dir, bool lora, int32_t chunk, bool training, float dscale_after, int micro)
{
    lp_model *m = load(dir, lora, chunk);
    lp_model_info info;
    lp_model_info_get(m, &info);
    const int64_t V = info.vocab_size;
    int32_t ids[N], mask[N], labels[N];
    static const int len[B] = {8, 1, 6};
    lp_model_set_training(m, training);
    result r = {0};
    r.logits = malloc((size_t)(N * V) * sizeof(float));
    assert_non_null(r.logits);
    lp_alloc_stats before, after;
    lp_alloc_stats_get(&before);
    lp_alloc_stats_reset_peak();
    lp_model_zero_grad(m);
    for (int a = 0; a < micro; a++) {
        for (int i = 0; i < N; i++) {
            const int b = i / T, t = i % T;
            ids[i] = 3 + (i * 11 + a * 5) % (int32_t)(V - 3);
            mask[i] = t < len[b];
            labels[i] = mask[i] ? ids[i] : -100;
        }
        labels[2 * T + 3] = -100;
        if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, r.logits, &r.loss) != LP_OK)
            fail_msg("%s", lp_err_msg());
        if (dscale_after > 0)
            lp_model_set_dloss_scale(m, dscale_after);
        if (lp_model_backward(m) != LP_OK)
            fail_msg("%s", lp_err_msg());
    }
    lp_alloc_stats_get(&after);
    r.act_peak = after.peak[LP_MEM_CATEGORY_ACTIVATION] - before.live[LP_MEM_CATEGORY_ACTIVATION];
    r.tmp_peak = after.peak[LP_MEM_CATEGORY_TEMPORARY] - before.live[LP_MEM_CATEGORY_TEMPORARY];
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    for (size_t i = 0; i < np; i++)
        if (p[i].grad)
            r.n_grads += p[i].numel;
    r.grads = malloc((size_t)r.n_grads * sizeof(float));
    assert_non_null(r.grads);
    int64_t k = 0;
    for (size_t i = 0; i < np; i++)
        if (p[i].grad) {
            memcpy(r.grads + k, p[i].grad, (size_t)p[i].numel * sizeof(float));
            k += p[i].numel;
        }
    lp_model_free(m);
    return r;
}

static result step(const char *dir, bool lora, int32_t chunk, bool training, float dscale_after)
{
    return step_n(dir, lora, chunk, training, dscale_after, 1);
}

static void free_result(result *r)
{
    free(r->logits);
    free(r->grads);
}

static void close_to(const char *what, const float *a, const float *b, int64_t n, float scale_b)
{
    double big = 0.0;
    for (int64_t i = 0; i < n; i++)
        big = fmax(big, fabs((double)b[i] * scale_b));
    const double tol = fmax(1e-5 * big, 1e-7);
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)a[i] - (double)b[i] * scale_b) > tol)
            fail_msg("%s[%lld]: chunked %.9g, whole %.9g (tolerance %.3g)", what, (long long)i, a[i],
                     b[i] * scale_b, tol);
}

static void compare(const char *dir, bool lora, bool training)
{
    result c = step(dir, lora, CHUNK, training, 0), w = step(dir, lora, 1 << 20, training, 0);
    printf("%s %s %s: loss chunked %.9g whole %.9g, %lld gradients\n", dir, lora ? "lora" : "full",
           training ? "train" : "eval", c.loss, w.loss, (long long)c.n_grads);
    assert_true(c.loss > 0.0f && isfinite(c.loss));
    assert_true(fabsf(c.loss - w.loss) <= 1e-6f * w.loss);
    assert_int_equal(c.n_grads, w.n_grads);
    lp_model_info info;
    lp_model *m = load(dir, lora, CHUNK);
    lp_model_info_get(m, &info);
    lp_model_free(m);
    close_to("logits", c.logits, w.logits, N * info.vocab_size, 1.0f);
    close_to("gradients", c.grads, w.grads, c.n_grads, 1.0f);
    // the gradients are not all zero (a test that could not fail otherwise)
    double s = 0;
    for (int64_t i = 0; i < c.n_grads; i++)
        s += fabs(c.grads[i]);
    assert_true(s > 0);
    free_result(&c);
    free_result(&w);
}

static void test_untied(void **state)
{
    (void)state;
    compare("tests/golden/llama_lm", false, true);
    compare("tests/golden/llama_lm", true, true);
    compare("tests/golden/llama_lm", true, false);
}

static void test_tied(void **state)
{
    (void)state;
    compare("tests/golden/smollm_lm", false, true);
    compare("tests/golden/smollm_lm", true, true);
    compare("tests/golden/smollm_lm", false, false);
}

/* A dloss_scale changed between the loss forward (which, frozen head, already took the head's
 * input gradient) and the backward applies, as with the whole logits. */
static void test_scale_after_forward(void **state)
{
    (void)state;
    result c = step("tests/golden/llama_lm", true, CHUNK, true, 0.25f),
           w = step("tests/golden/llama_lm", true, 1 << 20, true, 0);
    close_to("gradients x 0.25", c.grads, w.grads, c.n_grads, 0.25f);
    free_result(&c);
    free_result(&w);
}

/* The head's gradient taken in the loss forward equals the backward's recompute bit for bit
 * (the same GEMMs on the same rows, the gradients added in the same order), for an untied
 * and a tied head, chunked and whole, over two micro-batches accumulated; LoRA (a frozen head)
 * is unchanged by the promise. */
static void test_head_grad_in_loss(void **state)
{
    (void)state;
    static const char *const dirs[] = {"tests/golden/llama_lm", "tests/golden/smollm_lm"};
    static const int32_t chunks[] = {CHUNK, 1 << 20};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 2; c++)
            for (int lora = 0; lora < 2; lora++) {
                early = false;
                result r = step_n(dirs[d], lora, chunks[c], true, 0, 2);
                early = true;
                result e = step_n(dirs[d], lora, chunks[c], true, 0, 2);
                early = false;
                printf("%s %s chunk %d: loss %.9g / %.9g, %lld gradients\n", dirs[d], lora ? "lora" : "full",
                       chunks[c], r.loss, e.loss, (long long)r.n_grads);
                assert_int_equal(r.n_grads, e.n_grads);
                assert_memory_equal(&r.loss, &e.loss, sizeof r.loss);
                assert_memory_equal(r.grads, e.grads, (size_t)r.n_grads * sizeof(float));
                double s = 0;
                for (int64_t i = 0; i < r.n_grads; i++)
                    s += fabs(r.grads[i]);
                assert_true(s > 0);
                free_result(&r);
                free_result(&e);
            }
}

/* The promise broken: a dloss_scale changed after such a forward, or a zero_grad between it
 * and its backward, and the backward refuses (the head's gradient went in under the old scale,
 * or was wiped) instead of returning wrong gradients. Without the promise both are fine. */
static void test_head_grad_in_loss_refusals(void **state)
{
    (void)state;
    for (int prom = 0; prom < 2; prom++)
        for (int how = 0; how < 2; how++) {
            early = prom;
            lp_model *m = load("tests/golden/llama_lm", false, CHUNK);
            early = false;
            int32_t ids[N], labels[N];
            for (int i = 0; i < N; i++)
                ids[i] = labels[i] = 3 + (i * 11) % 100;
            float loss;
            lp_model_zero_grad(m);
            if (lp_model_loss_forward(m, ids, NULL, NULL, labels, B, T, NULL, &loss) != LP_OK)
                fail_msg("%s", lp_err_msg());
            if (how == 0)
                lp_model_set_dloss_scale(m, 0.5f);
            else
                lp_model_zero_grad(m);
            lp_status st = lp_model_backward(m);
            printf("promise %d, %s: %s\n", prom, how == 0 ? "scale changed" : "zero_grad between",
                   st == LP_OK ? "ok" : lp_err_msg());
            if (prom) {
                assert_int_equal(st, LP_STATUS_INVALID_ARG);
                assert_non_null(strstr(lp_err_msg(), how == 0 ? "dloss_scale changed" : "no loss forward"));
            } else {
                assert_int_equal(st, LP_OK);
            }
            lp_model_free(m);
        }
}

/* The logits are no longer held: the activation block of the chunked model is smaller by
 * exactly (N - CHUNK) rows of V floats (each tensor padded to 16 floats), and the temporary
 * peak of the whole-logits model is no larger than the chunked one's (neither holds a
 * (N, V) gradient any more). */
static void test_memory(void **state)
{
    (void)state;
    static const char *const dirs[] = {"tests/golden/llama_lm", "tests/golden/smollm_lm"};
    for (int d = 0; d < 2; d++)
        for (int lora = 0; lora < 2; lora++) {
            result c = step(dirs[d], lora, CHUNK, true, 0), w = step(dirs[d], lora, 1 << 20, true, 0);
            const uint64_t V = 128, up = 16;
            const uint64_t want = 4 * (((N * V + up - 1) / up * up) - ((CHUNK * V + up - 1) / up * up));
            printf("%s %s: activations whole %llu, chunked %llu (saved %llu, expected %llu); temporary %llu "
                   "/ %llu\n",
                   dirs[d], lora ? "lora" : "full", (unsigned long long)w.act_peak,
                   (unsigned long long)c.act_peak, (unsigned long long)(w.act_peak - c.act_peak),
                   (unsigned long long)want, (unsigned long long)w.tmp_peak, (unsigned long long)c.tmp_peak);
            assert_true(w.act_peak > c.act_peak);
            assert_int_equal(w.act_peak - c.act_peak, want);
            assert_int_equal(w.tmp_peak, c.tmp_peak);
            free_result(&c);
            free_result(&w);
        }
}

int main(void)
{
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_untied),
        cmocka_unit_test(test_tied),
        cmocka_unit_test(test_scale_after_forward),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_head_grad_in_loss),
        cmocka_unit_test(test_head_grad_in_loss_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
