/* Dropout keyed by the global batch row (lp_model_set_batch_slice), in one process: a batch
 * of 4 rows run as two slices of 2 (what 2 data-parallel ranks do, each from the same dropout
 * stream) gives the global batch's logits row for row, and the two slices' gradients (each
 * weighed 1/2) sum to the global batch's, with dropout 0.1 on the embeddings, attention
 * probabilities, hidden states and classifier (models/default), for eager and fused
 * attention, gradient checkpointing (the recompute replays the slice's masks) and LoRA
 * (dropout 0.1 on the adapters' input). Each slice leaves the stream where the global batch
 * does. Tolerances: logits 1e-5 absolute (a slice's GEMMs block the rows differently: f32
 * rounding, ~1e-7 relative, on logits of size ~0.1); gradients 1e-5 relative to the largest
 * (two partial sums instead of one). A different mask moves logits by ~1e-2: the control
 * below (the slice without its global position) must differ by more than 1e-3. */
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

enum { B = 4, T = 9, HALF = 2 };

typedef struct batch {
    int32_t ids[B * T], mask[B * T], types[B * T], labels[B];
} batch;

static void make_batch(batch *b)
{
    uint32_t s = 12345;
    for (int i = 0; i < B * T; i++) {
        s = s * 1664525u + 1013904223u;
        b->ids[i] = 1 + (int32_t)((s >> 8) % 400);
        b->mask[i] = 1;
        b->types[i] = 0;
    }
    for (int t = T - 3; t < T; t++) /* padded rows, as lp_batch_fill pads to the global batch's longest */
        b->mask[1 * T + t] = b->mask[2 * T + t] = 0;
    for (int r = 0; r < B; r++)
        b->labels[r] = r % 2;
}

static lp_model *load(lp_exec_mode exec, bool ckpt, bool lora)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.exec = exec;
    o.grad_checkpointing = ckpt;
    o.training = true;
    o.quiet = true;
    o.seed = 7;
    if (lora) {
        o.lora.enabled = true;
        o.lora.rank = 4;
        o.lora.dropout = 0.1f;
        o.lora.targets = "all";
    }
    lp_model *m = NULL;
    if (lp_model_load("models/default", &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

/* One loss forward + backward over rows [lo, lo + n) as a slice of the global batch (global
 * 0: a batch of its own), from the dropout stream at *start; logits (n x 2) out, the stream's
 * end state in *end. Gradients accumulate with weight w. */
static void pass(lp_model *m, const batch *b, int lo, int n, int global, const lp_rng *start, float w, float *logits,
                 lp_rng *end)
{
    lp_model_rng_set(m, start);
    lp_model_set_batch_slice(m, lo, global);
    float loss;
    if (lp_model_loss_forward(m, b->ids + lo * T, b->mask + lo * T, b->types + lo * T, b->labels + lo, n, T, logits,
                              &loss) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_model_rng_get(m, end);
    lp_model_set_dloss_scale(m, w);
    if (lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
}

static void slices_equal_global(lp_exec_mode exec, bool ckpt, bool lora)
{
    lp_model *m = load(exec, ckpt, lora);
    batch b;
    make_batch(&b);
    lp_rng start;
    lp_model_rng_get(m, &start);
    start.offset = 1000; /* mid-run: not at the stream's start */
    int64_t ng;
    float *gb = lp_model_grad_block(m, &ng);
    assert_non_null(gb);
    float *g_global = malloc((size_t)ng * sizeof *g_global);
    assert_non_null(g_global);
    float lg[B * 2], ls[B * 2], lc[HALF * 2];
    lp_rng end_g, end_s;

    lp_model_zero_grad(m);
    pass(m, &b, 0, B, 0, &start, 1.0f, lg, &end_g);
    memcpy(g_global, gb, (size_t)ng * sizeof *g_global);

    lp_model_zero_grad(m);
    for (int lo = 0; lo < B; lo += HALF) {
        pass(m, &b, lo, HALF, B, &start, (float)HALF / B, ls + lo * 2, &end_s);
        assert_true(end_s.offset == end_g.offset && end_s.lane == end_g.lane);
    }
    double dl = 0, gmax = 0, dg = 0;
    for (int i = 0; i < B * 2; i++)
        dl = fmax(dl, fabs(ls[i] - lg[i]));
    for (int64_t i = 0; i < ng; i++) {
        gmax = fmax(gmax, fabs(g_global[i]));
        dg = fmax(dg, fabs(gb[i] - g_global[i]));
    }
    /* control: the second slice drawn as a batch of its own gets other masks */
    lp_model_zero_grad(m);
    pass(m, &b, HALF, HALF, 0, &start, 1.0f, lc, &end_s);
    double dc = 0;
    for (int i = 0; i < HALF * 2; i++)
        dc = fmax(dc, fabs(lc[i] - lg[HALF * 2 + i]));
    printf("  %s%s%s: slices vs global batch: logits max|d| %.2e, gradients max|d| %.2e of max %.2e; "
           "without the slice position %.2e\n",
           exec == LP_EXEC_MODE_FUSED ? "fused" : "eager", ckpt ? " + grad checkpointing" : "", lora ? " + LoRA" : "",
           dl, dg, gmax, dc);
    assert_true(dl <= 1e-5);
    assert_true(gmax > 0 && dg <= 1e-5 * gmax);
    assert_true(dc > 1e-3);
    lp_model_set_batch_slice(m, 0, 0);
    free(g_global);
    lp_model_free(m);
}

static void eager(void **s) { (void)s, slices_equal_global(LP_EXEC_MODE_EAGER, false, false); }
static void fused(void **s) { (void)s, slices_equal_global(LP_EXEC_MODE_FUSED, false, false); }
static void eager_ckpt(void **s) { (void)s, slices_equal_global(LP_EXEC_MODE_EAGER, true, false); }
static void fused_lora(void **s) { (void)s, slices_equal_global(LP_EXEC_MODE_FUSED, false, true); }
static void eager_lora_ckpt(void **s) { (void)s, slices_equal_global(LP_EXEC_MODE_EAGER, true, true); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eager), cmocka_unit_test(fused), cmocka_unit_test(eager_ckpt),
        cmocka_unit_test(fused_lora), cmocka_unit_test(eager_lora_ckpt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
