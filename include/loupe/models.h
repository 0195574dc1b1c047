/* loupe models: model families built from nn modules, loaded from a Hugging Face model
 * directory (config.json + safetensors) and saved back so transformers loads the result.
 * Family `bert`: BertForSequenceClassification, DistilBertForSequenceClassification, and bare
 * encoders (BertModel such as all-MiniLM-L6-v2, DistilBertModel, *ForMaskedLM base
 * checkpoints) with a classification head initialized as transformers would.
 *
 *   lp_model_options o;
 *   lp_model_options_init(&o);
 *   o.task = LP_MODEL_TASK_SEQ_CLS; o.num_labels = 2; o.exec = LP_EXEC_MODE_FUSED;
 *   o.training = true; o.seed = 42;
 *   lp_model *m;
 *   if (lp_model_load("models/minilm", &o, &m) != LP_OK) { fprintf(stderr, "%s\n", lp_err_msg()); ... }
 *   size_t np; const lp_model_param *p = lp_model_params(m, &np);
 *   for (each step) {
 *       lp_model_zero_grad(m);
 *       float loss;
 *       if (lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, logits, &loss) != LP_OK) ...;
 *       if (lp_model_backward(m) != LP_OK) ...;                  // p[i].grad += dloss/dp
 *       for (size_t i = 0; i < np; i++)
 *           if (p[i].trainable) lp_adamw_step(p[i].data, p[i].grad, m_i, v_i, p[i].numel, ...);
 *   }
 *   lp_model_save_hf(m, "reports/run1/model");              // safetensors + config + tokenizer
 *   lp_model_free(m);
 *
 * Memory: parameters (PARAMETER), gradients (GRADIENT), activations (ACTIVATION), backward
 * scratch (TEMPORARY) and copies of the batch (INPUT) all come from lp_alloc. Activations are
 * sized for max_batch x max_seq at load when given, and grow on demand otherwise.
 *
 * Threads: a model is used by one thread at a time (its kernels use the OpenMP pool).
 */
#ifndef LOUPE_MODELS_H
#define LOUPE_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loupe/base.h"
#include "loupe/core.h"
#include "loupe/io.h"
#include "loupe/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a bare encoder (BertModel, DistilBertModel) pools for its classification head. CLS
 * on a BERT checkpoint is exactly BertForSequenceClassification (tanh pooler on the first
 * token, pooler weights from the checkpoint when present); on DistilBERT it is
 * DistilBertForSequenceClassification (pre_classifier + ReLU). MEAN averages the real tokens
 * (the sentence-transformers rule) and feeds the classifier directly; such a model is saved
 * with "loupe_pooling": "mean" in its config.json (transformers' own class would use the
 * pooler instead). Checkpoints that already have a head ignore this. */
typedef enum lp_pooling { LP_POOLING_CLS = 0, LP_POOLING_MEAN } lp_pooling;
const char *lp_pooling_name(lp_pooling p);
LP_WARN_UNUSED lp_status lp_pooling_parse(const char *s, lp_pooling *out);

/* LoRA / QLoRA (PEFT semantics), applied while the model loads. Target modules get an
 * adapter y = x W^T + b + scale * (dropout(x) A^T) B^T, A (r,in) Kaiming-uniform (PEFT's
 * kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in))), B (out,r) zero; every base
 * parameter is frozen (no gradient buffer); the classification head is trained in full
 * (PEFT's modules_to_save: "classifier", which also matches DistilBERT's pre_classifier).
 * With base_dtype NF4 (QLoRA: blocksize 64, double quantization, bit-exact with
 * bitsandbytes) or INT8, the encoder's Linear weights are stored quantized (memory category
 * QUANTIZED_WEIGHT) and leave lp_model_params; embeddings, LayerNorms, biases, BERT's
 * pooler and the head stay f32. With base_dtype F32, a training load with the fused kernels
 * packs those weights for the f32 GEMM instead (the same values, also QUANTIZED_WEIGHT) at
 * the ISA levels where that measured faster (avx2); LP_F32_PACK=1 / 0 in the environment
 * forces it on / off. */
typedef struct lp_lora_options {
    bool enabled;
    int32_t rank;            /* r (> 0; 0 = 8) */
    double alpha;            /* lora_alpha (0 = 16) */
    float dropout;           /* lora_dropout on the adapter input, in [0, 1) */
    bool rslora;             /* scale = alpha/sqrt(r) instead of alpha/r */
    /* comma-separated: loupe roles q,k,v,o,ffn_in,ffn_out (or "all"), or module names matched
     * as PEFT does (the full module name equals the entry or ends with "."+entry: q_lin,
     * v_lin / query, value / ...). NULL or "": PEFT's default (bert: query,value; distilbert,
     * which PEFT has no default for: q_lin,v_lin). */
    const char *targets;
    lp_dtype base_dtype;     /* LP_DTYPE_F32 (default), LP_DTYPE_INT8 or LP_DTYPE_NF4 */
    /* A PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to start
     * from: its r, lora_alpha, lora_dropout, use_rslora, target_modules and modules_to_save
     * replace the fields above, its tensors replace A, B and the head. NULL: fresh adapter. */
    const char *adapter_dir;
    /* NF4 only: dequantize as bitsandbytes 0.50's native CPU kernel does (its per-row scale
     * lookup, which differs from the format when in_features % 64 != 0), to reproduce results
     * bitsandbytes computed on a CPU (tests/golden/qlora_*; see lp_qweight.bnb_cpu_rows).
     * Off: the format's own (flat) block layout, as its CUDA and PyTorch kernels read it. */
    bool bnb_cpu_dequant;
} lp_lora_options;

/* How the layers' Linear weights are kept (lp_model_options.weights). Quantized weights
 * leave the f32 parameter table (memory category QUANTIZED_WEIGHT, frozen: no gradient);
 * embeddings, norms, biases and the head stay f32. */
typedef enum lp_weight_format {
    LP_WEIGHT_FORMAT_F32 = 0, /* f32, a GGUF dequantized at load (`--dequantize`; the default) */
    LP_WEIGHT_FORMAT_STORED,  /* a GGUF's tensors in their own format (Q8_0, Q4_0, Q4_1, Q4_K,
                                 Q6_K, F16, BF16; F32 tensors and other sources stay f32) */
    LP_WEIGHT_FORMAT_Q8_0,    /* converted at load (`--quantize q8_0`); a Linear whose input */
    LP_WEIGHT_FORMAT_Q4_0,    /* size is not a multiple of 32 (NF4: 64) stays f32 */
    LP_WEIGHT_FORMAT_NF4,
    LP_WEIGHT_FORMAT_BF16,    /* rounded to bf16 at load and packed for the bf16 GEMM (every
                                 Linear; f32 accumulation, vdpbf16ps where the CPU has it) */
    LP_WEIGHT_FORMAT_F32_PACKED, /* f32, packed at load into the f32 GEMM's panels (every Linear;
                                    the same values, no per-call repacking); the head stays f32 */
    LP_WEIGHT_FORMAT_INT8,       /* `--quantize int8` / `--dtype int8`: int8 with one scale per
                                    output row, packed at load for the integer GEMM (activations
                                    quantized per row per call; lp_qweight_quantize_int8_tiles); a
                                    Linear whose input size is not a multiple of 32 stays f32 */
} lp_weight_format;
/* With no_grad (inference), a causal LM's head also gets a quantized copy (the format's,
 * or a GGUF's own output / token_embd blocks) that its forward reads; the f32 head stays,
 * being the embedding table when tied. */
/* Parses "f32" (also "dequantize"), "stored", "q8_0", "q4_0", "nf4", "bf16", "f32_packed",
 * "int8". */
LP_WARN_UNUSED lp_status lp_weight_format_parse(const char *s, lp_weight_format *out);
const char *lp_weight_format_name(lp_weight_format f);

typedef struct lp_model_options {
    lp_model_task task;         /* AUTO (the config's architecture), BASE (no head) or SEQ_CLS */
    int32_t num_labels;         /* > 0 overrides the config (the head is then re-initialized when
                                   the checkpoint's classifier has another size); 0 = config's */
    lp_pooling pooling;         /* bare encoders only, see lp_pooling */
    lp_exec_mode exec;          /* attention implementation (lp_model_set_exec changes it) */
    bool grad_checkpointing;    /* keep each layer's input only; recompute the layer in backward */
    bool training;              /* dropout on (lp_model_set_training changes it) */
    uint64_t seed;              /* initialization of missing weights, and the dropout stream */
    int32_t max_batch, max_seq; /* preallocate activations for this size (0: grow on demand) */
    bool quiet;                 /* no notices on stderr (newly initialized head, ...) */
    lp_lora_options lora;       /* LoRA / QLoRA; lora.enabled false = plain model */
    bool no_grad;               /* inference only: no gradient block (every grad NULL; backward
                                   returns INVALID_ARG) */
    lp_weight_format weights;   /* the Linear weights' format (not with lora.enabled, which has
                                   its own base_dtype) */
    lp_dtype compute;           /* the layer Linears' GEMMs: LP_DTYPE_F32 (default) or
                                   LP_DTYPE_BF16 (autocast: bf16 operands, f32 accumulation and
                                   outputs; f32 master weights, gradients and optimizer state; a
                                   bf16 copy of each trained weight, repacked after
                                   lp_model_weights_changed; with LoRA set lora.base_dtype bf16) */
    bool lazy_embedding;        /* with no_grad, for a run that only does forward passes and
                                   generation: a decoder's token embedding table, when nothing
                                   but the lookup reads it (no tied LM head), is read from the
                                   safetensors file a row at a time as tokens first appear, so
                                   memory holds the rows seen, not the table (Qwen2.5-0.5B:
                                   545 MB of f32). Its parameter's rows not yet seen read 0:
                                   not for a model that is saved or whose parameters are read.
                                   The load still checks every row is finite. */
    int32_t lm_head_chunk;      /* a causal LM's loss: rows of logits computed at a time (the
                                   whole (B*T, vocab) logits are never held); 0 = the default:
                                   at least 512 rows (fewer re-reads of the head's weight), more
                                   while a chunk stays under 96 MB, in even chunks */
} lp_model_options;

/* Defaults: AUTO task, config's labels, CLS pooling, EAGER, no checkpointing, eval mode,
 * seed 42, grow on demand, notices on. */
void lp_model_options_init(lp_model_options *o);

typedef struct lp_model lp_model;

/* Loads dir/config.json and the weights (model.safetensors or a sharded index) and builds
 * the model. Every float weight dtype is converted to f32 (f16, bf16, f64). Head parameters
 * the checkpoint lacks are initialized as transformers does (Linear weights ~ normal(0,
 * initializer_range), zero biases) and a notice naming them is printed (unless quiet). A
 * directory with config.json and no weights is initialized entirely from opt->seed
 * (deterministic): Linear/embedding weights normal(0, initializer_range), padding row zero,
 * LayerNorm ones/zeros, zero biases. opt may be NULL (defaults).
 * Errors: the config's and io's (IO, FORMAT, UNSUPPORTED, NOT_FOUND naming the file and
 * tensor), UNSUPPORTED for the llama family (not built yet), NO_MEMORY.
 * On success *out is owned by the caller (lp_model_free). */
LP_WARN_UNUSED lp_status lp_model_load(const char *dir, const lp_model_options *opt, lp_model **out);
void lp_model_free(lp_model *m);
/* A model loaded while lp_kernels_device() is a GPU lives there (the BERT/DistilBERT family,
 * f32, fused attention, f32 or f32-LoRA weights; anything else is refused at load naming the
 * option): parameters uploaded once, gradients, activations and the batch in device blocks,
 * logits and the loss downloaded. lp_model_on_device says so. lp_model_host_params(m, true)
 * downloads the parameters and points the parameter table and modules at the host copy
 * (for saving or checkpointing); false points them back at the device. No-ops on the CPU. */
bool lp_model_on_device(const lp_model *m);
LP_WARN_UNUSED lp_status lp_model_host_params(lp_model *m, bool host);

/* Dropout on/off (train/eval). */
void lp_model_set_training(lp_model *m, bool training);
/* Switches the attention implementation for the next forward. */
void lp_model_set_exec(lp_model *m, lp_exec_mode exec);
/* Tells the model its f32 weights were written (an optimizer step, a resume): with
 * compute bf16 the next pass rounds them into the bf16 copies again. Free otherwise. */
void lp_model_weights_changed(lp_model *m);
/* LP_DTYPE_BF16 when the layer Linears compute in bf16 (options.compute), else LP_DTYPE_F32. */
lp_dtype lp_model_compute_dtype(const lp_model *m);
/* Turns gradient checkpointing on/off for the next forward (activations are re-laid out). */
void lp_model_set_grad_checkpointing(lp_model *m, bool on);

/* Forward pass. ids, mask (B,T) (mask 1 = real token, 0 = padding; NULL = all real; every
 * row needs a real token; a causal LM also takes sample ids 1, 2, ... for packed rows, each
 * sample one run in increasing order: attention stays inside each sample, positions restart
 * at 0 with each, and no token predicts the next sample's first), type_ids (B,T) or NULL
 * (all 0). logits (B,L) =, may be NULL.
 * Inference: no backward can follow, so the layers share one activation block (memory of
 * one layer plus each layer's (B,T,C) output). Errors: INVALID_ARG (B or T < 1, T beyond the
 * position table, a model without a head), RANGE (an id outside the vocabulary), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_model_forward(lp_model *m, const int32_t *ids, const int32_t *mask,
                                          const int32_t *type_ids, int32_t B, int32_t T, float *logits);
/* Forward plus mean cross-entropy over the B rows against labels (B) in [0, L) (-100 =
 * ignored, as in transformers), keeping every activation lp_model_backward needs. loss (1) =;
 * logits (B,L) = (may be NULL). Errors: as lp_model_forward, RANGE for a bad label, NUMERIC
 * for non-finite logits. */
LP_WARN_UNUSED lp_status lp_model_loss_forward(lp_model *m, const int32_t *ids, const int32_t *mask,
                                               const int32_t *type_ids, const int32_t *labels, int32_t B,
                                               int32_t T, float *logits, float *loss);
/* A causal LM's per-token losses, its (B*T, V) logits never held: an inference forward, the
 * labels (B,T) shifted as lp_model_loss_forward shifts them (-100 ignored), then the head and
 * the loss a chunk of rows at a time (lm_head_chunk). token_loss (B,T) = position t's loss
 * predicting its next token, 0 where it predicts nothing. Errors: as lp_model_forward;
 * INVALID_ARG for a model that is not a causal LM; RANGE for a bad label. */
LP_WARN_UNUSED lp_status lp_model_token_losses(lp_model *m, const int32_t *ids, const int32_t *mask,
                                               const int32_t *labels, int32_t B, int32_t T, float *token_loss);
/* Back-propagates the last lp_model_loss_forward's loss: every trainable parameter's grad
 * += dloss/dparam (so micro-batches accumulate; divide the loss yourself if you want a mean
 * over micro-batches: see dloss_scale). Errors: INVALID_ARG when no loss forward preceded. */
LP_WARN_UNUSED lp_status lp_model_backward(lp_model *m);
/* Multiplies the loss gradient lp_model_backward starts from (default 1; 1/accum for
 * gradient accumulation). */
void lp_model_set_dloss_scale(lp_model *m, float scale);
/* Sets every gradient to zero. After a loss forward that took the head's gradient early
 * (lp_model_set_head_grad_in_loss) it also drops that forward: a backward then refuses. */
void lp_model_zero_grad(lp_model *m);
/* A promise for a causal LM whose head trains (full fine-tuning, or a tied embedding that
 * trains): every lp_model_loss_forward in training is followed by lp_model_backward, at the
 * same dloss_scale, with no lp_model_zero_grad in between. The loss forward then takes the
 * head's weight gradient with its input gradient, while each chunk's logits are at hand,
 * instead of the backward recomputing them: one (B*T) x V x C GEMM fewer a step (about 6 %
 * of a SmolLM2-135M full step, 9 % of Qwen2.5-0.5B's), the same gradients bit for bit. A
 * backward whose dloss_scale differs from the forward's refuses (INVALID_ARG). Off by
 * default; the trainer turns it on when it sets the scale before the forward (one rank). */
void lp_model_set_head_grad_in_loss(lp_model *m, bool on);
/* Called by lp_model_backward as parameter gradients become final, so that a data-parallel
 * trainer can start reducing them while backward goes on: stage num_layers after the head,
 * then l after layer l (L-1 down to 0); the embeddings' are final when backward returns.
 * fn NULL: no calls. user is borrowed. */
typedef void (*lp_model_grad_ready_fn)(void *user, int32_t stage);
void lp_model_set_grad_ready(lp_model *m, lp_model_grad_ready_fn fn, void *user);
/* The gradient block: every trainable parameter's grad points into it, 64-byte aligned, the
 * floats between tensors kept zero. n_floats gets its length (0 and NULL: no gradients).
 * Owned by the model; valid until lp_model_set_trainable or lp_model_free. */
float *lp_model_grad_block(lp_model *m, int64_t *n_floats);
/* The global L2 norm over every gradient (torch.nn.utils.clip_grad_norm_), and with
 * max_norm > 0 all gradients scaled by max_norm / norm when the norm exceeds it (<= 0:
 * measured only). Returns the norm before clipping, which may be inf or NaN. */
double lp_model_grad_clip(lp_model *m, double max_norm);
/* The dropout stream's state (what a checkpoint saves so a resumed run draws the same masks)
 * and its restore. */
void lp_model_rng_get(const lp_model *m, lp_rng *out);
void lp_model_rng_set(lp_model *m, const lp_rng *r);
/* Data-parallel training: the training batches passed from now on are rows [row0, row0 + B)
 * of a global batch of global_rows rows padded to the same length, so that dropout draws this
 * slice of the masks one process draws over the global batch (lp_nn_ctx.row0). global_rows 0
 * (the default): each batch is its own. */
void lp_model_set_batch_slice(lp_model *m, int64_t row0, int64_t global_rows);

/* Sentence embeddings of a bare or headed encoder: the masked mean of the last hidden state
 * (B,T,C) -> out (B,C), L2-normalized when normalize (sentence-transformers' Pooling(mean) +
 * Normalize). Eval mode regardless of the training flag. Errors as lp_model_forward. */
LP_WARN_UNUSED lp_status lp_model_embed(lp_model *m, const int32_t *ids, const int32_t *mask,
                                        const int32_t *type_ids, int32_t B, int32_t T, bool normalize,
                                        float *out);
/* The hidden states of the last forward: i = 0 the embedding output, i = l the output of
 * layer l-1 (B,T,C) of that forward's B,T. Owned by the model, valid until the next forward;
 * NULL for i outside [0, num_layers]. */
const float *lp_model_hidden(const lp_model *m, int32_t i);

/* One parameter tensor, as the optimizer and checkpoints see it. */
typedef struct lp_model_param {
    const char *name; /* Hugging Face name the model saves it under */
    float *data;      /* (numel) f32, owned by the model */
    float *grad;      /* (numel), or NULL when not trainable */
    int64_t numel;
    int32_t ndim; /* 1 or 2 */
    int64_t shape[2];
    bool trainable;
    bool no_decay; /* a bias or LayerNorm parameter (HF Trainer excludes these from weight decay) */
    lp_mem_category category; /* LP_MEM_CATEGORY_PARAMETER */
    bool from_checkpoint;     /* false: initialized at load */
} lp_model_param;

/* All parameters in a fixed order (embeddings, layers, head). n_out gets the count. The
 * array is owned by the model and stays valid until lp_model_free. */
const lp_model_param *lp_model_params(const lp_model *m, size_t *n_out);
/* By HF name; NULL if absent. */
const lp_model_param *lp_model_param_find(const lp_model *m, const char *name);
/* Marks a parameter trainable or frozen (a frozen one has grad NULL and gets no gradient).
 * INVALID_ARG for an unknown name. */
LP_WARN_UNUSED lp_status lp_model_set_trainable(lp_model *m, const char *name, bool trainable);

typedef struct lp_model_info {
    lp_model_family family;
    lp_hf_arch arch; /* the class the model is saved as */
    bool distilbert;
    lp_model_task task; /* BASE, SEQ_CLS or CAUSAL_LM */
    bool has_head;
    lp_pooling pooling;
    int64_t num_layers, hidden_size, num_heads, intermediate_size, vocab_size, max_positions;
    int64_t num_labels;
    uint64_t n_params, n_trainable, n_tensors,
        n_initialized;         /* initialized: tensors not from the checkpoint */
    uint64_t activation_bytes; /* allocated now */
    lp_exec_mode exec;
    bool training, grad_checkpointing;
    double forward_flops_per_token; /* 2 * matmul weights; attention adds 4*T*C per layer per token */
} lp_model_info;
void lp_model_info_get(const lp_model *m, lp_model_info *out);
/* Predicted peak memory of training the model in dir with options opt (task, exec,
 * checkpointing, LoRA/QLoRA settings) on (B,T) batches with `threads` threads (0: 1), by
 * category, from the plan the engine allocates by: the model is opened without allocating
 * or reading weights. Errors: the loader's, INVALID_ARG for sizes out of range, RANGE for
 * byte counts that would overflow. */
LP_WARN_UNUSED lp_status lp_model_estimate(const char *dir, const lp_model_options *opt, int64_t B, int64_t T,
                                           int32_t threads, lp_mem_estimate *out);
/* Forward FLOPs of one (B,T) batch (matmuls and attention); the backward is about twice. */
double lp_model_forward_flops(const lp_model *m, int64_t B, int64_t T);
/* The parsed config (owned by the model). */
const lp_model_config *lp_model_config_get(const lp_model *m);
/* Label names for config.json's id2label/label2id when saving (n must equal num_labels;
 * copied). INVALID_ARG otherwise. */
LP_WARN_UNUSED lp_status lp_model_set_label_names(lp_model *m, const char *const *names, int32_t n);

/* ---- LoRA / QLoRA ------------------------------------------------------------------------ */

/* What the adapters of a model are (zeroed when it has none). */
typedef struct lp_lora_info {
    bool enabled;
    int32_t rank;
    double alpha, scale;
    float dropout;
    bool rslora;
    lp_dtype base_dtype;
    int32_t n_adapters;        /* adapted Linear modules */
    uint64_t adapter_params;   /* lora_A + lora_B elements */
    uint64_t quantized_params; /* base weights stored quantized (not in lp_model_params) */
    uint64_t quantized_bytes;  /* their storage (codes + scales) */
    char targets[256];         /* target_modules as saved in adapter_config.json, comma-joined */
} lp_lora_info;
void lp_model_lora_info(const lp_model *m, lp_lora_info *out);
/* Bytes of weights one decode step (B = 1) reads: every f32 parameter but the input
 * embedding table (one row of it a token), each quantized Linear's storage as its GEMV
 * reads it (lp_qweight_decode_nbytes), and the LM head: its quantized copy when the load
 * made one (a GGUF's own blocks, or --quantize's format), else its f32 weight, which for a
 * tied head is the embedding table again. */
double lp_model_decode_weight_bytes(const lp_model *m);
/* The quantized base weight of an encoder Linear by its HF weight name
 * ("distilbert.transformer.layer.0.attention.q_lin.weight"), or under "lm_head.weight" the
 * quantized copy of a causal LM's head that an inference load (no_grad) makes with a
 * --quantize format, or with STORED from a GGUF's quantized head (never for an f32 one);
 * NULL when that weight is not quantized. Owned by the model. */
const lp_qweight *lp_model_qweight(const lp_model *m, const char *name);

/* Writes a PEFT adapter directory that PeftModel.from_pretrained loads onto the base model:
 * adapter_config.json (LoraConfig fields; task SEQ_CLS with modules_to_save
 * ["classifier","score"], or CAUSAL_LM with none), adapter_model.safetensors (f32; PEFT's names:
 * base_model.model.<module>.lora_A.weight / .lora_B.weight and the head's
 * base_model.model.classifier.weight, ...) and a short README.md. The directory appears
 * complete or not at all. Errors: INVALID_ARG for a model without adapters, IO naming the
 * path. */
LP_WARN_UNUSED lp_status lp_model_save_adapter(const lp_model *m, const char *dir);

/* Writes dir/model.safetensors (f32, HF names), dir/config.json (the source config with the
 * saved architecture, labels and dropout) and copies the source's tokenizer files
 * (tokenizer.json, tokenizer_config.json, vocab.txt, special_tokens_map.json, vocab.json,
 * merges.txt, when present). The directory appears complete or not at all: files are written
 * into a temporary sibling which then replaces dir. A model with adapters is saved merged
 * (PEFT's merge_and_unload: W + scale * B @ A, quantized bases dequantized first), as a plain
 * transformers model. Errors: IO naming the path. */
LP_WARN_UNUSED lp_status lp_model_save_hf(const lp_model *m, const char *dir);
/* Writes a causal LM of the llama family (model_type qwen2 -> GGUF arch "qwen2"; llama,
 * mistral -> "llama", q/k rows permuted as llama.cpp's converter does) to path as a GGUF
 * llama.cpp loads: hyperparameters, the source directory's tokenizer.json (when present;
 * lp_gguf_writer_add_hf_tokenizer), every weight under llama.cpp's tensor names (LoRA
 * merged; a tied lm_head not repeated), matrices whose rows are whole 32-blocks as type
 * (LP_GGML_TYPE_Q8_0 / Q4_0, ggml's reference quantizers) and everything else F32
 * (type LP_GGML_TYPE_F32: all F32). What `loupe quantize --model DIR` runs. Errors:
 * UNSUPPORTED (another family or arch, rope scaling, sliding window, biases llama.cpp's
 * loader lacks, another type), the tokenizer's and the writer's (path named). */
LP_WARN_UNUSED lp_status lp_model_save_gguf(const lp_model *m, const char *path, uint32_t type);

/* Merges every LoRA adapter into its f32 base weight (W += scale * B @ A, PEFT's
 * merge_and_unload) so later forwards run plain Linears; the adapter parameters stay in the
 * table but no longer take part. Errors: UNSUPPORTED for a quantized base (naming the
 * module), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_model_merge_adapters(lp_model *m);

/* ---- KV-cache generation (llama family: causal LMs) -------------------------------------
 *
 *   lp_kv_cache *kv;
 *   lp_model_kv_init(m, B, T + max_new, LP_DTYPE_F32, &kv);      // category KV_CACHE
 *   lp_model_prefill(m, kv, ids, mask, B, T, logits);              // logits (B,V): last real token
 *   for (step...) { pick next[b] from logits; lp_model_decode(m, kv, next, logits); }
 *   lp_kv_cache_free(kv);
 *
 * A cache column is shared by the batch: prompts are left- or right-padded (mask 0), and
 * each decoded token takes the next column in every sequence. Positions count real tokens
 * (cumsum(mask) - 1, as training and transformers' generate use), so a token's RoPE angle is
 * its absolute position in its own sequence, whatever the padding. Attention sees the real
 * columns up to the query's (sliding window counted in columns, as the prefill does). */
typedef struct lp_kv_cache lp_kv_cache;

/* Bytes a cache of B sequences x cap columns takes for the model's config (keys and values of
 * every layer, dtype LP_DTYPE_F32 or LP_DTYPE_F16, plus its mask and positions). */
uint64_t lp_model_kv_bytes(const lp_model_config *cfg, int64_t B, int64_t cap, lp_dtype dtype);
/* A cache for B sequences of up to cap columns (prompt + generated), dtype F32 or F16,
 * allocated under LP_MEM_CATEGORY_KV_CACHE. Errors: UNSUPPORTED (not a causal LM of the
 * llama family; a head size above 512), INVALID_ARG (B, cap < 1, another dtype, cap beyond
 * the model's positions, naming config.json), NO_MEMORY. *out owned by the caller. */
LP_WARN_UNUSED lp_status lp_model_kv_init(lp_model *m, int32_t B, int32_t cap, lp_dtype dtype, lp_kv_cache **out);
void lp_kv_cache_free(lp_kv_cache *kv);
/* Empties the cache (keeps its memory) for the next prefill. */
void lp_kv_cache_reset(lp_kv_cache *kv);
/* Columns filled so far (prompt length + decoded steps). */
int32_t lp_kv_cache_len(const lp_kv_cache *kv);
/* Bytes of this cache's allocation. */
uint64_t lp_kv_cache_nbytes(const lp_kv_cache *kv);

/* Runs B prompts ids, mask (B,T) (mask NULL = all real; every row needs a real token) through
 * the model, filling the empty cache's first T columns, and writes the next-token logits of
 * each row's last real token to logits (B,V) (=; no (B,T,V) logits are formed). Errors: as
 * lp_model_forward; INVALID_ARG for a B other than the cache's, a cache not empty, T beyond
 * its capacity. */
LP_WARN_UNUSED lp_status lp_model_prefill(lp_model *m, lp_kv_cache *kv, const int32_t *ids, const int32_t *mask,
                                          int32_t B, int32_t T, float *logits);
/* One decoding step: ids (B) are the tokens just chosen, one per sequence, appended at the
 * next column; logits (B,V) = their next-token logits. Errors: INVALID_ARG (no prefill yet,
 * the cache full), RANGE (an id outside the vocabulary), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_model_decode(lp_model *m, lp_kv_cache *kv, const int32_t *ids, float *logits);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_MODELS_H */
