/* Golden test of --dtype bf16 (lp_model_options.compute = LP_DTYPE_BF16) against PyTorch's
 * CPU autocast (tools/golden/gen_bf16_distilbert.py, on tests/golden/cls_distilbert's tiny
 * DistilBERT and batch): the first loss and every gradient, then three AdamW steps' losses.
 *
 * What holds and why. The two runs round at different places: autocast also runs the
 * attention matmuls in bf16 and returns every Linear's output (and so the backward's dY)
 * in bf16, loupe keeps attention f32 and Linear outputs f32 (f32 accumulation throughout).
 * So loupe is not bit-close to autocast; both sit within the bf16 spread of the f32 run.
 * golden.json's bf16_vs_f32 records that spread for torch (autocast vs f32, normwise per
 * tensor: max|a-b| / max|b|): losses <= 4e-3, logits <= 1.3e-2, gradients <= 1.6e-2. The
 * bounds below are ~3x those: LOSS_TOL 1e-2 on each loss, GRAD_TOL 5e-2 per gradient. An
 * f32 run would pass them too, so the test also requires that bf16 actually ran: the bf16
 * gradients differ from loupe's own f32 run by more than BF16_MIN (1e-4; f32 reordering
 * noise is ~1e-6, bf16 rounding ~2^-9 = 2e-3 per operand) on the layer Linear weights.
 * The analytically-zero key biases (noise in both runs) are compared in absolute, 1e-3. */
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
#include "loupe/kernels.h"
#include "loupe/models.h"

#define LOSS_TOL 1e-2
#define GRAD_TOL 5e-2
#define BF16_MIN 1e-4
#define TINY 1e-2

static const char *DIR_ = "tests/golden/cls_distilbert";

static lp_model *load(lp_dtype compute)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.exec = LP_EXEC_MODE_FUSED;
    o.training = true; /* every dropout probability is 0 in the config */
    o.quiet = true;
    o.compute = compute;
    lp_model *m = NULL;
    if (lp_model_load(DIR_, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static bool key_bias(const char *n)
{
    size_t k = strlen(n);
    return k >= 10 && !strcmp(n + k - 10, "k_lin.bias");
}

static bool layer_weight(const char *n)
{
    size_t k = strlen(n);
    return strstr(n, ".transformer.layer.") && k >= 7 && !strcmp(n + k - 7, ".weight") && strstr(n, "lin");
}

/* The golden's gradient of p, <prefix><p's name>, of p's element count. */
static const float *grad_ref(const lp_st_file *g, const char *prefix, const lp_model_param *p)
{
    char k[256];
    snprintf(k, sizeof k, "%s%s", prefix, p->name);
    int64_t n = 0;
    const float *ref = gold_f32(g, k, &n);
    if (!ref)
        fail_msg("golden has no %s", k);
    assert_int_equal(n, p->numel);
    return ref;
}

/* *least = the smaller of itself and a's normwise distance from b: how far the bf16 run got
 * from the f32 one, at its closest */
static void note_least(double *least, const float *a, const float *b, int64_t n)
{
    gold_cmp c = gold_compare(a, b, n, TINY);
    *least = c.rel < *least ? c.rel : *least;
}

static void test_grads(void **state)
{
    (void)state;
    lp_st_file *g = gold_open("tests/golden/bf16_distilbert/golden.safetensors");
    gold_batch b;
    gold_batch_read(g, &b);
    lp_model *m = load(LP_DTYPE_BF16), *m32 = load(LP_DTYPE_F32);
    assert_int_equal(lp_model_compute_dtype(m), LP_DTYPE_BF16);
    float loss = 0, loss32 = 0;
    lp_model_zero_grad(m);
    lp_model_zero_grad(m32);
    if (lp_model_loss_forward(m, b.ids, b.mask, NULL, b.labels, b.B, b.T, NULL, &loss) != LP_OK ||
        lp_model_backward(m) != LP_OK ||
        lp_model_loss_forward(m32, b.ids, b.mask, NULL, b.labels, b.B, b.T, NULL, &loss32) != LP_OK ||
        lp_model_backward(m32) != LP_OK)
        fail_msg("%s", lp_err_msg());
    const float *ref_losses = gold_f32(g, "losses", NULL);
    assert_non_null(ref_losses);
    printf("bf16 (%s), first loss %.6f, autocast %.6f, loupe f32 %.6f\n", lp_bf16_gemm_path(), loss,
           ref_losses[0], loss32);
    assert_true(fabs(loss - ref_losses[0]) <= LOSS_TOL * fabs(ref_losses[0]));
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np), *p32 = lp_model_params(m32, NULL);
    double worst = 0, off32 = 1e30;
    int n_layer = 0;
    for (size_t i = 0; i < np; i++) {
        const float *ref = grad_ref(g, "grad.", &p[i]);
        const int64_t n = p[i].numel;
        if (key_bias(p[i].name)) { /* zero in exact arithmetic: noise either side */
            gold_cmp c = gold_compare(p[i].grad, ref, n, TINY);
            printf("  %-60s max|d| %.3e (analytically zero: abs <= 1e-3)\n", p[i].name, c.max_abs);
            assert_true(c.max_abs <= 1e-3);
            continue;
        }
        gold_check(p[i].name, p[i].grad, ref, n, TINY, GRAD_TOL, &worst);
        if (layer_weight(p[i].name)) {
            note_least(&off32, p[i].grad, p32[i].grad, n);
            n_layer++;
        }
    }
    printf(
        "SUMMARY bf16 vs autocast: grad rel %.2e (<= %.0e); bf16 vs loupe f32 on %d layer weights: min rel "
        "%.2e (>= %.0e)\n",
        worst, GRAD_TOL, n_layer, off32, BF16_MIN);
    assert_true(n_layer >= 12);
    assert_true(off32 >= BF16_MIN);
    lp_model_free(m);
    lp_model_free(m32);
    gold_batch_free(&b);
    lp_st_close(g);
}

/* Three AdamW steps (the golden's hyper-parameters, every parameter in one group): the loss
 * before each and after the last against autocast's. The bf16 copies must follow the f32
 * master weights: lp_model_weights_changed after each step. */
static void test_adamw(void **state)
{
    (void)state;
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    lp_st_file *g = gold_open("tests/golden/bf16_distilbert/golden.safetensors");
    gold_batch b;
    gold_batch_read(g, &b);
    lp_model *m = load(LP_DTYPE_BF16);
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    float **ms = calloc(np, sizeof *ms), **vs = calloc(np, sizeof *vs);
    for (size_t i = 0; i < np; i++) {
        ms[i] = calloc((size_t)p[i].numel, sizeof(float));
        vs[i] = calloc((size_t)p[i].numel, sizeof(float));
    }
    const float *ref = gold_f32(g, "losses", NULL), *ref3 = gold_f32(g, "loss_after_step3", NULL),
                *f32 = gold_f32(g, "f32.losses", NULL), *f32_3 = gold_f32(g, "f32.loss_after_step3", NULL);
    assert_non_null(ref);
    assert_non_null(ref3);
    float loss = 0;
    for (int s = 1; s <= 4; s++) {
        lp_model_zero_grad(m);
        if (lp_model_loss_forward(m, b.ids, b.mask, NULL, b.labels, b.B, b.T, NULL, &loss) != LP_OK)
            fail_msg("%s", lp_err_msg());
        const double want = s <= 3 ? ref[s - 1] : ref3[0];
        printf("  loss before step %d: %.6f (autocast %.6f, torch f32 %.6f)\n", s, loss, want,
               s <= 3 ? f32[s - 1] : f32_3[0]);
        assert_true(fabs(loss - want) <= LOSS_TOL * fabs(want));
        if (s == 4)
            break;
        if (lp_model_backward(m) != LP_OK)
            fail_msg("%s", lp_err_msg());
        for (size_t i = 0; i < np; i++)
            lp_adamw_step(p[i].data, p[i].grad, ms[i], vs[i], p[i].numel, lr, b1, b2, eps, wd, s);
        lp_model_weights_changed(m);
    }
    /* the losses move by ~10x LOSS_TOL over the steps: a stale bf16 copy would fail above */
    assert_true(fabs(ref[0] - ref3[0]) > 5 * LOSS_TOL * fabs(ref[0]));
    for (size_t i = 0; i < np; i++) {
        free(ms[i]);
        free(vs[i]);
    }
    free(ms);
    free(vs);
    lp_model_free(m);
    gold_batch_free(&b);
    lp_st_close(g);
}

/* QLoRA under --dtype bf16 (bitsandbytes' compute dtype bf16, PyTorch's CPU autocast:
 * tools/golden/gen_qlora_bf16_llama_lm.py) on tests/golden/qlora_llama_lm's model, quantized
 * to NF4 at load on both sides, and its PEFT adapter: the right batch's logits at real tokens,
 * loss and every LoRA gradient. The same run in f32 on both sides agrees to 1e-4 (the f32
 * goldens' bound): the setup is the same, so what remains is bf16's. As above, autocast also rounds every
 * Linear's output, attention and the (unquantized) lm_head to bf16 where loupe keeps f32, so both sit within
 * the bf16 spread of the f32 run; golden.json records torch's (autocast vs f32, normwise per tensor):
 * loss 4.0e-4, logits 3.0e-2, LoRA gradients up to 4.6e-2; loupe measured 3.8e-4, 2.7e-2 and 4.3e-2 against
 * autocast (AVX2, converted path). The bounds: QLORA_LOSS_TOL 2e-3 (5x), QLORA_LOGIT_TOL 6e-2 (2x torch's
 * spread; mostly autocast's bf16 lm_head), QLORA_GRAD_TOL 8e-2 (1.7x torch's spread: the encoder's 5e-2 would
 * leave loupe's 4.3e-2 no room for another ISA's summation order). And bf16 must have run: loupe's bf16
 * gradients differ from its f32 QLoRA run's by more than BF16_MIN. */
#define QLORA_LOSS_TOL 2e-3
#define QLORA_LOGIT_TOL 6e-2
#define QLORA_GRAD_TOL 8e-2

static lp_model *load_qlora(lp_dtype compute)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.exec = LP_EXEC_MODE_FUSED;
    o.training = true;
    o.quiet = true;
    o.compute = compute;
    o.lora.enabled = true;
    o.lora.adapter_dir = "tests/golden/qlora_llama_lm/peft_adapter";
    o.lora.base_dtype = LP_DTYPE_NF4; /* plain NF4 of the f32 weights, as bitsandbytes 0.50 makes */
    lp_model *m = NULL;
    if (lp_model_load("tests/golden/qlora_llama_lm", &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static void test_qlora_bf16(void **state)
{
    (void)state;
    lp_st_file *g = gold_open("tests/golden/qlora_bf16_llama_lm/golden.safetensors");
    int64_t n = 0, nm = 0;
    int32_t *ids = gold_i32(g, "right.input_ids", &n), *mask = gold_i32(g, "right.attention_mask", &nm),
            *labels = gold_i32(g, "right.labels", NULL);
    assert_non_null(ids);
    assert_non_null(mask);
    assert_non_null(labels);
    const int32_t B = 3, T = (int32_t)(n / B);
    lp_model *m = load_qlora(LP_DTYPE_BF16), *m32 = load_qlora(LP_DTYPE_F32);
    lp_model_info info;
    lp_model_info_get(m, &info);
    const int64_t V = info.vocab_size;
    float *logits = malloc((size_t)(n * V) * sizeof *logits);
    float loss = 0, loss32 = 0;
    lp_model_zero_grad(m);
    lp_model_zero_grad(m32);
    if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, logits, &loss) != LP_OK ||
        lp_model_backward(m) != LP_OK ||
        lp_model_loss_forward(m32, ids, mask, NULL, labels, B, T, NULL, &loss32) != LP_OK ||
        lp_model_backward(m32) != LP_OK)
        fail_msg("%s", lp_err_msg());
    const float *ref_loss = gold_f32(g, "right.loss", NULL), *ref_logits = gold_f32(g, "right.logits", NULL);
    assert_non_null(ref_loss);
    assert_non_null(ref_logits);
    const float *ref_loss32 = gold_f32(g, "f32.right.loss", NULL);
    assert_non_null(ref_loss32);
    printf("qlora bf16 loss %.6f, autocast + bnb bf16 %.6f; f32: loupe %.6f, torch + bnb %.6f\n", loss,
           ref_loss[0], loss32, ref_loss32[0]);
    assert_true(fabs(loss32 - ref_loss32[0]) <= 1e-4 * fabs(ref_loss32[0]));
    assert_true(fabs(loss - ref_loss[0]) <= QLORA_LOSS_TOL * fabs(ref_loss[0]));
    /* logits at real tokens (padding positions predict nothing in loupe) */
    double worst = 0;
    int64_t real = 0;
    for (int64_t r = 0; r < n; r++)
        real += mask[r] != 0;
    float *a = malloc((size_t)(real * V) * sizeof *a), *b = malloc((size_t)(real * V) * sizeof *b);
    for (int64_t r = 0, k = 0; r < n; r++)
        if (mask[r]) {
            memcpy(a + k * V, logits + r * V, (size_t)V * sizeof *a);
            memcpy(b + k * V, ref_logits + r * V, (size_t)V * sizeof *b);
            k++;
        }
    gold_check("logits", a, b, real * V, TINY, QLORA_LOGIT_TOL, &worst);
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np), *p32 = lp_model_params(m32, NULL);
    double gworst = 0, off32 = 1e30;
    int n_grads = 0;
    for (size_t i = 0; i < np; i++) {
        if (!p[i].trainable)
            continue;
        const float *ref = grad_ref(g, "right.grad.base_model.model.", &p[i]);
        gold_check(p[i].name, p[i].grad, ref, p[i].numel, TINY, QLORA_GRAD_TOL, &gworst);
        note_least(&off32, p[i].grad, p32[i].grad, p[i].numel);
        n_grads++;
    }
    printf(
        "SUMMARY qlora bf16 vs autocast + bnb: loss rel %.2e (<= %.0e), logits rel %.2e (<= %.0e), grads rel "
        "%.2e (<= %.0e); vs loupe f32: min rel %.2e (>= %.0e)\n",
        fabs(loss - ref_loss[0]) / fabs(ref_loss[0]), QLORA_LOSS_TOL, worst, QLORA_LOGIT_TOL, gworst,
        QLORA_GRAD_TOL, off32, BF16_MIN);
    assert_int_equal(n_grads, 2 * 7 * info.num_layers); /* lora_A and lora_B on every layer Linear */
    assert_true(off32 >= BF16_MIN);
    free(a);
    free(b);
    free(logits);
    free(ids);
    free(mask);
    free(labels);
    lp_model_free(m);
    lp_model_free(m32);
    lp_st_close(g);
}

int main(void)
{
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grads),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_qlora_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
