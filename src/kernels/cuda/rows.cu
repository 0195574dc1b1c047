// Row gather and scatter-add by index (pooling one row per sequence, and its backward).
// The scatter gives each thread one column and walks i in order, so repeated indices add up
// in the CPU reference's order: equal to it bit for bit, with no atomics.
#include "cuda_kernels.h"

static __global__ void gather_k(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n * C; e += (int64_t)gridDim.x * blockDim.x)
        out[e] = x[idx[e / C] * C + e % C];
}

static __global__ void scatter_add_k(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x)
        for (int64_t i = 0; i < n; i++)
            dx[idx[i] * C + c] += dout[i * C + c];
}

extern "C" void lp_cu_rows_gather(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C)
{
    if (n * C == 0)
        return;
    gather_k<<<lp_cu_blocks(n * C, 256), 256, 0, lp_cu_stream()>>>(out, x, idx, n, C);
    lp_cu_check("rows_gather");
}

extern "C" void lp_cu_rows_scatter_add(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C)
{
    if (n * C == 0)
        return;
    scatter_add_k<<<lp_cu_blocks(C, 128), 128, 0, lp_cu_stream()>>>(dx, dout, idx, n, C);
    lp_cu_check("rows_scatter_add");
}
