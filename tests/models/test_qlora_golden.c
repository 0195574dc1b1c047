/* QLoRA against PEFT + bitsandbytes (tests/golden/qlora_distilbert): the tiny DistilBERT's
 * f32 weights quantized by loupe (NF4, blocksize 64, double quantization) must equal what
 * bitsandbytes stored (quantized_model/: packed codes, 8-bit absmax codes, nested absmax,
 * offset) bit for bit, and dequantize to the weights its Linear4bit used (dequant.*); then,
 * with the PEFT-written adapter, logits, loss and every trainable gradient against the
 * golden (EAGER: whole-weight dequantize + GEMM; FUSED: the fused dequant-GEMM and fused LoRA
 * kernels), three AdamW steps, the quantized weights' memory category, int8 bases, and the
 * merged model (--merge) reproducing the QLoRA logits.
 *
 * bitsandbytes 0.50's CPU dequantizer reads scales per row when in_features % 64 != 0 (32
 * here), so the golden's numbers come from those weights; lp_lora_options.bnb_cpu_dequant
 * reproduces them (and the flat layout is checked by the kernels' own golden test).
 * Tolerances as test_lora_golden.c: golden.json's f32_vs_f64 gives torch's own noise (<= 1.5e-6
 * relative on gradients); 1e-4 relative per tensor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "loupe/base.h"
#include "loupe/models.h"

#define DIR "tests/golden/qlora_distilbert"
#define REL_TOL 1e-4
#define TINY 1e-3
#define UPDATE_TOL 5e-4

static lp_model *load(lp_exec_mode exec, lp_dtype base, const char *adapter)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.exec = exec;
    o.training = true;
    o.quiet = true;
    o.lora.enabled = true;
    o.lora.base_dtype = base;
    o.lora.adapter_dir = adapter;
    o.lora.bnb_cpu_dequant = true;
    o.lora.targets = "q_lin,v_lin";
    lp_model *m = NULL;
    if (lp_model_load(DIR, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

/* A plain f32 classifier (no adapter, nothing quantized) from dir. */
static lp_model *load_plain(const char *dir)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.quiet = true;
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static void check(const char *label, const float *a, const float *b, int64_t n, double tol, double *worst)
{
    gold_check(label, a, b, n, TINY, tol, worst);
}

/* Codes, absmax codes, nested absmax and the dequantized weights against bitsandbytes. */
static void nf4_bits(void **state)
{
    (void)state;
    lp_model *m = load(LP_EXEC_MODE_FUSED, LP_DTYPE_NF4, DIR "/peft_adapter");
    lp_st_file *qf = gold_open(DIR "/quantized_model/model.safetensors");
    lp_st_file *g = gold_open(DIR "/golden.safetensors");
    int n = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < lp_st_count(g); i++) {
        const char *k = lp_st_at(g, i)->name;
        if (strncmp(k, "dequant.", 8) != 0)
            continue;
        const char *w = k + 8; // "<module>.weight"
        const lp_qweight *q = lp_model_qweight(m, w);
        if (!q)
            fail_msg("%s is not quantized in loupe", w);
        assert_int_equal(q->dtype, LP_DTYPE_NF4);
        assert_true(q->double_quant);
        const lp_st_tensor *codes = lp_st_find(qf, w);
        char key[300];
        snprintf(key, sizeof key, "%s.absmax", w);
        const lp_st_tensor *aq = lp_st_find(qf, key);
        snprintf(key, sizeof key, "%s.nested_absmax", w);
        const lp_st_tensor *na = lp_st_find(qf, key);
        assert_non_null(codes);
        assert_non_null(aq);
        assert_non_null(na);
        assert_int_equal(codes->nbytes, (uint64_t)(q->n + 1) / 2);
        assert_memory_equal(q->codes, codes->data, codes->nbytes);
        assert_int_equal(aq->nbytes, (uint64_t)q->n_blocks);
        assert_memory_equal(q->absmax_q, aq->data, aq->nbytes);
        assert_int_equal(na->numel, (uint64_t)q->n_nested);
        assert_memory_equal(q->nested_absmax, na->data, na->nbytes);
        float *dq = malloc((size_t)q->n * sizeof *dq);
        lp_qweight_dequantize(dq, q, 0, q->n);
        assert_memory_equal(dq, lp_st_at(g, i)->data, (size_t)q->n * sizeof *dq); // bit for bit
        free(dq);
        bytes += lp_qweight_nbytes(q);
        n++;
    }
    assert_int_equal(n, 12); // every encoder Linear of the 2 layers
    lp_lora_info li;
    lp_model_lora_info(m, &li);
    assert_int_equal(li.quantized_params, 12 * 32 * 32 + 4 * 32 * 32); // 8 of 32x32, 4 of 64x32
    assert_int_equal(li.quantized_bytes, bytes);
    lp_alloc_stats as;
    lp_alloc_stats_get(&as);
    printf("NF4: 12 weights bit-identical to bitsandbytes; %llu params in %zu bytes (QUANTIZED_WEIGHT live "
           "%llu)\n",
           (unsigned long long)li.quantized_params, bytes,
           (unsigned long long)as.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT]);
    assert_true(as.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT] >= bytes);
    // the quantized weights are not f32 parameters
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    for (size_t i = 0; i < np; i++)
        assert_null(lp_model_qweight(m, p[i].name));
    lp_st_close(g);
    lp_st_close(qf);
    lp_model_free(m);
}

static void run(lp_exec_mode exec)
{
    lp_st_file *g = gold_open(DIR "/golden.safetensors");
    gold_batch b;
    gold_batch_read(g, &b);
    const int32_t *ids = b.ids, *mask = b.mask, *labels = b.labels, B = b.B, T = b.T;
    int64_t n = 0;
    lp_model *m = load(exec, LP_DTYPE_NF4, DIR "/peft_adapter");
    float logits[64], loss;
    double w_out = 0, w_grad = 0, w_upd = 0;
    printf("qlora_distilbert, %s:\n", lp_exec_mode_name(exec));
    lp_model_zero_grad(m);
    if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, logits, &loss) != LP_OK ||
        lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    check("logits", logits, gold_f32(g, "logits", NULL), B * 2, REL_TOL, &w_out);
    check("loss", &loss, gold_f32(g, "loss", NULL), 1, REL_TOL, &w_out);
    size_t np, n_train = 0, n_gold = 0;
    const lp_model_param *p = lp_model_params(m, &np);
    for (size_t i = 0; i < lp_st_count(g); i++)
        n_gold += !strncmp(lp_st_at(g, i)->name, "grad.", 5);
    float **ms = calloc(np, sizeof *ms), **vs = calloc(np, sizeof *vs), **init = calloc(np, sizeof *init);
    for (size_t i = 0; i < np; i++) {
        if (!p[i].trainable) {
            assert_null(p[i].grad);
            continue;
        }
        n_train++;
        char k[256];
        snprintf(k, sizeof k, "grad.base_model.model.%s", p[i].name);
        const float *ref = gold_f32(g, k, &n);
        if (!ref)
            fail_msg("no golden gradient %s", k);
        assert_int_equal(n, p[i].numel);
        check(k + 5, p[i].grad, ref, n, REL_TOL, &w_grad);
        ms[i] = calloc((size_t)n, sizeof(float));
        vs[i] = calloc((size_t)n, sizeof(float));
        init[i] = malloc((size_t)n * sizeof(float));
        memcpy(init[i], p[i].data, (size_t)n * sizeof(float));
    }
    assert_int_equal(n_train, n_gold);
    const float *losses = gold_f32(g, "losses", NULL);
    for (int s = 1; s <= 3; s++) {
        if (s > 1) {
            lp_model_zero_grad(m);
            if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, NULL, &loss) != LP_OK ||
                lp_model_backward(m) != LP_OK)
                fail_msg("%s", lp_err_msg());
        }
        printf("  loss before step %d: %.7f (PEFT+bnb %.7f)\n", s, loss, losses[s - 1]);
        assert_true(fabs((double)loss - losses[s - 1]) <= REL_TOL * fabs((double)losses[s - 1]));
        for (size_t i = 0; i < np; i++)
            if (p[i].trainable)
                lp_adamw_step(p[i].data, p[i].grad, ms[i], vs[i], p[i].numel, 1e-3, 0.9, 0.999, 1e-8, 0.01,
                              s);
    }
    for (size_t i = 0; i < np; i++) {
        if (!p[i].trainable)
            continue;
        char k[256];
        snprintf(k, sizeof k, "step3.base_model.model.%s", p[i].name);
        const float *ref = gold_f32(g, k, &n);
        assert_non_null(ref);
        float *u = malloc((size_t)n * sizeof *u), *ru = malloc((size_t)n * sizeof *ru);
        for (int64_t j = 0; j < n; j++) {
            u[j] = p[i].data[j] - init[i][j];
            ru[j] = ref[j] - init[i][j];
        }
        check(k, u, ru, n, UPDATE_TOL, &w_upd);
        free(u);
        free(ru);
        free(ms[i]);
        free(vs[i]);
        free(init[i]);
    }
    printf("SUMMARY qlora_distilbert %-5s logits/loss rel %.2e | grad rel %.2e | AdamW x3 update rel %.2e\n",
           lp_exec_mode_name(exec), w_out, w_grad, w_upd);
    free(ms);
    free(vs);
    free(init);
    gold_batch_free(&b);
    lp_model_free(m);
    lp_st_close(g);
}

static void qlora_eager(void **state)
{
    (void)state;
    run(LP_EXEC_MODE_EAGER);
}

static void qlora_fused(void **state)
{
    (void)state;
    run(LP_EXEC_MODE_FUSED);
}

/* A fresh QLoRA adapter (B = 0) is a no-op on the quantized model, and int8 bases work: logits
 * of the int8 model within int8's error of the f32 model's; eager equals fused. */
static void fresh_and_int8(void **state)
{
    (void)state;
    lp_st_file *g = gold_open(DIR "/golden.safetensors");
    gold_batch b;
    gold_batch_read(g, &b);
    const int32_t *ids = b.ids, *mask = b.mask, B = b.B, T = b.T;
    float le[64], lf[64], l32[64];
    lp_model *me = load(LP_EXEC_MODE_EAGER, LP_DTYPE_INT8, NULL),
             *mf = load(LP_EXEC_MODE_FUSED, LP_DTYPE_INT8, NULL);
    assert_int_equal(lp_model_forward(me, ids, mask, NULL, B, T, le), LP_OK);
    assert_int_equal(lp_model_forward(mf, ids, mask, NULL, B, T, lf), LP_OK);
    double w = 0;
    check("int8 eager vs fused logits", le, lf, B * 2, 1e-5, &w);
    lp_lora_info li;
    lp_model_lora_info(mf, &li);
    assert_int_equal(li.base_dtype, LP_DTYPE_INT8);
    assert_true(li.quantized_bytes < li.quantized_params * 2); // ~1 byte per weight + row scales
    lp_model *m32 = load_plain(DIR);
    assert_int_equal(lp_model_forward(m32, ids, mask, NULL, B, T, l32), LP_OK);
    gold_cmp c = gold_compare(lf, l32, B * 2, TINY);
    printf("  int8 base vs f32 model logits: rel %.3e (fresh adapter: B = 0)\n", c.rel);
    assert_true(c.rel < 0.05 && c.rel > 0); // quantization error, not a different model
    lp_model_free(m32);
    lp_model_free(me);
    lp_model_free(mf);
    gold_batch_free(&b);
    lp_st_close(g);
}

/* --merge of a QLoRA model: the saved model holds dequantize(W) + s * B @ A in f32 (what the
 * adapter model computes; PEFT's own 4-bit merge would requantize it) and reloads as a plain
 * f32 model with the adapter model's logits. f32 rounds W + s*B@A once where the adapter model
 * sums two products: ~1e-7 relative, so 1e-5; the adapter itself moves the logits by far more
 * (checked, so a merge that dropped it would fail). */
static void qlora_merge(void **state)
{
    (void)state;
    lp_st_file *g = gold_open(DIR "/golden.safetensors");
    gold_batch b;
    gold_batch_read(g, &b);
    const int32_t *ids = b.ids, *mask = b.mask, B = b.B, T = b.T;
    float la[64], lm[64], l0[64];
    lp_model *ma = load(LP_EXEC_MODE_FUSED, LP_DTYPE_NF4, DIR "/peft_adapter"),
             *m0 = load(LP_EXEC_MODE_FUSED, LP_DTYPE_NF4, NULL);
    assert_int_equal(lp_model_forward(ma, ids, mask, NULL, B, T, la), LP_OK);
    assert_int_equal(lp_model_forward(m0, ids, mask, NULL, B, T, l0), LP_OK);
    char dir[] = "/tmp/lp_qlora_merge_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[sizeof dir + 16];
    snprintf(out, sizeof out, "%s/merged", dir);
    if (lp_model_save_hf(ma, out) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model *mm = load_plain(out);
    lp_lora_info li;
    lp_model_lora_info(mm, &li);
    assert_false(li.enabled); // a plain model: no adapter, nothing quantized
    assert_int_equal(lp_model_forward(mm, ids, mask, NULL, B, T, lm), LP_OK);
    double w = 0;
    check("merged f32 model vs QLoRA model logits", lm, la, B * 2, 1e-5, &w);
    gold_cmp c = gold_compare(l0, la, B * 2, TINY);
    printf("  the adapter moves the logits by rel %.3e\n", c.rel);
    assert_true(c.rel > 1e-3);
    lp_model_free(mm);
    lp_model_free(ma);
    lp_model_free(m0);
    char cmd[sizeof dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    gold_batch_free(&b);
    lp_st_close(g);
}

int main(void)
{
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nf4_bits),
        cmocka_unit_test(qlora_eager),
        cmocka_unit_test(qlora_fused),
        cmocka_unit_test(fresh_and_int8),
        cmocka_unit_test(qlora_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
