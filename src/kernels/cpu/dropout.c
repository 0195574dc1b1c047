/* Inverted dropout with a counter-based mask: element i keeps when the uniform drawn
 * from Philox counter (offset + i/4), lane i%4, is >= p. Both versions produce the same
 * mask for any thread count; the optimized one splits counter blocks across threads. */
#include "cpu_kernels.h"

// out (n) =, keep (n) =, inp (n)
void lp_k_dropout_forward_ref(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng)
{
    float s = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++) {
        uint32_t x[4];
        lp_rng_philox(rng->seed, rng->stream, rng->offset + (uint64_t)(i / 4), x);
        keep[i] = lp_rng_u01(x[i % 4]) >= p;
        out[i] = keep[i] ? inp[i] * s : 0.0f;
    }
    lp_rng_skip(rng, n);
}

void lp_k_dropout_forward_opt(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng)
{
    float s = 1.0f / (1.0f - p);
    int64_t blocks = (n + 3) / 4;
    uint64_t seed = rng->seed, stream = rng->stream, base = rng->offset;
#pragma omp parallel for schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++) {
        uint32_t x[4];
        lp_rng_philox(seed, stream, base + (uint64_t)b, x);
        for (int64_t j = 0; j < 4 && 4 * b + j < n; j++) {
            int64_t i = 4 * b + j;
            uint8_t kp = lp_rng_u01(x[j]) >= p;
            keep[i] = kp;
            out[i] = kp ? inp[i] * s : 0.0f;
        }
    }
    rng->offset += (uint64_t)blocks;
}

// dinp (n) = dout * keep / (1-p)
void lp_k_dropout_backward_ref(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p)
{
    float s = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++)
        dinp[i] = keep[i] ? dout[i] * s : 0.0f;
}

void lp_k_dropout_backward_opt(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p)
{
    float s = 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dinp[i] = dout[i] * (keep[i] ? s : 0.0f);
}
