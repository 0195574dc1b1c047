/* The attention dropout mask of lp_attn_dropout on the device, shared by the fused kernels
 * (cu_attention.cu) and the softmax of attention as GEMMs (cu_attention_gemm.cu): probability
 * element e is kept with factor 1/(1-p) when draw lane + e of the Philox stream is >= p, so
 * both paths, and the CPU's, drop exactly the same elements. */
#ifndef LP_CU_ATTN_DROP_CUH
#define LP_CU_ATTN_DROP_CUH

#include <stdint.h>

#include "philox.cuh" /* after cu_nn_common.cuh (the emulator's __device__), which declares lp_attn_dropout */

typedef struct lp_cu_attn_drop {
    bool on;
    float p, dscale; /* dropout probability, 1 / (1 - p) */
    uint64_t seed, stream, offset;
    uint32_t lane; /* lp_attn_dropout.lane: element e is draw lane + e */
} lp_cu_attn_drop;

/* the kernel argument for drop (NULL: no dropout) */
static inline lp_cu_attn_drop lp_cu_attn_drop_make(const lp_attn_dropout *drop)
{
    lp_cu_attn_drop d = {false, 0.0f, 1.0f, 0, 0, 0, 0};
    if (drop) {
        d.on = true;
        d.p = drop->p, d.dscale = 1.0f / (1.0f - drop->p);
        d.seed = drop->seed, d.stream = drop->stream, d.offset = drop->offset, d.lane = drop->lane;
    }
    return d;
}

/* keep factor (0 or 1/(1-p)) of probability element e */
static __device__ __forceinline__ float lp_cu_attn_drop_factor(const lp_cu_attn_drop &d, uint64_t e)
{
    e += d.lane;
    uint32_t x[4];
    lp_cu_philox(d.seed, d.stream, d.offset + (e >> 2), x);
    const int l = (int)(e & 3); /* selected, not indexed: the draw stays in registers */
    const uint32_t w = l == 0 ? x[0] : l == 1 ? x[1] : l == 2 ? x[2] : x[3];
    return lp_cu_u01(w) >= d.p ? d.dscale : 0.0f;
}

#endif
