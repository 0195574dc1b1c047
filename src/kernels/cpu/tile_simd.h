/* The vectors of the integer tile GEMMs (qgemm_ggml.c: GGML blocks, i8gemm.c: row-scaled
 * int8), one definition for each ISA copy that includes it, and the bias vectors of one
 * group of weight vectors. Include inside `#if defined(__AVX2__)`; each file adds its own
 * VNNI dot product (QG_VNNI / I8_VNNI). */
#ifndef LP_TILE_SIMD_H
#define LP_TILE_SIMD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* two tiles (32 weight rows) by 6 activation rows: each activation broadcast feeds two
 * vectors, 12 (i8gemm) or 24 (qgemm_ggml: two sums a block) accumulators of the 32 registers;
 * ~11 % more GFLOP/s on SmolLM2's Q8_0/Q4_0 shapes (bench_qgemv --cpu-time, Zen 5) than 1 x 8 */
#define LP_TILE_AVX512 1
enum { VL = 16, NV = 2, MR = 6 };
typedef __m512i vint;
typedef __m512 vflt;
#define VI_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define VI_SET1(x) _mm512_set1_epi32(x)
#define VI_SET1_8(x) _mm512_set1_epi8(x)
#define VI_ZERO() _mm512_setzero_si512()
#define VI_AND _mm512_and_si512
#define VI_XOR _mm512_xor_si512
#define VI_SRLI16 _mm512_srli_epi16
#define VI_ADD16 _mm512_add_epi16
#define VI_ADD32 _mm512_add_epi32
#define VI_SUB32 _mm512_sub_epi32
#define VI_SLLI32 _mm512_slli_epi32
#define VI_MADDUBS _mm512_maddubs_epi16
#define VI_MADD1(x) _mm512_madd_epi16((x), _mm512_set1_epi16(1))
#define VI_ABS8 _mm512_abs_epi8
/* x with its bytes negated where w's are negative (w = 0 pairs with |w| = 0) */
typedef __mmask64 vneg; /* the bytes to negate */
#define VI_NEGMASK8(w) _mm512_movepi8_mask(w)
#define VI_FLIP8(x, neg) _mm512_mask_sub_epi8((x), (neg), _mm512_setzero_si512(), (x))
#define VF_LOAD _mm512_loadu_ps
#define VF_SET1 _mm512_set1_ps
#define VF_ZERO _mm512_setzero_ps
#define VF_FMA _mm512_fmadd_ps
#define VF_MUL _mm512_mul_ps
#define VF_ADD _mm512_add_ps
#define VF_STORE _mm512_storeu_ps
#define VI_CVT _mm512_cvtepi32_ps
#else
/* both halves of a tile by 3 activation rows (6 or 12 accumulators of the 16 registers; the
 * sign trick needs its temporaries in the others): +10 % on Q4_0 over one half by 4 rows,
 * Q8_0 the same */
enum { VL = 8, NV = 2, MR = 3 };
typedef __m256i vint;
typedef __m256 vflt;
#define VI_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VI_SET1(x) _mm256_set1_epi32(x)
#define VI_SET1_8(x) _mm256_set1_epi8(x)
#define VI_ZERO() _mm256_setzero_si256()
#define VI_AND _mm256_and_si256
#define VI_XOR _mm256_xor_si256
#define VI_SRLI16 _mm256_srli_epi16
#define VI_ADD16 _mm256_add_epi16
#define VI_ADD32 _mm256_add_epi32
#define VI_SUB32 _mm256_sub_epi32
#define VI_SLLI32 _mm256_slli_epi32
#define VI_MADDUBS _mm256_maddubs_epi16
#define VI_MADD1(x) _mm256_madd_epi16((x), _mm256_set1_epi16(1))
#define VI_ABS8 _mm256_abs_epi8
/* x negated where w is negative, zeroed where w is 0 (|w| = 0 there): one vpsignb. (x ^ m) - m
 * with m = w < 0 once per weight vector measured 13 % slower on Zen 5: the Q8_0 loop is
 * bound by its vector op count, not by the multiply pipes. */
typedef __m256i vneg;
#define VI_NEGMASK8(w) (w)
#define VI_FLIP8(x, w) _mm256_sign_epi8((x), (w))
#define VF_LOAD _mm256_loadu_ps
#define VF_SET1 _mm256_set1_ps
#define VF_ZERO _mm256_setzero_ps
#define VF_FMA _mm256_fmadd_ps
#define VF_MUL _mm256_mul_ps
#define VF_ADD _mm256_add_ps
#define VF_STORE _mm256_storeu_ps
#define VI_CVT _mm256_cvtepi32_ps
#endif

/* The group of NV weight vectors at output o0 (gr rows a group, rows_left of them real):
 * ob[v] = the real outputs of vector v (0: none), vb[v] = their bias (0 where none or past
 * the end). Returns how many vectors have rows. */
static inline int lp_tile_group_bias(vflt vb[NV], int ob[NV], const float *bias, int64_t o0, int64_t rows_left,
                                     int64_t gr)
{
    int nv = 0;
    for (int v = 0; v < NV; v++) {
        const int64_t left = v * VL >= gr ? 0 : rows_left - v * VL;
        ob[v] = left <= 0 ? 0 : left < VL ? (int)left : VL;
        nv += ob[v] > 0;
        float bb[VL] = {0};
        if (bias && ob[v])
            memcpy(bb, bias + o0 + v * VL, (size_t)ob[v] * sizeof(float));
        vb[v] = VF_LOAD(bb);
    }
    return nv;
}

/* n (1..VL) outputs of y to out: a full vector, or its first n through a stack copy */
static inline __attribute__((always_inline)) void lp_tile_store(float *out, vflt y, int n)
{
    if (n == VL) {
        VF_STORE(out, y);
    } else {
        float tmp[VL];
        VF_STORE(tmp, y);
        memcpy(out, tmp, (size_t)n * sizeof(float));
    }
}

#endif
