/* The model seen from the profiler and from disk: every module's forward and backward is a
 * named range (and the recompute under gradient checkpointing shows up as a second layer
 * forward inside the backward, without a decoder's down projection); every buffer is accounted in its memory category; and
 * lp_model_save_hf writes a directory that lp_model_load reads back bit for bit (new
 * directory: whole-directory rename; existing one: per-file replacement), with clear errors
 * for a bad destination. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden_util.h"
#include "lp_test_model.h"
#include "loupe/models.h"

#define MAX_NAMES 4096
#define MAX_WANT 20

typedef struct seen {
    const char *want[MAX_WANT];
    int count[MAX_WANT];
    int mem[LP_MEM_CATEGORY__COUNT];
} seen;

static lp_status on_ready(const lp_prof_events *ev, void *user)
{
    seen *s = user;
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        for (int k = 0; k < MAX_WANT && s->want[k]; k++)
            s->count[k] += !strcmp(e->name, s->want[k]);
        if (!strcmp(e->name, "[memory]") && e->mem_bytes > 0 && e->mem_category >= 0 &&
            e->mem_category < LP_MEM_CATEGORY__COUNT)
            s->mem[e->mem_category]++;
    }
    return LP_OK;
}

static lp_model *load_adapter(const char *dir, bool ckpt, const char *adapter)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.grad_checkpointing = ckpt;
    o.quiet = true;
    if (adapter) {
        o.lora.enabled = true;
        o.lora.adapter_dir = adapter;
    }
    lp_model *m = NULL;
    if (lp_model_load(dir, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static lp_model *load(const char *dir, bool ckpt)
{
    return load_adapter(dir, ckpt, NULL);
}

/* One loss forward and backward on the golden's batch (names under prefix: "" for the bert
 * goldens, "right." for the decoder ones). */
static void step_prefixed(lp_model *m, const char *golden, const char *pfx)
{
    lp_st_file *g;
    assert_int_equal(lp_st_open(golden, &g), LP_OK);
    char k[4][64];
    const char *names[] = {"input_ids", "attention_mask", "token_type_ids", "labels"};
    for (int i = 0; i < 4; i++)
        snprintf(k[i], sizeof k[i], "%s%s", pfx, names[i]);
    int64_t n = 0, nl = 0;
    int32_t *ids = gold_i32(g, k[0], &n), *mask = gold_i32(g, k[1], NULL), *types = gold_i32(g, k[2], NULL),
            *labels = gold_i32(g, k[3], &nl);
    const int64_t B = *pfx ? 3 : nl; // decoder goldens: 3 rows, labels (B,T) for a causal LM
    float loss;
    lp_model_zero_grad(m);
    if (lp_model_loss_forward(m, ids, mask, types, labels, (int32_t)B, (int32_t)(n / B), NULL, &loss) != LP_OK ||
        lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    free(ids), free(mask), free(types), free(labels);
    lp_st_close(g);
}

static void step(lp_model *m, const char *golden)
{
    lp_st_file *g;
    assert_int_equal(lp_st_open(golden, &g), LP_OK);
    int64_t n = 0, nl = 1;
    int32_t *ids = gold_i32(g, "input_ids", &n), *mask = gold_i32(g, "attention_mask", NULL),
            *types = gold_i32(g, "token_type_ids", NULL), *labels = gold_i32(g, "labels", &nl);
    float loss;
    lp_model_zero_grad(m);
    if (lp_model_loss_forward(m, ids, mask, types, labels, (int32_t)nl, (int32_t)(n / nl), NULL, &loss) !=
            LP_OK ||
        lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    free(ids), free(mask), free(types), free(labels);
    lp_st_close(g);
}

static void ranges_and_memory(void **state)
{
    (void)state;
    for (int ckpt = 0; ckpt < 2; ckpt++) {
        seen s = {.want = {"bert.forward", "bert.backward", "bert.embeddings.forward",
                           "bert.embeddings.backward", "bert.layer.1.forward", "bert.layer.1.backward",
                           "bert.layer.0.attention.forward", "bert.layer.0.attention.backward",
                           "bert.layer.1.mlp.backward", "bert.layer.1.attention.query.backward",
                           "bert.layer.0.output.LayerNorm.forward", "bert.head.forward", "bert.head.backward",
                           "bert.pooler.backward", "lp::matmul_forward", NULL}};
        lp_prof_config cfg;
        lp_prof_config_init(&cfg);
        cfg.record_shapes = cfg.profile_memory = cfg.with_flops = 1;
        cfg.on_trace_ready = on_ready;
        cfg.user = &s;
        assert_int_equal(lp_prof_start(&cfg), LP_OK);
        lp_model *m = load("tests/golden/cls_bert", ckpt);
        step(m, "tests/golden/cls_bert/golden.safetensors");
        lp_model_free(m);
        assert_int_equal(lp_prof_stop(), LP_OK);
        for (int k = 0; s.want[k]; k++) {
            printf("%s: %-42s x%d\n", ckpt ? "ckpt" : "full", s.want[k], s.count[k]);
            if (!strcmp(s.want[k], "bert.layer.1.forward"))
                assert_int_equal(s.count[k], ckpt ? 2 : 1); // recomputed inside the backward
            else
                assert_true(s.count[k] >= 1);
        }
        const lp_mem_category cats[] = {LP_MEM_CATEGORY_PARAMETER, LP_MEM_CATEGORY_GRADIENT,
                                        LP_MEM_CATEGORY_ACTIVATION, LP_MEM_CATEGORY_TEMPORARY,
                                        LP_MEM_CATEGORY_INPUT};
        for (int k = 0; k < 5; k++) {
            printf("  [memory] %s allocations: %d\n", lp_mem_category_name(cats[k]), s.mem[cats[k]]);
            assert_true(s.mem[cats[k]] >= 1);
        }
        lp_alloc_stats st;
        lp_alloc_stats_get(&st);
        for (int k = 0; k < 5; k++)
            assert_int_equal(st.live[cats[k]], 0); // lp_model_free released everything
    }
}

static void save_round_trip(void **state)
{
    (void)state;
    const char *bd = getenv("LP_BUILD_DIR");
    char out[512], cmd[600];
    snprintf(out, sizeof out, "%s/test_model_save/distil", bd ? bd : "build");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    assert_int_equal(system(cmd), 0);
    lp_model *m = load("tests/golden/cls_distilbert", false);
    step(m, "tests/golden/cls_distilbert/golden.safetensors");
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    for (size_t i = 0; i < np; i++) // make the weights loupe's own
        for (int64_t j = 0; j < p[i].numel; j++)
            p[i].data[j] -= 0.01f * p[i].grad[j];
    for (int pass = 0; pass < 2; pass++) { // new directory, then over the existing one
        assert_int_equal(lp_model_save_hf(m, out), LP_OK);
        lp_model *r = load(out, false);
        size_t nr;
        const lp_model_param *q = lp_model_params(r, &nr);
        assert_int_equal(nr, np);
        for (size_t i = 0; i < np; i++) {
            assert_string_equal(q[i].name, p[i].name);
            assert_true(q[i].from_checkpoint);
            assert_memory_equal(q[i].data, p[i].data, (size_t)p[i].numel * sizeof(float));
        }
        lp_model_info a, b;
        lp_model_info_get(m, &a);
        lp_model_info_get(r, &b);
        assert_int_equal(a.arch, b.arch);
        assert_int_equal(a.num_labels, b.num_labels);
        lp_model_free(r);
        char f[600];
        snprintf(f, sizeof f, "%s/vocab.txt", out);
        assert_int_equal(access(f, R_OK), 0); // tokenizer files travel with the model
    }
    // a destination that is a file, and one under a file
    char bad[600];
    snprintf(bad, sizeof bad, "%s/config.json", out);
    assert_int_equal(lp_model_save_hf(m, bad), LP_STATUS_IO);
    printf("file as destination: %s\n", lp_err_msg());
    snprintf(bad, sizeof bad, "%s/config.json/sub", out);
    assert_int_not_equal(lp_model_save_hf(m, bad), LP_OK);
    printf("under a file: %s\n", lp_err_msg());
    lp_model_free(m);
}

/* A bf16 decoder checkpoint sharded in two files (model.safetensors.index.json) loads as the
 * f32 golden rounded to bf16, value for value, and gives finite logits. */
static void decoder_sharded_bf16(void **state)
{
    (void)state;
    const char *bd = getenv("LP_BUILD_DIR");
    lp_st_set *w;
    assert_int_equal(lp_st_set_open_dir("tests/golden/qwen2_lm", &w), LP_OK);
    lp_model *ref = load("tests/golden/qwen2_lm", false);
    char dir[256], path[400], cmd[1400];
    snprintf(dir, sizeof dir, "%s/test_model_sharded_bf16", bd ? bd : "build");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp tests/golden/qwen2_lm/config.json '%s/'", dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    const size_t n = lp_st_set_count(w), half = n / 2;
    lp_st_write_tensor *t = calloc(n, sizeof *t);
    uint16_t **bufs = calloc(n, sizeof *bufs);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *idx = fopen(path, "w");
    assert_non_null(idx);
    fprintf(idx, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (size_t i = 0; i < n; i++) {
        const lp_st_tensor *x = lp_st_set_at(w, i);
        bufs[i] = malloc(x->numel * 2 + 2);
        lp_f32_to_bf16_n(bufs[i], x->data, (int64_t)x->numel);
        t[i] = (lp_st_write_tensor){x->name, LP_ST_DTYPE_BF16, x->ndim, x->shape, bufs[i]};
        fprintf(idx, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", i ? ", " : "", x->name, i < half ? 1 : 2);
    }
    fprintf(idx, "}}\n");
    fclose(idx);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    assert_int_equal(lp_st_write(path, t, half, NULL, 0), LP_OK);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    assert_int_equal(lp_st_write(path, t + half, n - half, NULL, 0), LP_OK);
    lp_model *m = load(dir, false);
    size_t np, nq;
    const lp_model_param *p = lp_model_params(m, &np), *q = lp_model_params(ref, &nq);
    assert_int_equal(np, nq);
    for (size_t i = 0; i < np; i++) {
        assert_true(p[i].from_checkpoint);
        for (int64_t j = 0; j < p[i].numel; j++)
            if (p[i].data[j] != lp_bf16_to_f32(lp_f32_to_bf16(q[i].data[j])))
                fail_msg("%s[%lld]: %.9g", p[i].name, (long long)j, p[i].data[j]);
    }
    const int32_t ids[4] = {5, 17, 99, 3};
    float logits[4 * 128];
    assert_int_equal(lp_model_forward(m, ids, NULL, NULL, 1, 4, logits), LP_OK);
    for (int i = 0; i < 4 * 128; i++)
        assert_true(isfinite(logits[i]));
    printf("sharded bf16 decoder: %zu tensors in 2 files loaded as f32\n", np);
    lp_model_free(m);
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(t);
    lp_model_free(ref);
    lp_st_set_close(w);
}

/* A decoder's ranges are its HF module paths under the family's name. */
static void decoder_ranges(void **state)
{
    (void)state;
    seen s = {.want = {"llama.forward", "llama.backward", "llama.model.embed_tokens.forward",
                       "llama.model.embed_tokens.backward", "llama.model.layers.1.forward",
                       "llama.model.layers.1.backward", "llama.model.layers.0.self_attn.forward",
                       "llama.model.layers.0.self_attn.backward", "llama.model.layers.1.mlp.backward",
                       "llama.model.layers.0.self_attn.q_proj.backward", "llama.model.layers.0.input_layernorm.forward",
                       "llama.model.layers.1.mlp.down_proj.forward", "llama.lm_head.forward", "llama.lm_head.backward",
                       "lp::rope_forward", NULL}};
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.on_trace_ready = on_ready;
    cfg.user = &s;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    lp_model *m = load("tests/golden/llama_lm", true);
    step_prefixed(m, "tests/golden/llama_lm/golden.safetensors", "right.");
    lp_model_free(m);
    assert_int_equal(lp_prof_stop(), LP_OK);
    for (int k = 0; s.want[k]; k++) {
        printf("decoder: %-52s x%d\n", s.want[k], s.count[k]);
        if (!strcmp(s.want[k], "llama.model.layers.1.forward"))
            assert_int_equal(s.count[k], 2); // recomputed inside the backward (checkpointing)
        else
            assert_true(s.count[k] >= 1);
    }
}

/* Every trainable parameter's gradient, concatenated. */
static float *grads_of(lp_model *m, int64_t *n_out)
{
    float *g = lp_test_model_grads(m, n_out);
    assert_non_null(g);
    return g;
}

/* The checkpointing recompute of a decoder layer stops before the down projection (its
 * output only feeds the next layer's kept input), unless down carries an adapter, whose
 * backward needs the recompute's saved u: down_proj runs once per step without an adapter on
 * it and twice with one, gate_proj twice either way, and the gradients are bit-identical to
 * the run without checkpointing. */
static void decoder_recompute_skips_down(void **state)
{
    (void)state;
    static const struct {
        const char *dir, *adapter;
        int down_fwd;
    } cases[] = {{"tests/golden/llama_lm", NULL, 1},
                 {"tests/golden/lora_qwen2_lm", "tests/golden/lora_qwen2_lm/peft_adapter", 2}};
    for (int c = 0; c < 2; c++) {
        char gold[300];
        snprintf(gold, sizeof gold, "%s/golden.safetensors", cases[c].dir);
        const char *fam = cases[c].adapter ? "qwen2" : "llama";
        char down[96], gate[96];
        snprintf(down, sizeof down, "%s.model.layers.1.mlp.down_proj.forward", fam);
        snprintf(gate, sizeof gate, "%s.model.layers.1.mlp.gate_proj.forward", fam);
        seen s = {.want = {down, gate, NULL}};
        lp_prof_config cfg;
        lp_prof_config_init(&cfg);
        cfg.on_trace_ready = on_ready;
        cfg.user = &s;
        assert_int_equal(lp_prof_start(&cfg), LP_OK);
        lp_model *a = load_adapter(cases[c].dir, true, cases[c].adapter);
        step_prefixed(a, gold, "right.");
        assert_int_equal(lp_prof_stop(), LP_OK);
        lp_model *b = load_adapter(cases[c].dir, false, cases[c].adapter);
        step_prefixed(b, gold, "right.");
        int64_t na, nb;
        float *ga = grads_of(a, &na), *gb = grads_of(b, &nb);
        printf("%s: %s x%d, %s x%d, %lld gradients\n", cases[c].dir, down, s.count[0], gate, s.count[1],
               (long long)na);
        assert_int_equal(s.count[0], cases[c].down_fwd);
        assert_int_equal(s.count[1], 2);
        assert_int_equal(na, nb);
        assert_true(na > 0);
        assert_memory_equal(ga, gb, (size_t)na * sizeof *ga);
        free(ga);
        free(gb);
        lp_model_free(a);
        lp_model_free(b);
    }
}

/* Saved decoders (a Qwen2 classifier, a tied SmolLM) load back bit for bit as the same class. */
static void decoder_save_round_trip(void **state)
{
    (void)state;
    const char *bd = getenv("LP_BUILD_DIR");
    static const char *const goldens[] = {"qwen2_cls", "smollm_lm"};
    for (int gi = 0; gi < 2; gi++) {
        char src[256], out[512], gold[300];
        snprintf(src, sizeof src, "tests/golden/%s", goldens[gi]);
        snprintf(gold, sizeof gold, "%s/golden.safetensors", src);
        snprintf(out, sizeof out, "%s/test_model_save/%s", bd ? bd : "build", goldens[gi]);
        lp_model *m = load(src, false);
        step_prefixed(m, gold, "right.");
        size_t np;
        const lp_model_param *p = lp_model_params(m, &np);
        for (size_t i = 0; i < np; i++)
            for (int64_t j = 0; j < p[i].numel; j++)
                p[i].data[j] -= 0.01f * p[i].grad[j];
        assert_int_equal(lp_model_save_hf(m, out), LP_OK);
        lp_model *r = load(out, false);
        size_t nr;
        const lp_model_param *q = lp_model_params(r, &nr);
        assert_int_equal(nr, np);
        for (size_t i = 0; i < np; i++) {
            assert_string_equal(q[i].name, p[i].name);
            assert_memory_equal(q[i].data, p[i].data, (size_t)p[i].numel * sizeof(float));
        }
        lp_model_info a, b;
        lp_model_info_get(m, &a);
        lp_model_info_get(r, &b);
        assert_int_equal(a.arch, b.arch);
        assert_int_equal(a.task, b.task);
        lp_model_free(r);
        lp_model_free(m);
    }
}

/* A bare encoder trained with mean pooling is saved with "loupe_pooling": "mean" and reloads
 * with it: the same logits (before, the reload pooled the first token). */
static void mean_pooling_round_trip(void **state)
{
    (void)state;
    const char *bd = getenv("LP_BUILD_DIR");
    char src[256], out[256], cmd[1400];
    snprintf(src, sizeof src, "%s/test_model_save/bare", bd ? bd : "build");
    snprintf(out, sizeof out, "%s/test_model_save/bare_saved", bd ? bd : "build");
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && mkdir -p '%s' && sed -e 's/BertForSequenceClassification/BertModel/' "
             "models/default/config.json > '%s/config.json' && cp models/default/vocab.txt '%s/'",
             src, src, src, src);
    assert_int_equal(system(cmd), 0);
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.num_labels = 2;
    o.pooling = LP_POOLING_MEAN;
    lp_model *m = NULL;
    if (lp_model_load(src, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    const int32_t ids[2 * 6] = {2, 10, 11, 12, 3, 0, 2, 20, 21, 3, 0, 0}, mask[2 * 6] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0};
    float a[4], b[4];
    assert_int_equal(lp_model_forward(m, ids, mask, NULL, 2, 6, a), LP_OK);
    assert_int_equal(lp_model_save_hf(m, out), LP_OK);
    lp_model *r = NULL;
    lp_model_options_init(&o);
    o.quiet = true;
    if (lp_model_load(out, &o, &r) != LP_OK) // default options: the saved pooling decides
        fail_msg("%s", lp_err_msg());
    lp_model_info info;
    lp_model_info_get(r, &info);
    assert_int_equal(info.pooling, LP_POOLING_MEAN);
    assert_int_equal(lp_model_forward(r, ids, mask, NULL, 2, 6, b), LP_OK);
    assert_memory_equal(a, b, sizeof a);
    lp_model_free(r);
    lp_model_free(m);
}

/* f16 and bf16 checkpoints load as f32 (each value exactly its half-precision one). */
static void half_precision_weights(void **state)
{
    (void)state;
    const char *bd = getenv("LP_BUILD_DIR");
    lp_st_set *w;
    assert_int_equal(lp_st_set_open_dir("tests/golden/cls_bert", &w), LP_OK);
    lp_model *ref = load("tests/golden/cls_bert", false);
    for (int kind = 0; kind < 2; kind++) {
        char dir[512], path[600], cmd[2048];
        snprintf(dir, sizeof dir, "%s/test_model_half_%s", bd ? bd : "build", kind ? "bf16" : "f16");
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp tests/golden/cls_bert/config.json '%s/'", dir, dir,
                 dir);
        assert_int_equal(system(cmd), 0);
        size_t n = lp_st_set_count(w);
        lp_st_write_tensor *t = calloc(n, sizeof *t);
        uint16_t **bufs = calloc(n, sizeof *bufs);
        for (size_t i = 0; i < n; i++) {
            const lp_st_tensor *x = lp_st_set_at(w, i);
            assert_int_equal(x->dtype, LP_ST_DTYPE_F32);
            bufs[i] = malloc(x->numel * 2 + 2);
            if (kind)
                lp_f32_to_bf16_n(bufs[i], x->data, (int64_t)x->numel);
            else
                lp_f32_to_f16_n(bufs[i], x->data, (int64_t)x->numel);
            t[i] = (lp_st_write_tensor){x->name, kind ? LP_ST_DTYPE_BF16 : LP_ST_DTYPE_F16, x->ndim, x->shape, bufs[i]};
        }
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        assert_int_equal(lp_st_write(path, t, n, NULL, 0), LP_OK);
        lp_model *m = load(dir, false);
        size_t np;
        const lp_model_param *p = lp_model_params(m, &np), *q = lp_model_params(ref, &np);
        for (size_t i = 0; i < np; i++)
            for (int64_t j = 0; j < p[i].numel; j++) {
                float want = kind ? lp_bf16_to_f32(lp_f32_to_bf16(q[i].data[j])) : lp_f16_to_f32(lp_f32_to_f16(q[i].data[j]));
                if (p[i].data[j] != want)
                    fail_msg("%s %s[%lld]: %.9g, want %.9g", kind ? "bf16" : "f16", p[i].name, (long long)j,
                             p[i].data[j], want);
            }
        printf("%s checkpoint: %zu tensors loaded as f32\n", kind ? "bf16" : "f16", np);
        lp_model_free(m);
        for (size_t i = 0; i < n; i++)
            free(bufs[i]);
        free(bufs);
        free(t);
    }
    lp_model_free(ref);
    lp_st_set_close(w);
}

int main(void)
{
    lp_threads_init();
    const struct CMUnitTest tests[] = {cmocka_unit_test(ranges_and_memory),
                                       cmocka_unit_test(save_round_trip),
                                       cmocka_unit_test(half_precision_weights),
                                       cmocka_unit_test(decoder_ranges),
                                       cmocka_unit_test(decoder_recompute_skips_down),
                                       cmocka_unit_test(decoder_sharded_bf16),
                                       cmocka_unit_test(decoder_save_round_trip),
                                       cmocka_unit_test(mean_pooling_round_trip)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
