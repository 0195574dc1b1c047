/* The public wrappers of the KV-cache decoding ops: each records its shapes, FLOPs and bytes
 * moved (the cache reads dominate: that is what a decode step's attention costs) and calls the
 * active table. */
#include <assert.h>

#include "cpu_kernels.h"
#include "op_record.h"

#define K lp_kernels_active()

void lp_kv_write(void *kc, void *vc, const float *k, const float *v, const lp_kv_geom *g, int64_t t0, int64_t T)
{
    assert(t0 >= 0 && T >= 0 && t0 + T <= g->cap);
    const double n = (double)g->B * T * g->Hkv * g->D;
    LP_OP_BEGIN("lp::kv_write", 0.0, 2.0 * n * (4.0 + (g->f16 ? 2.0 : 4.0)), 4, g->B, T, g->Hkv, g->D);
    K->kv_write(kc, vc, k, v, g, t0, T);
    LP_OP_END();
}

void lp_attention_decode(float *out, const float *q, const void *kc, const void *vc, const int32_t *mask,
                         const lp_kv_geom *g)
{
    assert(g->B >= 1 && g->H >= 1 && g->Hkv >= 1 && g->H % g->Hkv == 0 && g->T >= 1 && g->T <= g->cap);
    const int64_t seen = g->window > 0 && g->window < g->T ? g->window : g->T;
    const double elem = g->f16 ? 2.0 : 4.0;
    LP_OP_BEGIN("lp::attention_decode", 4.0 * g->B * g->H * seen * g->D,
                2.0 * elem * g->B * g->Hkv * seen * g->D + 4.0 * (2.0 * g->B * g->H * g->D + g->B * seen), 5,
                g->B, g->H, g->Hkv, g->T, g->D);
    K->attention_decode(out, q, kc, vc, mask, g);
    LP_OP_END();
}
