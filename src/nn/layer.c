/* MLP module and the post-LN encoder layer (BERT / DistilBERT), with the layout of one
 * layer's activations inside a caller's block (so a model can keep L of them, or one when
 * it recomputes layers under gradient checkpointing). */
#include <string.h>

#include "nn_internal.h"

void lp_nn_mlp_forward(const lp_nn_mlp *m, lp_nn_mlp_act *act, const float *x, int64_t N)
{
    lp_nn__push(m->fwd_name);
    lp_nn_linear_forward(&m->in, act->h, x, N);              // h (N,I)
    lp_gelu_forward(act->g, act->h, N * m->in.out, m->gelu); // g (N,I)
    lp_nn_linear_forward(&m->out, act->out, act->g, N);      // out (N,C)
    lp_nn__pop(m->fwd_name);
}

void lp_nn_mlp_backward(const lp_nn_mlp *m, const lp_nn_mlp_act *act, float *dx, const float *dout,
                        const float *x, float *scratch, int64_t N)
{
    lp_nn__push(m->bwd_name);
    lp_nn_linear_backward(&m->out, scratch, dout, act->g, N);           // dg (N,I)
    lp_gelu_backward(scratch, scratch, act->h, N * m->in.out, m->gelu); // dh (N,I), aliasing allowed
    lp_nn_linear_backward(&m->in, dx, scratch, x, N);                   // dx (N,C)
    lp_nn__pop(m->bwd_name);
}

/* Sub-buffers start on 64-byte boundaries. */
static int64_t up16(int64_t n)
{
    return (n + 15) & ~(int64_t)15;
}
static int64_t up64(int64_t n)
{
    return (n + 63) & ~(int64_t)63;
}

static bool att_dropout_on(const lp_nn_encoder_layer *l, lp_exec_mode exec, bool training)
{
    return exec == LP_EXEC_MODE_EAGER && training && l->attn.attn_dropout > 0.0f;
}

int64_t lp_nn_layer_act_floats(const lp_nn_encoder_layer *l, lp_exec_mode exec, bool training, int64_t B,
                               int64_t T)
{
    const int64_t N = B * T, C = l->attn.C, I = l->mlp.in.out, H = l->attn.H;
    int64_t n = 8 * up16(N * C) + 2 * up16(N * I) + 4 * up16(N);
    if (exec == LP_EXEC_MODE_EAGER)
        n += up16(B * H * T * T) * (att_dropout_on(l, exec, training) ? 2 : 1);
    else
        n += up16(B * H * T);
    return n;
}

int64_t lp_nn_layer_act_bytes_u8(const lp_nn_encoder_layer *l, lp_exec_mode exec, bool training, int64_t B,
                                 int64_t T)
{
    const int64_t N = B * T, C = l->attn.C, H = l->attn.H;
    int64_t n = 0;
    if (training && l->hidden_dropout > 0.0f)
        n += 2 * up64(N * C);
    if (att_dropout_on(l, exec, training))
        n += up64(B * H * T * T);
    return n;
}

void lp_nn_layer_act_bind(const lp_nn_encoder_layer *l, lp_exec_mode exec, bool training,
                          lp_nn_layer_act *act, float *f, uint8_t *u8, int64_t B, int64_t T)
{
    const int64_t N = B * T, C = l->attn.C, I = l->mlp.in.out, H = l->attn.H;
    memset(act, 0, sizeof *act);
#define TAKE(n) (f += up16(n), f - up16(n))
    act->attn.q = TAKE(N * C);
    act->attn.k = TAKE(N * C);
    act->attn.v = TAKE(N * C);
    act->attn.ctx = TAKE(N * C);
    if (exec == LP_EXEC_MODE_EAGER) {
        act->attn.att = TAKE(B * H * T * T);
        if (att_dropout_on(l, exec, training))
            act->attn.att_drop = TAKE(B * H * T * T);
    } else {
        act->attn.lse = TAKE(B * H * T);
    }
    act->res1 = TAKE(N * C);
    act->attn.out = act->res1; // the sublayer output is summed into res1 in place: backward never reads it
    act->ln1 = TAKE(N * C);
    act->ln1_mean = TAKE(N);
    act->ln1_rstd = TAKE(N);
    act->mlp.h = TAKE(N * I);
    act->mlp.g = TAKE(N * I);
    act->res2 = TAKE(N * C);
    act->mlp.out = act->res2;
    act->out = TAKE(N * C);
    act->ln2_mean = TAKE(N);
    act->ln2_rstd = TAKE(N);
#undef TAKE
    if (training && l->hidden_dropout > 0.0f) {
        act->keep1 = u8;
        act->keep2 = u8 + up64(N * C);
        u8 += 2 * up64(N * C);
    }
    if (att_dropout_on(l, exec, training))
        act->attn.att_keep = u8;
}

void lp_nn_encoder_layer_forward(const lp_nn_encoder_layer *l, const lp_nn_ctx *ctx, lp_nn_layer_act *act,
                                 const float *x, const int32_t *mask, int64_t B, int64_t T)
{
    lp_nn__push(l->fwd_name);
    const int64_t N = B * T, C = l->attn.C;
    lp_nn_attention_forward(&l->attn, ctx, &act->attn, x, mask, B, T);
    // dropout in place on the attention output: its backward needs only the mask
    act->dropped1 =
        lp_nn_dropout_forward(ctx, act->attn.out, act->keep1, act->attn.out, N * C, l->hidden_dropout);
    lp_add_inplace(act->res1, x, N * C); // res1 (= attn.out) += x
    lp_nn_layernorm_forward(&l->ln1, act->ln1, act->ln1_mean, act->ln1_rstd, act->res1, N);
    lp_nn_mlp_forward(&l->mlp, &act->mlp, act->ln1, N);
    act->dropped2 =
        lp_nn_dropout_forward(ctx, act->mlp.out, act->keep2, act->mlp.out, N * C, l->hidden_dropout);
    lp_add_inplace(act->res2, act->ln1, N * C); // res2 (= mlp.out) += ln1
    lp_nn_layernorm_forward(&l->ln2, act->out, act->ln2_mean, act->ln2_rstd, act->res2, N);
    lp_nn__pop(l->fwd_name);
}

int64_t lp_nn_encoder_layer_scratch_floats(const lp_nn_encoder_layer *l, lp_exec_mode exec, int64_t B,
                                           int64_t T)
{
    const int64_t N = B * T;
    int64_t a = lp_nn_attention_scratch_floats(&l->attn, exec, B, T), m = N * l->mlp.in.out;
    return 3 * N * l->attn.C + (a > m ? a : m);
}

void lp_nn_encoder_layer_backward(const lp_nn_encoder_layer *l, const lp_nn_ctx *ctx,
                                  const lp_nn_layer_act *act, float *dx, const float *dout, const float *x,
                                  const int32_t *mask, float *scratch, int64_t B, int64_t T)
{
    lp_nn__push(l->bwd_name);
    const int64_t N = B * T, C = l->attn.C;
    float *sA = scratch, *sB = sA + N * C, *sC = sB + N * C, *U = sC + N * C;
    // out = LN2(res2): sA = dres2
    lp_nn_layernorm_backward(&l->ln2, sA, dout, act->res2, act->ln2_mean, act->ln2_rstd, N);
    const float *g = sA;
    if (act->dropped2) {
        lp_nn_dropout_backward(sC, sA, act->keep2, N * C, l->hidden_dropout, true);
        g = sC;
    }
    // res2 = ln1 + mlp(ln1): sB = dln1 = mlp backward + residual
    lp_nn_mlp_backward(&l->mlp, &act->mlp, sB, g, act->ln1, U, N);
    lp_add_inplace(sB, sA, N * C);
    // ln1 = LN1(res1): sC = dres1
    lp_nn_layernorm_backward(&l->ln1, sC, sB, act->res1, act->ln1_mean, act->ln1_rstd, N);
    g = sC;
    if (act->dropped1) {
        lp_nn_dropout_backward(sA, sC, act->keep1, N * C, l->hidden_dropout, true);
        g = sA;
    }
    // res1 = x + attention(x): dx = attention backward + residual
    lp_nn_attention_backward(&l->attn, ctx, &act->attn, dx, g, x, mask, U, B, T);
    if (dx)
        lp_add_inplace(dx, sC, N * C);
    lp_nn__pop(l->bwd_name);
}
