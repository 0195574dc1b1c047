/* Hugging Face config.json -> lp_model_config for the two families loupe builds:
 * bert (BERT, DistilBERT with its own key names, MiniLM) and llama (Llama, Qwen2,
 * Mistral). Size keys are required; the rest default as transformers' config classes do. */
#include "io_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    lp_hf_arch arch;
} arch_table[] = {
    {"BertModel", LP_HF_ARCH_BERT_MODEL},
    {"BertForSequenceClassification", LP_HF_ARCH_BERT_SEQ_CLS},
    {"BertForMaskedLM", LP_HF_ARCH_BERT_MASKED_LM},
    {"DistilBertModel", LP_HF_ARCH_DISTILBERT_MODEL},
    {"DistilBertForSequenceClassification", LP_HF_ARCH_DISTILBERT_SEQ_CLS},
    {"DistilBertForMaskedLM", LP_HF_ARCH_DISTILBERT_MASKED_LM},
    {"LlamaForCausalLM", LP_HF_ARCH_LLAMA_CAUSAL_LM},
    {"LlamaForSequenceClassification", LP_HF_ARCH_LLAMA_SEQ_CLS},
    {"Qwen2ForCausalLM", LP_HF_ARCH_QWEN2_CAUSAL_LM},
    {"Qwen2ForSequenceClassification", LP_HF_ARCH_QWEN2_SEQ_CLS},
    {"MistralForCausalLM", LP_HF_ARCH_MISTRAL_CAUSAL_LM},
    {"MistralForSequenceClassification", LP_HF_ARCH_MISTRAL_SEQ_CLS},
};
#define N_ARCH (sizeof arch_table / sizeof arch_table[0])

/* config.json without "architectures": the class transformers' AutoModel would pick. */
static const struct {
    const char *model_type;
    lp_hf_arch arch;
} model_type_table[] = {
    {"bert", LP_HF_ARCH_BERT_MODEL},           {"distilbert", LP_HF_ARCH_DISTILBERT_MODEL},
    {"llama", LP_HF_ARCH_LLAMA_CAUSAL_LM},     {"qwen2", LP_HF_ARCH_QWEN2_CAUSAL_LM},
    {"mistral", LP_HF_ARCH_MISTRAL_CAUSAL_LM},
};

const char *lp_hf_arch_name(lp_hf_arch a)
{
    for (size_t i = 0; i < N_ARCH; i++)
        if (arch_table[i].arch == a)
            return arch_table[i].name;
    return "?";
}

const char *lp_activation_name(lp_activation a)
{
    switch (a) {
    case LP_ACTIVATION_GELU: return "gelu";
    case LP_ACTIVATION_GELU_TANH: return "gelu_tanh";
    case LP_ACTIVATION_SILU: return "silu";
    case LP_ACTIVATION_RELU: return "relu";
    }
    return "?";
}

void lp_model_config_free(lp_model_config *c)
{
    if (!c)
        return;
    if (c->id2label)
        for (int64_t i = 0; i < c->num_labels; i++)
            free(c->id2label[i]);
    free(c->id2label);
    c->id2label = NULL;
    c->num_labels = 0;
}

typedef struct {
    const char *label;
    const cJSON *root;
} ctx;

/* The first present key of a NULL-terminated alias list, or NULL. */
static const cJSON *get_any(const ctx *c, const char *const *keys, const char **which)
{
    for (; *keys; keys++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, *keys);
        if (v && !cJSON_IsNull(v)) {
            *which = *keys;
            return v;
        }
    }
    return NULL;
}

/* Integer key (with aliases) in [lo, hi]; required keys must be present, others fall
 * back to dflt. */
static lp_status get_int(const ctx *c, const char *const *keys, bool required, int64_t dflt, int64_t lo,
                         int64_t hi, int64_t *out)
{
    const char *k = keys[0];
    const cJSON *v = get_any(c, keys, &k);
    if (!v) {
        if (required)
            return lp_err(LP_STATUS_FORMAT, "%s: missing required key \"%s\"", c->label, keys[0]);
        *out = dflt;
        return LP_OK;
    }
    if (!cJSON_IsNumber(v) || floor(v->valuedouble) != v->valuedouble || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return lp_err(LP_STATUS_FORMAT, "%s: \"%s\" must be an integer in [%lld, %lld]", c->label, k, (long long)lo,
                      (long long)hi);
    *out = (int64_t)v->valuedouble;
    return LP_OK;
}

static lp_status get_num(const ctx *c, const char *const *keys, double dflt, double lo, double hi, double *out)
{
    const char *k = keys[0];
    const cJSON *v = get_any(c, keys, &k);
    if (!v) {
        *out = dflt;
        return LP_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return lp_err(LP_STATUS_FORMAT, "%s: \"%s\" must be a number in [%g, %g]", c->label, k, lo, hi);
    *out = v->valuedouble;
    return LP_OK;
}

static lp_status get_bool(const ctx *c, const char *key, bool dflt, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return LP_OK;
    }
    if (!cJSON_IsBool(v))
        return lp_err(LP_STATUS_FORMAT, "%s: \"%s\" must be true or false", c->label, key);
    *out = cJSON_IsTrue(v);
    return LP_OK;
}

/* A token id that may be null (-1), an integer, or a list whose first entry counts. */
static lp_status get_token(const ctx *c, const char *key, int64_t dflt, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    *out = dflt;
    if (!v)
        return LP_OK;
    if (cJSON_IsNull(v)) {
        *out = -1;
        return LP_OK;
    }
    if (cJSON_IsArray(v))
        v = v->child;
    if (!v)
        return LP_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 2147483647.0 ||
        floor(v->valuedouble) != v->valuedouble)
        return lp_err(LP_STATUS_FORMAT, "%s: \"%s\" must be a non-negative integer token id", c->label, key);
    *out = (int64_t)v->valuedouble;
    return LP_OK;
}

static lp_status parse_activation(const ctx *c, const char *const *keys, const char *dflt, lp_model_config *o)
{
    const char *k = keys[0];
    const cJSON *v = get_any(c, keys, &k);
    const char *s = dflt;
    if (v) {
        if (!cJSON_IsString(v))
            return lp_err(LP_STATUS_FORMAT, "%s: \"%s\" must be a string", c->label, k);
        s = v->valuestring;
    }
    static const struct {
        const char *name;
        lp_activation a;
    } acts[] = {{"gelu", LP_ACTIVATION_GELU},          {"gelu_new", LP_ACTIVATION_GELU_TANH},
                {"gelu_pytorch_tanh", LP_ACTIVATION_GELU_TANH}, {"gelu_fast", LP_ACTIVATION_GELU_TANH},
                {"silu", LP_ACTIVATION_SILU},          {"swish", LP_ACTIVATION_SILU},
                {"relu", LP_ACTIVATION_RELU}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        if (!strcmp(s, acts[i].name)) {
            o->activation = acts[i].a;
            snprintf(o->activation_name, sizeof o->activation_name, "%s", s);
            return LP_OK;
        }
    }
    return lp_err(LP_STATUS_UNSUPPORTED,
                  "%s: activation \"%.40s\" is not supported (supported: gelu, gelu_new, gelu_pytorch_tanh, "
                  "gelu_fast, silu, swish, relu)",
                  c->label, s);
}

/* Classification heads beyond this many classes are not what loupe trains; the cap also
 * keeps a hostile config from costing a million label strings. */
#define LP_MAX_LABELS 65536

/* id2label / label2id / num_labels: class names indexed 0..n-1, consistent both ways. */
static lp_status parse_labels(const ctx *c, lp_model_config *o)
{
    const cJSON *id2 = cJSON_GetObjectItemCaseSensitive(c->root, "id2label");
    const cJSON *l2i = cJSON_GetObjectItemCaseSensitive(c->root, "label2id");
    int64_t n = 2;
    static const char *const nl_keys[] = {"num_labels", NULL};
    bool have_nl = cJSON_GetObjectItemCaseSensitive(c->root, "num_labels") != NULL;
    lp_status st = get_int(c, nl_keys, false, 2, 1, LP_MAX_LABELS, &n);
    if (st != LP_OK)
        return st;
    if (id2 && !cJSON_IsNull(id2)) {
        if (!cJSON_IsObject(id2))
            return lp_err(LP_STATUS_FORMAT, "%s: \"id2label\" must be an object {\"0\": \"name\", ...}", c->label);
        int64_t m = cJSON_GetArraySize(id2);
        if (have_nl && m != n)
            return lp_err(LP_STATUS_FORMAT, "%s: num_labels is %lld but id2label has %lld entries", c->label,
                          (long long)n, (long long)m);
        if (m < 1 || m > LP_MAX_LABELS)
            return lp_err(LP_STATUS_FORMAT, "%s: id2label has %lld entries (1 to %d supported)", c->label,
                          (long long)m, LP_MAX_LABELS);
        n = m;
    }
    o->id2label = lp_calloc((size_t)n, sizeof *o->id2label);
    if (!o->id2label)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->label);
    o->num_labels = n;
    if (id2 && cJSON_IsObject(id2)) {
        for (const cJSON *e = id2->child; e; e = e->next) {
            char *end = NULL;
            long long id = strtoll(e->string, &end, 10);
            if (!e->string[0] || *end || id < 0 || id >= n)
                return lp_err(LP_STATUS_FORMAT, "%s: id2label key \"%.40s\" is not a class id in [0, %lld)",
                              c->label, e->string, (long long)n);
            if (!cJSON_IsString(e))
                return lp_err(LP_STATUS_FORMAT, "%s: id2label[\"%s\"] is not a string", c->label, e->string);
            if (o->id2label[id])
                return lp_err(LP_STATUS_FORMAT, "%s: id2label has class %lld twice", c->label, id);
            if (!(o->id2label[id] = lp_strdup(e->valuestring)))
                return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->label);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            char b[32];
            snprintf(b, sizeof b, "LABEL_%lld", (long long)i);
            if (!(o->id2label[i] = lp_strdup(b)))
                return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", c->label);
        }
    }
    if (l2i && !cJSON_IsNull(l2i)) {
        if (!cJSON_IsObject(l2i))
            return lp_err(LP_STATUS_FORMAT, "%s: \"label2id\" must be an object", c->label);
        if (cJSON_GetArraySize(l2i) != n)
            return lp_err(LP_STATUS_FORMAT, "%s: label2id has %d entries but there are %lld labels", c->label,
                          cJSON_GetArraySize(l2i), (long long)n);
        for (const cJSON *e = l2i->child; e; e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (double)n ||
                floor(e->valuedouble) != e->valuedouble || strcmp(o->id2label[(int64_t)e->valuedouble], e->string))
                return lp_err(LP_STATUS_FORMAT, "%s: label2id[\"%.60s\"] disagrees with id2label", c->label,
                              e->string);
        }
    }
    return LP_OK;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define SIZE_MAX_KEY ((int64_t)1 << 30)

static lp_status parse_bert(const ctx *c, lp_model_config *o)
{
    lp_status st;
    o->family = LP_MODEL_FAMILY_BERT;
    if (o->distilbert) {
        if ((st = get_int(c, KEYS("vocab_size"), true, 0, 1, SIZE_MAX_KEY, &o->vocab_size)) ||
            (st = get_int(c, KEYS("dim", "hidden_size"), true, 0, 1, SIZE_MAX_KEY, &o->hidden_size)) ||
            (st = get_int(c, KEYS("n_layers", "num_hidden_layers"), true, 0, 1, 100000, &o->num_layers)) ||
            (st = get_int(c, KEYS("n_heads", "num_attention_heads"), true, 0, 1, 1 << 20, &o->num_heads)) ||
            (st = get_int(c, KEYS("hidden_dim"), true, 0, 1, SIZE_MAX_KEY, &o->intermediate_size)) ||
            (st = get_int(c, KEYS("max_position_embeddings"), false, 512, 1, SIZE_MAX_KEY,
                          &o->max_position_embeddings)) ||
            (st = parse_activation(c, KEYS("activation"), "gelu", o)) ||
            (st = get_num(c, KEYS("dropout"), 0.1, 0, 1, &o->hidden_dropout)) ||
            (st = get_num(c, KEYS("attention_dropout"), 0.1, 0, 1, &o->attention_dropout)) ||
            (st = get_num(c, KEYS("seq_classif_dropout"), 0.2, 0, 1, &o->classifier_dropout)) ||
            (st = get_bool(c, "sinusoidal_pos_embds", false, &o->sinusoidal_pos)))
            return st;
        o->type_vocab_size = 0;
        o->norm_eps = 1e-12; /* hard-coded in modeling_distilbert.py, not in the config */
    } else {
        if ((st = get_int(c, KEYS("vocab_size"), true, 0, 1, SIZE_MAX_KEY, &o->vocab_size)) ||
            (st = get_int(c, KEYS("hidden_size"), true, 0, 1, SIZE_MAX_KEY, &o->hidden_size)) ||
            (st = get_int(c, KEYS("num_hidden_layers"), true, 0, 1, 100000, &o->num_layers)) ||
            (st = get_int(c, KEYS("num_attention_heads"), true, 0, 1, 1 << 20, &o->num_heads)) ||
            (st = get_int(c, KEYS("intermediate_size"), true, 0, 1, SIZE_MAX_KEY, &o->intermediate_size)) ||
            (st = get_int(c, KEYS("max_position_embeddings"), false, 512, 1, SIZE_MAX_KEY,
                          &o->max_position_embeddings)) ||
            (st = get_int(c, KEYS("type_vocab_size"), false, 2, 0, SIZE_MAX_KEY, &o->type_vocab_size)) ||
            (st = get_num(c, KEYS("layer_norm_eps"), 1e-12, 0, 1, &o->norm_eps)) ||
            (st = parse_activation(c, KEYS("hidden_act"), "gelu", o)) ||
            (st = get_num(c, KEYS("hidden_dropout_prob"), 0.1, 0, 1, &o->hidden_dropout)) ||
            (st = get_num(c, KEYS("attention_probs_dropout_prob"), 0.1, 0, 1, &o->attention_dropout)) ||
            (st = get_num(c, KEYS("classifier_dropout"), o->hidden_dropout, 0, 1, &o->classifier_dropout)))
            return st;
        const cJSON *pet = cJSON_GetObjectItemCaseSensitive(c->root, "position_embedding_type");
        if (pet && !(cJSON_IsString(pet) && !strcmp(pet->valuestring, "absolute")))
            return lp_err(LP_STATUS_UNSUPPORTED, "%s: position_embedding_type must be \"absolute\"", c->label);
    }
    if (o->hidden_size % o->num_heads)
        return lp_err(LP_STATUS_FORMAT, "%s: hidden size %lld is not divisible by %lld attention heads", c->label,
                      (long long)o->hidden_size, (long long)o->num_heads);
    o->num_kv_heads = o->num_heads;
    o->head_dim = o->hidden_size / o->num_heads;
    o->attention_qkv_bias = o->attention_out_bias = o->mlp_bias = true;
    o->rope_theta = 0;
    o->tie_word_embeddings = false;
    if ((st = get_token(c, "pad_token_id", 0, &o->pad_token_id)) ||
        (st = get_token(c, "bos_token_id", -1, &o->bos_token_id)) ||
        (st = get_token(c, "eos_token_id", -1, &o->eos_token_id)))
        return st;
    return LP_OK;
}

static lp_status parse_llama(const ctx *c, lp_model_config *o)
{
    lp_status st;
    o->family = LP_MODEL_FAMILY_LLAMA;
    bool qwen2 = o->arch == LP_HF_ARCH_QWEN2_CAUSAL_LM || o->arch == LP_HF_ARCH_QWEN2_SEQ_CLS;
    bool mistral = o->arch == LP_HF_ARCH_MISTRAL_CAUSAL_LM || o->arch == LP_HF_ARCH_MISTRAL_SEQ_CLS;
    int64_t dflt_pos = qwen2 ? 32768 : mistral ? 4096 * 32 : 2048;
    if ((st = get_int(c, KEYS("vocab_size"), true, 0, 1, SIZE_MAX_KEY, &o->vocab_size)) ||
        (st = get_int(c, KEYS("hidden_size"), true, 0, 1, SIZE_MAX_KEY, &o->hidden_size)) ||
        (st = get_int(c, KEYS("intermediate_size"), true, 0, 1, SIZE_MAX_KEY, &o->intermediate_size)) ||
        (st = get_int(c, KEYS("num_hidden_layers"), true, 0, 1, 100000, &o->num_layers)) ||
        (st = get_int(c, KEYS("num_attention_heads"), true, 0, 1, 1 << 20, &o->num_heads)) ||
        (st = get_int(c, KEYS("num_key_value_heads"), false, o->num_heads, 1, 1 << 20, &o->num_kv_heads)) ||
        (st = get_int(c, KEYS("max_position_embeddings"), false, dflt_pos, 1, SIZE_MAX_KEY,
                      &o->max_position_embeddings)) ||
        (st = get_num(c, KEYS("rms_norm_eps"), 1e-6, 0, 1, &o->norm_eps)) ||
        (st = parse_activation(c, KEYS("hidden_act"), "silu", o)) ||
        (st = get_bool(c, "tie_word_embeddings", false, &o->tie_word_embeddings)) ||
        (st = get_num(c, KEYS("attention_dropout"), 0.0, 0, 1, &o->attention_dropout)))
        return st;
    bool has_head_dim = false;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(c->root, "head_dim");
    if (hd && !cJSON_IsNull(hd)) {
        has_head_dim = true;
        if ((st = get_int(c, KEYS("head_dim"), true, 0, 1, 1 << 16, &o->head_dim)))
            return st;
    } else {
        if (o->hidden_size % o->num_heads)
            return lp_err(LP_STATUS_FORMAT, "%s: hidden size %lld is not divisible by %lld attention heads",
                          c->label, (long long)o->hidden_size, (long long)o->num_heads);
        o->head_dim = o->hidden_size / o->num_heads;
    }
    (void)has_head_dim;
    if (o->num_heads % o->num_kv_heads)
        return lp_err(LP_STATUS_FORMAT, "%s: %lld attention heads are not a multiple of %lld key/value heads",
                      c->label, (long long)o->num_heads, (long long)o->num_kv_heads);
    if (o->head_dim * o->num_heads > SIZE_MAX_KEY)
        return lp_err(LP_STATUS_FORMAT, "%s: head_dim x heads is too large", c->label);
    /* RoPE: rope_theta (most configs), or rope_parameters {rope_theta, rope_type, ...} (newest
     * transformers); rope_scaling {rope_type | type, factor, ...} (Llama 3, long-context Qwen2.5). */
    o->rope_theta = 10000.0;
    if ((st = get_num(c, KEYS("rope_theta"), o->rope_theta, 1e-6, 1e12, &o->rope_theta)))
        return st;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c->root, "rope_parameters");
    if (!cJSON_IsObject(rs))
        rs = cJSON_GetObjectItemCaseSensitive(c->root, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        if (!cJSON_IsObject(rs))
            return lp_err(LP_STATUS_FORMAT, "%s: \"rope_scaling\" must be an object or null", c->label);
        ctx sub = {c->label, rs};
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!t)
            t = cJSON_GetObjectItemCaseSensitive(rs, "type");
        const char *type = cJSON_IsString(t) ? t->valuestring : "default";
        if (strcmp(type, "default") && strcmp(type, "linear") && strcmp(type, "llama3") && strcmp(type, "yarn"))
            return lp_err(LP_STATUS_UNSUPPORTED,
                          "%s: rope_scaling type \"%s\" is not supported (default, linear, llama3, yarn)", c->label,
                          type);
        snprintf(o->rope_type, sizeof o->rope_type, "%s", type);
        bool trunc = true;
        if ((st = get_num(&sub, KEYS("rope_theta"), o->rope_theta, 1e-6, 1e12, &o->rope_theta)) ||
            (st = get_num(&sub, KEYS("factor"), 0, 0, 1e6, &o->rope_factor)) ||
            (st = get_num(&sub, KEYS("low_freq_factor"), 0, 0, 1e6, &o->rope_low_freq_factor)) ||
            (st = get_num(&sub, KEYS("high_freq_factor"), 0, 0, 1e6, &o->rope_high_freq_factor)) ||
            (st = get_num(&sub, KEYS("beta_fast"), 0, 0, 1e6, &o->rope_beta_fast)) ||
            (st = get_num(&sub, KEYS("beta_slow"), 0, 0, 1e6, &o->rope_beta_slow)) ||
            (st = get_num(&sub, KEYS("mscale"), 0, 0, 1e6, &o->rope_mscale)) ||
            (st = get_num(&sub, KEYS("mscale_all_dim"), 0, 0, 1e6, &o->rope_mscale_all_dim)) ||
            (st = get_num(&sub, KEYS("attention_factor"), 0, 0, 1e6, &o->rope_attention_factor)) ||
            (st = get_int(&sub, KEYS("original_max_position_embeddings"), false, 0, 0, SIZE_MAX_KEY,
                          &o->rope_original_max_pos)) ||
            (st = get_bool(&sub, "truncate", true, &trunc)))
            return st;
        o->rope_no_truncate = !trunc;
    }
    /* Sliding window: Mistral's sliding_window; Qwen2's use_sliding_window (off in every released
     * Qwen2/2.5 config) applies it to some layers only, which loupe does not model yet. */
    o->sliding_window = 0;
    bool use_sw = mistral;
    if (!mistral && (st = get_bool(c, "use_sliding_window", false, &use_sw)))
        return st;
    if (use_sw && !mistral)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: \"use_sliding_window\": true (per-layer sliding windows) is not "
                                             "supported", c->label);
    if (use_sw && (st = get_int(c, KEYS("sliding_window"), false, mistral ? 4096 : 0, 0, SIZE_MAX_KEY,
                                &o->sliding_window))) // MistralConfig's default; null: none
        return st;
    if (use_sw && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c->root, "sliding_window")))
        o->sliding_window = 0;
    bool attn_bias = false;
    if ((st = get_bool(c, "attention_bias", false, &attn_bias)) || (st = get_bool(c, "mlp_bias", false, &o->mlp_bias)))
        return st;
    /* Qwen2: q/k/v carry a bias, o_proj does not (modeling_qwen2.py); no config key. */
    o->attention_qkv_bias = qwen2 ? true : attn_bias;
    o->attention_out_bias = qwen2 ? false : attn_bias;
    if (qwen2)
        o->mlp_bias = false;
    o->type_vocab_size = 0;
    o->hidden_dropout = 0;
    o->classifier_dropout = 0;
    if ((st = get_token(c, "pad_token_id", -1, &o->pad_token_id)) ||
        (st = get_token(c, "bos_token_id", -1, &o->bos_token_id)) ||
        (st = get_token(c, "eos_token_id", -1, &o->eos_token_id)))
        return st;
    return LP_OK;
}

/* The most parameters a model may have: its weights, gradients and two AdamW moments in
 * fp32 (16 bytes a parameter) must fit 64-bit signed byte counts, so that every size the
 * engine and the memory plan derive from the config is representable. */
#define LP_MAX_PARAMS ((int64_t)1 << 59)

/* Sums the parameter count as the engine lays it out, step by step, and remembers the first
 * key whose product or sum passed LP_MAX_PARAMS (or wrapped), so the refusal names it. */
typedef struct size_sum {
    int64_t total;
    const char *key; /* first key that passed the limit; NULL while none */
    int64_t value;   /* that key's value */
} size_sum;

static int64_t sz_check(size_sum *s, bool ovf, int64_t r, const char *key, int64_t value)
{
    if ((ovf || r > LP_MAX_PARAMS) && !s->key) {
        s->key = key;
        s->value = value;
    }
    return ovf ? INT64_MAX : r;
}

/* a * b, blaming key (= value) when it passes the limit. */
static int64_t sz_mul(size_sum *s, int64_t a, int64_t b, const char *key, int64_t value)
{
    bool ovf = false;
    int64_t r = lp_size_mul(&ovf, a, b);
    return sz_check(s, ovf, r, key, value);
}

/* total += n, blaming key (= value) when the running total passes the limit. */
static void sz_add(size_sum *s, int64_t n, const char *key, int64_t value)
{
    bool ovf = false;
    int64_t r = lp_size_add(&ovf, s->total, n);
    s->total = sz_check(s, ovf, r, key, value);
}

/* One layer's sum folded into the model's: the layer's first culprit is the model's. */
static void sz_take_key(size_sum *s, const size_sum *layer)
{
    if (layer->key && !s->key) {
        s->key = layer->key;
        s->value = layer->value;
    }
}

/* Every size key is within its own limit, but their products need not be: a config whose
 * parameter count wraps 64 bits had the engine allocate a few bytes and write far past them,
 * and inspect print the wrapped count. Refused here, which inspect, train and every command
 * that loads a model pass through, so they all refuse with this one message. The count is
 * the engine's layout, slightly over (a bias or norm more, never less). */
static lp_status check_param_count(const ctx *c, const lp_model_config *o)
{
    const bool di = o->distilbert, bert = o->family == LP_MODEL_FAMILY_BERT;
    const char *k_h = di ? "dim" : "hidden_size", *k_i = di ? "hidden_dim" : "intermediate_size";
    const char *k_l = di ? "n_layers" : "num_hidden_layers";
    const int64_t H = o->hidden_size, I = o->intermediate_size, V = o->vocab_size;
    size_sum s = {0, NULL, 0}, ls = {0, NULL, 0};
    sz_add(&s, sz_mul(&s, V, H, "vocab_size", V), "vocab_size", V);
    if (bert) {
        const int64_t P = o->max_position_embeddings, TT = o->type_vocab_size;
        sz_add(&s, sz_mul(&s, P, H, "max_position_embeddings", P), "max_position_embeddings", P);
        sz_add(&s, sz_mul(&s, TT, H, "type_vocab_size", TT), "type_vocab_size", TT);
        sz_add(&ls, sz_mul(&ls, sz_mul(&ls, 4, H, k_h, H), H + 2, k_h, H), k_h, H); /* q, k, v, o, norms */
        sz_add(&ls, sz_mul(&ls, sz_mul(&ls, 2, H, k_h, H), I + 1, k_i, I), k_i, I); /* the FFN */
        sz_add(&s, sz_mul(&s, H, H + 1, k_h, H), k_h, H);                           /* BERT's pooler */
    } else {
        const int64_t A = o->num_heads, KV = o->num_kv_heads;
        if (!o->tie_word_embeddings)
            sz_add(&s, sz_mul(&s, V, H, "vocab_size", V), "vocab_size", V); /* lm_head */
        int64_t qo = sz_mul(&ls, A, o->head_dim, "num_attention_heads", A);
        int64_t kv = sz_mul(&ls, KV, o->head_dim, "num_key_value_heads", KV);
        sz_add(&ls, sz_mul(&ls, sz_mul(&ls, 2, qo, "num_attention_heads", A), H + 1, k_h, H),
               "num_attention_heads", A);
        sz_add(&ls, sz_mul(&ls, sz_mul(&ls, 2, kv, "num_key_value_heads", KV), H + 1, k_h, H),
               "num_key_value_heads", KV);
        sz_add(&ls, sz_mul(&ls, sz_mul(&ls, 3, H, k_h, H), I + 1, k_i, I), k_i, I); /* gate, up, down */
        sz_add(&ls, sz_mul(&ls, 2, H, k_h, H), k_h, H);                             /* the two norms */
    }
    sz_take_key(&s, &ls);
    sz_add(&s, sz_mul(&s, o->num_layers, ls.total, k_l, o->num_layers), k_l, o->num_layers);
    sz_add(&s, sz_mul(&s, H + 1, o->num_labels, "num_labels", o->num_labels), "num_labels", o->num_labels);
    if (s.key)
        return lp_err(LP_STATUS_RANGE,
                      "%s: \"%s\" = %lld makes the parameter count overflow (more than 2^59: weights, gradients "
                      "and AdamW state must fit 64-bit byte counts)",
                      c->label, s.key, (long long)s.value);
    return LP_OK;
}

static lp_status pick_arch(const ctx *c, lp_model_config *o)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c->root, "model_type");
    if (cJSON_IsString(mt))
        snprintf(o->model_type, sizeof o->model_type, "%s", mt->valuestring);
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(c->root, "architectures");
    const char *name = NULL;
    if (archs && !cJSON_IsNull(archs)) {
        if (!cJSON_IsArray(archs) || !cJSON_IsString(archs->child))
            return lp_err(LP_STATUS_FORMAT, "%s: \"architectures\" must be a list of class names", c->label);
        name = archs->child->valuestring;
        for (size_t i = 0; i < N_ARCH; i++)
            if (!strcmp(name, arch_table[i].name)) {
                o->arch = arch_table[i].arch;
                return LP_OK;
            }
    } else if (cJSON_IsString(mt)) {
        for (size_t i = 0; i < sizeof model_type_table / sizeof model_type_table[0]; i++)
            if (!strcmp(mt->valuestring, model_type_table[i].model_type)) {
                o->arch = model_type_table[i].arch;
                return LP_OK;
            }
        name = mt->valuestring;
    }
    char list[800];
    size_t k = 0;
    for (size_t i = 0; i < N_ARCH; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", arch_table[i].name);
    if (!name)
        return lp_err(LP_STATUS_FORMAT, "%s: neither \"architectures\" nor \"model_type\" is given (supported: %s)",
                      c->label, list);
    return lp_err(LP_STATUS_UNSUPPORTED, "%s: architecture \"%.80s\" is not supported (supported: %s)", c->label,
                  name, list);
}

lp_status lp_hf_config_parse(const char *json, size_t len, const char *label, lp_model_config *out)
{
    memset(out, 0, sizeof *out);
    if (!label)
        label = "config.json";
    bool oom;
    cJSON *root = lp_json_parse(json, len, NULL, &oom);
    if (!root)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing JSON", label)
                   : lp_err(LP_STATUS_FORMAT, "%s: not valid JSON", label);
    ctx c = {label, root};
    lp_status st;
    if (!cJSON_IsObject(root)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: not a JSON object", label);
        goto out;
    }
    if ((st = pick_arch(&c, out)) != LP_OK)
        goto out;
    out->distilbert = out->arch == LP_HF_ARCH_DISTILBERT_MODEL || out->arch == LP_HF_ARCH_DISTILBERT_SEQ_CLS ||
                      out->arch == LP_HF_ARCH_DISTILBERT_MASKED_LM;
    bool bert = out->arch <= LP_HF_ARCH_DISTILBERT_MASKED_LM;
    st = bert ? parse_bert(&c, out) : parse_llama(&c, out);
    if (st == LP_OK)
        st = parse_labels(&c, out);
    if (st == LP_OK)
        st = check_param_count(&c, out);
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
    if (!td)
        td = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    if (cJSON_IsString(td))
        snprintf(out->torch_dtype, sizeof out->torch_dtype, "%s", td->valuestring);
out:
    cJSON_Delete(root);
    if (st != LP_OK)
        lp_model_config_free(out);
    return st;
}

lp_status lp_hf_config_load(const char *path, lp_model_config *out)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st != LP_OK)
        return st;
    st = lp_hf_config_parse(text, len, path, out);
    free(text);
    return st;
}
