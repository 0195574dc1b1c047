/* Saving a llama-family causal LM (qwen2, llama) as a GGUF file llama.cpp loads: the
 * hyperparameters under llama.cpp's keys, the source directory's tokenizer.json as a gpt2
 * vocabulary, and the tensors under llama.cpp's names in ggml's dimension order, matrices
 * re-encoded as Q8_0 / Q4_0 (ggml's reference quantizers) or kept F32. For the llama arch
 * the q/k rows are permuted into llama.cpp's rotary layout (what its converter does and
 * gguf_model.c undoes); qwen2 uses the Hugging Face (NeoX) layout as is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loupe/kernels.h"
#include "models_internal.h"

/* One tensor: name (HF), its f32 values (copied when they must be permuted), rows x cols
 * (rows 1 and cols = n for a vector). */
static lp_status add_tensor(lp_gguf_writer *w, const lp_model *m, const char *arch, const char *hf,
                            const float *data, int ndim, int64_t rows, int64_t cols, uint32_t type,
                            const char *path)
{
    char g[160];
    if (!lp_gguf_name_from_hf(hf, g, sizeof g))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: tensor '%s' has no GGUF name", path, hf);
    const bool q = strstr(hf, ".self_attn.q_proj.") != NULL, k = strstr(hf, ".self_attn.k_proj.") != NULL;
    float *perm = NULL;
    lp_status st = LP_OK;
    if (!strcmp(arch, "llama") && (q || k)) {
        const size_t n = (size_t)(rows * cols);
        if (!(perm = lp_malloc(n * sizeof *perm)))
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        memcpy(perm, data, n * sizeof *perm);
        const int64_t heads = q ? m->cfg.num_heads : m->cfg.num_kv_heads;
        /* a bias is one column of rows: permuted as a (rows, 1) matrix */
        st = ndim == 2 ? lp_gguf_permute_qk(perm, rows, cols, heads, true, LP_STATUS_INVALID_ARG, path, hf)
                        : lp_gguf_permute_qk(perm, cols, 1, heads, true, LP_STATUS_INVALID_ARG, path, hf);
        if (st != LP_OK) {
            free(perm);
            return st;
        }
        data = perm;
    }
    const int64_t ne[2] = {cols, rows};
    const uint64_t numel = (uint64_t)(rows * cols);
    if (type != LP_GGML_TYPE_F32 && ndim == 2 && cols % 32 == 0) {
        const uint64_t nbytes = numel / 32 * (uint64_t)lp_ggml_type_traits_get(type)->bytes;
        void *blocks = lp_malloc((size_t)nbytes);
        if (!blocks)
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for tensor '%s'", path, hf);
        else {
            lp_ggml_quantize((lp_ggml_type)type, data, blocks, (int64_t)numel);
            st = lp_gguf_writer_add_tensor(w, g, 2, ne, type, blocks, nbytes);
        }
        free(blocks);
    } else {
        st = lp_gguf_writer_add_tensor(w, g, (uint32_t)ndim, ne, LP_GGML_TYPE_F32, data, numel * 4);
    }
    free(perm);
    return st;
}

static lp_status add_hparams(lp_gguf_writer *w, const lp_model *m, const char *arch, uint32_t type)
{
    const lp_model_config *c = &m->cfg;
    char k[96];
    const char *base = strrchr(m->dir, '/');
    base = base && base[1] ? base + 1 : m->dir;
    const struct {
        const char *suffix;
        int64_t v;
    } ints[] = {
        {"block_count", c->num_layers},
        {"context_length", c->max_position_embeddings},
        {"embedding_length", c->hidden_size},
        {"feed_forward_length", c->intermediate_size},
        {"attention.head_count", c->num_heads},
        {"attention.head_count_kv", c->num_kv_heads},
        {"rope.dimension_count", c->head_dim},
        {"vocab_size", c->vocab_size},
    };
    lp_status st;
    /* LLAMA_FTYPE_ALL_F32, _MOSTLY_Q8_0, _MOSTLY_Q4_0 */
    const uint32_t ftype = type == LP_GGML_TYPE_F32 ? 0u : type == LP_GGML_TYPE_Q8_0 ? 7u : 2u;
    if ((st = lp_gguf_writer_add_str(w, "general.architecture", arch)) != LP_OK ||
        (st = lp_gguf_writer_add_str(w, "general.name", base)) != LP_OK ||
        (st = lp_gguf_writer_add_u32(w, "general.file_type", ftype)) != LP_OK)
        return st;
    if (type != LP_GGML_TYPE_F32 && (st = lp_gguf_writer_add_u32(w, "general.quantization_version", 2)) != LP_OK)
        return st;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        snprintf(k, sizeof k, "%s.%s", arch, ints[i].suffix);
        if ((st = lp_gguf_writer_add_u32(w, k, (uint32_t)ints[i].v)) != LP_OK)
            return st;
    }
    if (c->head_dim != c->hidden_size / c->num_heads) { /* llama.cpp's n_embd_head_k/v default otherwise */
        const char *kv[] = {"attention.key_length", "attention.value_length"};
        for (int i = 0; i < 2; i++) {
            snprintf(k, sizeof k, "%s.%s", arch, kv[i]);
            if ((st = lp_gguf_writer_add_u32(w, k, (uint32_t)c->head_dim)) != LP_OK)
                return st;
        }
    }
    lp_gguf_value theta = {.type = LP_GGUF_TYPE_FLOAT32, .f = c->rope_theta},
                  eps = {.type = LP_GGUF_TYPE_FLOAT32, .f = c->norm_eps};
    snprintf(k, sizeof k, "%s.rope.freq_base", arch);
    if ((st = lp_gguf_writer_add_kv(w, k, &theta)) != LP_OK)
        return st;
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
    return lp_gguf_writer_add_kv(w, k, &eps);
}

/* What the GGUF cannot say (llama.cpp would run another model): refused up front. */
static lp_status check_model(const lp_model *m, const char **arch, const char *path)
{
    const lp_model_config *c = &m->cfg;
    if (c->family != LP_MODEL_FAMILY_LLAMA || !m->lm_head)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: only causal LMs of the llama family are written as GGUF (%s is '%s')",
                      path, m->dir, c->model_type);
    if (!strcmp(c->model_type, "qwen2"))
        *arch = "qwen2";
    else if (!strcmp(c->model_type, "llama") || !strcmp(c->model_type, "mistral"))
        *arch = "llama";
    else
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: model_type '%s' (loupe writes GGUF for qwen2, llama, mistral)",
                      path, c->model_type);
    if (c->rope_type[0] && strcmp(c->rope_type, "default"))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: rope_scaling '%s' is not written to GGUF (default rope only)", path,
                      c->rope_type);
    if (c->sliding_window > 0)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: a sliding window is not written to GGUF", path);
    if (c->attention_out_bias || c->mlp_bias || (!strcmp(*arch, "qwen2") && !c->attention_qkv_bias))
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: attention/MLP biases other than %s's are not written to GGUF", path,
                      *arch);
    return LP_OK;
}

static lp_status add_weights(lp_gguf_writer *w, const lp_model *m, const char *arch, uint32_t type, const char *path)
{
    lp_status st = LP_OK;
    for (size_t i = 0; st == LP_OK && i < m->n_params; i++) {
        const lp_model_param *p = &m->params[i];
        /* adapters are merged into their bases (lp_model__saved_weight), as save.c does */
        if (lp_model__is_adapter_param(m, i) || (m->cfg.tie_word_embeddings && !strcmp(p->name, "lm_head.weight")))
            continue;
        float *buf = NULL;
        const float *data = lp_model__saved_weight(m, i, &buf);
        if (!data)
            return LP_STATUS_NO_MEMORY;
        const int64_t rows = p->ndim == 2 ? p->shape[0] : 1, cols = p->ndim == 2 ? p->shape[1] : p->shape[0];
        st = add_tensor(w, m, arch, p->name, data, p->ndim, rows, cols, type, path);
        free(buf);
    }
    /* Linears kept quantized or packed at load are not parameters: their f32 values */
    for (size_t i = 0; st == LP_OK && i < m->n_lins; i++) {
        const lp_model_linear *ml = &m->lins[i];
        if (!ml->q || (m->cfg.tie_word_embeddings && !strcmp(ml->module, "lm_head")))
            continue;
        char name[200];
        snprintf(name, sizeof name, "%s.weight", ml->module);
        float *buf = NULL;
        const float *data = lp_model__linear_weight(m, ml, &buf);
        if (!data)
            return LP_STATUS_NO_MEMORY;
        st = add_tensor(w, m, arch, name, data, 2, ml->lin->out, ml->lin->in, type, path);
        free(buf);
    }
    return st;
}

lp_status lp_model_save_gguf(const lp_model *m, const char *path, uint32_t type)
{
    if (type != LP_GGML_TYPE_F32 && type != LP_GGML_TYPE_Q8_0 && type != LP_GGML_TYPE_Q4_0)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: GGUF tensors are written as f32, q8_0 or q4_0", path);
    const char *arch = NULL;
    lp_status st = check_model(m, &arch, path);
    if (st != LP_OK)
        return st;
    lp_gguf_writer *w = NULL;
    if ((st = lp_gguf_writer_init(&w, path, 32)) != LP_OK)
        return st;
    st = add_hparams(w, m, arch, type);
    /* without a tokenizer.json the file has none (loupe loads it; llama.cpp does not) */
    char tj[4200];
    struct stat sb;
    snprintf(tj, sizeof tj, "%s/tokenizer.json", m->dir);
    if (st == LP_OK && stat(tj, &sb) == 0)
        st = lp_gguf_writer_add_hf_tokenizer(w, m->dir, m->cfg.vocab_size, m->cfg.bos_token_id, m->cfg.eos_token_id,
                                             m->cfg.pad_token_id);
    if (st == LP_OK)
        st = add_weights(w, m, arch, type, path);
    if (st == LP_OK)
        st = lp_gguf_writer_finish(w);
    lp_gguf_writer_free(w);
    return st;
}
