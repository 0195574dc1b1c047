// Philox4x32-10 on the device, the same function as lp_rng_philox (src/core/rng.c), so a
// mask drawn here equals the CPU's element for element: dropout, and the fused attention's
// dropout (lp_attn_dropout), draw lane e % 4 of counter offset + e / 4.
#ifndef LP_KERNELS_CUDA_PHILOX_CUH
#define LP_KERNELS_CUDA_PHILOX_CUH

#include <stdint.h>

static __device__ __forceinline__ void lp_cu_philox(uint64_t seed, uint64_t stream, uint64_t ctr, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

// lp_rng_u01: the top 24 bits as a float in [0, 1), exactly
static __device__ __forceinline__ float lp_cu_u01(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

#endif
