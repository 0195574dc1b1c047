/* loupe inspect: what a model directory holds (architecture, layer sizes, parameter
 * counts, size on disk, dtypes, which tensors map where) and, with --method, the
 * predicted peak training memory by category; as text or JSON (stdout or --output).
 * A config-only directory (no weights: the engine initializes them) is inspected too. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "loupe/core.h"
#include "loupe/io.h"
#include "loupe/models.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: loupe inspect --model DIR [--json] [--output FILE] [--task auto|base|seq-cls|causal-lm]\n"
            "                     [--method full|lora|qlora [--batch-size N] [--seq-len N] [--rank R]\n"
            "                      [--exec eager|fused] [--gradient-checkpointing] [--lora-dropout P] [--dtype f32|bf16]\n"
            "                      [--threads N]]\n\n"
            "Architecture, layer sizes, parameter counts, size on disk and dtypes of a Hugging Face\n"
            "model directory (config.json + model.safetensors or a sharded index; a config-only\n"
            "directory is initialized by the engine), and with --method the predicted peak memory\n"
            "of `loupe train` with the same settings (AdamW, fp32) by category: the categories of\n"
            "summary.json's memory_by_category, whose sum is its peak_memory_bytes.\n\n"
            "  --model DIR        model directory, or a GGUF file (FILE.gguf)\n"
            "  --json             print JSON instead of text\n"
            "  --output FILE      also write the JSON to FILE (atomically)\n"
            "  --task T           model to build (default auto: the config's architecture; with\n"
            "                     --method a BERT-family model is a classifier, as loupe train builds)\n"
            "  --method M         full, lora or qlora: add the memory prediction\n"
            "  --batch-size N     batch size for the prediction (default 8)\n"
            "  --seq-len N        sequence length: the longest padded row of a batch (default 128, at most\n"
            "                     the model's max_position_embeddings, as loupe train truncates)\n"
            "  --rank R           LoRA rank (default 8; targets query/value or q_proj/v_proj)\n"
            "  --exec M           eager or fused, as loupe train --exec (default fused)\n"
            "  --gradient-checkpointing  as loupe train --gradient-checkpointing\n"
            "  --dtype f32|bf16      as loupe train --dtype (bf16: the Linears' bf16 copies)\n"
            "  --lora-dropout P   as loupe train --lora-dropout (default 0)\n"
            "  --threads N        threads (per-thread LoRA-dropout scratch; default as loupe train: LP_THREADS,\n"
            "                     OMP_NUM_THREADS or every core)\n");
}

static const char *task_name(lp_model_task t)
{
    switch (t) {
    case LP_MODEL_TASK_BASE: return "base";
    case LP_MODEL_TASK_SEQ_CLS: return "seq-cls";
    case LP_MODEL_TASK_CAUSAL_LM: return "causal-lm";
    default: return "auto";
    }
}

static const char *method_name(lp_train_method m)
{
    return m == LP_TRAIN_METHOD_FULL ? "full" : m == LP_TRAIN_METHOD_LORA ? "lora" : "qlora";
}

/* 22713216 -> "22,713,216" */
static const char *commas(uint64_t v, char *buf)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v), k = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = tmp[i];
    }
    buf[k] = '\0';
    return buf;
}

static const char *mib(uint64_t v, char *buf)
{
    snprintf(buf, 32, "%.1f MiB", (double)v / (1024.0 * 1024.0));
    return buf;
}

typedef struct {
    uint64_t total, embeddings, layers, per_layer, final_norm, head, in_file;
} counts;

static counts count_params(const lp_model_config *cfg, const lp_param_map *m)
{
    counts c = {0};
    for (size_t i = 0; i < m->n; i++) {
        const lp_param_binding *p = &m->params[i];
        c.total += p->numel;
        if (p->tensor)
            c.in_file += p->numel;
        switch (p->group) {
        case LP_PARAM_GROUP_EMBEDDINGS: c.embeddings += p->numel; break;
        case LP_PARAM_GROUP_LAYER: c.layers += p->numel; break;
        case LP_PARAM_GROUP_FINAL_NORM: c.final_norm += p->numel; break;
        case LP_PARAM_GROUP_HEAD: c.head += p->numel; break;
        }
    }
    c.per_layer = cfg->num_layers ? c.layers / (uint64_t)cfg->num_layers : 0;
    return c;
}

/* The weight set's counts; NULL (config only) has none. */
static size_t nfiles(const lp_st_set *w)
{
    return w ? lp_st_set_file_count(w) : 0;
}
static size_t ntensors(const lp_st_set *w)
{
    return w ? lp_st_set_count(w) : 0;
}

static cJSON *shape_json(const int64_t *shape, int nd)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < nd; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[d]));
    return a;
}

static cJSON *build_json(const char *dir, const lp_model_config *cfg, const lp_st_set *w, const lp_param_map *m,
                         const counts *c, const lp_mem_estimate *e, const lp_mem_estimate_opts *o,
                         lp_model_task etask)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "model_dir", dir);
    cJSON_AddStringToObject(r, "architecture", lp_hf_arch_name(cfg->arch));
    cJSON_AddStringToObject(r, "family", cfg->family == LP_MODEL_FAMILY_BERT ? "bert" : "llama");
    cJSON_AddStringToObject(r, "model_type", cfg->model_type);
    cJSON_AddStringToObject(r, "task", task_name(m->task));

    cJSON *k = cJSON_AddObjectToObject(r, "config");
    cJSON_AddNumberToObject(k, "vocab_size", (double)cfg->vocab_size);
    cJSON_AddNumberToObject(k, "hidden_size", (double)cfg->hidden_size);
    cJSON_AddNumberToObject(k, "num_layers", (double)cfg->num_layers);
    cJSON_AddNumberToObject(k, "num_heads", (double)cfg->num_heads);
    cJSON_AddNumberToObject(k, "num_kv_heads", (double)cfg->num_kv_heads);
    cJSON_AddNumberToObject(k, "head_dim", (double)cfg->head_dim);
    cJSON_AddNumberToObject(k, "intermediate_size", (double)cfg->intermediate_size);
    cJSON_AddNumberToObject(k, "max_position_embeddings", (double)cfg->max_position_embeddings);
    cJSON_AddNumberToObject(k, "type_vocab_size", (double)cfg->type_vocab_size);
    cJSON_AddNumberToObject(k, "norm_eps", cfg->norm_eps);
    cJSON_AddNumberToObject(k, "rope_theta", cfg->rope_theta);
    cJSON_AddStringToObject(k, "activation", cfg->activation_name);
    cJSON_AddBoolToObject(k, "tie_word_embeddings", cfg->tie_word_embeddings);
    cJSON_AddNumberToObject(k, "pad_token_id", (double)cfg->pad_token_id);
    cJSON_AddNumberToObject(k, "num_labels", (double)cfg->num_labels);
    cJSON *labels = cJSON_AddArrayToObject(k, "labels");
    for (int64_t i = 0; i < cfg->num_labels; i++)
        cJSON_AddItemToArray(labels, cJSON_CreateString(cfg->id2label[i]));
    cJSON_AddNumberToObject(k, "hidden_dropout", cfg->hidden_dropout);
    cJSON_AddNumberToObject(k, "attention_dropout", cfg->attention_dropout);
    cJSON_AddNumberToObject(k, "classifier_dropout", cfg->classifier_dropout);

    cJSON *wj = cJSON_AddObjectToObject(r, "weights");
    cJSON_AddBoolToObject(wj, "config_only", !w);
    cJSON *files = cJSON_AddArrayToObject(wj, "files");
    for (size_t i = 0; i < nfiles(w); i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(lp_st_path(lp_st_set_file(w, i))));
    cJSON_AddNumberToObject(wj, "disk_bytes", w ? (double)lp_st_set_disk_bytes(w) : 0.0);
    cJSON_AddNumberToObject(wj, "tensors", (double)ntensors(w));
    cJSON *dts = cJSON_AddObjectToObject(wj, "dtypes");
    for (int d = 0; d < LP_ST_DTYPE__COUNT; d++) {
        size_t n = 0;
        for (size_t i = 0; i < ntensors(w); i++)
            n += lp_st_set_at(w, i)->dtype == (lp_st_dtype)d;
        if (n)
            cJSON_AddNumberToObject(dts, lp_st_dtype_name((lp_st_dtype)d), (double)n);
    }
    cJSON_AddStringToObject(wj, "prefix", m->prefix);
    cJSON_AddNumberToObject(wj, "mapped", (double)(m->n - m->n_missing_head));
    cJSON_AddNumberToObject(wj, "ignored", (double)m->n_ignored);
    cJSON *un = cJSON_AddArrayToObject(wj, "unexpected");
    for (size_t i = 0; i < m->n_unexpected; i++)
        cJSON_AddItemToArray(un, cJSON_CreateString(m->unexpected[i]));
    cJSON *hm = cJSON_AddArrayToObject(wj, "head_missing");
    for (size_t i = 0; i < m->n; i++)
        if (!m->params[i].tensor)
            cJSON_AddItemToArray(hm, cJSON_CreateString(m->params[i].name));

    cJSON *p = cJSON_AddObjectToObject(r, "parameters");
    cJSON_AddNumberToObject(p, "total", (double)c->total);
    cJSON_AddNumberToObject(p, "in_checkpoint", (double)c->in_file);
    cJSON_AddNumberToObject(p, "embeddings", (double)c->embeddings);
    cJSON_AddNumberToObject(p, "per_layer", (double)c->per_layer);
    cJSON_AddNumberToObject(p, "layers", (double)c->layers);
    cJSON_AddNumberToObject(p, "final_norm", (double)c->final_norm);
    cJSON_AddNumberToObject(p, "head", (double)c->head);

    /* layer sizes: layer 0's tensors (every layer has the same) and the ones outside */
    cJSON *ls = cJSON_AddArrayToObject(r, "tensors");
    for (size_t i = 0; i < m->n; i++) {
        const lp_param_binding *b = &m->params[i];
        if (b->layer > 0)
            continue;
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "role", lp_param_role_name(b->role));
        cJSON_AddNumberToObject(t, "layer", b->layer);
        cJSON_AddStringToObject(t, "name", b->name);
        cJSON_AddItemToObject(t, "shape", shape_json(b->shape, b->ndim));
        const char *dt = b->tensor ? lp_st_dtype_name(b->tensor->dtype) : w ? "missing" : "init";
        cJSON_AddStringToObject(t, "dtype", dt);
        cJSON_AddItemToArray(ls, t);
    }

    if (e) {
        cJSON *mem = cJSON_AddObjectToObject(r, "memory");
        cJSON_AddStringToObject(mem, "method", method_name(o->method));
        cJSON_AddStringToObject(mem, "task", task_name(etask));
        cJSON_AddNumberToObject(mem, "batch_size", (double)o->batch_size);
        cJSON_AddNumberToObject(mem, "seq_len", (double)o->seq_len);
        if (o->method != LP_TRAIN_METHOD_FULL) {
            cJSON_AddNumberToObject(mem, "rank", (double)o->lora_rank);
            cJSON_AddNumberToObject(mem, "lora_dropout", o->lora_dropout);
        }
        cJSON_AddStringToObject(mem, "exec", o->eager ? "eager" : "fused");
        cJSON_AddBoolToObject(mem, "gradient_checkpointing", o->grad_checkpointing);
        cJSON_AddNumberToObject(mem, "threads", (double)o->threads);
        cJSON_AddStringToObject(mem, "optimizer", "adamw");
        cJSON_AddStringToObject(mem, "dtype", "float32");
        cJSON_AddNumberToObject(mem, "trainable_parameters", (double)e->trainable_params);
        cJSON_AddNumberToObject(mem, "lora_parameters", (double)e->lora_params);
        cJSON_AddNumberToObject(mem, "activations_per_layer", (double)e->activations_per_layer);
        cJSON *b = cJSON_AddObjectToObject(mem, "bytes");
        cJSON_AddNumberToObject(b, "parameters", (double)e->parameters);
        cJSON_AddNumberToObject(b, "gradients", (double)e->gradients);
        cJSON_AddNumberToObject(b, "optimizer_state", (double)e->optimizer_state);
        cJSON_AddNumberToObject(b, "activations", (double)e->activations);
        cJSON_AddNumberToObject(b, "quantized_weights", (double)e->quantized_weights);
        cJSON_AddNumberToObject(b, "temporary", (double)e->temporary);
        cJSON_AddNumberToObject(b, "input", (double)e->input);
        cJSON_AddNumberToObject(b, "total", (double)e->total);
        cJSON_AddNumberToObject(mem, "temporary_transient", (double)e->temporary_transient);
    }
    if (m->task == LP_MODEL_TASK_CAUSAL_LM && cfg->family == LP_MODEL_FAMILY_LLAMA) { // loupe generate's cache
        cJSON *kv = cJSON_AddObjectToObject(r, "kv_cache");
        cJSON_AddNumberToObject(kv, "batch_size", (double)o->batch_size);
        cJSON_AddNumberToObject(kv, "tokens", (double)o->seq_len);
        cJSON_AddNumberToObject(kv, "bytes_f32", (double)lp_model_kv_bytes(cfg, o->batch_size, o->seq_len, LP_DTYPE_F32));
        cJSON_AddNumberToObject(kv, "bytes_f16", (double)lp_model_kv_bytes(cfg, o->batch_size, o->seq_len, LP_DTYPE_F16));
    }
    return r;
}

static void print_text(const char *dir, const lp_model_config *cfg, const lp_st_set *w, const lp_param_map *m,
                       const counts *c, const lp_mem_estimate *e, const lp_mem_estimate_opts *o,
                       lp_model_task etask)
{
    char a[32], b[32], d[32];
    printf("model         %s\n", dir);
    printf("architecture  %s (family %s, task %s)\n", lp_hf_arch_name(cfg->arch),
           cfg->family == LP_MODEL_FAMILY_BERT ? "bert" : "llama", task_name(m->task));
    printf("config        hidden %" PRId64 ", layers %" PRId64 ", heads %" PRId64 " (head dim %" PRId64
           ", kv heads %" PRId64 "), intermediate %" PRId64 "\n",
           cfg->hidden_size, cfg->num_layers, cfg->num_heads, cfg->head_dim, cfg->num_kv_heads,
           cfg->intermediate_size);
    printf("              vocab %" PRId64 ", max positions %" PRId64, cfg->vocab_size, cfg->max_position_embeddings);
    if (cfg->family == LP_MODEL_FAMILY_BERT)
        printf(", type vocab %" PRId64 ", layer norm eps %g", cfg->type_vocab_size, cfg->norm_eps);
    else
        printf(", rms norm eps %g, rope theta %g%s", cfg->norm_eps, cfg->rope_theta,
               cfg->tie_word_embeddings ? ", tied embeddings" : "");
    printf(", activation %s\n", cfg->activation_name);
    if (m->task == LP_MODEL_TASK_SEQ_CLS) {
        printf("labels        %" PRId64 ":", cfg->num_labels);
        for (int64_t i = 0; i < cfg->num_labels && i < 10; i++)
            printf(" %s", cfg->id2label[i]);
        printf("%s\n", cfg->num_labels > 10 ? " ..." : "");
    }
    if (!w)
        printf("weights       none (config only: the engine initializes every parameter)");
    else
        printf("weights       %zu file%s, %s on disk, %zu tensors:", nfiles(w), nfiles(w) > 1 ? "s" : "",
               mib(lp_st_set_disk_bytes(w), a), ntensors(w));
    for (int dt = 0; dt < LP_ST_DTYPE__COUNT; dt++) {
        size_t n = 0;
        for (size_t i = 0; i < ntensors(w); i++)
            n += lp_st_set_at(w, i)->dtype == (lp_st_dtype)dt;
        if (n)
            printf(" %s x%zu", lp_st_dtype_name((lp_st_dtype)dt), n);
    }
    printf("\n");
    if (!w)
        printf("mapping       none: %zu parameters to initialize (prefix \"%s\" when saved)\n", m->n,
               m->prefix);
    else
        printf("mapping       %zu parameters mapped (prefix \"%s\"), %zu ignored buffers, %zu unexpected\n",
               m->n - m->n_missing_head, m->prefix, m->n_ignored, m->n_unexpected);
    for (size_t i = 0; i < m->n_unexpected && i < 8; i++)
        printf("  unexpected  %s (not used)\n", m->unexpected[i]);
    if (m->n_unexpected > 8)
        printf("  unexpected  ... %zu more\n", m->n_unexpected - 8);
    if (m->n_missing_head) {
        printf("  head missing: will be initialized:");
        for (size_t i = 0; i < m->n; i++)
            if (!m->params[i].tensor)
                printf(" %s", m->params[i].name);
        printf("\n");
    }
    printf("layer 0       ");
    int col = 0;
    for (size_t i = 0; i < m->n; i++) {
        const lp_param_binding *p = &m->params[i];
        if (p->layer != 0 || !p->is_linear_weight)
            continue;
        printf("%s%s [%" PRId64 ", %" PRId64 "]", col++ ? ", " : "", lp_param_role_name(p->role), p->shape[0],
               p->shape[1]);
    }
    printf("\nparameters    %s total", commas(c->total, a));
    if (c->in_file != c->total)
        printf(" (%s in the checkpoint)", commas(c->in_file, b));
    printf("\n  embeddings  %s\n", commas(c->embeddings, a));
    printf("  per layer   %s x %" PRId64 " = %s\n", commas(c->per_layer, a), cfg->num_layers, commas(c->layers, b));
    if (c->final_norm)
        printf("  final norm  %s\n", commas(c->final_norm, a));
    printf("  head        %s\n", commas(c->head, d));
    if (m->task == LP_MODEL_TASK_CAUSAL_LM && cfg->family == LP_MODEL_FAMILY_LLAMA) // what loupe generate allocates
        printf("kv cache      batch %" PRId64 " x %" PRId64 " tokens: %s (f32), %s (f16)\n", o->batch_size, o->seq_len,
               mib(lp_model_kv_bytes(cfg, o->batch_size, o->seq_len, LP_DTYPE_F32), a),
               mib(lp_model_kv_bytes(cfg, o->batch_size, o->seq_len, LP_DTYPE_F16), b));
    if (!e)
        return;
    printf("\npredicted peak training memory: %s, batch %" PRId64 ", seq len %" PRId64, method_name(o->method),
           o->batch_size, o->seq_len);
    if (o->method != LP_TRAIN_METHOD_FULL)
        printf(", rank %" PRId64, o->lora_rank);
    printf(", exec %s%s (AdamW, fp32, task %s)\n", o->eager ? "eager" : "fused",
           o->grad_checkpointing ? ", gradient checkpointing" : "", task_name(etask));
    printf("  trainable parameters  %s\n", commas(e->trainable_params, a));
    printf("  parameters            %12s\n", mib(e->parameters, a));
    printf("  gradients             %12s\n", mib(e->gradients, a));
    printf("  optimizer_state       %12s\n", mib(e->optimizer_state, a));
    printf("  activations           %12s  (%s per layer)\n", mib(e->activations, a), mib(e->activations_per_layer, b));
    printf("  quantized_weights     %12s\n", mib(e->quantized_weights, a));
    printf("  temporary             %12s  (%s kernel scratch within a layer)\n", mib(e->temporary, a),
           mib(e->temporary_transient, b));
    printf("  input                 %12s\n", mib(e->input, a));
    printf("  total                 %12s  (all live together at the peak)\n", mib(e->total, a));
}

int lp_cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},     {"json", no_argument, 0, 'j'},
        {"output", required_argument, 0, 'o'},    {"task", required_argument, 0, 't'},
        {"method", required_argument, 0, 'M'},    {"batch-size", required_argument, 0, 'b'},
        {"seq-len", required_argument, 0, 's'},   {"rank", required_argument, 0, 'r'},
        {"exec", required_argument, 0, 'e'},      {"gradient-checkpointing", no_argument, 0, 'g'},
        {"lora-dropout", required_argument, 0, 'd'}, {"threads", required_argument, 0, 'T'},
        {"dtype", required_argument, 0, 'D'},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0},
    };
    const char *dir = NULL, *output = NULL;
    bool json = false, have_method = false, eager = false, ckpt = false, bf16 = false;
    long bs = 8, sl = 128, rank = 8, threads = 0;
    bool sl_given = false;
    double lora_dropout = 0.0;
    const char *prediction_flag = NULL, *adapter_flag = NULL; /* the last such flag given */
    lp_model_task task = LP_MODEL_TASK_AUTO;
    lp_train_method method = LP_TRAIN_METHOD_FULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': dir = optarg; break;
        case 'j': json = true; break;
        case 'o': output = optarg; break;
        case 't':
            if (!strcmp(optarg, "auto")) task = LP_MODEL_TASK_AUTO;
            else if (!strcmp(optarg, "base")) task = LP_MODEL_TASK_BASE;
            else if (!strcmp(optarg, "seq-cls")) task = LP_MODEL_TASK_SEQ_CLS;
            else if (!strcmp(optarg, "causal-lm")) task = LP_MODEL_TASK_CAUSAL_LM;
            else return lp_cli_usage_error("inspect", "--task must be auto, base, seq-cls or causal-lm, got '%s'", optarg);
            break;
        case 'M':
            have_method = true;
            if (!strcmp(optarg, "full")) method = LP_TRAIN_METHOD_FULL;
            else if (!strcmp(optarg, "lora")) method = LP_TRAIN_METHOD_LORA;
            else if (!strcmp(optarg, "qlora")) method = LP_TRAIN_METHOD_QLORA;
            else return lp_cli_usage_error("inspect", "--method must be full, lora or qlora, got '%s'", optarg);
            break;
        case 'b':
            if (lp_cli_parse_long("inspect", "--batch-size", optarg, 1, 1 << 20, &bs)) return LP_EXIT_USAGE;
            prediction_flag = "--batch-size";
            break;
        case 's':
            if (lp_cli_parse_long("inspect", "--seq-len", optarg, 1, 1 << 24, &sl)) return LP_EXIT_USAGE;
            sl_given = true;
            prediction_flag = "--seq-len";
            break;
        case 'r':
            if (lp_cli_parse_long("inspect", "--rank", optarg, 1, 65536, &rank)) return LP_EXIT_USAGE;
            prediction_flag = adapter_flag = "--rank";
            break;
        case 'e':
            if (!strcmp(optarg, "eager")) eager = true;
            else if (!strcmp(optarg, "fused")) eager = false;
            else return lp_cli_usage_error("inspect", "--exec must be eager or fused, got '%s'", optarg);
            prediction_flag = "--exec";
            break;
        case 'D':
            if (!strcmp(optarg, "bf16")) bf16 = true;
            else if (!strcmp(optarg, "f32")) bf16 = false;
            else return lp_cli_usage_error("inspect", "--dtype must be f32 or bf16, got '%s'", optarg);
            prediction_flag = "--dtype";
            break;
        case 'g':
            ckpt = true;
            prediction_flag = "--gradient-checkpointing";
            break;
        case 'd': {
            prediction_flag = adapter_flag = "--lora-dropout";
            char *end;
            lora_dropout = strtod(optarg, &end);
            if (end == optarg || *end || !(lora_dropout >= 0 && lora_dropout < 1))
                return lp_cli_usage_error("inspect", "--lora-dropout must be a number in [0, 1), got '%s'",
                                          optarg);
            break;
        }
        case 'T':
            if (lp_cli_parse_long("inspect", "--threads", optarg, 1, 4096, &threads)) return LP_EXIT_USAGE;
            prediction_flag = "--threads";
            break;
        case 'h': usage(stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("inspect", "unknown option");
        }
    }
    if (optind < argc)
        return lp_cli_usage_error("inspect", "unexpected argument '%s'", argv[optind]);
    if (!dir)
        return lp_cli_usage_error("inspect", "--model DIR is required");
    // the prediction's settings without a prediction, or adapter settings for full fine-tuning,
    // would change nothing: refused rather than ignored
    if (prediction_flag && !have_method)
        return lp_cli_usage_error("inspect", "%s sets up the memory prediction: it needs --method", prediction_flag);
    if (adapter_flag && method == LP_TRAIN_METHOD_FULL)
        return lp_cli_usage_error("inspect", "%s needs --method lora or qlora", adapter_flag);

    lp_model_config cfg;
    lp_st_set *w = NULL;
    lp_param_map m = {0}, mt = {0};
    int rc = LP_EXIT_FAIL;
    char cfg_path[4096];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    if (lp_path_is_gguf(dir)) { // a GGUF file: the config from its metadata, its tensors as f32
        char *json = NULL;
        lp_status st = lp_gguf_model_open(dir, &json, &w);
        if (st == LP_OK)
            st = lp_hf_config_parse(json, strlen(json), dir, &cfg);
        free(json);
        if (st != LP_OK) {
            lp_st_set_close(w);
            return lp_cli_fail("inspect");
        }
    } else if (lp_hf_config_load(cfg_path, &cfg) != LP_OK)
        return lp_cli_fail("inspect");
    /* w stays NULL for a config-only directory */
    if ((!lp_path_is_gguf(dir) && lp_st_set_open_weights(dir, &w) != LP_OK) ||
        lp_param_map_build(&cfg, w, task, &m) != LP_OK) {
        rc = lp_cli_fail("inspect");
        goto out;
    }
    /* loupe train always builds a sequence classifier on a BERT-family model: the estimate
     * counts that model's head even where the directory holds a bare encoder */
    const lp_param_map *em = &m;
    if (have_method && task == LP_MODEL_TASK_AUTO && cfg.family == LP_MODEL_FAMILY_BERT &&
        m.task != LP_MODEL_TASK_SEQ_CLS) {
        if (lp_param_map_build(&cfg, w, LP_MODEL_TASK_SEQ_CLS, &mt) != LP_OK) {
            rc = lp_cli_fail("inspect");
            goto out;
        }
        em = &mt;
    }
    counts c = count_params(&cfg, &m);
    lp_mem_estimate e;
    if (have_method && !threads)
        threads = lp_threads_init(); /* loupe train's default */
    if (!sl_given && sl > cfg.max_position_embeddings) // loupe train's default: --max-seq-len 128, at most the positions
        sl = (long)cfg.max_position_embeddings;
    lp_mem_estimate_opts o = {.method = method, .batch_size = bs, .seq_len = sl, .lora_rank = rank,
                              .eager = eager, .grad_checkpointing = ckpt, .lora_dropout = lora_dropout,
                              .threads = (int32_t)threads};
    if (have_method) { // the model loupe train would build, planned by the engine itself
        lp_model_options mo;
        lp_model_options_init(&mo);
        mo.task = em->task;
        mo.exec = eager ? LP_EXEC_MODE_EAGER : LP_EXEC_MODE_FUSED;
        mo.grad_checkpointing = ckpt;
        mo.compute = bf16 ? LP_DTYPE_BF16 : LP_DTYPE_F32;
        if (method != LP_TRAIN_METHOD_FULL) {
            mo.lora.enabled = true;
            mo.lora.rank = (int32_t)rank;
            mo.lora.dropout = (float)lora_dropout;
            mo.lora.base_dtype = method == LP_TRAIN_METHOD_QLORA ? LP_DTYPE_NF4 : bf16 ? LP_DTYPE_BF16 : LP_DTYPE_F32;
        }
        if (lp_model_estimate(dir, &mo, bs, sl, (int32_t)threads, &e) != LP_OK) {
            rc = lp_cli_fail("inspect");
            goto out;
        }
    }
    cJSON *j = build_json(dir, &cfg, w, &m, &c, have_method ? &e : NULL, &o, em->task);
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!text) {
        fprintf(stderr, "loupe inspect: out of memory\n");
        goto out;
    }
    rc = LP_EXIT_OK;
    if (output) {
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: the file ends in a newline */
        if (lp_file_write_atomic(output, text, n + 1) != LP_OK)
            rc = lp_cli_fail("inspect");
        text[n] = '\0';
    }
    if (rc == LP_EXIT_OK) {
        if (json)
            printf("%s\n", text);
        else
            print_text(dir, &cfg, w, &m, &c, have_method ? &e : NULL, &o, em->task);
    }
    free(text);
out:
    lp_param_map_free(&m);
    lp_param_map_free(&mt);
    lp_st_set_close(w);
    lp_model_config_free(&cfg);
    return rc;
}
