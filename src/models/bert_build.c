/* The bert family's construction: the parameter table (HF names, shapes, where each lands in
 * the modules), the source tensor of each (through io's parameter map) or its
 * initialization, and the module wiring (dropouts, GELU kind, profiler range names). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

#define NAME_MAX_LEN 160

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
    // 16-float (64-byte) alignment for every tensor
    m->n_floats = end;
    return LP_OK;
}

/* Source tensor of a role (NULL when absent or no checkpoint). */
static const lp_st_tensor *src_of(const lp_param_map *map, lp_param_role role, int32_t layer)
{
    if (!map)
        return NULL;
    const lp_param_binding *b = lp_param_map_find(map, role, layer);
    return b ? b->tensor : NULL;
}

static const char *intern(const char *fam, const char *mid, const char *dir, lp_status *st)
{
    char b[2 * NAME_MAX_LEN + 32];
    snprintf(b, sizeof b, "%s.%s.%s", fam, mid, dir);
    const char *s = lp_prof_intern(b);
    if (!s)
        *st = lp_err(LP_STATUS_NO_MEMORY, "model: out of memory interning profiler names");
    return s;
}

#define TRY(x)                                                                                               \
    do {                                                                                                     \
        lp_status st_ = (x);                                                                                 \
        if (st_ != LP_OK)                                                                                    \
            return st_;                                                                                      \
    } while (0)

/* A Linear: weight (+ bias), its names and profiler ranges. */
static lp_status add_linear(lp_model *m, lp_nn_linear *l, const char *hf_base, const char *fam,
                            const char *rng, int64_t out, int64_t in, const lp_st_tensor *w,
                            const lp_st_tensor *b)
{
    char n[NAME_MAX_LEN];
    lp_status st = LP_OK;
    l->in = in;
    l->out = out;
    snprintf(n, sizeof n, "%s.weight", hf_base);
    TRY(lp_model__add_param(m, n, 2, out, in, &l->w, &l->dw, w, LP_INIT_NORMAL, false));
    snprintf(n, sizeof n, "%s.bias", hf_base);
    TRY(lp_model__add_param(m, n, 1, out, 0, &l->b, &l->db, b, LP_INIT_ZERO, true));
    l->fwd_name = intern(fam, rng, "forward", &st);
    l->bwd_name = intern(fam, rng, "backward", &st);
    return st;
}

static lp_status add_norm(lp_model *m, lp_nn_layernorm *ln, const char *hf_base, const char *fam,
                          const char *rng, const lp_st_tensor *w, const lp_st_tensor *b)
{
    char n[NAME_MAX_LEN];
    lp_status st = LP_OK;
    ln->C = m->cfg.hidden_size;
    ln->eps = (float)m->cfg.norm_eps;
    snprintf(n, sizeof n, "%s.weight", hf_base);
    TRY(lp_model__add_param(m, n, 1, ln->C, 0, &ln->w, &ln->dw, w, LP_INIT_ONE, true));
    snprintf(n, sizeof n, "%s.bias", hf_base);
    TRY(lp_model__add_param(m, n, 1, ln->C, 0, &ln->b, &ln->db, b, LP_INIT_ZERO, true));
    ln->fwd_name = intern(fam, rng, "forward", &st);
    ln->bwd_name = intern(fam, rng, "backward", &st);
    return st;
}

/* A head tensor looked up by its top-level name; a shape mismatch on the classifier (other
 * num_labels) re-initializes it, on anything else it is an error. */
static lp_status head_src(const lp_model *m, const lp_st_set *w, const char *name, int64_t d0, int64_t d1,
                          bool reinit_ok, const lp_st_tensor **out)
{
    *out = NULL;
    const lp_st_tensor *t = w ? lp_st_set_find(w, name) : NULL;
    if (!t)
        return LP_OK;
    bool ok = (d1 ? t->ndim == 2 && t->shape[1] == d1 : t->ndim == 1) && t->shape[0] == d0;
    if (!ok) {
        if (reinit_ok) {
            if (!m->opt.quiet)
                fprintf(stderr,
                        "loupe: %s: '%s' has %lld rows but the model has %lld labels: re-initialized\n",
                        t->file, name, (long long)t->shape[0], (long long)d0);
            return LP_OK;
        }
        return lp_err(LP_STATUS_FORMAT,
                      "%s: tensor '%s' does not have the shape [%lld%s%lld] the config implies", t->file,
                      name, (long long)d0, d1 ? ", " : "", d1 ? (long long)d1 : 0LL);
    }
    if (t->dtype != LP_ST_DTYPE_F32 && t->dtype != LP_ST_DTYPE_F16 && t->dtype != LP_ST_DTYPE_BF16 &&
        t->dtype != LP_ST_DTYPE_F64)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' has dtype %s; weights must be floating point",
                      t->file, name, lp_st_dtype_name(t->dtype));
    *out = t;
    return LP_OK;
}

void lp_model__convert(float *dst, const lp_st_tensor *t)
{
    int64_t n = (int64_t)t->numel;
    switch (t->dtype) {
    case LP_ST_DTYPE_F32:
        memcpy(dst, t->data, (size_t)n * sizeof(float));
        break;
    case LP_ST_DTYPE_F16:
        lp_f16_to_f32_n(dst, t->data, n);
        break;
    case LP_ST_DTYPE_BF16:
        lp_bf16_to_f32_n(dst, t->data, n);
        break;
    default: {
        const unsigned char *s = t->data;
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

static lp_status wire(lp_model *m, const lp_st_set *w, const lp_param_map *map)
{
    const lp_model_config *c = &m->cfg;
    const bool di = c->distilbert;
    const char *fam = di ? "distilbert" : "bert";
    const char *pfx = m->has_head ? (di ? "distilbert." : "bert.") : "";
    const int64_t H = c->hidden_size, I = c->intermediate_size, NH = c->num_heads;
    char n[NAME_MAX_LEN], r[NAME_MAX_LEN];
    lp_status st = LP_OK;

    /* embeddings */
    lp_nn_embedding *e = &m->emb;
    e->V = c->vocab_size;
    e->P = c->max_position_embeddings;
    e->TT = di ? 0 : c->type_vocab_size;
    e->C = H;
    e->pad_id = c->pad_token_id >= 0 && c->pad_token_id < c->vocab_size ? (int32_t)c->pad_token_id : -1;
    e->dropout = (float)c->hidden_dropout;
    snprintf(n, sizeof n, "%sembeddings.word_embeddings.weight", pfx);
    TRY(lp_model__add_param(m, n, 2, e->V, H, &e->wte, &e->dwte, src_of(map, LP_PARAM_ROLE_WORD_EMB, -1),
                            LP_INIT_NORMAL, false));
    m->slots[m->n_params - 1].pad_row = e->pad_id;
    snprintf(n, sizeof n, "%sembeddings.position_embeddings.weight", pfx);
    TRY(lp_model__add_param(m, n, 2, e->P, H, &e->wpe, &e->dwpe, src_of(map, LP_PARAM_ROLE_POS_EMB, -1),
                            c->sinusoidal_pos ? LP_INIT_SINUSOID : LP_INIT_NORMAL, false));
    if (c->sinusoidal_pos)
        m->params[m->n_params - 1].trainable = false; // a fixed buffer in DistilBERT (requires_grad False)
    if (e->TT > 0) {
        snprintf(n, sizeof n, "%sembeddings.token_type_embeddings.weight", pfx);
        TRY(lp_model__add_param(m, n, 2, e->TT, H, &e->wtt, &e->dwtt, src_of(map, LP_PARAM_ROLE_TYPE_EMB, -1),
                                LP_INIT_NORMAL, false));
    }
    snprintf(n, sizeof n, "%sembeddings.LayerNorm", pfx);
    TRY(add_norm(m, &e->ln, n, fam, "embeddings.LayerNorm", src_of(map, LP_PARAM_ROLE_EMB_NORM_W, -1),
                 src_of(map, LP_PARAM_ROLE_EMB_NORM_B, -1)));
    e->fwd_name = intern(fam, "embeddings", "forward", &st);
    e->bwd_name = intern(fam, "embeddings", "backward", &st);
    TRY(st);

    /* layers */
    static const struct {
        lp_param_role role;
        const char *bert, *distil, *range;
    } lin[] = {
        {LP_PARAM_ROLE_Q_W, "attention.self.query", "attention.q_lin", "attention.query"},
        {LP_PARAM_ROLE_K_W, "attention.self.key", "attention.k_lin", "attention.key"},
        {LP_PARAM_ROLE_V_W, "attention.self.value", "attention.v_lin", "attention.value"},
        {LP_PARAM_ROLE_O_W, "attention.output.dense", "attention.out_lin", "attention.output"},
        {LP_PARAM_ROLE_FFN_IN_W, "intermediate.dense", "ffn.lin1", "mlp.in"},
        {LP_PARAM_ROLE_FFN_OUT_W, "output.dense", "ffn.lin2", "mlp.out"},
    };
    const char *stack = di ? "transformer.layer" : "encoder.layer";
    for (int32_t i = 0; i < (int32_t)m->L; i++) {
        lp_nn_encoder_layer *l = &m->layers[i];
        l->index = i;
        l->hidden_dropout = (float)c->hidden_dropout;
        l->attn.C = H;
        l->attn.H = NH;
        l->attn.D = H / NH;
        l->attn.attn_dropout = (float)c->attention_dropout;
        l->mlp.gelu = c->activation == LP_ACTIVATION_GELU_TANH ? LP_GELU_TANH : LP_GELU_ERF;
        lp_nn_linear *mods[] = {&l->attn.q, &l->attn.k, &l->attn.v, &l->attn.o, &l->mlp.in, &l->mlp.out};
        for (int j = 0; j < 6; j++) {
            int64_t out = j == 4 ? I : H, in = j == 5 ? I : H;
            snprintf(n, sizeof n, "%s%s.%d.%s", pfx, stack, i, di ? lin[j].distil : lin[j].bert);
            snprintf(r, sizeof r, "layer.%d.%s", i, lin[j].range);
            size_t wparam = m->n_params;
            TRY(add_linear(m, mods[j], n, fam, r, out, in, src_of(map, lin[j].role, i),
                           src_of(map, (lp_param_role)(lin[j].role + 1), i)));
            TRY(lp_model__note_linear(m, mods[j], n, j, i, wparam));
            if (j == 3) { /* the attention block's LayerNorm follows its output projection */
                snprintf(n, sizeof n, "%s%s.%d.%s", pfx, stack, i,
                         di ? "sa_layer_norm" : "attention.output.LayerNorm");
                snprintf(r, sizeof r, "layer.%d.attention.LayerNorm", i);
                TRY(add_norm(m, &l->ln1, n, fam, r, src_of(map, LP_PARAM_ROLE_ATTN_NORM_W, i),
                             src_of(map, LP_PARAM_ROLE_ATTN_NORM_B, i)));
            }
        }
        snprintf(n, sizeof n, "%s%s.%d.%s", pfx, stack, i, di ? "output_layer_norm" : "output.LayerNorm");
        snprintf(r, sizeof r, "layer.%d.output.LayerNorm", i);
        TRY(add_norm(m, &l->ln2, n, fam, r, src_of(map, LP_PARAM_ROLE_FFN_NORM_W, i),
                     src_of(map, LP_PARAM_ROLE_FFN_NORM_B, i)));
        snprintf(r, sizeof r, "layer.%d", i);
        l->fwd_name = intern(fam, r, "forward", &st);
        l->bwd_name = intern(fam, r, "backward", &st);
        snprintf(r, sizeof r, "layer.%d.attention", i);
        l->attn.fwd_name = intern(fam, r, "forward", &st);
        l->attn.bwd_name = intern(fam, r, "backward", &st);
        snprintf(r, sizeof r, "layer.%d.mlp", i);
        l->mlp.fwd_name = intern(fam, r, "forward", &st);
        l->mlp.bwd_name = intern(fam, r, "backward", &st);
        TRY(st);
    }

    /* BERT's pooler: part of BertModel, so it is kept (and saved) even when unused */
    lp_nn_cls_head *h = &m->head;
    h->C = H;
    h->L = m->num_labels;
    h->dropout = (float)c->classifier_dropout;
    size_t first_head = m->n_params;
    if (!di && (m->has_head || src_of(map, LP_PARAM_ROLE_POOLER_W, -1) || !w)) {
        snprintf(n, sizeof n, "%spooler.dense", pfx);
        TRY(add_linear(m, &h->pre, n, fam, "pooler", H, H, src_of(map, LP_PARAM_ROLE_POOLER_W, -1),
                       src_of(map, LP_PARAM_ROLE_POOLER_B, -1)));
        if (!m->has_head || h->kind == LP_NN_HEAD_KIND_MEAN) // unused: frozen
            for (size_t k = m->n_params - 2; k < m->n_params; k++)
                m->params[k].trainable = false;
    }
    if (m->has_head) {
        const lp_st_tensor *tw, *tb;
        if (h->kind == LP_NN_HEAD_KIND_DISTILBERT) {
            TRY(head_src(m, w, "pre_classifier.weight", H, H, false, &tw));
            TRY(head_src(m, w, "pre_classifier.bias", H, 0, false, &tb));
            TRY(add_linear(m, &h->pre, "pre_classifier", fam, "pre_classifier", H, H, tw, tb));
        }
        TRY(head_src(m, w, "classifier.weight", m->num_labels, H, true, &tw));
        TRY(head_src(m, w, "classifier.bias", m->num_labels, 0, true, &tb));
        if (!tw || !tb)
            tw = tb = NULL; // re-initialize the pair together
        TRY(add_linear(m, &h->classifier, "classifier", fam, "classifier", m->num_labels, H, tw, tb));
        h->fwd_name = intern(fam, "head", "forward", &st);
        h->bwd_name = intern(fam, "head", "backward", &st);
        TRY(st);
    }

    /* notice for head parameters the checkpoint did not have (as transformers prints) */
    if (w && !m->opt.quiet) {
        char list[512] = "";
        size_t k = 0, cnt = 0;
        for (size_t i = first_head; i < m->n_params; i++)
            if (!m->slots[i].src) {
                cnt++;
                if (k < sizeof list)
                    k +=
                        (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", m->params[i].name);
            }
        if (cnt)
            fprintf(stderr,
                    "loupe: some weights of %s were not initialized from the checkpoint at %s and are newly "
                    "initialized (weights normal(0, %g), biases 0): [%s]. Train the model before using its "
                    "predictions.\n",
                    lp_hf_arch_name(m->save_arch), m->dir, m->init_range, list);
    }
    return LP_OK;
}

lp_status lp_model__build_bert(lp_model *m, const lp_st_set *w)
{
    const lp_model_config *c = &m->cfg;
    if (c->activation != LP_ACTIVATION_GELU && c->activation != LP_ACTIVATION_GELU_TANH)
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "%s/config.json: activation '%s' is not supported (gelu, gelu_new)", m->dir,
                      c->activation_name);
    m->L = c->num_layers;
    if (!(m->layers = lp_calloc((size_t)m->L, sizeof *m->layers)) ||
        !(m->lins = lp_calloc((size_t)m->L * 6, sizeof *m->lins)))
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");

    lp_param_map map, *mp = NULL;
    if (w) {
        // BASE: the encoder (and BERT's pooler); the heads are looked up by name in wire()
        lp_model_config base = *c;
        TRY(lp_param_map_build(&base, w, LP_MODEL_TASK_BASE, &map));
        mp = &map;
    }
    lp_status st = wire(m, w, mp);
    if (st == LP_OK)
        st = lp_model__peft_setup(m); // adapters, frozen base, quantized bases
    if (mp)
        lp_param_map_free(mp);
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
    return lp_model__peft_finish(m);
}
