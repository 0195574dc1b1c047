/* Embedding: word + position + token-type rows summed per token (BERT family).
 * The backward scatters into the tables; the optimized version gives each thread a
 * column range so repeated ids never race and the sum order matches the reference. */
#include <omp.h>

#include "cpu_kernels.h"

static lp_status check_ids(const int32_t *ids, const int32_t *type_ids, int64_t B, int64_t T, int64_t V,
                           const float *wpe, int64_t P, const float *wtt, int64_t TT, int64_t pos_offset)
{
    for (int64_t i = 0; i < B * T; i++) {
        if (ids[i] < 0 || ids[i] >= V)
            return lp_err(LP_STATUS_RANGE, "embedding: token id %d at batch %lld position %lld outside vocabulary of %lld",
                          ids[i], (long long)(i / T), (long long)(i % T), (long long)V);
        if (wtt && type_ids && (type_ids[i] < 0 || type_ids[i] >= TT))
            return lp_err(LP_STATUS_RANGE, "embedding: token type %d at batch %lld position %lld outside %lld types",
                          type_ids[i], (long long)(i / T), (long long)(i % T), (long long)TT);
    }
    if (wpe && (pos_offset < 0 || T + pos_offset > P))
        return lp_err(LP_STATUS_RANGE, "embedding: positions %lld..%lld exceed the %lld position embeddings",
                      (long long)pos_offset, (long long)(T + pos_offset - 1), (long long)P);
    if (wtt && !type_ids && TT < 1)
        return lp_err(LP_STATUS_RANGE, "embedding: token type table is empty");
    return LP_OK;
}

// out (B,T,C); ids, type_ids (B,T); wte (V,C); wpe (P,C); wtt (TT,C)
lp_status lp_k_embedding_forward_ref(float *out, const int32_t *ids, const int32_t *type_ids, const float *wte,
                                     const float *wpe, const float *wtt, int64_t B, int64_t T, int64_t C, int64_t V,
                                     int64_t P, int64_t TT, int64_t pos_offset)
{
    lp_status st = check_ids(ids, type_ids, B, T, V, wpe, P, wtt, TT, pos_offset);
    if (st != LP_OK)
        return st;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            for (int64_t c = 0; c < C; c++) {
                float x = wte[ids[i] * C + c];
                if (wpe)
                    x += wpe[(t + pos_offset) * C + c];
                if (wtt)
                    x += wtt[(type_ids ? type_ids[i] : 0) * C + c];
                out[i * C + c] = x;
            }
        }
    return LP_OK;
}

lp_status lp_k_embedding_forward_opt(float *out, const int32_t *ids, const int32_t *type_ids, const float *wte,
                                     const float *wpe, const float *wtt, int64_t B, int64_t T, int64_t C, int64_t V,
                                     int64_t P, int64_t TT, int64_t pos_offset)
{
    lp_status st = check_ids(ids, type_ids, B, T, V, wpe, P, wtt, TT, pos_offset);
    if (st != LP_OK)
        return st;
#pragma omp parallel for schedule(static) if (B * T * C >= LP_PAR_MIN)
    for (int64_t i = 0; i < B * T; i++) {
        int64_t t = i % T;
        float *restrict o = out + i * C;
        const float *restrict w = wte + ids[i] * C;
        const float *restrict p = wpe ? wpe + (t + pos_offset) * C : NULL;
        const float *restrict y = wtt ? wtt + (type_ids ? type_ids[i] : 0) * C : NULL;
        if (p && y) {
#pragma omp simd
            for (int64_t c = 0; c < C; c++)
                o[c] = w[c] + p[c] + y[c];
        } else {
            for (int64_t c = 0; c < C; c++)
                o[c] = w[c] + (p ? p[c] : 0.0f) + (y ? y[c] : 0.0f);
        }
    }
    return LP_OK;
}

// dwte (V,C) +=, dwpe (P,C) +=, dwtt (TT,C) +=; dout (B,T,C)
void lp_k_embedding_backward_ref(float *dwte, float *dwpe, float *dwtt, const float *dout, const int32_t *ids,
                                 const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset)
{
    for (int64_t i = 0; i < B * T; i++) {
        int64_t t = i % T;
        for (int64_t c = 0; c < C; c++) {
            float d = dout[i * C + c];
            if (dwte)
                dwte[ids[i] * C + c] += d;
            if (dwpe)
                dwpe[(t + pos_offset) * C + c] += d;
            if (dwtt)
                dwtt[(type_ids ? type_ids[i] : 0) * C + c] += d;
        }
    }
}

void lp_k_embedding_backward_opt(float *dwte, float *dwpe, float *dwtt, const float *dout, const int32_t *ids,
                                 const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset)
{
#pragma omp parallel if (B * T * C >= LP_PAR_MIN)
    {
        int64_t lo, hi;
        lp_k_split(C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t i = 0; i < B * T; i++) {
            int64_t t = i % T;
            const float *restrict d = dout + i * C;
            if (dwte) {
                float *restrict w = dwte + ids[i] * C;
#pragma omp simd
                for (int64_t c = lo; c < hi; c++)
                    w[c] += d[c];
            }
            if (dwpe) {
                float *restrict w = dwpe + (t + pos_offset) * C;
#pragma omp simd
                for (int64_t c = lo; c < hi; c++)
                    w[c] += d[c];
            }
            if (dwtt) {
                float *restrict w = dwtt + (type_ids ? type_ids[i] : 0) * C;
#pragma omp simd
                for (int64_t c = lo; c < hi; c++)
                    w[c] += d[c];
            }
        }
    }
}
