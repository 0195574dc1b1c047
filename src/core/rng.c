/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a
 * counter-based generator, so element i of a fill is a pure function of (seed, stream,
 * counter) and fills are identical for any thread count or partitioning. */
#include <math.h>

#include "loupe/core.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void lp_rng_philox(uint64_t seed, uint64_t stream, uint64_t ctr, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void lp_rng_init(lp_rng *r, uint64_t seed, uint64_t stream)
{
    r->seed = seed;
    r->stream = stream;
    r->offset = 0;
    r->lane = 0;
}

void lp_rng_uniform(lp_rng *r, float *out, int64_t n, float lo, float hi)
{
    if (n <= 0)
        return;
    int64_t blocks = (n + 3) / 4;
    float span = hi - lo;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < blocks; b++) {
        uint32_t x[4];
        lp_rng_philox(r->seed, r->stream, r->offset + (uint64_t)b, x);
        for (int j = 0; j < 4 && b * 4 + j < n; j++)
            out[b * 4 + j] = lo + span * lp_rng_u01(x[j]);
    }
    r->offset += (uint64_t)blocks;
}

void lp_rng_normal(lp_rng *r, float *out, int64_t n, float mean, float std)
{
    if (n <= 0)
        return;
    int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < blocks; b++) {
        uint32_t x[4];
        lp_rng_philox(r->seed, r->stream, r->offset + (uint64_t)b, x);
        /* Box-Muller on two pairs; u1 in (0, 1] keeps log finite. */
        for (int p = 0; p < 2; p++) {
            double u1 = ((double)(x[2 * p] >> 8) + 1.0) / 16777216.0;
            double u2 = (double)(x[2 * p + 1] >> 8) / 16777216.0;
            double rad = sqrt(-2.0 * log(u1));
            double z0 = rad * cos(2.0 * M_PI * u2), z1 = rad * sin(2.0 * M_PI * u2);
            int64_t i = b * 4 + 2 * p;
            if (i < n)
                out[i] = mean + std * (float)z0;
            if (i + 1 < n)
                out[i + 1] = mean + std * (float)z1;
        }
    }
    r->offset += (uint64_t)blocks;
}

uint32_t lp_rng_u32(lp_rng *r)
{
    uint32_t x[4];
    lp_rng_philox(r->seed, r->stream, r->offset++, x);
    return x[0];
}

uint64_t lp_rng_below(lp_rng *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    /* Rejection on 64-bit draws: discard the top partial range. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint32_t x[4];
        lp_rng_philox(r->seed, r->stream, r->offset++, x);
        uint64_t v = ((uint64_t)x[0] << 32) | x[1];
        if (v < limit)
            return v % n;
    }
}
