/* Q8_0 weight blocks (f16 d, 32 x int8) times Q8 activation blocks of 32: one integer
 * dot per block, scaled by d_w * d_a in f32. */
#include "qdot.h"

float lp_k_dot_q8_0(int64_t nb, const uint8_t *w, const lp_q8a *a)
{
#if defined(__AVX2__)
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += 34) {
        __m256i qw = _mm256_loadu_si256((const __m256i *)(w + 2));
        __m256i qa = _mm256_loadu_si256((const __m256i *)a[b].q);
        __m256 p = _mm256_cvtepi32_ps(lp_qd_dot_i8i8(qw, qa));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(lp_qd_f16(w) * a[b].d), p, acc);
    }
    return lp_qd_hsum(acc);
#else
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += 34) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++)
            s += (int8_t)w[2 + j] * a[b].q[j];
        acc += lp_qd_f16(w) * a[b].d * (float)s;
    }
    return acc;
#endif
}

/* out[r] = the dot of the weight row with activation row r (r < 4, rows ab blocks apart,
 * in lp_q8a units): prefill's inner kernel, each weight block loaded once for 4 rows. */
void lp_k_dot_q8_0_x4(int64_t nb, const uint8_t *w, const lp_q8a *a, int64_t ab, float *out)
{
#if defined(__AVX2__)
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++, w += 34) {
        const __m256i qw = _mm256_loadu_si256((const __m256i *)(w + 2)), aw = _mm256_sign_epi8(qw, qw);
        const float d = lp_qd_f16(w);
        for (int r = 0; r < 4; r++) {
            const lp_q8a *x = a + r * ab + b;
            __m256i qa = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)x->q), qw);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * x->d), _mm256_cvtepi32_ps(lp_qd_dot_u8i8(aw, qa)), acc[r]);
        }
    }
    for (int r = 0; r < 4; r++)
        out[r] = lp_qd_hsum(acc[r]);
#else
    for (int r = 0; r < 4; r++)
        out[r] = lp_k_dot_q8_0(nb, w, a + r * ab);
#endif
}
