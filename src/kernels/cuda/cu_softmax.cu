/* Row softmax forward and backward on the GPU (softmax.c's semantics: max-subtracted, so
 * large logits are safe; -inf entries get 0). One block per row; block reductions in a
 * fixed order, so results are deterministic. */
#include "cu_nn_common.cuh"

static __device__ __forceinline__ int sm_threads(void)
{
    return (int)blockDim.x;
}

__global__ void softmax_forward_kernel(float *out, const float *inp, int C)
{
    __shared__ float sh[32];
    const int64_t row = blockIdx.x;
    const float *x = inp + row * C;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < C; c += sm_threads())
        m = fmaxf(m, x[c]);
    m = block_max(m, sh);
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += sm_threads())
        s += expf(x[c] - m);
    s = block_sum(s, sh);
    const float inv = 1.0f / s;
    float *o = out + row * C;
    for (int c = threadIdx.x; c < C; c += sm_threads())
        o[c] = expf(x[c] - m) * inv;
}

__global__ void softmax_backward_kernel(float *dinp, const float *dout, const float *out, int C)
{
    __shared__ float sh[32];
    const int64_t row = blockIdx.x;
    const float *d = dout + row * C, *y = out + row * C;
    float dot = 0.0f;
    for (int c = threadIdx.x; c < C; c += sm_threads())
        dot += d[c] * y[c];
    dot = block_sum(dot, sh);
    float *di = dinp + row * C;
    for (int c = threadIdx.x; c < C; c += sm_threads())
        di[c] = y[c] * (d[c] - dot);
}

/* threads per row block: C rounded up to a warp, at most 512 */
static unsigned sm_block(int64_t C)
{
    int64_t t = (C + 31) / 32 * 32;
    return (unsigned)(t > 512 ? 512 : t);
}

extern "C" void lp_cu_softmax_forward(float *out, const float *inp, int64_t N, int64_t C)
{
    if (N <= 0 || C <= 0)
        return;
    LP_CU_LAUNCH(softmax_forward_kernel, (unsigned)N, sm_block(C), 0, lp_cu_nn_stream(), out, inp, (int)C);
    (void)lp_cu_nn_launched("softmax_forward");
}

extern "C" void lp_cu_softmax_backward(float *dinp, const float *dout, const float *out, int64_t N, int64_t C)
{
    if (N <= 0 || C <= 0)
        return;
    LP_CU_LAUNCH(softmax_backward_kernel, (unsigned)N, sm_block(C), 0, lp_cu_nn_stream(), dinp, dout, out,
                 (int)C);
    (void)lp_cu_nn_launched("softmax_backward");
}
