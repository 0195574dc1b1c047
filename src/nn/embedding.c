/* Embeddings module: word + position + token type lookups, LayerNorm, dropout (BERT and
 * DistilBERT; DistilBERT has no token types). Positions are 0..T-1 as in both HF models. */
#include <string.h>

#include "nn_internal.h"

lp_status lp_nn_embedding_forward(const lp_nn_embedding *e, const lp_nn_ctx *ctx, lp_nn_embedding_act *act,
                                  const int32_t *ids, const int32_t *type_ids, int64_t B, int64_t T)
{
    lp_nn__push(e->fwd_name);
    int64_t N = B * T, C = e->C;
    // sum (B,T,C) = wte[ids] + wpe[t] + wtt[type_ids]
    lp_status st = lp_embedding_forward(act->sum, ids, e->wtt ? type_ids : NULL, e->wte, e->wpe, e->wtt, B, T,
                                        C, e->V, e->P, e->wtt ? e->TT : 0, 0);
    if (st == LP_OK) {
        lp_nn_layernorm_forward(&e->ln, act->ln, act->ln_mean, act->ln_rstd, act->sum, N);
        // dropout in place: the LayerNorm backward needs its input (sum), not its output
        act->dropped = lp_nn_dropout_forward(ctx, act->ln, act->keep, act->ln, N * C, e->dropout);
        act->out = act->ln;
    }
    lp_nn__pop(e->fwd_name);
    return st;
}

void lp_nn_embedding_backward(const lp_nn_embedding *e, const lp_nn_embedding_act *act, const float *dout,
                              float *scratch, const int32_t *ids, const int32_t *type_ids, int64_t B,
                              int64_t T)
{
    lp_nn__push(e->bwd_name);
    int64_t N = B * T, C = e->C;
    float *dln = scratch, *dsum = scratch + N * C;
    const float *g = dout;
    if (act->dropped) {
        lp_nn_dropout_backward(dln, dout, act->keep, N * C, e->dropout, true);
        g = dln;
    }
    lp_nn_layernorm_backward(&e->ln, dsum, g, act->sum, act->ln_mean, act->ln_rstd, N);
    lp_embedding_backward(e->dwte, e->dwpe, e->wtt ? e->dwtt : NULL, dsum, ids, e->wtt ? type_ids : NULL, B,
                          T, C, 0);
    // nn.Embedding(padding_idx): the padding row never gets a gradient. Its accumulated
    // gradient is therefore always 0, so resetting it keeps the += rule exact.
    if (e->dwte && e->pad_id >= 0 && e->pad_id < e->V)
        lp_kernels_memset(e->dwte + (int64_t)e->pad_id * C, 0, (size_t)C * sizeof(float));
    lp_nn__pop(e->bwd_name);
}
