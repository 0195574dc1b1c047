/* Q4_1 weight blocks (f16 d and m, 16 bytes of nibbles, value = d * q + m) times Q8
 * activation blocks of 32: sum(w * x) = d_w d_a sum(q_w q_a) + m_w (d_a sum(q_a)), the
 * second term from the activation block's cached s. */
#include "qdot.h"

float lp_k_dot_q4_1(int64_t nb, const uint8_t *w, const lp_q8a *a)
{
    float mins = 0.0f;
#if defined(__AVX2__)
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += 20) {
        __m256i qa = _mm256_loadu_si256((const __m256i *)a[b].q);
        __m256 p = _mm256_cvtepi32_ps(lp_qd_dot_u8i8(lp_qd_nibbles16(w + 4), qa));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(lp_qd_f16(w) * a[b].d), p, acc);
        mins += lp_qd_f16(w + 2) * a[b].s;
    }
    return lp_qd_hsum(acc) + mins;
#else
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 20) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += (w[4 + j] & 0xF) * a[b].q[j] + (w[4 + j] >> 4) * a[b].q[j + 16];
        acc += lp_qd_f16(w) * a[b].d * (float)s;
        mins += lp_qd_f16(w + 2) * a[b].s;
    }
    return acc + mins;
#endif
}
