/* Decoder modules (Llama, Mistral, Qwen2, SmolLM): RMSNorm, the SiLU-gated MLP and the
 * pre-norm decoder layer around the shared attention module (causal, GQA, rotary). */
#include <string.h>

#include "nn_internal.h"

void lp_nn_rmsnorm_forward(const lp_nn_rmsnorm *n, float *out, float *rstd, const float *inp, int64_t N)
{
    lp_nn__push(n->fwd_name);
    lp_rmsnorm_forward(out, rstd, inp, n->w, N, n->C, n->eps);
    lp_nn__pop(n->fwd_name);
}

void lp_nn_rmsnorm_backward(const lp_nn_rmsnorm *n, float *dinp, const float *dout, const float *inp,
                            const float *rstd, int64_t N)
{
    lp_nn__push(n->bwd_name);
    lp_rmsnorm_backward(dinp, n->dw, dout, inp, n->w, rstd, N, n->C);
    lp_nn__pop(n->bwd_name);
}

/* ---- gated MLP ------------------------------------------------------------------------ */

/* gate, up and a = SiLU(gate) * up: everything the MLP's backward reads. */
static void gated_mlp_hidden(const lp_nn_gated_mlp *m, lp_nn_gated_mlp_act *act, const float *x, int64_t N)
{
    const int64_t F = m->gate.out;
    lp_nn_linear_forward(&m->gate, act->gate, x, N);
    lp_nn_linear_forward(&m->up, act->up, x, N);
    lp_swiglu_forward(act->a, act->gate, act->up, N, F, F);
}

void lp_nn_gated_mlp_forward(const lp_nn_gated_mlp *m, lp_nn_gated_mlp_act *act, const float *x, int64_t N)
{
    lp_nn__push(m->fwd_name);
    gated_mlp_hidden(m, act, x, N);
    lp_nn_linear_forward(&m->down, act->out, act->a, N);
    lp_nn__pop(m->fwd_name);
}

int64_t lp_nn_gated_mlp_scratch_floats(const lp_nn_gated_mlp *m, int64_t N)
{
    return 3 * N * m->gate.out + N * m->gate.in;
}

void lp_nn_gated_mlp_backward(const lp_nn_gated_mlp *m, const lp_nn_gated_mlp_act *act, float *dx,
                              const float *dout, const float *x, float *scratch, int64_t N)
{
    lp_nn__push(m->bwd_name);
    const int64_t F = m->gate.out, C = m->gate.in;
    float *da = scratch, *dg = da + N * F, *du = dg + N * F, *part = du + N * F;
    lp_nn_linear_backward(&m->down, da, dout, act->a, N);
    lp_swiglu_backward(dg, du, da, act->gate, act->up, N, F, F);
    lp_nn_linear_backward(&m->gate, dx, dg, x, N);
    lp_nn_linear_backward(&m->up, dx ? part : NULL, du, x, N);
    if (dx)
        lp_add_inplace(dx, part, N * C);
    lp_nn__pop(m->bwd_name);
}

/* ---- decoder layer -------------------------------------------------------------------- */

static int64_t up16(int64_t n)
{
    return (n + 15) & ~(int64_t)15;
}

int64_t lp_nn_decoder_layer_act_floats(const lp_nn_decoder_layer *l, lp_exec_mode exec, int64_t B, int64_t T)
{
    const lp_nn_attention *a = &l->attn;
    const int64_t N = B * T, C = a->C, QD = a->H * a->D, KD = a->Hkv * a->D, F = l->mlp.gate.out;
    int64_t n = 4 * up16(N * C) + 2 * up16(N);                  // h1, res1, h2, out; rstd1, rstd2
    n += up16(N * QD) + 2 * up16(N * KD) + up16(N * QD);        // q, k, v, ctx
    n += exec == LP_EXEC_MODE_FUSED ? up16(B * a->H * T) : 2 * up16(B * a->H * T * T); // lse | att, att_drop
    n += 3 * up16(N * F);                                       // gate, up, a
    return n;
}

void lp_nn_decoder_layer_act_bind(const lp_nn_decoder_layer *l, lp_exec_mode exec, lp_nn_decoder_layer_act *act,
                                  float *f, int64_t B, int64_t T)
{
    const lp_nn_attention *a = &l->attn;
    const int64_t N = B * T, C = a->C, QD = a->H * a->D, KD = a->Hkv * a->D, F = l->mlp.gate.out;
#define TAKE(n) (f += up16(n), f - up16(n))
    act->h1 = TAKE(N * C);
    act->rstd1 = TAKE(N);
    act->attn.q = TAKE(N * QD);
    act->attn.k = TAKE(N * KD);
    act->attn.v = TAKE(N * KD);
    act->attn.ctx = TAKE(N * QD);
    if (exec == LP_EXEC_MODE_FUSED) {
        act->attn.lse = TAKE(B * a->H * T);
        act->attn.att = act->attn.att_drop = NULL;
    } else {
        act->attn.att = TAKE(B * a->H * T * T);
        act->attn.att_drop = TAKE(B * a->H * T * T);
        act->attn.lse = NULL;
    }
    act->attn.att_keep = NULL; // no attention-probability dropout in decoders (attention_dropout 0)
    act->res1 = TAKE(N * C);
    act->attn.out = act->res1;
    act->h2 = TAKE(N * C);
    act->rstd2 = TAKE(N);
    act->mlp.gate = TAKE(N * F);
    act->mlp.up = TAKE(N * F);
    act->mlp.a = TAKE(N * F);
    act->out = TAKE(N * C);
    act->mlp.out = act->out;
#undef TAKE
}

void lp_nn_decoder_layer_forward(const lp_nn_decoder_layer *l, const lp_nn_ctx *ctx, lp_nn_decoder_layer_act *act,
                                 const float *x, const int32_t *mask, int64_t B, int64_t T)
{
    lp_nn__push(l->fwd_name);
    const int64_t N = B * T, C = l->attn.C;
    lp_nn_rmsnorm_forward(&l->ln1, act->h1, act->rstd1, x, N);
    lp_nn_attention_forward(&l->attn, ctx, &act->attn, act->h1, mask, B, T); // -> res1
    lp_add_inplace(act->res1, x, N * C);
    lp_nn_rmsnorm_forward(&l->ln2, act->h2, act->rstd2, act->res1, N);
    if (ctx && ctx->recompute && !l->mlp.down.lora) {
        /* Recomputed for the backward: out = res1 + down(a) only feeds the next layer, whose
         * input was kept, and the backward reads a, not out; skipping down saves a third of
         * the MLP's recompute. An adapter on down needs its saved u and dropout mask, so then
         * the whole MLP runs. */
        lp_nn__push(l->mlp.fwd_name);
        gated_mlp_hidden(&l->mlp, &act->mlp, act->h2, N);
        lp_nn__pop(l->mlp.fwd_name);
    } else {
        lp_nn_gated_mlp_forward(&l->mlp, &act->mlp, act->h2, N); // -> out
        lp_add_inplace(act->out, act->res1, N * C);
    }
    lp_nn__pop(l->fwd_name);
}

int64_t lp_nn_decoder_layer_scratch_floats(const lp_nn_decoder_layer *l, lp_exec_mode exec, int64_t B, int64_t T)
{
    const int64_t N = B * T;
    int64_t a = lp_nn_attention_scratch_floats(&l->attn, exec, B, T),
            m = lp_nn_gated_mlp_scratch_floats(&l->mlp, N);
    return 2 * up16(N * l->attn.C) + (a > m ? a : m);
}

void lp_nn_decoder_layer_backward(const lp_nn_decoder_layer *l, const lp_nn_ctx *ctx,
                                  const lp_nn_decoder_layer_act *act, float *dx, const float *dout, const float *x,
                                  const int32_t *mask, float *scratch, int64_t B, int64_t T)
{
    lp_nn__push(l->bwd_name);
    const int64_t N = B * T, C = l->attn.C;
    float *dres1 = scratch, *dh = dres1 + up16(N * C), *rest = dh + up16(N * C);
    // out = res1 + mlp(RMSNorm2(res1))
    lp_nn_gated_mlp_backward(&l->mlp, &act->mlp, dh, dout, act->h2, rest, N);
    lp_nn_rmsnorm_backward(&l->ln2, dres1, dh, act->res1, act->rstd2, N);
    lp_add_inplace(dres1, dout, N * C);
    // res1 = x + attention(RMSNorm1(x))
    const bool need_dh = dx || l->ln1.dw; // else only the attention's own parameters need gradients
    lp_nn_attention_backward(&l->attn, ctx, &act->attn, need_dh ? dh : NULL, dres1, act->h1, mask, rest, B, T);
    if (dx) {
        lp_nn_rmsnorm_backward(&l->ln1, dx, dh, x, act->rstd1, N);
        lp_add_inplace(dx, dres1, N * C);
    } else if (l->ln1.dw) { // the norm's weight still trains
        lp_nn_rmsnorm_backward(&l->ln1, dh, dh, x, act->rstd1, N);
    }
    lp_nn__pop(l->bwd_name);
}
