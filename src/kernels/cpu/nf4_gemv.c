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

/* The 64 codes of one block (32 bytes, element 2j in the high nibble of byte j) as four
 * 16-byte vectors of code indices in element order. */
#if defined(__AVX2__)
static inline void block_codes(const uint8_t *codes, __m128i q[4])
{
    const __m256i b = _mm256_loadu_si256((const __m256i *)codes), m4 = _mm256_set1_epi8(0x0F);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4), lo = _mm256_and_si256(b, m4);
    const __m256i i0 = _mm256_unpacklo_epi8(hi, lo), i1 = _mm256_unpackhi_epi8(hi, lo);
    q[0] = _mm256_castsi256_si128(i0);      /* bytes 0-7: elements 0-15 */
    q[1] = _mm256_castsi256_si128(i1);      /* bytes 8-15: elements 16-31 */
    q[2] = _mm256_extracti128_si256(i0, 1); /* bytes 16-23: elements 32-47 */
    q[3] = _mm256_extracti128_si256(i1, 1); /* bytes 24-31: elements 48-63 */
}
#endif

/* tot[i] = sum_k scale_k * sum over block k of code(w) * x_i, for the bpr blocks of one row
 * (n activation rows of x, stride C; n is a constant where the caller specializes). The
 * block sums stay in vector registers and take their scale with one FMA per vector. */
static inline void row_dot(float *tot, const uint8_t *codes, const float *sc, const float *x, int64_t C,
                           int64_t bpr, int64_t n)
{
#if defined(__AVX512F__)
    const __m512 lut = _mm512_loadu_ps(lp_nf4_code);
    __m512 acc[MAXN];
    for (int64_t i = 0; i < n; i++)
        acc[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < bpr; k++, codes += 32) {
        __m128i q[4];
        block_codes(codes, q);
        __m512 v[4];
        for (int c = 0; c < 4; c++)
            v[c] = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(q[c]), lut);
        const __m512 s = _mm512_set1_ps(sc[k]);
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + i * C + 64 * k;
            __m512 b = _mm512_mul_ps(v[0], _mm512_loadu_ps(xi));
            b = _mm512_fmadd_ps(v[1], _mm512_loadu_ps(xi + 16), b);
            b = _mm512_fmadd_ps(v[2], _mm512_loadu_ps(xi + 32), b);
            b = _mm512_fmadd_ps(v[3], _mm512_loadu_ps(xi + 48), b);
            acc[i] = _mm512_fmadd_ps(b, s, acc[i]);
        }
    }
    for (int64_t i = 0; i < n; i++)
        tot[i] = _mm512_reduce_add_ps(acc[i]);
#elif defined(__AVX2__)
    const __m256 lo = _mm256_loadu_ps(lp_nf4_code), hi = _mm256_loadu_ps(lp_nf4_code + 8);
    __m256 acc[MAXN];
    for (int64_t i = 0; i < n; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t k = 0; k < bpr; k++, codes += 32) {
        __m128i q[4];
        block_codes(codes, q);
        __m256 v[8];
        for (int c = 0; c < 8; c++) {
            __m256i idx = _mm256_cvtepu8_epi32(c % 2 ? _mm_srli_si128(q[c / 2], 8) : q[c / 2]);
            /* codes 8..15 from the upper half of the table: bit 3 moved to the sign bit picks it */
            v[c] = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
        }
        const __m256 s = _mm256_set1_ps(sc[k]);
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + i * C + 64 * k;
            __m256 b = _mm256_mul_ps(v[0], _mm256_loadu_ps(xi));
            for (int c = 1; c < 8; c++)
                b = _mm256_fmadd_ps(v[c], _mm256_loadu_ps(xi + 8 * c), b);
            acc[i] = _mm256_fmadd_ps(b, s, acc[i]);
        }
    }
    for (int64_t i = 0; i < n; i++)
        tot[i] = lp_hsum256(acc[i]);
#else
    for (int64_t i = 0; i < n; i++)
        tot[i] = 0.0f;
    for (int64_t k = 0; k < bpr; k++, codes += 32)
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + i * C + 64 * k;
            float b = 0.0f;
            for (int j = 0; j < 32; j++)
                b += lp_nf4_code[codes[j] >> 4] * xi[2 * j] + lp_nf4_code[codes[j] & 15] * xi[2 * j + 1];
            tot[i] += sc[k] * b;
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
                for (int64_t k0 = 0; k0 < bpr; k0 += SCB) { /* scales reconstructed SCB blocks at a time */
                    const int64_t kb = bpr - k0 < SCB ? bpr - k0 : SCB;
                    lp_k_nf4_block_scales(w, o * bpr + k0, kb, sc);
                    const uint8_t *codes = w->codes + (o * bpr + k0) * (LP_NF4_BLOCK / 2);
                    const float *x = inp + i0 * C + k0 * LP_NF4_BLOCK;
                    if (n == 1) /* decode: the constant lets the accumulators live in registers */
                        row_dot(part, codes, sc, x, C, kb, 1);
                    else
                        row_dot(part, codes, sc, x, C, kb, n);
                    for (int64_t i = 0; i < n; i++)
                        tot[i] += part[i];
                }
                for (int64_t i = 0; i < n; i++)
                    out[(i0 + i) * OC + o] = bias ? tot[i] + bias[o] : tot[i];
            }
        }
    }
}
