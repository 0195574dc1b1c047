/* Self-attention module: q/k/v projections, attention (eager: probabilities materialized;
 * fused: the flash-style kernel), output projection. Eager with dropout on the
 * probabilities is composed from ops here, since the eager kernel has no dropout; the
 * fused kernel drops the same elements from the same rng counters without a mask. */
#include <math.h>
#include <string.h>

#include "nn_internal.h"

/* Profiler ops of the composed path: one record per batched step (not one per head). */
static const lp_prof_op_desc composed_scores_desc = {
    "lp::attention_scores_forward", LP_PROF_CAT_CPU_OP, 1, {4}, {"float"}};
static const lp_prof_op_desc composed_pv_desc = {
    "lp::attention_pv_forward", LP_PROF_CAT_CPU_OP, 1, {4}, {"float"}};
static const lp_prof_op_desc composed_pv_bwd_desc = {
    "lp::attention_pv_backward", LP_PROF_CAT_CPU_OP, 1, {4}, {"float"}};
static const lp_prof_op_desc composed_scores_bwd_desc = {
    "lp::attention_scores_backward", LP_PROF_CAT_CPU_OP, 1, {4}, {"float"}};

/* Whether query i of a row with mask mb sees any key (left padding under a causal mask may
 * leave none: its softmax would be 0/0, so its probabilities are set to 0 instead). */
static bool sees_a_key(const lp_attn_geom *g, const int32_t *mb, int64_t i)
{
    int64_t lo, hi;
    lp_attn_key_range(g, i, &lo, &hi);
    for (int64_t j = lo; j < hi; j++)
        if (lp_attn_mask_visible(g, mb, i, j))
            return true;
    return false;
}

void lp_nn__attention_composed_forward(float *ctx, float *att, float *att_drop, uint8_t *keep, const float *q,
                                       const float *k, const float *v, const int32_t *mask, const lp_attn_geom *g,
                                       float p, lp_rng *rng)
{
    const int64_t B = g->B, T = g->T, H = g->H, D = g->D, grp = H / g->Hkv, C = H * D, TT = T * T;
    const int64_t ldq = g->ldq, ldkv = g->ldkv;
    const float scale = lp_attn_scale(g);
    const bool hides = g->causal || g->window > 0 || g->segments;
    const lp_kernel_table *K = lp_kernels_active();
    int64_t dims[] = {B, T, H, D};
    {
        LP_PROF_OP_SCOPE(&composed_scores_desc, dims, 2.0 * B * H * T * T * D,
                         4.0 * (B * T * (H + g->Hkv) * D + B * H * TT));
        // one parallel loop over (b,h) with single-threaded GEMMs inside: B*H small GEMMs each
        // opening its own BLAS parallel region cost far more than their arithmetic
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++) {
                float *S = att_drop + (b * H + h) * TT;
                // S (T,T) = scale * Q_bh (T,D; ld ldq) @ K_bg^T (ld ldkv)
                K->sgemm(false, true, T, T, D, scale, q + b * T * ldq + h * D, ldq,
                         k + b * T * ldkv + (h / grp) * D, ldkv, 0.0f, S, T);
                if (mask)
                    for (int64_t j = 0; j < T; j++)
                        if (!mask[b * T + j])
                            for (int64_t i = 0; i < T; i++)
                                S[i * T + j] = -INFINITY; // padded key: probability 0
                if (hides)
                    for (int64_t i = 0; i < T; i++) { // causal / window / other samples: hidden keys too
                        int64_t lo, hi;
                        lp_attn_key_range(g, i, &lo, &hi);
                        for (int64_t j = 0; j < T; j++)
                            if (j < lo || j >= hi || (g->segments && mask[b * T + j] != mask[b * T + i]))
                                S[i * T + j] = -INFINITY;
                    }
            }
    }
    lp_softmax_forward(att, att_drop, B * H * T, T);
    if (hides || mask)
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < T; i++)
                if (!sees_a_key(g, mask ? mask + b * T : NULL, i))
                    for (int64_t h = 0; h < H; h++)
                        memset(att + ((b * H + h) * T + i) * T, 0, (size_t)T * sizeof(float));
    lp_dropout_forward(att_drop, keep, att, B * H * TT, p, rng);
    LP_PROF_OP_SCOPE(&composed_pv_desc, dims, 2.0 * B * H * T * T * D,
                     4.0 * (B * T * (H + g->Hkv) * D + B * H * TT));
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            // ctx_bh (T,D; ld C) = Pd (T,T) @ V_bg (T,D; ld ldkv)
            K->sgemm(false, false, T, D, T, 1.0f, att_drop + (b * H + h) * TT, T, v + b * T * ldkv + (h / grp) * D,
                     ldkv, 0.0f, ctx + b * T * C + h * D, C);
}

void lp_nn__attention_composed_backward(float *dq, float *dk, float *dv, float *datt, const float *dctx,
                                        const float *att, const float *att_drop, const uint8_t *keep,
                                        const float *q, const float *k, const float *v, const lp_attn_geom *g,
                                        float p, bool dropped)
{
    const int64_t B = g->B, T = g->T, H = g->H, Hkv = g->Hkv, D = g->D, grp = H / Hkv, C = H * D, TT = T * T;
    const int64_t ldq = g->ldq, ldkv = g->ldkv;
    const float scale = lp_attn_scale(g);
    const float *Pd = dropped ? att_drop : att;
    const lp_kernel_table *K = lp_kernels_active();
    int64_t dims[] = {B, T, H, D};
    {
        LP_PROF_OP_SCOPE(&composed_pv_bwd_desc, dims, 4.0 * B * H * T * T * D,
                         4.0 * (B * T * (H + 2 * Hkv) * D + 2 * B * H * TT));
        // dPd_bh (T,T) = dctx_bh (T,D) @ V_bg^T
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                K->sgemm(false, true, T, T, D, 1.0f, dctx + b * T * C + h * D, C, v + b * T * ldkv + (h / grp) * D,
                         ldkv, 0.0f, datt + (b * H + h) * TT, T);
        // dV_bg (T,D) = sum over the group of Pd_bh^T (T,T) @ dctx_bh (T,D): one owner per kv head
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t kv = 0; kv < Hkv; kv++)
                for (int64_t hh = 0; hh < grp; hh++) {
                    const int64_t h = kv * grp + hh;
                    K->sgemm(true, false, T, D, T, 1.0f, Pd + (b * H + h) * TT, T, dctx + b * T * C + h * D, C,
                             hh ? 1.0f : 0.0f, dv + b * T * ldkv + kv * D, ldkv);
                }
    }
    // the kernels' optimized loops take restrict pointers: never in place, ping-pong instead
    float *dS_all = datt + B * H * TT;
    if (dropped) {
        lp_dropout_backward(dS_all, datt, keep, B * H * TT, p);
        lp_softmax_backward(datt, dS_all, att, B * H * T, T);
        dS_all = datt;
    } else {
        lp_softmax_backward(dS_all, datt, att, B * H * T, T);
    }
    LP_PROF_OP_SCOPE(&composed_scores_bwd_desc, dims, 4.0 * B * H * T * T * D,
                     4.0 * (B * T * (2 * H + 2 * Hkv) * D + B * H * TT));
    // dQ_bh = scale * dS @ K_bg
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            K->sgemm(false, false, T, D, T, scale, dS_all + (b * H + h) * TT, T, k + b * T * ldkv + (h / grp) * D,
                     ldkv, 0.0f, dq + b * T * ldq + h * D, ldq);
    // dK_bg = scale * sum over the group of dS_bh^T @ Q_bh
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t kv = 0; kv < Hkv; kv++)
            for (int64_t hh = 0; hh < grp; hh++) {
                const int64_t h = kv * grp + hh;
                K->sgemm(true, false, T, D, T, scale, dS_all + (b * H + h) * TT, T, q + b * T * ldq + h * D, ldq,
                         hh ? 1.0f : 0.0f, dk + b * T * ldkv + kv * D, ldkv);
            }
}

/* The module's attention geometry: separate q (N,H*D) and k, v (N,Hkv*D) buffers. */
static lp_attn_geom geom_of(const lp_nn_attention *a, const lp_nn_ctx *ctx, int64_t B, int64_t T)
{
    return (lp_attn_geom){.B = B, .T = T, .H = a->H, .Hkv = a->Hkv, .D = a->D, .ldq = a->H * a->D,
                          .ldkv = a->Hkv * a->D, .causal = a->causal, .window = a->window,
                          .segments = ctx->segments};
}

void lp_nn_attention_forward(const lp_nn_attention *a, const lp_nn_ctx *ctx, lp_nn_attention_act *act,
                             const float *x, const int32_t *mask, int64_t B, int64_t T)
{
    lp_nn__push(a->fwd_name);
    const int64_t N = B * T;
    lp_nn_linear_forward(&a->q, act->q, x, N);
    lp_nn_linear_forward(&a->k, act->k, x, N);
    lp_nn_linear_forward(&a->v, act->v, x, N);
    if (a->rope) { // q and k are kept rotated: the attention backward wants them so
        lp_rope_forward(act->q, act->rope_cos, act->rope_sin, N, a->H, a->D, a->H * a->D);
        lp_rope_forward(act->k, act->rope_cos, act->rope_sin, N, a->Hkv, a->D, a->Hkv * a->D);
    }
    const lp_attn_geom g = geom_of(a, ctx, B, T);
    act->att_dropped = false;
    if (ctx->exec == LP_EXEC_MODE_FUSED) {
        if (ctx->training && a->attn_dropout > 0.0f && ctx->rng) {
            lp_rng at;
            const int64_t global_n = lp_nn__drop_at(ctx, B * a->H * T * T, &at);
            act->drop = (lp_attn_dropout){a->attn_dropout, at.seed, at.stream, at.offset, at.lane};
            lp_rng_skip(ctx->rng, global_n); /* what the eager path draws */
            act->att_dropped = true;
        }
        lp_attention_fused_forward(act->ctx, act->lse, act->q, act->k, act->v, mask, &g,
                                   act->att_dropped ? &act->drop : NULL);
    } else if (ctx->training && a->attn_dropout > 0.0f && ctx->rng) {
        lp_rng at;
        const int64_t global_n = lp_nn__drop_at(ctx, B * a->H * T * T, &at);
        lp_nn__attention_composed_forward(act->ctx, act->att, act->att_drop, act->att_keep, act->q, act->k,
                                          act->v, mask, &g, a->attn_dropout, &at);
        lp_rng_skip(ctx->rng, global_n);
        act->att_dropped = true;
    } else {
        lp_attention_eager_forward(act->ctx, act->att, act->q, act->k, act->v, mask, &g);
    }
    lp_nn_linear_forward(&a->o, act->out, act->ctx, N);
    lp_nn__pop(a->fwd_name);
}

int64_t lp_nn_attention_scratch_floats(const lp_nn_attention *a, lp_exec_mode exec, int64_t B, int64_t T)
{
    const int64_t N = B * T, QD = a->H * a->D, KD = a->Hkv * a->D;
    int64_t n = 2 * N * QD + 2 * N * KD + (N * a->C > N * QD ? N * a->C - N * QD : 0); // dctx | part, dq, dk, dv
    if (exec == LP_EXEC_MODE_EAGER)
        n += 2 * B * a->H * T * T; // datt and its ping-pong partner (composed path)
    return n;
}

void lp_nn_attention_backward(const lp_nn_attention *a, const lp_nn_ctx *ctx, const lp_nn_attention_act *act,
                              float *dx, const float *dout, const float *x, const int32_t *mask,
                              float *scratch, int64_t B, int64_t T)
{
    lp_nn__push(a->bwd_name);
    const int64_t N = B * T, C = a->C, QD = a->H * a->D, KD = a->Hkv * a->D;
    const int64_t wide = QD > C ? QD : C; // dctx, then the input-gradient partial products (N,C)
    float *dctx = scratch, *dq = dctx + N * wide, *dk = dq + N * QD, *dv = dk + N * KD, *datt = dv + N * KD;
    lp_nn_linear_backward(&a->o, dctx, dout, act->ctx, N);
    const lp_attn_geom g = geom_of(a, ctx, B, T);
    if (ctx->exec == LP_EXEC_MODE_FUSED)
        lp_attention_fused_backward(dq, dk, dv, dctx, act->ctx, act->lse, act->q, act->k, act->v, mask, &g,
                                    act->att_dropped ? &act->drop : NULL);
    else if (act->att_dropped)
        lp_nn__attention_composed_backward(dq, dk, dv, datt, dctx, act->att, act->att_drop, act->att_keep,
                                           act->q, act->k, act->v, &g, a->attn_dropout, true);
    else
        lp_attention_eager_backward(dq, dk, dv, datt, dctx, act->att, act->q, act->k, act->v, &g);
    if (a->rope) { // back through the rotation to the projections' outputs
        lp_rope_backward(dq, act->rope_cos, act->rope_sin, N, a->H, a->D, QD);
        lp_rope_backward(dk, act->rope_cos, act->rope_sin, N, a->Hkv, a->D, KD);
    }
    // dx = dq Wq + dk Wk + dv Wv (dctx is free now: reuse it for the partial products);
    // without dx only the projections' own parameter gradients are left to accumulate
    float *part = dx ? dctx : NULL;
    lp_nn_linear_backward(&a->q, dx, dq, x, N);
    lp_nn_linear_backward(&a->k, part, dk, x, N);
    if (dx)
        lp_add_inplace(dx, part, N * C);
    lp_nn_linear_backward(&a->v, part, dv, x, N);
    if (dx)
        lp_add_inplace(dx, part, N * C);
    lp_nn__pop(a->bwd_name);
}
