/* Golden tests of the llama family against transformers (tools/golden/gen_decoder.py): tiny
 * Llama (GQA), Llama with llama3 rope scaling, Mistral with a sliding window shorter than the
 * rows, Qwen2 (q/k/v biases, MQA) and a tied-embedding SmolLM shape, as classifiers and causal
 * LMs, on a right-padded and a left-padded batch, in EAGER and FUSED exec modes and FUSED
 * with gradient checkpointing: logits, loss, hidden states and every parameter's gradient.
 *
 * What is compared where. Padding positions compute numbers nobody reads (transformers gives a
 * query that sees no key uniform attention over the whole row; loupe gives it 0), so hidden
 * states and causal-LM logits are compared at real tokens only. Under left padding
 * transformers' causal-LM loss also counts the last pad predicting the first real token (a
 * query with no visible key); loupe's padding positions predict nothing, so the left batch's
 * causal-LM check is the logits at real tokens (the loss is a function of them) and its loss
 * and gradients are not compared. Classifiers score the last real token in both.
 *
 * Tolerance. Relative error is per tensor, normwise (golden_util.h). golden.json's
 * f32_vs_f64 puts torch's own float32 results within ~1e-6 of float64 on these models; our
 * sums run in another order (BLAS blocking, the fused kernel's online softmax), so 1e-4 is
 * tens of noise floors and still fails on any real bug (a wrong rotation, head mapping,
 * window, norm or residual moves tensors by 1e-2 or more). TINY = 1e-2 keeps near-zero
 * gradients from dividing by nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "loupe/base.h"
#include "loupe/models.h"

#define REL_TOL 1e-4
#define TINY 1e-2

typedef struct golden {
    const char *name;
    bool lm;
    bool lora; /* the base loaded with the golden's PEFT-written peft_adapter/ */
    bool nf4;  /* QLoRA: NF4 bases as bitsandbytes made them */
} golden;

static lp_model *load(const golden *gd, lp_exec_mode exec, bool ckpt)
{
    char dir[512], adapter[600];
    snprintf(dir, sizeof dir, "tests/golden/%s", gd->name);
    snprintf(adapter, sizeof adapter, "%s/peft_adapter", dir);
    lp_model_options o;
    lp_model_options_init(&o);
    o.exec = exec;
    o.grad_checkpointing = ckpt;
    o.training = true;
    o.quiet = true;
    if (gd->lora) {
        o.lora.enabled = true;
        o.lora.adapter_dir = adapter;
        if (gd->nf4) {
            o.lora.base_dtype = LP_DTYPE_NF4;
            o.lora.bnb_cpu_dequant = true; // the weights bitsandbytes' CPU kernel computed with
        }
    }
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static const float *need_f32(const lp_st_file *g, const char *name, int64_t want)
{
    int64_t n = 0;
    const float *r = gold_f32(g, name, &n);
    if (!r)
        fail_msg("golden has no f32 tensor %s", name);
    if (n != want)
        fail_msg("golden %s has %lld elements, expected %lld", name, (long long)n, (long long)want);
    return r;
}

static int32_t *need_i32(const lp_st_file *g, const char *name, int64_t *n)
{
    int32_t *v = gold_i32(g, name, n);
    if (!v)
        fail_msg("golden has no integer tensor %s", name);
    return v;
}

/* Compares the rows (width C) of a and ref where mask is 1. */
static void check_rows(const char *label, const float *a, const float *ref, const int32_t *mask, int64_t rows,
                       int64_t C, double *worst)
{
    int64_t n = 0;
    for (int64_t r = 0; r < rows; r++)
        n += mask[r] != 0;
    float *x = malloc((size_t)(n * C + 1) * sizeof *x), *y = malloc((size_t)(n * C + 1) * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (int64_t r = 0, k = 0; r < rows; r++)
        if (mask[r]) {
            memcpy(x + k * C, a + r * C, (size_t)C * sizeof *x);
            memcpy(y + k * C, ref + r * C, (size_t)C * sizeof *y);
            k++;
        }
    gold_check(label, x, y, n * C, TINY, REL_TOL, worst);
    free(x);
    free(y);
}

static void run_batch(const golden *gd, const char *b, lp_exec_mode exec, bool ckpt)
{
    char path[512], k[256];
    snprintf(path, sizeof path, "tests/golden/%s/golden.safetensors", gd->name);
    lp_st_file *g = gold_open(path);
    int64_t n = 0, nl = 0;
    snprintf(k, sizeof k, "%s.input_ids", b);
    int32_t *ids = need_i32(g, k, &n);
    snprintf(k, sizeof k, "%s.attention_mask", b);
    int32_t *mask = need_i32(g, k, NULL);
    snprintf(k, sizeof k, "%s.labels", b);
    int32_t *labels = need_i32(g, k, &nl);
    const int32_t B = 3, T = (int32_t)(n / B);
    assert_int_equal(nl, gd->lm ? n : B);
    const bool left = !strcmp(b, "left");

    lp_model *m = load(gd, exec, ckpt);
    lp_model_info info;
    lp_model_info_get(m, &info);
    const int64_t C = info.hidden_size, V = gd->lm ? info.vocab_size : info.num_labels;
    const int64_t rows = gd->lm ? (int64_t)B * T : B;
    float *logits = malloc((size_t)(rows * V) * sizeof *logits);
    float loss = 0;
    lp_model_zero_grad(m);
    if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, logits, &loss) != LP_OK ||
        lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    printf("%s %s, %s%s:\n", gd->name, b, lp_exec_mode_name(exec), ckpt ? " + gradient checkpointing" : "");
    double worst = 0;
    snprintf(k, sizeof k, "%s.logits", b);
    const float *ref = need_f32(g, k, rows * V);
    if (gd->lm)
        check_rows(k, logits, ref, mask, rows, V, &worst);
    else
        gold_check(k, logits, ref, rows * V, TINY, REL_TOL, &worst);
    for (int32_t i = 0; i <= info.num_layers && !gd->lora; i++) { // the adapter goldens hold no hidden states
        snprintf(k, sizeof k, "%s.hidden.%d", b, i);
        check_rows(k, lp_model_hidden(m, i), need_f32(g, k, (int64_t)B * T * C), mask, (int64_t)B * T, C, &worst);
    }
    if (!(gd->lm && left)) { // see the top of the file
        snprintf(k, sizeof k, "%s.loss", b);
        gold_check(k, &loss, need_f32(g, k, 1), 1, TINY, REL_TOL, &worst);
        size_t np, n_trainable = 0;
        const lp_model_param *p = lp_model_params(m, &np);
        size_t n_gold = 0;
        snprintf(k, sizeof k, "%s.grad.", b);
        for (size_t i = 0; i < lp_st_count(g); i++)
            n_gold += !strncmp(lp_st_at(g, i)->name, k, strlen(k));
        for (size_t i = 0; i < np; i++) {
            if (!p[i].trainable) { // a frozen base parameter gets no gradient buffer
                assert_true(gd->lora);
                assert_null(p[i].grad);
                continue;
            }
            n_trainable++;
            // PEFT names the trainable parameters under base_model.model.
            snprintf(k, sizeof k, "%s.grad.%s%s", b, gd->lora ? "base_model.model." : "", p[i].name);
            assert_non_null(p[i].grad);
            gold_check(k, p[i].grad, need_f32(g, k, p[i].numel), p[i].numel, TINY, REL_TOL, &worst);
        }
        assert_int_equal(n_trainable, n_gold); // every trainable parameter, no more, no fewer
    }
    printf("SUMMARY %-12s %-5s %-5s%s worst rel %.2e\n", gd->name, b, lp_exec_mode_name(exec), ckpt ? "+ckpt" : "",
           worst);
    free(logits);
    free(ids);
    free(mask);
    free(labels);
    lp_model_free(m);
    lp_st_close(g);
}

static void run_golden(const golden *gd)
{
    static const char *const batches[] = {"right", "left"};
    for (int b = 0; b < 2; b++) {
        run_batch(gd, batches[b], LP_EXEC_MODE_EAGER, false);
        run_batch(gd, batches[b], LP_EXEC_MODE_FUSED, false);
        run_batch(gd, batches[b], LP_EXEC_MODE_FUSED, true);
    }
}

#define GOLDEN_TEST(id, lm, lora, nf4)                                                                       \
    static void test_##id(void **state)                                                                      \
    {                                                                                                        \
        (void)state;                                                                                         \
        run_golden(&(golden){#id, lm, lora, nf4});                                                           \
    }
GOLDEN_TEST(llama_cls, false, false, false)
GOLDEN_TEST(llama_lm, true, false, false)
GOLDEN_TEST(mistral_lm, true, false, false)
GOLDEN_TEST(qwen2_cls, false, false, false)
GOLDEN_TEST(qwen2_lm, true, false, false)
GOLDEN_TEST(smollm_lm, true, false, false)
GOLDEN_TEST(lora_llama_cls, false, true, false)
GOLDEN_TEST(lora_qwen2_lm, true, true, false)
GOLDEN_TEST(qlora_llama_lm, true, true, true)

/* An adapter loupe saves (after one SGD step, so lora_B is loupe's own) is PEFT's format for a
 * causal LM (task CAUSAL_LM, nothing in modules_to_save) and reloads to the same logits; the
 * directory and those logits stay in the build tree for tools/check_peft_decoder.py, which
 * loads them with PEFT. */
static void test_adapter_round_trip(void **state)
{
    (void)state;
    const golden gd = {"lora_qwen2_lm", true, true, false};
    /* the trained and the reloaded (inference) model on the same GEMM, so the logits can match
     * bit for bit: a training load would pack the base where that is the default (avx2),
     * which sums in another order than the reload's OpenBLAS */
    setenv("LP_F32_PACK", "0", 1);
    lp_model *m = load(&gd, LP_EXEC_MODE_FUSED, false);
    lp_st_file *g = gold_open("tests/golden/lora_qwen2_lm/golden.safetensors");
    int64_t n = 0;
    int32_t *ids = need_i32(g, "right.input_ids", &n), *mask = need_i32(g, "right.attention_mask", NULL),
            *labels = need_i32(g, "right.labels", NULL);
    const int32_t B = 3, T = (int32_t)(n / B);
    float loss;
    lp_model_zero_grad(m);
    if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, NULL, &loss) != LP_OK || lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    for (size_t i = 0; i < np; i++)
        if (p[i].grad)
            for (int64_t j = 0; j < p[i].numel; j++)
                p[i].data[j] -= 0.05f * p[i].grad[j];
    lp_model_info info;
    lp_model_info_get(m, &info);
    const int64_t V = info.vocab_size;
    float *a = malloc((size_t)(B * T * V) * sizeof *a), *b = malloc((size_t)(B * T * V) * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    lp_model_set_training(m, false);
    assert_int_equal(lp_model_forward(m, ids, mask, NULL, B, T, a), LP_OK);
    const char *bd = getenv("LP_BUILD_DIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/test_model_save/lora_qwen2_lm_adapter", bd ? bd : "build");
    assert_int_equal(lp_model_save_adapter(m, dir), LP_OK);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_file_read_all(path, &text, &len), LP_OK);
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    assert_non_null(cfg);
    assert_string_equal(cJSON_GetObjectItem(cfg, "task_type")->valuestring, "CAUSAL_LM");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cfg, "modules_to_save")), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cfg, "target_modules")), 7); // all-linear, resolved
    cJSON_Delete(cfg);
    free(text);
    // reloaded from loupe's own file: the same logits, bit for bit
    lp_model_options o;
    lp_model_options_init(&o);
    o.exec = LP_EXEC_MODE_FUSED;
    o.quiet = true;
    o.lora.enabled = true;
    o.lora.adapter_dir = dir;
    lp_model *r = NULL;
    if (lp_model_load("tests/golden/lora_qwen2_lm", &o, &r) != LP_OK)
        fail_msg("%s", lp_err_msg());
    assert_int_equal(lp_model_forward(r, ids, mask, NULL, B, T, b), LP_OK);
    assert_memory_equal(a, b, (size_t)(B * T * V) * sizeof *a);
    // the logits for PEFT's side of the check
    snprintf(path, sizeof path, "%s/loupe_logits.safetensors", dir);
    const int64_t shape[3] = {B, T, V};
    lp_st_write_tensor t = {.name = "logits", .dtype = LP_ST_DTYPE_F32, .ndim = 3, .shape = shape, .data = a};
    assert_int_equal(lp_st_write(path, &t, 1, NULL, 0), LP_OK);
    lp_model_free(r);
    lp_model_free(m);
    free(a);
    unsetenv("LP_F32_PACK");
    free(b);
    free(ids);
    free(mask);
    free(labels);
    lp_st_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_cls), cmocka_unit_test(test_llama_lm), cmocka_unit_test(test_mistral_lm),
        cmocka_unit_test(test_qwen2_cls), cmocka_unit_test(test_qwen2_lm), cmocka_unit_test(test_smollm_lm),
        cmocka_unit_test(test_lora_llama_cls), cmocka_unit_test(test_lora_qwen2_lm),
        cmocka_unit_test(test_qlora_llama_lm),  cmocka_unit_test(test_adapter_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
