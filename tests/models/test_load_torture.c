/* Allocation-failure torture over model loading and PEFT setup (issue 16), as curl's torture
 * tests do: a clean load counts its allocations (lp_alloc, the loaders' lp_malloc family and,
 * through cJSON's hooks, every JSON node), then the load is repeated failing the 1st, 2nd,
 * ... Nth allocation in turn. Each failure must come back as LP_STATUS_NO_MEMORY with a
 * message, no model, and nothing left allocated: the tagged allocator's live bytes return to
 * where they were, and under ASan (scripts/build.sh's sanitizer build) LeakSanitizer fails the
 * test on any plain heap block left behind. Cases: a config-only model, checkpoints written by
 * transformers, a LoRA adapter written by PEFT, and QLoRA (NF4) on a PEFT adapter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loupe/core.h"
#include "loupe/models.h"

typedef struct tcase {
    const char *name, *dir, *adapter;
    bool lora;
    lp_dtype base;
} tcase;

static lp_status load(const tcase *c, lp_model **m)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = strstr(c->dir, "_lm") ? LP_MODEL_TASK_AUTO : LP_MODEL_TASK_SEQ_CLS; // causal LMs stay LMs
    o.training = true;
    o.quiet = true;
    if (c->lora) {
        o.lora.enabled = true;
        o.lora.rank = 4;
        o.lora.adapter_dir = c->adapter;
        o.lora.base_dtype = c->base;
    }
    return lp_model_load(c->dir, &o, m);
}

static void torture(const tcase *c)
{
    lp_alloc_stats s0, s1;
    lp_model *m = NULL;
    lp_alloc_fail_at(0);
    assert_int_equal(load(c, &m), LP_OK); /* warms once-only state (profiler name table) */
    lp_model_free(m);
    lp_alloc_stats_get(&s0);
    lp_alloc_fail_at(0);
    assert_int_equal(load(c, &m), LP_OK);
    uint64_t n = lp_alloc_fail_at(0);
    lp_model_free(m);
    assert_true(n > 20);
    uint64_t refused = 0;
    for (uint64_t k = 1; k <= n; k++) {
        m = (lp_model *)1;
        lp_err_clear();
        lp_alloc_fail_at(k);
        lp_status st = load(c, &m);
        lp_alloc_fail_at(0);
        if (st == LP_OK) { /* an allocation whose failure has a fallback: the load is whole */
            lp_model_free(m);
        } else {
            refused++;
            if (st != LP_STATUS_NO_MEMORY || m != NULL || !lp_err_msg()[0])
                fail_msg("%s: allocation %llu of %llu: status %s, model %p, message '%s'", c->name,
                         (unsigned long long)k, (unsigned long long)n, lp_status_str(st), (void *)m,
                         lp_err_msg());
        }
        lp_alloc_stats_get(&s1);
        if (s1.live_total != s0.live_total)
            fail_msg("%s: allocation %llu failed: %llu tagged bytes left allocated", c->name,
                     (unsigned long long)k, (unsigned long long)(s1.live_total - s0.live_total));
    }
    print_message("%s: %llu allocations, each failed in turn: %llu refused cleanly, %llu with a fallback\n",
                  c->name, (unsigned long long)n, (unsigned long long)refused,
                  (unsigned long long)(n - refused));
    assert_true(refused > n / 2);
}

static void test_config_only(void **state)
{
    (void)state;
    torture(&(tcase){"models/default (config only)", "models/default", NULL, false, LP_DTYPE_F32});
}

static void test_hf_checkpoints(void **state)
{
    (void)state;
    torture(&(tcase){"cls_bert", "tests/golden/cls_bert", NULL, false, LP_DTYPE_F32});
    torture(&(tcase){"cls_distilbert", "tests/golden/cls_distilbert", NULL, false, LP_DTYPE_F32});
}

static void test_peft(void **state)
{
    (void)state;
    torture(&(tcase){"lora_bert + PEFT adapter", "tests/golden/lora_bert",
                     "tests/golden/lora_bert/peft_adapter", true, LP_DTYPE_F32});
    torture(
        &(tcase){"fresh LoRA on cls_distilbert", "tests/golden/cls_distilbert", NULL, true, LP_DTYPE_F32});
    torture(&(tcase){"QLoRA (NF4) + PEFT adapter", "tests/golden/qlora_distilbert",
                     "tests/golden/qlora_distilbert/peft_adapter", true, LP_DTYPE_NF4});
    /* the llama family: GQA, llama3 rope, tied embeddings, an all-linear adapter over NF4 */
    torture(&(tcase){"llama_lm", "tests/golden/llama_lm", NULL, false, LP_DTYPE_F32});
    torture(&(tcase){"smollm_lm (tied)", "tests/golden/smollm_lm", NULL, false, LP_DTYPE_F32});
    torture(&(tcase){"qlora_llama_lm + PEFT adapter", "tests/golden/qlora_llama_lm",
                     "tests/golden/qlora_llama_lm/peft_adapter", true, LP_DTYPE_NF4});
}

int main(void)
{
    /* cJSON's nodes and strings count too (io installs lp_malloc as cJSON's allocator at the
     * first parse): a config or header parse fails at every node */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_only),
        cmocka_unit_test(test_hf_checkpoints),
        cmocka_unit_test(test_peft),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
