/* lp_model: loading (config, weights, task and head choice), the activation/scratch/input
 * blocks sized per batch, and the forward, loss, backward and embedding passes over the nn
 * modules (with gradient checkpointing: layer inputs kept, layers recomputed in backward). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

const char *lp_pooling_name(lp_pooling p)
{
    switch (p) {
    case LP_POOLING_CLS:
        return "cls";
    case LP_POOLING_MEAN:
        return "mean";
    }
    return "?";
}

lp_status lp_pooling_parse(const char *s, lp_pooling *out)
{
    if (s && !strcmp(s, "cls"))
        *out = LP_POOLING_CLS;
    else if (s && !strcmp(s, "mean"))
        *out = LP_POOLING_MEAN;
    else
        return lp_err(LP_STATUS_INVALID_ARG, "unknown pooling '%s' (expected cls or mean)", s ? s : "(null)");
    return LP_OK;
}

void lp_model_options_init(lp_model_options *o)
{
    memset(o, 0, sizeof *o);
    o->task = LP_MODEL_TASK_AUTO;
    o->pooling = LP_POOLING_CLS;
    o->exec = LP_EXEC_MODE_EAGER;
    o->seed = 42;
}

/* ---- blocks ----------------------------------------------------------------------------- */

lp_status lp_model__ensure(lp_model *m, int64_t B, int64_t T, bool shared, bool backward)
{
    if (!lp_model__batch_sizes_ok(m, B, T))
        return lp_err(LP_STATUS_RANGE, "%s/config.json: a batch of %lld x %lld overflows the activation sizes",
                      m->dir, (long long)B, (long long)T);
    lp_model_plan s = m->fam->plan(m, B, T, shared, backward);
    if (s.act > m->act_cap_floats) {
        lp_model__blk_free(m, m->act_block);
        m->act_cap_floats = 0;
        if (!(m->act_block = lp_model__blk_alloc(m, (size_t)s.act * sizeof(float), LP_MEM_CATEGORY_ACTIVATION,
                                                 "model activations")))
            return lp_err_wrap(LP_STATUS_NO_MEMORY, "model activations for batch %lld x %lld", (long long)B,
                               (long long)T);
        m->act_cap_floats = s.act;
    }
    if (s.u8 > m->act_cap_u8) {
        lp_model__blk_free(m, m->act_u8);
        m->act_cap_u8 = 0;
        if (!(m->act_u8 = lp_model__blk_alloc(m, (size_t)s.u8, LP_MEM_CATEGORY_ACTIVATION, "model dropout masks")))
            return lp_err_wrap(LP_STATUS_NO_MEMORY, "dropout masks for batch %lld x %lld", (long long)B,
                               (long long)T);
        m->act_cap_u8 = s.u8;
    }
    if (s.tmp > m->tmp_cap) {
        lp_model__blk_free(m, m->tmp_block);
        m->tmp_cap = 0;
        if (!(m->tmp_block = lp_model__blk_alloc(m, (size_t)s.tmp * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                                      "model backward scratch")))
            return lp_err_wrap(LP_STATUS_NO_MEMORY, "backward scratch for batch %lld x %lld", (long long)B,
                               (long long)T);
        m->tmp_cap = s.tmp;
    }
    if (s.in > m->in_cap) {
        lp_model__blk_free(m, m->in_block);
        m->in_cap = 0;
        if (!(m->in_block =
                  lp_model__blk_alloc(m, (size_t)s.in * sizeof(int32_t), LP_MEM_CATEGORY_INPUT, "model batch")))
            return lp_err_wrap(LP_STATUS_NO_MEMORY, "batch of %lld x %lld", (long long)B, (long long)T);
        if (m->dev) { // the host side of the batch, uploaded per pass
            lp_free(m->in_host);
            if (!(m->in_host =
                      lp_alloc((size_t)s.in * sizeof(int32_t), LP_MEM_CATEGORY_INPUT, "model batch (host)")))
                return lp_err_wrap(LP_STATUS_NO_MEMORY, "batch of %lld x %lld", (long long)B, (long long)T);
        }
        m->in_cap = s.in;
    }
    return LP_OK;
}

/* ---- load / free ------------------------------------------------------------------------ */

lp_status lp_model__open(const char *dir, const lp_model_options *opt, bool plan_only, lp_model **out)
{
    *out = NULL;
    lp_model *m = lp_calloc(1, sizeof *m);
    if (!m)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    if (opt)
        m->opt = *opt;
    else
        lp_model_options_init(&m->opt);
    lp_st_set *w = NULL;
    lp_status st = LP_OK;
    char path[4096];
    size_t len = 0;
    if (!(m->dir = lp_strdup(dir))) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
        goto fail;
    }
    snprintf(path, sizeof path, lp_path_is_gguf(dir) ? "%s" : "%s/config.json", dir);
    if (lp_path_is_gguf(dir)) { // a GGUF file: config.json text from its metadata, f32 weights from its tensors
        if ((st = lp_gguf_model_open(dir, &m->config_json, &w)) != LP_OK)
            goto fail;
        len = strlen(m->config_json);
    } else if ((st = lp_file_read_all(path, &m->config_json, &len)) != LP_OK)
        goto fail;
    if ((st = lp_hf_config_parse(m->config_json, len, path, &m->cfg)) != LP_OK)
        goto fail;
    m->fam = m->cfg.family == LP_MODEL_FAMILY_LLAMA ? &lp_family_llama : &lp_family_bert;
    m->init_range = 0.02;
    m->pooling = m->opt.pooling;
    bool oom;
    cJSON *root = lp_json_parse(m->config_json, len, NULL, &oom);
    if (oom) { // not a silent fallback to 0.02 (config.json parsed once already: no FORMAT here)
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing JSON", path);
        goto fail;
    }
    if (root) {
        const cJSON *ir = cJSON_GetObjectItemCaseSensitive(root, "initializer_range");
        if (cJSON_IsNumber(ir) && ir->valuedouble > 0 && ir->valuedouble < 10)
            m->init_range = ir->valuedouble;
        const cJSON *lpool = cJSON_GetObjectItemCaseSensitive(root, "loupe_pooling"); // as lp_model_save_hf wrote it
        m->pooling_saved = cJSON_IsString(lpool);
        if (cJSON_IsString(lpool) && lp_pooling_parse(lpool->valuestring, &m->pooling) != LP_OK) {
            cJSON_Delete(root);
            st = lp_err(LP_STATUS_FORMAT, "%s: \"loupe_pooling\" is '%s' (expected cls or mean)", path,
                        lpool->valuestring);
            goto fail;
        }
        cJSON_Delete(root);
    }

    const lp_hf_arch a = m->cfg.arch;
    const bool src_cls = a == LP_HF_ARCH_BERT_SEQ_CLS || a == LP_HF_ARCH_DISTILBERT_SEQ_CLS ||
                         a == LP_HF_ARCH_LLAMA_SEQ_CLS || a == LP_HF_ARCH_QWEN2_SEQ_CLS ||
                         a == LP_HF_ARCH_MISTRAL_SEQ_CLS;
    const bool src_lm = a == LP_HF_ARCH_LLAMA_CAUSAL_LM || a == LP_HF_ARCH_QWEN2_CAUSAL_LM ||
                        a == LP_HF_ARCH_MISTRAL_CAUSAL_LM;
    m->task = m->opt.task;
    if (m->task == LP_MODEL_TASK_AUTO)
        m->task = src_cls ? LP_MODEL_TASK_SEQ_CLS : src_lm ? LP_MODEL_TASK_CAUSAL_LM : LP_MODEL_TASK_BASE;
    m->has_head = m->task == LP_MODEL_TASK_SEQ_CLS || m->task == LP_MODEL_TASK_CAUSAL_LM;
    m->num_labels = m->opt.num_labels > 0 ? m->opt.num_labels : m->cfg.num_labels;
    if (m->num_labels < 1)
        m->num_labels = 2;

    if (!lp_path_is_gguf(dir) && (st = lp_st_set_open_weights(dir, &w)) != LP_OK)
        goto fail;
    if (!w && !m->opt.quiet) // config only: initialize everything from the seed
        fprintf(stderr, "loupe: %s has no weights: every parameter initialized from seed %llu (normal(0, %g))\n",
                dir, (unsigned long long)m->opt.seed, m->init_range);
    if ((st = m->fam->build(m, w)) != LP_OK ||
        (st = plan_only ? lp_model__peft_setup(m) : lp_model__fill_params(m)) != LP_OK)
        goto fail;
    m->prof_forward = lp_model__prof_name(m->prof_name, "", "forward", &st);
    m->prof_backward = lp_model__prof_name(m->prof_name, "", "backward", &st);
    m->prof_embed = lp_model__prof_name(m->prof_name, "", "embed", &st);
    if (st != LP_OK)
        goto fail;
    lp_st_set_close(w); // every tensor was copied (and converted) into the parameter block
    w = NULL;

    m->exec = m->opt.exec;
    m->training = m->opt.training;
    m->ckpt = m->opt.grad_checkpointing;
    m->dloss_scale = 1.0f;
    if (!plan_only && lp_kernels_device() != LP_DEVICE_CPU && (st = lp_model__to_device(m)) != LP_OK)
        goto fail;
    lp_rng_init(&m->rng, m->opt.seed, LP_RNG_STREAM_DROPOUT);
    if (!(m->layer_rng = lp_calloc((size_t)m->L, sizeof *m->layer_rng)) ||
        !(m->layer_out = lp_calloc((size_t)m->L, sizeof *m->layer_out)) ||
        !(m->ckpt_out = lp_calloc((size_t)m->L, sizeof *m->ckpt_out))) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
        goto fail;
    }
    if (!plan_only && m->opt.max_batch > 0 && m->opt.max_seq > 0 &&
        (st = lp_model__ensure(m, m->opt.max_batch, m->opt.max_seq, m->ckpt || m->opt.no_grad, !m->opt.no_grad)) != LP_OK)
        goto fail;
    *out = m;
    return LP_OK;
fail:
    if (st != LP_STATUS_NO_MEMORY && strstr(lp_err_msg(), dir) == NULL)
        lp_err_wrap(st, "loading model %s", dir);
    lp_st_set_close(w);
    lp_model_free(m);
    return st;
}

lp_status lp_model_load(const char *dir, const lp_model_options *opt, lp_model **out)
{
    return lp_model__open(dir, opt, false, out);
}

void lp_model_free(lp_model *m)
{
    if (!m)
        return;
    lp_model__bf16_free(m);
    lp_model__peft_free(m);
    lp_model__lazy_free(m);
    if (m->fam && m->fam->free)
        m->fam->free(m);
    lp_free(m->param_block);
    lp_model__blk_free(m, m->grad_block);
    lp_model__blk_free(m, m->act_block);
    lp_model__blk_free(m, m->act_u8);
    lp_model__blk_free(m, m->tmp_block);
    lp_model__blk_free(m, m->in_block);
    lp_model__device_free(m);
    for (size_t i = 0; i < m->n_params; i++)
        free(m->names[i]);
    free(m->names);
    free(m->params);
    free(m->slots);
    if (m->lins)
        for (size_t i = 0; i < m->n_lins; i++)
            free(m->lins[i].module);
    free(m->lins);
    free(m->layer_rng);
    free(m->layer_out);
    free(m->ckpt_out);
    if (m->label_names)
        for (int64_t i = 0; i < m->num_labels; i++)
            free(m->label_names[i]);
    free(m->label_names);
    lp_model_config_free(&m->cfg);
    free(m->config_json);
    free(m->dir);
    free(m);
}

void lp_model_set_training(lp_model *m, bool training)
{
    m->training = training;
    m->fwd_ok = m->loss_ok = false;
}
void lp_model_set_exec(lp_model *m, lp_exec_mode exec)
{
    m->exec = exec;
    m->fwd_ok = m->loss_ok = false;
}
void lp_model_set_grad_checkpointing(lp_model *m, bool on)
{
    m->ckpt = on;
    m->fwd_ok = m->loss_ok = false;
}
void lp_model_set_dloss_scale(lp_model *m, float scale)
{
    m->dloss_scale = scale;
}
void lp_model_set_head_grad_in_loss(lp_model *m, bool on)
{
    m->lm_dw_early = on;
}

/* ---- passes ------------------------------------------------------------------------------ */

static lp_nn_ctx run_ctx(lp_model *m, lp_rng *rng, int64_t B)
{
    return (lp_nn_ctx){.training = m->training,
                       .exec = m->exec,
                       .rng = rng,
                       .status = &m->pass_status,
                       .segments = m->segments,
                       .rows = B,
                       .row0 = m->slice_row0,
                       .global_rows = m->slice_rows};
}

/* Embeddings and the layer stack; the last hidden state is lp_model_hidden(m, L). */
lp_status lp_model__run_stack(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *type_ids,
                           int32_t B, int32_t T, bool need_grad)
{
    // without a backward to feed, the layers share one activation block whatever the mode
    const bool shared = m->ckpt || !need_grad;
    m->fwd_ok = m->loss_ok = false;
    if (B < 1 || T < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "model forward: batch %d x %d is empty", B, T);
    if (T > m->cfg.max_position_embeddings)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "model forward: sequence length %d exceeds the %lld positions of %s", T,
                      (long long)m->cfg.max_position_embeddings, m->dir);
    if (!ids)
        return lp_err(LP_STATUS_INVALID_ARG, "model forward: no token ids");
    lp_status st = lp_model__ensure(m, B, T, shared, need_grad);
    if (st != LP_OK)
        return st;
    m->fam->bind(m, B, T, shared);
    if ((st = lp_model__peft_bind(m, B, T)) != LP_OK)
        return st;
    const int64_t N = (int64_t)B * T;
    // on a device the batch is checked and laid out in the host shadow, then uploaded
    int32_t *h_ids = lp_model__in_host(m, m->ids), *h_mask = lp_model__in_host(m, m->mask);
    memcpy(h_ids, ids, (size_t)N * sizeof *ids);
    // a causal LM's mask may hold sample ids (packing: 1, 1, 2, 2, 2, 0 ...), each sample one
    // run in increasing order, so positions can restart and attention stay inside each sample
    const bool packs = m->task == LP_MODEL_TASK_CAUSAL_LM;
    m->segments = false;
    for (int64_t b = 0; b < B; b++) {
        int64_t real = 0;
        int32_t prev = 0;
        for (int64_t t = 0; t < T; t++) {
            int32_t v = mask ? mask[b * T + t] : 1;
            if (v < 0 || (v > 1 && !packs))
                return lp_err(LP_STATUS_INVALID_ARG, "model forward: attention mask [%lld, %lld] is %d (not 0/1%s)",
                              (long long)b, (long long)t, v, packs ? " or a sample id" : "");
            if (v && v < prev)
                return lp_err(LP_STATUS_INVALID_ARG,
                              "model forward: attention mask [%lld, %lld]: sample %d after sample %d (each packed "
                              "sample must be one run, in increasing order)",
                              (long long)b, (long long)t, v, prev);
            prev = v ? v : prev;
            m->segments = m->segments || v > 1;
            h_mask[b * T + t] = v;
            real += v != 0;
        }
        if (!real)
            return lp_err(LP_STATUS_INVALID_ARG, "model forward: row %lld of the batch has no real token",
                          (long long)b);
    }
    m->has_types = type_ids != NULL;
    if (type_ids)
        memcpy(lp_model__in_host(m, m->types), type_ids, (size_t)N * sizeof *type_ids);
    if (m->dev) { // ids, mask, types: adjacent in the family's layout, or uploaded one by one
        if ((st = lp_kernels_upload(m->ids, h_ids, (size_t)N * sizeof *ids)) != LP_OK ||
            (st = lp_kernels_upload(m->mask, h_mask, (size_t)N * sizeof *ids)) != LP_OK ||
            (type_ids && (st = lp_kernels_upload(m->types, lp_model__in_host(m, m->types),
                                                 (size_t)N * sizeof *ids)) != LP_OK))
            return lp_err_wrap(st, "model forward: uploading the batch");
    }

    m->pass_status = LP_OK;
    lp_model__bf16_refresh(m); // after an optimizer step: the bf16 copies follow the weights
    lp_nn_ctx ctx = run_ctx(m, &m->rng, B);
    m->pass_ctx = ctx; // adapters and quantized bases read the pass through their ctx pointer
    const float *x = NULL;
    if ((st = m->fam->embed_forward(m, &ctx, B, T, &x)) != LP_OK)
        return st;
    m->emb_out = x;
    for (int64_t l = 0; l < m->L; l++) {
        m->layer_rng[l] = m->rng; // the recompute replays this layer's dropout masks
        const float *y = m->fam->layer_forward(m, l, shared ? 0 : l, &ctx, x, B, T);
        if (m->kv_fill) // a prefill: the layer's keys and values stay for decoding
            m->fam->kv_store(m, l, shared ? 0 : l, m->kv_fill, B, T);
        if (shared) {
            lp_kernels_copy(m->ckpt_out[l], y, (size_t)N * m->cfg.hidden_size * sizeof(float));
            y = m->ckpt_out[l];
        }
        m->layer_out[l] = x = y;
    }
    if (m->pass_status != LP_OK) // a quantized or LoRA kernel failed (out of memory) inside the pass
        return lp_err_wrap(m->pass_status, "model forward");
    m->B = B;
    m->T = T;
    m->fwd_exec = m->exec;
    m->fwd_training = m->training;
    m->fwd_ckpt = shared;
    m->fwd_ok = true;
    return LP_OK;
}

const float *lp_model_hidden(const lp_model *m, int32_t i)
{
    if (!m->fwd_ok || i < 0 || i > m->L)
        return NULL;
    return i == 0 ? m->emb_out : m->layer_out[i - 1];
}

/* Rows of the logits: one per sequence, or one per token for a causal LM. */
static int64_t head_rows(const lp_model *m, int64_t B, int64_t T)
{
    return m->task == LP_MODEL_TASK_CAUSAL_LM ? B * T : B;
}

/* need_grad: keep what a backward needs; a causal LM's head then runs in the loss. lm_head:
 * an inference forward of a causal LM runs its head (logits, or the same work dropped). */
static lp_status forward_head(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *type_ids,
                              int32_t B, int32_t T, float *logits, bool need_grad, bool lm_head)
{
    if (!m->has_head)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "model %s was loaded without a classification head (task base): use "
                      "lp_model_embed, or load with task seq_cls",
                      m->dir);
    LP_PROF_SCOPE(m->prof_forward);
    lp_status st = lp_model__run_stack(m, ids, mask, type_ids, B, T, need_grad);
    if (st != LP_OK)
        return st;
    lp_nn_ctx ctx = run_ctx(m, &m->rng, B);
    m->lm_dh_ok = m->lm_dw_done = false;
    m->fam->head_forward(m, &ctx, lp_model_hidden(m, (int32_t)m->L), B, T);
    if (m->dev && m->pass_status != LP_OK) // a device's error, taken by the head's host round trip
        return lp_err_wrap(m->pass_status, "model forward");
    if (m->task == LP_MODEL_TASK_CAUSAL_LM) // the loss runs the head itself, chunk by chunk
        return need_grad || !lm_head ? LP_OK : lp_model__lm_logits(m, logits);
    // a memcpy on the CPU; on a device it waits for the pass and returns what its kernels kept
    // (an id out of range)
    return logits ? lp_kernels_download(logits, m->logits, (size_t)(head_rows(m, B, T) * m->n_classes) * sizeof(float))
                  : LP_OK;
}

static lp_status forward(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *type_ids,
                         int32_t B, int32_t T, float *logits, bool need_grad)
{
    return forward_head(m, ids, mask, type_ids, B, T, logits, need_grad, true);
}

/* m->labels = a causal LM's targets: token t predicts label t+1 (transformers shifts inside),
 * laid out in the host shadow (lm_loss.c counts them there) and uploaded to a device */
static lp_status shift_labels(lp_model *m, const int32_t *labels, int64_t B, int64_t T)
{
    const int32_t *mask = lp_model__in_host(m, m->mask);
    int32_t *out = lp_model__in_host(m, m->labels);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = b * T + t;
            // a padding position predicts nothing: under left padding transformers counts the
            // last pad (a query that sees no key) as predicting the first real token
            // and under packing the last token of a sample predicts nothing of the next one
            const bool next = t + 1 < T && mask[i] && (!m->segments || mask[i + 1] == mask[i]);
            out[i] = next ? labels[i + 1] : -100;
        }
    lp_status st = m->dev ? lp_kernels_upload(m->labels, out, (size_t)(B * T) * sizeof *out) : LP_OK;
    return st == LP_OK ? LP_OK : lp_err_wrap(st, "model loss: uploading the labels");
}

lp_status lp_model_token_losses(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *labels,
                                int32_t B, int32_t T, float *token_loss)
{
    if (!labels || !token_loss)
        return lp_err(LP_STATUS_INVALID_ARG, "model token losses: no labels or no output");
    if (m->task != LP_MODEL_TASK_CAUSAL_LM)
        return lp_err(LP_STATUS_INVALID_ARG, "model %s: per-token losses need a causal LM", m->dir);
    lp_status st = forward_head(m, ids, mask, NULL, B, T, NULL, false, false);
    if (st != LP_OK)
        return st;
    if ((st = shift_labels(m, labels, B, T)) != LP_OK)
        return st;
    return lp_model__lm_token_losses(m, token_loss);
}

lp_status lp_model_forward(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *type_ids,
                           int32_t B, int32_t T, float *logits)
{
    return forward(m, ids, mask, type_ids, B, T, logits, false);
}

lp_status lp_model_loss_forward(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *type_ids,
                                const int32_t *labels, int32_t B, int32_t T, float *logits, float *loss)
{
    if (!labels)
        return lp_err(LP_STATUS_INVALID_ARG, "model loss: no labels");
    lp_status st = forward(m, ids, mask, type_ids, B, T, logits, true);
    if (st != LP_OK)
        return st;
    const int64_t rows = head_rows(m, B, T);
    if (m->task == LP_MODEL_TASK_CAUSAL_LM) {
        if ((st = shift_labels(m, labels, B, T)) != LP_OK)
            return st;
    } else if ((st = lp_kernels_upload(m->labels, labels, (size_t)B * sizeof *labels)) !=
               LP_OK) // memcpy on the CPU
        return lp_err_wrap(st, "model loss: uploading the labels");
    // -100 is ignored, as in transformers
    if (m->task == LP_MODEL_TASK_CAUSAL_LM) {
        // a training step with a frozen head (or one whose caller promised the backward:
        // lp_model_set_head_grad_in_loss) takes the head's gradients while each chunk's
        // logits are at hand, d(head input) into the backward's scratch (see lm_loss.c)
        const bool dh_now = m->training && !m->opt.no_grad && (!m->lm_head->dw || m->lm_dw_early);
        float *dh = dh_now ? m->tmp_block + 2 * lp_model__up16(rows * m->cfg.hidden_size) : NULL;
        st = lp_model__lm_loss(m, logits, dh, &m->loss);
    } else {
        st = lp_model__cross_entropy(m, &m->loss, m->lse, m->logits, m->labels, rows);
    }
    if (st != LP_OK)
        return lp_err_wrap(st, "model loss");
    *loss = m->loss;
    m->loss_ok = true;
    return LP_OK;
}

lp_status lp_model_backward(lp_model *m)
{
    if (m->opt.no_grad)
        return lp_err(LP_STATUS_INVALID_ARG, "model %s was loaded with no_grad: it has no gradients", m->dir);
    if (!m->loss_ok)
        return lp_err(LP_STATUS_INVALID_ARG, "model backward: no loss forward to back-propagate (call "
                                             "lp_model_loss_forward first; a backward consumes it)");
    if (m->lm_dw_done && m->lm_dh_scale != m->dloss_scale) {
        m->loss_ok = false; // the head's gradient is in, under the other scale: nothing to mend
        return lp_err(LP_STATUS_INVALID_ARG,
                      "model backward: dloss_scale changed from %g to %g after a loss forward that took the "
                      "head's weight gradient (lp_model_set_head_grad_in_loss promises the same scale)",
                      (double)m->lm_dh_scale, (double)m->dloss_scale);
    }
    LP_PROF_SCOPE(m->prof_backward);
    const int64_t B = m->B, T = m->T, N = B * T, C = m->cfg.hidden_size, rows = head_rows(m, B, T);
    // the backward's scratch: two (N,C) gradient buffers, the family's scratch, dlogits last
    // (a causal LM's head gradient goes to the family's scratch, chunk by chunk: no dlogits)
    const bool lm = m->task == LP_MODEL_TASK_CAUSAL_LM;
    float *dA = m->tmp_block, *dB = dA + lp_model__up16(N * C), *scratch = dB + lp_model__up16(N * C);
    float *dlogits = lm ? NULL : m->tmp_block + m->tmp_cap - lp_model__up16(rows * m->n_classes);
    lp_nn_ctx ctx = {.training = m->fwd_training,
                     .exec = m->fwd_exec,
                     .rng = NULL,
                     .status = &m->pass_status,
                     .segments = m->segments};
    m->pass_status = LP_OK;
    const bool emb_grad = m->fam->embed_trainable(m);

    if (lm)
        lp_model__lm_backward(m, scratch);
    else
        lp_cross_entropy_backward(dlogits, m->logits, m->lse, m->labels, rows, m->n_classes, -100,
                                  m->dloss_scale);
    m->fam->head_backward(m, dA, dlogits, scratch, B, T);
    if (m->grad_ready)
        m->grad_ready(m->grad_ready_user, (int32_t)m->L);
    for (int64_t l = m->L - 1; l >= 0; l--) {
        const float *x = lp_model_hidden(m, (int32_t)l);
        const int64_t slot = m->fwd_ckpt ? 0 : l;
        if (m->fwd_ckpt) { // recompute the layer from its kept input with the same dropout masks
            lp_rng r = m->layer_rng[l];
            lp_nn_ctx rc = {.training = m->fwd_training,
                            .exec = m->fwd_exec,
                            .rng = &r,
                            .status = &m->pass_status,
                            .segments = m->segments,
                            .rows = B,
                            .row0 = m->slice_row0,
                            .global_rows = m->slice_rows,
                            .recompute = true};
            m->pass_ctx = rc;
            (void)m->fam->layer_forward(m, l, slot, &rc, x, B, T);
        }
        m->pass_ctx = ctx;
        float *dx = l > 0 || emb_grad ? dB : NULL;
        m->fam->layer_backward(m, l, slot, &ctx, dx, dA, x, scratch, B, T);
        if (m->grad_ready)
            m->grad_ready(m->grad_ready_user, (int32_t)l);
        float *t = dA;
        dA = dB;
        dB = t;
    }
    if (emb_grad)
        m->fam->embed_backward(m, dA, scratch, B, T);
    m->loss_ok = m->lm_dw_done = false;
    if (m->pass_status != LP_OK)
        return lp_err_wrap(m->pass_status, "model backward");
    return LP_OK;
}

void lp_model_zero_grad(lp_model *m)
{
    LP_PROF_SCOPE(LP_PROF_NAME_OPTIMIZER_ZERO_GRAD);
    if (m->lm_dw_done) // that forward's head gradient is gone: its backward would miss it
        m->loss_ok = m->lm_dw_done = false;
    if (m->n_grad_floats) // memset on the CPU
        lp_kernels_memset(m->grad_block, 0, (size_t)m->n_grad_floats * sizeof(float));
}

void lp_model_set_grad_ready(lp_model *m, lp_model_grad_ready_fn fn, void *user)
{
    m->grad_ready = fn;
    m->grad_ready_user = user;
}

float *lp_model_grad_block(lp_model *m, int64_t *n_floats)
{
    *n_floats = m->n_grad_floats;
    return m->n_grad_floats ? m->grad_block : NULL;
}

double lp_model_grad_clip(lp_model *m, double max_norm)
{
    // every gradient lives in the one block; the padding between tensors stays zero
    float *g = m->grad_block;
    int64_t n = m->n_grad_floats;
    if (!n)
        return 0.0;
    return max_norm > 0 ? lp_grad_clip(&g, &n, 1, max_norm) : lp_grad_norm(&g, &n, 1);
}

void lp_model_rng_get(const lp_model *m, lp_rng *out) { *out = m->rng; }

void lp_model_rng_set(lp_model *m, const lp_rng *r) { m->rng = *r; }

void lp_model_set_batch_slice(lp_model *m, int64_t row0, int64_t global_rows)
{
    m->slice_row0 = global_rows > 0 ? row0 : 0;
    m->slice_rows = global_rows > 0 ? global_rows : 0;
}

lp_status lp_model_embed(lp_model *m, const int32_t *ids, const int32_t *mask, const int32_t *type_ids,
                         int32_t B, int32_t T, bool normalize, float *out)
{
    LP_PROF_SCOPE(m->prof_embed);
    bool tr = m->training;
    m->training = false;
    lp_status st = lp_model__run_stack(m, ids, mask, type_ids, B, T, false);
    m->training = tr;
    if (st != LP_OK)
        return st;
    const int64_t C = m->cfg.hidden_size;
    float *o = out;
    if (m->dev && !(o = lp_kernels_dev_alloc((size_t)(B * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "embeddings")))
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "model embed: %d x %lld on the device", B, (long long)C);
    lp_mean_pool_forward(o, lp_model_hidden(m, (int32_t)m->L), m->mask, B, T, C);
    if (normalize)
        lp_l2_normalize(o, B, C);
    if (m->dev) {
        st = lp_kernels_download(out, o, (size_t)(B * C) * sizeof(float));
        lp_kernels_dev_free(o);
    }
    return st;
}

/* ---- parameters and info ---------------------------------------------------------------- */

const lp_model_param *lp_model_params(const lp_model *m, size_t *n_out)
{
    if (n_out)
        *n_out = m->n_params;
    return m->params;
}

const lp_model_param *lp_model_param_find(const lp_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name))
            return &m->params[i];
    return NULL;
}

lp_status lp_model__layout_grads(lp_model *m)
{
    int64_t n = 0;
    for (size_t i = 0; i < m->n_params; i++)
        if (m->params[i].trainable && !m->opt.no_grad)
            n += (m->params[i].numel + 15) & ~(int64_t)15; // 64-byte aligned, as the parameters
    float *g = NULL;
    if (n && !(g = lp_model__blk_alloc(m, (size_t)n * sizeof(float), LP_MEM_CATEGORY_GRADIENT, "model gradients")))
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "%s: allocating gradients of %lld floats", m->dir,
                           (long long)n);
    int64_t off = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        lp_model_param *p = &m->params[i];
        lp_model_pslot *s = &m->slots[i];
        int64_t goff = -1;
        if (p->trainable && !m->opt.no_grad) {
            goff = off;
            off += (p->numel + 15) & ~(int64_t)15;
            if (s->goff >= 0) // keep what was accumulated (a memcpy on the CPU)
                lp_kernels_copy(g + goff, m->grad_block + s->goff, (size_t)p->numel * sizeof(float));
        }
        s->goff = goff;
        p->grad = goff >= 0 ? g + goff : NULL;
        *s->g = p->grad;
    }
    lp_model__blk_free(m, m->grad_block);
    m->grad_block = g;
    m->n_grad_floats = n;
    return LP_OK;
}

lp_status lp_model_set_trainable(lp_model *m, const char *name, bool trainable)
{
    for (size_t i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) {
            lp_model_param *p = &m->params[i];
            if (p->trainable == trainable)
                return LP_OK;
            p->trainable = trainable;
            lp_status st = lp_model__layout_grads(m); // frozen parameters get no gradient buffer
            if (st != LP_OK)
                p->trainable = !trainable;
            return st;
        }
    return lp_err(LP_STATUS_INVALID_ARG, "model %s has no parameter '%s'", m->dir, name);
}

double lp_model_forward_flops(const lp_model *m, int64_t B, int64_t T)
{
    return m->fam->forward_flops(m, B, T);
}

void lp_model_info_get(const lp_model *m, lp_model_info *o)
{
    memset(o, 0, sizeof *o);
    o->family = m->cfg.family;
    o->arch = m->save_arch;
    o->distilbert = m->cfg.distilbert;
    o->has_head = m->has_head;
    o->task = m->task;
    o->pooling = m->pooling;
    o->num_layers = m->L;
    o->hidden_size = m->cfg.hidden_size;
    o->num_heads = m->cfg.num_heads;
    o->intermediate_size = m->cfg.intermediate_size;
    o->vocab_size = m->cfg.vocab_size;
    o->max_positions = m->cfg.max_position_embeddings;
    o->num_labels = m->has_head ? m->num_labels : 0;
    o->n_tensors = m->n_params;
    for (size_t i = 0; i < m->n_params; i++) {
        o->n_params += (uint64_t)m->params[i].numel;
        if (m->params[i].trainable)
            o->n_trainable += (uint64_t)m->params[i].numel;
        if (!m->params[i].from_checkpoint)
            o->n_initialized++;
    }
    for (size_t i = 0; i < m->n_lins; i++) // quantized bases are parameters too, outside the f32 table
        if (m->lins[i].q)
            o->n_params += (uint64_t)(m->lins[i].lin->in * m->lins[i].lin->out);
    o->activation_bytes = (uint64_t)m->act_cap_floats * sizeof(float) + (uint64_t)m->act_cap_u8;
    o->exec = m->exec;
    o->training = m->training;
    o->grad_checkpointing = m->ckpt;
    for (size_t i = 0; i < m->n_lins; i++) // 2 x the layers' matmul weights
        o->forward_flops_per_token += 2.0 * (double)m->lins[i].lin->in * (double)m->lins[i].lin->out;
}

const lp_model_config *lp_model_config_get(const lp_model *m)
{
    return &m->cfg;
}

lp_status lp_model_set_label_names(lp_model *m, const char *const *names, int32_t n)
{
    if (n != m->num_labels)
        return lp_err(LP_STATUS_INVALID_ARG, "model %s has %lld labels, %d names given", m->dir,
                      (long long)m->num_labels, n);
    char **v = lp_calloc((size_t)n, sizeof *v);
    if (!v)
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    for (int32_t i = 0; i < n; i++)
        if (!(v[i] = lp_strdup(names[i] ? names[i] : ""))) {
            for (int32_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
        }
    if (m->label_names)
        for (int64_t i = 0; i < m->num_labels; i++)
            free(m->label_names[i]);
    free(m->label_names);
    m->label_names = v;
    return LP_OK;
}
