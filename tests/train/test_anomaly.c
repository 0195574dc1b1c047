/* --detect-anomaly's scans on the bundled model (4 layers, built from its config): a NaN put
 * into one layer's weight is reported in that layer's output, not an earlier one and not as
 * the loss; one in the classifier only in the logits; in gradients, the first tensor in
 * backward order (nearest the loss) is named. Exact: the scans count exact NaN/Inf. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/train/train_internal.h"

enum { B = 2, T = 6 };
static const int32_t ids[B * T] = {2, 40, 41, 42, 3, 0, 2, 50, 51, 52, 53, 3};
static const int32_t mask[B * T] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
static const int32_t labels[B] = {0, 1};

static lp_model *load(void)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.training = true;
    o.quiet = true;
    lp_model *m = NULL;
    assert_int_equal(lp_model_load("models/default", &o, &m), LP_OK);
    lp_model_set_training(m, false); /* no dropout: the only NaN is the one put in */
    return m;
}

static float *weight(lp_model *m, const char *name)
{
    const lp_model_param *p = lp_model_param_find(m, name);
    if (!p)
        fail_msg("no parameter %s", name);
    return p->data;
}

static lp_status fwd(lp_model *m, float *logits)
{
    float loss;
    lp_status st = lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, logits, &loss);
    if (st != LP_OK && st != LP_STATUS_NUMERIC)
        fail_msg("forward: %s", lp_err_msg());
    return lp_anomaly_forward(m, logits, B, T, 7);
}

static void test_forward_names_the_layer(void **state)
{
    (void)state;
    lp_model *m = load();
    float logits[B * 2];
    assert_int_equal(fwd(m, logits), LP_OK);
    float *w = weight(m, "bert.encoder.layer.2.attention.self.query.weight");
    float keep = w[5];
    w[5] = NAN;
    assert_int_equal(fwd(m, logits), LP_STATUS_NUMERIC);
    assert_non_null(
        strstr(lp_err_msg(), "step 7: --detect-anomaly: forward: the output of encoder layer 2 "));
    w[5] = keep;
    float *c = weight(m, "classifier.weight");
    keep = c[0];
    c[0] = INFINITY;
    assert_int_equal(fwd(m, logits), LP_STATUS_NUMERIC);
    assert_non_null(strstr(lp_err_msg(), "forward: the classification head's logits"));
    c[0] = keep;
    assert_int_equal(fwd(m, logits), LP_OK);
    lp_model_free(m);
}

static void test_backward_names_the_gradient(void **state)
{
    (void)state;
    lp_model *m = load();
    float logits[B * 2];
    lp_model_zero_grad(m);
    assert_int_equal(fwd(m, logits), LP_OK);
    assert_int_equal(lp_model_backward(m), LP_OK);
    assert_int_equal(lp_anomaly_backward(m, 3), LP_OK);
    const lp_model_param *q = lp_model_param_find(m, "bert.encoder.layer.1.attention.self.query.weight");
    const lp_model_param *o = lp_model_param_find(m, "bert.encoder.layer.3.output.dense.weight");
    assert_non_null(q);
    assert_non_null(o);
    q->grad[3] = NAN;
    assert_int_equal(lp_anomaly_backward(m, 3), LP_STATUS_NUMERIC);
    assert_non_null(
        strstr(lp_err_msg(), "the gradient of 'bert.encoder.layer.1.attention.self.query.weight' holds 1 "));
    o->grad[0] = -INFINITY, o->grad[9] = NAN;
    assert_int_equal(lp_anomaly_backward(m, 3), LP_STATUS_NUMERIC);
    assert_non_null(
        strstr(lp_err_msg(), "the gradient of 'bert.encoder.layer.3.output.dense.weight' holds 2 "));
    lp_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_names_the_layer),
        cmocka_unit_test(test_backward_names_the_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
