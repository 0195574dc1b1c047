/* nn internals: profiler range helpers and the few element-wise ops the kernels layer does
 * not have (tanh/relu for the heads), kept here until kernels grows them. */
#ifndef LP_NN_INTERNAL_H
#define LP_NN_INTERNAL_H

#include "loupe/nn.h"

/* A module range: names are interned by the model; NULL means "no range". */
static inline void lp_nn__push(const char *name)
{
    if (name)
        lp_prof_range_push(name);
}
static inline void lp_nn__pop(const char *name)
{
    if (name)
        lp_prof_range_pop();
}

/* The Linear's base alone (f32 or quantized weight, bias): out (N,out) =; backward: dinp =
 * (NULL: skipped), dw/db += unless frozen (always frozen under an adapter). */
void lp_nn__base_forward(const lp_nn_linear *l, float *out, const float *inp, int64_t N);
void lp_nn__base_backward(const lp_nn_linear *l, float *dinp, const float *dout, const float *inp, int64_t N);
/* The quantized base the GEMMs read: l->qbase, or with l->qbase_bf16 its bf16 copy for this
 * use, made in *tmp (lp_kernels_qweight_bf16_of); NULL on error (noted in the pass's status).
 * lp_nn__base_q_done releases the copy. */
const lp_qweight *lp_nn__base_q(const lp_nn_linear *l, lp_qweight *tmp);
void lp_nn__base_q_done(const lp_nn_linear *l, lp_qweight *tmp);
/* Records a kernel's error in the pass's status (the first one wins). */
void lp_nn__note_status(const lp_nn_linear *l, lp_status st);
/* A dropout fill of n elements over the pass's rows: *at is where it draws from (the pass's
 * rng, moved to this rank's rows of the global batch's fill under a data-parallel slice:
 * lp_nn_ctx.row0), and the return value the count the pass's rng then skips (the global
 * fill's; n without a slice). Every dropped tensor is batch-major, n/rows per row. */
int64_t lp_nn__drop_at(const lp_nn_ctx *ctx, int64_t n, lp_rng *at);
/* A Linear with l->lora: base + adapter (lora.c). */
void lp_nn__lora_forward(const lp_nn_linear *l, float *out, const float *inp, int64_t N);
void lp_nn__lora_backward(const lp_nn_linear *l, float *dinp, const float *dout, const float *inp, int64_t N);


/* Eager attention composed from ops (QK^T matmul, mask, softmax, dropout, PV matmul) for the
 * case the eager kernel cannot do: dropout on the probabilities. p = 0 is allowed (tests hold
 * it equal to the kernel). Geometry as the kernels' (lp_attn_geom: GQA, causal, window).
 * ctx (B,T,H*D) =; att, att_drop (B,H,T,T) =; keep (B,H,T,T). */
void lp_nn__attention_composed_forward(float *ctx, float *att, float *att_drop, uint8_t *keep, const float *q,
                                       const float *k, const float *v, const int32_t *mask, const lp_attn_geom *g,
                                       float p, lp_rng *rng);
/* dq (layout of q) =; dk, dv (layout of k, v) = summed over each kv head's query heads;
 * datt (2*B*H*T*T) scratch. */
void lp_nn__attention_composed_backward(float *dq, float *dk, float *dv, float *datt, const float *dctx,
                                        const float *att, const float *att_drop, const uint8_t *keep,
                                        const float *q, const float *k, const float *v, const lp_attn_geom *g,
                                        float p, bool dropped);

#endif
