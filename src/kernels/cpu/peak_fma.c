/* The FMA chains `loupe peak` times, compiled once per ISA level like the kernels (the
 * widest vectors this copy was built for): the peak is that of the level that runs. */
#include "cpu_kernels.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

/* 12 independent chains cover FMA latency (4 cycles) times two FMA pipes with room.
 * Returns a float sink so the compiler cannot drop the work. One body per vector width. */
#define FMA_CHAIN(fname, vec, VSET, VFMA, VADD, VSTORE, LANES)                                                   \
    static float fname(int64_t iters)                                                                           \
    {                                                                                                           \
        vec a0 = VSET(1.0f), a1 = VSET(1.1f), a2 = VSET(1.2f), a3 = VSET(1.3f), a4 = VSET(1.4f);                \
        vec a5 = VSET(1.5f), a6 = VSET(1.6f), a7 = VSET(1.7f), a8 = VSET(1.8f), a9 = VSET(1.9f);                \
        vec a10 = VSET(2.0f), a11 = VSET(2.1f);                                                                 \
        const vec b = VSET(0.999999f), c = VSET(1e-6f);                                                         \
        for (int64_t i = 0; i < iters; i++) {                                                                   \
            a0 = VFMA(a0, b, c), a1 = VFMA(a1, b, c), a2 = VFMA(a2, b, c), a3 = VFMA(a3, b, c);                 \
            a4 = VFMA(a4, b, c), a5 = VFMA(a5, b, c), a6 = VFMA(a6, b, c), a7 = VFMA(a7, b, c);                 \
            a8 = VFMA(a8, b, c), a9 = VFMA(a9, b, c), a10 = VFMA(a10, b, c), a11 = VFMA(a11, b, c);             \
            __asm__ volatile("" ::: "memory"); /* keep the loop as written */                                   \
        }                                                                                                       \
        vec s = VADD(VADD(VADD(a0, a1), VADD(a2, a3)), VADD(VADD(a4, a5), VADD(a6, a7)));                       \
        s = VADD(s, VADD(VADD(a8, a9), VADD(a10, a11)));                                                        \
        float t[LANES], sum = 0.0f;                                                                             \
        VSTORE(t, s);                                                                                           \
        for (int i = 0; i < LANES; i++)                                                                         \
            sum += t[i];                                                                                        \
        return sum;                                                                                             \
    }

#define SCALAR_SET(x) (x)
#define SCALAR_FMA(a, b, c) ((a) * (b) + (c))
#define SCALAR_ADD(a, b) ((a) + (b))
#define SCALAR_STORE(t, v) ((t)[0] = (v))
FMA_CHAIN(fma_chain32, float, SCALAR_SET, SCALAR_FMA, SCALAR_ADD, SCALAR_STORE, 1)
#if defined(__SSE2__) /* x86-64-v2 has no FMA: its peak is a multiply and an add per SSE lane */
#define SSE_FMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
FMA_CHAIN(fma_chain128, __m128, _mm_set1_ps, SSE_FMA, _mm_add_ps, _mm_storeu_ps, 4)
#endif
#if defined(__AVX2__) && defined(__FMA__)
FMA_CHAIN(fma_chain256, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps, 8)
#endif
#if defined(__AVX512F__)
FMA_CHAIN(fma_chain512, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps, 16)
#endif

float lp_k_fma_chain_opt(int bits, int64_t iters)
{
    (void)bits;
#if defined(__AVX512F__)
    if (bits == 512)
        return fma_chain512(iters);
#endif
#if defined(__AVX2__) && defined(__FMA__)
    if (bits == 256)
        return fma_chain256(iters);
#endif
#if defined(__SSE2__)
    if (bits == 128)
        return fma_chain128(iters);
#endif
    return fma_chain32(iters);
}

int lp_k_fma_bits_opt(void)
{
#if defined(__AVX512F__)
    return 512;
#elif defined(__AVX2__) && defined(__FMA__)
    return 256;
#elif defined(__SSE2__)
    return 128;
#else
    return 32;
#endif
}

