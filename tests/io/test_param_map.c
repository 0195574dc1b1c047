/* Parameter maps: tiny BERT, DistilBERT, Llama and Qwen2 checkpoints written by the test
 * (all prefixes, gamma/beta, extra and missing tensors, wrong shapes), bound to the
 * engine's roles; and the memory estimate's arithmetic on one of them. */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/io.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    return lp_test_tmpdir_make(tmpdir, sizeof tmpdir, "pm");
}

static int teardown(void **state)
{
    (void)state;
    return lp_test_tmpdir_remove(tmpdir);
}

typedef struct {
    char name[128];
    int64_t d0, d1; /* d1 = 0: 1-D */
    lp_st_dtype dt;
} spec;

typedef struct {
    spec s[256];
    int n;
} ckpt;

static void put(ckpt *c, const char *name, int64_t d0, int64_t d1)
{
    spec *s = &c->s[c->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->d0 = d0;
    s->d1 = d1;
    s->dt = LP_ST_DTYPE_F32;
}

static void putf(ckpt *c, int64_t d0, int64_t d1, const char *fmt, ...) LP_PRINTF(4, 5);
static void putf(ckpt *c, int64_t d0, int64_t d1, const char *fmt, ...)
{
    char n[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n, sizeof n, fmt, ap);
    va_end(ap);
    put(c, n, d0, d1);
}

static spec *get(ckpt *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->s[i].name, name))
            return &c->s[i];
    fail_msg("no spec %s", name);
    return NULL;
}

static void drop(ckpt *c, const char *name)
{
    spec *s = get(c, name);
    *s = c->s[--c->n];
}

/* Writes the checkpoint (values: the tensor's index, so bindings can be told apart) to
 * <tmpdir>/<sub>/model.safetensors and opens it as a set. */
static lp_st_set *save(ckpt *c, const char *sub)
{
    char dir[400], path[450];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    assert_int_equal(lp_mkdir_p(dir), LP_OK);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    lp_st_write_tensor *t = calloc((size_t)c->n, sizeof *t);
    int64_t(*shapes)[2] = calloc((size_t)c->n, sizeof *shapes);
    float **data = calloc((size_t)c->n, sizeof *data);
    for (int i = 0; i < c->n; i++) {
        size_t numel = (size_t)(c->s[i].d0 * (c->s[i].d1 ? c->s[i].d1 : 1));
        data[i] = malloc(numel * 8 + 8);
        for (size_t k = 0; k < numel * 2; k++)
            data[i][k] = (float)i;
        shapes[i][0] = c->s[i].d0;
        shapes[i][1] = c->s[i].d1;
        t[i] = (lp_st_write_tensor){c->s[i].name, c->s[i].dt, c->s[i].d1 ? 2 : 1, shapes[i], data[i]};
    }
    assert_int_equal(lp_st_write(path, t, (size_t)c->n, NULL, 0), LP_OK);
    for (int i = 0; i < c->n; i++)
        free(data[i]);
    free(data);
    free(shapes);
    free(t);
    lp_st_set *s = NULL;
    assert_int_equal(lp_st_set_open_dir(dir, &s), LP_OK);
    return s;
}

static lp_model_config config(const char *json)
{
    lp_model_config c;
    if (lp_hf_config_parse(json, strlen(json), "config.json", &c) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return c;
}

/* BERT with H=8, I=16, 2 layers, vocab 11, 6 positions, 2 token types, 3 labels */
static void bert_tensors(ckpt *c, const char *p, bool pooler)
{
    putf(c, 11, 8, "%sembeddings.word_embeddings.weight", p);
    putf(c, 6, 8, "%sembeddings.position_embeddings.weight", p);
    putf(c, 2, 8, "%sembeddings.token_type_embeddings.weight", p);
    putf(c, 8, 0, "%sembeddings.LayerNorm.weight", p);
    putf(c, 8, 0, "%sembeddings.LayerNorm.bias", p);
    for (int i = 0; i < 2; i++) {
        const char *lin[] = {"attention.self.query", "attention.self.key", "attention.self.value",
                             "attention.output.dense"};
        for (int k = 0; k < 4; k++) {
            putf(c, 8, 8, "%sencoder.layer.%d.%s.weight", p, i, lin[k]);
            putf(c, 8, 0, "%sencoder.layer.%d.%s.bias", p, i, lin[k]);
        }
        putf(c, 8, 0, "%sencoder.layer.%d.attention.output.LayerNorm.weight", p, i);
        putf(c, 8, 0, "%sencoder.layer.%d.attention.output.LayerNorm.bias", p, i);
        putf(c, 16, 8, "%sencoder.layer.%d.intermediate.dense.weight", p, i);
        putf(c, 16, 0, "%sencoder.layer.%d.intermediate.dense.bias", p, i);
        putf(c, 8, 16, "%sencoder.layer.%d.output.dense.weight", p, i);
        putf(c, 8, 0, "%sencoder.layer.%d.output.dense.bias", p, i);
        putf(c, 8, 0, "%sencoder.layer.%d.output.LayerNorm.weight", p, i);
        putf(c, 8, 0, "%sencoder.layer.%d.output.LayerNorm.bias", p, i);
    }
    if (pooler) {
        putf(c, 8, 8, "%spooler.dense.weight", p);
        putf(c, 8, 0, "%spooler.dense.bias", p);
    }
}

static const char *bert_cfg_cls =
    "{\"architectures\": [\"BertForSequenceClassification\"], \"vocab_size\": 11, \"hidden_size\": 8,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"intermediate_size\": 16,"
    " \"max_position_embeddings\": 6, \"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\"}}";
static const char *bert_cfg_base =
    "{\"architectures\": [\"BertModel\"], \"vocab_size\": 11, \"hidden_size\": 8,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"intermediate_size\": 16,"
    " \"max_position_embeddings\": 6}";

static void test_bert_seq_cls_prefixed(void **state)
{
    (void)state;
    static ckpt c;
    c.n = 0;
    bert_tensors(&c, "bert.", true);
    put(&c, "classifier.weight", 3, 8);
    put(&c, "classifier.bias", 3, 0);
    put(&c, "bert.embeddings.position_ids", 1, 6);
    get(&c, "bert.embeddings.position_ids")->dt = LP_ST_DTYPE_I64;
    put(&c, "cls.predictions.bias", 11, 0);
    lp_st_set *w = save(&c, "bert_cls");
    lp_model_config cfg = config(bert_cfg_cls);
    lp_param_map m;
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_OK);
    assert_int_equal(m.task, LP_MODEL_TASK_SEQ_CLS);
    assert_string_equal(m.prefix, "bert.");
    assert_int_equal(m.n_missing_head, 0);
    assert_int_equal(m.n_ignored, 1);
    assert_int_equal(m.n_unexpected, 1);
    assert_string_equal(m.unexpected[0], "cls.predictions.bias");
    /* 5 embeddings + 2 layers x 16 + pooler 2 + classifier 2 */
    assert_int_equal(m.n, 5 + 32 + 4);
    for (size_t i = 0; i < m.n; i++)
        assert_non_null(m.params[i].tensor);
    const lp_param_binding *q1 = lp_param_map_find(&m, LP_PARAM_ROLE_Q_W, 1);
    assert_string_equal(q1->tensor->name, "bert.encoder.layer.1.attention.self.query.weight");
    assert_int_equal(q1->group, LP_PARAM_GROUP_LAYER);
    assert_true(q1->is_linear_weight);
    /* the bound view is that tensor's data: values are its index in the checkpoint */
    const spec *qs = get(&c, "bert.encoder.layer.1.attention.self.query.weight");
    assert_true(((const float *)q1->tensor->data)[5] == (float)(qs - c.s));
    const lp_param_binding *ffn = lp_param_map_find(&m, LP_PARAM_ROLE_FFN_OUT_W, 0);
    assert_int_equal(ffn->shape[0], 8);
    assert_int_equal(ffn->shape[1], 16);
    const lp_param_binding *cls = lp_param_map_find(&m, LP_PARAM_ROLE_CLS_W, -1);
    assert_string_equal(cls->tensor->name, "classifier.weight");
    assert_int_equal(cls->group, LP_PARAM_GROUP_HEAD);
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_POOLER_W, -1)->tensor->name, "bert.pooler.dense.weight");
    assert_null(lp_param_map_find(&m, LP_PARAM_ROLE_LM_HEAD_W, -1));
    lp_param_map_free(&m);

    /* the same checkpoint as a plain encoder: classifier is then unexpected */
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_BASE, &m), LP_OK);
    assert_int_equal(m.n_unexpected, 3);
    lp_param_map_free(&m);
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_CAUSAL_LM, &m), LP_STATUS_INVALID_ARG);
    lp_model_config_free(&cfg);
    lp_st_set_close(w);
}

static void test_bert_bare_head_missing_gamma_beta(void **state)
{
    (void)state;
    static ckpt c;
    c.n = 0;
    bert_tensors(&c, "", false); /* BertModel saved bare, no pooler */
    snprintf(get(&c, "encoder.layer.0.output.LayerNorm.weight")->name, 128, "encoder.layer.0.output.LayerNorm.gamma");
    snprintf(get(&c, "encoder.layer.0.output.LayerNorm.bias")->name, 128, "encoder.layer.0.output.LayerNorm.beta");
    lp_st_set *w = save(&c, "bert_bare");
    lp_model_config cfg = config(bert_cfg_cls); /* asks for a classifier the file lacks */
    lp_param_map m;
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_OK);
    assert_string_equal(m.prefix, "");
    assert_int_equal(m.n_missing_head, 4); /* pooler w/b + classifier w/b */
    assert_null(lp_param_map_find(&m, LP_PARAM_ROLE_CLS_W, -1)->tensor);
    assert_int_equal(lp_param_map_find(&m, LP_PARAM_ROLE_CLS_W, -1)->shape[0], 3);
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_FFN_NORM_B, 0)->tensor->name,
                        "encoder.layer.0.output.LayerNorm.beta");
    assert_int_equal(m.n_unexpected, 0);
    lp_param_map_free(&m);
    lp_model_config_free(&cfg);
    lp_st_set_close(w);
}

static void test_bert_errors(void **state)
{
    (void)state;
    static ckpt c;
    lp_model_config cfg = config(bert_cfg_base);
    lp_param_map m;
    /* a layer tensor missing */
    c.n = 0;
    bert_tensors(&c, "", true);
    drop(&c, "encoder.layer.1.attention.self.key.weight");
    lp_st_set *w = save(&c, "bert_missing");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "'encoder.layer.1.attention.self.key.weight'"));
    assert_non_null(strstr(lp_err_msg(), "model.safetensors"));
    assert_null(m.params);
    lp_st_set_close(w);
    /* a wrong shape: intermediate saved as [8, 8] instead of [16, 8] */
    c.n = 0;
    bert_tensors(&c, "", true);
    get(&c, "encoder.layer.0.intermediate.dense.weight")->d0 = 8;
    w = save(&c, "bert_shape");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "'encoder.layer.0.intermediate.dense.weight' has shape [8, 8]"));
    assert_non_null(strstr(lp_err_msg(), "implies [16, 8]"));
    lp_st_set_close(w);
    /* an integer weight */
    c.n = 0;
    bert_tensors(&c, "", true);
    get(&c, "pooler.dense.bias")->dt = LP_ST_DTYPE_I32;
    w = save(&c, "bert_dtype");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "I32"));
    lp_st_set_close(w);
    /* not a BERT checkpoint at all */
    c.n = 0;
    put(&c, "model.embed_tokens.weight", 11, 8);
    w = save(&c, "not_bert");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "word embeddings"));
    lp_st_set_close(w);
    lp_model_config_free(&cfg);
}

static void test_distilbert_base_checkpoint(void **state)
{
    (void)state;
    static ckpt c;
    c.n = 0;
    /* distilbert-base-uncased layout: MLM head, no classifier */
    put(&c, "distilbert.embeddings.word_embeddings.weight", 11, 8);
    put(&c, "distilbert.embeddings.position_embeddings.weight", 6, 8);
    put(&c, "distilbert.embeddings.LayerNorm.weight", 8, 0);
    put(&c, "distilbert.embeddings.LayerNorm.bias", 8, 0);
    const char *lin[] = {"attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin"};
    for (int k = 0; k < 4; k++) {
        putf(&c, 8, 8, "distilbert.transformer.layer.0.%s.weight", lin[k]);
        putf(&c, 8, 0, "distilbert.transformer.layer.0.%s.bias", lin[k]);
    }
    put(&c, "distilbert.transformer.layer.0.sa_layer_norm.weight", 8, 0);
    put(&c, "distilbert.transformer.layer.0.sa_layer_norm.bias", 8, 0);
    put(&c, "distilbert.transformer.layer.0.ffn.lin1.weight", 16, 8);
    put(&c, "distilbert.transformer.layer.0.ffn.lin1.bias", 16, 0);
    put(&c, "distilbert.transformer.layer.0.ffn.lin2.weight", 8, 16);
    put(&c, "distilbert.transformer.layer.0.ffn.lin2.bias", 8, 0);
    put(&c, "distilbert.transformer.layer.0.output_layer_norm.weight", 8, 0);
    put(&c, "distilbert.transformer.layer.0.output_layer_norm.bias", 8, 0);
    put(&c, "vocab_transform.weight", 8, 8);
    put(&c, "vocab_projector.bias", 11, 0);
    lp_st_set *w = save(&c, "distil");
    lp_model_config cfg = config("{\"architectures\": [\"DistilBertForMaskedLM\"], \"vocab_size\": 11, \"dim\": 8,"
                                 " \"n_layers\": 1, \"n_heads\": 2, \"hidden_dim\": 16, \"max_position_embeddings\": 6}");
    lp_param_map m;
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_SEQ_CLS, &m), LP_OK);
    assert_string_equal(m.prefix, "distilbert.");
    assert_int_equal(m.n_missing_head, 4); /* pre_classifier and classifier, weight and bias */
    assert_int_equal(m.n_unexpected, 2);
    assert_null(lp_param_map_find(&m, LP_PARAM_ROLE_TYPE_EMB, -1));
    assert_null(lp_param_map_find(&m, LP_PARAM_ROLE_POOLER_W, -1));
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_O_W, 0)->tensor->name,
                        "distilbert.transformer.layer.0.attention.out_lin.weight");
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_ATTN_NORM_W, 0)->tensor->name,
                        "distilbert.transformer.layer.0.sa_layer_norm.weight");
    assert_int_equal(lp_param_map_find(&m, LP_PARAM_ROLE_PRE_CLS_W, -1)->shape[1], 8);
    lp_param_map_free(&m);
    lp_model_config_free(&cfg);
    lp_st_set_close(w);
}

static void llama_tensors(ckpt *c, bool qkv_bias, int64_t kvd)
{
    put(c, "model.embed_tokens.weight", 20, 8);
    for (int i = 0; i < 2; i++) {
        putf(c, 8, 0, "model.layers.%d.input_layernorm.weight", i);
        putf(c, 8, 8, "model.layers.%d.self_attn.q_proj.weight", i);
        putf(c, kvd, 8, "model.layers.%d.self_attn.k_proj.weight", i);
        putf(c, kvd, 8, "model.layers.%d.self_attn.v_proj.weight", i);
        if (qkv_bias) {
            putf(c, 8, 0, "model.layers.%d.self_attn.q_proj.bias", i);
            putf(c, kvd, 0, "model.layers.%d.self_attn.k_proj.bias", i);
            putf(c, kvd, 0, "model.layers.%d.self_attn.v_proj.bias", i);
        }
        putf(c, 8, 8, "model.layers.%d.self_attn.o_proj.weight", i);
        putf(c, 8, 0, "model.layers.%d.post_attention_layernorm.weight", i);
        putf(c, 12, 8, "model.layers.%d.mlp.gate_proj.weight", i);
        putf(c, 12, 8, "model.layers.%d.mlp.up_proj.weight", i);
        putf(c, 8, 12, "model.layers.%d.mlp.down_proj.weight", i);
    }
    put(c, "model.norm.weight", 8, 0);
}

static void test_llama_family(void **state)
{
    (void)state;
    static ckpt c;
    lp_param_map m;
    /* Llama, untied lm_head, GQA 4 heads / 2 kv heads of dim 2 */
    c.n = 0;
    llama_tensors(&c, false, 4);
    put(&c, "lm_head.weight", 20, 8);
    put(&c, "model.layers.0.self_attn.rotary_emb.inv_freq", 1, 0);
    lp_st_set *w = save(&c, "llama");
    lp_model_config cfg = config("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 20, \"hidden_size\": 8,"
                                 " \"intermediate_size\": 12, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                                 " \"num_key_value_heads\": 2}");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_OK);
    assert_int_equal(m.task, LP_MODEL_TASK_CAUSAL_LM);
    assert_string_equal(m.prefix, "model.");
    assert_int_equal(m.n, 1 + 2 * 9 + 1 + 1);
    assert_int_equal(m.n_ignored, 1);
    assert_int_equal(m.n_unexpected, 0);
    assert_int_equal(lp_param_map_find(&m, LP_PARAM_ROLE_K_W, 1)->shape[0], 4);
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_FFN_GATE_W, 1)->tensor->name,
                        "model.layers.1.mlp.gate_proj.weight");
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_FFN_IN_W, 1)->tensor->name, "model.layers.1.mlp.up_proj.weight");
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_LM_HEAD_W, -1)->tensor->name, "lm_head.weight");
    lp_param_map_free(&m);
    /* as a classifier: lm_head unused, score to initialize */
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_SEQ_CLS, &m), LP_OK);
    assert_int_equal(m.n_missing_head, 1);
    assert_int_equal(m.n_unexpected, 1);
    assert_int_equal(lp_param_map_find(&m, LP_PARAM_ROLE_CLS_W, -1)->shape[0], 2);
    assert_null(lp_param_map_find(&m, LP_PARAM_ROLE_CLS_B, -1));
    lp_param_map_free(&m);
    lp_model_config_free(&cfg);
    /* untied causal LM without lm_head: that is not a classification head, so an error */
    lp_st_set_close(w);
    drop(&c, "lm_head.weight");
    w = save(&c, "llama_nohead");
    cfg = config("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 20, \"hidden_size\": 8,"
                 " \"intermediate_size\": 12, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                 " \"num_key_value_heads\": 2}");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "'lm_head.weight'"));
    lp_model_config_free(&cfg);
    lp_st_set_close(w);

    /* Qwen2: q/k/v biases, tied embeddings (lm_head absent), sequence classification */
    c.n = 0;
    llama_tensors(&c, true, 4);
    put(&c, "score.weight", 2, 8);
    w = save(&c, "qwen2");
    cfg = config("{\"architectures\": [\"Qwen2ForSequenceClassification\"], \"vocab_size\": 20, \"hidden_size\": 8,"
                 " \"intermediate_size\": 12, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                 " \"num_key_value_heads\": 2, \"tie_word_embeddings\": true}");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_OK);
    assert_int_equal(m.n_missing_head, 0);
    assert_int_equal(m.n, 1 + 2 * 12 + 1 + 1);
    assert_string_equal(lp_param_map_find(&m, LP_PARAM_ROLE_V_B, 0)->tensor->name, "model.layers.0.self_attn.v_proj.bias");
    assert_null(lp_param_map_find(&m, LP_PARAM_ROLE_O_B, 0));
    lp_param_map_free(&m);
    lp_model_config_free(&cfg);
    lp_st_set_close(w);
    /* Qwen2 checkpoint without the biases Qwen2 requires */
    c.n = 0;
    llama_tensors(&c, false, 4);
    w = save(&c, "qwen2_nobias");
    cfg = config("{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 20, \"hidden_size\": 8,"
                 " \"intermediate_size\": 12, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                 " \"num_key_value_heads\": 2, \"tie_word_embeddings\": true}");
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "q_proj.bias"));
    lp_model_config_free(&cfg);
    lp_st_set_close(w);
}

/* A config-only directory maps to the same layout, unbound, under the prefix HF would save
 * (the memory plan itself is the engine's: tests/models/test_mem_plan.c). */
static void test_config_only_layout(void **state)
{
    (void)state;
    static ckpt c;
    c.n = 0;
    bert_tensors(&c, "bert.", true);
    put(&c, "classifier.weight", 3, 8);
    put(&c, "classifier.bias", 3, 0);
    lp_st_set *w = save(&c, "bert_est");
    lp_model_config cfg = config(bert_cfg_cls);
    lp_param_map m;
    assert_int_equal(lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m), LP_OK);
    lp_param_map mc;
    assert_int_equal(lp_param_map_build(&cfg, NULL, LP_MODEL_TASK_AUTO, &mc), LP_OK);
    assert_string_equal(mc.prefix, "bert.");
    assert_int_equal(mc.n, m.n);
    for (size_t i = 0; i < mc.n; i++) {
        assert_null(mc.params[i].tensor);
        assert_string_equal(mc.params[i].name, m.params[i].name);
    }
    lp_param_map_free(&mc);
    lp_param_map_free(&m);
    lp_model_config_free(&cfg);
    lp_st_set_close(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bert_seq_cls_prefixed), cmocka_unit_test(test_bert_bare_head_missing_gamma_beta),
        cmocka_unit_test(test_bert_errors),           cmocka_unit_test(test_distilbert_base_checkpoint),
        cmocka_unit_test(test_llama_family),          cmocka_unit_test(test_config_only_layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
