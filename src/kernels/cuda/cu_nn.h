/* The CUDA NN kernels (layernorm, rmsnorm, softmax, embedding, cross-entropy, rope, fused
 * attention): launchers with the signatures of their lp_kernel_table entries, on device
 * pointers (small host structs such as lp_attn_geom by host pointer), enqueued on the
 * backend's stream without synchronizing. All f32 in and out, f32 accumulation.
 *
 * Determinism: every output is the same run to run (fixed reduction orders; parameter
 * gradients of the norms go through per-chunk partials and a second pass), except the
 * embedding backward, which adds rows with float atomics (repeated ids add in any order).
 *
 * Errors the CPU kernels return as a status from data (an id outside the vocabulary, a
 * label outside [0, V), a non-finite logit row) live in device memory here: the launchers
 * return LP_OK once enqueued, the kernel writes NaN where the CPU would have refused (the
 * embedding row, the loss) and records the first such error; lp_cu_nn_take_error
 * synchronizes, reports it through lp_err and clears it. A launch failure (bad
 * configuration, no device) is reported through lp_err at once; the void launchers set it
 * and return. */
#ifndef LP_CU_NN_H
#define LP_CU_NN_H

/* kernels.h is C: its designated-initializer helpers leave fields to zero, which g++'s
 * -Wextra flags when a .cu file includes it */
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#include "loupe/kernels.h"
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
extern "C" {
#endif

void lp_cu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                             const float *bias, int64_t N, int64_t C, float eps);
void lp_cu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                              const float *weight, const float *mean, const float *rstd, int64_t N,
                              int64_t C);
void lp_cu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int64_t N,
                           int64_t C, float eps);
void lp_cu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                            const float *weight, const float *rstd, int64_t N, int64_t C);
void lp_cu_softmax_forward(float *out, const float *inp, int64_t N, int64_t C);
void lp_cu_softmax_backward(float *dinp, const float *dout, const float *out, int64_t N, int64_t C);
lp_status lp_cu_embedding_forward(float *out, const int32_t *ids, const int32_t *type_ids, const float *wte,
                                  const float *wpe, const float *wtt, int64_t B, int64_t T, int64_t C,
                                  int64_t V, int64_t P, int64_t TT, int64_t pos_offset);
void lp_cu_embedding_backward(float *dwte, float *dwpe, float *dwtt, const float *dout, const int32_t *ids,
                              const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset);
lp_status lp_cu_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets,
                                      int64_t N, int64_t V, int32_t ignore_index);
void lp_cu_cross_entropy_backward(float *dlogits, const float *logits, const float *lse,
                                  const int32_t *targets, int64_t N, int64_t V, int32_t ignore_index,
                                  float dloss);
void lp_cu_rope_cache(float *cos, float *sin, const int32_t *pos, const float *inv_freq, float attn_factor,
                      int64_t N, int64_t D);
void lp_cu_rope_forward(float *x, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D,
                        int64_t ld);
void lp_cu_rope_backward(float *dx, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D,
                         int64_t ld);
void lp_cu_attention_fused_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                                   const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
void lp_cu_attention_fused_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                    const float *lse, const float *q, const float *k, const float *v,
                                    const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);

/* Attention as GEMMs (../attn_gemm.h): the SIMT steps (cu_attention_gemm.cu), with the
 * signatures of lp_attn_gemm_ops' entries; the GEMMs are cuBLASLt's (cuda_attention.c). */
void lp_cu_attn_gemm_to_heads(float *xh, const float *x, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld);
void lp_cu_attn_gemm_from_heads(float *x, const float *xh, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld);
void lp_cu_attn_gemm_softmax_forward(float *s, float *lse, const int32_t *mask, const lp_attn_geom *g,
                                     const lp_attn_dropout *drop);
void lp_cu_attn_gemm_softmax_backward(float *s, float *dp, const float *dout, const float *out, const float *lse,
                                      const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);

/* The table entries of these launchers (lp_kernel_table designated initializers), shared by
 * the CUDA backend's table and the emulator test's. Not attention: the backend's entries
 * choose between the fused kernels and GEMMs (cuda_attention.c, on cuBLASLt); the
 * emulator's table takes the fused launchers. */
#define LP_CU_NN_TABLE_ENTRIES \
    .embedding_forward = lp_cu_embedding_forward, \
    .embedding_backward = lp_cu_embedding_backward, \
    .layernorm_forward = lp_cu_layernorm_forward, \
    .layernorm_backward = lp_cu_layernorm_backward, \
    .softmax_forward = lp_cu_softmax_forward, \
    .softmax_backward = lp_cu_softmax_backward, \
    .cross_entropy_forward = lp_cu_cross_entropy_forward, \
    .cross_entropy_backward = lp_cu_cross_entropy_backward, \
    .rmsnorm_forward = lp_cu_rmsnorm_forward, \
    .rmsnorm_backward = lp_cu_rmsnorm_backward, \
    .rope_cache = lp_cu_rope_cache, \
    .rope_forward = lp_cu_rope_forward, \
    .rope_backward = lp_cu_rope_backward,

/* The largest head size the fused attention kernels take (any D from 1 to it). */
#define LP_CU_ATTN_MAX_D 256
/* Whether the fused attention kernels run g (D <= LP_CU_ATTN_MAX_D, geometry valid); when
 * not, LP_STATUS_UNSUPPORTED or LP_STATUS_INVALID_ARG through lp_err naming the field. The
 * launchers refuse (lp_err, nothing written) what this refuses. */
lp_status lp_cu_attention_supports(const lp_attn_geom *g);

/* Waits for the stream and returns the first data error a kernel recorded since the last
 * call (LP_STATUS_RANGE: an id, type or label out of range; LP_STATUS_NUMERIC: a non-finite
 * logit row), through lp_err naming op and row, then clears it; LP_OK when none. The CUDA
 * backend's sync calls it, so the next sync after the launch returns the error. */
lp_status lp_cu_nn_take_error(void);
/* The device record of those errors (two ints: kind, row), made on the first call; the
 * backend calls it when it makes its context, so no launch needs cudaMalloc (CUDA Graph
 * capture). NULL when it cannot be had: the kernels then only write NaN. */
int *lp_cu_nn_error_slot(void);

#ifdef __cplusplus
}
#endif
#endif /* LP_CU_NN_H */
