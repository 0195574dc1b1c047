/* A Hugging Face tokenizer.json (byte-level BPE) written into a GGUF file as llama.cpp's
 * converter writes it for gpt2-type vocabularies, so llama.cpp (and loupe's own GGUF
 * reader, gguf_tokenizer.c) load it: tokens in id order padded to the model's vocabulary,
 * their types, merges as "a b" strings, the pre-tokenizer's name and the special ids. */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's llama_token_type values */
enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5 };

/* The pre-tokenizer's name: a Split regex llama.cpp knows, individual digits (SmolLM's
 * StarCoder-style setup), else GPT-2's split (ByteLevel with its own regex). */
static const char *pre_name(const cJSON *pre)
{
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pre, "type"));
    if (t && !strcmp(t, "Sequence")) {
        const cJSON *e;
        const char *found = NULL;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers"))
        {
            const char *n = pre_name(e);
            if (strcmp(n, "gpt-2"))
                found = found ? found : n;
        }
        return found ? found : "gpt-2";
    }
    if (t && !strcmp(t, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pre, "pattern");
        const char *n = lp_gguf__pre_of_regex(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pat, "Regex")));
        return n ? n : "gpt-2";
    }
    if (t && !strcmp(t, "Digits") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "individual_digits")))
        return "smollm";
    return "gpt-2";
}

static bool is_byte_level(const cJSON *j)
{
    const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(j, "decoder"), "type"));
    return d && !strcmp(d, "ByteLevel");
}

/* An id from a JSON number: integral, in [0, V); -1 otherwise. */
static int64_t json_id(const cJSON *v, int64_t V)
{
    if (!cJSON_IsNumber(v))
        return -1;
    const double d = v->valuedouble;
    return d >= 0 && d < (double)V && d == (double)(int64_t)d ? (int64_t)d : -1;
}

static lp_status add_ids(lp_gguf_writer *w, const char *path, int64_t V, int64_t bos, int64_t eos, int64_t pad)
{
    const struct {
        const char *key;
        int64_t id;
    } ids[] = {{"tokenizer.ggml.bos_token_id", bos},
               {"tokenizer.ggml.eos_token_id", eos},
               {"tokenizer.ggml.padding_token_id", pad}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (ids[i].id < 0)
            continue;
        if (ids[i].id >= V)
            return lp_err(LP_STATUS_FORMAT, "%s: %s %lld is outside the model's vocabulary of %lld", path,
                          ids[i].key, (long long)ids[i].id, (long long)V);
        lp_status st = lp_gguf_writer_add_u32(w, ids[i].key, (uint32_t)ids[i].id);
        if (st != LP_OK)
            return st;
    }
    return LP_OK;
}

/* chat_template and add_bos_token of tokenizer_config.json, when the file exists. */
static lp_status add_config(lp_gguf_writer *w, const char *dir)
{
    char *p = lp_io_path_join(dir, "tokenizer_config.json");
    if (!p)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    FILE *f = fopen(p, "rb");
    if (!f) {
        free(p);
        return LP_OK;
    }
    fclose(f);
    cJSON *c = NULL;
    lp_status st = lp_json_read_file(p, &c);
    free(p);
    if (st != LP_OK)
        return st;
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(c, "add_bos_token");
    lp_gguf_value b = {.type = LP_GGUF_TYPE_BOOL, .b = cJSON_IsTrue(bos)};
    st = lp_gguf_writer_add_kv(w, "tokenizer.ggml.add_bos_token", &b);
    const char *tpl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "chat_template"));
    if (st == LP_OK && tpl)
        st = lp_gguf_writer_add_str(w, "tokenizer.chat_template", tpl);
    cJSON_Delete(c);
    return st;
}

lp_status lp_gguf_writer_add_hf_tokenizer(lp_gguf_writer *w, const char *dir, int64_t V, int64_t bos, int64_t eos,
                                          int64_t pad)
{
    char *path = lp_io_path_join(dir, "tokenizer.json");
    if (!path)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    cJSON *j = NULL;
    lp_gguf_str *toks = NULL, *mrg = NULL;
    uint8_t *types = NULL;
    char *pads = NULL, **joined = NULL;
    size_t n_merges = 0;
    lp_status st = lp_json_read_file(path, &j);
    if (st != LP_OK)
        goto out;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "type"));
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab"),
                *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!mt || strcmp(mt, "BPE") || !is_byte_level(j)) {
        st = lp_err(LP_STATUS_UNSUPPORTED,
                    "%s: model type '%.20s' is not a byte-level BPE (the only tokenizer loupe writes to GGUF)", path,
                    mt ? mt : "?");
        goto out;
    }
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: model.vocab (object) or model.merges (array) missing", path);
        goto out;
    }
    if (V <= 0 || V > (int64_t)1 << 31) {
        st = lp_err(LP_STATUS_INVALID_ARG, "%s: vocabulary size %lld", path, (long long)V);
        goto out;
    }
    toks = lp_calloc((size_t)V, sizeof *toks);
    types = lp_calloc((size_t)V, 4);
    pads = lp_malloc((size_t)V * 16); /* "[PAD<id>]" for ids no token names */
    if (!toks || !types || !pads) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for %lld tokens", path, (long long)V);
        goto out;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        const int64_t id = json_id(e, V);
        if (id < 0) {
            st = lp_err(LP_STATUS_FORMAT, "%s: token '%.40s' has id %g, outside the model's vocabulary of %lld", path,
                        e->string, cJSON_IsNumber(e) ? e->valuedouble : -1.0, (long long)V);
            goto out;
        }
        toks[id] = (lp_gguf_str){e->string, strlen(e->string)};
        types[4 * id] = TOK_NORMAL;
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "added_tokens"))
    {
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "content"));
        const int64_t id = json_id(cJSON_GetObjectItemCaseSensitive(e, "id"), V);
        if (!content || id < 0) {
            st = lp_err(LP_STATUS_FORMAT, "%s: an added token without content or with an id outside the model's "
                                          "vocabulary of %lld",
                        path, (long long)V);
            goto out;
        }
        toks[id] = (lp_gguf_str){content, strlen(content)};
        types[4 * id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? TOK_CONTROL : TOK_USER_DEFINED;
    }
    for (int64_t i = 0; i < V; i++)
        if (!toks[i].s) {
            char *p = pads + 16 * i;
            toks[i] = (lp_gguf_str){p, (uint64_t)snprintf(p, 16, "[PAD%lld]", (long long)i)};
            types[4 * i] = TOK_UNUSED;
        }
    /* merges: "a b" strings (older files) or ["a", "b"] pairs (newer ones) */
    const int n_m = cJSON_GetArraySize(merges);
    mrg = lp_calloc((size_t)n_m + 1, sizeof *mrg);
    joined = lp_calloc((size_t)n_m + 1, sizeof *joined);
    if (!mrg || !joined) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for %d merges", path, n_m);
        goto out;
    }
    cJSON_ArrayForEach(e, merges)
    {
        const char *s = cJSON_GetStringValue(e);
        if (s && strchr(s, ' ')) {
            mrg[n_merges++] = (lp_gguf_str){s, strlen(s)};
            continue;
        }
        const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(e, 0)),
                   *b = cJSON_GetStringValue(cJSON_GetArrayItem(e, 1));
        if (!a || !b || cJSON_GetArraySize(e) != 2) {
            st = lp_err(LP_STATUS_FORMAT, "%s: model.merges[%zu] is not \"a b\" nor a pair of strings", path,
                        n_merges);
            goto out;
        }
        const size_t la = strlen(a), lb = strlen(b);
        char *m = lp_malloc(la + lb + 2);
        if (!m) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        memcpy(m, a, la);
        m[la] = ' ';
        memcpy(m + la + 1, b, lb + 1);
        joined[n_merges] = m;
        mrg[n_merges++] = (lp_gguf_str){m, la + lb + 1};
    }
    const lp_gguf_value tv = {.type = LP_GGUF_TYPE_ARRAY, .elem_type = LP_GGUF_TYPE_STRING, .n = (uint64_t)V,
                              .strs = toks},
                        yv = {.type = LP_GGUF_TYPE_ARRAY, .elem_type = LP_GGUF_TYPE_INT32, .n = (uint64_t)V,
                              .raw = types},
                        mv = {.type = LP_GGUF_TYPE_ARRAY, .elem_type = LP_GGUF_TYPE_STRING, .n = n_merges, .strs = mrg};
    if ((st = lp_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2")) != LP_OK ||
        (st = lp_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre_name(cJSON_GetObjectItemCaseSensitive(
                                                                  j, "pre_tokenizer")))) != LP_OK ||
        (st = lp_gguf_writer_add_kv(w, "tokenizer.ggml.tokens", &tv)) != LP_OK ||
        (st = lp_gguf_writer_add_kv(w, "tokenizer.ggml.token_type", &yv)) != LP_OK ||
        (st = lp_gguf_writer_add_kv(w, "tokenizer.ggml.merges", &mv)) != LP_OK ||
        (st = add_ids(w, path, V, bos, eos, pad)) != LP_OK)
        goto out;
    st = add_config(w, dir);
out:
    for (size_t i = 0; joined && i < n_merges; i++)
        free(joined[i]);
    free(joined);
    free(mrg);
    free(pads);
    free(types);
    free(toks);
    cJSON_Delete(j);
    free(path);
    return st;
}
