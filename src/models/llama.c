/* The llama family (Llama, Mistral, Qwen2, SmolLM): token embeddings, pre-norm decoder
 * layers (RMSNorm, rotary causal attention over Hkv key/value heads, SiLU-gated MLP), the
 * final RMSNorm, and either lm_head (a causal LM, possibly tied to the embeddings) or score
 * on the last real token (sequence classification, as transformers'
 * *ForSequenceClassification). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

#define NAME_LEN 192

/* Modules and activations (m->fs). */
typedef struct llama_state {
    int64_t V, C, D, H, Hkv;
    int32_t pad_id;    /* embed_tokens' padding_idx (its gradient stays 0), or -1 */
    float *wte, *dwte; /* (V,C) embed_tokens */
    lp_nn_decoder_layer *layers;
    lp_nn_rmsnorm norm; /* model.norm */
    lp_nn_linear head;  /* lm_head (V,C) or score (L,C); no bias; w = wte when tied */
    bool tied;
    float *inv_freq;     /* (D/2) rotary frequencies (owned, malloc) */
    float *inv_freq_dev; /* their copy on the device (owned, lp_kernels_dev_alloc), or NULL */
    float attn_factor;
    const char *emb_fwd, *emb_bwd, *head_fwd, *head_bwd;
    /* activations for the current batch */
    float *emb;                     /* (N,C) */
    lp_nn_decoder_layer_act *lact;  /* (L), or one shared entry */
    float *cos, *sin;               /* (N, D/2) */
    float *hn, *rstd;               /* (N,C) final norm output, (N) */
    float *pooled;                  /* (B,C) last real token's hidden (SEQ_CLS) */
    int64_t *last;                  /* (B) flat index of each row's last real token */
} llama_state;

static llama_state *st_of(const lp_model *m)
{
    return (llama_state *)m->fs;
}

#define TRY(x)                                                                                               \
    do {                                                                                                     \
        lp_status st_ = (x);                                                                                 \
        if (st_ != LP_OK)                                                                                    \
            return st_;                                                                                      \
    } while (0)

static const lp_st_tensor *src_of(const lp_param_map *map, lp_param_role role, int32_t layer)
{
    if (!map)
        return NULL;
    const lp_param_binding *b = lp_param_map_find(map, role, layer);
    return b ? b->tensor : NULL;
}

/* A head tensor by its top-level name, shape-checked; the score of another label count is
 * re-initialized (as transformers with ignore_mismatched_sizes). */
static lp_status head_src(const lp_model *m, const lp_st_set *w, const char *name, int64_t rows, int64_t cols,
                          const lp_st_tensor **out)
{
    *out = NULL;
    const lp_st_tensor *t = w ? lp_st_set_find(w, name) : NULL;
    if (!t)
        return LP_OK;
    if (t->ndim != 2 || t->shape[1] != cols || t->shape[0] != rows) {
        if (!strcmp(name, "score.weight") && t->ndim == 2 && t->shape[1] == cols) {
            if (!m->opt.quiet)
                fprintf(stderr, "loupe: %s: '%s' has %lld rows but the model has %lld labels: re-initialized\n",
                        t->file, name, (long long)t->shape[0], (long long)rows);
            return LP_OK;
        }
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' does not have the shape [%lld, %lld] the config implies",
                      t->file, name, (long long)rows, (long long)cols);
    }
    if (t->dtype != LP_ST_DTYPE_F32 && t->dtype != LP_ST_DTYPE_F16 && t->dtype != LP_ST_DTYPE_BF16 &&
        t->dtype != LP_ST_DTYPE_F64)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' has dtype %s; weights must be floating point", t->file,
                      name, lp_st_dtype_name(t->dtype));
    *out = t;
    return LP_OK;
}

static lp_status add_linear(lp_model *m, lp_nn_linear *l, const char *fam, const char *module, int64_t out,
                            int64_t in, const lp_st_tensor *w, const lp_st_tensor *b, bool bias)
{
    char n[NAME_LEN];
    lp_status st = LP_OK;
    l->in = in;
    l->out = out;
    snprintf(n, sizeof n, "%s.weight", module);
    TRY(lp_model__add_param(m, n, 2, out, in, &l->w, &l->dw, w, LP_INIT_NORMAL, false));
    if (bias) {
        snprintf(n, sizeof n, "%s.bias", module);
        TRY(lp_model__add_param(m, n, 1, out, 0, &l->b, &l->db, b, LP_INIT_ZERO, true));
    }
    l->fwd_name = lp_model__prof_name(fam, module, "forward", &st);
    l->bwd_name = lp_model__prof_name(fam, module, "backward", &st);
    return st;
}

static lp_status add_norm(lp_model *m, lp_nn_rmsnorm *n, const char *fam, const char *module,
                          const lp_st_tensor *w)
{
    char name[NAME_LEN];
    lp_status st = LP_OK;
    n->C = m->cfg.hidden_size;
    n->eps = (float)m->cfg.norm_eps;
    snprintf(name, sizeof name, "%s.weight", module);
    TRY(lp_model__add_param(m, name, 1, n->C, 0, &n->w, &n->dw, w, LP_INIT_ONE, true));
    n->fwd_name = lp_model__prof_name(fam, module, "forward", &st);
    n->bwd_name = lp_model__prof_name(fam, module, "backward", &st);
    return st;
}

/* Limits the kernels and the engine rely on, checked once at load (they survive NDEBUG). */
static lp_status check_limits(const lp_model *m)
{
    const lp_model_config *c = &m->cfg;
    const char *f = m->dir;
    if (c->head_dim % 2)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s/config.json: head_dim %lld is odd; rotary embeddings need it even",
                      f, (long long)c->head_dim);
    if (c->activation != LP_ACTIVATION_SILU)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s/config.json: hidden_act '%s' is not supported (silu)", f,
                      c->activation_name);
    if (c->attention_dropout > 0)
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "%s/config.json: attention_dropout %g is not supported for decoders (0 in released models)", f,
                      c->attention_dropout);
    if (c->vocab_size > INT32_MAX || c->max_position_embeddings > INT32_MAX)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s/config.json: vocab_size or max_position_embeddings beyond 2^31", f);
    if (c->pad_token_id >= c->vocab_size)
        return lp_err(LP_STATUS_FORMAT, "%s/config.json: pad_token_id %lld is outside the vocabulary of %lld", f,
                      (long long)c->pad_token_id, (long long)c->vocab_size);
    return LP_OK;
}

static lp_status rope_setup(lp_model *m, llama_state *ls)
{
    const lp_model_config *c = &m->cfg;
    lp_rope_scaling rs = {.type = LP_ROPE_TYPE_DEFAULT};
    if (!strcmp(c->rope_type, "linear"))
        rs.type = LP_ROPE_TYPE_LINEAR;
    else if (!strcmp(c->rope_type, "llama3"))
        rs.type = LP_ROPE_TYPE_LLAMA3;
    else if (!strcmp(c->rope_type, "yarn"))
        rs.type = LP_ROPE_TYPE_YARN;
    rs.factor = c->rope_factor;
    rs.low_freq_factor = c->rope_low_freq_factor;
    rs.high_freq_factor = c->rope_high_freq_factor;
    rs.beta_fast = c->rope_beta_fast;
    rs.beta_slow = c->rope_beta_slow;
    rs.mscale = c->rope_mscale;
    rs.mscale_all_dim = c->rope_mscale_all_dim;
    rs.attention_factor = c->rope_attention_factor;
    rs.original_max_pos = c->rope_original_max_pos;
    rs.no_truncate = c->rope_no_truncate;
    if (!(ls->inv_freq = lp_malloc((size_t)(ls->D / 2) * sizeof(float))))
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    lp_status st = lp_rope_inv_freq(ls->inv_freq, ls->D, c->rope_theta, &rs, &ls->attn_factor);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s/config.json: rope", m->dir);
    return LP_OK;
}

static lp_status wire(lp_model *m, const lp_st_set *w, const lp_param_map *map)
{
    llama_state *ls = st_of(m);
    const lp_model_config *c = &m->cfg;
    const char *fam = m->prof_name;
    const char *pfx = m->has_head ? "model." : "";
    const int64_t C = ls->C, I = c->intermediate_size, QD = ls->H * ls->D, KD = ls->Hkv * ls->D;
    char n[NAME_LEN], mod[NAME_LEN];
    lp_status st = LP_OK;

    ls->pad_id = c->pad_token_id >= 0 ? (int32_t)c->pad_token_id : -1;
    snprintf(n, sizeof n, "%sembed_tokens.weight", pfx);
    TRY(lp_model__add_param(m, n, 2, ls->V, C, &ls->wte, &ls->dwte, src_of(map, LP_PARAM_ROLE_WORD_EMB, -1),
                            LP_INIT_NORMAL, false));
    m->slots[m->n_params - 1].pad_row = ls->pad_id;
    m->slots[m->n_params - 1].gather_only = !(m->task == LP_MODEL_TASK_CAUSAL_LM && c->tie_word_embeddings);
    snprintf(mod, sizeof mod, "%sembed_tokens", pfx);
    ls->emb_fwd = lp_model__prof_name(fam, mod, "forward", &st);
    ls->emb_bwd = lp_model__prof_name(fam, mod, "backward", &st);
    TRY(st);

    static const struct {
        lp_param_role role;
        const char *sub, *role_name;
    } lin[] = {
        {LP_PARAM_ROLE_Q_W, "self_attn.q_proj", "q"},      {LP_PARAM_ROLE_K_W, "self_attn.k_proj", "k"},
        {LP_PARAM_ROLE_V_W, "self_attn.v_proj", "v"},      {LP_PARAM_ROLE_O_W, "self_attn.o_proj", "o"},
        {LP_PARAM_ROLE_FFN_GATE_W, "mlp.gate_proj", "ffn_gate"}, {LP_PARAM_ROLE_FFN_IN_W, "mlp.up_proj", "ffn_in"},
        {LP_PARAM_ROLE_FFN_OUT_W, "mlp.down_proj", "ffn_out"},
    };
    for (int32_t i = 0; i < (int32_t)m->L; i++) {
        lp_nn_decoder_layer *l = &ls->layers[i];
        l->index = i;
        lp_nn_attention *a = &l->attn;
        a->C = C;
        a->H = ls->H;
        a->Hkv = ls->Hkv;
        a->D = ls->D;
        a->causal = true;
        a->window = c->sliding_window;
        a->rope = true;
        snprintf(mod, sizeof mod, "%slayers.%d.input_layernorm", pfx, i);
        TRY(add_norm(m, &l->ln1, fam, mod, src_of(map, LP_PARAM_ROLE_ATTN_NORM_W, i)));
        lp_nn_linear *mods[] = {&a->q, &a->k, &a->v, &a->o, &l->mlp.gate, &l->mlp.up, &l->mlp.down};
        const int64_t outs[] = {QD, KD, KD, C, I, I, C}, ins[] = {C, C, C, QD, C, C, I};
        const bool bias[] = {c->attention_qkv_bias, c->attention_qkv_bias, c->attention_qkv_bias,
                             c->attention_out_bias, c->mlp_bias,           c->mlp_bias,
                             c->mlp_bias};
        for (int j = 0; j < 7; j++) {
            if (j == 4) {
                snprintf(mod, sizeof mod, "%slayers.%d.post_attention_layernorm", pfx, i);
                TRY(add_norm(m, &l->ln2, fam, mod, src_of(map, LP_PARAM_ROLE_FFN_NORM_W, i)));
            }
            snprintf(mod, sizeof mod, "%slayers.%d.%s", pfx, i, lin[j].sub);
            size_t wparam = m->n_params;
            TRY(add_linear(m, mods[j], fam, mod, outs[j], ins[j], src_of(map, lin[j].role, i),
                           src_of(map, (lp_param_role)(lin[j].role + 1), i), bias[j]));
            TRY(lp_model__note_linear(m, mods[j], mod, lin[j].role_name, i, wparam));
        }
        snprintf(mod, sizeof mod, "%slayers.%d", pfx, i);
        l->fwd_name = lp_model__prof_name(fam, mod, "forward", &st);
        l->bwd_name = lp_model__prof_name(fam, mod, "backward", &st);
        snprintf(mod, sizeof mod, "%slayers.%d.self_attn", pfx, i);
        a->fwd_name = lp_model__prof_name(fam, mod, "forward", &st);
        a->bwd_name = lp_model__prof_name(fam, mod, "backward", &st);
        snprintf(mod, sizeof mod, "%slayers.%d.mlp", pfx, i);
        l->mlp.fwd_name = lp_model__prof_name(fam, mod, "forward", &st);
        l->mlp.bwd_name = lp_model__prof_name(fam, mod, "backward", &st);
        TRY(st);
    }
    snprintf(mod, sizeof mod, "%snorm", pfx);
    TRY(add_norm(m, &ls->norm, fam, mod, src_of(map, LP_PARAM_ROLE_FINAL_NORM_W, -1)));

    size_t first_head = m->n_params;
    if (m->task == LP_MODEL_TASK_CAUSAL_LM) {
        ls->tied = c->tie_word_embeddings;
        if (!ls->tied) {
            const lp_st_tensor *t;
            TRY(head_src(m, w, "lm_head.weight", ls->V, C, &t));
            TRY(add_linear(m, &ls->head, fam, "lm_head", ls->V, C, t, NULL, false));
        } else {
            ls->head.in = C;
            ls->head.out = ls->V;
            ls->head.fwd_name = lp_model__prof_name(fam, "lm_head", "forward", &st);
            ls->head.bwd_name = lp_model__prof_name(fam, "lm_head", "backward", &st);
        }
        m->lm_head = &ls->head; /* quant_setup.c may give it a quantized copy for inference */
        m->lm_fwd = ls->head.fwd_name;
        m->lm_bwd = ls->head.bwd_name;
    } else if (m->task == LP_MODEL_TASK_SEQ_CLS) {
        const lp_st_tensor *t;
        TRY(head_src(m, w, "score.weight", m->num_labels, C, &t));
        TRY(add_linear(m, &ls->head, fam, "score", m->num_labels, C, t, NULL, false));
    }
    ls->head_fwd = ls->head.fwd_name;
    ls->head_bwd = ls->head.bwd_name;
    ls->head.fwd_name = ls->head.bwd_name = NULL; // the head's range covers pooling and norm too
    TRY(st);
    if (w && !m->opt.quiet && m->n_params > first_head && !m->slots[first_head].src)
        fprintf(stderr,
                "loupe: some weights of %s were not initialized from the checkpoint at %s and are newly "
                "initialized (normal(0, %g)): [%s]. Train the model before using its predictions.\n",
                lp_hf_arch_name(m->save_arch), m->dir, m->init_range, m->params[first_head].name);
    return LP_OK;
}

static lp_status llama_build(lp_model *m, const lp_st_set *w)
{
    const lp_model_config *c = &m->cfg;
    TRY(check_limits(m));
    llama_state *ls = lp_calloc(1, sizeof *ls);
    if (!ls)
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    m->fs = ls;
    m->L = c->num_layers;
    const lp_hf_arch a = c->arch;
    const bool qwen2 = a == LP_HF_ARCH_QWEN2_CAUSAL_LM || a == LP_HF_ARCH_QWEN2_SEQ_CLS;
    const bool mistral = a == LP_HF_ARCH_MISTRAL_CAUSAL_LM || a == LP_HF_ARCH_MISTRAL_SEQ_CLS;
    m->prof_name = qwen2 ? "qwen2" : mistral ? "mistral" : "llama";
    m->default_targets = "q_proj,v_proj"; // PEFT's default for llama, mistral and qwen2
    m->save_arch = m->task == LP_MODEL_TASK_SEQ_CLS
                       ? (qwen2 ? LP_HF_ARCH_QWEN2_SEQ_CLS : mistral ? LP_HF_ARCH_MISTRAL_SEQ_CLS
                                                                     : LP_HF_ARCH_LLAMA_SEQ_CLS)
                       : (qwen2 ? LP_HF_ARCH_QWEN2_CAUSAL_LM : mistral ? LP_HF_ARCH_MISTRAL_CAUSAL_LM
                                                                       : LP_HF_ARCH_LLAMA_CAUSAL_LM);
    ls->V = c->vocab_size;
    ls->C = c->hidden_size;
    ls->D = c->head_dim;
    ls->H = c->num_heads;
    ls->Hkv = c->num_kv_heads;
    m->n_classes = m->task == LP_MODEL_TASK_CAUSAL_LM ? ls->V : m->num_labels;
    if (!(ls->layers = lp_calloc((size_t)m->L, sizeof *ls->layers)) ||
        !(ls->lact = lp_calloc((size_t)m->L, sizeof *ls->lact)))
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    TRY(rope_setup(m, ls));

    lp_param_map map, *mp = NULL;
    if (w) { // the stack; the head is looked up by name in wire()
        TRY(lp_param_map_build(c, w, LP_MODEL_TASK_BASE, &map));
        mp = &map;
    }
    lp_status st = wire(m, w, mp);
    if (mp)
        lp_param_map_free(mp);
    return st;
}

static void llama_free(lp_model *m)
{
    llama_state *ls = st_of(m);
    if (!ls)
        return;
    free(ls->layers);
    free(ls->lact);
    free(ls->inv_freq);
    lp_kernels_dev_free(ls->inv_freq_dev);
    free(ls);
    m->fs = NULL;
}

/* ---- activations ---------------------------------------------------------------------- */

#define up16 lp_model__up16

static int64_t rows_of(const lp_model *m, int64_t B, int64_t T)
{
    return m->task == LP_MODEL_TASK_CAUSAL_LM ? B * T : B;
}

static int64_t head_scratch(const lp_model *m, int64_t B, int64_t T)
{
    return up16(B * T * m->cfg.hidden_size) + up16(B * m->cfg.hidden_size);
}

/* The head's logits: a causal LM holds one chunk of rows (lm_loss.c), a classifier all */
static int64_t logit_floats(const lp_model *m, int64_t B, int64_t T)
{
    const int64_t rows = rows_of(m, B, T);
    return up16((m->task == LP_MODEL_TASK_CAUSAL_LM ? lp_model__lm_chunk_rows(m, rows) : rows) * m->n_classes);
}

static lp_model_plan llama_plan(const lp_model *m, int64_t B, int64_t T, bool shared, bool backward)
{
    const llama_state *ls = st_of(m);
    const int64_t N = B * T, C = ls->C, rows = rows_of(m, B, T);
    lp_model_plan s = {0};
    const int64_t la = lp_nn_decoder_layer_act_floats(&ls->layers[0], m->exec, B, T);
    s.act = up16(N * C) + (shared ? la + m->L * up16(N * C) : m->L * la) + 2 * up16(N * ls->D / 2) +
            up16(N * C) + up16(N) + up16(B * C) + logit_floats(m, B, T) + up16(rows);
    if (backward) { // a causal LM's head gradient goes chunk by chunk through its logits' buffer
        int64_t sl = lp_nn_decoder_layer_scratch_floats(&ls->layers[0], m->exec, B, T), sh = head_scratch(m, B, T);
        s.tmp = 2 * up16(N * C) + (sl > sh ? sl : sh) +
                (m->task == LP_MODEL_TASK_CAUSAL_LM ? 0 : up16(rows * m->n_classes));
    }
    s.in = 5 * N + 2 * B + 64; // ids, mask, types, labels, pos; last (int64)
    s.layer_act = la;
    return s;
}

static void llama_bind(lp_model *m, int64_t B, int64_t T, bool shared)
{
    llama_state *ls = st_of(m);
    const int64_t N = B * T, C = ls->C, rows = rows_of(m, B, T);
    float *f = m->act_block;
#define TAKE(n) (f += up16(n), f - up16(n))
    ls->emb = TAKE(N * C);
    const int64_t la = lp_nn_decoder_layer_act_floats(&ls->layers[0], m->exec, B, T);
    ls->cos = TAKE(N * ls->D / 2);
    ls->sin = TAKE(N * ls->D / 2);
    for (int64_t l = 0; l < (shared ? 1 : m->L); l++) {
        lp_nn_decoder_layer_act_bind(&ls->layers[l], m->exec, &ls->lact[l], f, B, T);
        f += la;
    }
    for (int64_t l = 0; l < m->L; l++) {
        lp_nn_decoder_layer_act *a = &ls->lact[shared ? 0 : l];
        a->attn.rope_cos = ls->cos;
        a->attn.rope_sin = ls->sin;
    }
    if (shared)
        for (int64_t l = 0; l < m->L; l++)
            m->ckpt_out[l] = TAKE(N * C);
    ls->hn = TAKE(N * C);
    ls->rstd = TAKE(N);
    ls->pooled = TAKE(B * C);
    if (m->task == LP_MODEL_TASK_CAUSAL_LM) {
        m->logits = NULL;
        m->lm_chunk = TAKE(logit_floats(m, B, T));
    } else {
        m->logits = TAKE(rows * m->n_classes);
    }
    m->lse = TAKE(rows);
#undef TAKE
    m->ids = m->in_block;
    m->mask = m->ids + N;
    m->types = m->mask + N;
    m->labels = m->types + N;
    m->pos = m->labels + N;
    ls->last = (int64_t *)(void *)(m->pos + N + ((N & 1) ? 1 : 0)); // 8-byte aligned: the block is
}

/* ---- passes ----------------------------------------------------------------------------- */

/* ls->emb (B*T, C) = the embedding rows of ids, read first where the table is lazy */
static lp_status lookup(lp_model *m, const int32_t *ids, int64_t B, int64_t T)
{
    llama_state *ls = st_of(m);
    lp_model__range_push(ls->emb_fwd);
    lp_status st = lp_model__lazy_fetch(m, ids, B * T);
    if (st == LP_OK)
        st = lp_embedding_forward(ls->emb, ids, NULL, ls->wte, NULL, NULL, B, T, ls->C, ls->V, 0, 0, 0);
    lp_model__range_pop(ls->emb_fwd);
    return st;
}

/* The rotary frequencies where the kernels read them: on a device, a copy made once. */
static lp_status inv_freq_of(lp_model *m, const float **out)
{
    llama_state *ls = st_of(m);
    *out = ls->inv_freq;
    if (!m->dev)
        return LP_OK;
    const size_t bytes = (size_t)(ls->D / 2) * sizeof(float);
    if (!ls->inv_freq_dev) {
        if (!(ls->inv_freq_dev =
                  lp_kernels_dev_alloc(bytes, LP_MEM_CATEGORY_PARAMETER, "rotary frequencies")))
            return lp_err_wrap(LP_STATUS_NO_MEMORY, "%s: the rotary frequencies on the device", m->dir);
        lp_status st = lp_kernels_upload(ls->inv_freq_dev, ls->inv_freq, bytes);
        if (st != LP_OK)
            return lp_err_wrap(st, "%s: uploading the rotary frequencies", m->dir);
    }
    *out = ls->inv_freq_dev;
    return LP_OK;
}

static lp_status llama_embed_forward(lp_model *m, const lp_nn_ctx *ctx, int64_t B, int64_t T, const float **x)
{
    (void)ctx;
    llama_state *ls = st_of(m);
    // the batch is read and the positions laid out in the host shadow (the block itself on
    // the CPU), then uploaded to a device
    const int32_t *types = lp_model__in_host(m, m->types), *mask = lp_model__in_host(m, m->mask);
    int32_t *pos = lp_model__in_host(m, m->pos);
    int64_t *last = lp_model__in_host(m, ls->last);
    for (int64_t i = 0; m->has_types && i < B * T; i++) // all-zero type ids (a single sentence) change nothing
        if (types[i] != 0)
            return lp_err(LP_STATUS_INVALID_ARG, "model forward: %s takes no token type ids (sentence pairs)",
                          m->dir);
    // positions count real tokens only: left padding starts each row at 0, as transformers'
    // generate (and any forward given position_ids = cumsum(mask) - 1) does; right padding
    // gives 0..T-1 on the real tokens, as a forward without position_ids does; a packed row
    // (sample ids in the mask) restarts at 0 with each sample, as if each ran alone
    for (int64_t b = 0; b < B; b++) {
        int32_t p = 0, sample = 0; // real tokens so far (of this sample)
        int64_t at = b * T;
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = b * T + t;
            if (mask[i]) {
                if (mask[i] != sample)
                    p = 0, sample = mask[i];
                pos[i] = p++;
                at = i;
            } else { // a padding position: attended by nothing, its value is never used
                pos[i] = p > 0 ? p - 1 : 0;
            }
        }
        last[b] = at;
    }
    lp_status st;
    if (m->dev &&
        (st = lp_kernels_upload(m->pos, pos, (size_t)((char *)(ls->last + B) - (char *)m->pos))) != LP_OK)
        return lp_err_wrap(st, "model forward: uploading the positions");
    const float *inv_freq;
    if ((st = inv_freq_of(m, &inv_freq)) != LP_OK || (st = lookup(m, m->ids, B, T)) != LP_OK)
        return st;
    lp_rope_cache(ls->cos, ls->sin, m->pos, inv_freq, ls->attn_factor, B * T, ls->D);
    *x = ls->emb;
    return LP_OK;
}

static const float *llama_layer_forward(lp_model *m, int64_t l, int64_t slot, const lp_nn_ctx *ctx,
                                        const float *x, int64_t B, int64_t T)
{
    llama_state *ls = st_of(m);
    lp_nn_decoder_layer_forward(&ls->layers[l], ctx, &ls->lact[slot], x, m->mask, B, T);
    return ls->lact[slot].out;
}

static void llama_layer_backward(lp_model *m, int64_t l, int64_t slot, const lp_nn_ctx *ctx, float *dx,
                                 const float *dout, const float *x, float *scratch, int64_t B, int64_t T)
{
    llama_state *ls = st_of(m);
    lp_nn_decoder_layer_backward(&ls->layers[l], ctx, &ls->lact[slot], dx, dout, x, m->mask, scratch, B, T);
}

static bool llama_embed_trainable(const lp_model *m)
{
    return st_of(m)->dwte != NULL;
}

static void llama_embed_backward(lp_model *m, const float *dout, float *scratch, int64_t B, int64_t T)
{
    llama_state *ls = st_of(m);
    const int64_t C = ls->C;
    lp_model__range_push(ls->emb_bwd);
    // nn.Embedding(padding_idx): the lookup adds nothing to the padding row's gradient; a tied
    // lm_head's contribution to it stays, so the row is kept rather than zeroed
    const bool pad = ls->pad_id >= 0;
    if (pad) // (memcpy on the CPU)
        lp_kernels_copy(scratch, ls->dwte + (int64_t)ls->pad_id * C, (size_t)C * sizeof(float));
    lp_embedding_backward(ls->dwte, NULL, NULL, dout, m->ids, NULL, B, T, C, 0);
    if (pad)
        lp_kernels_copy(ls->dwte + (int64_t)ls->pad_id * C, scratch, (size_t)C * sizeof(float));
    lp_model__range_pop(ls->emb_bwd);
}

static void sync_tied(llama_state *ls)
{
    if (ls->tied) { // the block may have been re-laid out since the last pass
        ls->head.w = ls->wte;
        ls->head.dw = ls->dwte;
    }
}

static void llama_head_forward(lp_model *m, const lp_nn_ctx *ctx, const float *hidden, int64_t B, int64_t T)
{
    (void)ctx;
    llama_state *ls = st_of(m);
    const int64_t N = B * T;
    sync_tied(ls);
    lp_model__range_push(ls->head_fwd);
    lp_nn_rmsnorm_forward(&ls->norm, ls->hn, ls->rstd, hidden, N);
    if (m->task == LP_MODEL_TASK_CAUSAL_LM) { // the Linear and the loss: lm_loss.c, in chunks
        m->lm_in = ls->hn;
    } else { // the last real token of each row, as transformers' *ForSequenceClassification
        lp_rows_gather(ls->pooled, ls->hn, ls->last, B, ls->C);
        lp_nn_linear_forward(&ls->head, m->logits, ls->pooled, B);
    }
    lp_model__range_pop(ls->head_fwd);
}

static void llama_head_backward(lp_model *m, float *dhidden, const float *dlogits, float *scratch, int64_t B,
                                int64_t T)
{
    llama_state *ls = st_of(m);
    const int64_t N = B * T, C = ls->C;
    float *dhn = scratch;
    sync_tied(ls);
    lp_model__range_push(ls->head_bwd);
    if (m->task == LP_MODEL_TASK_CAUSAL_LM) { // dhn is in scratch already (lm_loss.c)
        (void)dlogits;
    } else {
        float *dpooled = scratch + up16(N * C);
        lp_nn_linear_backward(&ls->head, dpooled, dlogits, ls->pooled, B);
        lp_kernels_memset(dhn, 0, (size_t)(N * C) * sizeof(float));
        lp_rows_scatter_add(dhn, dpooled, ls->last, B, C);
    }
    lp_nn_rmsnorm_backward(&ls->norm, dhidden, dhn, lp_model_hidden(m, (int32_t)m->L), ls->rstd, N);
    lp_model__range_pop(ls->head_bwd);
}

static double llama_forward_flops(const lp_model *m, int64_t B, int64_t T)
{
    const llama_state *ls = st_of(m);
    double w = 0;
    for (size_t i = 0; i < m->n_lins; i++)
        w += (double)m->lins[i].lin->in * (double)m->lins[i].lin->out;
    const double N = (double)B * (double)T;
    // causal attention: q.k and p.v over the visible half of the T x T scores
    double f = 2.0 * N * w + (double)m->L * 2.0 * (double)B * (double)T * (double)T * (double)(ls->H * ls->D);
    if (m->has_head)
        f += 2.0 * (double)rows_of(m, B, T) * (double)ls->C * (double)m->n_classes;
    return f;
}

/* ---- KV-cache generation ---------------------------------------------------------------- */

static void llama_kv_store(lp_model *m, int64_t l, int64_t slot, lp_kv_cache *kv, int64_t B, int64_t T)
{
    (void)B;
    llama_state *ls = st_of(m);
    const lp_kv_geom g = lp_kv__geom(kv, ls->H);
    lp_kv_write(kv->k[l], kv->v[l], ls->lact[slot].attn.k, ls->lact[slot].attn.v, &g, 0, T);
}

static void llama_last_logits(lp_model *m, float *logits, int64_t B, int64_t T)
{
    (void)T;
    llama_state *ls = st_of(m);
    sync_tied(ls);
    lp_model__range_push(ls->head_fwd);
    // RMSNorm is per row: gathering first norms B rows instead of B*T
    lp_rows_gather(ls->pooled, lp_model_hidden(m, (int32_t)m->L), ls->last, B, ls->C);
    lp_nn_rmsnorm_forward(&ls->norm, ls->hn, ls->rstd, ls->pooled, B);
    lp_nn_linear_forward(&ls->head, logits, ls->hn, B);
    lp_model__range_pop(ls->head_fwd);
}

static lp_status llama_decode_step(lp_model *m, lp_kv_cache *kv, const int32_t *ids, float *logits)
{
    llama_state *ls = st_of(m);
    const int64_t B = kv->B, C = ls->C;
    TRY(lp_model__ensure(m, B, 1, true, false));
    llama_bind(m, B, 1, true);
    TRY(lp_model__peft_bind(m, B, 1));
    m->fwd_ok = m->loss_ok = false; // the hidden states of the last forward are gone
    m->pass_status = LP_OK;
    lp_model__bf16_refresh(m);
    m->pass_ctx = (lp_nn_ctx){.training = false, .exec = m->exec, .rng = NULL, .status = &m->pass_status};
    lp_status st = lookup(m, ids, B, 1);
    if (st != LP_OK)
        return st;
    lp_rope_cache(ls->cos, ls->sin, kv->pos, ls->inv_freq, ls->attn_factor, B, ls->D);
    const lp_kv_geom g = lp_kv__geom(kv, ls->H);
    lp_nn_decoder_layer_act *a = &ls->lact[0];
    for (int64_t l = 0; l < m->L; l++) {
        lp_nn_decoder_layer_decode(&ls->layers[l], a, ls->emb, kv->k[l], kv->v[l], kv->mask, &g);
        memcpy(ls->emb, a->out, (size_t)(B * C) * sizeof(float)); // the next layer's input
    }
    sync_tied(ls);
    lp_model__range_push(ls->head_fwd);
    lp_nn_rmsnorm_forward(&ls->norm, ls->hn, ls->rstd, ls->emb, B);
    lp_nn_linear_forward(&ls->head, logits, ls->hn, B);
    lp_model__range_pop(ls->head_fwd);
    return m->pass_status == LP_OK ? LP_OK : lp_err_wrap(m->pass_status, "model decode");
}

const lp_family lp_family_llama = {
    .name = "llama",
    .build = llama_build,
    .free = llama_free,
    .plan = llama_plan,
    .bind = llama_bind,
    .embed_forward = llama_embed_forward,
    .layer_forward = llama_layer_forward,
    .layer_backward = llama_layer_backward,
    .embed_trainable = llama_embed_trainable,
    .embed_backward = llama_embed_backward,
    .head_forward = llama_head_forward,
    .head_backward = llama_head_backward,
    .forward_flops = llama_forward_flops,
    .kv_store = llama_kv_store,
    .last_logits = llama_last_logits,
    .decode_step = llama_decode_step,
};
