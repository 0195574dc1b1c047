/* The bert family's construction: the parameter table (HF names, shapes, where each lands in
 * the modules), the source tensor of each (through io's parameter map) or its
 * initialization, and the module wiring (dropouts, GELU kind, profiler range names). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

/* The bert family's modules and activations (m->fs). */
typedef struct bert_state {
    lp_nn_embedding emb;
    lp_nn_encoder_layer *layers; /* (L) */
    lp_nn_cls_head head;
    lp_nn_embedding_act emb_act;
    lp_nn_layer_act *lact; /* (L), or one shared entry under checkpointing */
    lp_nn_head_act head_act;
} bert_state;

static bert_state *st_of(const lp_model *m)
{
    return (bert_state *)m->fs;
}

#define NAME_MAX_LEN 160

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
    return lp_model__prof_name(fam, mid, dir, st);
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
    lp_nn_embedding *e = &st_of(m)->emb;
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
        const char *bert, *distil, *range, *role_name;
    } lin[] = {
        {LP_PARAM_ROLE_Q_W, "attention.self.query", "attention.q_lin", "attention.query", "q"},
        {LP_PARAM_ROLE_K_W, "attention.self.key", "attention.k_lin", "attention.key", "k"},
        {LP_PARAM_ROLE_V_W, "attention.self.value", "attention.v_lin", "attention.value", "v"},
        {LP_PARAM_ROLE_O_W, "attention.output.dense", "attention.out_lin", "attention.output", "o"},
        {LP_PARAM_ROLE_FFN_IN_W, "intermediate.dense", "ffn.lin1", "mlp.in", "ffn_in"},
        {LP_PARAM_ROLE_FFN_OUT_W, "output.dense", "ffn.lin2", "mlp.out", "ffn_out"},
    };
    const char *stack = di ? "transformer.layer" : "encoder.layer";
    for (int32_t i = 0; i < (int32_t)m->L; i++) {
        lp_nn_encoder_layer *l = &st_of(m)->layers[i];
        l->index = i;
        l->hidden_dropout = (float)c->hidden_dropout;
        l->attn.C = H;
        l->attn.H = NH;
        l->attn.Hkv = NH;
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
            TRY(lp_model__note_linear(m, mods[j], n, lin[j].role_name, i, wparam));
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
    lp_nn_cls_head *h = &st_of(m)->head;
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

static lp_status bert_build(lp_model *m, const lp_st_set *w)
{
    const lp_model_config *c = &m->cfg;
    if (c->activation != LP_ACTIVATION_GELU && c->activation != LP_ACTIVATION_GELU_TANH)
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "%s/config.json: activation '%s' is not supported (gelu, gelu_new)", m->dir,
                      c->activation_name);
    if (m->task == LP_MODEL_TASK_CAUSAL_LM)
        return lp_err(LP_STATUS_INVALID_ARG, "%s/config.json: a causal LM head needs a llama-family model",
                      m->dir);
    const bool di = c->distilbert;
    bool src_head = c->arch == LP_HF_ARCH_BERT_SEQ_CLS || c->arch == LP_HF_ARCH_DISTILBERT_SEQ_CLS;
    bert_state *bs = lp_calloc(1, sizeof *bs);
    if (!bs)
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    m->fs = bs;
    m->L = c->num_layers;
    m->prof_name = di ? "distilbert" : "bert";
    m->default_targets = di ? "q_lin,v_lin" : "query,value"; // PEFT has no distilbert default
    m->n_classes = m->num_labels;
    // a head in the checkpoint decides, unless loupe saved it with mean pooling (loupe_pooling)
    const bool mean = m->pooling == LP_POOLING_MEAN && (!src_head || m->pooling_saved);
    bs->head.kind = mean ? LP_NN_HEAD_KIND_MEAN : di ? LP_NN_HEAD_KIND_DISTILBERT : LP_NN_HEAD_KIND_BERT;
    if (bs->head.kind != LP_NN_HEAD_KIND_MEAN)
        m->pooling = LP_POOLING_CLS;
    m->save_arch = m->has_head ? (di ? LP_HF_ARCH_DISTILBERT_SEQ_CLS : LP_HF_ARCH_BERT_SEQ_CLS)
                               : (di ? LP_HF_ARCH_DISTILBERT_MODEL : LP_HF_ARCH_BERT_MODEL);
    if (!(bs->layers = lp_calloc((size_t)m->L, sizeof *bs->layers)) ||
        !(bs->lact = lp_calloc((size_t)m->L, sizeof *bs->lact)))
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");

    lp_param_map map, *mp = NULL;
    if (w) {
        // BASE: the encoder (and BERT's pooler); the heads are looked up by name in wire()
        lp_model_config base = *c;
        TRY(lp_param_map_build(&base, w, LP_MODEL_TASK_BASE, &map));
        mp = &map;
    }
    lp_status st = wire(m, w, mp);
    if (mp)
        lp_param_map_free(mp);
    return st;
}

static void bert_free(lp_model *m)
{
    bert_state *bs = st_of(m);
    if (!bs)
        return;
    free(bs->layers);
    free(bs->lact);
    free(bs);
    m->fs = NULL;
}

/* ---- activations ---------------------------------------------------------------------- */

#define up16 lp_model__up16
#define up64 lp_model__up64

static lp_model_plan bert_plan(const lp_model *m, int64_t B, int64_t T, bool shared, bool backward)
{
    const bert_state *bs = st_of(m);
    const int64_t N = B * T, C = m->cfg.hidden_size, L = m->num_labels;
    const lp_nn_encoder_layer *l0 = &bs->layers[0];
    lp_model_plan s = {0};
    int64_t la = lp_nn_layer_act_floats(l0, m->exec, m->training, B, T);
    int64_t lu = lp_nn_layer_act_bytes_u8(l0, m->exec, m->training, B, T);
    s.act = 2 * up16(N * C) + 2 * up16(N) + (shared ? la + m->L * up16(N * C) : m->L * la) + 4 * up16(B * C) +
            up16(B * L) + up16(B);
    s.u8 = up64(N * C) + (shared ? lu : m->L * lu) + up64(B * C);
    int64_t ls = lp_nn_encoder_layer_scratch_floats(l0, m->exec, B, T),
            other = 2 * N * C > 2 * B * C ? 2 * N * C : 2 * B * C;
    s.tmp = backward ? 2 * up16(N * C) + (ls > other ? ls : other) + up16(B * L) : 0;
    s.in = 3 * N + B + 64;
    s.layer_act = la;
    s.layer_u8 = lu;
    return s;
}

static void bert_bind(lp_model *m, int64_t B, int64_t T, bool shared)
{
    bert_state *bs = st_of(m);
    const int64_t N = B * T, C = m->cfg.hidden_size, L = m->num_labels;
    float *f = m->act_block;
    uint8_t *u = m->act_u8;
#define TAKE(n) (f += up16(n), f - up16(n))
    lp_nn_embedding_act *e = &bs->emb_act;
    e->sum = TAKE(N * C);
    e->ln = TAKE(N * C);
    e->out = e->ln;
    e->ln_mean = TAKE(N);
    e->ln_rstd = TAKE(N);
    e->keep = u;
    u += up64(N * C);
    int64_t la = lp_nn_layer_act_floats(&bs->layers[0], m->exec, m->training, B, T);
    int64_t lu = lp_nn_layer_act_bytes_u8(&bs->layers[0], m->exec, m->training, B, T);
    for (int64_t l = 0; l < (shared ? 1 : m->L); l++) {
        lp_nn_layer_act_bind(&bs->layers[l], m->exec, m->training, &bs->lact[l], f, u, B, T);
        f += la;
        u += lu;
    }
    if (shared)
        for (int64_t l = 0; l < m->L; l++)
            m->ckpt_out[l] = TAKE(N * C);
    lp_nn_head_act *h = &bs->head_act;
    h->pooled = TAKE(B * C);
    h->pre = TAKE(B * C);
    h->act = TAKE(B * C);
    h->drop = TAKE(B * C);
    h->keep = u;
    m->logits = TAKE(B * L);
    m->lse = TAKE(B);
#undef TAKE
    m->ids = m->in_block;
    m->mask = m->ids + N;
    m->types = m->mask + N;
    m->labels = m->types + N;
    m->pos = NULL;
}

/* ---- passes ----------------------------------------------------------------------------- */

static lp_status bert_embed_forward(lp_model *m, const lp_nn_ctx *ctx, int64_t B, int64_t T, const float **x)
{
    bert_state *bs = st_of(m);
    const int32_t *types = m->has_types ? m->types : NULL;
    const int32_t *h_types = m->has_types ? lp_model__in_host(m, m->types) : NULL; // checked on the host
    if (types && bs->emb.wtt)
        for (int64_t i = 0; i < B * T; i++)
            if (h_types[i] < 0 || h_types[i] >= bs->emb.TT)
                return lp_err(LP_STATUS_RANGE, "model forward: token type %d at %lld outside [0, %lld)",
                              h_types[i], (long long)i, (long long)bs->emb.TT);
    lp_status st = lp_nn_embedding_forward(&bs->emb, ctx, &bs->emb_act, m->ids, types, B, T);
    *x = bs->emb_act.out;
    return st;
}

static const float *bert_layer_forward(lp_model *m, int64_t l, int64_t slot, const lp_nn_ctx *ctx,
                                       const float *x, int64_t B, int64_t T)
{
    bert_state *bs = st_of(m);
    lp_nn_encoder_layer_forward(&bs->layers[l], ctx, &bs->lact[slot], x, m->mask, B, T);
    return bs->lact[slot].out;
}

static void bert_layer_backward(lp_model *m, int64_t l, int64_t slot, const lp_nn_ctx *ctx, float *dx,
                                const float *dout, const float *x, float *scratch, int64_t B, int64_t T)
{
    bert_state *bs = st_of(m);
    lp_nn_encoder_layer_backward(&bs->layers[l], ctx, &bs->lact[slot], dx, dout, x, m->mask, scratch, B, T);
}

static bool bert_embed_trainable(const lp_model *m)
{
    const lp_nn_embedding *e = &st_of(m)->emb;
    return e->dwte || e->dwpe || e->dwtt || e->ln.dw || e->ln.db;
}

static void bert_embed_backward(lp_model *m, const float *dout, float *scratch, int64_t B, int64_t T)
{
    bert_state *bs = st_of(m);
    lp_nn_embedding_backward(&bs->emb, &bs->emb_act, dout, scratch, m->ids, m->has_types ? m->types : NULL, B,
                             T);
}

static void bert_head_forward(lp_model *m, const lp_nn_ctx *ctx, const float *hidden, int64_t B, int64_t T)
{
    bert_state *bs = st_of(m);
    lp_nn_cls_head_forward(&bs->head, ctx, &bs->head_act, m->logits, hidden, m->mask, B, T);
}

static void bert_head_backward(lp_model *m, float *dhidden, const float *dlogits, float *scratch, int64_t B,
                               int64_t T)
{
    bert_state *bs = st_of(m);
    if (m->dev) // the pooler's round trip through the host reports a failure through the pass status
        bs->head.classifier.ctx = &m->pass_ctx;
    lp_nn_cls_head_backward(&bs->head, &bs->head_act, dhidden, dlogits, m->mask, scratch, B, T);
}

static double bert_forward_flops(const lp_model *m, int64_t B, int64_t T)
{
    const double C = (double)m->cfg.hidden_size, I = (double)m->cfg.intermediate_size,
                 N = (double)B * (double)T;
    double f = N * (double)m->L * (8.0 * C * C + 4.0 * C * I) +
               (double)B * (double)m->L * 4.0 * (double)T * (double)T * C;
    if (m->has_head)
        f += (double)B * (2.0 * C * C + 2.0 * C * (double)m->num_labels);
    return f;
}

const lp_family lp_family_bert = {
    .name = "bert",
    .build = bert_build,
    .free = bert_free,
    .plan = bert_plan,
    .bind = bert_bind,
    .embed_forward = bert_embed_forward,
    .layer_forward = bert_layer_forward,
    .layer_backward = bert_layer_backward,
    .embed_trainable = bert_embed_trainable,
    .embed_backward = bert_embed_backward,
    .head_forward = bert_head_forward,
    .head_backward = bert_head_backward,
    .forward_flops = bert_forward_flops,
};
