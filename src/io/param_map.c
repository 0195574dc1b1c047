/* Tensor names -> engine parameters, per family. Lists every parameter the configured
 * model needs with its expected shape, binds each to a checkpoint tensor (any of the
 * usual prefixes, LayerNorm.gamma/beta accepted), and reports what is missing, wrong
 * or left over. Missing head parameters are allowed: the engine initializes them. */
#include "io_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const role_names[LP_PARAM_ROLE__COUNT] = {
    "word_embeddings", "position_embeddings", "token_type_embeddings", "embeddings_norm.weight",
    "embeddings_norm.bias", "q.weight", "q.bias", "k.weight", "k.bias", "v.weight", "v.bias", "o.weight",
    "o.bias", "attn_norm.weight", "attn_norm.bias", "ffn_gate.weight", "ffn_gate.bias", "ffn_in.weight", "ffn_in.bias",
    "ffn_out.weight", "ffn_out.bias", "ffn_norm.weight", "ffn_norm.bias", "final_norm.weight",
    "pooler.weight", "pooler.bias", "pre_classifier.weight", "pre_classifier.bias", "classifier.weight",
    "classifier.bias", "lm_head.weight",
};

const char *lp_param_role_name(lp_param_role r)
{
    return (unsigned)r < LP_PARAM_ROLE__COUNT ? role_names[r] : "?";
}

void lp_param_map_free(lp_param_map *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_unexpected; i++)
        free(m->unexpected[i]);
    free(m->unexpected);
    free(m->params);
    memset(m, 0, sizeof *m);
}

typedef struct {
    lp_param_map *m;
    size_t cap;
    const char *prefix; /* base prefix for stack names; head names are top level */
    bool oom;
} builder;

static lp_param_binding *add(builder *b, lp_param_role role, lp_param_group g, int32_t layer, int64_t d0,
                             int64_t d1, bool top_level, const char *fmt, ...) LP_PRINTF(8, 9);
static lp_param_binding *add(builder *b, lp_param_role role, lp_param_group g, int32_t layer, int64_t d0,
                             int64_t d1, bool top_level, const char *fmt, ...)
{
    if (b->oom)
        return NULL;
    if (b->m->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        lp_param_binding *p = lp_realloc(b->m->params, cap * sizeof *p);
        if (!p) {
            b->oom = true;
            return NULL;
        }
        b->m->params = p;
        b->cap = cap;
    }
    lp_param_binding *p = &b->m->params[b->m->n++];
    memset(p, 0, sizeof *p);
    p->role = role;
    p->group = g;
    p->layer = layer;
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->numel = (uint64_t)d0 * (uint64_t)(d1 ? d1 : 1);
    p->is_linear_weight = d1 && role != LP_PARAM_ROLE_WORD_EMB && role != LP_PARAM_ROLE_POS_EMB &&
                          role != LP_PARAM_ROLE_TYPE_EMB && role != LP_PARAM_ROLE_LM_HEAD_W;
    size_t k = (size_t)snprintf(p->name, sizeof p->name, "%s", top_level ? "" : b->prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->name + k, sizeof p->name - k, fmt, ap);
    va_end(ap);
    return p;
}

/* Weight + optional bias of a Linear(in -> out). */
static void add_linear(builder *b, lp_param_role w, lp_param_group g, int32_t layer, int64_t out, int64_t in,
                       bool bias, bool top, const char *base)
{
    add(b, w, g, layer, out, in, top, "%s.weight", base);
    if (bias)
        add(b, (lp_param_role)(w + 1), g, layer, out, 0, top, "%s.bias", base);
}

static void add_norm(builder *b, lp_param_role w, lp_param_group g, int32_t layer, int64_t h, bool bias,
                     const char *base)
{
    add(b, w, g, layer, h, 0, false, "%s.weight", base);
    if (bias)
        add(b, (lp_param_role)(w + 1), g, layer, h, 0, false, "%s.bias", base);
}

static void build_bert(builder *b, const lp_model_config *c, lp_model_task task)
{
    const int64_t H = c->hidden_size, I = c->intermediate_size, C = c->num_labels;
    const lp_param_group E = LP_PARAM_GROUP_EMBEDDINGS, L = LP_PARAM_GROUP_LAYER, HD = LP_PARAM_GROUP_HEAD;
    char n[96];
    add(b, LP_PARAM_ROLE_WORD_EMB, E, -1, c->vocab_size, H, false, "embeddings.word_embeddings.weight");
    add(b, LP_PARAM_ROLE_POS_EMB, E, -1, c->max_position_embeddings, H, false, "embeddings.position_embeddings.weight");
    if (c->type_vocab_size > 0)
        add(b, LP_PARAM_ROLE_TYPE_EMB, E, -1, c->type_vocab_size, H, false, "embeddings.token_type_embeddings.weight");
    add_norm(b, LP_PARAM_ROLE_EMB_NORM_W, E, -1, H, true, "embeddings.LayerNorm");
    for (int32_t i = 0; i < (int32_t)c->num_layers; i++) {
        if (c->distilbert) {
#define D(role, out, in, sub)                                                                                 \
    snprintf(n, sizeof n, "transformer.layer.%d.%s", i, sub);                                                   \
    add_linear(b, role, L, i, out, in, true, false, n)
            D(LP_PARAM_ROLE_Q_W, H, H, "attention.q_lin");
            D(LP_PARAM_ROLE_K_W, H, H, "attention.k_lin");
            D(LP_PARAM_ROLE_V_W, H, H, "attention.v_lin");
            D(LP_PARAM_ROLE_O_W, H, H, "attention.out_lin");
            snprintf(n, sizeof n, "transformer.layer.%d.sa_layer_norm", i);
            add_norm(b, LP_PARAM_ROLE_ATTN_NORM_W, L, i, H, true, n);
            D(LP_PARAM_ROLE_FFN_IN_W, I, H, "ffn.lin1");
            D(LP_PARAM_ROLE_FFN_OUT_W, H, I, "ffn.lin2");
            snprintf(n, sizeof n, "transformer.layer.%d.output_layer_norm", i);
            add_norm(b, LP_PARAM_ROLE_FFN_NORM_W, L, i, H, true, n);
#undef D
        } else {
#define B(role, out, in, sub)                                                                                 \
    snprintf(n, sizeof n, "encoder.layer.%d.%s", i, sub);                                                       \
    add_linear(b, role, L, i, out, in, true, false, n)
            B(LP_PARAM_ROLE_Q_W, H, H, "attention.self.query");
            B(LP_PARAM_ROLE_K_W, H, H, "attention.self.key");
            B(LP_PARAM_ROLE_V_W, H, H, "attention.self.value");
            B(LP_PARAM_ROLE_O_W, H, H, "attention.output.dense");
            snprintf(n, sizeof n, "encoder.layer.%d.attention.output.LayerNorm", i);
            add_norm(b, LP_PARAM_ROLE_ATTN_NORM_W, L, i, H, true, n);
            B(LP_PARAM_ROLE_FFN_IN_W, I, H, "intermediate.dense");
            B(LP_PARAM_ROLE_FFN_OUT_W, H, I, "output.dense");
            snprintf(n, sizeof n, "encoder.layer.%d.output.LayerNorm", i);
            add_norm(b, LP_PARAM_ROLE_FFN_NORM_W, L, i, H, true, n);
#undef B
        }
    }
    if (c->distilbert) {
        if (task == LP_MODEL_TASK_SEQ_CLS) {
            add_linear(b, LP_PARAM_ROLE_PRE_CLS_W, HD, -1, H, H, true, true, "pre_classifier");
            add_linear(b, LP_PARAM_ROLE_CLS_W, HD, -1, C, H, true, true, "classifier");
        }
    } else {
        /* BertModel carries the pooler (add_pooling_layer=True); the classifier reads it. */
        add_linear(b, LP_PARAM_ROLE_POOLER_W, HD, -1, H, H, true, false, "pooler.dense");
        if (task == LP_MODEL_TASK_SEQ_CLS)
            add_linear(b, LP_PARAM_ROLE_CLS_W, HD, -1, C, H, true, true, "classifier");
    }
}

static void build_llama(builder *b, const lp_model_config *c, lp_model_task task)
{
    const int64_t H = c->hidden_size, I = c->intermediate_size, C = c->num_labels;
    const int64_t QD = c->num_heads * c->head_dim, KVD = c->num_kv_heads * c->head_dim;
    const lp_param_group L = LP_PARAM_GROUP_LAYER;
    char n[96];
    add(b, LP_PARAM_ROLE_WORD_EMB, LP_PARAM_GROUP_EMBEDDINGS, -1, c->vocab_size, H, false, "embed_tokens.weight");
    for (int32_t i = 0; i < (int32_t)c->num_layers; i++) {
        snprintf(n, sizeof n, "layers.%d.input_layernorm", i);
        add_norm(b, LP_PARAM_ROLE_ATTN_NORM_W, L, i, H, false, n);
#define A(role, out, in, sub, bias)                                                                           \
    snprintf(n, sizeof n, "layers.%d.%s", i, sub);                                                              \
    add_linear(b, role, L, i, out, in, bias, false, n)
        A(LP_PARAM_ROLE_Q_W, QD, H, "self_attn.q_proj", c->attention_qkv_bias);
        A(LP_PARAM_ROLE_K_W, KVD, H, "self_attn.k_proj", c->attention_qkv_bias);
        A(LP_PARAM_ROLE_V_W, KVD, H, "self_attn.v_proj", c->attention_qkv_bias);
        A(LP_PARAM_ROLE_O_W, H, QD, "self_attn.o_proj", c->attention_out_bias);
        snprintf(n, sizeof n, "layers.%d.post_attention_layernorm", i);
        add_norm(b, LP_PARAM_ROLE_FFN_NORM_W, L, i, H, false, n);
        snprintf(n, sizeof n, "layers.%d.mlp.gate_proj", i);
        add_linear(b, LP_PARAM_ROLE_FFN_GATE_W, L, i, I, H, c->mlp_bias, false, n);
        A(LP_PARAM_ROLE_FFN_IN_W, I, H, "mlp.up_proj", c->mlp_bias);
        A(LP_PARAM_ROLE_FFN_OUT_W, H, I, "mlp.down_proj", c->mlp_bias);
#undef A
    }
    add(b, LP_PARAM_ROLE_FINAL_NORM_W, LP_PARAM_GROUP_FINAL_NORM, -1, H, 0, false, "norm.weight");
    if (task == LP_MODEL_TASK_CAUSAL_LM && !c->tie_word_embeddings)
        add(b, LP_PARAM_ROLE_LM_HEAD_W, LP_PARAM_GROUP_HEAD, -1, c->vocab_size, H, true, "lm_head.weight");
    if (task == LP_MODEL_TASK_SEQ_CLS)
        add(b, LP_PARAM_ROLE_CLS_W, LP_PARAM_GROUP_HEAD, -1, C, H, true, "score.weight");
}

static lp_model_task resolve_task(lp_hf_arch a)
{
    switch (a) {
    case LP_HF_ARCH_BERT_SEQ_CLS:
    case LP_HF_ARCH_DISTILBERT_SEQ_CLS:
    case LP_HF_ARCH_LLAMA_SEQ_CLS:
    case LP_HF_ARCH_QWEN2_SEQ_CLS: return LP_MODEL_TASK_SEQ_CLS;
    case LP_HF_ARCH_LLAMA_CAUSAL_LM:
    case LP_HF_ARCH_QWEN2_CAUSAL_LM:
    case LP_HF_ARCH_MISTRAL_CAUSAL_LM: return LP_MODEL_TASK_CAUSAL_LM;
    case LP_HF_ARCH_MISTRAL_SEQ_CLS: return LP_MODEL_TASK_SEQ_CLS;
    default: return LP_MODEL_TASK_BASE;
    }
}

/* The tensor for a canonical name: as is, or with LayerNorm's old gamma/beta names. */
static const lp_st_tensor *lookup(const lp_st_set *w, char *name, size_t cap)
{
    const lp_st_tensor *t = lp_st_set_find(w, name);
    if (t)
        return t;
    size_t n = strlen(name);
    const char *from[] = {"LayerNorm.weight", "LayerNorm.bias"}, *to[] = {"LayerNorm.gamma", "LayerNorm.beta"};
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(from[i]);
        if (n >= k && !strcmp(name + n - k, from[i]) && n - k + strlen(to[i]) < cap) {
            char alt[128];
            snprintf(alt, sizeof alt, "%.*s%s", (int)(n - k), name, to[i]);
            if ((t = lp_st_set_find(w, alt))) {
                snprintf(name, cap, "%s", alt);
                return t;
            }
        }
    }
    return NULL;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void fmt_shape(char *buf, size_t cap, int nd, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < nd && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

/* Bound tensors by name; NULL (a missing head parameter) sorts first. */
static int cmp_bound(const void *a, const void *b)
{
    const lp_st_tensor *x = *(const lp_st_tensor *const *)a, *y = *(const lp_st_tensor *const *)b;
    if (!x || !y)
        return (x != NULL) - (y != NULL);
    return strcmp(x->name, y->name);
}

lp_status lp_param_map_build(const lp_model_config *cfg, const lp_st_set *w, lp_model_task task, lp_param_map *out)
{
    memset(out, 0, sizeof *out);
    const char *src = w && lp_st_set_count(w) ? lp_st_set_at(w, 0)->file : w ? "weights" : "config";
    if (task == LP_MODEL_TASK_AUTO)
        task = resolve_task(cfg->arch);
    if (task == LP_MODEL_TASK_CAUSAL_LM && cfg->family != LP_MODEL_FAMILY_LLAMA)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: a causal LM head needs a llama-family model, not %s", src,
                      lp_hf_arch_name(cfg->arch));
    out->task = task;

    /* The base prefix is the one under which the word embeddings are found. */
    static const char *const bert_pfx[] = {"", "bert.", NULL}, *const distil_pfx[] = {"", "distilbert.", NULL},
                             *const llama_pfx[] = {"model.", "", NULL};
    const char *const *pfx = cfg->family == LP_MODEL_FAMILY_LLAMA ? llama_pfx : cfg->distilbert ? distil_pfx : bert_pfx;
    const char *emb = cfg->family == LP_MODEL_FAMILY_LLAMA ? "embed_tokens.weight" : "embeddings.word_embeddings.weight";
    /* config only: the prefix save_pretrained writes (the task's model wraps the base) */
    const char *prefix = w                                      ? NULL
                         : cfg->family == LP_MODEL_FAMILY_LLAMA ? "model."
                         : task == LP_MODEL_TASK_BASE           ? ""
                                                                : pfx[1];
    for (size_t i = 0; w && pfx[i] && !prefix; i++) {
        char n[128];
        snprintf(n, sizeof n, "%s%s", pfx[i], emb);
        if (lp_st_set_find(w, n))
            prefix = pfx[i];
    }
    if (!prefix)
        return lp_err(LP_STATUS_NOT_FOUND, "%s: no word embeddings tensor (looked for '%s%s' and '%s%s'): not a %s checkpoint?",
                      src, pfx[0], emb, pfx[1], emb, lp_hf_arch_name(cfg->arch));
    snprintf(out->prefix, sizeof out->prefix, "%s", prefix);

    builder b = {out, 0, prefix, false};
    if (cfg->family == LP_MODEL_FAMILY_LLAMA)
        build_llama(&b, cfg, task);
    else
        build_bert(&b, cfg, task);
    if (b.oom) {
        lp_param_map_free(out);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", src);
    }
    if (!w) /* nothing to bind: every parameter is initialized */
        return LP_OK;

    lp_status st = LP_OK;
    char missing[512] = "";
    size_t n_missing = 0, mk = 0;
    /* used[] marks which set tensors were bound, to list the unexpected ones */
    size_t nt = lp_st_set_count(w);
    const lp_st_tensor **bound = lp_calloc(out->n + 1, sizeof *bound);
    if (!bound) {
        lp_param_map_free(out);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", src);
    }
    for (size_t i = 0; i < out->n; i++) {
        lp_param_binding *p = &out->params[i];
        const lp_st_tensor *t = lookup(w, p->name, sizeof p->name);
        if (!t) {
            /* a classification head (and BERT's pooler) starts fresh; an LM head cannot */
            if (p->group == LP_PARAM_GROUP_HEAD && p->role != LP_PARAM_ROLE_LM_HEAD_W) {
                out->n_missing_head++;
                continue;
            }
            if (n_missing++ < 4 && mk < sizeof missing)
                mk += (size_t)snprintf(missing + mk, sizeof missing - mk, "%s'%s'", mk ? ", " : "", p->name);
            continue;
        }
        bool shape_ok = t->ndim == p->ndim && t->shape[0] == p->shape[0] && (p->ndim == 1 || t->shape[1] == p->shape[1]);
        if (!shape_ok && st == LP_OK) {
            char want[64], got[160];
            fmt_shape(want, sizeof want, p->ndim, p->shape);
            fmt_shape(got, sizeof got, t->ndim, t->shape);
            st = lp_err(LP_STATUS_FORMAT,
                        "%s: tensor '%s' has shape %s but the config (%s: hidden %lld, layers %lld, heads %lld, "
                        "intermediate %lld, vocab %lld, labels %lld) implies %s",
                        t->file, t->name, got, lp_hf_arch_name(cfg->arch), (long long)cfg->hidden_size,
                        (long long)cfg->num_layers, (long long)cfg->num_heads, (long long)cfg->intermediate_size,
                        (long long)cfg->vocab_size, (long long)cfg->num_labels, want);
        }
        if (st == LP_OK && t->dtype != LP_ST_DTYPE_F32 && t->dtype != LP_ST_DTYPE_F16 && t->dtype != LP_ST_DTYPE_BF16 &&
            t->dtype != LP_ST_DTYPE_F64)
            st = lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' has dtype %s; a %s needs floating-point weights", t->file,
                        t->name, lp_st_dtype_name(t->dtype), lp_param_role_name(p->role));
        p->tensor = t;
        bound[i] = t;
    }
    if (st == LP_OK && n_missing)
        st = lp_err(LP_STATUS_NOT_FOUND, "%s: %zu tensor%s the %s config needs %s missing: %s%s", src, n_missing,
                    n_missing > 1 ? "s" : "", lp_hf_arch_name(cfg->arch), n_missing > 1 ? "are" : "is", missing,
                    n_missing > 4 ? ", ..." : "");
    if (st != LP_OK) {
        free(bound);
        lp_param_map_free(out);
        return st;
    }

    /* Leftovers: known buffers are ignored, the rest reported as unexpected. */
    qsort(bound, out->n, sizeof *bound, cmp_bound);
    out->unexpected = lp_calloc(nt + 1, sizeof *out->unexpected);
    if (!out->unexpected) {
        free(bound);
        lp_param_map_free(out);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", src);
    }
    for (size_t i = 0; i < nt; i++) {
        const lp_st_tensor *t = lp_st_set_at(w, i);
        const lp_st_tensor *key = t;
        bool used = false;
        /* NULLs (missing head params) form a prefix of bound: skip them */
        for (size_t lo = 0, hi = out->n; lo < hi;) {
            size_t mid = lo + (hi - lo) / 2;
            if (!bound[mid]) {
                lo = mid + 1;
                continue;
            }
            int c = strcmp(key->name, bound[mid]->name);
            if (c == 0) {
                used = true;
                break;
            }
            if (c < 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (used)
            continue;
        if (ends_with(t->name, "embeddings.position_ids") || ends_with(t->name, "rotary_emb.inv_freq") ||
            (cfg->tie_word_embeddings && !strcmp(t->name, "lm_head.weight"))) {
            out->n_ignored++;
            continue;
        }
        if (!(out->unexpected[out->n_unexpected] = lp_strdup(t->name))) {
            free(bound);
            lp_param_map_free(out);
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", src);
        }
        out->n_unexpected++;
    }
    free(bound);
    return LP_OK;
}

const lp_param_binding *lp_param_map_find(const lp_param_map *m, lp_param_role role, int32_t layer)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->params[i].role == role && m->params[i].layer == layer)
            return &m->params[i];
    return NULL;
}
