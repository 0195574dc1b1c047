/* The parameter table every family builds through: entries with HF names and shapes, the
 * one parameter block they live in, their sources (converted to f32) or initialization,
 * and the gradient block for the trainable ones. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

lp_status lp_model__add_param(lp_model *m, const char *name, int ndim, int64_t d0, int64_t d1, float **w,
                              float **g, const lp_st_tensor *src, int init, bool no_decay)
{
    if (m->n_params == m->cap_params) {
        size_t cap = m->cap_params ? 2 * m->cap_params : 64;
        lp_model_param *p = lp_realloc(m->params, cap * sizeof *p);
        if (!p)
            return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory for the parameter table");
        m->params = p;
        lp_model_pslot *s = lp_realloc(m->slots, cap * sizeof *s);
        if (!s)
            return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory for the parameter table");
        m->slots = s;
        char **n = lp_realloc(m->names, cap * sizeof *n);
        if (!n)
            return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory for the parameter table");
        m->names = n;
        m->cap_params = cap;
    }
    size_t i = m->n_params;
    bool ovf = false; // sizes come from config.json: checked, never wrapped
    int64_t numel = lp_size_mul(&ovf, d0, ndim == 2 ? d1 : 1);
    int64_t end = lp_size_add(&ovf, m->n_floats, lp_size_round_up(&ovf, numel, 16));
    if (ovf || !lp_size_bytes_ok(end, sizeof(float)))
        return lp_err(LP_STATUS_RANGE, "%s/config.json: parameter '%s' [%lld, %lld] overflows the parameter block",
                      m->dir, name, (long long)d0, (long long)d1);
    if (!(m->names[i] = lp_strdup(name)))
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory for the parameter table");
    m->n_params++;
    lp_model_param *p = &m->params[i];
    memset(p, 0, sizeof *p);
    p->name = m->names[i];
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim == 2 ? d1 : 0;
    p->numel = numel;
    p->trainable = true;
    p->no_decay = no_decay;
    p->category = LP_MEM_CATEGORY_PARAMETER;
    p->from_checkpoint = src != NULL;
    lp_model_pslot *s = &m->slots[i];
    memset(s, 0, sizeof *s);
    s->w = w;
    s->g = g;
    s->src = src;
    s->init = init;
    s->pad_row = -1;
    s->goff = -1;
    s->offset = m->n_floats;
    m->n_floats = end; // 16-float (64-byte) alignment for every tensor
    return LP_OK;
}

const char *lp_model__prof_name(const char *fam, const char *mid, const char *dir, lp_status *st)
{
    char b[512];
    snprintf(b, sizeof b, "%s.%s%s%s", fam, mid, *mid ? "." : "", dir);
    const char *s = lp_prof_intern(b);
    if (!s)
        *st = lp_err(LP_STATUS_NO_MEMORY, "model: out of memory interning profiler names");
    return s;
}

void lp_model__convert(float *dst, const lp_st_tensor *t)
{
    lp_model__convert_n(dst, t->data, t->dtype, (int64_t)t->numel);
}

void lp_model__convert_n(float *dst, const void *src, lp_st_dtype dtype, int64_t n)
{
    switch (dtype) {
    case LP_ST_DTYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case LP_ST_DTYPE_F16:
        lp_f16_to_f32_n(dst, src, n);
        break;
    case LP_ST_DTYPE_BF16:
        lp_bf16_to_f32_n(dst, src, n);
        break;
    default: {
        const unsigned char *s = src;
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, s + 8 * i, 8);
            dst[i] = (float)d;
        }
    }
    }
}

/* DistilBERT's create_sinusoidal_embeddings: even columns sin, odd columns cos of
 * pos / 10000^(2*(j/2)/dim). */
static void sinusoid(float *w, int64_t P, int64_t C)
{
    for (int64_t p = 0; p < P; p++)
        for (int64_t j = 0; j < C; j++) {
            double a = (double)p / pow(10000.0, 2.0 * (double)(j / 2) / (double)C);
            w[p * C + j] = (float)(j % 2 ? cos(a) : sin(a));
        }
}

lp_status lp_model__fill_params(lp_model *m)
{
    lp_status st = lp_model__peft_setup(m); // adapters, frozen base, quantized bases
    if (st != LP_OK)
        return st;
    /* blocks */
    if (!(m->param_block =
              lp_alloc((size_t)m->n_floats * sizeof(float), LP_MEM_CATEGORY_PARAMETER, "model parameters")))
        return lp_err_wrap(LP_STATUS_NO_MEMORY, "%s: allocating %lld parameters", m->dir,
                           (long long)m->n_floats);
    for (size_t i = 0; i < m->n_params; i++) { // data pointers first: the gradient layout sets grads
        m->params[i].data = m->param_block + m->slots[i].offset;
        *m->slots[i].w = m->params[i].data;
    }
    if ((st = lp_model__layout_grads(m)) != LP_OK)
        return st;
    lp_rng rng;
    lp_rng_init(&rng, m->opt.seed, LP_RNG_STREAM_INIT);
    for (size_t i = 0; i < m->n_params; i++) {
        lp_model_param *p = &m->params[i];
        lp_model_pslot *s = &m->slots[i];
        if (m->n_replay) /* a packed LoRA base: each draw where the f32 model makes it */
            rng.offset = i < m->n_replay ? s->rng_at : i == m->n_replay ? m->rng_end : rng.offset;
        if (lp_model__lazy_wanted(m, i)) {
            if ((st = lp_model__lazy_open(m, i)) != LP_OK)
                return st;
            s->lazy = true;
            continue;
        }
        if (s->src) {
            lp_model__convert(p->data, s->src);
            continue;
        }
        switch (s->init) {
        case LP_INIT_NORMAL:
            lp_rng_normal(&rng, p->data, p->numel, 0.0f, (float)m->init_range);
            if (s->pad_row >= 0) // nn.Embedding(padding_idx) starts with a zero row
                memset(p->data + s->pad_row * p->shape[1], 0, (size_t)p->shape[1] * sizeof(float));
            break;
        case LP_INIT_ONE:
            for (int64_t k = 0; k < p->numel; k++)
                p->data[k] = 1.0f;
            break;
        case LP_INIT_SINUSOID:
            sinusoid(p->data, p->shape[0], p->shape[1]);
            break;
        case LP_INIT_KAIMING: {
            float bound = 1.0f / sqrtf((float)p->shape[1]);
            lp_rng_uniform(&rng, p->data, p->numel, -bound, bound);
            break;
        }
        default:
            break; // zero: lp_alloc zero-fills
        }
    }
    if ((st = lp_model__check_finite(m)) != LP_OK) // NaN/Inf in the file: named now, not as "loss is NaN"
        return st;
    if ((st = lp_model__peft_finish(m)) != LP_OK)
        return st;
    return lp_model__bf16_setup(m);
}
