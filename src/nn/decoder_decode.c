/* One decoding step of a pre-norm decoder layer: the new token of each of B sequences goes
 * through the same modules as in lp_nn_decoder_layer_forward, but its attention reads the
 * layer's KV cache (after appending its own rotated key and value) instead of a (T,T) score
 * matrix. Ranges and Linear paths are the forward's, so LoRA and quantized bases work here
 * unchanged and the profiler splits a token's time by the same layer/op names. */
#include "nn_internal.h"

void lp_nn_attention_decode(const lp_nn_attention *a, lp_nn_attention_act *act, const float *x, void *kc, void *vc,
                            const int32_t *kv_mask, const lp_kv_geom *g)
{
    lp_nn__push(a->fwd_name);
    const int64_t B = g->B;
    lp_nn_linear_forward(&a->q, act->q, x, B);
    lp_nn_linear_forward(&a->k, act->k, x, B);
    lp_nn_linear_forward(&a->v, act->v, x, B);
    if (a->rope) { // each token at its own absolute position (the caller's cos/sin rows)
        lp_rope_forward(act->q, act->rope_cos, act->rope_sin, B, a->H, a->D, a->H * a->D);
        lp_rope_forward(act->k, act->rope_cos, act->rope_sin, B, a->Hkv, a->D, a->Hkv * a->D);
    }
    lp_kv_write(kc, vc, act->k, act->v, g, g->T - 1, 1);
    lp_attention_decode(act->ctx, act->q, kc, vc, kv_mask, g);
    lp_nn_linear_forward(&a->o, act->out, act->ctx, B);
    lp_nn__pop(a->fwd_name);
}

void lp_nn_decoder_layer_decode(const lp_nn_decoder_layer *l, lp_nn_decoder_layer_act *act, const float *x, void *kc,
                                void *vc, const int32_t *kv_mask, const lp_kv_geom *g)
{
    lp_nn__push(l->fwd_name);
    const int64_t B = g->B, C = l->attn.C;
    lp_nn_rmsnorm_forward(&l->ln1, act->h1, act->rstd1, x, B);
    lp_nn_attention_decode(&l->attn, &act->attn, act->h1, kc, vc, kv_mask, g); // -> res1
    lp_add_inplace(act->res1, x, B * C);
    lp_nn_rmsnorm_forward(&l->ln2, act->h2, act->rstd2, act->res1, B);
    lp_nn_gated_mlp_forward(&l->mlp, &act->mlp, act->h2, B); // -> out
    lp_add_inplace(act->out, act->res1, B * C);
    lp_nn__pop(l->fwd_name);
}
