/* LayerNorm forward and backward on the GPU (layernorm.c's semantics: biased variance, eps
 * inside the square root, mean and rstd saved). One warp per row, two passes over the row
 * in f32 (the row is L1-resident on the second). The weight and bias gradients are summed
 * deterministically: per chunk of rows into partials (one column per thread, rows in
 * order), then the chunks in order into dweight/dbias (+=). */
#include "cu_nn_common.cuh"

#define LN_ROWS_PER_BLOCK 8 /* warps per block, one row each */

__global__ void ln_forward_kernel(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                                  const float *bias, int64_t N, int C, float eps)
{
    const int64_t row = (int64_t)blockIdx.x * LN_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N)
        return; /* whole warps leave: the shuffles below see full warps */
    const float *x = inp + row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += x[c];
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(warp_sum(v) / (float)C + eps);
    float *o = out + row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = ((x[c] - m) * r) * weight[c] + bias[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

__global__ void ln_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *weight,
                                        const float *mean, const float *rstd, int64_t N, int C)
{
    const int64_t row = (int64_t)blockIdx.x * LN_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N)
        return;
    const float *x = inp + row * C, *d = dout + row * C;
    const float m = mean[row], r = rstd[row];
    float a = 0.0f, b = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float dn = d[c] * weight[c];
        a += dn;
        b += dn * ((x[c] - m) * r);
    }
    a = warp_sum(a) / (float)C;
    b = warp_sum(b) / (float)C;
    float *di = dinp + row * C;
    for (int c = lane; c < C; c += 32) {
        float xhat = (x[c] - m) * r;
        di[c] = (d[c] * weight[c] - a - xhat * b) * r;
    }
}

/* part_w/part_b (G, C): chunk g's sums over rows [g*chunk, (g+1)*chunk) of dout * xhat and
 * dout. Block (32, 8): 32 columns, 8 row lanes reduced in a fixed order. */
__global__ void ln_backward_part_kernel(float *part_w, float *part_b, const float *dout, const float *inp,
                                        const float *mean, const float *rstd, int64_t N, int C, int64_t chunk)
{
    __shared__ float sw[8][33], sb[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx;
    const int64_t g = blockIdx.y, r0 = g * chunk, r1 = r0 + chunk < N ? r0 + chunk : N;
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int64_t i = r0 + ty; i < r1; i += 8) {
            float d = dout[i * C + c];
            aw += d * ((inp[i * C + c] - mean[i]) * rstd[i]);
            ab += d;
        }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int k = 1; k < 8; k++) {
            aw += sw[k][tx];
            ab += sb[k][tx];
        }
        part_w[g * C + c] = aw;
        part_b[g * C + c] = ab;
    }
}

/* dweight[c] += sum_g part_w[g, c] (g in order); likewise dbias. Either may be NULL. */
__global__ void ln_backward_final_kernel(float *dweight, float *dbias, const float *part_w,
                                         const float *part_b, int64_t G, int C)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float aw = 0.0f, ab = 0.0f;
    for (int64_t g = 0; g < G; g++) {
        aw += part_w[g * C + c];
        ab += part_b[g * C + c];
    }
    if (dweight)
        dweight[c] += aw;
    if (dbias)
        dbias[c] += ab;
}

/* Rows per partial chunk: at least 64, and at most 256 chunks. */
static int64_t ln_chunk(int64_t N)
{
    int64_t ch = (N + 255) / 256;
    return ch < 64 ? 64 : ch;
}

extern "C" void lp_cu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                        const float *weight, const float *bias, int64_t N, int64_t C,
                                        float eps)
{
    if (N <= 0 || C <= 0)
        return;
    LP_CU_LAUNCH(ln_forward_kernel, cu_blocks(N, LN_ROWS_PER_BLOCK, INT32_MAX), 32 * LN_ROWS_PER_BLOCK, 0,
                 lp_cu_nn_stream(), out, mean, rstd, inp, weight, bias, N, (int)C, eps);
    (void)lp_cu_nn_launched("layernorm_forward");
}

extern "C" void lp_cu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                         const float *inp, const float *weight, const float *mean,
                                         const float *rstd, int64_t N, int64_t C)
{
    if (N <= 0 || C <= 0)
        return;
    cudaStream_t st = lp_cu_nn_stream();
    LP_CU_LAUNCH(ln_backward_dinp_kernel, cu_blocks(N, LN_ROWS_PER_BLOCK, INT32_MAX), 32 * LN_ROWS_PER_BLOCK,
                 0, st, dinp, dout, inp, weight, mean, rstd, N, (int)C);
    if (lp_cu_nn_launched("layernorm_backward") != LP_OK || (!dweight && !dbias))
        return;
    const int64_t chunk = ln_chunk(N), G = (N + chunk - 1) / chunk;
    float *part = (float *)lp_cu_nn_scratch((size_t)(2 * G * C) * sizeof(float), "layernorm_backward");
    if (!part)
        return;
    LP_CU_LAUNCH(ln_backward_part_kernel, dim3((unsigned)((C + 31) / 32), (unsigned)G), dim3(32, 8), 0, st,
                 part, part + G * C, dout, inp, mean, rstd, N, (int)C, chunk);
    if (lp_cu_nn_launched("layernorm_backward (partials)") == LP_OK) {
        LP_CU_LAUNCH(ln_backward_final_kernel, cu_blocks(C, 256, INT32_MAX), 256, 0, st, dweight, dbias, part,
                     part + G * C, G, (int)C);
        (void)lp_cu_nn_launched("layernorm_backward (sums)");
    }
    lp_cu_nn_scratch_free(part);
}
