/* Classification heads over an encoder's last hidden state: BERT's tanh pooler, DistilBERT's
 * pre_classifier + ReLU, or plain CLS / masked-mean pooling (bare encoders), then dropout and
 * the classifier. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

/* The pooler's activation, y (n) = tanh(x) (BERT) or relu(x) (DistilBERT), and its backward
 * g *= tanh' (from y) or relu' (from x). Host loops: no op table has them; on a device the
 * (B, C) operands make one round trip through host memory (downloaded, computed, uploaded). */
static void act_host(bool bert, float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = bert ? tanhf(x[i]) : fmaxf(x[i], 0.0f);
}

static void act_grad_host(bool bert, float *g, const float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        g[i] *= bert ? 1.0f - y[i] * y[i] : (x[i] > 0.0f);
}

/* On a device: *st (the pass's status) gets the first failure. */
static void act_device(bool bert, bool grad, float *g_or_y, const float *y, const float *x, int64_t n,
                       lp_status *st)
{
    const size_t bytes = (size_t)n * sizeof(float);
    float *h = malloc(3 * bytes);
    lp_status s = h ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "classification head: out of memory for %lld floats",
                                       (long long)(3 * n));
    if (s == LP_OK && grad)
        s = lp_kernels_download(h, g_or_y, bytes);
    if (s == LP_OK && grad && y)
        s = lp_kernels_download(h + n, y, bytes);
    if (s == LP_OK && x)
        s = lp_kernels_download(h + 2 * n, x, bytes);
    if (s == LP_OK) {
        if (grad)
            act_grad_host(bert, h, h + n, h + 2 * n, n);
        else
            act_host(bert, h, h + 2 * n, n);
        s = lp_kernels_upload(g_or_y, h, bytes);
        if (s == LP_OK)
            s = lp_kernels_sync(); /* h is freed next: the copy must be done with it */
    }
    free(h);
    if (s != LP_OK && st && *st == LP_OK)
        *st = s;
}

void lp_nn_cls_head_forward(const lp_nn_cls_head *h, const lp_nn_ctx *ctx, lp_nn_head_act *act, float *logits,
                            const float *hidden, const int32_t *mask, int64_t B, int64_t T)
{
    lp_nn__push(h->fwd_name);
    const int64_t C = h->C;
    if (h->kind == LP_NN_HEAD_KIND_MEAN)
        lp_mean_pool_forward(act->pooled, hidden, mask, B, T, C);
    else
        lp_kernels_copy_rows(act->pooled, (size_t)C * sizeof(float), hidden, (size_t)(T * C) * sizeof(float),
                             (size_t)C * sizeof(float), (size_t)B); // the first token ([CLS]) of each row
    if (h->kind == LP_NN_HEAD_KIND_BERT || h->kind == LP_NN_HEAD_KIND_DISTILBERT) {
        lp_nn_linear_forward(&h->pre, act->pre, act->pooled, B);
        const bool bert = h->kind == LP_NN_HEAD_KIND_BERT;
        if (lp_kernels_device() == LP_DEVICE_CPU)
            act_host(bert, act->act, act->pre, B * C);
        else
            act_device(bert, false, act->act, NULL, act->pre, B * C, ctx->status);
    } else {
        lp_kernels_copy(act->act, act->pooled, (size_t)(B * C) * sizeof(float));
    }
    act->dropped = lp_nn_dropout_forward(ctx, act->drop, act->keep, act->act, B * C, h->dropout);
    lp_nn_linear_forward(&h->classifier, logits, act->drop, B);
    lp_nn__pop(h->fwd_name);
}

void lp_nn_cls_head_backward(const lp_nn_cls_head *h, const lp_nn_head_act *act, float *dhidden,
                             const float *dlogits, const int32_t *mask, float *scratch, int64_t B, int64_t T)
{
    lp_nn__push(h->bwd_name);
    const int64_t C = h->C;
    float *s1 = scratch, *s2 = scratch + B * C;
    lp_nn_linear_backward(&h->classifier, s1, dlogits, act->drop, B);           // s1 = d drop
    lp_nn_dropout_backward(s2, s1, act->keep, B * C, h->dropout, act->dropped); // s2 = d act
    const float *dpooled = s2;
    if (h->kind == LP_NN_HEAD_KIND_BERT || h->kind == LP_NN_HEAD_KIND_DISTILBERT) {
        const bool bert = h->kind == LP_NN_HEAD_KIND_BERT; // s2 = d pre
        if (lp_kernels_device() == LP_DEVICE_CPU)
            act_grad_host(bert, s2, act->act, act->pre, B * C);
        else
            act_device(bert, true, s2, bert ? act->act : NULL, bert ? NULL : act->pre, B * C,
                       h->classifier.ctx ? h->classifier.ctx->status : NULL);
        lp_nn_linear_backward(&h->pre, s1, s2, act->pooled, B); // s1 = d pooled
        dpooled = s1;
    }
    if (h->kind == LP_NN_HEAD_KIND_MEAN) {
        lp_mean_pool_backward(dhidden, dpooled, mask, B, T, C);
    } else {
        lp_kernels_memset(dhidden, 0, (size_t)(B * T * C) * sizeof(float));
        lp_kernels_copy_rows(dhidden, (size_t)(T * C) * sizeof(float), dpooled, (size_t)C * sizeof(float),
                             (size_t)C * sizeof(float), (size_t)B);
    }
    lp_nn__pop(h->bwd_name);
}
