/* Private to src/kernels/cpu: the reference (_ref) and optimized (_opt) version of
 * every op, gathered into the two tables in dispatch.c. Semantics and shapes are those
 * of the lp_* wrapper of the same name in include/loupe/kernels.h. */
#ifndef LP_CPU_KERNELS_H
#define LP_CPU_KERNELS_H

#include "loupe/kernels.h"

/* Largest head size the attention kernels keep on the stack per tile. */
#define LP_ATTN_MAX_D 256

#define LP_DECLARE_BOTH(ret, name, ...) \
    ret lp_k_##name##_ref(__VA_ARGS__); \
    ret lp_k_##name##_opt(__VA_ARGS__);

LP_DECLARE_BOTH(void, sgemm, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
LP_DECLARE_BOTH(void, bias_add_forward, float *out, const float *bias, int64_t N, int64_t C)
LP_DECLARE_BOTH(void, bias_backward, float *dbias, const float *dout, int64_t N, int64_t C)
LP_DECLARE_BOTH(lp_status, embedding_forward, float *out, const int32_t *ids, const int32_t *type_ids,
                const float *wte, const float *wpe, const float *wtt, int64_t B, int64_t T, int64_t C, int64_t V,
                int64_t P, int64_t TT, int64_t pos_offset)
LP_DECLARE_BOTH(void, embedding_backward, float *dwte, float *dwpe, float *dwtt, const float *dout,
                const int32_t *ids, const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset)
LP_DECLARE_BOTH(void, layernorm_forward, float *out, float *mean, float *rstd, const float *inp, const float *weight,
                const float *bias, int64_t N, int64_t C, float eps)
LP_DECLARE_BOTH(void, layernorm_backward, float *dinp, float *dweight, float *dbias, const float *dout,
                const float *inp, const float *weight, const float *mean, const float *rstd, int64_t N, int64_t C)
LP_DECLARE_BOTH(void, gelu_forward, float *out, const float *inp, int64_t n, lp_gelu_kind kind)
LP_DECLARE_BOTH(void, gelu_backward, float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind)
LP_DECLARE_BOTH(void, softmax_forward, float *out, const float *inp, int64_t N, int64_t C)
LP_DECLARE_BOTH(void, softmax_backward, float *dinp, const float *dout, const float *out, int64_t N, int64_t C)
LP_DECLARE_BOTH(void, attention_eager_forward, float *out, float *att, const float *q, const float *k,
                const float *v, const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
LP_DECLARE_BOTH(void, attention_eager_backward, float *dq, float *dk, float *dv, float *datt, const float *dout,
                const float *att, const float *q, const float *k, const float *v, int64_t B, int64_t T, int64_t H,
                int64_t D, int64_t ld)
LP_DECLARE_BOTH(void, attention_fused_forward, float *out, float *lse, const float *q, const float *k,
                const float *v, const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
LP_DECLARE_BOTH(void, attention_fused_backward, float *dq, float *dk, float *dv, const float *dout,
                const float *out, const float *lse, const float *q, const float *k, const float *v,
                const int32_t *mask, int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
LP_DECLARE_BOTH(void, dropout_forward, float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng)
LP_DECLARE_BOTH(void, dropout_backward, float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p)
LP_DECLARE_BOTH(lp_status, cross_entropy_forward, float *loss, float *lse, const float *logits,
                const int32_t *targets, int64_t N, int64_t V, int32_t ignore_index)
LP_DECLARE_BOTH(void, cross_entropy_backward, float *dlogits, const float *logits, const float *lse,
                const int32_t *targets, int64_t N, int64_t V, int32_t ignore_index, float dloss)
LP_DECLARE_BOTH(void, adamw_step, float *param, const float *grad, float *m, float *v, int64_t n, double lr,
                double beta1, double beta2, double eps, double weight_decay, int64_t step)
LP_DECLARE_BOTH(double, sum_squares, const float *x, int64_t n)
LP_DECLARE_BOTH(void, scale, float *x, int64_t n, float s)

/* Splits [0, n) into nthreads near-equal ranges; thread tid gets [*lo, *hi). */
static inline void lp_k_split(int64_t n, int tid, int nthreads, int64_t *lo, int64_t *hi)
{
    int64_t q = n / nthreads, r = n % nthreads;
    *lo = tid * q + (tid < r ? tid : r);
    *hi = *lo + q + (tid < r ? 1 : 0);
}

/* Minimum work (elements) before an elementwise op goes parallel: below it the fork/join
 * costs more than it saves. */
#define LP_PAR_MIN 32768

#endif
