/* nn basics: exec mode names, Linear, LayerNorm and dropout modules (thin wrappers that add
 * a profiler range and the frozen/NULL rules over kernels), and the small element-wise ops
 * the modules share (residual add, masked mean pooling, L2 normalization). */
#include <math.h>
#include <string.h>

#include "nn_internal.h"

const char *lp_exec_mode_name(lp_exec_mode m)
{
    switch (m) {
    case LP_EXEC_MODE_EAGER:
        return "eager";
    case LP_EXEC_MODE_FUSED:
        return "fused";
    }
    return "?";
}

lp_status lp_exec_mode_parse(const char *s, lp_exec_mode *out)
{
    if (s && !strcmp(s, "eager"))
        *out = LP_EXEC_MODE_EAGER;
    else if (s && !strcmp(s, "fused"))
        *out = LP_EXEC_MODE_FUSED;
    else
        return lp_err(LP_STATUS_INVALID_ARG, "unknown exec mode '%s' (expected eager or fused)",
                      s ? s : "(null)");
    return LP_OK;
}

static lp_exec_mode exec_of(const lp_nn_linear *l)
{
    return l->ctx ? l->ctx->exec : LP_EXEC_MODE_EAGER;
}

void lp_nn__note_status(const lp_nn_linear *l, lp_status st)
{
    if (st != LP_OK && l->ctx && l->ctx->status && *l->ctx->status == LP_OK)
        *l->ctx->status = st;
}

const lp_qweight *lp_nn__base_q(const lp_nn_linear *l, lp_qweight *tmp)
{
    if (!l->qbase || !l->qbase_bf16)
        return l->qbase;
    lp_status st = lp_kernels_qweight_bf16_of(tmp, l->qbase, "QLoRA base in bf16 (one use)");
    if (st != LP_OK) {
        lp_nn__note_status(l, st);
        return NULL;
    }
    return tmp;
}

void lp_nn__base_q_done(const lp_nn_linear *l, lp_qweight *tmp)
{
    if (l->qbase && l->qbase_bf16)
        lp_kernels_qweight_free(tmp);
}

void lp_nn__base_forward(const lp_nn_linear *l, float *out, const float *inp, int64_t N)
{
    if (l->qbase) { // frozen quantized base: dequantized panel by panel (fused) or whole (eager)
        lp_qweight tmp;
        const lp_qweight *q = lp_nn__base_q(l, &tmp);
        if (!q)
            return;
        lp_status st = exec_of(l) == LP_EXEC_MODE_FUSED
                           ? lp_qmatmul_forward(out, inp, q, l->b, N, l->in, l->out)
                           : lp_qmatmul_forward_eager(out, inp, q, l->b, N, l->in, l->out);
        lp_nn__base_q_done(l, &tmp);
        lp_nn__note_status(l, st);
        return;
    }
    if (l->bf16) { // autocast: bf16 operands, f32 accumulation and output
        lp_nn__note_status(l, lp_qmatmul_forward(out, inp, l->bf16, l->b, N, l->in, l->out));
        return;
    }
    // out (N,out) = inp (N,in) @ w^T (in,out) + b
    lp_matmul_forward(out, inp, l->w, l->b, N, l->in, l->out);
}

void lp_nn__base_backward(const lp_nn_linear *l, float *dinp, const float *dout, const float *inp, int64_t N)
{
    if (l->qbase) { // frozen: the input gradient only
        lp_qweight tmp;
        const lp_qweight *q = dinp ? lp_nn__base_q(l, &tmp) : NULL;
        if (q) {
            lp_status st = exec_of(l) == LP_EXEC_MODE_FUSED
                               ? lp_qmatmul_backward(dinp, dout, q, N, l->in, l->out)
                               : lp_qmatmul_backward_eager(dinp, dout, q, N, l->in, l->out);
            lp_nn__base_q_done(l, &tmp);
            lp_nn__note_status(l, st);
        }
        return;
    }
    if (l->bf16) { // dinp = dout W, dw += dout^T inp in bf16 operands; the bias gradient in f32
        lp_nn__note_status(l, lp_bf16_matmul_backward(dinp, l->dw, dout, inp, l->bf16, N, l->in, l->out));
        if (l->b && l->db)
            lp_bias_backward(l->db, dout, N, l->out);
        return;
    }
    lp_matmul_backward(dinp, l->dw, l->b ? l->db : NULL, dout, inp, l->w, N, l->in, l->out);
}

void lp_nn_linear_forward(const lp_nn_linear *l, float *out, const float *inp, int64_t N)
{
    lp_nn__push(l->fwd_name);
    if (l->lora)
        lp_nn__lora_forward(l, out, inp, N);
    else
        lp_nn__base_forward(l, out, inp, N);
    lp_nn__pop(l->fwd_name);
}

void lp_nn_linear_backward(const lp_nn_linear *l, float *dinp, const float *dout, const float *inp, int64_t N)
{
    lp_nn__push(l->bwd_name);
    if (l->lora)
        lp_nn__lora_backward(l, dinp, dout, inp, N);
    else
        lp_nn__base_backward(l, dinp, dout, inp, N);
    lp_nn__pop(l->bwd_name);
}

void lp_nn_layernorm_forward(const lp_nn_layernorm *ln, float *out, float *mean, float *rstd,
                             const float *inp, int64_t N)
{
    lp_nn__push(ln->fwd_name);
    lp_layernorm_forward(out, mean, rstd, inp, ln->w, ln->b, N, ln->C, ln->eps);
    lp_nn__pop(ln->fwd_name);
}

void lp_nn_layernorm_backward(const lp_nn_layernorm *ln, float *dinp, const float *dout, const float *inp,
                              const float *mean, const float *rstd, int64_t N)
{
    lp_nn__push(ln->bwd_name);
    lp_layernorm_backward(dinp, ln->dw, ln->db, dout, inp, ln->w, mean, rstd, N, ln->C);
    lp_nn__pop(ln->bwd_name);
}

int64_t lp_nn__drop_at(const lp_nn_ctx *ctx, int64_t n, lp_rng *at)
{
    if (ctx->global_rows <= 0 || ctx->rows <= 0) {
        *at = *ctx->rng;
        return n;
    }
    const int64_t per_row = n / ctx->rows;
    *at = lp_rng_at(ctx->rng, ctx->row0 * per_row);
    return ctx->global_rows * per_row;
}

bool lp_nn_dropout_forward(const lp_nn_ctx *ctx, float *out, uint8_t *keep, const float *inp, int64_t n,
                           float p)
{
    if (ctx->training && p > 0.0f && ctx->rng) {
        lp_rng at;
        const int64_t global_n = lp_nn__drop_at(ctx, n, &at);
        lp_dropout_forward(out, keep, inp, n, p, &at);
        lp_rng_skip(ctx->rng, global_n);
        return true;
    }
    if (out != inp)
        lp_kernels_copy(out, inp, (size_t)n * sizeof *out); // memcpy on the CPU
    return false;
}

void lp_nn_dropout_backward(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p,
                            bool applied)
{
    if (applied)
        lp_dropout_backward(dinp, dout, keep, n, p);
    else if (dinp != dout)
        lp_kernels_copy(dinp, dout, (size_t)n * sizeof *dinp);
}
