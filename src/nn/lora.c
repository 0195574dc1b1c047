/* LoRA on a Linear (PEFT's forward: base(x) + scale * lora_B(lora_A(dropout(x)))), forward
 * and backward, over an f32 or quantized (NF4/int8) frozen base. FUSED calls the fused LoRA
 * linear kernel (one pass that never forms B @ A nor a dropped copy of x, the base
 * dequantized panel by panel); EAGER runs the same math as separate profiled ops (dropout,
 * matmul A, matmul B, scale, base matmul, add). The base gets no gradient here. */
#include "nn_internal.h"

static bool train_dropout(const lp_nn_linear *l)
{
    const lp_nn_ctx *c = l->ctx;
    return c && c->training && c->rng && l->lora->dropout > 0.0f && l->lora->keep;
}

/* The fused LoRA kernel where the active table has it (a GPU's may not: the eager ops then
 * compose the same math). */
static bool fused(const lp_nn_linear *l)
{
    return l->ctx && l->ctx->exec == LP_EXEC_MODE_FUSED && lp_kernels_active()->lora_forward &&
           lp_kernels_active()->lora_backward;
}

void lp_nn__lora_forward(const lp_nn_linear *l, float *out, const float *inp, int64_t N)
{
    lp_nn_lora *a = l->lora;
    lp_qweight tmp;
    const lp_qweight *q = lp_nn__base_q(l, &tmp);
    if (l->qbase && !q)
        return;
    const lp_lora_base base = {.weight = l->qbase ? NULL : l->w, .q = q, .bias = l->b};
    const bool drop = train_dropout(l); // the adapter's own dropout: the base sees x undropped
    const float p = drop ? a->dropout : 0.0f;
    lp_rng at;
    const int64_t global_n = drop ? lp_nn__drop_at(l->ctx, N * l->in, &at) : 0;
    lp_rng *rng = drop ? &at : NULL;
    uint8_t *keep = drop ? a->keep : NULL;
    lp_status st = fused(l) ? lp_lora_forward(out, a->u, keep, inp, &base, a->A, a->B, a->scale, p, rng, N,
                                              l->in, l->out, a->r)
                            : lp_lora_forward_eager(out, a->u, keep, inp, &base, a->A, a->B, a->scale, p, rng,
                                                    N, l->in, l->out, a->r);
    lp_nn__base_q_done(l, &tmp);
    if (drop)
        lp_rng_skip(l->ctx->rng, global_n);
    a->dropped = drop;
    lp_nn__note_status(l, st);
}

void lp_nn__lora_backward(const lp_nn_linear *l, float *dinp, const float *dout, const float *inp, int64_t N)
{
    const lp_nn_lora *a = l->lora;
    lp_qweight tmp;
    const lp_qweight *q = lp_nn__base_q(l, &tmp);
    if (l->qbase && !q)
        return;
    const lp_lora_base base = {.weight = l->qbase ? NULL : l->w, .q = q, .bias = l->b};
    const float p = a->dropped ? a->dropout : 0.0f;
    const uint8_t *keep = a->dropped ? a->keep : NULL;
    // dinp = dout W + s * drop'((dout B) A); dA += s (dout B)^T drop(x); dB += s dout^T u
    lp_status st = fused(l) ? lp_lora_backward(dinp, a->dA, a->dB, dout, inp, a->u, keep, &base, a->A, a->B,
                                               a->scale, p, N, l->in, l->out, a->r)
                            : lp_lora_backward_eager(dinp, a->dA, a->dB, dout, inp, a->u, keep, &base, a->A,
                                                     a->B, a->scale, p, N, l->in, l->out, a->r);
    lp_nn__base_q_done(l, &tmp);
    lp_nn__note_status(l, st);
}
