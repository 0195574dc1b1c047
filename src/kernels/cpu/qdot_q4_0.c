/* Q4_0 weight blocks (f16 d, 16 bytes of nibbles, value = d * (q - 8)) times Q8
 * activation blocks of 32: one integer dot per block. */
#include "qdot.h"

float lp_k_dot_q4_0(int64_t nb, const uint8_t *w, const lp_q8a *a)
{
#if defined(__AVX2__)
    /* sum(d (q - 8) x) = d d_a sum(q q_a) - 8 d (d_a sum(q_a)): the nibbles go in as they
     * are (u8), the offset comes from the activation block's cached s */
    __m256 acc = _mm256_setzero_ps();
    float off = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 18) {
        const float d = lp_qd_f16(w);
        __m256i qa = _mm256_loadu_si256((const __m256i *)a[b].q);
        __m256 p = _mm256_cvtepi32_ps(lp_qd_dot_u8i8(lp_qd_nibbles16(w + 2), qa));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * a[b].d), p, acc);
        off += d * a[b].s;
    }
    return lp_qd_hsum(acc) - 8.0f * off;
#else
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 18) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += ((w[2 + j] & 0xF) - 8) * a[b].q[j] + ((w[2 + j] >> 4) - 8) * a[b].q[j + 16];
        acc += lp_qd_f16(w) * a[b].d * (float)s;
    }
    return acc;
#endif
}

/* The 4-row form of lp_k_dot_q4_0 (see lp_k_dot_q8_0_x4): nibbles unpacked once per block. */
void lp_k_dot_q4_0_x4(int64_t nb, const uint8_t *w, const lp_q8a *a, int64_t ab, float *out)
{
#if defined(__AVX2__)
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float off[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < nb; b++, w += 18) {
        const __m256i qw = lp_qd_nibbles16(w + 2);
        const float d = lp_qd_f16(w);
        for (int r = 0; r < 4; r++) {
            const lp_q8a *x = a + r * ab + b;
            __m256i p = lp_qd_dot_u8i8(qw, _mm256_loadu_si256((const __m256i *)x->q));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * x->d), _mm256_cvtepi32_ps(p), acc[r]);
            off[r] += d * x->s;
        }
    }
    for (int r = 0; r < 4; r++)
        out[r] = lp_qd_hsum(acc[r]) - 8.0f * off[r];
#else
    for (int r = 0; r < 4; r++)
        out[r] = lp_k_dot_q4_0(nb, w, a + r * ab);
#endif
}
