/* loupe nn: transformer modules with an explicit forward and backward (no autograd), llm.c
 * style. A module is a small struct of raw pointers into its model's parameter and gradient
 * blocks (it owns nothing); its activations live in a struct of named pointers into the
 * model's activation block. Shapes are in comments beside each pointer: B batch, T sequence,
 * N = B*T rows, C hidden, H heads, D head size, I intermediate, L labels.
 *
 * Accumulation rule (the one rule for every _backward here, as in kernels.h): gradients of
 * PARAMETERS are accumulated (+=; zero them before a step), gradients of ACTIVATIONS and
 * inputs are overwritten (=).
 *
 * Every module's forward and backward is a profiler range whose name the model interns once
 * at load ("bert.layer.3.attention.forward", "bert.layer.3.attention.backward", ...).
 *
 *   lp_nn_ctx ctx = {.training = true, .exec = LP_EXEC_MODE_FUSED, .rng = &dropout_rng};
 *   lp_nn_linear_forward(&layer->attn.q, act->attn.q, x, N);        // (N,C) = (N,C) W^T + b
 *   ...
 *   lp_nn_linear_backward(&layer->attn.q, dx, dq, x, N);             // dx =, dW +=, db +=
 *
 * Most users want models.h (lp_model_load / lp_model_forward / lp_model_backward); this
 * header is for building families and for tests that check one module at a time.
 */
#ifndef LOUPE_NN_H
#define LOUPE_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "loupe/core.h"
#include "loupe/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How attention runs: EAGER composes it from ops (scores matmul, mask, softmax, dropout on
 * the probabilities, matmul with V; the (B,H,T,T) probabilities are kept for the backward),
 * FUSED calls the flash-style fused kernel (only a (B,H,T) log-sum-exp is kept; the
 * attention-probability dropout is not applied in FUSED mode). The seeds' eager-vs-compiled
 * axis (`--exec eager|fused`). */
typedef enum lp_exec_mode { LP_EXEC_MODE_EAGER = 0, LP_EXEC_MODE_FUSED } lp_exec_mode;
/* "eager" / "fused"; "?" for an unknown value. */
const char *lp_exec_mode_name(lp_exec_mode m);
/* Parses "eager" or "fused". LP_STATUS_INVALID_ARG otherwise (message names the value). */
LP_WARN_UNUSED lp_status lp_exec_mode_parse(const char *s, lp_exec_mode *out);

/* Per-call state shared by every module of one forward/backward. */
typedef struct lp_nn_ctx {
    bool training;     /* dropout on (with the probabilities the modules carry) */
    lp_exec_mode exec; /* attention implementation */
    lp_rng *rng;       /* dropout stream (LP_RNG_STREAM_DROPOUT); may be NULL when !training */
    lp_status *status; /* first error of the pass (quantized and LoRA kernels can run out of
                          memory inside void forwards); NULL: not recorded */
    bool segments;     /* the pass's mask holds sample ids (packing): attention stays inside
                          each sample (lp_attn_geom.segments) */
    /* Data-parallel slice: the pass's `rows` batch rows are rows [row0, row0 + rows) of a
     * global batch of global_rows (global_rows 0: the pass is its own batch). Every dropout
     * mask is then this slice of the mask one process draws over the global batch (each
     * tensor batch-major, its rows the same length on every rank), and the stream advances
     * past the global mask: ranks drop what a single process would. */
    int64_t rows, row0, global_rows;
    /* A gradient-checkpointing recompute: the layer need only produce what its backward reads
       (a pre-norm decoder layer skips its down projection, whose output only feeds the next
       layer's kept input). */
    bool recompute;
} lp_nn_ctx;

/* ---- Linear ---------------------------------------------------------------------------- */

/* LoRA adapter of one Linear (PEFT semantics): y = x W^T + b + scale * (drop(x) A^T) B^T with
 * A = lora_A (r,in), B = lora_B (out,r), scale = alpha/r (alpha/sqrt(r) under rsLoRA) and
 * drop = inverted dropout on the adapter's input only. Parameters are views into the
 * model's blocks; u and keep are bound by the model for each batch. */
typedef struct lp_nn_lora {
    int64_t r;
    float scale;     /* alpha/r or alpha/sqrt(r) */
    float dropout;   /* on the adapter input, training only */
    float *A, *B;    /* (r,in), (out,r) */
    float *dA, *dB;  /* same shapes, or NULL when frozen */
    float *u;        /* (N,r) drop(x) @ A^T, saved for the backward */
    uint8_t *keep;   /* (N,in) dropout mask (when dropout > 0) */
    bool dropped;    /* keep was drawn by the last forward */
} lp_nn_lora;

struct lp_qweight; /* kernels.h (quant section): a frozen NF4/int8 base weight */

/* out = inp @ w^T + b (PyTorch layout). Pointers are views into the model's blocks. */
typedef struct lp_nn_linear {
    int64_t in, out;
    float *w;   /* (out,in) */
    float *b;   /* (out) or NULL (no bias) */
    float *dw;  /* (out,in) or NULL: frozen weight */
    float *db;  /* (out) or NULL: frozen or no bias */
    lp_nn_lora *lora;                /* NULL: none; else w (or qbase) is the frozen base */
    const struct lp_qweight *qbase;  /* NULL: w is the f32 base; else w is NULL */
    bool qbase_bf16;                 /* QLoRA under --dtype bf16 (bitsandbytes' compute dtype):
                                        the NF4/int8 qbase is dequantized and rounded to bf16
                                        for each use and the bf16 GEMMs multiply that copy */
    const struct lp_qweight *bf16;   /* --dtype bf16 (full fine-tuning): w's bf16 copy in both
                                        orientations (lp_qweight_pack_bf16_train), kept current
                                        by the model, that the GEMMs read; w stays the f32 master
                                        weight dw belongs to. NULL: f32 GEMMs */
    const lp_nn_ctx *ctx;            /* the model's current pass (exec, training, dropout rng),
                                        read by adapters and quantized bases; NULL = eager eval */
    const char *fwd_name, *bwd_name; /* profiler range names (interned), or NULL for none */
} lp_nn_linear;

/* out (N,out) = inp (N,in) @ w^T + b (+ the adapter's term; qbase dequantized on the fly in
 * FUSED mode, whole in EAGER mode). */
void lp_nn_linear_forward(const lp_nn_linear *l, float *out, const float *inp, int64_t N);
/* dinp (N,in) = dout @ w (skipped when dinp is NULL); dw += dout^T @ inp; db += colsum(dout)
 * (each skipped when NULL). dout (N,out); inp (N,in) the forward's input. */
void lp_nn_linear_backward(const lp_nn_linear *l, float *dinp, const float *dout, const float *inp,
                           int64_t N);

/* ---- LayerNorm ------------------------------------------------------------------------- */

typedef struct lp_nn_layernorm {
    int64_t C;
    float eps;
    float *w, *b;   /* (C), (C) */
    float *dw, *db; /* (C), (C) or NULL when frozen */
    const char *fwd_name, *bwd_name;
} lp_nn_layernorm;

/* out (N,C) = LN(inp (N,C)); mean (N), rstd (N) saved for the backward. */
void lp_nn_layernorm_forward(const lp_nn_layernorm *ln, float *out, float *mean, float *rstd,
                             const float *inp, int64_t N);
/* dinp (N,C) =; dw, db +=. inp, mean, rstd from the forward. */
void lp_nn_layernorm_backward(const lp_nn_layernorm *ln, float *dinp, const float *dout, const float *inp,
                              const float *mean, const float *rstd, int64_t N);

/* ---- Dropout --------------------------------------------------------------------------- */

/* Inverted dropout of n values with probability p when ctx->training and p > 0: out =,
 * keep (n) = mask. Otherwise out is a copy of inp (out == inp allowed: then nothing is done)
 * and keep is untouched. Returns true when a mask was drawn (the backward needs it). */
bool lp_nn_dropout_forward(const lp_nn_ctx *ctx, float *out, uint8_t *keep, const float *inp, int64_t n,
                           float p);
/* dinp (n) = dout * keep / (1-p) when the forward drew a mask (applied), else a copy. */
void lp_nn_dropout_backward(float *dinp, const float *dout, const uint8_t *keep, int64_t n, float p,
                            bool applied);

/* ---- Embeddings (word + position + token type, then LayerNorm and dropout) ----------- */

typedef struct lp_nn_embedding {
    int64_t V, P, TT, C;       /* vocabulary, positions, token types (0: none, DistilBERT) */
    int32_t pad_id;            /* row whose gradient stays zero (nn.Embedding padding_idx); -1: none */
    float *wte, *wpe, *wtt;    /* (V,C), (P,C), (TT,C) or NULL */
    float *dwte, *dwpe, *dwtt; /* same shapes, each NULL when frozen */
    lp_nn_layernorm ln;
    float dropout;
    const char *fwd_name, *bwd_name;
} lp_nn_embedding;

typedef struct lp_nn_embedding_act {
    float *sum;               /* (N,C) word + position + type */
    float *ln;                /* (N,C) after LayerNorm (and dropout, in place) */
    float *ln_mean, *ln_rstd; /* (N) */
    uint8_t *keep;            /* (N,C) dropout mask */
    bool dropped;             /* keep was drawn */
    float *out;               /* (N,C) the module output (= ln) */
} lp_nn_embedding_act;

/* act->out (B,T,C) from ids, type_ids (B,T) (type_ids NULL = all 0). Errors: LP_STATUS_RANGE
 * for an id, position or type outside its table (from lp_embedding_forward). */
LP_WARN_UNUSED lp_status lp_nn_embedding_forward(const lp_nn_embedding *e, const lp_nn_ctx *ctx,
                                                 lp_nn_embedding_act *act, const int32_t *ids,
                                                 const int32_t *type_ids, int64_t B, int64_t T);
/* dwte, dwpe, dwtt, LayerNorm grads += from dout (B,T,C) (the embedding output's gradient).
 * scratch (2*N*C floats) is overwritten. The padding row's gradient stays 0. */
void lp_nn_embedding_backward(const lp_nn_embedding *e, const lp_nn_embedding_act *act, const float *dout,
                              float *scratch, const int32_t *ids, const int32_t *type_ids, int64_t B,
                              int64_t T);

/* ---- Self-attention (q, k, v projections, attention, output projection) -------------- */

typedef struct lp_nn_attention {
    int64_t C, H, D;    /* hidden size, query heads, head size (H*D may differ from C) */
    int64_t Hkv;        /* key/value heads (H for multi-head attention; fewer: GQA/MQA) */
    bool causal;        /* decoders: query i sees keys j <= i */
    int64_t window;     /* > 0: and only keys i - j < window (Mistral's sliding window) */
    bool rope;          /* rotary embeddings on q and k (cos/sin from the act) */
    lp_nn_linear q, k, v, o;
    float attn_dropout; /* on the probabilities */
    const char *fwd_name, *bwd_name;
} lp_nn_attention;

typedef struct lp_nn_attention_act {
    float *q, *k, *v;  /* (N,H*D), (N,Hkv*D), (N,Hkv*D) token-major; q and k rotated when rope */
    const float *rope_cos, *rope_sin; /* (N, D/2) for rope, set by the model once per forward */
    float *att;        /* (B,H,T,T) softmax probabilities (EAGER), else unused */
    float *att_drop;   /* (B,H,T,T) after dropout (EAGER, training, p > 0) */
    uint8_t *att_keep; /* (B,H,T,T) dropout mask (EAGER) */
    bool att_dropped;  /* dropout was applied to the probabilities (either mode) */
    lp_attn_dropout drop; /* FUSED: the mask's Philox counters, for the backward */
    float *lse; /* (B,H,T) log-sum-exp (FUSED) */
    float *ctx; /* (N,H*D) attention output before the output projection */
    float *out; /* (N,C) after the output projection */
} lp_nn_attention_act;

/* act->out (B,T,C) = self-attention of x (B,T,C) with mask (B,T) (1 real, 0 padding; NULL
 * none). Uses act->att/att_drop/att_keep in EAGER mode and act->lse in FUSED mode. */
void lp_nn_attention_forward(const lp_nn_attention *a, const lp_nn_ctx *ctx, lp_nn_attention_act *act,
                             const float *x, const int32_t *mask, int64_t B, int64_t T);
/* dx (N,C) = gradient w.r.t. x (NULL: not wanted, skipped); parameter grads +=. dout (N,C). scratch needs 4*N*C floats
 * plus 2*B*H*T*T (EAGER): lp_nn_attention_scratch_floats. The exec mode must be the forward's. */
void lp_nn_attention_backward(const lp_nn_attention *a, const lp_nn_ctx *ctx, const lp_nn_attention_act *act,
                              float *dx, const float *dout, const float *x, const int32_t *mask,
                              float *scratch, int64_t B, int64_t T);
/* Floats of scratch lp_nn_attention_backward needs. */
int64_t lp_nn_attention_scratch_floats(const lp_nn_attention *a, lp_exec_mode exec, int64_t B, int64_t T);

/* ---- MLP (in -> GELU -> out) ------------------------------------------------------------ */

typedef struct lp_nn_mlp {
    lp_nn_linear in, out; /* (I,C) and (C,I) */
    lp_gelu_kind gelu;
    const char *fwd_name, *bwd_name;
} lp_nn_mlp;

typedef struct lp_nn_mlp_act {
    float *h;   /* (N,I) before GELU */
    float *g;   /* (N,I) after GELU */
    float *out; /* (N,C) */
} lp_nn_mlp_act;

void lp_nn_mlp_forward(const lp_nn_mlp *m, lp_nn_mlp_act *act, const float *x, int64_t N);
/* dx (N,C) =; scratch (N,I) overwritten. */
void lp_nn_mlp_backward(const lp_nn_mlp *m, const lp_nn_mlp_act *act, float *dx, const float *dout,
                        const float *x, float *scratch, int64_t N);

/* ---- Encoder layer (post-LN, BERT and DistilBERT) ----------------------------------------
 *   a = LN1(x + dropout(attention(x)));  out = LN2(a + dropout(mlp(a)))                     */

typedef struct lp_nn_encoder_layer {
    int32_t index;
    lp_nn_attention attn;
    lp_nn_layernorm ln1; /* attention.output.LayerNorm / sa_layer_norm */
    lp_nn_mlp mlp;
    lp_nn_layernorm ln2; /* output.LayerNorm / output_layer_norm */
    float hidden_dropout;
    const char *fwd_name, *bwd_name;
} lp_nn_encoder_layer;

typedef struct lp_nn_layer_act {
    lp_nn_attention_act attn;
    uint8_t *keep1; /* (N,C) */
    bool dropped1;
    float *res1;                      /* (N,C) x + dropout(attn.out); attn.out points here */
    float *ln1, *ln1_mean, *ln1_rstd; /* (N,C), (N), (N) */
    lp_nn_mlp_act mlp;
    uint8_t *keep2; /* (N,C) */
    bool dropped2;
    float *res2;                      /* (N,C) ln1 + dropout(mlp.out); mlp.out points here */
    float *out, *ln2_mean, *ln2_rstd; /* (N,C) layer output, (N), (N) */
} lp_nn_layer_act;

/* Floats (and mask bytes) one layer's activations take for a (B,T) batch in a mode. */
int64_t lp_nn_layer_act_floats(const lp_nn_encoder_layer *l, lp_exec_mode exec, bool training, int64_t B,
                               int64_t T);
int64_t lp_nn_layer_act_bytes_u8(const lp_nn_encoder_layer *l, lp_exec_mode exec, bool training, int64_t B,
                                 int64_t T);
/* Points act's members into f (lp_nn_layer_act_floats floats) and u8 (mask bytes). */
void lp_nn_layer_act_bind(const lp_nn_encoder_layer *l, lp_exec_mode exec, bool training,
                          lp_nn_layer_act *act, float *f, uint8_t *u8, int64_t B, int64_t T);

void lp_nn_encoder_layer_forward(const lp_nn_encoder_layer *l, const lp_nn_ctx *ctx, lp_nn_layer_act *act,
                                 const float *x, const int32_t *mask, int64_t B, int64_t T);
/* dx (N,C) = (NULL: not wanted, skipped); parameter grads +=. dout (N,C) is the layer output's gradient. scratch holds
 * lp_nn_encoder_layer_scratch_floats floats. dx may not alias dout. */
void lp_nn_encoder_layer_backward(const lp_nn_encoder_layer *l, const lp_nn_ctx *ctx,
                                  const lp_nn_layer_act *act, float *dx, const float *dout, const float *x,
                                  const int32_t *mask, float *scratch, int64_t B, int64_t T);
int64_t lp_nn_encoder_layer_scratch_floats(const lp_nn_encoder_layer *l, lp_exec_mode exec, int64_t B,
                                           int64_t T);

/* ---- Decoder modules (Llama, Mistral, Qwen2, SmolLM) -----------------------------------
 * A pre-norm decoder layer:
 *   r = x + attention(RMSNorm1(x));  out = r + down(silu(gate(RMSNorm2(r))) * up(RMSNorm2(r)))
 * with rotary embeddings on q and k, causal (and sliding-window) attention over Hkv key/value
 * heads. */

typedef struct lp_nn_rmsnorm {
    int64_t C;
    float eps;
    float *w;  /* (C) */
    float *dw; /* (C) or NULL when frozen */
    const char *fwd_name, *bwd_name;
} lp_nn_rmsnorm;

/* out (N,C) = RMSNorm(inp); rstd (N) saved for the backward. */
void lp_nn_rmsnorm_forward(const lp_nn_rmsnorm *n, float *out, float *rstd, const float *inp, int64_t N);
/* dinp (N,C) =; dw +=. inp and rstd from the forward. */
void lp_nn_rmsnorm_backward(const lp_nn_rmsnorm *n, float *dinp, const float *dout, const float *inp,
                            const float *rstd, int64_t N);

/* SiLU-gated MLP: down(silu(gate(x)) * up(x)). */
typedef struct lp_nn_gated_mlp {
    lp_nn_linear gate, up, down; /* (F,C), (F,C), (C,F) */
    const char *fwd_name, *bwd_name;
} lp_nn_gated_mlp;

typedef struct lp_nn_gated_mlp_act {
    float *gate, *up; /* (N,F) projections */
    float *a;         /* (N,F) silu(gate) * up */
    float *out;       /* (N,C) */
} lp_nn_gated_mlp_act;

void lp_nn_gated_mlp_forward(const lp_nn_gated_mlp *m, lp_nn_gated_mlp_act *act, const float *x, int64_t N);
/* dx (N,C) = (NULL: skipped); parameter grads +=. scratch: lp_nn_gated_mlp_scratch_floats. */
void lp_nn_gated_mlp_backward(const lp_nn_gated_mlp *m, const lp_nn_gated_mlp_act *act, float *dx,
                              const float *dout, const float *x, float *scratch, int64_t N);
int64_t lp_nn_gated_mlp_scratch_floats(const lp_nn_gated_mlp *m, int64_t N);

typedef struct lp_nn_decoder_layer {
    int32_t index;
    lp_nn_rmsnorm ln1; /* input_layernorm */
    lp_nn_attention attn;
    lp_nn_rmsnorm ln2; /* post_attention_layernorm */
    lp_nn_gated_mlp mlp;
    const char *fwd_name, *bwd_name;
} lp_nn_decoder_layer;

typedef struct lp_nn_decoder_layer_act {
    float *h1, *rstd1; /* (N,C) RMSNorm1(x), (N) */
    lp_nn_attention_act attn;
    float *res1;       /* (N,C) x + attention; attn.out points here */
    float *h2, *rstd2; /* (N,C), (N) */
    lp_nn_gated_mlp_act mlp;
    float *out;        /* (N,C) res1 + mlp; mlp.out points here */
} lp_nn_decoder_layer_act;

/* Floats one decoder layer's activations take for a (B,T) batch in a mode; and their binding
 * (rope_cos/rope_sin (N, D/2), computed once per forward, are pointed at by the caller). */
int64_t lp_nn_decoder_layer_act_floats(const lp_nn_decoder_layer *l, lp_exec_mode exec, int64_t B, int64_t T);
void lp_nn_decoder_layer_act_bind(const lp_nn_decoder_layer *l, lp_exec_mode exec, lp_nn_decoder_layer_act *act,
                                  float *f, int64_t B, int64_t T);
void lp_nn_decoder_layer_forward(const lp_nn_decoder_layer *l, const lp_nn_ctx *ctx, lp_nn_decoder_layer_act *act,
                                 const float *x, const int32_t *mask, int64_t B, int64_t T);
/* dx (N,C) = (NULL: skipped; may not alias dout); parameter grads +=. scratch:
 * lp_nn_decoder_layer_scratch_floats. */
void lp_nn_decoder_layer_backward(const lp_nn_decoder_layer *l, const lp_nn_ctx *ctx,
                                  const lp_nn_decoder_layer_act *act, float *dx, const float *dout, const float *x,
                                  const int32_t *mask, float *scratch, int64_t B, int64_t T);
int64_t lp_nn_decoder_layer_scratch_floats(const lp_nn_decoder_layer *l, lp_exec_mode exec, int64_t B, int64_t T);

/* One decoding step (inference only): x (B,C) holds the newest token of each sequence; its
 * rotated key and value are appended to the layer's cache kc, vc at column g->T - 1 (g->T
 * counts that column), then its query attends over the cache (lp_attention_decode, kv_mask
 * (B, g->cap)). act is bound for (B,1) with rope_cos/rope_sin (B, D/2) at each token's
 * position; act->out (B,C) =. The attention alone: lp_nn_attention_decode, act->out =. */
void lp_nn_attention_decode(const lp_nn_attention *a, lp_nn_attention_act *act, const float *x, void *kc, void *vc,
                            const int32_t *kv_mask, const lp_kv_geom *g);
void lp_nn_decoder_layer_decode(const lp_nn_decoder_layer *l, lp_nn_decoder_layer_act *act, const float *x, void *kc,
                                void *vc, const int32_t *kv_mask, const lp_kv_geom *g);

/* ---- Pooling and classification heads ------------------------------------------------- */

typedef enum lp_nn_head_kind {
    LP_NN_HEAD_KIND_BERT =
        0, /* tanh(pooler(h[:,0])) -> dropout -> classifier (BertForSequenceClassification) */
    LP_NN_HEAD_KIND_DISTILBERT, /* relu(pre_classifier(h[:,0])) -> dropout -> classifier */
    LP_NN_HEAD_KIND_CLS,        /* h[:,0] -> dropout -> classifier (bare encoder, CLS pooling) */
    LP_NN_HEAD_KIND_MEAN        /* masked mean of h -> dropout -> classifier (bare encoder) */
} lp_nn_head_kind;

typedef struct lp_nn_cls_head {
    lp_nn_head_kind kind;
    int64_t C, L;
    lp_nn_linear pre;        /* pooler.dense / pre_classifier (BERT, DISTILBERT kinds) */
    lp_nn_linear classifier; /* (L,C) */
    float dropout;
    const char *fwd_name, *bwd_name;
} lp_nn_cls_head;

typedef struct lp_nn_head_act {
    float *pooled; /* (B,C) first token or masked mean */
    float *pre;    /* (B,C) pre-linear output (before tanh/relu) */
    float *act;    /* (B,C) after tanh/relu (or = pooled) */
    uint8_t *keep; /* (B,C) */
    bool dropped;
    float *drop; /* (B,C) classifier input */
} lp_nn_head_act;

/* logits (B,L) from hidden (B,T,C) (and mask (B,T) for MEAN; NULL = all real). */
void lp_nn_cls_head_forward(const lp_nn_cls_head *h, const lp_nn_ctx *ctx, lp_nn_head_act *act, float *logits,
                            const float *hidden, const int32_t *mask, int64_t B, int64_t T);
/* dhidden (B,T,C) = (rows other than the pooled ones get 0); parameter grads +=.
 * dlogits (B,L); scratch 2*B*C floats. */
void lp_nn_cls_head_backward(const lp_nn_cls_head *h, const lp_nn_head_act *act, float *dhidden,
                             const float *dlogits, const int32_t *mask, float *scratch, int64_t B, int64_t T);

/* Pooling and row normalization are kernels: lp_mean_pool_forward/backward, lp_l2_normalize. */

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_NN_H */
