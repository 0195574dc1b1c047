/* models internals: the lp_model struct (parameters, gradients and activations each in one
 * block with named pointers into it, llm.c style) shared by build, run and save. */
#ifndef LP_MODELS_INTERNAL_H
#define LP_MODELS_INTERNAL_H

#include "loupe/models.h"
#include "loupe/prof.h"

/* A module's profiler range, for names the model may not have set (NULL: no range). */
static inline void lp_model__range_push(const char *name)
{
    if (name)
        lp_prof_range_push(name);
}
static inline void lp_model__range_pop(const char *name)
{
    if (name)
        lp_prof_range_pop();
}

/* One parameter while the model is being built: where its pointers go in the modules. */
typedef struct lp_model_pslot {
    float **w, **g;          /* module fields that receive data / grad */
    const lp_st_tensor *src; /* checkpoint tensor, or NULL: initialize */
    int init;                /* INIT_NORMAL, INIT_ZERO, INIT_ONE, INIT_SINUSOID */
    int64_t offset;          /* floats into the blocks */
    int64_t pad_row;         /* embedding row zeroed at init (-1: none) */
    int64_t goff;            /* floats into the gradient block, -1 when it has no gradient */
    uint64_t rng_at;         /* with lp_model.n_replay: the init stream's block its draw starts at */
    bool gather_only;        /* a token embedding only looked up (no tied head reads it): may
                                be read lazily (opt.lazy_embedding, lazy_rows.c) */
    bool lazy;               /* it is: its rows are read as tokens appear */
} lp_model_pslot;

/* INIT_KAIMING: U(-1/sqrt(in), 1/sqrt(in)) over a (out,in) matrix, PyTorch's default Linear
 * init and PEFT's lora_A init (kaiming_uniform_ with a = sqrt(5)). */
enum { LP_INIT_NORMAL = 0, LP_INIT_ZERO, LP_INIT_ONE, LP_INIT_SINUSOID, LP_INIT_KAIMING };

/* A layer Linear (the modules LoRA can target). */
typedef struct lp_model_linear {
    lp_nn_linear *lin;
    char *module;            /* HF module name, e.g. "distilbert.transformer.layer.0.attention.q_lin" (owned) */
    const char *role;        /* loupe role name (static): q, k, v, o, ffn_in, ffn_out, ffn_gate */
    int32_t layer;
    size_t wparam;           /* index of its weight in params (SIZE_MAX when quantized) */
    bool adapted;
    lp_qweight *q;           /* quantized base (owned), or NULL */
    lp_qweight *qdev;        /* its copy on a device (owned, device.c; lin->qbase then), or NULL */
    /* lp_model_options.weights: kept as qdtype (LP_DTYPE_NF4 or LP_DTYPE_GGML of qgtype)
     * when quantized is set (decided by lp_model__quant_setup, filled by _quant_finish) */
    bool quantized;
    lp_dtype qdtype;
    lp_ggml_type qgtype;
    const lp_st_tensor *qsrc; /* its checkpoint tensor while the model is built (NULL: initialize) */
    uint64_t qrng_at;         /* with lp_model.n_replay: where its init draw starts in the stream */
    lp_qweight *bf16;        /* --dtype bf16, full fine-tuning: the bf16 copy of the f32 weight
                                (owned, bf16_cache.c), or NULL */
} lp_model_linear;

/* One LoRA adapter (peft_setup.c). */
typedef struct lp_model_adapter {
    lp_model_linear *ml;
    lp_nn_lora lora;
    size_t pa, pb;           /* indexes of lora_A and lora_B in params */
} lp_model_adapter;

/* Block sizes a family needs for one (B,T) batch: activations (floats, ACTIVATION), mask
 * bytes (ACTIVATION), backward scratch (floats, TEMPORARY) and batch copies (int32, INPUT). */
typedef struct lp_model_plan {
    int64_t act, u8, tmp, in;
    int64_t layer_act, layer_u8; /* of these, one layer's activations (as a non-shared layout keeps them) */
} lp_model_plan;

/* A model family: everything that differs between BERT-style encoders and Llama-style
 * decoders. model.c holds what is generic (loading, blocks, the layer-stack loop with
 * gradient-checkpoint replay and per-layer RNG, loss, clipping, info); a family is one file
 * (bert.c, llama.c) and one line in lp_model__family(). Activations live in the family's
 * state (m->fs); `slot` is the layer's activation slot (0 for every layer when they share
 * one: gradient checkpointing and inference). */
typedef struct lp_family {
    const char *name; /* "bert", "llama" */
    /* Parameter table and module wiring from m->cfg and the task (m->has_head, m->task),
     * sources from the weights w (NULL: initialize everything; w stays open until the
     * parameters are filled). Sets m->fs, m->L, m->save_arch, m->prof_name,
     * m->default_targets, m->n_classes. */
    lp_status (*build)(lp_model *m, const lp_st_set *w);
    void (*free)(lp_model *m);
    /* Block sizes for a (B,T) batch; shared: one layer's activations for all (plus each
     * layer's output); backward: the backward's scratch too. */
    lp_model_plan (*plan)(const lp_model *m, int64_t B, int64_t T, bool shared, bool backward);
    /* Points every activation at its place in m's blocks (and m->logits, m->lse, m->ckpt_out,
     * the input copies m->ids/mask/types/labels/pos). */
    void (*bind)(lp_model *m, int64_t B, int64_t T, bool shared);
    /* Embeddings of m->ids (copied in) -> *x (B,T,C). */
    lp_status (*embed_forward)(lp_model *m, const lp_nn_ctx *ctx, int64_t B, int64_t T, const float **x);
    /* Layer l from x; returns its output (B,T,C). */
    const float *(*layer_forward)(lp_model *m, int64_t l, int64_t slot, const lp_nn_ctx *ctx, const float *x,
                                  int64_t B, int64_t T);
    /* dx (B,T,C) = (NULL: skipped); parameter grads +=. scratch: plan's tmp past 2 N*C. */
    void (*layer_backward)(lp_model *m, int64_t l, int64_t slot, const lp_nn_ctx *ctx, float *dx, const float *dout,
                           const float *x, float *scratch, int64_t B, int64_t T);
    /* Whether any embedding parameter trains (else layer 0's input gradient is skipped). */
    bool (*embed_trainable)(const lp_model *m);
    void (*embed_backward)(lp_model *m, const float *dout, float *scratch, int64_t B, int64_t T);
    /* m->logits (head_rows, num_classes) from the last hidden state; a causal LM: m->lm_in
     * (B*T, C), the LM head's input, only (lm_loss.c runs the head in chunks). */
    void (*head_forward)(lp_model *m, const lp_nn_ctx *ctx, const float *hidden, int64_t B, int64_t T);
    /* dhidden (B,T,C) = from dlogits; head grads +=. A causal LM: dlogits is NULL and scratch
     * holds d(lm_in) (B*T, C) on entry (lm_loss.c computed it). */
    void (*head_backward)(lp_model *m, float *dhidden, const float *dlogits, float *scratch, int64_t B, int64_t T);
    /* Forward FLOPs of a (B,T) batch (matmuls and attention). */
    double (*forward_flops)(const lp_model *m, int64_t B, int64_t T);
    /* KV-cache generation (generate.c); NULL where the family has none. kv_store: after layer
     * l's forward in a prefill, its rotated keys and values into kv's columns 0..T-1.
     * last_logits: logits (B, n_classes) = the head on each row's last real token of the last
     * forward. decode_step: one token per row (ids (B), kv->T already counts its column,
     * kv->pos its positions) -> logits (B, n_classes) =. */
    void (*kv_store)(lp_model *m, int64_t l, int64_t slot, lp_kv_cache *kv, int64_t B, int64_t T);
    void (*last_logits)(lp_model *m, float *logits, int64_t B, int64_t T);
    lp_status (*decode_step)(lp_model *m, lp_kv_cache *kv, const int32_t *ids, float *logits);
} lp_family;

/* A KV cache (generate.c): per layer, keys and values (B, Hkv, cap, D) in one KV_CACHE block. */
struct lp_kv_cache {
    lp_model *m;              /* borrowed: the model it was made for */
    int64_t B, cap, T;        /* sequences, columns allocated, columns filled */
    int64_t L, Hkv, D;
    bool f16;
    void **k, **v;            /* (L) pointers into block (owned array) */
    int32_t *mask;            /* (B, cap) 1 = a real token in that column */
    int32_t *pos;             /* (B) real tokens so far: the next token's position */
    void *block;              /* owned: one lp_alloc (KV_CACHE) */
    uint64_t nbytes;
};
/* The cache's geometry for its current fill (H from the model's attention). */
lp_kv_geom lp_kv__geom(const lp_kv_cache *kv, int64_t H);

extern const lp_family lp_family_bert, lp_family_llama;

struct lp_model {
    char *dir;         /* source directory (owned) */
    char *config_json; /* source config.json text (owned), rewritten on save */
    lp_model_config cfg;
    lp_model_options opt;
    double init_range;
    bool has_head;
    lp_hf_arch save_arch;
    const lp_family *fam;
    void *fs;                  /* the family's state: modules and activations (owned) */
    lp_model_task task;        /* resolved: BASE, SEQ_CLS or CAUSAL_LM */
    lp_pooling pooling;        /* bare encoders' classification pooling (saved as loupe_pooling) */
    bool pooling_saved;        /* pooling came from config.json's loupe_pooling (a saved loupe model) */
    const char *prof_name;     /* "bert", "distilbert", "llama", ...: profiler range prefix */
    const char *prof_forward, *prof_backward, *prof_embed; /* "<prof_name>.forward", ... (interned) */
    const char *default_targets; /* PEFT's default target_modules for this family */
    int64_t n_classes;         /* logits per row: num_labels, or the vocabulary (CAUSAL_LM) */
    char **label_names; /* num_labels owned strings or NULL (then the config's / LABEL_i) */
    int64_t num_labels;

    /* parameters and gradients: one block each; params[i] point into them */
    float *param_block, *grad_block;
    /* on a device (device.c): param_block is the host staging copy, param_dev the one the
     * table points at (host_view: pointed back at param_block, lp_model_host_params) */
    bool dev, host_view;
    float *param_dev;
    float *loss_dev;   /* the loss the device's cross-entropy writes */
    int32_t *in_host;  /* host shadow of in_block (same layout): the batch is checked and laid out here */
    int64_t n_floats;
    lp_model_param *params;
    lp_model_pslot *slots;
    char **names; /* owned HF names */
    size_t n_params, cap_params;

    int64_t n_grad_floats;     /* the gradient block holds the trainable parameters only */

    /* encoder Linears and LoRA / QLoRA (peft_setup.c) */
    lp_model_linear *lins;     /* every layer Linear, in wiring order */
    size_t n_lins, cap_lins;
    /* A packed LoRA base draws what the f32 model would (lp_model__keep_init_stream): the
     * first n_replay parameters and the dropped weights start at their recorded rng_at, the
     * later ones (adapters) from rng_end. 0: one sequential stream. */
    size_t n_replay;
    uint64_t rng_end;
    lp_lora_options lora;      /* resolved; strings borrowed from opt or owned below */
    char *lora_targets;        /* owned: target_modules as saved (comma-joined) */
    char **mts;                /* owned modules_to_save entries */
    size_t n_mts;
    lp_model_adapter *adapters;
    size_t n_adapters;
    lp_st_file *adapter_file;  /* open while the model is built */
    lp_nn_ctx pass_ctx;        /* what adapters and quantized bases read during a pass */
    lp_gguf_file *qgguf;       /* STORED weights: the GGUF, open from quant_setup to quant_finish */
    lp_nn_linear *lm_head;     /* a causal LM's head (set by the family), or NULL */
    const char *lm_fwd, *lm_bwd; /* its profiler ranges (set by the family), or NULL */
    struct lp_lazy_rows *lazy; /* opt.lazy_embedding: the table read as tokens appear, or NULL */
    lp_qweight *head_q;        /* inference with quantized weights: the LM head's quantized copy
                                  (owned; the f32 weight stays for the embedding lookup) */
    lp_status pass_status;     /* first kernel error of the current pass (pass_ctx.status) */
    float *lora_act; uint8_t *lora_u8;
    int64_t lora_act_cap, lora_u8_cap;

    int64_t L; /* layers */

    /* run state */
    lp_exec_mode exec;
    bool training, ckpt;
    bool bf16_stale;   /* the lins' bf16 copies predate the f32 weights (bf16_cache.c) */
    lp_rng rng;        /* dropout stream */
    lp_rng *layer_rng; /* (L) stream state at each layer's forward: recompute replays it */
    int64_t slice_row0, slice_rows; /* lp_model_set_batch_slice (slice_rows 0: none) */
    float dloss_scale;
    lp_model_grad_ready_fn grad_ready; /* backward's per-stage hook (borrowed), or NULL */
    void *grad_ready_user;

    /* activations (ACTIVATION), scratch (TEMPORARY), inputs (INPUT), sized for the batch */
    float *act_block;
    uint8_t *act_u8;
    int64_t act_cap_floats, act_cap_u8;
    float *tmp_block;
    int64_t tmp_cap;
    int32_t *in_block;
    int64_t in_cap;
    const float *emb_out;  /* (B,T,C) the embeddings' output of the last forward */
    const float **layer_out; /* (L) each layer's output of the last forward */
    float **ckpt_out;      /* (L) layer outputs kept under checkpointing (bound by the family) */
    float *logits, *lse; /* (rows, n_classes), (rows): rows = B, or B*T for a causal LM (whose
                            logits are never held whole: logits is NULL, see lm_loss.c) */
    const float *lm_in;  /* a causal LM: (B*T, C) the head's input of the last forward */
    float *lm_chunk;     /* a causal LM: (lp_model__lm_chunk_rows, V) one chunk's logits */
    bool lm_dh_ok;       /* the loss forward left d(lm_in) in the backward's scratch ... */
    float lm_dh_scale;   /* ... under this dloss_scale */
    bool lm_dw_early;    /* lp_model_set_head_grad_in_loss: a trained head's dW in the loss too */
    bool lm_dw_done;     /* the loss forward added the head's dW (under lm_dh_scale) */
    int32_t *ids, *mask, *types, *labels, *pos; /* (B,T) each; labels (rows) */
    bool has_types;
    int64_t B, T; /* of the last forward */
    bool fwd_ok, loss_ok;
    float loss;
    lp_kv_cache *kv_fill;  /* set during a prefill: each layer's keys and values go here */
    lp_exec_mode fwd_exec; /* layout of the last forward */
    bool fwd_training, fwd_ckpt;
    bool segments; /* the last forward's mask held sample ids above 1 (packing) */
};

/* Embeddings and the layer stack (the forward without the head); need_grad keeps every
 * layer's activations for a backward. */
/* device.c */
void *lp_model__blk_alloc(const lp_model *m, size_t bytes, lp_mem_category cat, const char *what);
void lp_model__blk_free(const lp_model *m, void *p);
lp_status lp_model__to_device(lp_model *m);
void lp_model__device_free(lp_model *m);
/* p (inside in_block, of any element type) -> where the host writes it: the shadow on a device */
static inline void *lp_model__in_host(const lp_model *m, const void *p)
{
    return m->dev ? (char *)m->in_host + ((const char *)p - (const char *)m->in_block) : (void *)p;
}
/* *loss (host) = the mean cross-entropy of n rows (lp_cross_entropy_forward; -100 ignored);
 * on a device it lands in loss_dev and is downloaded, which waits for the pass. */
lp_status lp_model__cross_entropy(lp_model *m, float *loss, float *lse, const float *logits,
                                  const int32_t *labels, int64_t n);

lp_status lp_model__run_stack(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *type_ids,
                              int32_t B, int32_t T, bool need_grad);
/* Grows the blocks to a (B,T) batch's plan. */
lp_status lp_model__ensure(lp_model *m, int64_t B, int64_t T, bool shared, bool backward);

/* lp_model_load; plan_only stops after the parameter table and the PEFT setup (no blocks,
 * nothing quantized, weights never read): what lp_model_estimate sizes. */
lp_status lp_model__open(const char *dir, const lp_model_options *opt, bool plan_only, lp_model **out);
/* After the family's build: PEFT setup, the parameter block filled from the sources or
 * initialized, gradients laid out, quantized bases made (params.c). */
lp_status lp_model__fill_params(lp_model *m);
/* Interns "<fam>.<mid>.<dir>" as a profiler name; sets *st on out of memory. */
const char *lp_model__prof_name(const char *fam, const char *mid, const char *dir, lp_status *st);
/* A causal LM's chunked head (lm_loss.c). Rows of logits a chunk holds for a batch of `rows`
 * tokens (lp_model_options.lm_head_chunk, else a default of a few dozen MB). */
int64_t lp_model__lm_chunk_rows(const lp_model *m, int64_t rows);
/* logits (B*T, V) = the head over m->lm_in (NULL: computed chunk by chunk and dropped). */
lp_status lp_model__lm_logits(lp_model *m, float *logits);
/* loss = mean cross-entropy over m->labels' non-ignored rows, chunk by chunk; logits (B*T, V)
 * = as well unless NULL; dh (B*T, C) = d loss / d lm_in times dloss_scale unless NULL (then
 * lp_model__lm_backward only rescales it). */
lp_status lp_model__lm_loss(lp_model *m, float *logits, float *dh, float *loss);
/* token_loss (B*T) = each row's cross-entropy against m->labels (0 where ignored), chunk by
 * chunk: per-row losses with no (B*T, V) logits held. */
lp_status lp_model__lm_token_losses(lp_model *m, float *token_loss);
/* dh (B*T, C) = (recomputing each chunk's logits unless the loss forward left it); the
 * head's dW += when it trains. */
void lp_model__lm_backward(lp_model *m, float *dh);
/* Rounds a float count up to 16 (64 bytes), bytes to 64: each tensor in a block starts aligned. */
static inline int64_t lp_model__up16(int64_t n) { return (n + 15) & ~(int64_t)15; }
static inline int64_t lp_model__up64(int64_t n) { return (n + 63) & ~(int64_t)63; }

/* Appends a parameter to the table (data and grad pointers land in *w and *g once the blocks
 * exist). ndim 1 or 2; d1 ignored for ndim 1. */
lp_status lp_model__add_param(lp_model *m, const char *name, int ndim, int64_t d0, int64_t d1, float **w, float **g,
                              const lp_st_tensor *src, int init, bool no_decay);
/* Records an encoder Linear as it is wired (module name copied). */
lp_status lp_model__note_linear(lp_model *m, lp_nn_linear *lin, const char *module, const char *role,
                                int32_t layer, size_t wparam);
/* After wire(): applies m->opt.lora (targets, frozen base, head trainable, adapter params and
 * the adapter file's tensors as their sources). No-op without LoRA. */
lp_status lp_model__peft_setup(lp_model *m);
/* Inference weights without LoRA (quant_setup.c): _setup marks the Linears that
 * lp_model_options.weights keeps quantized and drops them from the parameter table (also
 * plan-only); _finish makes their lp_qweight from the checkpoint (or the GGUF's blocks). */
lp_status lp_model__quant_setup(lp_model *m);
lp_status lp_model__quant_finish(lp_model *m);
/* Drops every Linear weight (as QLoRA does) keeping the initialization of a model without
 * weights what it would be with them in the table: each parameter's and dropped weight's
 * place in the init stream is recorded first (quant_setup.c). */
lp_status lp_model__drop_keep_init_stream(lp_model *m);
/* Whether a LoRA run's frozen f32 Linears are packed for the f32 GEMM (quant_setup.c): only
 * when LP_F32_PACK=1 asks; OpenBLAS measured as fast or faster on every CPU tried. */
bool lp_model__pack_f32_bases(void);
/* Drops the weights of the Linears with drop[i] set (NULL: all) from the parameter table,
 * keeping each one's checkpoint tensor in qsrc; offsets and the kept Linears' wparam are
 * recomputed (no block exists yet). */
lp_status lp_model__drop_linear_params(lp_model *m, const bool *drop);
/* After the blocks are filled: quantizes bases, closes the adapter file. */
lp_status lp_model__peft_finish(lp_model *m);
/* Sizes and binds the adapters' saved activations and scratch for a (B,T) batch. */
lp_status lp_model__peft_bind(lp_model *m, int64_t B, int64_t T);
void lp_model__peft_free(lp_model *m);
/* Lays out the gradient block for the parameters trainable now (keeping existing gradients). */
lp_status lp_model__layout_grads(lp_model *m);
/* The f32 weight to save for params[i] (merged with its adapter when it has one): *buf is
 * set when a new buffer was allocated (caller frees with free()); NULL + lp_err on OOM. */
const float *lp_model__saved_weight(const lp_model *m, size_t i, float **buf);
/* True when the parameter's module is in modules_to_save (PEFT's endswith rule). */
bool lp_model__in_modules_to_save(const lp_model *m, const char *param);
/* Converts a float checkpoint tensor (f32, f16, bf16, f64) into dst (numel floats); _n: n
 * values of that dtype at src. */
void lp_model__convert(float *dst, const lp_st_tensor *t);
void lp_model__convert_n(float *dst, const void *src, lp_st_dtype dtype, int64_t n);
/* ---- lazy_rows.c: an inference load's token embedding read a row at a time ---- */
/* Whether params[i] is read lazily under m's options (a gather-only table from a
 * safetensors file, no_grad, no adapters, on the CPU). */
bool lp_model__lazy_wanted(const lp_model *m, size_t i);
/* Instead of converting params[i] (lp_model__lazy_wanted): keeps the file open and returns
 * the table's pages to the system (lp_model__check_finite checks the source). */
lp_status lp_model__lazy_open(lp_model *m, size_t i);
/* Reads the rows of ids[0..n) not read yet (ids outside the table are left to the lookup's
 * own check). Errors: IO (the file shorter or unreadable now), NUMERIC (a row changed to
 * non-finite values since the load). */
lp_status lp_model__lazy_fetch(lp_model *m, const int32_t *ids, int64_t n);
void lp_model__lazy_free(lp_model *m);
/* The f32 weight an encoder Linear is saved with: dequantized when quantized, plus
 * scale * B @ A when adapted. *buf as lp_model__saved_weight. */
const float *lp_model__linear_weight(const lp_model *m, const lp_model_linear *ml, float **buf);
/* NaN or Inf in a parameter loaded from a checkpoint: NUMERIC naming the file, the first such
 * tensor with its count, and how many tensors are affected (checks.c). */
lp_status lp_model__check_finite(const lp_model *m);
/* Whether every block a (B,T) batch needs has a representable size (checks.c). */
bool lp_model__batch_sizes_ok(const lp_model *m, int64_t B, int64_t T);
/* True for lora_A/lora_B parameters (not part of the saved HF model). */
bool lp_model__is_adapter_param(const lp_model *m, size_t i);

/* A PEFT adapter_config.json as loupe reads it for --adapter DIR (peft_setup.c). Every
 * string is owned; after a successful parse: 1 <= r <= 65536, alpha finite, dropout in
 * [0, 1), and either target_regex (target_modules as one regex string) or n_targets >= 1
 * non-NULL targets; mts (modules_to_save) may be empty. */
typedef struct lp_model_adapter_cfg {
    int32_t r;
    double alpha, dropout;
    bool rslora;
    char **targets;
    size_t n_targets;
    char *target_regex;
    char **mts;
    size_t n_mts;
} lp_model_adapter_cfg;
/* Parses len bytes of adapter_config.json text (need not be NUL-terminated); path names
 * it in messages. Refuses (UNSUPPORTED) settings that change the math loupe does not
 * implement. Errors: FORMAT, UNSUPPORTED, NO_MEMORY; *c is zeroed on error. */
lp_status lp_model__adapter_cfg_parse(const char *text, size_t len, const char *path, lp_model_adapter_cfg *c);
void lp_model__adapter_cfg_free(lp_model_adapter_cfg *c);

/* bf16_cache.c (--dtype bf16, full fine-tuning): the Linears' bf16 copies. _setup packs
 * them once the weights are final (load); _refresh repacks them before a pass when
 * lp_model_weights_changed said the f32 weights moved; _nbytes is one Linear's copy (0
 * where it gets none), for the memory plan. */
lp_status lp_model__bf16_setup(lp_model *m);
void lp_model__bf16_refresh(lp_model *m);
void lp_model__bf16_free(lp_model *m);
uint64_t lp_model__bf16_cache_nbytes(const lp_model *m, const lp_model_linear *ml);
/* QLoRA under --dtype bf16: the frozen NF4 / int8 bases are rounded to a bf16 copy for each
 * GEMM (lp_nn_linear.qbase_bf16, set by lp_model__peft_finish; the memory plan reads it here) */
static inline bool lp_model__qbase_bf16(const lp_model *m)
{
    return m->lora.enabled && m->opt.compute == LP_DTYPE_BF16 &&
           (m->lora.base_dtype == LP_DTYPE_NF4 || m->lora.base_dtype == LP_DTYPE_INT8);
}

#endif
