// Random fills for the peak probe's GEMM operands (generated on the device: an 8192^2
// upload would take longer than the products it feeds). Random data, since products of
// zeros or constants read faster than real work.
#include <cuda_bf16.h>

#include "cuda_kernels.h"

static __global__ void fill_k(void *x, int64_t n, uint32_t seed, bool bf16)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)(i >> 32) * 0x85EBCA77u ^ seed;
        h ^= h >> 16, h *= 0x7FEB352Du, h ^= h >> 15, h *= 0x846CA68Bu, h ^= h >> 16; // a 32-bit mixer
        float v = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
        if (bf16)
            ((__nv_bfloat16 *)x)[i] = __float2bfloat16(v);
        else
            ((float *)x)[i] = v;
    }
}

extern "C" void lp_cu_fill_uniform(void *x, int64_t n, uint32_t seed, bool bf16)
{
    if (n == 0)
        return;
    fill_k<<<lp_cu_blocks(n, 256), 256, 0, lp_cu_stream()>>>(x, n, seed, bf16);
    lp_cu_check("fill_uniform");
}
