/* Classification heads over an encoder's last hidden state: BERT's tanh pooler, DistilBERT's
 * pre_classifier + ReLU, or plain CLS / masked-mean pooling (bare encoders), then dropout and
 * the classifier. */
#include <math.h>
#include <string.h>

#include "nn_internal.h"

void lp_nn_cls_head_forward(const lp_nn_cls_head *h, const lp_nn_ctx *ctx, lp_nn_head_act *act, float *logits,
                            const float *hidden, const int32_t *mask, int64_t B, int64_t T)
{
    lp_nn__push(h->fwd_name);
    const int64_t C = h->C;
    if (h->kind == LP_NN_HEAD_KIND_MEAN)
        lp_mean_pool_forward(act->pooled, hidden, mask, B, T, C);
    else
        for (int64_t b = 0; b < B; b++) // the first token ([CLS]) of each row
            memcpy(act->pooled + b * C, hidden + b * T * C, (size_t)C * sizeof(float));
    if (h->kind == LP_NN_HEAD_KIND_BERT || h->kind == LP_NN_HEAD_KIND_DISTILBERT) {
        lp_nn_linear_forward(&h->pre, act->pre, act->pooled, B);
        for (int64_t i = 0; i < B * C; i++)
            act->act[i] = h->kind == LP_NN_HEAD_KIND_BERT ? tanhf(act->pre[i]) : fmaxf(act->pre[i], 0.0f);
    } else {
        memcpy(act->act, act->pooled, (size_t)(B * C) * sizeof(float));
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
        for (int64_t i = 0; i < B * C; i++) // s2 = d pre
            s2[i] *=
                h->kind == LP_NN_HEAD_KIND_BERT ? 1.0f - act->act[i] * act->act[i] : (act->pre[i] > 0.0f);
        lp_nn_linear_backward(&h->pre, s1, s2, act->pooled, B); // s1 = d pooled
        dpooled = s1;
    }
    if (h->kind == LP_NN_HEAD_KIND_MEAN) {
        lp_mean_pool_backward(dhidden, dpooled, mask, B, T, C);
    } else {
        memset(dhidden, 0, (size_t)(B * T * C) * sizeof(float));
        for (int64_t b = 0; b < B; b++)
            memcpy(dhidden + b * T * C, dpooled + b * C, (size_t)C * sizeof(float));
    }
    lp_nn__pop(h->bwd_name);
}
