/* LoRA on a Linear (PEFT's forward: base(x) + scale * lora_B(lora_A(dropout(x)))), forward
 * and backward. EAGER runs the unfused ops one by one (dropout copy, two matmuls, scale,
 * add); FUSED folds the scale and the add into the second GEMM and the input gradient into
 * one accumulation. The base weight is frozen: it gets no gradient here. */
#include <string.h>

#include "nn_internal.h"

int64_t lp_nn_lora_tmp_floats(int64_t N, int64_t in, int64_t out, int64_t r)
{
    int64_t big = in > out ? in : out;
    return 2 * ((N * big + 15) & ~(int64_t)15) + ((N * r + 15) & ~(int64_t)15);
}

/* x (n) *= s, as its own op in the eager path. */
static void scale_op(float *x, int64_t n, float s)
{
    LP_PROF_SCOPE("lp::lora_scale");
    lp_kernels_active()->scale(x, n, s);
}

static bool train_dropout(const lp_nn_linear *l)
{
    const lp_nn_ctx *c = l->ctx;
    return c && c->training && c->rng && l->lora->dropout > 0.0f;
}

static lp_exec_mode exec_of(const lp_nn_linear *l)
{
    return l->ctx ? l->ctx->exec : LP_EXEC_MODE_EAGER;
}

void lp_nn__lora_forward(const lp_nn_linear *l, float *out, const float *inp, int64_t N)
{
    lp_nn_lora *a = l->lora;
    const int64_t C = l->in, OC = l->out, r = a->r;
    float *t1 = a->tmp, *t2 = t1 + ((N * (C > OC ? C : OC) + 15) & ~(int64_t)15);
    const float *xd = inp;
    a->dropped = false;
    if (train_dropout(l)) { // the adapter's own dropout: the base sees the undropped input
        lp_dropout_forward(t1, a->keep, inp, N * C, a->dropout, l->ctx->rng);
        a->dropped = true;
        xd = t1;
    }
    lp_nn__base_forward(l, out, inp, N); // out (N,OC) = x W^T + b
    if (exec_of(l) == LP_EXEC_MODE_EAGER) {
        lp_matmul_forward(a->u, xd, a->A, NULL, N, C, r);  // u (N,r) = xd A^T
        lp_matmul_forward(t2, a->u, a->B, NULL, N, r, OC); // t (N,OC) = u B^T
        scale_op(t2, N * OC, a->scale);
        lp_nn__add_inplace(out, t2, N * OC);
    } else {
        lp_sgemm(false, true, N, r, C, 1.0f, xd, C, a->A, C, 0.0f, a->u, r);
        // out += scale * u B^T in the same GEMM
        lp_sgemm(false, true, N, OC, r, a->scale, a->u, r, a->B, r, 1.0f, out, OC);
    }
}

void lp_nn__lora_backward(const lp_nn_linear *l, float *dinp, const float *dout, const float *inp, int64_t N)
{
    const lp_nn_lora *a = l->lora;
    const int64_t C = l->in, OC = l->out, r = a->r;
    const int64_t big = (N * (C > OC ? C : OC) + 15) & ~(int64_t)15;
    float *t1 = a->tmp, *t2 = t1 + big, *g = t2 + big;
    // g (N,r) = dout @ B: the gradient reaching u, before the scale
    lp_sgemm(false, false, N, r, OC, 1.0f, dout, OC, a->B, r, 0.0f, g, r);
    if (a->dB) // dB (OC,r) += scale * dout^T @ u
        lp_sgemm(true, false, OC, r, N, a->scale, dout, OC, a->u, r, 1.0f, a->dB, r);
    const float *xd = inp;
    if (a->dropped && (a->dA || dinp)) { // drop(x) again from the saved mask
        lp_dropout_backward(t1, inp, a->keep, N * C, a->dropout);
        xd = t1;
    }
    if (a->dA) // dA (r,C) += scale * g^T @ drop(x)
        lp_sgemm(true, false, r, C, N, a->scale, g, r, xd, C, 1.0f, a->dA, C);
    lp_nn__base_backward(l, dinp, dout, inp, N); // dinp = dout W (frozen base: no dW)
    if (!dinp)
        return;
    if (exec_of(l) == LP_EXEC_MODE_EAGER || a->dropped) {
        lp_matmul_backward(t2, NULL, NULL, g, NULL, a->A, N, C, r); // t (N,C) = g @ A
        scale_op(t2, N * C, a->scale);
        if (a->dropped) {
            lp_dropout_backward(t1, t2, a->keep, N * C, a->dropout);
            lp_nn__add_inplace(dinp, t1, N * C);
        } else {
            lp_nn__add_inplace(dinp, t2, N * C);
        }
    } else { // dinp += scale * g @ A
        lp_sgemm(false, false, N, C, r, a->scale, g, r, a->A, C, 1.0f, dinp, C);
    }
}
