/* loupe kernels: the CPU ops a transformer encoder needs for training, each with an
 * explicit forward and backward on raw row-major f32 pointers (llm.c style). Every op has
 * a plain reference version and an optimized one (AVX2/FMA, OpenMP); one dispatch table
 * picks (optimized by default; LP_KERNELS=ref in the environment or
 * lp_kernels_select(LP_KERNELS_IMPL_REF) forces the reference). The lp_* wrappers below
 * record each call's shapes and FLOPs with the profiler and call the active table.
 *
 * Accumulation rule, for every backward here: gradients of PARAMETERS are accumulated
 * (+=, so micro-batches add up; zero them before a step), gradients of ACTIVATIONS and
 * inputs are overwritten (=).
 *
 * Shapes are in comments beside each pointer: B batch, T sequence, C channels, H heads,
 * D head size (C = H*D), V vocabulary or classes, N rows, OC output channels.
 *
 *   lp_kernels_init();                                   // reads LP_KERNELS once
 *   lp_matmul_forward(h, x, w, b, B * T, C, 4 * C);      // h = x @ w^T + b
 *   lp_gelu_forward(g, h, B * T * 4 * C, LP_GELU_ERF);
 *   ...
 *   lp_gelu_backward(dh, dg, h, B * T * 4 * C, LP_GELU_ERF);
 *   lp_matmul_backward(dx, dw, db, dh, x, w, B * T, C, 4 * C);   // dx =, dw +=, db +=
 */
#ifndef LOUPE_KERNELS_H
#define LOUPE_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "loupe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The classification heads' activations (lp_act_forward): BERT's pooler tanh, DistilBERT's
 * pre_classifier ReLU. */
typedef enum lp_act_kind {
    LP_ACT_TANH = 0,
    LP_ACT_RELU,
} lp_act_kind;

typedef enum lp_gelu_kind {
    LP_GELU_KIND_ERF = 0, /* x * Phi(x), exact (HF "gelu") */
    LP_GELU_KIND_TANH,    /* tanh approximation (HF "gelu_new", "gelu_pytorch_tanh") */
} lp_gelu_kind;
#define LP_GELU_ERF LP_GELU_KIND_ERF
#define LP_GELU_TANH LP_GELU_KIND_TANH

/* ==== GGML block formats (GGUF tensor types) ==========================================
 * The element types a GGUF file's tensors carry, numbered as ggml numbers them (the file
 * stores the number). Block formats pack `block` elements into `bytes` bytes; F32/F16/BF16
 * are blocks of one. Dequantization to f32 is a plain reference implementation of what
 * ggml (and the `gguf` Python package) compute, element for element; the integer
 * dot-product kernels for the same blocks are meant to sit beside it.
 *
 *   const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t->type);
 *   if (tt && tt->dequantizable) lp_ggml_dequantize(t->type, t->data, out, t->numel);
 */
typedef enum lp_ggml_type {
    LP_GGML_TYPE_F32 = 0, LP_GGML_TYPE_F16 = 1, LP_GGML_TYPE_Q4_0 = 2, LP_GGML_TYPE_Q4_1 = 3,
    LP_GGML_TYPE_Q5_0 = 6, LP_GGML_TYPE_Q5_1 = 7, LP_GGML_TYPE_Q8_0 = 8, LP_GGML_TYPE_Q8_1 = 9,
    LP_GGML_TYPE_Q2_K = 10, LP_GGML_TYPE_Q3_K = 11, LP_GGML_TYPE_Q4_K = 12, LP_GGML_TYPE_Q5_K = 13,
    LP_GGML_TYPE_Q6_K = 14, LP_GGML_TYPE_Q8_K = 15, LP_GGML_TYPE_IQ2_XXS = 16, LP_GGML_TYPE_IQ2_XS = 17,
    LP_GGML_TYPE_IQ3_XXS = 18, LP_GGML_TYPE_IQ1_S = 19, LP_GGML_TYPE_IQ4_NL = 20, LP_GGML_TYPE_IQ3_S = 21,
    LP_GGML_TYPE_IQ2_S = 22, LP_GGML_TYPE_IQ4_XS = 23, LP_GGML_TYPE_I8 = 24, LP_GGML_TYPE_I16 = 25,
    LP_GGML_TYPE_I32 = 26, LP_GGML_TYPE_I64 = 27, LP_GGML_TYPE_F64 = 28, LP_GGML_TYPE_IQ1_M = 29,
    LP_GGML_TYPE_BF16 = 30, LP_GGML_TYPE_TQ1_0 = 34, LP_GGML_TYPE_TQ2_0 = 35, LP_GGML_TYPE_MXFP4 = 39,
} lp_ggml_type;

typedef struct lp_ggml_type_traits {
    const char *name;   /* ggml's name: "F32", "Q4_K", ... */
    int32_t block;      /* elements per block */
    int32_t bytes;      /* bytes per block */
    bool dequantizable; /* lp_ggml_dequantize handles it */
} lp_ggml_type_traits;

/* The traits of type number t; NULL for a number ggml does not define (or has retired). */
const lp_ggml_type_traits *lp_ggml_type_traits_get(uint32_t t);

/* dst (n) f32 = the n elements held by src (n / block blocks, little-endian, any
 * alignment). t must be dequantizable and n a multiple of its block (asserted). Exact
 * f32 arithmetic in the order ggml uses (no fused multiply-add), so results equal the
 * `gguf` package's dequantizers bit for bit. */
void lp_ggml_dequantize(lp_ggml_type t, const void *src, float *dst, int64_t n);

/* ==== quantized weights and LoRA (quant section; see the second block below) ======== */

/* A frozen base weight (OC,C) quantized to NF4 (bitsandbytes layout, bit-identical to
 * bitsandbytes.functional.quantize_4bit with blocksize 64) or to int8 (per output channel
 * absmax). Everything lives in one lp_alloc block of category QUANTIZED_WEIGHT that the
 * pointers below point into; lp_qweight_free releases it. */
typedef struct lp_qweight {
    lp_dtype dtype;       /* LP_DTYPE_NF4, LP_DTYPE_INT8, LP_DTYPE_GGML, LP_DTYPE_BF16 (packed) or
                           * LP_DTYPE_F32 (packed, with f32 set) */
    int64_t rows, cols;   /* OC, C: the f32 weight's shape, row-major [out, in] */
    int64_t n;            /* rows * cols */
    /* NF4: W flattened row-major, blocks of 64 consecutive values (blocks cross rows
     * when C % 64 != 0, exactly as bitsandbytes), the last block may be shorter. */
    bool double_quant;    /* absmax stored as 8-bit codes (QLoRA's double quantization) */
    int64_t n_blocks;     /* ceil(n / 64) */
    int64_t n_nested;     /* ceil(n_blocks / 256) with double quant, else 0 */
    uint8_t *codes;       /* ((n+1)/2): element 2j in the HIGH nibble of byte j, 2j+1 in the low
                           * one; odd n pads the last low nibble with code 7 (0.0) */
    float *absmax;        /* (n_blocks) f32 block scales; NULL with double quant */
    uint8_t *absmax_q;    /* (n_blocks) dynamic-map codes of (absmax - offset); double quant only */
    float *nested_absmax; /* (n_nested) per 256 blocks; double quant only */
    float offset;         /* mean of the block absmax (float32, torch's summation order) */
    /* Off (the default): each value uses its own block's scale, the format as
     * bitsandbytes writes it and as its CUDA and PyTorch kernels read it. On: dequantize
     * as bitsandbytes 0.50's native CPU kernel does, which for cols % 16 == 0 looks the
     * scale up per row (block = row * (cols/64) + col/64, wrong when cols % 64 != 0); set
     * it to reproduce results bitsandbytes computed on a CPU (tests/golden/qlora_*). */
    bool bnb_cpu_rows;
    /* INT8 */
    int8_t *q;            /* (rows, cols) round(w / scale), in [-127, 127]; NULL when packed
                           * into tiles for the integer GEMM (lp_qweight_quantize_int8_tiles) */
    float *scale;         /* (rows) absmax_row / 127; NULL when packed */
    /* GGML: each row is cols / block whole blocks of gtype, exactly as a GGUF file stores
     * the tensor (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16 or BF16) */
    lp_ggml_type gtype;
    uint8_t *blocks;      /* (rows * row_bytes); NULL once tiles replace them (below) */
    int64_t row_bytes;    /* cols / block * block bytes */
    /* INT8 packed for inference: the tiles are the weight (see lp_qweight_quantize_int8_tiles).
     * Q8_0 / Q4_0 / Q4_1 only, or NULL: the same weight repacked at load into tiles of 16
     * interleaved rows for the prefill GEMM (lp_qweight_ggml_pack_tiles; its own lp_alloc
     * block, freed with q). Decode and the dequantizer read blocks; whoever rewrites blocks
     * after packing must pack again. */
    uint8_t *tiles;
    /* BF16: W packed in panels of LP_BF16_PANEL output channels, k in adjacent pairs:
     * W[o, k] at ((o / 32 * cpad / 2 + k / 2) * 32 + o % 32) * 2 + k % 2; rows padded to
     * whole panels and cols to cpad (even) with zeros. On a CUDA device (--dtype bf16's
     * copy, lp_kernels_qweight_bf16_train) one row-major (rows, cols) array instead, cpad = cols */
    uint16_t *bf16;
    int64_t cpad;         /* cols rounded up to even */
    /* BF16 for training (lp_qweight_pack_bf16_train), else NULL: W^T (cols, rows) in the
     * same panel layout, for the backward's dX = dY @ W; rpad = rows rounded up to even */
    uint16_t *bf16t;
    int64_t rpad;
    /* F32: W packed in panels of LP_F32_PANEL output channels, in K blocks of 256: W[o, k]
     * at (k0 * np + o / 32 * kcb + k - k0) * 32 + o % 32, k0 = k rounded down to 256, np the
     * panels, kcb = min(256, cols - k0); rows padded to whole panels with zeros */
    float *f32;
    void *mem;            /* owned: the one lp_alloc block */
} lp_qweight;

/* The frozen base of a LoRA linear: exactly one of weight (f32) or q (int8 or NF4). */
typedef struct lp_lora_base {
    const float *weight;  /* (OC,C) f32, or NULL */
    const lp_qweight *q;  /* (OC,C) quantized, or NULL; borrowed */
    const float *bias;    /* (OC) or NULL */
} lp_lora_base;

/* The dispatch table. Every entry has the signature of the lp_* wrapper of the same
 * name below; see there for shapes and semantics. Tests call lp_kernels_table(REF) and
 * lp_kernels_table(OPT) directly and hold them equal. */
/* Dropout on attention probabilities inside the fused kernel: element e = ((b*H+h)*T+i)*T+j
 * of the (B,H,T,T) probabilities is kept (and scaled by 1/(1-p)) when lp_rng_u01 of lane
 * d%4 of Philox(seed, stream, offset + d/4), d = lane + e, is >= p: the mask lp_dropout_forward would
 * draw over that tensor from an rng at (seed, stream, offset), so fused and eager
 * training drop the same probabilities. The caller then advances its rng as that fill
 * would: lp_rng_skip(rng, B*H*T*T). */
typedef struct lp_attn_dropout {
    float p; /* in (0, 1) */
    uint64_t seed, stream, offset;
    uint32_t lane; /* the rng's lane (lp_rng): element e is draw lane + e */
} lp_attn_dropout;

/* Attention geometry, shared by the eager and fused kernels and the composed path.
 * q (B,T,H,D) with ldq elements between consecutive tokens; k and v (B,T,Hkv,D) with ldkv
 * between tokens (same layout as q, Hkv heads: ld = C for separate buffers, 3C or
 * (H + 2 Hkv) D for one packed qkv row); out (B,T,H*D) contiguous. Query head h reads
 * key/value head h / (H / Hkv) (GQA; Hkv == H is MHA, Hkv == 1 MQA).
 * Key j is visible to query i of the same row when mask[b,j] == 1 (mask NULL: all real),
 * and, when causal, j <= i, and, when window > 0, i - j < window. The window is Mistral's
 * as transformers 5.x builds it (masking_utils.sliding_window_overlay: kv_idx > q_idx -
 * sliding_window, i.e. strictly fewer than `window` steps back, the query itself counted).
 * With segments (packing: several samples per row), mask holds each token's sample id
 * (0 = padding, k >= 1 = sample k of its row) and key j is visible to query i only when
 * mask[b,j] == mask[b,i] too; a mask is then required.
 * A query with no visible key (a left-padded position under a causal mask) outputs 0 and
 * contributes no gradient -- never NaN. lp_attention_geom_check validates one. */
typedef struct lp_attn_geom {
    int64_t B, T, H, Hkv, D;
    int64_t ldq, ldkv;
    bool causal;
    int64_t window; /* 0 = none */
    float scale;    /* 0 = 1/sqrt(D) */
    bool segments;  /* mask holds sample ids: no attention across samples (packing) */
} lp_attn_geom;

/* The geometry of BERT-style attention: H heads of D over one buffer with stride ld. */
static inline lp_attn_geom lp_attn_geom_mha(int64_t B, int64_t T, int64_t H, int64_t D, int64_t ld)
{
    return (lp_attn_geom){.B = B, .T = T, .H = H, .Hkv = H, .D = D, .ldq = ld, .ldkv = ld};
}

/* The scale the kernels apply to q.k. */
static inline float lp_attn_scale(const lp_attn_geom *g)
{
    return g->scale != 0.0f ? g->scale : 1.0f / sqrtf((float)g->D);
}

/* Whether key j of a row with mask mb (T, or NULL) is visible to query i as far as padding
 * and samples go (lp_attn_key_range gives the causal / window part). */
static inline bool lp_attn_mask_visible(const lp_attn_geom *g, const int32_t *mb, int64_t i, int64_t j)
{
    return !mb || (mb[j] && (!g->segments || mb[j] == mb[i]));
}

/* The keys query i may see, before the padding mask: [*lo, *hi). */
static inline void lp_attn_key_range(const lp_attn_geom *g, int64_t i, int64_t *lo, int64_t *hi)
{
    *hi = g->causal ? i + 1 : g->T;
    *lo = g->window > 0 && i - g->window + 1 > 0 ? i - g->window + 1 : 0;
}

/* The KV cache of one layer as the decode kernels read it: keys and values (B, Hkv, cap, D)
 * each, f32 or f16 (f16: IEEE half, rounded to nearest even when written), columns 0..T-1
 * filled; mask (B, cap) 1 where a column holds a real token of that sequence, 0 for padding
 * (a column is shared by the batch: left or right padding leaves holes). */
typedef struct lp_kv_geom {
    int64_t B, H, Hkv, D;
    int64_t cap;    /* columns allocated per (b, kv head) */
    int64_t T;      /* columns filled, the query's own included: the query sits at column T-1 */
    int64_t window; /* > 0: only columns j with (T-1) - j < window (lp_attn_key_range's rule) */
    float scale;    /* 0 = 1/sqrt(D) */
    bool f16;       /* keys and values stored as f16 (uint16_t) */
} lp_kv_geom;

/* One tensor of a multi-tensor AdamW step: its parameter, gradient and two moments, n
 * elements each, and its weight decay (0 for biases and norms). */
typedef struct lp_adamw_tensor {
    float *param;
    const float *grad;
    float *m, *v;
    int64_t n;
    double weight_decay;
} lp_adamw_tensor;

typedef struct lp_kernel_table {
    const char *name; /* "ref" or "opt" */
    const char *isa;  /* the ISA level its code was compiled for (lp_isa_name; "baseline" for ref) */
    void (*sgemm)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
    void (*bias_add_forward)(float *out, const float *bias, int64_t N, int64_t C);
    void (*bias_broadcast)(float *out, const float *bias, int64_t N, int64_t C);
    void (*bias_backward)(float *dbias, const float *dout, int64_t N, int64_t C);
    /* out (N,OC) = inp (N,C) @ weight^T + bias, bias not NULL, in one GEMM that adds the bias
     * in its epilogue; NULL: lp_matmul_forward broadcasts the bias into out and accumulates
     * the sgemm into it */
    void (*linear_forward)(float *out, const float *inp, const float *weight, const float *bias, int64_t N,
                           int64_t C, int64_t OC);
    lp_status (*embedding_forward)(float *out, const int32_t *ids, const int32_t *type_ids, const float *wte,
                                   const float *wpe, const float *wtt, int64_t B, int64_t T, int64_t C, int64_t V,
                                   int64_t P, int64_t TT, int64_t pos_offset);
    void (*embedding_backward)(float *dwte, float *dwpe, float *dwtt, const float *dout, const int32_t *ids,
                               const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset);
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                              const float *bias, int64_t N, int64_t C, float eps);
    void (*layernorm_backward)(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int64_t N, int64_t C);
    void (*gelu_forward)(float *out, const float *inp, int64_t n, lp_gelu_kind kind);
    void (*gelu_backward)(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind);
    void (*act_forward)(float *out, const float *inp, int64_t n, lp_act_kind kind);
    void (*act_backward)(float *dinp, const float *dout, const float *inp, const float *out, int64_t n,
                         lp_act_kind kind);
    void (*softmax_forward)(float *out, const float *inp, int64_t N, int64_t C);
    void (*softmax_backward)(float *dinp, const float *dout, const float *out, int64_t N, int64_t C);
    void (*attention_eager_forward)(float *out, float *att, const float *q, const float *k, const float *v,
                                    const int32_t *mask, const lp_attn_geom *g);
    void (*attention_eager_backward)(float *dq, float *dk, float *dv, float *datt, const float *dout,
                                     const float *att, const float *q, const float *k, const float *v,
                                     const lp_attn_geom *g);
    void (*attention_fused_forward)(float *out, float *lse, const float *q, const float *k, const float *v,
                                    const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
    void (*attention_fused_backward)(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                     const float *lse, const float *q, const float *k, const float *v,
                                     const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
    void (*dropout_forward)(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng);
    void (*dropout_backward)(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p);
    lp_status (*cross_entropy_forward)(float *loss, float *lse, const float *logits, const int32_t *targets,
                                       int64_t N, int64_t V, int32_t ignore_index);
    void (*cross_entropy_backward)(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
                                   int64_t N, int64_t V, int32_t ignore_index, float dloss);
    void (*adamw_step)(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1,
                       double beta2, double eps, double weight_decay, int64_t step);
    /* count tensors' AdamW steps at once (a GPU's one launch instead of count); NULL: the
     * dispatcher calls adamw_step per tensor */
    void (*adamw_multi)(const lp_adamw_tensor *t, int count, double lr, double beta1, double beta2,
                        double eps, int64_t step);
    double (*sum_squares)(const float *x, int64_t n);
    void (*scale)(float *x, int64_t n, float s);
    /* ---- decoder ops ---- */
    void (*rmsnorm_forward)(float *out, float *rstd, const float *inp, const float *weight, int64_t N, int64_t C,
                            float eps);
    void (*rmsnorm_backward)(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                             const float *rstd, int64_t N, int64_t C);
    void (*swiglu_forward)(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld);
    void (*swiglu_backward)(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                            int64_t N, int64_t F, int64_t ld);
    void (*rope_cache)(float *cos, float *sin, const int32_t *pos, const float *inv_freq, float attn_factor,
                       int64_t N, int64_t D);
    void (*rope_forward)(float *x, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D, int64_t ld);
    void (*rope_backward)(float *dx, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D,
                          int64_t ld);
    void (*rows_gather)(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C);
    void (*rows_scatter_add)(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C);
    void (*mean_pool_forward)(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T, int64_t C);
    void (*mean_pool_backward)(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T, int64_t C);
    void (*l2_normalize)(float *x, int64_t N, int64_t C);
    /* ---- quant section ---- */
    void (*qweight_dequantize)(float *out, const lp_qweight *w, int64_t start, int64_t n);
    lp_status (*qmatmul_forward)(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                                 int64_t C, int64_t OC);
    lp_status (*qmatmul_backward)(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                  int64_t OC);
    lp_status (*bf16_matmul_forward)(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                                     int64_t C, int64_t OC);
    lp_status (*f32_matmul_forward)(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N,
                                    int64_t C, int64_t OC);
    lp_status (*f32_matmul_backward)(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                     int64_t OC); /* dinp = dout @ W, W packed f32 */
    lp_status (*bf16_matmul_backward)(float *dinp, float *dweight, const float *dout, const float *inp,
                                      const lp_qweight *w, int64_t N, int64_t C, int64_t OC);
    void (*bf16_repack)(lp_qweight *q, const float *w); /* lp_qweight_repack_bf16 */
    void (*add_inplace)(float *y, const float *x, int64_t n);
    lp_status (*lora_forward)(float *out, float *u, uint8_t *keep, const float *inp, const lp_lora_base *base,
                              const float *A, const float *B, float s, float p, lp_rng *rng, int64_t N, int64_t C,
                              int64_t OC, int64_t r);
    lp_status (*lora_backward)(float *dinp, float *dA, float *dB, const float *dout, const float *inp,
                               const float *u, const uint8_t *keep, const lp_lora_base *base, const float *A,
                               const float *B, float s, float p, int64_t N, int64_t C, int64_t OC, int64_t r);
    /* ---- KV-cache decoding ---- */
    void (*kv_write)(void *kc, void *vc, const float *k, const float *v, const lp_kv_geom *g, int64_t t0, int64_t T);
    void (*attention_decode)(float *out, const float *q, const void *kc, const void *vc, const int32_t *mask,
                             const lp_kv_geom *g);
} lp_kernel_table;

typedef enum lp_kernels_impl { LP_KERNELS_IMPL_REF = 0, LP_KERNELS_IMPL_OPT } lp_kernels_impl;

/* ISA levels. The optimized kernels are compiled once per level (src/kernels/cpu/README.md)
 * and one binary picks at start-up the widest level the CPU and OS support (CPUID, and
 * XGETBV for the OS saving the AVX / AVX-512 registers); LP_ISA=<name> in the environment
 * or lp_kernels_select_isa forces a level the CPU has. The rest of loupe is compiled for
 * the baseline, so the binary runs on any x86-64-v2 CPU. */
typedef enum lp_isa {
    LP_ISA_BASELINE = 0, /* "baseline": x86-64-v2 (SSE4.2, POPCNT); scalar and SSE code */
    LP_ISA_AVX2,         /* "avx2": x86-64-v3 (AVX2, FMA, F16C, BMI2) */
    LP_ISA_AVX512,       /* "avx512": x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) */
    LP_ISA_AVX512BF16,   /* "avx512bf16": and AVX512_BF16 + AVX512_VNNI */
    LP_ISA_COUNT
} lp_isa;

/* "baseline", "avx2", "avx512", "avx512bf16" (static storage); "?" outside the enum. */
const char *lp_isa_name(lp_isa isa);
/* Parses a level's name (as lp_isa_name writes it). Errors: LP_STATUS_INVALID_ARG naming
 * `what` (e.g. "LP_ISA") and the valid names. */
LP_WARN_UNUSED lp_status lp_isa_parse(const char *s, const char *what, lp_isa *out);
/* The widest level this CPU and OS run (detected once, thread-safe). */
lp_isa lp_isa_detect(void);
/* The CPU's name for what it lacks of `isa` ("avx512bw", "OS support for AVX-512 state"),
 * or NULL when it runs it. */
const char *lp_isa_missing(lp_isa isa);

/* Reads LP_KERNELS ("ref" or "opt"; default opt) and LP_ISA (a level name; default the
 * detected one). Called implicitly by the first op, which on a bad LP_ISA prints the error
 * on stderr and keeps the detected level; call it first to refuse instead.
 * Errors: LP_STATUS_INVALID_ARG (unknown name), LP_STATUS_UNSUPPORTED (the CPU lacks it). */
lp_status lp_kernels_init(void);
/* Selects the table used by the lp_* wrappers (process-wide). */
void lp_kernels_select(lp_kernels_impl impl);
/* Selects the ISA level of the optimized table (process-wide; keeps ref/opt as it is).
 * Errors: LP_STATUS_UNSUPPORTED naming the level and the missing feature. */
LP_WARN_UNUSED lp_status lp_kernels_select_isa(lp_isa isa);
/* The active ISA level of the optimized table. */
lp_isa lp_kernels_isa(void);
/* The table for impl (static storage, never NULL; OPT at the active ISA level), and the
 * active one. */
const lp_kernel_table *lp_kernels_table(lp_kernels_impl impl);
/* The optimized table compiled for `isa` (static storage, never NULL), whether or not the
 * CPU runs it: call only when lp_isa_missing(isa) is NULL. */
const lp_kernel_table *lp_kernels_table_isa(lp_isa isa);
const lp_kernel_table *lp_kernels_active(void);

/* ---- the device the wrappers run on ---------------------------------------------------
 * CPU by default. lp_kernels_use_device(LP_DEVICE_CUDA) switches the lp_* wrappers to the
 * CUDA backend's op table (every pointer they are handed must then be a device pointer) and
 * the helpers below to its memory; entries that backend lacks are NULL in
 * lp_kernels_active() (check before calling an op a device may not have). On the CPU the
 * helpers are lp_alloc / memcpy / memset, so the CPU path is unchanged.
 *
 *   if (lp_kernels_use_device(LP_DEVICE_CUDA) != LP_OK) ...   // "no CUDA GPU is present (...)"
 *   float *x = lp_kernels_dev_alloc(n * 4, LP_MEM_CATEGORY_ACTIVATION, "x");  // zeroed
 *   lp_kernels_upload(x, host, n * 4);  ...  lp_kernels_download(host, x, n * 4);
 */
typedef enum lp_device { LP_DEVICE_CPU = 0, LP_DEVICE_CUDA } lp_device;
/* "cpu" or "cuda". */
const char *lp_device_name(lp_device d);
/* "cpu" or "cuda"; LP_STATUS_INVALID_ARG otherwise. */
LP_WARN_UNUSED lp_status lp_device_parse(const char *s, lp_device *out);
/* Switches the wrappers (process-wide, between runs, never during one). CUDA errors
 * (LP_STATUS_UNSUPPORTED, nothing switched): "this loupe was built without CUDA", "no CUDA
 * GPU is present (...)". CPU: back to lp_kernels_init's table. */
LP_WARN_UNUSED lp_status lp_kernels_use_device(lp_device d);
lp_device lp_kernels_device(void);
/* The CUDA device's name ("NVIDIA H100 80GB HBM3"), or NULL on the CPU. */
const char *lp_kernels_device_label(void);
/* A zero-filled buffer of the active device under a memory category (NULL and lp_err on
 * failure); release with lp_kernels_dev_free. */
void *lp_kernels_dev_alloc(size_t bytes, lp_mem_category cat, const char *what);
/* The same without the zero fill on a device (a memset of its whole size there): for
 * scratch every byte of which is written before it is read. */
void *lp_kernels_dev_scratch(size_t bytes, lp_mem_category cat, const char *what);
void lp_kernels_dev_free(void *p);
/* Copies host <-> device and inside the device, and memset, ordered with the ops (download
 * waits and returns any error a queued op kept: an id out of range, a failed launch). */
LP_WARN_UNUSED lp_status lp_kernels_upload(void *dst, const void *src, size_t bytes);
LP_WARN_UNUSED lp_status lp_kernels_download(void *dst, const void *src, size_t bytes);
void lp_kernels_copy(void *dst, const void *src, size_t bytes);
/* rows x row_bytes, rows dst_stride / src_stride bytes apart (strides >= row_bytes), in one
 * device call: a gather or scatter of rows without a host loop of copies. */
void lp_kernels_copy_rows(void *dst, size_t dst_stride, const void *src, size_t src_stride, size_t row_bytes,
                          size_t rows);
void lp_kernels_memset(void *dst, int value, size_t bytes);
/* --dtype bf16's copy of a trained weight w (rows, cols; the active device's memory) in the
 * layout the active device's bf16 GEMMs read: lp_qweight_pack_bf16_train's panels on the
 * CPU, one row-major device array on CUDA. lp_qweight_repack_bf16 rounds it again after an
 * optimizer step; release with lp_kernels_qweight_free. Errors as the pack's. */
LP_WARN_UNUSED lp_status lp_kernels_qweight_bf16_train(lp_qweight *q, const float *w, int64_t rows,
                                                       int64_t cols, const char *name);
void lp_kernels_qweight_free(lp_qweight *q);
/* QLoRA under --dtype bf16 (bitsandbytes' compute dtype bf16): *q = the NF4 or int8 weight w
 * dequantized to f32 and rounded to bf16, laid out as lp_kernels_qweight_bf16_train lays a
 * weight out, in TEMPORARY memory for one use: what bnb's matmul_4bit multiplies (the f32
 * dequantization is freed before returning). Release with lp_kernels_qweight_free. Errors:
 * INVALID_ARG (w not NF4/int8), NO_MEMORY; *q zeroed on error. */
LP_WARN_UNUSED lp_status lp_kernels_qweight_bf16_of(lp_qweight *q, const lp_qweight *w, const char *name);
/* *d = a copy of the NF4 or int8 weight h in the device's memory (category QUANTIZED_WEIGHT,
 * read by its qweight_dequantize; release with lp_kernels_qweight_free). On the CPU, and on
 * the stand-in device whose memory is the host's, *d is zeroed (d->mem NULL): h itself
 * serves. Errors: UNSUPPORTED (another format), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_kernels_qweight_upload(const lp_qweight *h, lp_qweight *d, const char *name);
/* Waits for the device; the first error kept since the last sync (LP_OK on the CPU). */
LP_WARN_UNUSED lp_status lp_kernels_sync(void);
/* CUDA: f32 GEMMs on TF32 tensor cores (inputs rounded to 10 mantissa bits); no-op on the CPU. */
void lp_kernels_set_tf32(bool on);
/* CUDA: the device allocator's current and peak allocated / reserved bytes of category cat
 * (all zero on the CPU, whose figures are lp_mem's). */
typedef struct lp_device_mem {
    int64_t allocated, peak_allocated, reserved, peak_reserved;
} lp_device_mem;
void lp_kernels_device_mem(lp_mem_category cat, lp_device_mem *out);
/* The same over every category (peak of the total, not the sum of peaks). */
void lp_kernels_device_mem_total(lp_device_mem *out);

/* ---- GEMM ------------------------------------------------------------------------- */

/* C (M,N) = alpha * op(A) @ op(B) + beta * C, row-major, op = transpose when trans_*.
 * A is (M,K) or, transposed, stored (K,M); B is (K,N) or stored (N,K). beta = 0 ignores
 * C's old contents (NaNs included). Optimized: cblas_sgemm (OpenBLAS). */
void lp_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* Linear layer (PyTorch weight layout): out = inp @ weight^T + bias.
 *   out (N,OC) =; inp (N,C); weight (OC,C); bias (OC) or NULL. */
void lp_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int64_t N, int64_t C,
                       int64_t OC);
/*   dinp (N,C) = dout @ weight (skipped when NULL); dweight (OC,C) += dout^T @ inp (skipped
 *   when NULL: frozen weight); dbias (OC) += column sums of dout (NULL: none); dout (N,OC). */
void lp_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, int64_t N, int64_t C, int64_t OC);

/* out (N,C) += bias (C) on every row. */
void lp_bias_add_forward(float *out, const float *bias, int64_t N, int64_t C);
/* dbias (C) += column sums of dout (N,C). */
void lp_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C);

/* ---- embedding ---------------------------------------------------------------------- */

/* out (B,T,C) = wte[ids] + wpe[t + pos_offset] + wtt[type_ids] (wpe, wtt may be NULL to
 * skip; type_ids NULL means type 0). ids, type_ids (B,T); wte (V,C); wpe (P,C); wtt (TT,C).
 * Errors: LP_STATUS_RANGE naming the first id, position or type outside its table. */
LP_WARN_UNUSED lp_status lp_embedding_forward(float *out, const int32_t *ids, const int32_t *type_ids,
                                              const float *wte, const float *wpe, const float *wtt, int64_t B,
                                              int64_t T, int64_t C, int64_t V, int64_t P, int64_t TT,
                                              int64_t pos_offset);
/* dwte (V,C) +=, dwpe (P,C) +=, dwtt (TT,C) += (each NULL to skip) from dout (B,T,C).
 * Ids must have passed lp_embedding_forward. */
void lp_embedding_backward(float *dwte, float *dwpe, float *dwtt, const float *dout, const int32_t *ids,
                           const int32_t *type_ids, int64_t B, int64_t T, int64_t C, int64_t pos_offset);

/* ---- LayerNorm ---------------------------------------------------------------------- */

/* out (N,C) = (inp - mean) * rstd * weight + bias; saves mean (N) and rstd (N) for the
 * backward (biased variance, as torch.nn.LayerNorm). */
void lp_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                          const float *bias, int64_t N, int64_t C, float eps);
/* dinp (N,C) =; dweight (C) +=; dbias (C) += (each of dweight/dbias may be NULL). */
void lp_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, const float *mean, const float *rstd, int64_t N, int64_t C);

/* ---- activations, softmax, dropout ---------------------------------------------------- */

/* out (n) = tanh(inp) or max(inp, 0); in place allowed. */
void lp_act_forward(float *out, const float *inp, int64_t n, lp_act_kind kind);
/* dinp (n) = dout * act'(x): tanh's from out (1 - out^2), ReLU's from inp (inp > 0); dinp may
 * alias dout. */
void lp_act_backward(float *dinp, const float *dout, const float *inp, const float *out, int64_t n,
                     lp_act_kind kind);
/* out (n) = gelu(inp (n)); in place (out == inp) allowed. */
void lp_gelu_forward(float *out, const float *inp, int64_t n, lp_gelu_kind kind);
/* dinp (n) = dout * gelu'(inp); dinp may alias dout. */
void lp_gelu_backward(float *dinp, const float *dout, const float *inp, int64_t n, lp_gelu_kind kind);

/* Row softmax: out (N,C) = softmax(inp (N,C)) over C. -inf entries get probability 0. */
void lp_softmax_forward(float *out, const float *inp, int64_t N, int64_t C);
/* dinp (N,C) = out * (dout - sum(dout * out)) per row. */
void lp_softmax_backward(float *dinp, const float *dout, const float *out, int64_t N, int64_t C);

/* Inverted dropout: keep (n) = 1 where u >= p for the RNG's uniform u (element i: draw
 * rng->lane + i, see lp_rng_at), out = inp * keep / (1-p). p = 0 copies and keeps all; p must
 * be in [0, 1). Advances rng past the draws (lp_rng_skip), identically for ref and opt and
 * any thread count. */
void lp_dropout_forward(float *out, uint8_t *keep, const float *inp, int64_t n, float p, lp_rng *rng);
/* dinp (n) = dout * keep / (1-p). */
void lp_dropout_backward(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p);

/* ---- attention ---------------------------------------------------------------------- */

/* Multi-head attention over one lp_attn_geom (see there: GQA, causal, sliding window,
 * padding mask, scale). mask (B,T): 1 = real token, 0 = padding, or NULL for none (with
 * g->segments: sample ids, 0 = padding); padded queries still produce outputs (as in HF)
 * when some key is visible to them.
 * out (B,T,H,D) contiguous = (B,T,H*D): ready for the output projection.
 * Eager: out =; att (B,H,T,T) = the softmax probabilities (0 for invisible keys, a whole
 * row 0 for a query that sees none), saved for the backward. */
void lp_attention_eager_forward(float *out, float *att, const float *q, const float *k, const float *v,
                                const int32_t *mask, const lp_attn_geom *g);
/* dq (layout of q) =; dk, dv (layout of k, v; Hkv heads) = the sum over the H/Hkv query
 * heads that share each; datt (B,H,T,T) is scratch; dout (B,T,H*D). */
void lp_attention_eager_backward(float *dq, float *dk, float *dv, float *datt, const float *dout, const float *att,
                                 const float *q, const float *k, const float *v, const lp_attn_geom *g);
/* Fused (flash-attention style): scores are computed tile by tile with an online softmax
 * and never stored; key tiles no query of a block can see (above the causal diagonal,
 * outside the window) are skipped, not masked; with segments, only tiles that cross a
 * sample boundary are masked element by element. lse (B,H,T) saves each row's log-sum-exp
 * of scaled, masked scores (-inf for a query that sees no key). drop (NULL = none) applies
 * dropout to the probabilities, drawing each mask element from its Philox counter on the
 * fly (see lp_attn_dropout). Every head size D >= 1 works. */
void lp_attention_fused_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                                const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
/* Key tile width of the fused kernels. Head sizes up to LP_ATTN_TILE_MAX_D use per-thread
 * tiles of fixed size; larger ones take tiles sized by D from the heap, per call. */
#define LP_ATTN_KEY_TILE 64
#define LP_ATTN_TILE_MAX_D 256
/* Floats of one thread's query/key/value tiles for a head size above LP_ATTN_TILE_MAX_D:
 * three (32, Dp) query-row tiles, two (D, 64) transposed key tiles and one (64, Dp) row
 * tile, Dp = D rounded up to 16. */
static inline int64_t lp_attention_fused_tile_floats(int64_t D)
{
    int64_t Dp = (D + 15) / 16 * 16;
    return 3 * 32 * Dp + 2 * D * LP_ATTN_KEY_TILE + LP_ATTN_KEY_TILE * Dp;
}
/* The scratch the fused forward takes per thread (the memory estimate counts threads x
 * this many floats): one kv head's keys, transposed in key tiles, and its values, packed
 * once per head, plus the heap tiles above LP_ATTN_TILE_MAX_D. The backward takes only
 * those tiles for MHA (so this is the larger of the two for BERT), and for GQA maybe also
 * lp_attention_fused_backward_scratch_floats (see there). */
static inline int64_t lp_attention_fused_pack_floats(int64_t T, int64_t D)
{
    int64_t n = ((T + LP_ATTN_KEY_TILE - 1) / LP_ATTN_KEY_TILE) * LP_ATTN_KEY_TILE * D + T * D;
    return n + (D > LP_ATTN_TILE_MAX_D ? lp_attention_fused_tile_floats(D) : 0);
}
/* dq, dk, dv = (dk, dv summed over each kv head's query heads); recomputes each score tile
 * (and dropout mask) from q, k, lse and drop, which must be the forward's. out is the
 * forward's out. With GQA (H > Hkv) and fewer than 2 x threads (batch, kv head) pairs, it
 * takes lp_attention_fused_backward_scratch_floats temporary floats to run one task per
 * query head (without them it runs one per kv head: same result, less parallel). */
void lp_attention_fused_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                 const float *lse, const float *q, const float *k, const float *v,
                                 const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop);
/* Floats the fused backward's per-query-head GQA path takes: dk and dv per query head,
 * 2 x (B,T,H,D); 0 for MHA. */
static inline int64_t lp_attention_fused_backward_scratch_floats(const lp_attn_geom *g)
{
    return g->H > g->Hkv ? 2 * g->B * g->T * g->H * g->D : 0;
}
/* LP_OK when g describes attention the kernels can run: B, T, H, Hkv, D >= 1, H a multiple
 * of Hkv, ldq >= H*D, ldkv >= Hkv*D, window >= 0, scale finite and >= 0. Otherwise
 * LP_STATUS_INVALID_ARG with a message naming `what` (a model file, a layer) and the field.
 * The kernels themselves only assert this: loaders check once, up front. */
LP_WARN_UNUSED lp_status lp_attention_geom_check(const lp_attn_geom *g, const char *what);

/* ---- KV-cache decoding (see lp_kv_geom for the cache layout) --------------------------- */

/* Appends T tokens per sequence to one layer's cache at columns t0 .. t0+T-1:
 * k, v (B,T,Hkv*D) token-major (rotated keys, values) -> kc, vc (B,Hkv,cap,D), converted to
 * f16 when g->f16. Needs t0 + T <= g->cap. */
void lp_kv_write(void *kc, void *vc, const float *k, const float *v, const lp_kv_geom *g, int64_t t0, int64_t T);
/* One query row per sequence against its cached keys: out (B,H*D) = softmax(scale q.k^T) v over
 * the columns j < g->T with mask[b,j] == 1 (and inside the window); q (B,H*D), query head h
 * reads kv head h / (H/Hkv). A sequence whose query sees no column gets 0 (never NaN). */
void lp_attention_decode(float *out, const float *q, const void *kc, const void *vc, const int32_t *mask,
                         const lp_kv_geom *g);

/* ---- loss --------------------------------------------------------------------------- */

/* Cross-entropy with logits, mean over the rows whose target != ignore_index (0 when all
 * are ignored, where PyTorch would give NaN). logits (N,V); targets (N); loss (1) =;
 * lse (N) = saved log-sum-exp per row. Errors: LP_STATUS_RANGE for a target outside
 * [0, V) that is not ignore_index; LP_STATUS_NUMERIC for a non-finite logit row. */
LP_WARN_UNUSED lp_status lp_cross_entropy_forward(float *loss, float *lse, const float *logits,
                                                  const int32_t *targets, int64_t N, int64_t V,
                                                  int32_t ignore_index);
/* dlogits (N,V) = dloss * (softmax - onehot) / count; ignored rows get 0. dlogits may be
 * logits (in place). */
void lp_cross_entropy_backward(float *dlogits, const float *logits, const float *lse, const int32_t *targets,
                               int64_t N, int64_t V, int32_t ignore_index, float dloss);

/* ---- optimizer ---------------------------------------------------------------------- */

/* One AdamW step over n elements, exactly as torch.optim.AdamW (amsgrad off):
 * param *= 1 - lr*weight_decay; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 * param -= lr/(1-b1^step) * m / (sqrt(v)/sqrt(1-b2^step) + eps). step counts from 1. */
void lp_adamw_step(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
                   double eps, double weight_decay, int64_t step);

/* lp_adamw_step on each of count tensors, the same arithmetic bit for bit: on a table with
 * adamw_multi in one call (CUDA: one launch per 48 tensors), else one lp_adamw_step each. */
void lp_adamw_multi(const lp_adamw_tensor *t, int count, double lr, double beta1, double beta2, double eps,
                    int64_t step);

/* Global L2 norm of n_tensors gradient buffers (accumulated in double). */
double lp_grad_norm(float *const *grads, const int64_t *sizes, int n_tensors);
/* Its square before the root: the sum of squares (double), for a norm summed over shards. */
double lp_grad_sum_squares(float *const *grads, const int64_t *sizes, int n_tensors);
/* Every gradient buffer times s: lp_grad_clip's scaling, for a caller with the norm. */
void lp_grad_scale(float *const *grads, const int64_t *sizes, int n_tensors, float s);
/* torch.nn.utils.clip_grad_norm_: computes the global norm; when it exceeds max_norm,
 * scales every gradient by max_norm / (norm + 1e-6). Returns the norm before clipping
 * (NaN/inf when a gradient is not finite: then nothing is scaled). */
double lp_grad_clip(float *const *grads, const int64_t *sizes, int n_tensors, double max_norm);

/* ==== decoder ops (Llama, Mistral, Qwen2, SmolLM) =======================================
 *
 *   lp_rope_scaling rs = {.type = LP_ROPE_TYPE_DEFAULT};
 *   float attn_factor;
 *   lp_rope_inv_freq(inv_freq, D, 1e6, &rs, &attn_factor);          // once per model
 *   lp_rope_cache(cos, sin, pos, inv_freq, attn_factor, B * T, D);    // once per forward
 *   lp_rmsnorm_forward(h, rstd, x, w_norm, B * T, C, 1e-6f);
 *   ... qkv = h @ Wqkv^T ...
 *   lp_rope_forward(qkv, cos, sin, B * T, H, D, ld);                  // q heads in place
 *   lp_rope_forward(qkv + H * D, cos, sin, B * T, Hkv, D, ld);        // k heads in place
 *   ... gu (B*T, 2F) = h2 @ [Wgate; Wup]^T ...
 *   lp_swiglu_forward(a, gu, gu + F, B * T, F, 2 * F);                // a = silu(gate) * up
 *   lp_rows_gather(last, hidden, last_idx, B, C);                      // last-token pooling
 *
 * The same accumulation rule as above: dweight +=, activation gradients =. */

/* RMSNorm, as transformers' LlamaRMSNorm / Qwen2RMSNorm in float32:
 * rstd (N) = 1 / sqrt(mean(inp^2) + eps) per row; out (N,C) = weight * (inp * rstd).
 * inp (N,C); weight (C). out must not overlap inp. */
void lp_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int64_t N, int64_t C,
                        float eps);
/* dinp (N,C) = rstd * (weight*dout - inp * rstd^2 * mean(weight*dout*inp)); dweight (C) +=
 * sum over rows of dout * inp * rstd (NULL: frozen weight, skipped). rstd is the forward's.
 * dinp MAY alias dout (in place: each row is reduced before it is written, and dweight is
 * taken from dout first); it must not overlap inp, weight, rstd or dweight. */
void lp_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                         const float *rstd, int64_t N, int64_t C);

/* SiLU-gated MLP activation (Llama's act(gate_proj(x)) * up_proj(x), act = silu):
 * out (N,F) contiguous = silu(gate) * up, silu(g) = g * sigmoid(g), with gate[n*ld + f] and
 * up[n*ld + f] (ld >= F: the two halves of one (N,2F) GEMM output with ld = 2F, or two
 * (N,F) buffers with ld = F). silu and its derivative are finite, never NaN, for every
 * finite gate (the sigmoid never divides inf by inf: silu(-1e30) = -0, silu(1e30) = 1e30);
 * only a product past float's range (silu(g) * up > 3.4e38) overflows, to inf as in torch.
 * out must not overlap gate or up. */
void lp_swiglu_forward(float *out, const float *gate, const float *up, int64_t N, int64_t F, int64_t ld);
/* dgate = dout * up * silu'(gate), dup = dout * silu(gate) (both =, stride ld like gate and
 * up); dout (N,F) contiguous. In place is allowed: dgate may be gate and dup may be up (each
 * element is read before it is written); dout must not overlap them. */
void lp_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                        int64_t N, int64_t F, int64_t ld);

/* Rotary position embeddings, transformers' rope_type values. The frequencies here are
 * fixed per model: "dynamic" (NTK scaling recomputed from each batch's longest sequence) is
 * refused by lp_rope_inv_freq (LP_STATUS_UNSUPPORTED); "longrope" has no lp_rope_type at
 * all (a config reader refuses it). */
typedef enum lp_rope_type {
    LP_ROPE_TYPE_DEFAULT = 0, /* none / "default" */
    LP_ROPE_TYPE_LINEAR,      /* "linear": inv_freq / factor */
    LP_ROPE_TYPE_LLAMA3,      /* "llama3": factor, low/high_freq_factor, original_max_pos */
    LP_ROPE_TYPE_YARN,        /* "yarn": factor, original_max_pos, beta_fast/slow, mscale... */
    LP_ROPE_TYPE_DYNAMIC,     /* "dynamic": refused */
} lp_rope_type;

/* rope_scaling (rope_parameters) of a config.json. Fields a type does not use are ignored;
 * zero means "absent" where transformers has a default (yarn: beta_fast 32, beta_slow 1;
 * mscale and mscale_all_dim used only when both are non-zero; attention_factor computed
 * from factor when 0; truncate: yarn's correction range rounded outward, transformers'
 * default true, so set no_truncate for a config with "truncate": false). */
typedef struct lp_rope_scaling {
    lp_rope_type type;
    double factor;              /* linear, llama3, yarn: > 0 (yarn without one in config.json:
                                 * max_position_embeddings / original_max_position_embeddings) */
    double low_freq_factor;     /* llama3 */
    double high_freq_factor;    /* llama3: != low_freq_factor */
    double beta_fast, beta_slow; /* yarn */
    double mscale, mscale_all_dim, attention_factor; /* yarn */
    int64_t original_max_pos;   /* llama3, yarn: original_max_position_embeddings > 0 */
    bool no_truncate;           /* yarn: "truncate": false */
} lp_rope_scaling;

/* inv_freq (D/2) as transformers computes it in float32 (1 / theta^(2i/D), then the
 * scaling), and *attn_factor (may be NULL) = the multiplier of cos and sin (1 except yarn).
 * s NULL = default. Not a dispatched op: once per model. Errors (LP_STATUS_INVALID_ARG,
 * naming the field): D odd or < 2, theta <= 1 or not finite, a missing or non-positive
 * scaling parameter; LP_STATUS_UNSUPPORTED for "dynamic". */
LP_WARN_UNUSED lp_status lp_rope_inv_freq(float *inv_freq, int64_t D, double theta, const lp_rope_scaling *s,
                                          float *attn_factor);
/* cos, sin (N, D/2) = cos/sin(float(pos[n]) * inv_freq[i]) * attn_factor, the angle a float32
 * product as in transformers; pos (N) per token (rows may differ under left padding or
 * packing); computed once per forward and shared by every layer. Precondition: D even (the
 * caller got inv_freq from lp_rope_inv_freq, which refuses odd D). */
void lp_rope_cache(float *cos, float *sin, const int32_t *pos, const float *inv_freq, float attn_factor, int64_t N,
                   int64_t D);
/* Rotates x in place, HF rotate-half layout: for each of the N tokens and H heads (head h
 * of token n starts at x + n*ld + h*D) and i < D/2, with c = cos[n*D/2+i], s = sin[...]:
 * x[i] = x[i]*c - x[i+D/2]*s, x[i+D/2] = x[i+D/2]*c + x[i]*s (both from the old values:
 * transformers' x*cos + rotate_half(x)*sin). Applies to q (H heads) and to
 * k (Hkv heads) inside a packed qkv buffer. Precondition: D even, ld >= H*D. */
void lp_rope_forward(float *x, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D, int64_t ld);
/* The transposed rotation (angle -> -angle), in place on the gradient dx (same layout). */
void lp_rope_backward(float *dx, const float *cos, const float *sin, int64_t N, int64_t H, int64_t D, int64_t ld);

/* Row gather for pooling (last token of decoder classifiers, CLS, any index): out (n,C) =
 * x[idx[i]] row by row; x (rows,C), idx (n), each in [0, rows): the caller's invariant (it
 * derives the indices from its own mask), not checked here. out must not overlap x. */
void lp_rows_gather(float *out, const float *x, const int64_t *idx, int64_t n, int64_t C);
/* dx[idx[i]] += dout[i] (n,C), in order of i (repeated indices add up, as the reference
 * does, for every thread count). An activation gradient that ACCUMULATES, unlike the rule
 * above: dx (rows,C) is zeroed by the caller, or is a gradient it already holds (the
 * residual stream's), into which the pooled rows' gradients add. */
void lp_rows_scatter_add(float *dx, const float *dout, const int64_t *idx, int64_t n, int64_t C);

/* Masked mean over T: out (B,C) = sum_t mask[b,t] * x[b,t,:] / sum_t mask[b,t] (mask NULL =
 * all 1; a row with no real token gives 0), summed in double: sentence-transformers'
 * Pooling(mean). */
void lp_mean_pool_forward(float *out, const float *x, const int32_t *mask, int64_t B, int64_t T, int64_t C);
/* dx (B,T,C) = dout[b] * mask[b,t] / count_b. */
void lp_mean_pool_backward(float *dx, const float *dout, const int32_t *mask, int64_t B, int64_t T, int64_t C);
/* Rows of x (N,C) scaled to unit L2 norm in place (the norm clamped at 1e-12, as F.normalize). */
void lp_l2_normalize(float *x, int64_t N, int64_t C);

/* ==== end of the decoder ops =========================================================== */

/* ==== quantized weights and LoRA (quant section) ======================================
 *
 *   lp_qweight q;
 *   lp_qweight_quantize(&q, LP_DTYPE_NF4, w, OC, C, true, "layer0.q_lin");  // NF4 + double quant
 *   lp_qmatmul_forward(out, x, &q, bias, N, C, OC);       // fused: no f32 copy of W
 *   lp_qmatmul_backward(dx, dout, &q, N, C, OC);         // dx = dout @ W (base is frozen)
 *   lp_lora_base base = {.q = &q, .bias = bias};
 *   lp_lora_forward(y, u, keep, x, &base, A, B, alpha / r, 0.1f, &rng, N, C, OC, r);
 *   lp_lora_backward(dx, dA, dB, dy, x, u, keep, &base, A, B, alpha / r, 0.1f, N, C, OC, r);
 *   lp_qweight_free(&q);
 *
 * The *_eager variants compute the same results as separate ops (dequantize the whole
 * weight into a TEMPORARY buffer, then sgemm; LoRA as dropout, two matmuls, scale, add),
 * each its own profiler range: what --exec eager runs. */

#define LP_NF4_BLOCK 64         /* NF4 block size (bitsandbytes blocksize) */

/* The fused quantized GEMM dequantizes W a slab of the reduction dimension (`total` long)
 * at a time; this is the slab width when the other side of W is `other` long: at most 1 Mi
 * floats (4 MiB) a slab and at most 256 wide, at least 64, a multiple of 64 (whole NF4
 * blocks when rows are block-aligned), evened out over the slabs. 256 is about OpenBLAS's
 * own K-blocking, so slabbing costs little more than one extra pass over the output per
 * slab. (The memory estimate sizes the TEMPORARY slab with it.) */
/* Prefill of a GGML weight that has no tiled integer GEMM (the K-quants, Q5_0, Q5_1, F16):
 * from this many rows on, its forward dequantizes W to f32 a slab at a time and runs sgemm
 * (lp_qmatmul_slab_width; no activation rounding) instead of one integer dot product per row
 * pair, which reads each weight block once per activation row and keeps no partial sums in
 * registers across rows: SmolLM2-135M Q4_K_M's pp512 ran at 0.6x llama.cpp that way. The
 * whole weight is dequantized per call, so short prompts keep the dot products: on Zen 3 at
 * 2 threads the slabs lose below 64 rows (166 vs 244 tokens/s), break even near 96 and win
 * 1.1x at 128, 1.7x at 256, 2.1x at 512. Q8_0, Q4_0 and Q4_1 keep their tiled integer GEMM.
 * (The memory estimate sizes the slab too.) */
#define LP_GGML_SLAB_MIN_ROWS 96
static inline bool lp_ggml_forward_by_slabs(lp_ggml_type t, int64_t N)
{
    return N >= LP_GGML_SLAB_MIN_ROWS && t != LP_GGML_TYPE_Q8_0 && t != LP_GGML_TYPE_Q4_0 &&
           t != LP_GGML_TYPE_Q4_1;
}

static inline int64_t lp_qmatmul_slab_width(int64_t other, int64_t total)
{
    int64_t w = ((int64_t)(1 << 20) / (other > 0 ? other : 1)) & ~(int64_t)63;
    w = w < 64 ? 64 : w > 256 ? 256 : w;
    if (w >= total)
        return total;
    int64_t n = (total + w - 1) / w;
    w = ((total + n - 1) / n + 63) & ~(int64_t)63;
    return w < total ? w : total;
}
#define LP_NF4_NESTED_BLOCK 256 /* double quantization: absmax values per nested block */

/* The 16 NF4 code values (bitsandbytes get_4bit_type("nf4")) and the 256-entry dynamic
 * 8-bit map double quantization codes the absmax with (create_dynamic_map(signed=True)). */
extern const float lp_nf4_code[16];
extern const float lp_nf4_dynamic_map[256];

/* Quantizes w (rows, cols) f32 into *q (allocated, category QUANTIZED_WEIGHT, tagged with
 * name, which must outlive q). dtype LP_DTYPE_NF4: bitsandbytes quantize_4bit(blocksize=64,
 * quant_type="nf4", compress_statistics=double_quant) on its CPU backend, bit for bit
 * (codes, absmax, offset, nested absmax, absmax codes). LP_DTYPE_INT8: per output row,
 * scale = max|w_row| / 127, q = round-half-even(w / scale) (double_quant ignored).
 * Errors: LP_STATUS_INVALID_ARG (dtype, shape), LP_STATUS_NUMERIC (a non-finite weight,
 * named by row and column), LP_STATUS_NO_MEMORY. On error *q is zeroed. */
LP_WARN_UNUSED lp_status lp_qweight_quantize(lp_qweight *q, lp_dtype dtype, const float *w, int64_t rows,
                                             int64_t cols, bool double_quant, const char *name);
/* Bytes the one block of lp_qweight_quantize(dtype, rows, cols, double_quant) takes (what
 * the memory estimate counts before anything is quantized); 0 for another dtype. */
size_t lp_qweight_plan_nbytes(lp_dtype dtype, int64_t rows, int64_t cols, bool double_quant);
/* ---- int8 inference weights: LP_DTYPE_INT8 packed for the integer GEMM ----
 * A per-row int8 weight with codes in [-63, 63] (scale = max|w_row| / 63, round to nearest
 * even: one bit less than lp_qweight_quantize's, see below) in tiles of 16 interleaved rows
 * (q->tiles, with q->q and q->scale NULL, q->mem == q->tiles). Per tile: f32 scale[16],
 * int32 row sums of q [16], then cols / 4 steps of 64 bytes, step g holding
 * q[row][4g .. 4g+3] of each row at 4 * (row % 16); padding rows zero. The forward
 * (lp_qmatmul_forward) quantizes each activation row per call to 7 bits too (d = max|x| /
 * 63, round to nearest even, [-63, 63]), sums the int8 products of a row over all of cols
 * in int32 (exact: |sum| <= 127 * 63 * cols < 2^31 for cols <= LP_INT8_MAX_COLS, with the
 * kernels' +64 offset) and scales each output once: out = fma((float)sum, scale[o] * d[i],
 * bias[o]), bit-identical at every ISA level. Why 7 bits on both sides: the AVX2 kernel
 * multiplies the activations as unsigned bytes (x + 64, at most 127) by the signed weights
 * with `pmaddubsw`, whose pairs of products (at most 16002) then add across two steps
 * within int16 before one widening: 5 instructions per 64 products (3 per 32 with 8-bit
 * activations, 4 with 8-bit weights). PyTorch's fbgemm drops the activations' bit as well
 * (reduce_range).
 * cols must be a multiple of 32. */
#define LP_INT8_MAX_COLS 65536
#define LP_INT8_TILE_QMAX 63
#define LP_INT8_ACT_QMAX 63
/* Quantizes w (rows, cols) as above into *q. Errors: LP_STATUS_INVALID_ARG (shape; cols not
 * a multiple of 32 or above LP_INT8_MAX_COLS), LP_STATUS_NUMERIC (a non-finite weight),
 * LP_STATUS_NO_MEMORY; on error *q is zeroed. */
LP_WARN_UNUSED lp_status lp_qweight_quantize_int8_tiles(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                                        const char *name);
/* Bytes of the packed (rows, cols) weight; 0 for a shape it does not take. */
size_t lp_qweight_int8_tiles_nbytes(int64_t rows, int64_t cols);
/* Releases q's block and zeroes it; safe on a zeroed struct. */
void lp_qweight_free(lp_qweight *q);
/* Bytes of q's block (codes + scales + state), and that per parameter: NF4 ~0.5 + 1/64
 * (double quant) or + 4/64 (without); int8 1 + 4/cols. */
size_t lp_qweight_nbytes(const lp_qweight *q);
/* The bytes one GEMV (a decode step, N = 1) reads: the weight's one block (q->mem). At AVX2
 * and above that is the tiles that replaced a Q8_0 / Q4_0 / Q4_1 weight's blocks; at the
 * baseline level the blocks, not the prefill tiles beside them (lp_qweight_nbytes counts
 * both). */
size_t lp_qweight_decode_nbytes(const lp_qweight *q);
double lp_qweight_bytes_per_param(const lp_qweight *q);
/* Scale of NF4 block b as the dequantizer uses it (the reconstructed absmax with double
 * quant: float32(float32(dynamic[absmax_q[b]] * nested[b/256]) + offset)). */
float lp_qweight_nf4_block_absmax(const lp_qweight *q, int64_t b);

/* ---- GGML block formats kept at run time (dtype LP_DTYPE_GGML) ----
 * A GGUF tensor's blocks kept as stored, or an f32 weight quantized at load; every
 * lp_qmatmul / lp_lora entry point takes them. The forward quantizes the activations per
 * block (8 bits, blocks of 32, or of 256 for the K-quants) and multiplies with integer
 * dot products, the block scales applied in f32, as llama.cpp does; its error against
 * f32 arithmetic on the dequantized weight is bounded by sum_blocks (d_a / 2) sum |w|
 * (d_a = a block's max|x| / 127). The backward dequantizes (exact). */
/* True for the types a weight can be kept in: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
 * F16, BF16. */
bool lp_ggml_type_runnable(lp_ggml_type t);
/* True for the types lp_ggml_quantize writes: Q8_0, Q4_0, F16, BF16. */
bool lp_ggml_can_quantize(lp_ggml_type t);
/* dst = n f32 (a multiple of the block) as blocks of t, as ggml's reference quantizers
 * (quantize_row_q8_0_ref, ..._q4_0_ref) and the `gguf` package write them. */
void lp_ggml_quantize(lp_ggml_type t, const float *x, void *dst, int64_t n);
/* Bytes of a (rows, cols) weight kept as t; 0 when t is not runnable or cols is not a
 * multiple of its block. */
size_t lp_qweight_ggml_plan_nbytes(lp_ggml_type t, int64_t rows, int64_t cols);
/* *q = a copy of rows x (cols / block) blocks of type t at data (a GGUF tensor's bytes;
 * category QUANTIZED_WEIGHT, tagged name, which must outlive q). Errors:
 * LP_STATUS_UNSUPPORTED (type), LP_STATUS_INVALID_ARG (cols not whole blocks),
 * LP_STATUS_NO_MEMORY; on error *q is zeroed. */
LP_WARN_UNUSED lp_status lp_qweight_from_ggml(lp_qweight *q, lp_ggml_type t, const void *data, int64_t rows,
                                              int64_t cols, const char *name);
/* *q = w (rows, cols) f32 quantized to t (lp_ggml_can_quantize). Errors as above, plus
 * LP_STATUS_NUMERIC for a non-finite weight (named by row and column). */
LP_WARN_UNUSED lp_status lp_qweight_quantize_ggml(lp_qweight *q, lp_ggml_type t, const float *w, int64_t rows,
                                                  int64_t cols, const char *name);
/* Repacks q (GGML Q8_0, Q4_0 or Q4_1; any other weight is left as it is) into q->tiles,
 * the row-interleaved layout the prefill GEMM reads (16 rows a tile, each 32-element block
 * as f32 scales then the rows' bytes 4 at a time), so prefill does not repack per call.
 * Category QUANTIZED_WEIGHT, lp_qweight_ggml_tiles_nbytes bytes. Errors: LP_STATUS_NO_MEMORY
 * (q unchanged). */
LP_WARN_UNUSED lp_status lp_qweight_ggml_pack_tiles(lp_qweight *q);
/* Whether lp_qweight_ggml_pack_tiles then frees the blocks (q->blocks NULL): at AVX2 and
 * above, where every kernel reads the tiles, the tiles replace the blocks instead of
 * doubling the weight's memory; at the baseline level the blocks stay for the GEMV loop. */
bool lp_qweight_ggml_tiles_only(lp_ggml_type t);
/* Block b of weight row `row` rebuilt from the tiles, byte for byte as the GGUF stores it
 * (dst: the type's block bytes), for readers of single blocks (dequantization). */
void lp_qweight_ggml_block_from_tiles(const lp_qweight *w, int64_t row, int64_t b, uint8_t *dst);
/* Bytes lp_qweight_ggml_pack_tiles adds for a (rows, cols) weight of type t; 0 for a type
 * it leaves alone. */
size_t lp_qweight_ggml_tiles_nbytes(lp_ggml_type t, int64_t rows, int64_t cols);
/* sum_i W[row, i] * x[i] (x has cols floats) as the optimized forward computes it: the
 * integer kernels on blocks, x quantized per block (for tests and benchmarks). */
float lp_qweight_ggml_row_dot(const lp_qweight *w, int64_t row, const float *x);

/* ---- bf16 weights (dtype LP_DTYPE_BF16): inference compute in bf16 ----
 * W rounded to bf16 (nearest even) and packed once into the GEMM's panels (see lp_qweight);
 * lp_qmatmul_forward then rounds the activations to bf16 per call and accumulates the exact
 * bf16 x bf16 products in f32 (vdpbf16ps on AVX512_BF16, FMA on the widened pairs below
 * it). Its error against f32 arithmetic on the unrounded operands is that of rounding both
 * to bf16 (|rel| <= 2^-8 each), plus f32 summation. The backward unpacks (exact); a weight
 * packed for training (below) runs the backward in bf16 too. */
#define LP_BF16_PANEL 32
/* Bytes of a (rows, cols) weight packed as bf16 (rows rounded up to whole panels). */
size_t lp_qweight_bf16_plan_nbytes(int64_t rows, int64_t cols);
/* *q = w (rows, cols) f32 rounded to bf16 and packed (category QUANTIZED_WEIGHT, tagged
 * name, which must outlive q). Errors: LP_STATUS_INVALID_ARG (shape), LP_STATUS_NUMERIC (a
 * non-finite weight, named by row and column), LP_STATUS_NO_MEMORY; on error *q is zeroed. */
LP_WARN_UNUSED lp_status lp_qweight_pack_bf16(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                              const char *name);

/* ---- bf16 training (--dtype bf16: autocast semantics, bf16_train.c) ----
 * The f32 master weight W (rows = OC, cols = C) stays what the optimizer updates; a bf16
 * copy packed twice (W's panels for the forward, W^T's for dX) serves the GEMMs:
 *   lp_qmatmul_forward     out = x W^T + b      (bf16 x and W, f32 accumulation and out)
 *   lp_bf16_matmul_backward dX = dY W, dW += dY^T X (bf16 operands, f32 accumulation)
 * Error against f32 arithmetic: each operand rounded to bf16 (|rel| <= 2^-8 per product)
 * plus f32 summation order. */
/* Bytes of both packings of a (rows, cols) weight (each 64-byte aligned). */
size_t lp_qweight_bf16_train_plan_nbytes(int64_t rows, int64_t cols);
/* *q = w (rows, cols) rounded to bf16 and packed twice (one QUANTIZED_WEIGHT block tagged
 * name, which must outlive q; lp_qweight_free releases it). Errors: INVALID_ARG (shape),
 * NO_MEMORY; on error *q is zeroed. Non-finite weights are kept (the trainer's anomaly
 * checks see them in f32). */
LP_WARN_UNUSED lp_status lp_qweight_pack_bf16_train(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                                    const char *name);
/* Which bf16 GEMM the active ISA level runs (static text): "native (vdpbf16ps, AVX512_BF16)"
 * or "converted (...)": bf16 values widened to f32 and FMA, the same products. */
const char *lp_bf16_gemm_path(void);
/* Rounds w (q->rows, q->cols) into q's packings in place (after an optimizer step). */
void lp_qweight_repack_bf16(lp_qweight *q, const float *w);
/* TEMPORARY bytes lp_bf16_matmul_backward allocates at its peak (the larger of dX's rounded
 * dY and dW's two operands). */
size_t lp_qweight_bf16_train_scratch_nbytes(int64_t N, int64_t C, int64_t OC, bool dinp, bool dweight);
/* dinp (N,C) = dout (N,OC) @ W (skipped when NULL; needs q->bf16t); dweight (OC,C) +=
 * dout^T @ inp (N,C) (skipped when NULL), bf16 operands, f32 accumulation. The bias
 * gradient is not included (f32: lp_bias_backward). Errors: INVALID_ARG (shape, no W^T
 * panels), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_bf16_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                                                 const lp_qweight *w, int64_t N, int64_t C, int64_t OC);

/* ---- packed f32 weights (dtype LP_DTYPE_F32, f32 set): inference in f32 ----
 * W packed once at load into the f32 GEMM's panels (see lp_qweight), so no call re-packs
 * it (OpenBLAS's sgemm does, every call); lp_qmatmul_forward runs the f32 GEMM of
 * f32_gemm.c. Exact: only the f32 summation order differs from sgemm. The backward unpacks. */
#define LP_F32_PANEL 32
/* Bytes of a (rows, cols) weight packed as f32 (rows rounded up to whole panels). */
size_t lp_qweight_f32_plan_nbytes(int64_t rows, int64_t cols);
/* *q = w (rows, cols) packed (category QUANTIZED_WEIGHT, tagged name, which must outlive
 * q). Errors: LP_STATUS_INVALID_ARG (shape), LP_STATUS_NO_MEMORY; on error *q is zeroed. */
LP_WARN_UNUSED lp_status lp_qweight_pack_f32(lp_qweight *q, const float *w, int64_t rows, int64_t cols,
                                             const char *name);

/* out (n) = dequantized elements [start, start+n) of the flattened (rows*cols) weight. */
void lp_qweight_dequantize(float *out, const lp_qweight *w, int64_t start, int64_t n);

/* out (N,OC) = inp (N,C) @ W^T + bias (OC, or NULL), W (OC,C) quantized. NF4 / int8: W is
 * dequantized a slab at a time into a TEMPORARY buffer that feeds the GEMM, except NF4
 * with N <= 8 and whole blocks per row, which runs the fused dequant-GEMV (no f32 weight).
 * GGML formats: the integer kernels (see lp_qweight_from_ggml). Errors:
 * LP_STATUS_NO_MEMORY (buffers), LP_STATUS_INVALID_ARG (shape is not W's). */
LP_WARN_UNUSED lp_status lp_qmatmul_forward(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                            int64_t N, int64_t C, int64_t OC);
/* dinp (N,C) = dout (N,OC) @ W. The base is frozen: no weight or bias gradient here. */
LP_WARN_UNUSED lp_status lp_qmatmul_backward(float *dinp, const float *dout, const lp_qweight *w, int64_t N,
                                             int64_t C, int64_t OC);
/* Eager: the whole of W dequantized into one TEMPORARY buffer, then lp_matmul_*. */
LP_WARN_UNUSED lp_status lp_qmatmul_forward_eager(float *out, const float *inp, const lp_qweight *w,
                                                  const float *bias, int64_t N, int64_t C, int64_t OC);
LP_WARN_UNUSED lp_status lp_qmatmul_backward_eager(float *dinp, const float *dout, const lp_qweight *w, int64_t N,
                                                   int64_t C, int64_t OC);

/* y (n) += x (n). */
void lp_add_inplace(float *y, const float *x, int64_t n);

/* LoRA linear (PEFT semantics): out (N,OC) = base(inp) + s * (drop(inp) @ A^T) @ B^T, with
 * A (r,C) = lora_A, B (OC,r) = lora_B, s = alpha/r (or alpha/sqrt(r) for rsLoRA), drop =
 * inverted dropout with probability p on the LoRA input only (the same Philox mask as
 * lp_dropout_forward over N*C elements; advances rng likewise; rng may be NULL when
 * p == 0). Saves u (N,r) = drop(inp) @ A^T and, when p > 0, keep (N*C) for the backward
 * (keep may be NULL when p == 0). The fused version never forms B @ A nor a full dropped
 * copy of inp. Errors: LP_STATUS_NO_MEMORY, LP_STATUS_INVALID_ARG (no base, both bases,
 * p outside [0,1), missing keep/rng). */
LP_WARN_UNUSED lp_status lp_lora_forward(float *out, float *u, uint8_t *keep, const float *inp,
                                         const lp_lora_base *base, const float *A, const float *B, float s, float p,
                                         lp_rng *rng, int64_t N, int64_t C, int64_t OC, int64_t r);
/* dinp (N,C) = dout @ W_base + s * drop'((dout @ B) @ A) (NULL to skip); dA (r,C) += s *
 * (dout @ B)^T @ drop(inp); dB (OC,r) += s * dout^T @ u (each NULL to skip). The base
 * weight and bias get no gradient (frozen). u and keep are the forward's. */
LP_WARN_UNUSED lp_status lp_lora_backward(float *dinp, float *dA, float *dB, const float *dout, const float *inp,
                                          const float *u, const uint8_t *keep, const lp_lora_base *base,
                                          const float *A, const float *B, float s, float p, int64_t N, int64_t C,
                                          int64_t OC, int64_t r);
/* Eager: the same as separate profiled ops (dropout, matmul A, matmul B, scale, base
 * matmul, add); temporaries from lp_alloc (TEMPORARY). */
LP_WARN_UNUSED lp_status lp_lora_forward_eager(float *out, float *u, uint8_t *keep, const float *inp,
                                               const lp_lora_base *base, const float *A, const float *B, float s,
                                               float p, lp_rng *rng, int64_t N, int64_t C, int64_t OC, int64_t r);
LP_WARN_UNUSED lp_status lp_lora_backward_eager(float *dinp, float *dA, float *dB, const float *dout,
                                                const float *inp, const float *u, const uint8_t *keep,
                                                const lp_lora_base *base, const float *A, const float *B, float s,
                                                float p, int64_t N, int64_t C, int64_t OC, int64_t r);

/* ==== end of the quant section ======================================================== */

/* ---- machine peaks (for `loupe peak` and MFU) ------------------------------------------ */

typedef struct lp_peak_result {
    int threads;
    int vector_bits;        /* widest FMA the active ISA level uses: 512 (AVX-512), 256 (AVX2) or 32 */
    char isa[16];           /* the ISA level the kernels run at (lp_isa_name) */
    double fma_gflops;      /* f32 FMA peak at vector_bits, all threads */
    double fma_gflops_1t;   /* the same, one thread */
    double fma256_gflops;   /* f32 FMA peak with 256-bit vectors (AVX2 code, e.g. OpenBLAS Haswell) */
    double sgemm_gflops;    /* OpenBLAS sgemm at sgemm_n^3, all threads */
    int64_t sgemm_n;
    char blas_core[32];     /* OpenBLAS kernel set used for the sgemm */
    double triad_gbs;       /* STREAM triad a = b + s*c, GB/s (12 bytes per f32 element) */
    int64_t triad_bytes;    /* size of each of the three arrays */
} lp_peak_result;
/* Measures the figures with the current thread count; seconds bounds each probe (each is
 * a best of many short runs, so a busy machine reads low, never high).
 * Errors: LP_STATUS_NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_peak_measure(lp_peak_result *out, double seconds, int64_t sgemm_n);

/* The f32 FMA peak alone (GFLOP/s at the widest vector width, over the current thread
 * count), best of short runs within `seconds`. Allocates nothing, so a trainer can take
 * it for MFU without the sgemm and triad buffers showing up in its memory accounting. */
double lp_peak_fma_gflops(double seconds);

/* The CUDA device's ceilings (`loupe peak --device cuda`): cuBLASLt GEMMs at n x n x n on
 * uniform random data (bf16 inputs with f32 accumulation, TF32, f32), each the mean of reps
 * timed products (CUDA events) after two warm-ups, and a device-to-device copy. */
typedef struct lp_cuda_peak_result {
    char device[256];       /* the device's name */
    int cc_major, cc_minor; /* compute capability */
    int sm_count, sm_clock_mhz;
    double memory_gib;
    int driver_version, runtime_version;
    int64_t gemm_n;
    double bf16_tflops, tf32_tflops, f32_tflops;
    double copy_gbs;        /* bytes read + written per second, GB/s */
    int64_t copy_bytes;     /* bytes copied per run */
} lp_cuda_peak_result;
/* n in 256..16384, reps >= 1. Errors: LP_STATUS_UNSUPPORTED "this loupe was built without
 * CUDA" or "no CUDA GPU is present (...)"; LP_STATUS_NO_MEMORY; a CUDA error by its call. */
LP_WARN_UNUSED lp_status lp_cuda_peak_measure(lp_cuda_peak_result *out, int64_t n, int reps);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_KERNELS_H */
