/* The KV cache and the generation entry points: a prefill runs the ordinary forward (so every
 * Linear path, LoRA and quantized bases included, is the training one) while each layer's
 * rotated keys and values are copied into the cache, then logits for the last real token only;
 * a decode step runs one token per sequence through the family's decode_step. The cache is one
 * allocation under LP_MEM_CATEGORY_KV_CACHE, sized by lp_model_kv_bytes (what inspect predicts). */
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

/* Largest head size the decode kernel's tiles hold (attention_decode.c) and largest query
 * group per kv head. */
#define KV_MAX_D 512
#define KV_MAX_GROUP 64

static int64_t up64(int64_t n)
{
    return (n + 63) & ~(int64_t)63;
}

/* Bytes of one layer's keys (or values). */
static int64_t layer_bytes(const lp_model_config *c, int64_t B, int64_t cap, bool f16)
{
    return up64(B * c->num_kv_heads * cap * c->head_dim * (f16 ? 2 : 4));
}

uint64_t lp_model_kv_bytes(const lp_model_config *c, int64_t B, int64_t cap, lp_dtype dtype)
{
    const bool f16 = dtype == LP_DTYPE_F16;
    return (uint64_t)(2 * c->num_layers * layer_bytes(c, B, cap, f16) + up64(B * cap * 4) + up64(B * 4));
}

lp_kv_geom lp_kv__geom(const lp_kv_cache *kv, int64_t H)
{
    const lp_model_config *c = &kv->m->cfg;
    return (lp_kv_geom){.B = kv->B, .H = H, .Hkv = kv->Hkv, .D = kv->D, .cap = kv->cap, .T = kv->T,
                        .window = c->sliding_window > 0 ? c->sliding_window : 0, .f16 = kv->f16};
}

lp_status lp_model_kv_init(lp_model *m, int32_t B, int32_t cap, lp_dtype dtype, lp_kv_cache **out)
{
    *out = NULL;
    const lp_model_config *c = &m->cfg;
    if (!m->fam->decode_step || m->task != LP_MODEL_TASK_CAUSAL_LM)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: generation needs a causal LM of the llama family (this is a %s %s)",
                      m->dir, m->fam->name, m->task == LP_MODEL_TASK_CAUSAL_LM ? "causal LM" : "classifier or encoder");
    if (m->dev)
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "%s: KV-cache generation runs on the CPU only (the model is on %s)", m->dir,
                      lp_device_name(lp_kernels_device()));
    if (c->head_dim > KV_MAX_D || c->num_heads / c->num_kv_heads > KV_MAX_GROUP)
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "%s/config.json: head size %lld (or %lld query heads per kv head) exceeds the decode "
                      "kernel's %d (%d)",
                      m->dir, (long long)c->head_dim, (long long)(c->num_heads / c->num_kv_heads), KV_MAX_D,
                      KV_MAX_GROUP);
    if (dtype != LP_DTYPE_F32 && dtype != LP_DTYPE_F16)
        return lp_err(LP_STATUS_INVALID_ARG, "kv cache: dtype %s (f32 or f16 only)", lp_dtype_name(dtype));
    if (B < 1 || cap < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "kv cache: %d sequences x %d columns is empty", B, cap);
    if (cap > c->max_position_embeddings)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "%s/config.json: %d tokens (prompt + new) exceed the model's %lld positions", m->dir, cap,
                      (long long)c->max_position_embeddings);
    lp_kv_cache *kv = lp_calloc(1, sizeof *kv);
    if (!kv)
        return lp_err(LP_STATUS_NO_MEMORY, "kv cache: out of memory");
    kv->m = m;
    kv->B = B;
    kv->cap = cap;
    kv->L = c->num_layers;
    kv->Hkv = c->num_kv_heads;
    kv->D = c->head_dim;
    kv->f16 = dtype == LP_DTYPE_F16;
    kv->nbytes = lp_model_kv_bytes(c, B, cap, dtype);
    kv->k = lp_calloc((size_t)(2 * kv->L), sizeof *kv->k);
    kv->block = kv->k ? lp_alloc((size_t)kv->nbytes, LP_MEM_CATEGORY_KV_CACHE, "kv cache") : NULL;
    if (!kv->block) {
        lp_kv_cache_free(kv);
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "kv cache of %d x %d tokens (%.1f MiB)", B, cap,
                           (double)lp_model_kv_bytes(c, B, cap, dtype) / 1048576.0);
    }
    kv->v = kv->k + kv->L;
    uint8_t *p = kv->block;
    const int64_t lb = layer_bytes(c, B, cap, kv->f16);
    for (int64_t l = 0; l < kv->L; l++) {
        kv->k[l] = p, p += lb;
        kv->v[l] = p, p += lb;
    }
    kv->mask = (int32_t *)(void *)p;
    kv->pos = (int32_t *)(void *)(p + up64((int64_t)B * cap * 4));
    lp_kv_cache_reset(kv);
    *out = kv;
    return LP_OK;
}

void lp_kv_cache_free(lp_kv_cache *kv)
{
    if (!kv)
        return;
    lp_free(kv->block);
    free(kv->k);
    free(kv);
}

void lp_kv_cache_reset(lp_kv_cache *kv)
{
    kv->T = 0;
    memset(kv->mask, 0, (size_t)(kv->B * kv->cap) * sizeof *kv->mask);
    memset(kv->pos, 0, (size_t)kv->B * sizeof *kv->pos);
}

int32_t lp_kv_cache_len(const lp_kv_cache *kv)
{
    return (int32_t)kv->T;
}

uint64_t lp_kv_cache_nbytes(const lp_kv_cache *kv)
{
    return kv->nbytes;
}

lp_status lp_model_prefill(lp_model *m, lp_kv_cache *kv, const int32_t *ids, const int32_t *mask, int32_t B,
                           int32_t T, float *logits)
{
    if (kv->m != m)
        return lp_err(LP_STATUS_INVALID_ARG, "prefill: the kv cache was made for another model");
    if (B != kv->B || T < 1 || T > kv->cap)
        return lp_err(LP_STATUS_INVALID_ARG, "prefill: %d prompts of %d tokens do not fit a cache of %lld x %lld", B,
                      T, (long long)kv->B, (long long)kv->cap);
    if (kv->T != 0)
        return lp_err(LP_STATUS_INVALID_ARG, "prefill: the kv cache holds %lld tokens (reset it first)",
                      (long long)kv->T);
    m->kv_fill = kv;
    lp_status st = lp_model__run_stack(m, ids, mask, NULL, B, T, false);
    m->kv_fill = NULL;
    if (st != LP_OK)
        return st;
    m->fam->last_logits(m, logits, B, T);
    if (m->pass_status != LP_OK)
        return lp_err_wrap(m->pass_status, "prefill");
    for (int64_t b = 0; b < B; b++) {
        int32_t n = 0;
        for (int64_t t = 0; t < T; t++)
            n += kv->mask[b * kv->cap + t] = m->mask[b * T + t];
        kv->pos[b] = n; // positions are cumsum(mask) - 1: the next token's is the count so far
    }
    kv->T = T;
    return LP_OK;
}

lp_status lp_model_decode(lp_model *m, lp_kv_cache *kv, const int32_t *ids, float *logits)
{
    if (kv->m != m)
        return lp_err(LP_STATUS_INVALID_ARG, "decode: the kv cache was made for another model");
    if (kv->T < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "decode: no prompt was prefilled");
    if (kv->T >= kv->cap)
        return lp_err(LP_STATUS_INVALID_ARG, "decode: the kv cache is full (%lld tokens)", (long long)kv->cap);
    for (int64_t b = 0; b < kv->B; b++)
        kv->mask[b * kv->cap + kv->T] = 1;
    kv->T++;
    lp_status st = m->fam->decode_step(m, kv, ids, logits);
    if (st != LP_OK) { // the step did not happen: the column stays free
        kv->T--;
        for (int64_t b = 0; b < kv->B; b++)
            kv->mask[b * kv->cap + kv->T] = 0;
        return st;
    }
    for (int64_t b = 0; b < kv->B; b++)
        kv->pos[b]++;
    return LP_OK;
}
