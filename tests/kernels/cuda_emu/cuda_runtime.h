/* CPU emulator of CUDA C++ for the NN kernels (LP_CUDA_EMU builds; see cuda_runtime_api.h).
 * Every block runs alone; its threads are cooperative fibers (cuda_emu.cpp) that switch at
 * __syncthreads and at warp shuffles, so barriers and shuffles keep CUDA's semantics, and the
 * emulator aborts on what would be undefined on a GPU: a warp split across different
 * barriers, a shuffle reading a lane that has exited, a deadlocked barrier, a launch
 * configuration the hardware refuses (threads, grid, shared memory above 48 KiB without
 * cudaFuncAttributeMaxDynamicSharedMemorySize, above 227 KiB at all). Dynamic shared memory
 * starts NaN-filled. `__shared__` variables are function statics (one block at a time). */
#ifndef LP_CUDA_EMU_RUNTIME_H
#define LP_CUDA_EMU_RUNTIME_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <functional>
#include <tuple>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct alignas(16) float4 {
    float x, y, z, w;
};

static inline float4 make_float4(float x, float y, float z, float w)
{
    float4 r;
    r.x = x, r.y = y, r.z = z, r.w = w;
    return r;
}

struct alignas(8) uint2 {
    unsigned x, y;
};

static inline uint2 make_uint2(unsigned x, unsigned y)
{
    uint2 r;
    r.x = x, r.y = y;
    return r;
}

static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* a device-side assertion failure: the emulator stops */
[[noreturn]] void __trap(void);

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

void __syncthreads(void);
void lp_emu_sync_warp(void);
int lp_emu_lane(void);
uint64_t *lp_emu_warp_slots(void);
void lp_emu_check_lane(int lane); /* aborts when that lane of the current warp has exited */
void *lp_emu_dyn_smem(void);
void lp_emu_run(dim3 g, dim3 b, size_t smem, const void *key, const std::function<void()> &body);
cudaError_t lp_emu_set_smem_attr(const void *key, int bytes);

/* every live lane of the warp waits here (a lane still elsewhere is a deadlock or a split warp) */
static inline void __syncwarp(unsigned = 0xffffffffu)
{
    lp_emu_sync_warp();
}

template <class T> static inline T __shfl_sync(unsigned, T v, int src)
{
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    uint64_t *slots = lp_emu_warp_slots(), u = 0;
    memcpy(&u, &v, sizeof v);
    slots[lp_emu_lane()] = u;
    lp_emu_sync_warp();
    src &= 31;
    lp_emu_check_lane(src);
    uint64_t r = slots[src];
    lp_emu_sync_warp(); /* nobody overwrites the slots before every lane has read */
    T out;
    memcpy(&out, &r, sizeof out);
    return out;
}
template <class T> static inline T __shfl_xor_sync(unsigned m, T v, int o)
{
    return __shfl_sync(m, v, lp_emu_lane() ^ o);
}

/* one OS thread runs every fiber: plain read-modify-writes are atomic here */
static inline int atomicCAS(int *p, int cmp, int val)
{
    int old = *p;
    if (old == cmp)
        *p = val;
    return old;
}
static inline float atomicAdd(float *p, float v)
{
    float old = *p;
    *p = old + v;
    return old;
}
static inline uint32_t __umulhi(uint32_t a, uint32_t b)
{
    return (uint32_t)(((uint64_t)a * b) >> 32);
}
static inline float __fmul_rn(float a, float b)
{
    volatile float r = a * b; /* never contracted into an FMA */
    return r;
}

template <class T> static inline cudaError_t cudaFuncSetAttribute(T *f, enum cudaFuncAttribute attr, int v)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return cudaErrorInvalidValue;
    return lp_emu_set_smem_attr((const void *)f, v);
}

template <class... P, class... A>
static inline void lp_emu_launch(void (*k)(P...), dim3 g, dim3 b, size_t smem, A &&...a)
{
    std::tuple<P...> args((P)a...);
    lp_emu_run(g, b, smem, (const void *)k, [&] { std::apply(k, args); });
}

#endif
