/* Q4_K weight blocks (256 elements: f16 d and dmin, eight 6-bit (scale, min) pairs, 128
 * bytes of nibbles; value = d * scale_s * q - dmin * min_s) times Q8_K activation blocks:
 * sum = d d_a sum_s scale_s sum(q q_a) - dmin d_a sum_s min_s bsum_s, all sums integer. */
#include "qdot.h"

float lp_k_dot_q4_k(int64_t nb, const uint8_t *w, const lp_q8k *a)
{
    float acc = 0.0f;
#if defined(__AVX2__)
    __m256 vacc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#endif
    for (int64_t b = 0; b < nb; b++, w += 144) {
        uint8_t scale[8], min[8];
        lp_qd_k4_scales_mins(w + 4, scale, min);
        const uint8_t *qs = w + 16;
        const int8_t *qa = a[b].q;
        int32_t msum = 0;
        for (int s = 0; s < 8; s++)
            msum += min[s] * (a[b].bsum[2 * s] + a[b].bsum[2 * s + 1]);
        const float d = lp_qd_f16(w) * a[b].d, dmin = lp_qd_f16(w + 2) * a[b].d;
        acc -= dmin * (float)msum;
#if defined(__AVX2__)
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) { /* 32 bytes: sub-block 2c in the low nibbles, 2c+1 high */
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
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
                t += ((q[j] >> shift) & 0xF) * qa[32 * s + j];
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
