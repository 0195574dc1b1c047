// Kernels for tests/prof/cupti_record: small, known shapes, so the records can be checked
// by eye (grid, block, registers) and two of them overlap on two streams.
#include <cuda_runtime.h>

__global__ void lp_rec_scale(float *x, float a, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        for (int r = 0; r < reps; r++) // long enough to overlap the other stream's kernel
            v = v * a + 1e-7f;
        x[i] = v;
    }
}

__global__ void lp_rec_add(const float *a, const float *b, float *c, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[i];
        for (int r = 0; r < reps; r++)
            v = v + b[i] * 1e-7f;
        c[i] = v;
    }
}

extern "C" int lp_rec_launch_scale(float *x, float a, int n, int reps, cudaStream_t s)
{
    lp_rec_scale<<<(n + 255) / 256, 256, 0, s>>>(x, a, n, reps);
    return (int)cudaGetLastError();
}

extern "C" int lp_rec_launch_add(const float *a, const float *b, float *c, int n, int reps, cudaStream_t s)
{
    lp_rec_add<<<(n + 127) / 128, 128, 0, s>>>(a, b, c, n, reps);
    return (int)cudaGetLastError();
}
