/* The 5-bit GGML formats times 8-bit activation blocks: Q5_0 and Q5_1 (blocks of 32, against
 * lp_q8a) and Q5_K (blocks of 256, against lp_q8k). Each stores Q4's nibbles plus one fifth
 * bit per element; the dot products rebuild q in [0, 31] as bytes and take the same integer
 * sums as their 4-bit siblings, the offsets (Q5_0's -16, Q5_1's m, Q5_K's mins) applied per
 * block from the activations' cached sums. llama.cpp falls back to Q5_0 / Q5_1 for the
 * tensors whose rows are not whole 256-blocks (SmolLM2's 576, Qwen2.5's 896), so its Q4_K_M
 * and Q5_K_M files of those models hold them. */
#include "qdot.h"

/* The little-endian 32-bit word at p. */
static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#if defined(__AVX2__)
/* 32 bytes: 0x10 where bit j of bits is set (byte j), else 0: each byte picks its source
 * byte j/8 of the word (a shuffle within each 128-bit lane, where the word repeats), then
 * tests its own bit j%8. */
static inline __m256i fifth_bits(uint32_t bits)
{
    const __m256i pick = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), pick);
    b = _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}

/* A Q5_0 / Q5_1 block's 32 values q in [0, 31] as bytes, in element order. */
static inline __m256i q5_bytes(const uint8_t *qh, const uint8_t *qs)
{
    return _mm256_or_si256(lp_qd_nibbles16(qs), fifth_bits(le32(qh)));
}
#else
/* Element j (< 32) of a Q5_0 / Q5_1 block's q. */
static inline int q5_at(const uint8_t *qh, const uint8_t *qs, int j)
{
    const int nib = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    return nib | (int)((le32(qh) >> j) & 1) << 4;
}
#endif

/* Q5_0 (f16 d, 4 bytes of fifth bits, 16 of nibbles; value = d (q - 16)):
 * sum = d d_a sum(q q_a) - 16 d (d_a sum(q_a)). */
float lp_k_dot_q5_0(int64_t nb, const uint8_t *w, const lp_q8a *a)
{
#if defined(__AVX2__)
    __m256 acc = _mm256_setzero_ps();
    float off = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 22) {
        const float d = lp_qd_f16(w);
        __m256i p = lp_qd_dot_u8i8(q5_bytes(w + 2, w + 6), _mm256_loadu_si256((const __m256i *)a[b].q));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * a[b].d), _mm256_cvtepi32_ps(p), acc);
        off += d * a[b].s;
    }
    return lp_qd_hsum(acc) - 16.0f * off;
#else
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 22) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++)
            s += (q5_at(w + 2, w + 6, j) - 16) * a[b].q[j];
        acc += lp_qd_f16(w) * a[b].d * (float)s;
    }
    return acc;
#endif
}

/* Q5_1 (f16 d and m, 4 bytes of fifth bits, 16 of nibbles; value = d q + m):
 * sum = d d_a sum(q q_a) + m (d_a sum(q_a)). */
float lp_k_dot_q5_1(int64_t nb, const uint8_t *w, const lp_q8a *a)
{
    float mins = 0.0f;
#if defined(__AVX2__)
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += 24) {
        __m256i p = lp_qd_dot_u8i8(q5_bytes(w + 4, w + 8), _mm256_loadu_si256((const __m256i *)a[b].q));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(lp_qd_f16(w) * a[b].d), _mm256_cvtepi32_ps(p), acc);
        mins += lp_qd_f16(w + 2) * a[b].s;
    }
    return lp_qd_hsum(acc) + mins;
#else
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 24) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++)
            s += q5_at(w + 4, w + 8, j) * a[b].q[j];
        acc += lp_qd_f16(w) * a[b].d * (float)s;
        mins += lp_qd_f16(w + 2) * a[b].s;
    }
    return acc + mins;
#endif
}

/* Q5_K (f16 d and dmin, Q4_K's 12 bytes of 6-bit (scale, min) pairs, 32 bytes of fifth
 * bits: bit s of byte j is element j of sub-block s, then Q4_K's 128 bytes of nibbles):
 * sum = d d_a sum_s scale_s sum(q q_a) - dmin d_a sum_s min_s bsum_s. */
float lp_k_dot_q5_k(int64_t nb, const uint8_t *w, const lp_q8k *a)
{
    float acc = 0.0f;
#if defined(__AVX2__)
    __m256 vacc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
#endif
    for (int64_t b = 0; b < nb; b++, w += 176) {
        uint8_t scale[8], min[8];
        lp_qd_k4_scales_mins(w + 4, scale, min);
        const uint8_t *qh = w + 16, *qs = w + 48;
        const int8_t *qa = a[b].q;
        int32_t msum = 0;
        for (int s = 0; s < 8; s++)
            msum += min[s] * (a[b].bsum[2 * s] + a[b].bsum[2 * s + 1]);
        const float d = lp_qd_f16(w) * a[b].d, dmin = lp_qd_f16(w + 2) * a[b].d;
        acc -= dmin * (float)msum;
#if defined(__AVX2__)
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)qh);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) { /* 32 bytes: sub-block 2c in the low nibbles, 2c+1 high */
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            /* bit 2c (2c+1) of each byte, moved to 0x10: 16-bit shifts keep each byte's own
             * bits in place for the mask */
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one), 4);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, m4), h0);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), h1);
            __m256i plo = lp_qd_dot_u8i8(lo, _mm256_loadu_si256((const __m256i *)(qa + 64 * c)));
            __m256i phi = lp_qd_dot_u8i8(hi, _mm256_loadu_si256((const __m256i *)(qa + 64 * c + 32)));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(plo, _mm256_set1_epi32(scale[2 * c])));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(phi, _mm256_set1_epi32(scale[2 * c + 1])));
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), vacc);
#else
        int32_t isum = 0;
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            int32_t t = 0;
            for (int j = 0; j < 32; j++)
                t += (((q[j] >> shift) & 0xF) | ((qh[j] >> s) & 1) << 4) * qa[32 * s + j];
            isum += scale[s] * t;
        }
        acc += d * (float)isum;
#endif
    }
#if defined(__AVX2__)
    acc += lp_qd_hsum(vacc);
#endif
    return acc;
}
