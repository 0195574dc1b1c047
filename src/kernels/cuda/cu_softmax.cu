/* Row softmax forward and backward on the GPU (softmax.c's semantics: max-subtracted, so
 * large logits are safe; -inf entries get 0). Rows up to SM_WARP_MAX_C wide: a warp per row,
 * several rows per block, float4 loads where the rows are 16-byte aligned, warp shuffles only
 * (no block barrier). Wider rows: a block per row with block reductions. Both sum in a fixed
 * order, so results are deterministic. */
#include "cu_nn_common.cuh"

#define SM_WARP_MAX_C 1024
#define SM_ROWS_PER_BLOCK 8 /* warps per block in the warp-per-row kernels */

static __device__ __forceinline__ int sm_threads(void)
{
    return (int)blockDim.x;
}

/* Warp-per-row forward. vec: C % 4 == 0 and both pointers 16-byte aligned, so each lane
 * moves float4s; the row (at most SM_WARP_MAX_C floats) is re-read from L1 for the second
 * and third pass rather than held in registers of a size fixed at compile time. */
template <bool vec>
__global__ void softmax_forward_warp_kernel(float *out, const float *inp, int64_t N, int C)
{
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * SM_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N)
        return; /* the whole warp leaves together: no shuffle is left waiting */
    const float *x = inp + row * C;
    float *o = out + row * C;
    float m = -INFINITY, s = 0.0f;
    if (vec) {
        const float4 *x4 = reinterpret_cast<const float4 *>(x);
        float4 *o4 = reinterpret_cast<float4 *>(o);
        const int C4 = C >> 2;
        for (int c = lane; c < C4; c += 32) {
            float4 v = x4[c];
            m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        }
        m = warp_max(m);
        for (int c = lane; c < C4; c += 32) {
            float4 v = x4[c];
            s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
        }
        s = warp_sum(s);
        const float inv = 1.0f / s;
        for (int c = lane; c < C4; c += 32) {
            float4 v = x4[c], r;
            r.x = expf(v.x - m) * inv;
            r.y = expf(v.y - m) * inv;
            r.z = expf(v.z - m) * inv;
            r.w = expf(v.w - m) * inv;
            o4[c] = r;
        }
    } else {
        for (int c = lane; c < C; c += 32)
            m = fmaxf(m, x[c]);
        m = warp_max(m);
        for (int c = lane; c < C; c += 32)
            s += expf(x[c] - m);
        s = warp_sum(s);
        const float inv = 1.0f / s;
        for (int c = lane; c < C; c += 32)
            o[c] = expf(x[c] - m) * inv;
    }
}

template <bool vec>
__global__ void softmax_backward_warp_kernel(float *dinp, const float *dout, const float *out, int64_t N, int C)
{
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * SM_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= N)
        return;
    const float *d = dout + row * C, *y = out + row * C;
    float *di = dinp + row * C;
    float dot = 0.0f;
    if (vec) {
        const float4 *d4 = reinterpret_cast<const float4 *>(d), *y4 = reinterpret_cast<const float4 *>(y);
        float4 *di4 = reinterpret_cast<float4 *>(di);
        const int C4 = C >> 2;
        for (int c = lane; c < C4; c += 32) {
            float4 a = d4[c], b = y4[c];
            dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
        dot = warp_sum(dot);
        /* dinp may alias dout: each lane reads its float4s before writing the same ones */
        for (int c = lane; c < C4; c += 32) {
            float4 a = d4[c], b = y4[c], r;
            r.x = b.x * (a.x - dot);
            r.y = b.y * (a.y - dot);
            r.z = b.z * (a.z - dot);
            r.w = b.w * (a.w - dot);
            di4[c] = r;
        }
    } else {
        for (int c = lane; c < C; c += 32)
            dot += d[c] * y[c];
        dot = warp_sum(dot);
        for (int c = lane; c < C; c += 32)
            di[c] = y[c] * (d[c] - dot);
    }
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

/* threads per row block (rows wider than SM_WARP_MAX_C): C rounded up to a warp, at most 512 */
static unsigned sm_block(int64_t C)
{
    int64_t t = (C + 31) / 32 * 32;
    return (unsigned)(t > 512 ? 512 : t);
}

/* float4 access: C a multiple of 4 and every pointer 16-byte aligned */
static bool sm_vec(int64_t C, const void *a, const void *b, const void *c)
{
    return C % 4 == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15) == 0;
}

static unsigned sm_warp_blocks(int64_t N)
{
    return (unsigned)((N + SM_ROWS_PER_BLOCK - 1) / SM_ROWS_PER_BLOCK);
}

extern "C" void lp_cu_softmax_forward(float *out, const float *inp, int64_t N, int64_t C)
{
    if (N <= 0 || C <= 0)
        return;
    if (C <= SM_WARP_MAX_C) {
        if (sm_vec(C, out, inp, inp))
            LP_CU_LAUNCH(softmax_forward_warp_kernel<true>, sm_warp_blocks(N), 32 * SM_ROWS_PER_BLOCK, 0,
                         lp_cu_nn_stream(), out, inp, N, (int)C);
        else
            LP_CU_LAUNCH(softmax_forward_warp_kernel<false>, sm_warp_blocks(N), 32 * SM_ROWS_PER_BLOCK, 0,
                         lp_cu_nn_stream(), out, inp, N, (int)C);
        (void)lp_cu_nn_launched("softmax_forward");
        return;
    }
    LP_CU_LAUNCH(softmax_forward_kernel, (unsigned)N, sm_block(C), 0, lp_cu_nn_stream(), out, inp, (int)C);
    (void)lp_cu_nn_launched("softmax_forward");
}

extern "C" void lp_cu_softmax_backward(float *dinp, const float *dout, const float *out, int64_t N, int64_t C)
{
    if (N <= 0 || C <= 0)
        return;
    if (C <= SM_WARP_MAX_C) {
        if (sm_vec(C, dinp, dout, out))
            LP_CU_LAUNCH(softmax_backward_warp_kernel<true>, sm_warp_blocks(N), 32 * SM_ROWS_PER_BLOCK, 0,
                         lp_cu_nn_stream(), dinp, dout, out, N, (int)C);
        else
            LP_CU_LAUNCH(softmax_backward_warp_kernel<false>, sm_warp_blocks(N), 32 * SM_ROWS_PER_BLOCK, 0,
                         lp_cu_nn_stream(), dinp, dout, out, N, (int)C);
        (void)lp_cu_nn_launched("softmax_backward");
        return;
    }
    LP_CU_LAUNCH(softmax_backward_kernel, (unsigned)N, sm_block(C), 0, lp_cu_nn_stream(), dinp, dout, out,
                 (int)C);
    (void)lp_cu_nn_launched("softmax_backward");
}
