/* A GGUF file as the engine reads a model directory: config.json text built from the
 * metadata, and the tensors dequantized to f32 under their Hugging Face names in an
 * in-memory safetensors set (the engine copies them into its parameter block, so this
 * costs one f32 copy of the model while loading). */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/kernels.h"

bool lp_path_is_gguf(const char *path)
{
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".gguf");
}

typedef struct arch_info {
    const char *gguf; /* general.architecture */
    const char *hf_class;
    const char *model_type;
    bool permuted_qk; /* llama.cpp's converter permuted attn_q/attn_k rows (rotary layout) */
} arch_info;

static const arch_info archs[] = {
    {"llama", "LlamaForCausalLM", "llama", true},
    {"mistral", "MistralForCausalLM", "mistral", true},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", false},
};

static lp_status find_arch(const lp_gguf_file *g, const arch_info **out)
{
    char *a = NULL;
    lp_status st = lp_gguf_get_str(g, "general.architecture", &a);
    if (st != LP_OK)
        return st;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(a, archs[i].gguf)) {
            *out = &archs[i];
            free(a);
            return LP_OK;
        }
    st = lp_err(LP_STATUS_UNSUPPORTED,
                "%s: general.architecture '%.40s' is not supported (llama, mistral, qwen2)", lp_gguf_path(g),
                a);
    free(a);
    return st;
}

/* "<arch>.<suffix>" */
static const char *akey(const arch_info *a, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%s.%s", a->gguf, suffix);
    return buf;
}

/* Optional integer: absent leaves *out alone; a wrong type is still an error. */
static lp_status opt_int(const lp_gguf_file *g, const char *key, int64_t *out)
{
    return lp_gguf_get(g, key) ? lp_gguf_get_int(g, key, out) : LP_OK;
}

static lp_status opt_float(const lp_gguf_file *g, const char *key, double *out)
{
    return lp_gguf_get(g, key) ? lp_gguf_get_float(g, key, out) : LP_OK;
}

/* The number of entries of tokenizer.ggml.tokens (the vocabulary size), or -1 when absent. */
static lp_status vocab_from_tokens(const lp_gguf_file *g, int64_t *out)
{
    const lp_gguf_value *v = lp_gguf_get(g, "tokenizer.ggml.tokens");
    if (!v)
        return LP_OK;
    if (v->type != LP_GGUF_TYPE_ARRAY || v->elem_type != LP_GGUF_TYPE_STRING)
        return lp_err(
            LP_STATUS_FORMAT, "%s: metadata 'tokenizer.ggml.tokens' is %s, expected an array of strings",
            lp_gguf_path(g),
            v->type == LP_GGUF_TYPE_ARRAY ? "an array of another type" : lp_gguf_type_name(v->type));
    *out = (int64_t)v->n;
    return LP_OK;
}

/* Appends item to a cJSON array; when either allocation failed, frees the item and clears
 * *ok, so a half-built document is refused as out of memory instead of leaking. */
static void json_push(cJSON *arr, cJSON *item, bool *ok)
{
    if (!arr || !item || !cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        *ok = false;
    }
}

static lp_status build_config(const lp_gguf_file *g, const arch_info *a, char **out)
{
    char k[128];
    int64_t layers, hidden, ffn, heads, kv_heads = -1, ctx = 2048, vocab = -1, head_dim = -1;
    int64_t bos = -1, eos = -1, pad = -1, rope_orig = -1;
    double eps, theta = 10000.0, rope_factor = 0;
    lp_status st;
    if ((st = lp_gguf_get_int(g, akey(a, "block_count", k, sizeof k), &layers)) != LP_OK ||
        (st = lp_gguf_get_int(g, akey(a, "embedding_length", k, sizeof k), &hidden)) != LP_OK ||
        (st = lp_gguf_get_int(g, akey(a, "feed_forward_length", k, sizeof k), &ffn)) != LP_OK ||
        (st = lp_gguf_get_int(g, akey(a, "attention.head_count", k, sizeof k), &heads)) != LP_OK ||
        (st = lp_gguf_get_float(g, akey(a, "attention.layer_norm_rms_epsilon", k, sizeof k), &eps)) !=
            LP_OK ||
        (st = opt_int(g, akey(a, "attention.head_count_kv", k, sizeof k), &kv_heads)) != LP_OK ||
        (st = opt_int(g, akey(a, "context_length", k, sizeof k), &ctx)) != LP_OK ||
        (st = opt_int(g, akey(a, "vocab_size", k, sizeof k), &vocab)) != LP_OK ||
        (st = vocab_from_tokens(g, &vocab)) != LP_OK ||
        (st = opt_float(g, akey(a, "rope.freq_base", k, sizeof k), &theta)) != LP_OK ||
        (st = opt_int(g, akey(a, "rope.dimension_count", k, sizeof k), &head_dim)) != LP_OK ||
        (st = opt_float(g, akey(a, "rope.scaling.factor", k, sizeof k), &rope_factor)) != LP_OK ||
        (st = opt_int(g, akey(a, "rope.scaling.original_context_length", k, sizeof k), &rope_orig)) !=
            LP_OK ||
        (st = opt_int(g, "tokenizer.ggml.bos_token_id", &bos)) != LP_OK ||
        (st = opt_int(g, "tokenizer.ggml.eos_token_id", &eos)) != LP_OK ||
        (st = opt_int(g, "tokenizer.ggml.padding_token_id", &pad)) != LP_OK)
        return st;
    if (vocab < 0) {
        const lp_gguf_tensor *e = lp_gguf_find_tensor(g, "token_embd.weight");
        if (!e || e->ndim != 2)
            return lp_err(
                LP_STATUS_FORMAT,
                "%s: no vocabulary size (no tokenizer.ggml.tokens, %s.vocab_size or token_embd.weight)",
                lp_gguf_path(g), a->gguf);
        vocab = e->ne[1];
    }
    if (kv_heads < 0)
        kv_heads = heads;
    char *rope_type = NULL;
    if (lp_gguf_get(g, akey(a, "rope.scaling.type", k, sizeof k)) &&
        (st = lp_gguf_get_str(g, k, &rope_type)) != LP_OK)
        return st;
    lp_json_oom_begin(); /* cJSON's nodes counted by the torture mode */
    cJSON *j = cJSON_CreateObject();
    bool ok = j != NULL;
    cJSON *arr = cJSON_AddArrayToObject(j, "architectures");
    json_push(arr, cJSON_CreateString(a->hf_class), &ok);
    ok &= cJSON_AddStringToObject(j, "model_type", a->model_type) != NULL;
    ok &= cJSON_AddNumberToObject(j, "vocab_size", (double)vocab) != NULL;
    ok &= cJSON_AddNumberToObject(j, "hidden_size", (double)hidden) != NULL;
    ok &= cJSON_AddNumberToObject(j, "intermediate_size", (double)ffn) != NULL;
    ok &= cJSON_AddNumberToObject(j, "num_hidden_layers", (double)layers) != NULL;
    ok &= cJSON_AddNumberToObject(j, "num_attention_heads", (double)heads) != NULL;
    ok &= cJSON_AddNumberToObject(j, "num_key_value_heads", (double)kv_heads) != NULL;
    if (head_dim > 0 && heads > 0 && head_dim != hidden / heads)
        ok &= cJSON_AddNumberToObject(j, "head_dim", (double)head_dim) != NULL;
    ok &= cJSON_AddNumberToObject(j, "max_position_embeddings", (double)ctx) != NULL;
    ok &= cJSON_AddNumberToObject(j, "rms_norm_eps", eps) != NULL;
    ok &= cJSON_AddNumberToObject(j, "rope_theta", theta) != NULL;
    ok &= cJSON_AddStringToObject(j, "hidden_act", "silu") != NULL;
    ok &= cJSON_AddBoolToObject(j, "tie_word_embeddings", lp_gguf_find_tensor(g, "output.weight") == NULL) != NULL;
    ok &= cJSON_AddStringToObject(j, "torch_dtype", "float32") != NULL;
    if (bos >= 0)
        ok &= cJSON_AddNumberToObject(j, "bos_token_id", (double)bos) != NULL;
    if (eos >= 0)
        ok &= cJSON_AddNumberToObject(j, "eos_token_id", (double)eos) != NULL;
    if (pad >= 0)
        ok &= cJSON_AddNumberToObject(j, "pad_token_id", (double)pad) != NULL;
    if (rope_type && strcmp(rope_type, "none")) {
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        ok &= cJSON_AddStringToObject(rs, "rope_type", rope_type) != NULL;
        ok &= cJSON_AddNumberToObject(rs, "factor", rope_factor) != NULL;
        if (rope_orig > 0)
            ok &= cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)rope_orig) != NULL;
    }
    free(rope_type);
    ok &= cJSON_AddStringToObject(j, "loupe_source", lp_gguf_path(g)) != NULL;
    *out = ok ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!*out)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", lp_gguf_path(g));
    return LP_OK;
}

/* GGUF tensor names (llama.cpp's) and their Hugging Face names, both ways. */
static const struct {
    const char *g, *hf;
} top_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
static const struct {
    const char *g, *hf;
} blk_names[] = {
    {"attn_norm", "input_layernorm"}, {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj"},   {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},   {"attn_output", "self_attn.o_proj"},
    {"ffn_gate", "mlp.gate_proj"},    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

/* The Hugging Face name of a GGUF tensor name; false for one the engine does not use
 * (rope_freqs: llama3 factors the config already describes). Unknown names keep their own
 * name, so the parameter map reports them as unexpected. */
static bool hf_name(const char *gname, char *out, size_t n)
{
    if (!strcmp(gname, "rope_freqs.weight"))
        return false;
    for (size_t i = 0; i < sizeof top_names / sizeof top_names[0]; i++)
        if (!strcmp(gname, top_names[i].g)) {
            snprintf(out, n, "%s", top_names[i].hf);
            return true;
        }
    unsigned layer;
    int used = 0;
    if (sscanf(gname, "blk.%u.%n", &layer, &used) == 1 && used > 0) {
        const char *rest = gname + used, *dot = strrchr(rest, '.');
        for (size_t i = 0; dot && i < sizeof blk_names / sizeof blk_names[0]; i++)
            if ((size_t)(dot - rest) == strlen(blk_names[i].g) && !strncmp(rest, blk_names[i].g, (size_t)(dot - rest))) {
                snprintf(out, n, "model.layers.%u.%s%s", layer, blk_names[i].hf, dot);
                return true;
            }
    }
    snprintf(out, n, "%s", gname);
    return true;
}

bool lp_gguf_name_from_hf(const char *hf, char *out, size_t n)
{
    for (size_t i = 0; i < sizeof top_names / sizeof top_names[0]; i++)
        if (!strcmp(hf, top_names[i].hf)) {
            snprintf(out, n, "%s", top_names[i].g);
            return true;
        }
    unsigned layer;
    int used = 0;
    if (sscanf(hf, "model.layers.%u.%n", &layer, &used) == 1 && used > 0) {
        const char *rest = hf + used, *dot = strrchr(rest, '.');
        for (size_t i = 0; dot && i < sizeof blk_names / sizeof blk_names[0]; i++)
            if ((size_t)(dot - rest) == strlen(blk_names[i].hf) && !strncmp(rest, blk_names[i].hf, (size_t)(dot - rest))) {
                snprintf(out, n, "blk.%u.%s%s", layer, blk_names[i].g, dot);
                return true;
            }
    }
    return false;
}

lp_status lp_gguf_permute_qk(float *w, int64_t rows, int64_t cols, int64_t heads, bool to_gguf, lp_status bad,
                             const char *path, const char *name)
{
    if (heads <= 0 || rows % (2 * heads))
        return lp_err(bad, "%s: tensor '%s': %lld rows do not split into %lld heads of even size", path, name,
                      (long long)rows, (long long)heads);
    const int64_t D = rows / heads, half = D / 2;
    float *tmp = lp_malloc((size_t)(D * cols) * sizeof *tmp);
    if (!tmp)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    for (int64_t h = 0; h < heads; h++) {
        float *head = w + h * D * cols;
        memcpy(tmp, head, (size_t)(D * cols) * sizeof *tmp);
        for (int64_t s = 0; s < 2; s++)
            for (int64_t j = 0; j < half; j++) {
                const int64_t hf = s * half + j, gg = 2 * j + s; /* the row in each layout */
                memcpy(head + (to_gguf ? gg : hf) * cols, tmp + (to_gguf ? hf : gg) * cols,
                       (size_t)cols * sizeof *tmp);
            }
    }
    free(tmp);
    return LP_OK;
}

static bool name_has(const char *name, const char *part)
{
    return strstr(name, part) != NULL;
}

static lp_status build_weights(const lp_gguf_file *g, const arch_info *a, lp_st_set **out)
{
    const char *path = lp_gguf_path(g);
    const size_t n = lp_gguf_tensor_count(g);
    char k[128];
    int64_t heads = 0, kv_heads = -1;
    lp_status st;
    if ((st = lp_gguf_get_int(g, akey(a, "attention.head_count", k, sizeof k), &heads)) != LP_OK ||
        (st = opt_int(g, akey(a, "attention.head_count_kv", k, sizeof k), &kv_heads)) != LP_OK)
        return st;
    if (kv_heads < 0)
        kv_heads = heads;
    lp_json_oom_begin();
    cJSON *hdr = cJSON_CreateObject();
    bool ok = hdr != NULL;
    uint64_t data_bytes = 0;
    char(*names)[160] = lp_calloc(n + 1, sizeof *names);
    bool *keep = lp_calloc(n + 1, sizeof *keep);
    uint64_t *at = lp_calloc(n + 1, sizeof *at);
    char *buf = NULL;
    lp_st_file *f = NULL;
    if (!hdr || !names || !keep || !at) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const lp_gguf_tensor *t = lp_gguf_tensor_at(g, i);
        const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t->type);
        if (!(keep[i] = hf_name(t->name, names[i], sizeof names[i])))
            continue;
        if (!tt->dequantizable) {
            st = lp_err(
                LP_STATUS_UNSUPPORTED,
                "%s: tensor '%s' is %s; loupe reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K "
                "and Q6_K",
                path, t->name, tt->name);
            goto out;
        }
        uint64_t nb;
        if (__builtin_mul_overflow(t->numel, 4, &nb) || __builtin_add_overflow(data_bytes, nb, &at[i])) {
            st = lp_err(LP_STATUS_FORMAT, "%s: tensor sizes overflow", path);
            goto out;
        }
        cJSON *e = cJSON_AddObjectToObject(hdr, names[i]);
        ok &= cJSON_AddStringToObject(e, "dtype", "F32") != NULL;
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = (int)t->ndim - 1; d >= 0; d--) // ggml's ne[0] is the innermost dimension
            json_push(shape, cJSON_CreateNumber((double)t->ne[d]), &ok);
        cJSON *off = cJSON_AddArrayToObject(e, "data_offsets");
        json_push(off, cJSON_CreateNumber((double)data_bytes), &ok);
        json_push(off, cJSON_CreateNumber((double)at[i]), &ok);
        at[i] = data_bytes;
        data_bytes += nb;
    }
    char *h = ok ? cJSON_PrintUnformatted(hdr) : NULL;
    if (!h) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    const size_t hlen = (strlen(h) + 7) & ~(size_t)7, total = 8 + hlen + (size_t)data_bytes;
    if (!(buf = lp_malloc(total))) {
        free(h);
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory (%zu bytes for the dequantized weights)", path,
                    total);
        goto out;
    }
    const uint64_t hl = hlen;
    memcpy(buf, &hl, 8);
    memset(buf + 8, ' ', hlen);
    memcpy(buf + 8, h, strlen(h));
    free(h);
    for (size_t i = 0; i < n; i++) {
        const lp_gguf_tensor *t = lp_gguf_tensor_at(g, i);
        if (!keep[i])
            continue;
        float *dst = (float *)(buf + 8 + hlen + at[i]);
        lp_ggml_dequantize((lp_ggml_type)t->type, t->data, dst, (int64_t)t->numel);
        if (a->permuted_qk && t->ndim == 2 &&
            (name_has(t->name, ".attn_q.") || name_has(t->name, ".attn_k."))) {
            const int64_t hh = name_has(t->name, ".attn_q.") ? heads : kv_heads;
            if ((st = lp_gguf_permute_qk(dst, t->ne[1], t->ne[0], hh, false, LP_STATUS_FORMAT, path, t->name)) != LP_OK)
                goto out;
        }
        if (a->permuted_qk && t->ndim == 1 &&
            (name_has(t->name, ".attn_q.") || name_has(t->name, ".attn_k."))) {
            const int64_t hh = name_has(t->name, ".attn_q.") ? heads : kv_heads;
            if ((st = lp_gguf_permute_qk(dst, t->ne[0], 1, hh, false, LP_STATUS_FORMAT, path, t->name)) != LP_OK)
                goto out;
        }
    }
    if ((st = lp_st_parse_buffer(buf, total, path, &f)) != LP_OK)
        goto out;
    lp_st_file_own_buffer(f, lp_gguf_file_size(g));
    buf = NULL;
    st = lp_st_set_from_file(f, path, out);
out:
    free(buf);
    free(names);
    free(keep);
    free(at);
    cJSON_Delete(hdr);
    return st;
}

lp_status lp_gguf_model_open(const char *path, char **config_json, lp_st_set **weights)
{
    if (config_json)
        *config_json = NULL;
    if (weights)
        *weights = NULL;
    lp_gguf_file *g;
    lp_status st = lp_gguf_open(path, &g);
    if (st != LP_OK)
        return st;
    const arch_info *a = NULL;
    if ((st = find_arch(g, &a)) == LP_OK && config_json)
        st = build_config(g, a, config_json);
    if (st == LP_OK && weights)
        st = build_weights(g, a, weights);
    if (st != LP_OK && config_json) {
        free(*config_json);
        *config_json = NULL;
    }
    lp_gguf_close(g);
    return st;
}

lp_status lp_gguf_config_json(const lp_gguf_file *g, char **out)
{
    *out = NULL;
    const arch_info *a = NULL;
    lp_status st = find_arch(g, &a);
    return st == LP_OK ? build_config(g, a, out) : st;
}

lp_status lp_gguf_chat_template(const char *path, char **out)
{
    *out = NULL;
    lp_gguf_file *g;
    lp_status st = lp_gguf_open(path, &g);
    if (st != LP_OK)
        return st;
    st = lp_gguf_get_str(g, "tokenizer.chat_template", out);
    lp_gguf_close(g);
    return st;
}

/* The GGUF tensor whose Hugging Face name is hf (the inverse of hf_name, by search: a
 * model has a few hundred tensors and this runs once per Linear at load). */
static const lp_gguf_tensor *find_hf(const lp_gguf_file *g, const char *hf)
{
    char nm[160];
    for (size_t i = 0; i < lp_gguf_tensor_count(g); i++) {
        const lp_gguf_tensor *t = lp_gguf_tensor_at(g, i);
        if (hf_name(t->name, nm, sizeof nm) && !strcmp(nm, hf))
            return t;
    }
    return NULL;
}

int32_t lp_gguf_model_weight_type(const lp_gguf_file *g, const char *hf)
{
    const lp_gguf_tensor *t = find_hf(g, hf);
    return t && t->ndim == 2 ? (int32_t)t->type : -1;
}

lp_status lp_gguf_model_qweight(const lp_gguf_file *g, const char *hf, lp_qweight *out, const char *label)
{
    memset(out, 0, sizeof *out);
    const char *path = lp_gguf_path(g);
    const lp_gguf_tensor *t = find_hf(g, hf);
    if (!t || t->ndim != 2)
        return lp_err(LP_STATUS_NOT_FOUND, "%s: no 2-d tensor for %s", path, hf);
    const lp_ggml_type ty = (lp_ggml_type)t->type;
    if (!lp_ggml_type_runnable(ty))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: tensor '%s' is %s, not a format loupe keeps at run time", path,
                      t->name, lp_ggml_type_traits_get(t->type)->name);
    const int64_t rows = t->ne[1], cols = t->ne[0];
    lp_status st = lp_qweight_from_ggml(out, ty, t->data, rows, cols, label);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s: tensor '%s'", path, t->name);
    const arch_info *a = NULL;
    if ((st = find_arch(g, &a)) != LP_OK || !a->permuted_qk ||
        !(name_has(t->name, ".attn_q.") || name_has(t->name, ".attn_k.")))
        goto done;
    /* llama.cpp permuted whole rows of q/k: undo it on the rows of blocks (each row moves
     * as a unit, so every block stays as stored) */
    char k[128];
    int64_t heads = 0, kv = -1;
    if ((st = lp_gguf_get_int(g, akey(a, "attention.head_count", k, sizeof k), &heads)) != LP_OK ||
        (st = opt_int(g, akey(a, "attention.head_count_kv", k, sizeof k), &kv)) != LP_OK)
        goto done;
    const int64_t hh = name_has(t->name, ".attn_q.") ? heads : kv < 0 ? heads : kv;
    if (hh <= 0 || rows % (2 * hh)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': %lld rows do not split into %lld heads of even size", path,
                    t->name, (long long)rows, (long long)hh);
        goto done;
    }
    const int64_t D = rows / hh, half = D / 2, rb = out->row_bytes;
    uint8_t *tmp = lp_malloc((size_t)(D * rb));
    if (!tmp) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto done;
    }
    for (int64_t h = 0; h < hh; h++) {
        uint8_t *head = out->blocks + h * D * rb;
        memcpy(tmp, head, (size_t)(D * rb));
        for (int64_t s = 0; s < 2; s++)
            for (int64_t j = 0; j < half; j++)
                memcpy(head + (s * half + j) * rb, tmp + (2 * j + s) * rb, (size_t)rb);
    }
    free(tmp);
done:
    if (st != LP_OK)
        lp_qweight_free(out);
    return st;
}
