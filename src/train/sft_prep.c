/* Instruction-tuning data for a causal LM: the model's chat template (tokenizer_config.json or
 * the GGUF's metadata) and tokenizer bound to the data layer's codec, response-only labels by
 * default as TRL's SFT trainer does, packing, and the truncation and skip counts reported. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/io.h"
#include "train_internal.h"

/* The codec's state: template (NULL: the plain format), special tokens, tokenizer. */
typedef struct sft_codec {
    lp_chat_template *tmpl;
    const char *bos, *eos; /* borrowed from the tokenizer */
    const lp_tokenizer *tok;
    lp_encoding enc;
    bool specials; /* the last render was plain text: the tokenizer adds its specials (BOS) */
} sft_codec;

static lp_status codec_render(void *ctx, const lp_sft_turn *turns, int32_t n, int gen, char **out,
                              size_t *len)
{
    sft_codec *c = ctx;
    // a template writes its own BOS; text rows and the plain format get the tokenizer's, as
    // the causal-LM path without instruction data does
    c->specials = !c->tmpl || (n > 0 && turns[0].role == LP_SFT_ROLE_TEXT);
    if (c->specials)
        return lp_sft_render_plain((void *)(c->eos ? c->eos : ""), turns, n, gen, out, len);
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = 0; arr && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddStringToObject(m, "role", lp_sft_role_name(turns[i].role)) ||
            !cJSON_AddStringToObject(m, "content", turns[i].content)) {
            cJSON_Delete(m);
            cJSON_Delete(arr);
            return lp_err(LP_STATUS_NO_MEMORY, "chat template: out of memory");
        }
        cJSON_AddItemToArray(arr, m);
    }
    char *js = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    if (!js)
        return lp_err(LP_STATUS_NO_MEMORY, "chat template: out of memory");
    lp_chat_vars v = {
        .messages_json = js, .bos_token = c->bos, .eos_token = c->eos, .add_generation_prompt = gen};
    lp_status st = lp_chat_template_render(c->tmpl, &v, out, len);
    free(js);
    return st;
}

static lp_status codec_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n,
                                size_t *cap)
{
    sft_codec *c = ctx;
    lp_encode_opts o = lp_encode_opts_default();
    o.add_special_tokens = c->specials;
    lp_status st = lp_tokenizer_encode_n(c->tok, text, len, NULL, 0, &o, &c->enc);
    if (st != LP_OK)
        return st;
    if (c->enc.len > *cap) {
        int32_t *p = lp_realloc(*ids, c->enc.len * sizeof *p);
        if (!p)
            return lp_err(LP_STATUS_NO_MEMORY, "tokenizer: out of memory for %zu ids", c->enc.len);
        *ids = p, *cap = c->enc.len;
    }
    memcpy(*ids, c->enc.ids, c->enc.len * sizeof **ids);
    *n = c->enc.len;
    return LP_OK;
}

/* The model's chat template: the GGUF's, or tokenizer_config.json's; none is not an error. */
static lp_status load_template(const char *model, lp_chat_template **out)
{
    *out = NULL;
    char *src = NULL;
    const char *name = model;
    lp_chat_template_config cfg = {0};
    lp_status st;
    if (lp_path_is_gguf(model)) {
        st = lp_gguf_chat_template(model, &src);
    } else {
        st = lp_chat_template_config_load(model, &cfg);
        src = cfg.template_src, name = cfg.path;
    }
    if (st == LP_OK)
        st = lp_chat_template_parse(src, strlen(src), name, out);
    if (lp_path_is_gguf(model))
        free(src);
    else if (st != LP_STATUS_NOT_FOUND)
        lp_chat_template_config_free(&cfg);
    return st == LP_STATUS_NOT_FOUND ? LP_OK : st;
}

lp_status lp_train_sft_wanted(const lp_train_config *c, bool *sft)
{
    *sft = c->packing || c->train_on_responses == 1 || (c->data_format && strcmp(c->data_format, "auto"));
    if (*sft)
        return LP_OK;
    const char *f = c->train_file, *dot = f ? strrchr(f, '.') : NULL;
    if (!dot || (strcmp(dot, ".jsonl") && strcmp(dot, ".json") && strcmp(dot, ".ndjson")))
        return LP_OK;
    // a JSONL file whose first row is not {"text"}: instruction data
    FILE *fp = fopen(f, "rb");
    if (!fp)
        return LP_OK; // the usual reader reports it
    char line[65536];
    bool oom = false;
    while (fgets(line, sizeof line, fp)) {
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        cJSON *o = lp_json_parse(line, strlen(line), NULL, &oom);
        *sft = o && (cJSON_GetObjectItemCaseSensitive(o, "messages") ||
                     cJSON_GetObjectItemCaseSensitive(o, "prompt") ||
                     cJSON_GetObjectItemCaseSensitive(o, "instruction"));
        cJSON_Delete(o);
        break;
    }
    fclose(fp);
    return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory reading the first row", f) : LP_OK;
}

/* Says what --max-seq-len cut and which samples were left with nothing to train on. */
static void report(const lp_encoded_dataset *e, const char *source, int32_t max_len)
{
    if (e->n_truncated)
        fprintf(stderr, "loupe: %s: %lld sample%s truncated to --max-seq-len %d (%lld tokens dropped)\n",
                source, (long long)e->n_truncated, e->n_truncated == 1 ? "" : "s", (int)max_len,
                (long long)e->n_dropped_tokens);
    if (e->n_skipped)
        fprintf(stderr, "warning: %s: skipped %lld sample%s with no token to train on (the first: %s)\n",
                source, (long long)e->n_skipped, e->n_skipped == 1 ? "" : "s",
                e->skip_reason ? e->skip_reason : "?");
}

static lp_status encode_one(lp_train_data *d, const lp_train_config *c, const char *path, lp_sft_format f,
                            sft_codec *codec, int responses, int32_t max_len, int32_t pad, lp_sft_dataset *ds,
                            lp_encoded_dataset *out, lp_dataset *shadow)
{
    (void)d;
    lp_status st = lp_sft_load(path, f, ds);
    if (st != LP_OK)
        return st;
    if (ds->format == LP_SFT_FORMAT_MESSAGES && !codec->tmpl)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: chat messages need a chat template, and %s has none", path,
                      c->model_dir);
    int on = responses >= 0
                 ? responses
                 : ds->format == LP_SFT_FORMAT_PROMPT_RESPONSE || ds->format == LP_SFT_FORMAT_ALPACA;
    lp_sft_codec sc = {codec, codec_render, codec_tokenize};
    lp_encoded_dataset e;
    if ((st = lp_sft_encode(ds, &sc, max_len, on, pad, &e)) != LP_OK)
        return st;
    report(&e, path, max_len);
    if (c->packing) {
        st = lp_sft_pack(&e, max_len, out);
        lp_encoded_dataset_free(&e);
    } else {
        *out = e;
    }
    // the rest of the engine reads names and counts from the plain dataset
    shadow->n = ds->n;
    if (st == LP_OK && !(shadow->source = lp_strdup(path)))
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    return st;
}

/* The exact-match prompts of the eval rows (prompt/response and alpaca: user then assistant). */
static lp_status prepare_exact_match(lp_train_data *d, sft_codec *codec, int32_t max_len)
{
    const lp_sft_dataset *ds = &d->seval;
    if (ds->format != LP_SFT_FORMAT_PROMPT_RESPONSE && ds->format != LP_SFT_FORMAT_ALPACA)
        return LP_OK;
    d->em_off = lp_calloc((size_t)ds->n + 1, sizeof *d->em_off);
    d->em_want = lp_calloc((size_t)ds->n, sizeof *d->em_want);
    d->em_budget = lp_calloc((size_t)ds->n, sizeof *d->em_budget);
    if (!d->em_off || !d->em_want || !d->em_budget)
        return lp_err(LP_STATUS_NO_MEMORY, "exact match: out of memory");
    int32_t *ids = NULL, *ans = NULL;
    size_t cap = 0, cap_ans = 0, used = 0;
    lp_status st = LP_OK;
    for (int64_t i = 0; st == LP_OK && i < ds->n; i++) {
        const lp_sft_turn *t = ds->turns + ds->first[i];
        char *text = NULL;
        size_t len = 0, n = 0, na = 0;
        if ((st = codec_render(codec, t, 1, 1, &text, &len)) != LP_OK)
            break;
        st = codec_tokenize(codec, text, len, &ids, &n, &cap);
        free(text);
        if (st == LP_OK)
            st = codec_tokenize(codec, t[1].content, strlen(t[1].content), &ans, &na, &cap_ans);
        if (st != LP_OK)
            break;
        if ((int64_t)n >= max_len) // no room to answer within --max-seq-len: not scored
            continue;
        int32_t *grown = lp_realloc(d->em_ids, (used + n) * sizeof *grown);
        if (!grown || !(d->em_want[d->em_n] = lp_strdup(t[1].content))) {
            d->em_ids = grown ? grown : d->em_ids;
            st = lp_err(LP_STATUS_NO_MEMORY, "exact match: out of memory");
            break;
        }
        d->em_ids = grown;
        memcpy(d->em_ids + used, ids, n * sizeof *ids);
        used += n;
        // the answer's own tokens and two more (the stop token, one of slack): a longer answer
        // cannot match, and every extra token is a whole forward pass
        d->em_budget[d->em_n] =
            (int32_t)na + 2 < max_len - (int32_t)n ? (int32_t)na + 2 : max_len - (int32_t)n;
        d->em_off[++d->em_n] = (int64_t)used;
    }
    free(ids);
    free(ans);
    return st;
}

lp_status lp_train_sft_load(lp_train_data *d, const lp_train_config *c, int32_t max_len, int32_t pad)
{
    lp_sft_format f = LP_SFT_FORMAT_AUTO;
    if (c->data_format && lp_sft_format_parse(c->data_format, &f) != LP_OK)
        return lp_err_wrap(LP_STATUS_INVALID_ARG, "--data-format");
    sft_codec codec = {.tok = d->tok};
    lp_status st = load_template(c->model_dir, &codec.tmpl);
    if (st != LP_OK)
        return lp_err_wrap(st, "chat template of %s", c->model_dir);
    codec.bos = lp_tokenizer_id_to_token(d->tok, lp_tokenizer_special_id(d->tok, LP_SPECIAL_BOS));
    codec.eos = lp_tokenizer_id_to_token(d->tok, lp_tokenizer_special_id(d->tok, LP_SPECIAL_EOS));
    d->sft = true;
    st = encode_one(d, c, c->train_file, f, &codec, c->train_on_responses, max_len, pad, &d->strain,
                    &d->etrain, &d->train);
    if (st == LP_OK && c->eval_file && *c->eval_file) {
        d->has_eval = true;
        // the eval split keeps one sample per row (no packing) so exact match can read each
        lp_train_config ce = *c;
        ce.packing = false;
        st = encode_one(d, &ce, c->eval_file, d->strain.format, &codec, c->train_on_responses, max_len, pad,
                        &d->seval, &d->eeval, &d->eval);
        if (st == LP_OK && c->exact_match)
            st = prepare_exact_match(d, &codec, max_len);
    }
    d->sft_responses = c->train_on_responses >= 0 ? c->train_on_responses
                                                  : d->strain.format == LP_SFT_FORMAT_PROMPT_RESPONSE ||
                                                        d->strain.format == LP_SFT_FORMAT_ALPACA;
    lp_encoding_free(&codec.enc);
    lp_chat_template_free(codec.tmpl);
    return st;
}
