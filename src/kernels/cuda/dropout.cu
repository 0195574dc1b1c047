// Inverted dropout with the CPU's mask: element i keeps when lane d % 4 of Philox counter
// rng->offset + d / 4, d = rng->lane + i, gives u01 >= p (lp_k_dropout_forward_ref), so a model trained here
// drops what the CPU would. One thread per counter block of 4 elements; the host advances
// the rng as the CPU does (lp_rng_skip).
#include "cuda_kernels.h"
#include "philox.cuh"

#define THREADS 256

static __global__ void dropout_fwd_k(float *out, uint8_t *keep, const float *inp, int64_t n, float p, float s,
                                     uint64_t seed, uint64_t stream, uint64_t offset, int64_t lane)
{
    int64_t blocks = (lane + n + 3) / 4;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < blocks; b += (int64_t)gridDim.x * blockDim.x) {
        uint32_t x[4];
        lp_cu_philox(seed, stream, offset + (uint64_t)b, x);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int64_t i = 4 * b + j - lane;
            if (i >= 0 && i < n) {
                uint8_t k = lp_cu_u01(x[j]) >= p;
                keep[i] = k;
                out[i] = k ? inp[i] * s : 0.0f;
            }
        }
    }
}

extern "C" void lp_cu_dropout_forward(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng)
{
    if (n > 0) {
        dropout_fwd_k<<<lp_cu_blocks((rng->lane + n + 3) / 4, THREADS), THREADS, 0, lp_cu_stream()>>>(
            out, keep, inp, n, p, 1.0f / (1.0f - p), rng->seed, rng->stream, rng->offset, (int64_t)rng->lane);
        lp_cu_check("dropout_forward");
    }
    lp_rng_skip(rng, n);
}

static __global__ void dropout_bwd_k(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float s)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dinp[i] = keep[i] ? dout[i] * s : 0.0f;
}

extern "C" void lp_cu_dropout_backward(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p)
{
    if (n == 0)
        return;
    dropout_bwd_k<<<lp_cu_blocks(n, THREADS), THREADS, 0, lp_cu_stream()>>>(dinp, dout, keep, n, 1.0f / (1.0f - p));
    lp_cu_check("dropout_backward");
}
