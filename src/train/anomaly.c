/* --detect-anomaly: after each forward the pass's tensors are scanned in the order they were
 * computed (the embeddings' output, each encoder layer's output, the logits), after each
 * backward the parameter gradients in the order backward fills them (head first, embeddings
 * last), and the first tensor holding a NaN or Inf is named with its count: where a diverging
 * run first goes wrong, instead of "loss is NaN" at the end. Costs one read of every
 * activation and gradient per micro-batch; off by default. */
#include <math.h>
#include <stdio.h>

#include "train_internal.h"

static int64_t count_bad(const float *x, int64_t n, int64_t *first)
{
    int64_t c = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]) && c++ == 0)
            *first = i;
    return c;
}

lp_status lp_anomaly_forward(const lp_model *m, const float *logits, int32_t B, int32_t T, int64_t step)
{
    lp_model_info mi;
    lp_model_info_get(m, &mi);
    const int64_t n = (int64_t)B * T * mi.hidden_size;
    int64_t at;
    for (int32_t i = 0; i <= (int32_t)mi.num_layers; i++) {
        const float *h = lp_model_hidden(m, i);
        int64_t c = h ? count_bad(h, n, &at) : 0;
        if (c) {
            char what[64];
            if (i == 0)
                snprintf(what, sizeof what, "the embeddings' output");
            else
                snprintf(what, sizeof what, "the output of encoder layer %d", i - 1);
            return lp_err(
                LP_STATUS_NUMERIC,
                "step %lld: --detect-anomaly: forward: %s (%d x %d x %lld) holds %lld NaN/Inf values, "
                "the first at flat index %lld; %s",
                (long long)step, what, B, T, (long long)mi.hidden_size, (long long)c, (long long)at,
                i ? "the layer's input was finite" : "the token ids are the input");
        }
    }
    int64_t c = logits ? count_bad(logits, (int64_t)B * mi.num_labels, &at) : 0;
    if (c)
        return lp_err(
            LP_STATUS_NUMERIC,
            "step %lld: --detect-anomaly: forward: the classification head's logits (%d x %lld) hold %lld "
            "NaN/Inf values; the last layer's output was finite",
            (long long)step, B, (long long)mi.num_labels, (long long)c);
    return LP_OK;
}

lp_status lp_anomaly_backward(const lp_model *m, int64_t step)
{
    size_t n;
    const lp_model_param *p = lp_model_params(m, &n);
    for (size_t k = n; k-- > 0;) { /* backward order: the head first */
        if (!p[k].grad)
            continue;
        int64_t at, c = count_bad(p[k].grad, p[k].numel, &at);
        if (c)
            return lp_err(
                LP_STATUS_NUMERIC,
                "step %lld: --detect-anomaly: backward: the gradient of '%s' holds %lld NaN/Inf values "
                "(the first at flat index %lld); the gradients computed before it were finite",
                (long long)step, p[k].name, (long long)c, (long long)at);
    }
    return LP_OK;
}
