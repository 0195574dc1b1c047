/* Packing changes no number: three samples packed in one row (sample ids in the mask) give the
 * loss and every parameter gradient of the same samples as a right-padded batch of three rows,
 * and one sample's loss read from the packed row (labels on its tokens only) equals its loss
 * alone, in the eager and fused attention paths, on the tiny SmolLM-shaped golden model
 * (tied embeddings, GQA, RoPE: attention across samples or a token predicting the next
 * sample's first moves the loss by 1e-2 or more). RoPE scores depend on i - j only, so
 * restarting positions per sample (as transformers' position_ids do under packing) changes
 * nothing here beyond rounding; test_data_sft holds the position ids themselves.
 *
 * Tolerance: the packed and padded runs sum in other orders (other GEMM shapes, other
 * attention tiles), so the loss is held to 2e-5 relative and each gradient to 1e-4 normwise
 * relative (+ 1e-6 absolute for near-zero tensors), the bounds of the golden tests. */
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

static lp_model *load(lp_exec_mode exec)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.exec = exec;
    o.training = true;
    o.quiet = true;
    o.task = LP_MODEL_TASK_CAUSAL_LM;
    lp_model *m = NULL;
    if (lp_model_load("tests/golden/smollm_lm", &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

/* Loss forward + backward from zero gradients; returns the loss, grads copied into *g. */
static float loss_and_grads(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *labels,
                            int32_t B, int32_t T, float **g, size_t *ng)
{
    float loss = NAN;
    lp_model_zero_grad(m);
    if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, NULL, &loss) != LP_OK ||
        lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    size_t n = 0;
    const lp_model_param *p = lp_model_params(m, &n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += p[i].grad ? (size_t)p[i].numel : 0;
    *g = malloc(total * sizeof **g);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].grad) {
            memcpy(*g + at, p[i].grad, (size_t)p[i].numel * sizeof **g);
            at += (size_t)p[i].numel;
        }
    *ng = total;
    return loss;
}

static void test_packed_equals_padded(void **state)
{
    (void)state;
    enum { NS = 3, TMAX = 7, TP = 16 };
    static const int32_t len[NS] = {5, 7, 4};
    int32_t ids[NS][TMAX], pid[TP], pmask[TP], plab[TP], uid[NS * TMAX], umask[NS * TMAX], ulab[NS * TMAX];
    uint32_t seed = 7;
    int t = 0;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < len[s]; i++, t++) {
            seed = seed * 1664525u + 1013904223u;
            ids[s][i] = 3 + (int32_t)((seed >> 8) % 120u);
            pid[t] = plab[t] = ids[s][i];
            pmask[t] = s + 1;
        }
    assert_int_equal(t, TP);
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < TMAX; i++) {
            const bool real = i < len[s];
            uid[s * TMAX + i] = real ? ids[s][i] : 0;
            umask[s * TMAX + i] = real;
            ulab[s * TMAX + i] = real ? ids[s][i] : -100;
        }
    for (int exec = 0; exec < 2; exec++) {
        lp_model *m = load(exec ? LP_EXEC_MODE_FUSED : LP_EXEC_MODE_EAGER);
        float *gp = NULL, *gu = NULL;
        size_t np = 0, nu = 0;
        const float lp = loss_and_grads(m, pid, pmask, plab, 1, TP, &gp, &np);
        const float lu = loss_and_grads(m, uid, umask, ulab, NS, TMAX, &gu, &nu);
        if (!(fabsf(lp - lu) <= 2e-5f * fabsf(lu)))
            fail_msg("exec %d: packed loss %.8g, padded %.8g", exec, (double)lp, (double)lu);
        assert_int_equal(np, nu);
        size_t n = 0;
        const lp_model_param *p = lp_model_params(m, &n);
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            if (!p[i].grad)
                continue;
            double d2 = 0, r2 = 0;
            for (int64_t k = 0; k < p[i].numel; k++) {
                double d = (double)gp[at + k] - gu[at + k];
                d2 += d * d, r2 += (double)gu[at + k] * gu[at + k];
            }
            if (!(sqrt(d2) <= 1e-4 * sqrt(r2) + 1e-6))
                fail_msg("exec %d: gradient of %s: |packed - padded| %.3g, |padded| %.3g", exec, p[i].name,
                         sqrt(d2), sqrt(r2));
            at += (size_t)p[i].numel;
        }
        /* sample 2's own loss, read from the packed row, against sample 2 alone */
        int32_t only[TP];
        for (int i = 0; i < TP; i++)
            only[i] = pmask[i] == 2 ? plab[i] : -100;
        float *g1 = NULL, *g2 = NULL;
        size_t n1, n2;
        const float l_in = loss_and_grads(m, pid, pmask, only, 1, TP, &g1, &n1);
        const float l_alone = loss_and_grads(m, ids[1], NULL, ids[1], 1, len[1], &g2, &n2);
        if (!(fabsf(l_in - l_alone) <= 2e-5f * fabsf(l_alone)))
            fail_msg("exec %d: sample 2 in the packed row %.8g, alone %.8g", exec, (double)l_in,
                     (double)l_alone);
        /* and the model refuses a sample id that goes back (samples must be runs) */
        int32_t bad[TP];
        memcpy(bad, pmask, sizeof bad);
        bad[TP - 1] = 1;
        float l;
        assert_int_equal(lp_model_loss_forward(m, pid, bad, NULL, plab, 1, TP, NULL, &l),
                         LP_STATUS_INVALID_ARG);
        assert_non_null(strstr(lp_err_msg(), "sample 1 after sample 3"));
        free(gp), free(gu), free(g1), free(g2);
        lp_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_packed_equals_padded)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
