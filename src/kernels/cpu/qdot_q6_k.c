/* Q6_K weight blocks (256 elements: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8
 * scales (one per 16), f16 d; value = d * scale_g * (q - 32)) times Q8_K activation
 * blocks: sum = d d_a (sum_g scale_g sum(q q_a) - 32 sum_g scale_g bsum_g). q in [0, 63]
 * is unsigned, so the u8-by-i8 instructions take it as it is. */
#include "qdot.h"

float lp_k_dot_q6_k(int64_t nb, const uint8_t *w, const lp_q8k *a)
{
    float acc = 0.0f;
#if defined(__AVX2__)
    __m256 vacc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
#endif
    for (int64_t b = 0; b < nb; b++, w += 210) {
        const int8_t *sc = (const int8_t *)(w + 192), *qa = a[b].q;
        int32_t off = 0;
        for (int g = 0; g < 16; g++)
            off += sc[g] * a[b].bsum[g];
        const float d = lp_qd_f16(w + 208) * a[b].d;
#if defined(__AVX2__)
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w + 64 * h, *qh = w + 128 + 32 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30)),
            };
            for (int k = 0; k < 4; k++) { /* 32 elements: scale groups 8h+2k (low lane), 8h+2k+1 */
                const int g = 8 * h + 2 * k;
                __m256i p = lp_qd_dot_u8i8(q[k], _mm256_loadu_si256((const __m256i *)(qa + 128 * h + 32 * k)));
                __m256i s = _mm256_set_m128i(_mm_set1_epi32(sc[g + 1]), _mm_set1_epi32(sc[g]));
                isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, s));
            }
        }
        vacc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), vacc);
        acc -= d * (float)(32 * off);
#else
        int32_t isum = 0;
        for (int e = 0; e < 256; e++) {
            const int h = e / 128, r = e % 128;
            const int lo = (w[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
            const int hi = (w[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
            isum += sc[e / 16] * (lo | hi << 4) * qa[e];
        }
        acc += d * (float)(isum - 32 * off);
#endif
    }
#if defined(__AVX2__)
    acc += lp_qd_hsum(vacc);
#endif
    return acc;
}
