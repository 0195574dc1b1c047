/* The 5-bit GGML formats times 8-bit activation blocks: Q5_0 and Q5_1 (blocks of 32, against
 * lp_q8a) and Q5_K (blocks of 256, against lp_q8k). Each stores Q4's nibbles plus one fifth
 * bit per element; the dot products rebuild q in [0, 31] as bytes and take the same integer
 * sums as their 4-bit siblings, the offsets (Q5_0's -16, Q5_1's m, Q5_K's mins) applied per
 * block from the activations' cached sums. llama.cpp falls back to Q5_0 / Q5_1 for the
 * tensors whose rows are not whole 256-blocks (SmolLM2's 576, Qwen2.5's 896), so its Q4_K_M
 * and Q5_K_M files of those models hold them. */
#include "qdot.h"

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
    return _mm256_or_si256(lp_qd_nibbles16(qs), fifth_bits(lp_qd_le32(qh)));
}
#else
/* Element j (< 32) of a Q5_0 / Q5_1 block's q. */
static inline int q5_at(const uint8_t *qh, const uint8_t *qs, int j)
{
    const int nib = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    return nib | (int)((lp_qd_le32(qh) >> j) & 1) << 4;
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

/* Q5_K (Q4_K's d, dmin and scales, 32 bytes of fifth bits: bit s of byte j is element j of
 * sub-block s, then Q4_K's 128 bytes of nibbles): lp_qd_dot_k45 with the fifth bits. */
float lp_k_dot_q5_k(int64_t nb, const uint8_t *w, const lp_q8k *a)
{
    return lp_qd_dot_k45(nb, w, a, true);
}
