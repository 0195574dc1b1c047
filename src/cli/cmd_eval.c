/* loupe eval: a model (and optionally a PEFT adapter) on a dataset file, in file order, in
 * eval mode. Classifiers: mean loss, accuracy, macro-F1; causal LMs: token-weighted mean
 * loss and perplexity. --save-predictions writes one JSON line per row (predicted label and
 * logits, or the row's mean token loss) so results can be checked row by row against
 * another tool. Public APIs only: models.h, data.h, text.h, kernels.h, train.h. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "loupe/core.h"
#include "loupe/data.h"
#include "loupe/kernels.h"
#include "loupe/models.h"
#include "loupe/text.h"
#include "loupe/train.h"

static const char usage_text[] =
    "usage: loupe eval --model DIR --data FILE [options]\n"
    "\n"
    "Evaluate a model on a dataset: loss, accuracy and macro-F1 for a classifier, perplexity\n"
    "(exp of the token-weighted mean loss) for a causal LM.\n"
    "\n"
    "  --model DIR              HF model directory (a config-only one is drawn from its seed, as train)\n"
    "  --adapter DIR            apply a PEFT LoRA adapter (as written by --save-adapter)\n"
    "  --base-dtype f32|int8|nf4  the frozen base under --adapter (nf4: as a QLoRA run trained it)\n"
    "  --quantize q8_0|int8|q4_0|nf4|bf16|f32_packed|stored\n"
    "                           keep the layers' Linear weights quantized (converted at load,\n"
    "                           or a GGUF's own blocks with 'stored'), run with the integer kernels (bf16: the bf16 GEMM;\n"
    "                           int8: dynamic int8 quantization, a scale per weight row and per token)\n"
    "  --dequantize             f32 weights, a GGUF dequantized at load (the default)\n"
    "  --data FILE              CSV/TSV/JSONL: text (and label, for a classifier) columns\n"
    "  --task auto|seq-cls|causal-lm   what the model is (auto: its architecture)\n"
    "  --text-column, --text-pair-column, --label-column NAME\n"
    "  --skip-bad-rows          drop malformed rows (counted and reported) instead of failing\n"
    "  --max-seq-len N          truncation length (default 128, capped at the model's positions)\n"
    "  --batch-size N           rows per forward (default 16; a causal LM's logits are computed a\n"
    "                           chunk of rows at a time, never N x max-seq-len x vocab at once)\n"
    "  --threads N              CPU threads\n"
    "  --device cpu|cuda        where the model runs (cpu): cuda runs it in f32 (encoders and\n"
    "                           decoders) on the GPU LP_CUDA_DEVICE names (default 0)\n"
    "  --tf32                   with --device cuda: f32 GEMMs (attention's too) on TF32 tensor cores\n"
    "  --save-predictions FILE  one JSON line per row: predicted label and logits (classifier) or\n"
    "                           the row's mean token loss (causal LM); written atomically\n"
    "  --json                   print the metrics as one JSON object\n"
    "\nExit status: 0 done, 1 failed (a bad file or data), 2 usage error.\n";

typedef struct eval_args {
    const char *model, *adapter, *data, *text_col, *pair_col, *label_col, *save_preds;
    lp_model_task task;
    lp_dtype base_dtype;
    lp_weight_format weights;
    bool skip_bad, json, tf32;
    lp_device device;
    long max_len, batch, threads;
} eval_args;

/* The seed a config-only directory's weights are drawn from, as loupe train reads it, so an
 * eval of models/tiny-llama sees the weights a run on it started from. */
static uint64_t init_seed(const char *model_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    cJSON *j;
    if (lp_json_read_file(path, &j) != LP_OK)
        return 42; /* the model loader reports what is wrong with the file */
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "loupe_init_seed");
    uint64_t v = cJSON_IsNumber(s) && s->valuedouble >= 0 ? (uint64_t)s->valuedouble : 42;
    cJSON_Delete(j);
    return v;
}

/* Padding's id does not change any result (the mask keeps it out); decoder tokenizers often
 * lack one: the tokenizer's pad, else the config's, else EOS, else 0, as loupe train. */
static int32_t pad_id_of(const lp_tokenizer *tok, const lp_model_config *cfg)
{
    int32_t pad = lp_tokenizer_special_id(tok, LP_SPECIAL_PAD);
    if (pad < 0 && cfg->pad_token_id >= 0)
        pad = (int32_t)cfg->pad_token_id;
    if (pad < 0)
        pad = lp_tokenizer_special_id(tok, LP_SPECIAL_EOS);
    if (pad < 0 && cfg->eos_token_id >= 0)
        pad = (int32_t)cfg->eos_token_id;
    return pad < 0 ? 0 : pad;
}

typedef struct eval_run {
    const eval_args *a;
    lp_model *model;
    lp_model_info mi;
    lp_tokenizer *tok;
    lp_dataset ds;
    lp_encoded_dataset enc;
    lp_batch batch;
    lp_atomic_file pf;
    bool pf_open;
    float *logits, *lse;
    int32_t *targets, *pred;
    bool lm, type_ids;
    /* results */
    double loss_sum, count, accuracy, macro_f1;
} eval_run;

static lp_status open_model(eval_run *E)
{
    const eval_args *a = E->a;
    lp_model_task task;
    lp_status st = lp_train_task_resolve(a->model, a->task, &task);
    if (st != LP_OK)
        return st;
    lp_model_options mo;
    lp_model_options_init(&mo);
    mo.task = task;
    mo.no_grad = true;
    mo.lazy_embedding = true; /* forward and generation only: the rows of the tokens met */
    mo.quiet = true;
    mo.exec = LP_EXEC_MODE_FUSED;
    mo.weights = a->weights;
    mo.seed = init_seed(a->model);
    if (a->adapter) {
        mo.lora.enabled = true;
        mo.lora.adapter_dir = a->adapter;
        mo.lora.base_dtype = a->base_dtype;
    }
    if ((st = lp_model_load(a->model, &mo, &E->model)) != LP_OK)
        return st;
    lp_model_info_get(E->model, &E->mi);
    E->lm = E->mi.task == LP_MODEL_TASK_CAUSAL_LM;
    E->type_ids = E->mi.family == LP_MODEL_FAMILY_BERT; /* decoders take no token type ids */
    if ((st = lp_tokenizer_load(a->model, &E->tok)) != LP_OK)
        return lp_err_wrap(st, "tokenizer of %s", a->model);
    return LP_OK;
}

static lp_status open_data(eval_run *E)
{
    const eval_args *a = E->a;
    lp_dataset_options o;
    lp_dataset_options_init(&o);
    o.text_column = a->text_col;
    o.text_pair_column = a->pair_col;
    o.label_column = a->label_col;
    o.skip_bad_rows = a->skip_bad;
    o.text_only = E->lm;
    /* a classifier's labels map by the names in its config (id2label) when it has them; integer
     * labels in [0, num_labels) are ids either way */
    lp_label_map names = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", a->model);
    if (!E->lm && lp_label_map_load(&names, path) == LP_OK && names.n == E->mi.num_labels)
        o.label_map = &names;
    else if (!E->lm)
        o.num_labels = (int32_t)E->mi.num_labels;
    lp_status st = lp_dataset_load(a->data, &o, &E->ds);
    lp_label_map_free(&names);
    if (st != LP_OK)
        return st;
    if (E->ds.n_skipped) {
        fprintf(stderr, "loupe eval: %s: skipped %lld bad row%s\n", E->ds.source, (long long)E->ds.n_skipped,
                E->ds.n_skipped == 1 ? "" : "s");
        for (int32_t i = 0; i < E->ds.n_reasons; i++)
            fprintf(stderr, "  %s\n", E->ds.skip_reasons[i]);
    }
    int32_t max_len = (int32_t)(a->max_len < E->mi.max_positions ? a->max_len : E->mi.max_positions);
    lp_tokenizer_rows ec = {.tok = E->tok};
    st = lp_dataset_encode(&E->ds, lp_tokenizer_encode_row, &ec, max_len, pad_id_of(E->tok, lp_model_config_get(E->model)),
                           &E->enc);
    lp_encoding_free(&ec.enc);
    if (st != LP_OK)
        return st;
    lp_length_stats ls;
    if (lp_encoded_length_stats(&E->enc, &ls) == LP_OK && ls.n_truncated)
        fprintf(stderr,
                "loupe eval: %s: %lld of %lld rows truncated to --max-seq-len %d tokens (longest %d)\n",
                E->ds.source, (long long)ls.n_truncated, (long long)ls.count, (int)max_len, (int)ls.max);
    /* the largest batch: B rows of the longest row. A causal LM keeps one loss per token (the
     * model computes its (B*T, vocab) logits a chunk at a time and drops them); a classifier
     * its (B, labels) logits */
    size_t B = (size_t)a->batch, T = (size_t)max_len, L = (size_t)E->mi.num_labels;
    size_t rows = E->lm ? B * T : B, cols = E->lm ? 1 : L;
    E->logits = malloc(rows * cols * sizeof *E->logits);
    E->lse = malloc(rows * sizeof *E->lse);
    E->targets = malloc(rows * sizeof *E->targets);
    E->pred = malloc((size_t)(E->enc.n ? E->enc.n : 1) * sizeof *E->pred);
    if (!E->logits || !E->lse || !E->targets || !E->pred)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for batches of %zu x %zu", a->data, B, T);
    return LP_OK;
}

/* s as a JSON string (label names are UTF-8 from the data or the config). */
static void put_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* One line of --save-predictions. */
static void write_row_lm(FILE *f, const eval_run *E, int64_t row, int32_t len, double loss)
{
    fprintf(f, "{\"row\": %lld, \"line\": %lld, \"tokens\": %d, \"predicted_tokens\": %d, \"mean_loss\": ",
            (long long)row, (long long)E->ds.lines[row], (int)len, (int)(len - 1));
    if (len > 1)
        fprintf(f, "%.9g}\n", loss);
    else
        fprintf(f, "null}\n"); /* a one-token row predicts nothing */
}

static void write_row_cls(FILE *f, const eval_run *E, int64_t row, const float *logits, int32_t L,
                          int32_t pred)
{
    const lp_label_map *m = &E->ds.label_map;
    fprintf(f, "{\"row\": %lld, \"line\": %lld, \"label\": %d, \"pred\": %d, ", (long long)row,
            (long long)E->ds.lines[row], (int)E->ds.labels[row], (int)pred);
    fputs("\"pred_label\": ", f);
    put_json_str(f, pred < m->n ? m->names[pred] : "");
    fputs(", \"logits\": [", f);
    for (int32_t k = 0; k < L; k++)
        fprintf(f, "%s%.9g", k ? ", " : "", (double)logits[k]);
    fputs("]}\n", f);
}

/* A causal LM's batch (its per-token losses in E->logits, lp_model_token_losses: the labels
 * shifted as in training, position t predicting token t+1, padding nothing): each row's
 * mean loss over its predicted tokens, summed in double. */
static lp_status lm_batch(eval_run *E, int64_t first)
{
    const lp_batch *b = &E->batch;
    const int64_t T = b->T;
    for (int32_t r = 0; r < b->B; r++) {
        const int32_t *lab = b->lm_labels + (size_t)r * T;
        const float *tl = E->logits + (size_t)r * T;
        int32_t len = 0, k = 0;
        double sum = 0.0;
        for (int64_t t = 0; t < T; t++) {
            const bool real = b->attention_mask[(size_t)r * T + t];
            len += real;
            if (real && t + 1 < T && lab[t + 1] != -100) { /* the positions the model scored */
                sum += tl[t];
                k++;
            }
        }
        if (k) {
            E->loss_sum += sum;
            E->count += k;
        }
        if (E->pf_open)
            write_row_lm(E->pf.fp, E, first + r, len, k ? sum / k : 0.0);
    }
    return LP_OK;
}

static lp_status cls_batch(eval_run *E, int64_t first)
{
    const lp_batch *b = &E->batch;
    const int32_t L = (int32_t)E->mi.num_labels;
    float l;
    // the logits are on the host here: on a GPU run, the CPU's kernel
    lp_status st = E->a->device == LP_DEVICE_CPU
                       ? lp_cross_entropy_forward(&l, E->lse, E->logits, b->labels, b->B, L, -100)
                       : lp_kernels_table(LP_KERNELS_IMPL_OPT)
                             ->cross_entropy_forward(&l, E->lse, E->logits, b->labels, b->B, L, -100);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s: rows %lld..%lld", E->a->data, (long long)first + 1,
                           (long long)first + b->B);
    E->loss_sum += (double)l * b->B;
    E->count += b->B;
    for (int32_t r = 0; r < b->B; r++) {
        const float *lg = E->logits + (size_t)r * L;
        int32_t best = 0;
        for (int32_t k = 1; k < L; k++)
            if (lg[k] > lg[best])
                best = k;
        E->pred[first + r] = best;
        if (E->pf_open)
            write_row_cls(E->pf.fp, E, first + r, lg, L, best);
    }
    return LP_OK;
}

static lp_status run_eval(eval_run *E)
{
    const eval_args *a = E->a;
    lp_status st;
    if ((st = open_model(E)) != LP_OK || (st = open_data(E)) != LP_OK)
        return st;
    if (!E->lm && E->ds.label_map.n > E->mi.num_labels)
        return lp_err(LP_STATUS_RANGE, "%s: %d labels but the model %s has %d", a->data,
                      (int)E->ds.label_map.n, a->model, (int)E->mi.num_labels);
    if (a->save_preds) {
        if ((st = lp_atomic_open(&E->pf, a->save_preds)) != LP_OK)
            return st;
        E->pf_open = true;
    }
    int64_t *rows = malloc((size_t)a->batch * sizeof *rows);
    if (!rows)
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    lp_batch_init(&E->batch);
    for (int64_t s = 0; st == LP_OK && s < E->enc.n; s += a->batch) {
        int32_t n = (int32_t)(E->enc.n - s < a->batch ? E->enc.n - s : a->batch);
        for (int32_t i = 0; i < n; i++)
            rows[i] = s + i;
        if ((st = lp_batch_fill(&E->batch, &E->enc, rows, n, 0)) != LP_OK)
            break;
        st = E->lm ? lp_model_token_losses(E->model, E->batch.input_ids, E->batch.attention_mask,
                                           E->batch.lm_labels, n, E->batch.T, E->logits)
                   : lp_model_forward(E->model, E->batch.input_ids, E->batch.attention_mask,
                                      E->type_ids ? E->batch.token_type_ids : NULL, n, E->batch.T, E->logits);
        if (st != LP_OK)
            st = lp_err_wrap(st, "%s: rows %lld..%lld", a->data, (long long)s + 1, (long long)s + n);
        else
            st = E->lm ? lm_batch(E, s) : cls_batch(E, s);
    }
    free(rows);
    if (st != LP_OK)
        return st;
    if (E->count == 0)
        return lp_err(LP_STATUS_FORMAT, "%s: every row has a single token: nothing to predict", a->data);
    if (!E->lm)
        lp_metrics_classification(E->ds.labels, E->pred, E->enc.n, (int32_t)E->mi.num_labels, &E->accuracy,
                                  &E->macro_f1);
    if (E->pf_open) {
        E->pf_open = false;
        if ((st = lp_atomic_commit(&E->pf)) != LP_OK)
            return st;
    }
    return LP_OK;
}

static void print_results(const eval_run *E)
{
    const eval_args *a = E->a;
    double loss = E->loss_sum / E->count;
    if (!a->json) {
        if (E->lm)
            printf("eval: loss %.4f, perplexity %.3f (%lld rows, %.0f predicted tokens)\n", loss, exp(loss),
                   (long long)E->enc.n, E->count);
        else
            printf("eval: loss %.4f, accuracy %.4f, macro-F1 %.4f (%lld rows)\n", loss, E->accuracy,
                   E->macro_f1, (long long)E->enc.n);
        if (a->save_preds)
            printf("predictions: %s\n", a->save_preds);
        return;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", a->model);
    if (a->adapter)
        cJSON_AddStringToObject(j, "adapter", a->adapter);
    cJSON_AddStringToObject(j, "data", a->data);
    cJSON_AddStringToObject(j, "architecture", lp_hf_arch_name(E->mi.arch));
    cJSON_AddStringToObject(j, "task", lp_train_task_name(E->mi.task));
    cJSON_AddStringToObject(j, "device", a->device == LP_DEVICE_CPU ? "cpu" : lp_kernels_device_label());
    cJSON_AddNumberToObject(j, "rows", (double)E->enc.n);
    cJSON_AddNumberToObject(j, "rows_skipped", (double)E->ds.n_skipped);
    cJSON_AddNumberToObject(j, "loss", loss);
    if (E->lm) { /* no accuracy for a causal LM: absent, not 0 */
        cJSON_AddNumberToObject(j, "perplexity", exp(loss));
        cJSON_AddNumberToObject(j, "predicted_tokens", E->count);
    } else {
        cJSON_AddNumberToObject(j, "accuracy", E->accuracy);
        cJSON_AddNumberToObject(j, "macro_f1", E->macro_f1);
        cJSON_AddNumberToObject(j, "num_labels", (double)E->mi.num_labels);
    }
    if (a->save_preds)
        cJSON_AddStringToObject(j, "predictions", a->save_preds);
    char *s = cJSON_Print(j);
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(j);
}

int lp_cmd_eval(int argc, char **argv)
{
    enum {
        O_MODEL = 1000,
        O_ADAPTER,
        O_DATA,
        O_TASK,
        O_TEXT,
        O_PAIR,
        O_LABEL,
        O_SKIP,
        O_MAXLEN,
        O_BATCH,
        O_THREADS,
        O_PREDS,
        O_JSON,
        O_BASE_DTYPE,
        O_QUANTIZE,
        O_DEQUANTIZE,
        O_DEVICE,
        O_TF32,
        O_HELP
    };
    static const struct option opts[] = {{"model", required_argument, NULL, O_MODEL},
                                         {"adapter", required_argument, NULL, O_ADAPTER},
                                         {"data", required_argument, NULL, O_DATA},
                                         {"task", required_argument, NULL, O_TASK},
                                         {"text-column", required_argument, NULL, O_TEXT},
                                         {"text-pair-column", required_argument, NULL, O_PAIR},
                                         {"label-column", required_argument, NULL, O_LABEL},
                                         {"skip-bad-rows", no_argument, NULL, O_SKIP},
                                         {"max-seq-len", required_argument, NULL, O_MAXLEN},
                                         {"batch-size", required_argument, NULL, O_BATCH},
                                         {"threads", required_argument, NULL, O_THREADS},
                                         {"save-predictions", required_argument, NULL, O_PREDS},
                                         {"json", no_argument, NULL, O_JSON},
                                         {"base-dtype", required_argument, NULL, O_BASE_DTYPE},
                                         {"quantize", required_argument, NULL, O_QUANTIZE},
                                         {"dequantize", no_argument, NULL, O_DEQUANTIZE},
                                         {"device", required_argument, NULL, O_DEVICE},
                                         {"tf32", no_argument, NULL, O_TF32},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    eval_args a = {.task = LP_MODEL_TASK_AUTO, .base_dtype = LP_DTYPE_F32, .max_len = 128, .batch = 16};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_MODEL:
            a.model = optarg;
            break;
        case O_ADAPTER:
            a.adapter = optarg;
            break;
        case O_DATA:
            a.data = optarg;
            break;
        case O_TASK:
            if (lp_train_task_parse(optarg, &a.task) != LP_OK)
                return lp_cli_usage_error("eval", "%s", lp_err_msg());
            break;
        case O_TEXT:
            a.text_col = optarg;
            break;
        case O_PAIR:
            a.pair_col = optarg;
            break;
        case O_LABEL:
            a.label_col = optarg;
            break;
        case O_SKIP:
            a.skip_bad = true;
            break;
        case O_MAXLEN:
            if (lp_cli_parse_long("eval", "--max-seq-len", optarg, 2, 1L << 20, &a.max_len))
                return LP_EXIT_USAGE;
            break;
        case O_BATCH:
            if (lp_cli_parse_long("eval", "--batch-size", optarg, 1, 65536, &a.batch))
                return LP_EXIT_USAGE;
            break;
        case O_THREADS:
            if (lp_cli_parse_long("eval", "--threads", optarg, 1, 4096, &a.threads))
                return LP_EXIT_USAGE;
            break;
        case O_PREDS:
            a.save_preds = optarg;
            break;
        case O_JSON:
            a.json = true;
            break;
        case O_BASE_DTYPE:
            if (lp_dtype_parse(optarg, &a.base_dtype) != LP_OK ||
                (a.base_dtype != LP_DTYPE_F32 && a.base_dtype != LP_DTYPE_INT8 &&
                 a.base_dtype != LP_DTYPE_NF4))
                return lp_cli_usage_error("eval", "--base-dtype expects f32, int8 or nf4, got '%s'", optarg);
            break;
        case O_QUANTIZE:
        case O_DEQUANTIZE:
            if (lp_cli_weights_flag("eval", o == O_DEQUANTIZE ? NULL : optarg, &a.weights))
                return LP_EXIT_USAGE;
            break;
        case O_DEVICE:
            if (lp_device_parse(optarg, &a.device) != LP_OK)
                return lp_cli_usage_error("eval", "--device expects cpu or cuda, got '%s'", optarg);
            break;
        case O_TF32:
            a.tf32 = true;
            break;
        case 'h':
        case O_HELP:
            fputs(usage_text, stdout);
            return LP_EXIT_OK;
        default:
            return lp_cli_usage_error("eval", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return lp_cli_usage_error("eval", "unexpected argument '%s'", argv[optind]);
    if (!a.model || !a.data)
        return lp_cli_usage_error("eval", "--model and --data are required");
    if (a.base_dtype != LP_DTYPE_F32 && !a.adapter)
        return lp_cli_usage_error("eval",
                                  "--base-dtype needs --adapter (a quantized base without adapters is not "
                                  "what any run trained)");
    if (a.tf32 && a.device != LP_DEVICE_CUDA)
        return lp_cli_usage_error("eval", "--tf32 needs --device cuda");
    lp_threads_init();
    if (a.threads > 0)
        lp_threads_set((int)a.threads);
    // before anything is read or written: a CPU-only build or a machine without a GPU stops here
    if (a.device != LP_DEVICE_CPU && lp_kernels_use_device(a.device) != LP_OK)
        return lp_cli_fail("eval");
    lp_kernels_set_tf32(a.tf32);
    eval_run E = {.a = &a};
    lp_status st = run_eval(&E);
    if (st == LP_OK)
        print_results(&E);
    if (E.pf_open)
        lp_atomic_abort(&E.pf); /* a failed run leaves no partial predictions file */
    free(E.logits);
    free(E.lse);
    free(E.targets);
    free(E.pred);
    lp_batch_free(&E.batch);
    lp_encoded_dataset_free(&E.enc);
    lp_dataset_free(&E.ds);
    lp_tokenizer_free(E.tok);
    lp_model_free(E.model);
    return st == LP_OK ? LP_EXIT_OK : lp_cli_fail("eval");
}
