/* RMSNorm forward and backward on the GPU (rmsnorm.c's semantics: transformers' float32
 * order, out = weight * (x * rstd)). One warp per row; the weight gradient through per-chunk
 * partials summed in order (deterministic), computed BEFORE the input gradient because
 * dinp may alias dout. */
#include "cu_nn_common.cuh"

#define RMS_ROWS_PER_BLOCK 8

__global__ void rms_forward_kernel(float *out, float *rstd, const float *inp, const float *weight, int64_t N,
                                   int C, float eps)
{
    const int64_t row = (int64_t)blockIdx.x * RMS_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N)
        return;
    const float *x = inp + row * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32)
        ss += x[c] * x[c];
    const float r = 1.0f / sqrtf(warp_sum(ss) / (float)C + eps);
    float *o = out + row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = weight[c] * (x[c] * r);
    if (lane == 0)
        rstd[row] = r;
}

/* dinp may be dout: every lane finishes reading the row for the reduction (warp_sum
 * synchronizes the warp) before any element is written, and each element is read by the
 * lane that then writes it. */
__global__ void rms_backward_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                         const float *weight, const float *rstd, int64_t N, int C)
{
    const int64_t row = (int64_t)blockIdx.x * RMS_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N)
        return;
    const float *x = inp + row * C, *d = dout + row * C;
    const float r = rstd[row];
    float dot = 0.0f;
    for (int c = lane; c < C; c += 32)
        dot += d[c] * weight[c] * x[c];
    const float k = r * r * r * warp_sum(dot) / (float)C;
    float *di = dinp + row * C;
    for (int c = lane; c < C; c += 32) {
        float dc = d[c];
        di[c] = dc * r * weight[c] - k * x[c];
    }
}

/* part (G, C): chunk g's sum over its rows of dout * (inp * rstd); block (32, 8). */
__global__ void rms_backward_part_kernel(float *part, const float *dout, const float *inp, const float *rstd,
                                         int64_t N, int C, int64_t chunk)
{
    __shared__ float sw[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx;
    const int64_t g = blockIdx.y, r0 = g * chunk, r1 = r0 + chunk < N ? r0 + chunk : N;
    float aw = 0.0f;
    if (c < C)
        for (int64_t i = r0 + ty; i < r1; i += 8)
            aw += dout[i * C + c] * (inp[i * C + c] * rstd[i]);
    sw[ty][tx] = aw;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int k = 1; k < 8; k++)
            aw += sw[k][tx];
        part[g * C + c] = aw;
    }
}

__global__ void rms_backward_final_kernel(float *dweight, const float *part, int64_t G, int C)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float a = 0.0f;
    for (int64_t g = 0; g < G; g++)
        a += part[g * C + c];
    dweight[c] += a;
}

extern "C" void lp_cu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                                      int64_t N, int64_t C, float eps)
{
    if (N <= 0 || C <= 0)
        return;
    LP_CU_LAUNCH(rms_forward_kernel, cu_blocks(N, RMS_ROWS_PER_BLOCK, INT32_MAX), 32 * RMS_ROWS_PER_BLOCK, 0,
                 lp_cu_nn_stream(), out, rstd, inp, weight, N, (int)C, eps);
    (void)lp_cu_nn_launched("rmsnorm_forward");
}

extern "C" void lp_cu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                       const float *weight, const float *rstd, int64_t N, int64_t C)
{
    if (N <= 0 || C <= 0)
        return;
    cudaStream_t st = lp_cu_nn_stream();
    if (dweight) { /* first: dinp may overwrite dout */
        int64_t chunk = (N + 255) / 256;
        chunk = chunk < 64 ? 64 : chunk;
        const int64_t G = (N + chunk - 1) / chunk;
        float *part = (float *)lp_cu_nn_scratch((size_t)(G * C) * sizeof(float), "rmsnorm_backward");
        if (!part)
            return;
        LP_CU_LAUNCH(rms_backward_part_kernel, dim3((unsigned)((C + 31) / 32), (unsigned)G), dim3(32, 8), 0,
                     st, part, dout, inp, rstd, N, (int)C, chunk);
        if (lp_cu_nn_launched("rmsnorm_backward (partials)") == LP_OK) {
            LP_CU_LAUNCH(rms_backward_final_kernel, cu_blocks(C, 256, INT32_MAX), 256, 0, st, dweight, part,
                         G, (int)C);
            (void)lp_cu_nn_launched("rmsnorm_backward (sums)");
        }
        lp_cu_nn_scratch_free(part);
    }
    LP_CU_LAUNCH(rms_backward_dinp_kernel, cu_blocks(N, RMS_ROWS_PER_BLOCK, INT32_MAX),
                 32 * RMS_ROWS_PER_BLOCK, 0, st, dinp, dout, inp, weight, rstd, N, (int)C);
    (void)lp_cu_nn_launched("rmsnorm_backward");
}
