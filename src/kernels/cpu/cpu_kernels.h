/* Private to src/kernels/cpu: the reference (_ref) and optimized (_opt) version of
 * every op, gathered into the two tables in dispatch.c. Semantics and shapes are those
 * of the lp_* wrapper of the same name in include/loupe/kernels.h. */
#ifndef LP_CPU_KERNELS_H
#define LP_CPU_KERNELS_H

#include <string.h>

#include "loupe/kernels.h"

/* The packed-weight GEMMs' argument check: w holds `kind` data (dtype dt, data non-NULL) of
 * shape (OC, C). Errors: LP_STATUS_INVALID_ARG naming op, the weight and the call. */
static inline lp_status lp_k_packed_weight_check(const lp_qweight *w, lp_dtype dt, const void *data, int64_t C,
                                                 int64_t OC, const char *op, const char *kind)
{
    const bool is_kind = w && w->dtype == dt && data;
    if (!is_kind || w->rows != OC || w->cols != C)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: weight is %s%s [%lld, %lld], the call says [%lld, %lld]", op,
                      is_kind ? "" : "not ", kind, w ? (long long)w->rows : -1LL, w ? (long long)w->cols : -1LL,
                      (long long)OC, (long long)C);
    return LP_OK;
}

/* Every optimized symbol exists once per ISA level: lp_k_<op>_opt is the baseline copy, and
 * the per-ISA builds of the same source carry the level's suffix (lp_k_<op>_opt_avx2, ...),
 * added to every lp_* symbol those objects define after compiling (isa_suffix.cmake), so
 * the kernel sources themselves name no level. LP_ISA_FN names one copy. */
#define LP_ISA_FN(name, isa) name##_##isa
#define LP_DECLARE_OPT(ret, name, ...)                    \
    ret lp_k_##name##_opt(__VA_ARGS__);                   \
    ret LP_ISA_FN(lp_k_##name##_opt, avx2)(__VA_ARGS__);   \
    ret LP_ISA_FN(lp_k_##name##_opt, avx512)(__VA_ARGS__); \
    ret LP_ISA_FN(lp_k_##name##_opt, avx512bf16)(__VA_ARGS__);
#define LP_DECLARE_BOTH(ret, name, ...)     \
    ret lp_k_##name##_ref(__VA_ARGS__);     \
    LP_DECLARE_OPT(ret, name, __VA_ARGS__)

LP_DECLARE_BOTH(void, sgemm, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
LP_DECLARE_BOTH(void, bias_add_forward, float *out, const float *bias, int64_t N, int64_t C)
LP_DECLARE_BOTH(void, act_forward, float *out, const float *inp, int64_t n, lp_act_kind kind)
LP_DECLARE_BOTH(void, act_backward, float *dinp, const float *dout, const float *inp, const float *out,
                int64_t n, lp_act_kind kind)
/* out (N,C) = bias (C) in every row: the C a GEMM then accumulates into (beta 1) */
LP_DECLARE_BOTH(void, bias_broadcast, float *out, const float *bias, int64_t N, int64_t C)
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
                const float *v, const int32_t *mask, const lp_attn_geom *g)
LP_DECLARE_BOTH(void, attention_eager_backward, float *dq, float *dk, float *dv, float *datt, const float *dout,
                const float *att, const float *q, const float *k, const float *v, const lp_attn_geom *g)
LP_DECLARE_BOTH(void, attention_fused_forward, float *out, float *lse, const float *q, const float *k,
                const float *v, const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
LP_DECLARE_BOTH(void, attention_fused_backward, float *dq, float *dk, float *dv, const float *dout,
                const float *out, const float *lse, const float *q, const float *k, const float *v,
                const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
/* z[c] = keep factor (0 or 1/(1-p)) of probability elements e0 .. e0+n-1 (lp_attn_dropout):
 * shared by the reference and optimized fused attention. */
void lp_k_attn_drop_factors(float *z, const lp_attn_dropout *d, int64_t e0, int64_t n);
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
/* ---- decoder ops ---- */
LP_DECLARE_BOTH(void, rmsnorm_forward, float *out, float *rstd, const float *inp, const float *weight, int64_t N,
                int64_t C, float eps)
LP_DECLARE_BOTH(void, rmsnorm_backward, float *dinp, float *dweight, const float *dout, const float *inp,
                const float *weight, const float *rstd, int64_t N, int64_t C)
LP_DECLARE_BOTH(void, swiglu_forward, float *out, const float *gate, const float *up, int64_t N, int64_t F,
                int64_t ld)
LP_DECLARE_BOTH(void, swiglu_backward, float *dgate, float *dup, const float *dout, const float *gate,
                const float *up, int64_t N, int64_t F, int64_t ld)
LP_DECLARE_BOTH(void, rope_cache, float *cos, float *sin, const int32_t *pos, const float *inv_freq,
                float attn_factor, int64_t N, int64_t D)
LP_DECLARE_BOTH(void, rope_forward, float *x, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D,
                int64_t ld)
LP_DECLARE_BOTH(void, rope_backward, float *dx, const float *cos, const float *sin, int64_t N, int64_t H,
                int64_t D, int64_t ld)
LP_DECLARE_BOTH(void, rows_gather, float *out, const float *x, const int64_t *idx, int64_t n, int64_t C)
LP_DECLARE_BOTH(void, rows_scatter_add, float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C)
LP_DECLARE_BOTH(void, mean_pool_forward, float *out, const float *x, const int32_t *mask, int64_t B, int64_t T,
                int64_t C)
LP_DECLARE_BOTH(void, mean_pool_backward, float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T,
                int64_t C)
LP_DECLARE_BOTH(void, l2_normalize, float *x, int64_t N, int64_t C)
/* ---- quant section ---- */
LP_DECLARE_BOTH(void, qweight_dequantize, float *out, const lp_qweight *w, int64_t start, int64_t n)
LP_DECLARE_BOTH(lp_status, qmatmul_forward, float *out, const float *inp, const lp_qweight *w, const float *bias,
                int64_t N, int64_t C, int64_t OC)
LP_DECLARE_BOTH(lp_status, qmatmul_backward, float *dinp, const float *dout, const lp_qweight *w, int64_t N,
                int64_t C, int64_t OC)
LP_DECLARE_BOTH(void, add_inplace, float *y, const float *x, int64_t n)
LP_DECLARE_BOTH(lp_status, lora_forward, float *out, float *u, uint8_t *keep, const float *inp,
                const lp_lora_base *base, const float *A, const float *B, float s, float p, lp_rng *rng, int64_t N,
                int64_t C, int64_t OC, int64_t r)
LP_DECLARE_BOTH(lp_status, lora_backward, float *dinp, float *dA, float *dB, const float *dout, const float *inp,
                const float *u, const uint8_t *keep, const lp_lora_base *base, const float *A, const float *B,
                float s, float p, int64_t N, int64_t C, int64_t OC, int64_t r)

/* peak_fma.c: 12 register-resident FMA chains of iters steps at `bits` (32, 256 or 512; at
 * most the copy's widest, lp_k_fma_bits). The dispatching versions (dispatch.c) call the
 * copy of the active ISA level. */
LP_DECLARE_OPT(float, fma_chain, int bits, int64_t iters)
LP_DECLARE_OPT(int, fma_bits, void)
/* The table the lp_* wrappers call (dispatch.c; device.c sets a device's, NULL resets). */
void lp_kernels__set_active(const lp_kernel_table *t);
float lp_k_fma_chain(int bits, int64_t iters);
int lp_k_fma_bits(void);

/* The start every weight packing shares (lp_qweight_pack_f32, lp_qweight_pack_bf16_train):
 * q zeroed; w non-NULL and rows, cols > 0, else LP_STATUS_INVALID_ARG naming the packing
 * (kind) and the weight (name, "weight" if NULL); then *mem = bytes from lp_alloc as cat
 * (QUANTIZED_WEIGHT for a kept weight, so the memory plan counts it), zeroed: the padding
 * multiplies as zeros. */
lp_status lp_k_qweight_alloc_packed(lp_qweight *q, const float *w, int64_t rows, int64_t cols, size_t bytes,
                                    const char *kind, const char *name, lp_mem_category cat, void **mem);
/* lp_qweight_pack_bf16_train into memory of category cat (TEMPORARY: a copy for one use). */
lp_status lp_k_qweight_pack_bf16_train_as(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                          const char *name, lp_mem_category cat);

/* NF4 internals shared by the dequantizer and the fused GEMM (nf4.c, compiled without FP
 * contraction so the reconstructed scales round exactly as bitsandbytes'). */
/* scales (nb) = the absmax of blocks [b0, b0+nb) as the dequantizer uses them. */
void lp_k_nf4_block_scales(const lp_qweight *w, int64_t b0, int64_t nb, float *scales);
/* Fills q's codes and scales from w (q's arrays allocated); absmax_scratch (n_blocks)
 * holds the f32 absmax when q keeps only their 8-bit codes. Inputs are finite. */
void lp_k_nf4_quantize(lp_qweight *q, const float *w, float *absmax_scratch);
void lp_k_nf4_dequantize_ref(float *out, const lp_qweight *w, int64_t start, int64_t n);
void lp_k_nf4_dequantize_opt(float *out, const lp_qweight *w, int64_t start, int64_t n);
void lp_k_int8_quantize(lp_qweight *q, const float *w, int qmax);
/* lp_qweight_quantize(LP_DTYPE_INT8) with codes in [-qmax, qmax] (qweight.c) */
lp_status lp_k_qweight_quantize_int8(lp_qweight *q, const float *w, int64_t rows, int64_t cols, int qmax,
                                     const char *name);
void lp_k_int8_dequantize_ref(float *out, const lp_qweight *w, int64_t start, int64_t n);
void lp_k_int8_dequantize_opt(float *out, const lp_qweight *w, int64_t start, int64_t n);
/* Fused linear layers (qgemm.c), shared by the quantized GEMM and the LoRA linear: the
 * base weight is wf (f32) or wq (dequantized a slab at a time); everything accumulates
 * into the one output.
 * out (N,OC) = inp @ Wb^T + bias [+ s * u (N,r) @ B (OC,r)^T when u]. */
lp_status lp_k_linear_slabs_forward(float *out, const float *inp, const float *wf, const lp_qweight *wq,
                                     const float *bias, const float *u, const float *B, float s, int64_t N, int64_t C,
                                     int64_t OC, int64_t r);
/* dinp (N,C) = dout @ Wb [+ s * drop'(g (N,r) @ A (r,C)) when g; drop' = keep/(1-p) if p > 0]. */
lp_status lp_k_linear_slabs_backward(float *dinp, const float *dout, const float *wf, const lp_qweight *wq,
                                      const float *g, const float *A, float s, const uint8_t *keep, float p,
                                      int64_t N, int64_t C, int64_t OC, int64_t r);
/* ---- GGML block formats at run time (integer kernels) ----
 * Activations are quantized per block on the fly, as llama.cpp does: blocks of 32 (for
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) or of 256 (for the K-quants). The scale stays f32 (llama.cpp rounds
 * it to f16; f32 only removes error), s caches d * sum(q) for the formats with a minimum. */
typedef struct lp_q8a {
    float d, s;    /* scale (max|x| / 127) and d * sum(q) */
    int8_t q[32];  /* round(x / d), in [-127, 127] */
} lp_q8a;
typedef struct lp_q8k {
    float d;
    int16_t bsum[16]; /* sums of q over each 16 consecutive elements */
    int8_t q[256];
} lp_q8k;
/* y (n/32 or n/256 blocks) = x (n) quantized; n a multiple of the block. */
void lp_k_quantize_q8a(lp_q8a *y, const float *x, int64_t n);
void lp_k_quantize_q8k(lp_q8k *y, const float *x, int64_t n);
/* Dot products of nb weight blocks (as stored) with nb activation blocks: integer sums
 * inside a block, the block scales applied in f32 (qdot_<type>.c; AVX2 / AVX-512 VNNI /
 * portable C inside each file). */
float lp_k_dot_q8_0(int64_t nb, const uint8_t *w, const lp_q8a *a);
float lp_k_dot_q4_0(int64_t nb, const uint8_t *w, const lp_q8a *a);
float lp_k_dot_q4_1(int64_t nb, const uint8_t *w, const lp_q8a *a);
/* 4 activation rows (ab blocks apart) against one weight row: out[0..3] (N of 4 to 7). */
void lp_k_dot_q8_0_x4(int64_t nb, const uint8_t *w, const lp_q8a *a, int64_t ab, float *out);
void lp_k_dot_q4_0_x4(int64_t nb, const uint8_t *w, const lp_q8a *a, int64_t ab, float *out);
float lp_k_dot_q4_k(int64_t nb, const uint8_t *w, const lp_q8k *a);
float lp_k_dot_q6_k(int64_t nb, const uint8_t *w, const lp_q8k *a);
/* The 5-bit formats (qdot_q5.c): Q5_0 and Q5_1 against blocks of 32, Q5_K of 256. */
float lp_k_dot_q5_0(int64_t nb, const uint8_t *w, const lp_q8a *a);
float lp_k_dot_q5_1(int64_t nb, const uint8_t *w, const lp_q8a *a);
float lp_k_dot_q5_k(int64_t nb, const uint8_t *w, const lp_q8k *a);
/* out (n) = elements [start, start+n) of a GGML-format weight (partial blocks allowed). */
void lp_k_ggml_dequantize_range(float *out, const lp_qweight *w, int64_t start, int64_t n);
/* Prefill of a Q8_0 / Q4_0 / Q4_1 weight (qgemm_ggml.c): out (N,OC) = the quantized
 * activations act (N rows of cols/32 blocks) @ W^T + bias by a tiled integer GEMM over
 * row-interleaved tiles (w->tiles, packed at load, else packed per call). fits says
 * whether it takes (w, N): those types in an AVX2 build, at any N when w has its tiles
 * (decode too: no horizontal sums, nibbles unpacked once per 16 rows), else at
 * N >= LP_QGEMM_MIN_ROWS (below that, packing per call costs more than the GEMV loop). */
enum { LP_QGEMM_MIN_ROWS = 8 };
bool lp_k_qgemm_ggml_fits(const lp_qweight *w, int64_t N);
lp_status lp_k_qgemm_ggml(float *out, const lp_q8a *act, const lp_qweight *w, const float *bias, int64_t N,
                          bool parallel);
/* ---- int8 inference GEMM (i8gemm.c) on a packed LP_DTYPE_INT8 weight (w->tiles; layout
 * in include/loupe/kernels.h, lp_qweight_quantize_int8_tiles) ---- */
enum { LP_I8_QT = 16, LP_I8_HDR = 128 }; /* rows of a tile; header bytes (scales, row sums) */
static inline size_t lp_k_int8_tile_bytes(int64_t cols)
{
    return (size_t)LP_I8_HDR + (size_t)LP_I8_QT * (size_t)cols;
}
/* Row o's scale and element (o, k) of a packed weight. */
static inline float lp_k_int8_tile_scale(const lp_qweight *w, int64_t o)
{
    float s;
    memcpy(&s, w->tiles + (size_t)(o / LP_I8_QT) * lp_k_int8_tile_bytes(w->cols) + 4 * (o % LP_I8_QT), 4);
    return s;
}
static inline int8_t lp_k_int8_tile_q(const lp_qweight *w, int64_t o, int64_t k)
{
    return (int8_t)w->tiles[(size_t)(o / LP_I8_QT) * lp_k_int8_tile_bytes(w->cols) + LP_I8_HDR + 64 * (size_t)(k / 4) +
                            4 * (size_t)(o % LP_I8_QT) + (size_t)(k % 4)];
}
/* q (n, a multiple of 32) = x quantized per row as the int8 GEMM does (d = max|x| / qmax,
 * round to nearest even, [-qmax, qmax]); returns d. Each byte stores q + off (mod 256: off
 * 64 or 128 makes q an unsigned operand of vpdpbusd / pmaddubsw). qact.c. */
float lp_k_quantize_i8(int8_t *q, const float *x, int64_t n, int qmax, uint8_t off);
/* out (N, w->rows) = inp (N, w->cols) @ W^T + bias: the reference (plain loops over the
 * tiles' elements) and this level's kernel (VNNI / AVX2 / AVX-512 / portable C), equal bit
 * for bit. Scratch: lp_k_int8_gemm_scratch_nbytes (one TEMPORARY block, the quantized rows). */
lp_status lp_k_int8_gemm_ref(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N);
lp_status lp_k_int8_gemm(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N);
static inline size_t lp_k_int8_gemm_scratch_nbytes(int64_t N, int64_t C)
{
    return (size_t)N * (size_t)C + (size_t)N * sizeof(float);
}
/* out (N,OC) = inp (N,C) @ W^T + bias with W in a GGML block format (qgemv_ggml.c):
 * activations quantized once, rows of W split across the pool, each weight row block read
 * once per pass over all N activation rows. */
lp_status lp_k_ggml_matmul_forward(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                                   int64_t C, int64_t OC);
/* NF4 fused dequant-GEMV (nf4_gemv.c) for a few activation rows: codes looked up and
 * multiplied in registers, no f32 weight materialized. Needs C % 64 == 0 (blocks within
 * rows) and the format's own block layout (not bnb_cpu_rows). */
#define LP_NF4_GEMV_MAX_ROWS 8 /* above it, dequantized slabs through sgemm win */
bool lp_k_nf4_gemv_fits(const lp_qweight *w);
void lp_k_nf4_gemv(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N, int64_t C,
                   int64_t OC);
/* lora.c: argument checks shared by every LoRA entry (fwd: keep and rng needed when p > 0). */
lp_status lp_k_lora_check(const lp_lora_base *base, float p, const void *keep, const lp_rng *rng, int64_t C,
                          int64_t OC, int64_t r, bool fwd);

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

/* C (M,N) = alpha A (M,K) B^T + beta C with B stored (N,K) and M <= LP_SGEMM_SMALL_M: each
 * row of B read once (gemm_small.c); the optimized sgemm's path for such shapes. */
#define LP_SGEMM_SMALL_M 16
void lp_k__sgemm_small_m(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc);
/* ---- bf16 weight GEMM (bf16_gemm.c) ---- */
LP_DECLARE_BOTH(lp_status, bf16_matmul_forward, float *out, const float *inp, const lp_qweight *w, const float *bias,
                int64_t N, int64_t C, int64_t OC)
/* out (n) = elements [start, start+n) of a packed bf16 weight as f32 (exact). */
void lp_k_bf16_dequantize_range(float *out, const lp_qweight *w, int64_t start, int64_t n);
/* out (M, OC) (row stride ldo) = xa (M, cp bf16, pairs) @ panels^T (OC outputs, cp/2 pairs)
 * [+ bias], or += with accumulate (bias ignored); threaded over (row chunk, panel) tasks. */
void lp_k_bf16_gemm_panels(float *out, int64_t ldo, bool accumulate, const uint16_t *xa, int64_t M, int64_t cp,
                           const uint16_t *wpan, const float *bias, int64_t OC);
/* dst (N, cp) = src (N, C) rounded to bf16 (nearest even), the pad column 0. */
void lp_k_bf16_round_rows(uint16_t *dst, const float *src, int64_t N, int64_t C, int64_t cp);
/* ---- bf16 training GEMMs (bf16_train.c) ---- */
LP_DECLARE_BOTH(lp_status, bf16_matmul_backward, float *dinp, float *dweight, const float *dout, const float *inp,
                const lp_qweight *w, int64_t N, int64_t C, int64_t OC)
LP_DECLARE_BOTH(void, bf16_repack, lp_qweight *q, const float *w)
/* ---- packed f32 weight GEMM (f32_gemm.c) ---- */
LP_DECLARE_BOTH(lp_status, f32_matmul_forward, float *out, const float *inp, const lp_qweight *w, const float *bias,
                int64_t N, int64_t C, int64_t OC)
/* dinp (N,C) = dout (N,OC) @ W, W packed f32 (OC,C): the frozen weight's input gradient */
LP_DECLARE_BOTH(lp_status, f32_matmul_backward, float *dinp, const float *dout, const lp_qweight *w, int64_t N,
                int64_t C, int64_t OC)
/* out (n) = elements [start, start+n) of a packed f32 weight (exact). */
void lp_k_f32_dequantize_range(float *out, const lp_qweight *w, int64_t start, int64_t n);
/* ---- KV-cache decoding ---- */
LP_DECLARE_BOTH(void, kv_write, void *kc, void *vc, const float *k, const float *v, const lp_kv_geom *g, int64_t t0,
                int64_t T)
LP_DECLARE_BOTH(void, attention_decode, float *out, const float *q, const void *kc, const void *vc,
                const int32_t *mask, const lp_kv_geom *g)

#endif
