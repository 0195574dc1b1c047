/* Classification heads over an encoder's last hidden state: BERT's tanh pooler, DistilBERT's
 * pre_classifier + ReLU, or plain CLS / masked-mean pooling (bare encoders), then dropout and
 * the classifier. */
#include "nn_internal.h"

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
        lp_act_forward(act->act, act->pre, B * C,
                       h->kind == LP_NN_HEAD_KIND_BERT ? LP_ACT_TANH : LP_ACT_RELU);
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
        lp_act_backward(s2, s2, act->pre, act->act, B * C,
                        h->kind == LP_NN_HEAD_KIND_BERT ? LP_ACT_TANH : LP_ACT_RELU); // s2 = d pre
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
