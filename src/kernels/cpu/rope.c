/* Rotary position embeddings in transformers' rotate-half layout: element i of a head pairs
 * with element i + D/2. The cos/sin cache (N, D/2) is built once per forward from each
 * token's position; forward and backward rotate q or k heads in place inside a strided
 * (packed qkv) buffer. The optimized rotation runs AVX-512 (masked tails) or AVX2 lanes over
 * i; the cache uses libm's sinf/cosf per element in parallel rows: it is N*D/2 pairs once per
 * forward, against 2 * layers rotations of N*H*D, so a vector sincos would not pay. */
#include <math.h>

#include "cpu_kernels.h"
#include "simd.h"

// cos, sin (N, D/2) =; pos (N); inv_freq (D/2)
void lp_k_rope_cache_ref(float *cos_, float *sin_, const int32_t *pos, const float *inv_freq,
                         float attn_factor, int64_t N, int64_t D)
{
    int64_t half = D / 2;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < half; i++) {
            float a = (float)pos[n] * inv_freq[i]; /* the float32 angle transformers forms */
            cos_[n * half + i] = (float)cos((double)a) * attn_factor;
            sin_[n * half + i] = (float)sin((double)a) * attn_factor;
        }
}

void lp_k_rope_cache_opt(float *cos_, float *sin_, const int32_t *pos, const float *inv_freq,
                         float attn_factor, int64_t N, int64_t D)
{
    int64_t half = D / 2;
#pragma omp parallel for schedule(static) if (N * half >= LP_PAR_MIN / 8)
    for (int64_t n = 0; n < N; n++) {
        float p = (float)pos[n];
        for (int64_t i = 0; i < half; i++) {
            float a = p * inv_freq[i];
            cos_[n * half + i] = cosf(a) * attn_factor;
            sin_[n * half + i] = sinf(a) * attn_factor;
        }
    }
}

/* sgn = +1: forward rotation; -1: the transpose (backward) */
static void rotate_ref(float *x, const float *cos_, const float *sin_, int64_t N, int64_t H, int64_t D,
                       int64_t ld, double sgn)
{
    int64_t half = D / 2;
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++) {
            float *x1 = x + n * ld + h * D, *x2 = x1 + half;
            for (int64_t i = 0; i < half; i++) {
                double c = cos_[n * half + i], s = sgn * sin_[n * half + i];
                double a = x1[i], b = x2[i];
                x1[i] = (float)(a * c - b * s);
                x2[i] = (float)(b * c + a * s);
            }
        }
}

// x (N, ld) with H heads of D at x + n*ld + h*D, rotated in place; cos, sin (N, D/2)
void lp_k_rope_forward_ref(float *x, const float *cos_, const float *sin_, int64_t N, int64_t H, int64_t D,
                           int64_t ld)
{
    rotate_ref(x, cos_, sin_, N, H, D, ld, 1.0);
}

void lp_k_rope_backward_ref(float *dx, const float *cos_, const float *sin_, int64_t N, int64_t H, int64_t D,
                            int64_t ld)
{
    rotate_ref(dx, cos_, sin_, N, H, D, ld, -1.0);
}

/* One head: x1[i] = a c - b s, x2[i] = b c + a s with s = sgn * sin (sgn = +-1) */
static inline void rotate_head(float *restrict x1, float *restrict x2, const float *restrict c_,
                               const float *restrict s_, int64_t half, float sgn)
{
    int64_t i = 0;
#if defined(LP_HAVE_AVX512)
    const __m512 sv = _mm512_set1_ps(sgn);
    for (; i < half; i += 16) {
        __mmask16 m = half - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (half - i)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, x1 + i), b = _mm512_maskz_loadu_ps(m, x2 + i);
        __m512 c = _mm512_maskz_loadu_ps(m, c_ + i), s = _mm512_mul_ps(sv, _mm512_maskz_loadu_ps(m, s_ + i));
        _mm512_mask_storeu_ps(x1 + i, m, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
        _mm512_mask_storeu_ps(x2 + i, m, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s)));
    }
#elif defined(LP_HAVE_AVX2)
    const __m256 sv = _mm256_set1_ps(sgn);
    for (; i + 8 <= half; i += 8) {
        __m256 a = _mm256_loadu_ps(x1 + i), b = _mm256_loadu_ps(x2 + i);
        __m256 c = _mm256_loadu_ps(c_ + i), s = _mm256_mul_ps(sv, _mm256_loadu_ps(s_ + i));
        _mm256_storeu_ps(x1 + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
        _mm256_storeu_ps(x2 + i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
    }
    if (i + 4 <= half) { /* head size 8..15 mod 16: one 4-lane step */
        __m128 a = _mm_loadu_ps(x1 + i), b = _mm_loadu_ps(x2 + i);
        __m128 c = _mm_loadu_ps(c_ + i), s = _mm_mul_ps(_mm256_castps256_ps128(sv), _mm_loadu_ps(s_ + i));
        _mm_storeu_ps(x1 + i, _mm_fmsub_ps(a, c, _mm_mul_ps(b, s)));
        _mm_storeu_ps(x2 + i, _mm_fmadd_ps(b, c, _mm_mul_ps(a, s)));
        i += 4;
    }
#endif
    for (; i < half; i++) {
        float a = x1[i], b = x2[i], c = c_[i], s = sgn * s_[i];
        x1[i] = a * c - b * s;
        x2[i] = b * c + a * s;
    }
}

static void rotate_opt(float *x, const float *cos_, const float *sin_, int64_t N, int64_t H, int64_t D,
                       int64_t ld, float sgn)
{
    int64_t half = D / 2;
#pragma omp parallel for schedule(static) if (N * H * D >= LP_PAR_MIN)
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++) {
            float *x1 = x + n * ld + h * D;
            rotate_head(x1, x1 + half, cos_ + n * half, sin_ + n * half, half, sgn);
        }
}

void lp_k_rope_forward_opt(float *x, const float *cos_, const float *sin_, int64_t N, int64_t H, int64_t D,
                           int64_t ld)
{
    rotate_opt(x, cos_, sin_, N, H, D, ld, 1.0f);
}

void lp_k_rope_backward_opt(float *dx, const float *cos_, const float *sin_, int64_t N, int64_t H, int64_t D,
                            int64_t ld)
{
    rotate_opt(dx, cos_, sin_, N, H, D, ld, -1.0f);
}
