/* NF4 weight times a few activation rows without an f32 copy of the weight: each block's
 * 64 codes go through the 16-entry code table in registers (a permute), multiply the
 * activations, and the block's scale is applied once to the block's sum. Decode is
 * bandwidth-bound, so reading 0.5 byte per weight instead of writing and re-reading 4
 * (dequantize-then-multiply) is the whole gain. Rows are split across the pool. */
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "simd.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

enum { MAXN = 8, SCB = 64 }; /* activation rows per pass; block scales fetched per call */

bool lp_k_nf4_gemv_fits(const lp_qweight *w)
{
    return w && w->dtype == LP_DTYPE_NF4 && w->cols % LP_NF4_BLOCK == 0 && !w->bnb_cpu_rows;
}

/* acc[i] += sum over one 64-element block of code(w) * x_i (n rows of x, stride C). */
static void block_dot(float *acc, const uint8_t *codes, const float *x, int64_t C, int64_t n)
{
#if defined(__AVX512F__)
    const __m512 lut = _mm512_loadu_ps(lp_nf4_code);
    __m512 s[MAXN];
    for (int64_t i = 0; i < n; i++)
        s[i] = _mm512_setzero_ps();
    for (int c = 0; c < 4; c++) { /* 16 elements from 8 bytes: high nibble first */
        __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(codes + 8 * c)));
        __m128i pair = _mm_or_si128(_mm_srli_epi16(b, 4), _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(15)), 8));
        __m512 v = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(pair), lut);
        for (int64_t i = 0; i < n; i++)
            s[i] = _mm512_fmadd_ps(v, _mm512_loadu_ps(x + i * C + 16 * c), s[i]);
    }
    for (int64_t i = 0; i < n; i++)
        acc[i] = _mm512_reduce_add_ps(s[i]);
#elif defined(__AVX2__)
    const __m256 lo = _mm256_loadu_ps(lp_nf4_code), hi = _mm256_loadu_ps(lp_nf4_code + 8);
    __m256 s[MAXN];
    for (int64_t i = 0; i < n; i++)
        s[i] = _mm256_setzero_ps();
    for (int c = 0; c < 8; c++) { /* 8 elements from 4 bytes */
        uint32_t u;
        memcpy(&u, codes + 4 * c, 4);
        __m128i b = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)u));
        __m128i pair = _mm_or_si128(_mm_srli_epi16(b, 4), _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(15)), 8));
        __m256i idx = _mm256_cvtepu8_epi32(pair);
        /* codes 8..15 from the upper table: bit 3 moved to the sign bit picks it */
        __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
        for (int64_t i = 0; i < n; i++)
            s[i] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + i * C + 8 * c), s[i]);
    }
    for (int64_t i = 0; i < n; i++)
        acc[i] = lp_hsum256(s[i]);
#else
    for (int64_t i = 0; i < n; i++) {
        float s = 0.0f;
        for (int j = 0; j < 32; j++)
            s += lp_nf4_code[codes[j] >> 4] * x[i * C + 2 * j] + lp_nf4_code[codes[j] & 15] * x[i * C + 2 * j + 1];
        acc[i] = s;
    }
#endif
}

void lp_k_nf4_gemv(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N, int64_t C,
                   int64_t OC)
{
    const int64_t bpr = C / LP_NF4_BLOCK; /* blocks per row */
#pragma omp parallel if ((double)OC * (double)C >= 65536.0)
    {
        int64_t lo, hi;
        lp_k_split(OC, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        float sc[SCB], part[MAXN], tot[MAXN];
        for (int64_t i0 = 0; i0 < N; i0 += MAXN) {
            const int64_t n = N - i0 < MAXN ? N - i0 : MAXN;
            for (int64_t o = lo; o < hi; o++) {
                for (int64_t i = 0; i < n; i++)
                    tot[i] = 0.0f;
                for (int64_t k0 = 0; k0 < bpr; k0 += SCB) {
                    const int64_t kb = bpr - k0 < SCB ? bpr - k0 : SCB;
                    lp_k_nf4_block_scales(w, o * bpr + k0, kb, sc);
                    for (int64_t k = k0; k < k0 + kb; k++) {
                        block_dot(part, w->codes + (o * bpr + k) * (LP_NF4_BLOCK / 2),
                                  inp + i0 * C + k * LP_NF4_BLOCK, C, n);
                        for (int64_t i = 0; i < n; i++)
                            tot[i] += sc[k - k0] * part[i];
                    }
                }
                for (int64_t i = 0; i < n; i++)
                    out[(i0 + i) * OC + o] = bias ? tot[i] + bias[o] : tot[i];
            }
        }
    }
}
