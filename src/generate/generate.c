/* The generation loop: B prompts left-padded into one prefill, then one decode step per new
 * token for the whole batch, each sequence sampling its own next token and stopping on a
 * stop id or string; finished sequences ride along (their column is computed and ignored)
 * until all are done, which keeps every step one batched GEMV per weight. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gen_internal.h"
#include "loupe/io.h"
#include "loupe/prof.h"

void lp_gen_opts_init(lp_gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_new_tokens = 128;
    o->sample.top_p = 1.0f;
    o->kv_dtype = LP_DTYPE_F32;
    o->skip_special = true;
}

void lp_gen_result_free(lp_gen_result *r)
{
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

static double ms_since(int64_t t0)
{
    return (double)(lp_prof_now_ns() - t0) / 1e6;
}

static bool is_stop_id(const lp_gen_opts *o, int32_t id)
{
    for (int32_t i = 0; i < o->n_stop_ids; i++)
        if (o->stop_ids[i] == id)
            return true;
    return false;
}

typedef struct gen_state {
    int32_t *pids, *pmask; /* (B, T) padded prompts */
    float *logits;         /* (B, V) */
    int32_t *next;         /* (B) */
    lp_rng *rng;           /* (B) */
    lp_gen_stream *st;     /* (B) */
    bool *done;            /* (B) */
    lp_sampler sampler;
    lp_kv_cache *kv;
} gen_state;

static void state_free(gen_state *g, int32_t B)
{
    free(g->pids), free(g->pmask), free(g->logits), free(g->next), free(g->rng), free(g->done);
    if (g->st)
        for (int32_t b = 0; b < B; b++)
            free(g->st[b].text);
    free(g->st);
    lp_sampler_free(&g->sampler);
    lp_kv_cache_free(g->kv);
}

/* Appends the token just sampled for row b and updates its text; marks the row done. */
static lp_status take(const lp_tokenizer *tok, const lp_gen_opts *o, gen_state *g, lp_gen_result *r, int32_t b,
                      int32_t id)
{
    r->ids[r->n_ids++] = id;
    const bool stop_id = is_stop_id(o, id);
    const bool last = stop_id || r->n_ids >= o->max_new_tokens;
    bool hit = false;
    // the stop id itself is not part of the text
    lp_status s = lp_gen__stream_update(&g->st[b], tok, r->ids, r->n_ids - (stop_id ? 1 : 0), o, last, b, &hit);
    if (s != LP_OK)
        return s;
    if (last || hit) {
        g->done[b] = true;
        r->stopped = stop_id || hit;
    }
    return LP_OK;
}

lp_status lp_generate(lp_model *m, const lp_tokenizer *tok, const int32_t *const *prompts, const int32_t *lens,
                      int32_t B, const lp_gen_opts *o, lp_gen_result *out)
{
    if (B < 1 || o->max_new_tokens < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "generate: %d prompts, %d new tokens", B, o->max_new_tokens);
    memset(out, 0, (size_t)B * sizeof *out);
    int32_t T = 0;
    for (int32_t b = 0; b < B; b++) {
        if (lens[b] < 1)
            return lp_err(LP_STATUS_INVALID_ARG, "generate: prompt %d has no tokens", b);
        T = lens[b] > T ? lens[b] : T;
    }
    const int64_t V = lp_model_config_get(m)->vocab_size;
    gen_state g = {0};
    lp_status s = LP_OK;
    g.pids = calloc((size_t)B * (size_t)T, sizeof *g.pids);
    g.pmask = calloc((size_t)B * (size_t)T, sizeof *g.pmask);
    g.logits = malloc((size_t)B * (size_t)V * sizeof *g.logits);
    g.next = calloc((size_t)B, sizeof *g.next);
    g.rng = calloc((size_t)B, sizeof *g.rng);
    g.st = calloc((size_t)B, sizeof *g.st);
    g.done = calloc((size_t)B, sizeof *g.done);
    if (!g.pids || !g.pmask || !g.logits || !g.next || !g.rng || !g.st || !g.done) {
        s = lp_err(LP_STATUS_NO_MEMORY, "generate: out of memory");
        goto fail;
    }
    for (int32_t b = 0; b < B; b++) {
        out[b].ids = malloc((size_t)o->max_new_tokens * sizeof *out[b].ids);
        if (!out[b].ids) {
            s = lp_err(LP_STATUS_NO_MEMORY, "generate: out of memory");
            goto fail;
        }
        out[b].n_prompt = lens[b];
        // left padding: every prompt ends at column T-1, where decoding continues
        memcpy(g.pids + (size_t)b * T + (T - lens[b]), prompts[b], (size_t)lens[b] * sizeof(int32_t));
        for (int32_t t = T - lens[b]; t < T; t++)
            g.pmask[(size_t)b * T + t] = 1;
        lp_rng_init(&g.rng[b], o->seed, 16 + (uint64_t)b); // one sampling stream per prompt
    }
    if ((s = lp_sampler_init(&g.sampler, V)) != LP_OK ||
        (s = lp_model_kv_init(m, B, T + o->max_new_tokens - 1, o->kv_dtype, &g.kv)) != LP_OK)
        goto fail;

    int64_t t0 = lp_prof_now_ns();
    lp_prof_range_push("generate.prefill");
    s = lp_model_prefill(m, g.kv, g.pids, g.pmask, B, T, g.logits);
    lp_prof_range_pop();
    const double prefill_ms = ms_since(t0);
    if (s != LP_OK)
        goto fail;
    t0 = lp_prof_now_ns();
    int32_t steps = 0;
    for (;;) {
        bool all_done = true;
        for (int32_t b = 0; b < B; b++) {
            if (g.done[b])
                continue;
            g.next[b] = lp_sample(&g.sampler, g.logits + (size_t)b * V, &o->sample, &g.rng[b]);
            if ((s = take(tok, o, &g, &out[b], b, g.next[b])) != LP_OK)
                goto fail;
            all_done &= g.done[b];
        }
        if (all_done)
            break;
        lp_prof_range_push("generate.decode_step");
        s = lp_model_decode(m, g.kv, g.next, g.logits);
        lp_prof_range_pop();
        if (s != LP_OK)
            goto fail;
        steps++;
        if (o->prof_steps && (s = lp_prof_step()) != LP_OK)
            goto fail;
    }
    const double decode_ms = ms_since(t0);
    for (int32_t b = 0; b < B; b++) {
        out[b].text = g.st[b].text ? g.st[b].text : strdup("");
        g.st[b].text = NULL;
        out[b].prefill_ms = prefill_ms;
        out[b].decode_ms = decode_ms;
        out[b].decode_steps = steps;
        if (!out[b].text) {
            s = lp_err(LP_STATUS_NO_MEMORY, "generate: out of memory");
            goto fail;
        }
    }
    state_free(&g, B);
    return LP_OK;
fail:
    state_free(&g, B);
    for (int32_t b = 0; b < B; b++)
        lp_gen_result_free(&out[b]);
    return s;
}

/* ---- default stop ids ------------------------------------------------------------------- */

static lp_status add_id(int32_t **ids, int32_t *n, int64_t id)
{
    if (id < 0 || id > INT32_MAX)
        return LP_OK;
    for (int32_t i = 0; i < *n; i++)
        if ((*ids)[i] == id)
            return LP_OK;
    int32_t *p = realloc(*ids, (size_t)(*n + 1) * sizeof *p);
    if (!p)
        return lp_err(LP_STATUS_NO_MEMORY, "stop ids: out of memory");
    p[(*n)++] = (int32_t)id;
    *ids = p;
    return LP_OK;
}

lp_status lp_gen_default_stop_ids(const char *model_path, const lp_model *m, const lp_tokenizer *tok, int32_t **ids,
                                  int32_t *n)
{
    *ids = NULL;
    *n = 0;
    lp_status s = add_id(ids, n, lp_model_config_get(m)->eos_token_id);
    if (s == LP_OK && tok)
        s = add_id(ids, n, lp_tokenizer_special_id(tok, LP_SPECIAL_EOS));
    if (s == LP_OK && !lp_path_is_gguf(model_path)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/generation_config.json", model_path);
        cJSON *j = NULL;
        FILE *f = fopen(path, "r"); // optional: most checkpoints have one, some do not
        if (f) {
            fclose(f);
            if ((s = lp_json_read_file(path, &j)) != LP_OK)
                goto out;
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
            if (cJSON_IsNumber(e))
                s = add_id(ids, n, (int64_t)e->valuedouble);
            else if (cJSON_IsArray(e))
                for (const cJSON *x = e->child; x && s == LP_OK; x = x->next)
                    if (cJSON_IsNumber(x))
                        s = add_id(ids, n, (int64_t)x->valuedouble);
            cJSON_Delete(j);
        }
    }
out:
    if (s != LP_OK) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return s;
}
