/* A GGUF file loads as the model it was converted from: the tiny decoder goldens smollm_lm
 * (llama arch: MHA, tied embeddings, q/k rows in llama.cpp's permuted rotary layout) and
 * qwen2_lm (GQA 4 heads / 1 kv head, q/k/v biases, no permutation), written by
 * tools/golden/gen_gguf_tiny.py as llama.cpp's converter writes them, all F32. loupe's
 * logits from the GGUF must equal its logits from the Hugging Face directory: the weights
 * are the same floats, and the only config difference is rms_norm_eps stored as float32 in
 * the GGUF (1e-6 becomes 9.99999997e-7), which moves the logits by ~1e-9 relative; the
 * tolerance is 1e-6 (a wrong permutation, name or head count moves them by O(1)); measured:
 * equal bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "golden_util.h"
#include "loupe/base.h"
#include "loupe/models.h"

static float *run(const char *path, const int32_t *ids, int32_t T, int64_t *V)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.task = LP_MODEL_TASK_CAUSAL_LM;
    lp_model *m = NULL;
    if (lp_model_load(path, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model_info info;
    lp_model_info_get(m, &info);
    *V = info.vocab_size;
    float *logits = malloc((size_t)(T * *V) * sizeof *logits);
    assert_non_null(logits);
    if (lp_model_forward(m, ids, NULL, NULL, 1, T, logits) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model_free(m);
    return logits;
}

static void check(const char *name)
{
    char dir[256], file[256];
    snprintf(dir, sizeof dir, "tests/golden/%s", name);
    snprintf(file, sizeof file, "tests/golden/gguf_tiny/%s.gguf", name);
    int32_t ids[12];
    for (int i = 0; i < 12; i++)
        ids[i] = (int32_t)((i * 37 + 5) % 128);
    int64_t V1 = 0, V2 = 0;
    float *a = run(dir, ids, 12, &V1), *b = run(file, ids, 12, &V2);
    assert_int_equal(V1, V2);
    gold_cmp c = gold_compare(b, a, 12 * V1, 1e-6);
    printf("%s: GGUF vs directory logits rel %.2e (max abs %.2e)\n", name, c.rel, c.max_abs);
    assert_true(c.rel <= 1e-6);
    free(a);
    free(b);
}

static void test_smollm_llama_arch(void **state)
{
    (void)state;
    check("smollm_lm");
}

static void test_qwen2_arch(void **state)
{
    (void)state;
    check("qwen2_lm");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smollm_llama_arch),
        cmocka_unit_test(test_qwen2_arch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
