/* The classification heads' activations: tanh (BERT's pooler) and ReLU (DistilBERT's
 * pre_classifier), as table ops so that a device runs them where the data is. The reference
 * evaluates tanh in double; the optimized copy in float (tanhf, within 1 ulp of it), split
 * over the threads for large n. ReLU and both derivatives are exact either way. */
#include <math.h>

#include "cpu_kernels.h"

void lp_k_act_forward_ref(float *out, const float *inp, int64_t n, lp_act_kind kind)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = kind == LP_ACT_TANH ? (float)tanh((double)inp[i]) : inp[i] > 0.0f ? inp[i] : 0.0f;
}

void lp_k_act_backward_ref(float *dinp, const float *dout, const float *inp, const float *out, int64_t n,
                           lp_act_kind kind)
{
    for (int64_t i = 0; i < n; i++)
        dinp[i] = kind == LP_ACT_TANH ? dout[i] * (1.0f - out[i] * out[i]) : inp[i] > 0.0f ? dout[i] : 0.0f;
}

void lp_k_act_forward_opt(float *out, const float *inp, int64_t n, lp_act_kind kind)
{
    if (kind == LP_ACT_TANH) {
#pragma omp parallel for schedule(static) if (n >= LP_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = tanhf(inp[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n >= LP_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
    }
}

void lp_k_act_backward_opt(float *dinp, const float *dout, const float *inp, const float *out, int64_t n,
                           lp_act_kind kind)
{
    if (kind == LP_ACT_TANH) {
#pragma omp parallel for simd schedule(static) if (n >= LP_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            dinp[i] = dout[i] * (1.0f - out[i] * out[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n >= LP_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            dinp[i] = inp[i] > 0.0f ? dout[i] : 0.0f;
    }
}
