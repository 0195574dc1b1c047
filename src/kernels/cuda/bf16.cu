// f32 -> bf16 rounding on the device for --dtype bf16 (cuda_bf16.c): nearest even, NaN kept
// quiet, bit for bit the CPU's rule (../cpu/bf16_train.c), so both sides multiply the same
// bf16 values. float4 loads and 8-byte stores where both pointers allow, else one element
// per thread; the same expression either way.
#include "cuda_kernels.h"

#define THREADS 256
#define GRID_STRIDE(i, n)                                                                                    \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                                \
         i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ uint32_t rnd(float f)
{
    const uint32_t u = __float_as_uint(f);
    return ((u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

static __global__ void round_bf16_k(uint16_t *out, const float *x, int64_t n)
{
    GRID_STRIDE(i, n) out[i] = (uint16_t)rnd(x[i]);
}

// n4 float4s -> n4 pairs of 32-bit words (two bf16 each, the lower index in the low half)
static __global__ void round_bf16_v4_k(uint2 *out, const float4 *x, int64_t n4)
{
    GRID_STRIDE(i, n4)
    {
        const float4 v = x[i];
        out[i] = make_uint2(rnd(v.x) | rnd(v.y) << 16, rnd(v.z) | rnd(v.w) << 16);
    }
}

extern "C" void lp_cu_round_bf16(uint16_t *out, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    int64_t done = 0;
    if (((uintptr_t)x & 15) == 0 && ((uintptr_t)out & 7) == 0 && n >= 4) {
        const int64_t n4 = n / 4;
        round_bf16_v4_k<<<lp_cu_blocks(n4, THREADS), THREADS, 0, lp_cu_stream()>>>((uint2 *)out,
                                                                                   (const float4 *)x, n4);
        done = n4 * 4;
    }
    if (done < n)
        round_bf16_k<<<lp_cu_blocks(n - done, THREADS), THREADS, 0, lp_cu_stream()>>>(out + done, x + done,
                                                                                      n - done);
    lp_cu_check("round_bf16");
}
