/* Golden tests of LoRA against PEFT (tools/golden/gen_lora.py): the tiny DistilBERT and BERT
 * classifiers with r = 4 adapters on q/v (lora_B non-zero, so every adapter gradient is
 * non-trivial), plain and rsLoRA scaling, EAGER and FUSED. The base model is loaded with the
 * PEFT-written peft_adapter/ (this also tests reading PEFT's format); then: logits, loss and
 * the gradient of every trainable parameter (named as in the adapter file: lora_A, lora_B,
 * the head) against PEFT's; nothing else has a gradient buffer; three AdamW steps; the merged
 * model (PEFT's merge_and_unload) saved by loupe: its weights and logits; the adapter saved
 * by loupe: PEFT's key names and shapes, and identical logits after reloading it.
 *
 * Tolerances, as in test_golden_cls.c: golden.json's f32_vs_f64 puts torch's own float32
 * noise at <= 1e-6 relative for logits and <= 3e-6 for gradients; our sums run in another
 * order, so 1e-4 relative per tensor (normwise) is ~30x that noise and still fails on any
 * real bug (a wrong scale, a transposed adapter or a missed module moves tensors by 1e-2 or
 * more). Merged weights are one f32 rounding of W + s*B@A: 1e-6 relative. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden_util.h"
#include "loupe/base.h"
#include "loupe/models.h"

#define REL_TOL 1e-4
#define TINY 1e-3
#define UPDATE_TOL 5e-4
#define MERGE_TOL 1e-6

typedef gold_batch batch;

/* base = a model directory; adapter = a PEFT adapter directory or NULL (no LoRA). */
static lp_model *load(const char *base, const char *adapter, lp_exec_mode exec)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.exec = exec;
    o.training = true; // dropout is 0 everywhere: the training path with PEFT's numbers
    o.quiet = true;
    if (adapter) {
        o.lora.enabled = true;
        o.lora.adapter_dir = adapter;
    }
    lp_model *m = NULL;
    if (lp_model_load(base, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static double check(const char *label, const float *a, const float *b, int64_t n, double tol, double *worst)
{
    return gold_check(label, a, b, n, TINY, tol, worst);
}

static void forward(lp_model *m, const batch *b, float *logits, float *loss)
{
    if (lp_model_loss_forward(m, b->ids, b->mask, b->types, b->labels, b->B, b->T, logits, loss) != LP_OK)
        fail_msg("%s", lp_err_msg());
}

static void run(const char *name, lp_exec_mode exec)
{
    char dir[256], adapter[300], path[1024];
    snprintf(dir, sizeof dir, "tests/golden/%s", name);
    snprintf(adapter, sizeof adapter, "%s/peft_adapter", dir);
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    lp_st_file *g = gold_open(path);
    batch b;
    gold_batch_read(g, &b);
    lp_model *m = load(dir, adapter, exec);
    lp_model_info info;
    lp_model_info_get(m, &info);
    const int64_t L = info.num_labels;
    float *logits = malloc((size_t)(b.B * L) * sizeof *logits), loss = 0;
    printf("%s, %s:\n", name, lp_exec_mode_name(exec));

    /* forward, backward */
    lp_model_zero_grad(m);
    forward(m, &b, logits, &loss);
    if (lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    double w_out = 0, w_grad = 0, w_upd = 0, w_merge = 0;
    int64_t n = 0;
    const float *ref = gold_f32(g, "logits", &n);
    assert_non_null(ref);
    assert_int_equal(n, b.B * L);
    check("logits", logits, ref, n, REL_TOL, &w_out);
    check("loss", &loss, gold_f32(g, "loss", NULL), 1, REL_TOL, &w_out);
    check("logits vs PEFT's reload of peft_adapter/ (adapter_logits)", logits,
          gold_f32(g, "adapter_logits", NULL), n, REL_TOL, &w_out);

    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    size_t n_gold = 0, n_train = 0;
    uint64_t grad_floats = 0;
    for (size_t i = 0; i < lp_st_count(g); i++)
        n_gold += !strncmp(lp_st_at(g, i)->name, "grad.", 5);
    for (size_t i = 0; i < np; i++) {
        if (!p[i].trainable) {
            assert_null(p[i].grad); // the frozen base has no gradient buffer at all
            continue;
        }
        n_train++;
        grad_floats += (uint64_t)p[i].numel;
        char k[256];
        snprintf(k, sizeof k, "grad.base_model.model.%s", p[i].name);
        ref = gold_f32(g, k, &n);
        if (!ref)
            fail_msg("%s: %s is trainable in loupe but PEFT has no gradient %s", name, p[i].name, k);
        assert_int_equal(n, p[i].numel);
        check(k + 5, p[i].grad, ref, n, REL_TOL, &w_grad);
    }
    assert_int_equal(n_train, n_gold); // exactly PEFT's trainable set
    lp_alloc_stats as;
    lp_alloc_stats_get(&as);
    printf("  trainable tensors %zu (%llu floats); gradient memory live %llu bytes\n", n_train,
           (unsigned long long)grad_floats, (unsigned long long)as.live[LP_MEM_CATEGORY_GRADIENT]);
    // the gradient block holds the trainable parameters only (each padded to 16 floats)
    assert_true(as.live[LP_MEM_CATEGORY_GRADIENT] <= (grad_floats + 16 * n_train) * sizeof(float));

    /* the merged model: weights and logits */
    char tmpl[] = "/tmp/lp_lora_XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char merged[600], saved[600];
    snprintf(merged, sizeof merged, "%s/merged", tmpl);
    snprintf(saved, sizeof saved, "%s/adapter", tmpl);
    if (lp_model_save_hf(m, merged) != LP_OK)
        fail_msg("%s", lp_err_msg());
    snprintf(path, sizeof path, "%s/model.safetensors", merged);
    lp_st_file *mf = gold_open(path);
    int n_merged = 0;
    for (size_t i = 0; i < lp_st_count(g); i++) {
        const char *k = lp_st_at(g, i)->name;
        if (strncmp(k, "merged.", 7) != 0)
            continue;
        const float *mine = gold_f32(mf, k + 7, &n);
        if (!mine)
            fail_msg("merged model lacks %s", k + 7);
        check(k, mine, gold_f32(g, k, NULL), n, MERGE_TOL, &w_merge);
        n_merged++;
    }
    assert_true(n_merged >= 4);
    for (size_t i = 0; i < lp_st_count(mf); i++) // a plain transformers model: no adapter tensors
        assert_null(strstr(lp_st_at(mf, i)->name, "lora_"));
    lp_st_close(mf);
    lp_model *mm = load(merged, NULL, exec);
    float *mlog = malloc((size_t)(b.B * L) * sizeof *mlog), mloss;
    forward(mm, &b, mlog, &mloss);
    check("merged model logits vs merge_and_unload()", mlog, gold_f32(g, "merged_logits", NULL), b.B * L,
          REL_TOL, &w_out);
    lp_model_free(mm);

    /* the adapter saved by loupe: PEFT's layout, and identical logits when reloaded */
    if (lp_model_save_adapter(m, saved) != LP_OK)
        fail_msg("%s", lp_err_msg());
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", adapter);
    lp_st_file *pf = gold_open(path);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", saved);
    lp_st_file *sf = gold_open(path);
    assert_int_equal(lp_st_count(sf), lp_st_count(pf));
    for (size_t i = 0; i < lp_st_count(pf); i++) {
        const lp_st_tensor *t = lp_st_at(pf, i), *u = lp_st_find(sf, t->name);
        if (!u)
            fail_msg("loupe's adapter lacks PEFT's key %s", t->name);
        assert_int_equal(u->ndim, t->ndim);
        for (int d = 0; d < t->ndim; d++)
            assert_int_equal(u->shape[d], t->shape[d]);
        assert_int_equal(u->dtype, t->dtype);
        // the model was loaded from this adapter and not trained: the same values come back
        assert_memory_equal(u->data, t->data, t->nbytes);
    }
    assert_string_equal(lp_st_metadata_get(sf, "format"), "pt");
    lp_st_close(sf);
    lp_st_close(pf);
    snprintf(path, sizeof path, "%s/adapter_config.json", saved);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_file_read_all(path, &text, &len), LP_OK);
    cJSON *cfg = cJSON_Parse(text);
    free(text);
    snprintf(path, sizeof path, "%s/adapter_config.json", adapter);
    assert_int_equal(lp_file_read_all(path, &text, &len), LP_OK);
    cJSON *pcfg = cJSON_Parse(text);
    free(text);
    assert_non_null(cfg);
    assert_non_null(pcfg);
    for (cJSON *e = cfg->child; e; e = e->next) // every key we write is one PEFT writes
        if (!cJSON_GetObjectItemCaseSensitive(pcfg, e->string))
            fail_msg("adapter_config.json key %s is not PEFT's", e->string);
    static const char *const same[] = {"r",         "lora_alpha", "use_rslora", "peft_type",
                                       "task_type", "bias",       NULL};
    for (int i = 0; same[i]; i++)
        assert_true(
            cJSON_Compare(cJSON_GetObjectItem(cfg, same[i]), cJSON_GetObjectItem(pcfg, same[i]), true));
    cJSON_Delete(cfg);
    cJSON_Delete(pcfg);
    lp_model *rm = load(dir, saved, exec);
    float *rlog = malloc((size_t)(b.B * L) * sizeof *rlog), rloss;
    forward(rm, &b, rlog, &rloss);
    assert_memory_equal(rlog, logits, (size_t)(b.B * L) * sizeof *rlog);
    lp_model_free(rm);
    free(rlog);
    free(mlog);

    /* three AdamW steps over the trainable parameters (torch.optim.AdamW, as the golden) */
    const float *losses = gold_f32(g, "losses", NULL);
    assert_non_null(losses);
    float **ms = calloc(np, sizeof *ms), **vs = calloc(np, sizeof *vs), **init = calloc(np, sizeof *init);
    for (size_t i = 0; i < np; i++) {
        ms[i] = calloc((size_t)p[i].numel, sizeof(float));
        vs[i] = calloc((size_t)p[i].numel, sizeof(float));
        init[i] = malloc((size_t)p[i].numel * sizeof(float));
        memcpy(init[i], p[i].data, (size_t)p[i].numel * sizeof(float));
    }
    for (int s = 1; s <= 3; s++) {
        lp_model_zero_grad(m);
        forward(m, &b, NULL, &loss);
        if (lp_model_backward(m) != LP_OK)
            fail_msg("%s", lp_err_msg());
        printf("  loss before step %d: %.7f (PEFT %.7f)\n", s, loss, losses[s - 1]);
        assert_true(fabs((double)loss - losses[s - 1]) <= REL_TOL * fabs((double)losses[s - 1]));
        for (size_t i = 0; i < np; i++)
            if (p[i].trainable)
                lp_adamw_step(p[i].data, p[i].grad, ms[i], vs[i], p[i].numel, 1e-3, 0.9, 0.999, 1e-8, 0.01,
                              s);
    }
    float *upd = NULL, *rupd = NULL;
    for (size_t i = 0; i < np; i++) {
        char k[256];
        snprintf(k, sizeof k, "step3.base_model.model.%s", p[i].name);
        ref = gold_f32(g, k, &n);
        if (!p[i].trainable) {
            assert_null(ref);
            assert_memory_equal(p[i].data, init[i], (size_t)p[i].numel * sizeof(float)); // frozen: unchanged
            continue;
        }
        assert_non_null(ref);
        upd = realloc(upd, (size_t)n * sizeof *upd);
        rupd = realloc(rupd, (size_t)n * sizeof *rupd);
        for (int64_t j = 0; j < n; j++) {
            upd[j] = p[i].data[j] - init[i][j];
            rupd[j] = ref[j] - init[i][j];
        }
        char lab[300];
        snprintf(lab, sizeof lab, "update %s", p[i].name);
        check(lab, upd, rupd, n, UPDATE_TOL, &w_upd);
    }
    printf("SUMMARY %-24s %-5s logits/loss rel %.2e | grad rel %.2e | AdamW x3 update rel %.2e | merged W "
           "rel %.2e\n",
           name, lp_exec_mode_name(exec), w_out, w_grad, w_upd, w_merge);
    for (size_t i = 0; i < np; i++) {
        free(ms[i]);
        free(vs[i]);
        free(init[i]);
    }
    free(ms);
    free(vs);
    free(init);
    free(upd);
    free(rupd);
    free(logits);
    lp_model_free(m);
    gold_batch_free(&b);
    lp_st_close(g);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    assert_int_equal(system(cmd), 0);
}

/* A fresh adapter is initialized as PEFT's LoraLayer.reset_lora_parameters does: lora_A
 * kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and lora_B zero, so the new
 * model computes exactly what the base does. Checked: every A inside the bound; the variance
 * pooled over all modules that of the uniform, bound^2 / 3, within 10 % (1,024 draws: the
 * standard error is 3 %; N(0, bound) or a = 0 would be off by 3x or 6x); modules drawing
 * different values; B all zero; logits equal to the base's. */
static void fresh_adapter_init(void **state)
{
    (void)state;
    const char *dir = "tests/golden/lora_distilbert";
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.quiet = true;
    o.lora.enabled = true;
    o.lora.rank = 8;
    o.lora.targets = "q,v";
    lp_model *m = NULL, *base = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    int n_a = 0, n_b = 0;
    double sum2 = 0, bound2 = 0;
    int64_t cnt = 0;
    const float *first_a = NULL;
    for (size_t i = 0; i < np; i++) {
        if (strstr(p[i].name, "lora_A")) {
            assert_int_equal(p[i].shape[0], 8);
            double bound = 1.0 / sqrt((double)p[i].shape[1]);
            for (int64_t j = 0; j < p[i].numel; j++) {
                assert_true(fabs(p[i].data[j]) <= bound);
                sum2 += (double)p[i].data[j] * p[i].data[j];
            }
            bound2 += bound * bound * (double)p[i].numel;
            cnt += p[i].numel;
            if (first_a)
                assert_memory_not_equal(first_a, p[i].data, 8 * sizeof(float));
            first_a = first_a ? first_a : p[i].data;
            n_a++;
        } else if (strstr(p[i].name, "lora_B")) {
            for (int64_t j = 0; j < p[i].numel; j++)
                assert_true(p[i].data[j] == 0.0f);
            n_b++;
        }
    }
    lp_model_info info;
    lp_model_info_get(m, &info);
    assert_int_equal(n_a, 2 * (int)info.num_layers);
    assert_int_equal(n_b, n_a);
    double var = sum2 / (double)cnt, want = bound2 / (double)cnt / 3.0;
    printf("  fresh lora_A: %lld values, variance %.4e (uniform: %.4e)\n", (long long)cnt, var, want);
    assert_true(fabs(var / want - 1.0) < 0.1);

    char path[512];
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    lp_st_file *g = gold_open(path);
    batch b;
    gold_batch_read(g, &b);
    lp_model_options ob;
    lp_model_options_init(&ob);
    ob.task = LP_MODEL_TASK_SEQ_CLS;
    ob.quiet = true;
    if (lp_model_load(dir, &ob, &base) != LP_OK)
        fail_msg("%s", lp_err_msg());
    float la[64], lb[64];
    assert_int_equal(lp_model_forward(m, b.ids, b.mask, b.types, b.B, b.T, la), LP_OK);
    assert_int_equal(lp_model_forward(base, b.ids, b.mask, b.types, b.B, b.T, lb), LP_OK);
    double w = 0;
    check("fresh adapter logits vs the base model's", la, lb, b.B * info.num_labels, 1e-6, &w);
    gold_batch_free(&b);
    lp_st_close(g);
    lp_model_free(base);
    lp_model_free(m);
}

#define CASE(fn, name, exec)                                                                                 \
    static void fn(void **state)                                                                             \
    {                                                                                                        \
        (void)state;                                                                                         \
        run(name, exec);                                                                                     \
    }
CASE(distilbert_eager, "lora_distilbert", LP_EXEC_MODE_EAGER)
CASE(distilbert_fused, "lora_distilbert", LP_EXEC_MODE_FUSED)
CASE(bert_eager, "lora_bert", LP_EXEC_MODE_EAGER)
CASE(bert_fused, "lora_bert", LP_EXEC_MODE_FUSED)
CASE(distilbert_rslora_eager, "lora_distilbert_rslora", LP_EXEC_MODE_EAGER)
CASE(distilbert_rslora_fused, "lora_distilbert_rslora", LP_EXEC_MODE_FUSED)
CASE(bert_rslora_eager, "lora_bert_rslora", LP_EXEC_MODE_EAGER)
CASE(bert_rslora_fused, "lora_bert_rslora", LP_EXEC_MODE_FUSED)

int main(void)
{
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fresh_adapter_init),
        cmocka_unit_test(distilbert_eager),
        cmocka_unit_test(distilbert_fused),
        cmocka_unit_test(bert_eager),
        cmocka_unit_test(bert_fused),
        cmocka_unit_test(distilbert_rslora_eager),
        cmocka_unit_test(distilbert_rslora_fused),
        cmocka_unit_test(bert_rslora_eager),
        cmocka_unit_test(bert_rslora_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
