/* Embedding forward and backward on the GPU (embedding.c's semantics): out = wte[id] +
 * wpe[t + pos_offset] + wtt[type]. One block per token, threads across channels.
 * The position range is checked on the host (scalars); ids and types live on the device,
 * so a bad one is recorded for lp_cu_nn_take_error and its row written as NaN (the CPU
 * kernel refuses the call instead). The backward adds with float atomics: tokens sharing
 * an id (or a position across the batch) add in an unspecified order, so dwte/dwpe/dwtt can
 * differ from run to run in the last bits. */
#include "cu_nn_common.cuh"

__global__ void emb_forward_kernel(float *out, const int32_t *ids, const int32_t *type_ids, const float *wte,
                                   const float *wpe, const float *wtt, int64_t T, int C, int64_t V,
                                   int64_t TT, int64_t pos_offset, int *err)
{
    const int64_t i = blockIdx.x, t = i % T;
    const int32_t id = ids[i];
    const int32_t ty = type_ids ? type_ids[i] : 0;
    float *o = out + i * C;
    const bool bad_id = id < 0 || id >= V, bad_ty = wtt && (ty < 0 || ty >= TT);
    if (bad_id || bad_ty) {
        if (threadIdx.x == 0 && err)
            cu_record_error(err, bad_id ? LP_CU_ERR_EMB_ID : LP_CU_ERR_EMB_TYPE, i);
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = NAN;
        return;
    }
    const float *w = wte + (int64_t)id * C;
    const float *p = wpe ? wpe + (t + pos_offset) * C : NULL;
    const float *y = wtt ? wtt + (int64_t)ty * C : NULL;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float x = w[c];
        if (p)
            x += p[c];
        if (y)
            x += y[c];
        o[c] = x;
    }
}

__global__ void emb_backward_kernel(float *dwte, float *dwpe, float *dwtt, const float *dout,
                                    const int32_t *ids, const int32_t *type_ids, int64_t T, int C,
                                    int64_t pos_offset)
{
    const int64_t i = blockIdx.x, t = i % T;
    const float *d = dout + i * C;
    float *w = dwte ? dwte + (int64_t)ids[i] * C : NULL;
    float *p = dwpe ? dwpe + (t + pos_offset) * C : NULL;
    float *y = dwtt ? dwtt + (int64_t)(type_ids ? type_ids[i] : 0) * C : NULL;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float g = d[c];
        if (w)
            atomicAdd(w + c, g);
        if (p)
            atomicAdd(p + c, g);
        if (y)
            atomicAdd(y + c, g);
    }
}

static unsigned emb_block(int64_t C)
{
    int64_t t = (C + 31) / 32 * 32;
    return (unsigned)(t > 256 ? 256 : t);
}

extern "C" lp_status lp_cu_embedding_forward(float *out, const int32_t *ids, const int32_t *type_ids,
                                             const float *wte, const float *wpe, const float *wtt, int64_t B,
                                             int64_t T, int64_t C, int64_t V, int64_t P, int64_t TT,
                                             int64_t pos_offset)
{
    if (wpe && (pos_offset < 0 || T + pos_offset > P))
        return lp_err(LP_STATUS_RANGE,
                      "cuda embedding: positions %lld..%lld exceed the %lld position embeddings",
                      (long long)pos_offset, (long long)(T + pos_offset - 1), (long long)P);
    if (wtt && !type_ids && TT < 1)
        return lp_err(LP_STATUS_RANGE, "cuda embedding: token type table is empty");
    if (B * T <= 0 || C <= 0)
        return LP_OK;
    if (B * T > INT32_MAX)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda embedding: %lld tokens exceed one launch",
                      (long long)(B * T));
    LP_CU_LAUNCH(emb_forward_kernel, (unsigned)(B * T), emb_block(C), 0, lp_cu_nn_stream(), out, ids,
                 type_ids, wte, wpe, wtt, T, (int)C, V, TT, pos_offset, lp_cu_nn_error_slot());
    return lp_cu_nn_launched("embedding_forward");
}

extern "C" void lp_cu_embedding_backward(float *dwte, float *dwpe, float *dwtt, const float *dout,
                                         const int32_t *ids, const int32_t *type_ids, int64_t B, int64_t T,
                                         int64_t C, int64_t pos_offset)
{
    if (B * T <= 0 || C <= 0 || (!dwte && !dwpe && !dwtt) || B * T > INT32_MAX)
        return;
    LP_CU_LAUNCH(emb_backward_kernel, (unsigned)(B * T), emb_block(C), 0, lp_cu_nn_stream(), dwte, dwpe, dwtt,
                 dout, ids, type_ids, T, (int)C, pos_offset);
    (void)lp_cu_nn_launched("embedding_backward");
}
