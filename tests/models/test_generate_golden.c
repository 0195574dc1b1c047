/* Greedy generation against transformers' generate (do_sample=False, its own KV cache) on
 * the tiny decoder goldens (tests/golden/generate_lm, tools/golden/gen_generate.py): Llama
 * (GQA), Qwen2 (MQA, q/k/v biases), Mistral (sliding window 5, shorter than the sequences)
 * and SmolLM (tied embeddings), prompts of 1 to 13 tokens, 20 new tokens each.
 *
 * What holds. lp_generate (prefill + cached decode, greedy) picks transformers' 20 tokens
 * exactly, and at each step the raw logits of the position just generated, fed the golden
 * tokens (teacher forcing, so a near-tie cannot fork the comparison), are within 1e-4
 * relative (normwise, max|a-b| / max|ref|): torch's f32 is ~1e-6 from f64 on these models
 * (test_llama_golden), our sums run in another order, and a wrong position, window or
 * cache column moves logits by 1e-2 or more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "loupe/generate.h"

#define REL_TOL 1e-4
#define TINY 1e-2
#define N_PROMPTS 4
#define N_NEW 20

static void check_model(const char *name)
{
    char dir[256], what[128];
    snprintf(dir, sizeof dir, "tests/golden/%s", name);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = true;
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_st_file *g = gold_open("tests/golden/generate_lm/golden.safetensors");
    const int64_t V = lp_model_config_get(m)->vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    double worst = 0;
    for (int i = 0; i < N_PROMPTS; i++) {
        int64_t n = 0, nt = 0, nl = 0;
        snprintf(what, sizeof what, "%s_ids_%d", name, i);
        int32_t *ids = gold_i32(g, what, &n);
        snprintf(what, sizeof what, "%s_tokens_%d", name, i);
        int32_t *want = gold_i32(g, what, &nt);
        snprintf(what, sizeof what, "%s_logits_%d", name, i);
        const float *ref = gold_f32(g, what, &nl);
        assert_non_null(ids), assert_non_null(want), assert_non_null(ref);
        assert_int_equal(nt, N_NEW), assert_int_equal(nl, N_NEW * V);

        // the generation loop, greedy, no stops
        lp_gen_opts go;
        lp_gen_opts_init(&go);
        go.max_new_tokens = N_NEW;
        lp_gen_result r;
        const int32_t *pp = ids;
        const int32_t len = (int32_t)n;
        if (lp_generate(m, NULL, &pp, &len, 1, &go, &r) != LP_OK)
            fail_msg("%s", lp_err_msg());
        assert_int_equal(r.n_ids, N_NEW);
        int same = 0;
        while (same < N_NEW && r.ids[same] == want[same])
            same++;
        printf("%s prompt %d (%lld tokens): %d of %d greedy tokens as transformers\n", name, i, (long long)n, same,
               N_NEW);
        assert_int_equal(same, N_NEW);
        lp_gen_result_free(&r);

        // the logits of every step, teacher forced with transformers' tokens
        lp_kv_cache *kv = NULL;
        assert_int_equal(lp_model_kv_init(m, 1, (int32_t)n + N_NEW, LP_DTYPE_F32, &kv), LP_OK);
        assert_int_equal(lp_model_prefill(m, kv, ids, NULL, 1, (int32_t)n, logits), LP_OK);
        for (int s = 0; s < N_NEW; s++) {
            if (s > 0)
                assert_int_equal(lp_model_decode(m, kv, &want[s - 1], logits), LP_OK);
            snprintf(what, sizeof what, "%s prompt %d step %d logits", name, i, s);
            if (s == 0 || s == N_NEW - 1)
                gold_check(what, logits, ref + (int64_t)s * V, V, TINY, REL_TOL, &worst);
            else if (gold_compare(logits, ref + (int64_t)s * V, V, TINY).rel > REL_TOL)
                gold_check(what, logits, ref + (int64_t)s * V, V, TINY, REL_TOL, &worst); // prints and fails
        }
        lp_kv_cache_free(kv);
        free(ids), free(want);
    }
    printf("%s: worst relative logit difference %.3e (bound %.0e)\n", name, worst, REL_TOL);
    free(logits);
    lp_st_close(g);
    lp_model_free(m);
}

static void test_llama(void **s) { (void)s; check_model("llama_lm"); }
static void test_qwen2(void **s) { (void)s; check_model("qwen2_lm"); }
static void test_mistral(void **s) { (void)s; check_model("mistral_lm"); }
static void test_smollm(void **s) { (void)s; check_model("smollm_lm"); }

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llama), cmocka_unit_test(test_qwen2),
                                       cmocka_unit_test(test_mistral), cmocka_unit_test(test_smollm)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
