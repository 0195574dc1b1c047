/* Inverted dropout with a counter-based mask: element i keeps when draw d = rng->lane + i,
 * lane d%4 of Philox counter (offset + d/4), gives a uniform >= p. A fill is thus a slice of
 * one long stream of draws (lp_rng_at), which is how a data-parallel rank draws its rows of
 * the global batch's mask. Both versions produce the same mask for any thread count; the
 * optimized one splits counter blocks across threads. */
#include "cpu_kernels.h"

// out (n) =, keep (n) =, inp (n)
void lp_k_dropout_forward_ref(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng)
{
    float s = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++) {
        const int64_t d = (int64_t)rng->lane + i;
        uint32_t x[4];
        lp_rng_philox(rng->seed, rng->stream, rng->offset + (uint64_t)(d / 4), x);
        keep[i] = lp_rng_u01(x[d % 4]) >= p;
        out[i] = keep[i] ? inp[i] * s : 0.0f;
    }
    lp_rng_skip(rng, n);
}

void lp_k_dropout_forward_opt(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng)
{
    float s = 1.0f / (1.0f - p);
    const int64_t lane = rng->lane, blocks = (lane + n + 3) / 4;
    uint64_t seed = rng->seed, stream = rng->stream, base = rng->offset;
#pragma omp parallel for schedule(static) if (n >= LP_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++) {
        uint32_t x[4];
        lp_rng_philox(seed, stream, base + (uint64_t)b, x);
        for (int64_t j = 0; j < 4; j++) {
            int64_t i = 4 * b + j - lane;
            if (i < 0 || i >= n)
                continue;
            uint8_t kp = lp_rng_u01(x[j]) >= p;
            keep[i] = kp;
            out[i] = kp ? inp[i] * s : 0.0f;
        }
    }
    lp_rng_skip(rng, n);
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
