/* bench_step: one configuration of the training / inference benchmark per process (so the
 * process's peak RSS belongs to it): a DistilBERT- or MiniLM-shaped classifier, or a
 * Qwen2.5-0.5B- or SmolLM2-135M-shaped causal LM, initialized from a config alone, a training step exactly as `loupe train` does it (zero grad, loss
 * forward, backward, clip at 1.0, AdamW over the trainable parameters) or an inference
 * forward, timed over --runs after --warmup. Prints one JSON object (see README.md).
 * A figure for bench/train_step/run.py and bench/peft_step/run.py, never a timed assertion. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "loupe/kernels.h"
#include "loupe/models.h"
#include "loupe/prof.h"
#include "loupe/train.h"

enum { MAX_RUNS = 1000 };

typedef struct args {
    const char *shape, *mode, *method, *exec, *dtype;
    int batch, seq, threads, warmup, runs;
    int ops; /* > 0: after the timed runs, this many more steps under the profiler (op table) */
    double peak_gflops;
    /* shape overrides (a tiny model for the smoke test); 0 = the shape's */
    int layers, hidden, heads, ffn, vocab;
    bool ckpt; /* --gradient-checkpointing */
    bool head_recompute; /* --head-grad-recompute: a trained LM head's gradient in the backward */
} args;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int die(const char *what)
{
    fprintf(stderr, "bench_step: %s: %s\n", what, lp_err_msg());
    return 1;
}

static int usage(const char *msg)
{
    if (msg)
        fprintf(stderr, "bench_step: %s\n", msg);
    fprintf(
        msg ? stderr : stdout,
        "usage: bench_step [--shape distilbert|minilm|qwen2.5-0.5b|smollm2-135m] [--mode train|infer|peak]\n"
        "                  [--method full|lora|qlora] [--gradient-checkpointing] [--head-grad-recompute]\n"
        "                  [--exec eager|fused] [--dtype f32|bf16] [--batch B] [--seq T] [--threads N] "
        "[--warmup N] [--runs N]\n"
        "                  [--peak-gflops G] [--ops N] [--layers N --hidden N --heads N --ffn N --vocab "
        "N]\n");
    return msg ? 2 : 0;
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "bench_step: %s wants an integer in [%d, %d], got \"%s\"\n", flag, lo, hi, s);
        return 2;
    }
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, args *a)
{
    *a = (args){.shape = "distilbert", .mode = "train", .method = "full", .exec = "fused", .dtype = "f32", .batch = 16,
                .seq = 128, .warmup = 2, .runs = 5};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h"))
            return usage(NULL) - 1; /* -1: print and exit 0 */
        if (!strcmp(f, "--gradient-checkpointing")) {
            a->ckpt = true;
            continue;
        }
        if (!strcmp(f, "--head-grad-recompute")) { /* as before lp_model_set_head_grad_in_loss */
            a->head_recompute = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage("missing value after the last flag, or unknown flag");
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(f, "--shape"))
            a->shape = v;
        else if (!strcmp(f, "--mode"))
            a->mode = v;
        else if (!strcmp(f, "--method"))
            a->method = v;
        else if (!strcmp(f, "--exec"))
            a->exec = v;
        else if (!strcmp(f, "--dtype"))
            a->dtype = v;
        else if (!strcmp(f, "--batch"))
            rc = parse_int(f, v, 1, 4096, &a->batch);
        else if (!strcmp(f, "--seq"))
            rc = parse_int(f, v, 1, 4096, &a->seq);
        else if (!strcmp(f, "--threads"))
            rc = parse_int(f, v, 0, 1024, &a->threads);
        else if (!strcmp(f, "--warmup"))
            rc = parse_int(f, v, 0, 1000, &a->warmup);
        else if (!strcmp(f, "--runs"))
            rc = parse_int(f, v, 1, MAX_RUNS, &a->runs);
        else if (!strcmp(f, "--ops"))
            rc = parse_int(f, v, 0, 100, &a->ops);
        else if (!strcmp(f, "--layers"))
            rc = parse_int(f, v, 1, 128, &a->layers);
        else if (!strcmp(f, "--hidden"))
            rc = parse_int(f, v, 1, 16384, &a->hidden);
        else if (!strcmp(f, "--heads"))
            rc = parse_int(f, v, 1, 256, &a->heads);
        else if (!strcmp(f, "--ffn"))
            rc = parse_int(f, v, 1, 65536, &a->ffn);
        else if (!strcmp(f, "--vocab"))
            rc = parse_int(f, v, 2, 1000000, &a->vocab);
        else if (!strcmp(f, "--peak-gflops")) {
            char *end;
            a->peak_gflops = strtod(v, &end);
            if (*end || end == v || !(a->peak_gflops > 0))
                return usage("--peak-gflops wants a positive number");
        } else {
            fprintf(stderr, "bench_step: unknown flag %s\n", f);
            return usage("see usage");
        }
        if (rc)
            return rc;
    }
    if (strcmp(a->shape, "distilbert") && strcmp(a->shape, "minilm") && strcmp(a->shape, "qwen2.5-0.5b") &&
        strcmp(a->shape, "smollm2-135m"))
        return usage("--shape is distilbert, minilm, qwen2.5-0.5b or smollm2-135m");
    if (strcmp(a->mode, "train") && strcmp(a->mode, "infer") && strcmp(a->mode, "peak"))
        return usage("--mode is train, infer or peak");
    if (strcmp(a->method, "full") && strcmp(a->method, "lora") && strcmp(a->method, "qlora"))
        return usage("--method is full, lora or qlora");
    if (strcmp(a->exec, "eager") && strcmp(a->exec, "fused"))
        return usage("--exec is eager or fused");
    if (strcmp(a->dtype, "f32") && strcmp(a->dtype, "bf16"))
        return usage("--dtype is f32 or bf16");
    return 0;
}

/* A config-only Hugging Face model directory: lp_model_load initializes every weight from
 * the seed. Dropout 0 everywhere (torch_ref.py sets p = 0 too): the bench compares compute,
 * not dropout RNG, and a step with dropout 0 is what `loupe train` runs on such a config. */
static int write_config(const args *a, char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/bench_step.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_step: cannot create a temporary directory %s: %s\n", dir, strerror(errno));
        return 1;
    }
    bool distil = !strcmp(a->shape, "distilbert"), qwen = !strcmp(a->shape, "qwen2.5-0.5b"),
         smol = !strcmp(a->shape, "smollm2-135m");
    int L = a->layers ? a->layers : qwen ? 24 : smol ? 30 : 6;
    int H = a->hidden ? a->hidden : distil ? 768 : qwen ? 896 : smol ? 576 : 384;
    int NH = a->heads ? a->heads : qwen ? 14 : smol ? 9 : 12;
    int F = a->ffn ? a->ffn : distil ? 3072 : qwen ? 4864 : smol ? 1536 : 1536;
    int V = a->vocab ? a->vocab : qwen ? 151936 : smol ? 49152 : 30522;
    int KV = qwen ? 2 : smol ? 3 : NH;
    if (a->heads && KV > NH)
        KV = NH;
    if (NH % KV)
        KV = NH;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_step: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (qwen) /* Qwen2.5-0.5B's config.json, dropout 0 and tied embeddings as the release */
        fprintf(f,
                "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\",\n"
                " \"vocab_size\": %d, \"hidden_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d,\n"
                " \"num_key_value_heads\": %d, \"intermediate_size\": %d, \"max_position_embeddings\": 32768,\n"
                " \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000.0, \"hidden_act\": \"silu\",\n"
                " \"tie_word_embeddings\": true, \"initializer_range\": 0.02, \"attention_dropout\": 0.0,\n"
                " \"use_sliding_window\": false, \"bos_token_id\": 151643, \"eos_token_id\": 151643}\n",
                V, H, L, NH, KV, F);
    else if (smol) /* SmolLM2-135M's config.json */
        fprintf(f,
                "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\",\n"
                " \"vocab_size\": %d, \"hidden_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d,\n"
                " \"num_key_value_heads\": %d, \"intermediate_size\": %d, \"max_position_embeddings\": 8192,\n"
                " \"rms_norm_eps\": 1e-5, \"rope_theta\": 100000.0, \"hidden_act\": \"silu\",\n"
                " \"tie_word_embeddings\": true, \"initializer_range\": 0.041666666666666664,\n"
                " \"attention_dropout\": 0.0, \"bos_token_id\": 0, \"eos_token_id\": 0, \"pad_token_id\": 2}\n",
                V, H, L, NH, KV, F);
    else if (distil)
        fprintf(f,
                "{\"architectures\": [\"DistilBertForSequenceClassification\"], \"model_type\": \"distilbert\",\n"
                " \"vocab_size\": %d, \"dim\": %d, \"n_layers\": %d, \"n_heads\": %d, \"hidden_dim\": %d,\n"
                " \"max_position_embeddings\": 512, \"activation\": \"gelu\", \"initializer_range\": 0.02,\n"
                " \"dropout\": 0.0, \"attention_dropout\": 0.0, \"seq_classif_dropout\": 0.0,\n"
                " \"sinusoidal_pos_embds\": false, \"pad_token_id\": 0,\n"
                " \"id2label\": {\"0\": \"LABEL_0\", \"1\": \"LABEL_1\"}, \"label2id\": {\"LABEL_0\": 0, \"LABEL_1\": 1}}\n",
                V, H, L, NH, F);
    else
        fprintf(f,
                "{\"architectures\": [\"BertForSequenceClassification\"], \"model_type\": \"bert\",\n"
                " \"vocab_size\": %d, \"hidden_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d,\n"
                " \"intermediate_size\": %d, \"max_position_embeddings\": 512, \"type_vocab_size\": 2,\n"
                " \"hidden_act\": \"gelu\", \"layer_norm_eps\": 1e-12, \"initializer_range\": 0.02,\n"
                " \"hidden_dropout_prob\": 0.0, \"attention_probs_dropout_prob\": 0.0, \"pad_token_id\": 0,\n"
                " \"id2label\": {\"0\": \"LABEL_0\", \"1\": \"LABEL_1\"}, \"label2id\": {\"LABEL_0\": 0, \"LABEL_1\": 1}}\n",
                V, H, L, NH, F);
    if (fclose(f) != 0) {
        fprintf(stderr, "bench_step: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

static void remove_config(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

/* splitmix64: the batch's ids and labels, seeded, independent of the library's streams. */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* One step as src/train/loop.c's train_step with grad_accum 1 on one rank: zero grad, loss forward,
 * backward, clip_grad_norm 1.0, AdamW (lr 1e-5 as torch_ref.py; lp_train_config's defaults:
 * betas 0.9/0.999, eps 1e-8, weight decay 0.01 except biases and LayerNorm). */
static bool head_grad_in_loss = true; /* --head-grad-recompute turns it off */

static int train_step(lp_model *m, lp_optim *opt, const lp_train_config *tc, const int32_t *ids,
                      const int32_t *labels, int B, int T)
{
    float loss;
    lp_model_zero_grad(m);
    lp_model_set_dloss_scale(m, 1.0f);
    lp_model_set_head_grad_in_loss(m, head_grad_in_loss); /* as the trainer on one rank */
    if (lp_model_loss_forward(m, ids, NULL, NULL, labels, B, T, NULL, &loss) != LP_OK)
        return die("loss forward");
    if (!isfinite(loss)) {
        fprintf(stderr, "bench_step: loss is not finite\n");
        return 1;
    }
    if (lp_model_backward(m) != LP_OK)
        return die("backward");
    if (!isfinite(lp_model_grad_clip(m, 1.0))) {
        fprintf(stderr, "bench_step: gradient norm is not finite\n");
        return 1;
    }
    lp_optim_step(opt, m, tc, 1e-5);
    lp_model_weights_changed(m); /* --dtype bf16: the next forward repacks, as loupe train */
    return 0;
}

/* The kernels' self time per step over the --ops steps the profiler recorded: what the two
 * exec modes spend their time on, op by op (the profiler's key averages, lp:: rows only;
 * the module ranges around them have next to no self time). */
typedef struct op_row {
    char name[96];
    double self_ms, calls; /* per step */
} op_row;

enum { MAX_OPS = 24 };

typedef struct op_table {
    op_row rows[MAX_OPS];
    int n, steps;
} op_table;

static lp_status collect_ops(const lp_prof_events *ev, void *user)
{
    op_table *t = user;
    lp_prof_keyavg_opts o;
    lp_prof_keyavg_opts_init(&o);
    lp_prof_keyavg ka;
    lp_status st = lp_prof_keyavg_build(ev, &o, &ka);
    if (st != LP_OK)
        return st;
    for (size_t i = 0; i < ka.n && t->n < MAX_OPS; i++) {
        const lp_prof_keyavg_row *r = &ka.rows[i];
        if (strncmp(r->key, "lp::", 4) || r->self_cpu_us <= 0)
            continue;
        op_row *o_ = &t->rows[t->n++];
        snprintf(o_->name, sizeof o_->name, "%s", r->key);
        o_->self_ms = r->self_cpu_us * 1e-3 / t->steps;
        o_->calls = (double)r->count / t->steps;
    }
    lp_prof_keyavg_free(&ka);
    return LP_OK;
}

static void print_ops(const op_table *t)
{
    printf(" \"ops_steps\": %d, \"ops\": [", t->steps);
    for (int i = 0; i < t->n; i++)
        printf("%s\n  {\"name\": \"%s\", \"self_ms_per_step\": %.4f, \"calls_per_step\": %.2f}", i ? "," : "",
               t->rows[i].name, t->rows[i].self_ms, t->rows[i].calls);
    printf("],\n");
}

static void print_json(const args *a, lp_model *m, const double *ms, int n, double gflop, bool train,
                       const op_table *ops)
{
    double sorted[MAX_RUNS];
    memcpy(sorted, ms, (size_t)n * sizeof *ms);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    double med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    lp_model_info mi;
    lp_model_info_get(m, &mi);
    lp_lora_info li;
    lp_model_lora_info(m, &li);
    lp_mem_stats ms_;
    lp_prof_mem_stats(&ms_);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t param_bytes = (uint64_t)ms_.peak[LP_MEM_CATEGORY_PARAMETER];
    printf("{\"tool\": \"loupe\", \"shape\": \"%s\", \"mode\": \"%s\", \"method\": \"%s\", \"exec\": \"%s\",\n", a->shape,
           train ? "train" : "infer", a->method, a->exec);
    printf(" \"dtype\": \"%s\", \"bf16_path\": \"%s\",\n", a->dtype,
           strcmp(a->dtype, "bf16") ? "" : lp_bf16_gemm_path());
    printf(" \"batch\": %d, \"seq\": %d, \"threads\": %d, \"blas_core\": \"%s\", \"blas_mode\": \"%s\", \"isa\": \"%s\",\n",
           a->batch, a->seq, lp_threads_get(), lp_threads_blas_core(), lp_threads_blas_mode(),
           lp_isa_name(lp_kernels_isa()));
    printf(" \"layers\": %lld, \"hidden\": %lld, \"heads\": %lld, \"ffn\": %lld, \"vocab\": %lld,\n",
           (long long)mi.num_layers, (long long)mi.hidden_size, (long long)mi.num_heads,
           (long long)mi.intermediate_size, (long long)mi.vocab_size);
    printf(" \"dropout\": 0.0, \"head_grad\": \"%s\", \"warmup\": %d, \"runs\": %d,\n",
           head_grad_in_loss ? "loss" : "recompute", a->warmup, n);
    printf(" \"step_ms_median\": %.4f, \"step_ms_min\": %.4f, \"runs_ms\": [", med, sorted[0]);
    for (int i = 0; i < n; i++)
        printf("%s%.4f", i ? ", " : "", ms[i]);
    printf("],\n \"samples_per_s\": %.4f, \"tokens_per_s\": %.2f,\n", a->batch / (med * 1e-3),
           (double)a->batch * a->seq / (med * 1e-3));
    double gfs = gflop / (med * 1e-3);
    printf(" \"gflop_per_step\": %.4f, \"flop_convention\": \"%s\", \"gflops\": %.3f, \"peak_gflops\": %.3f, "
           "\"mfu\": %.5f,\n",
           gflop, !train ? "1x forward" : strcmp(a->method, "full") ? "2x forward" : "3x forward", gfs,
           a->peak_gflops, gfs / a->peak_gflops);
    printf(" \"peak_rss_bytes\": %lld, \"n_params\": %llu, \"n_trainable\": %llu,\n",
           (long long)ru.ru_maxrss * 1024, (unsigned long long)mi.n_params, (unsigned long long)mi.n_trainable);
    printf(" \"mem_peak_bytes\": {");
    for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
        printf("%s\"%s\": %lld", c ? ", " : "", lp_mem_category_name((lp_mem_category)c), (long long)ms_.peak[c]);
    printf("},\n \"mem_total_peak_bytes\": %lld,\n", (long long)ms_.total_peak);
    if (ops->steps)
        print_ops(ops);
    /* QLoRA: the encoder Linears' NF4 codes + double-quantized scales per weight; "all base"
     * also counts the f32 embeddings, LayerNorms, biases and pooler that stay unquantized. */
    double qbpp = li.quantized_params ? (double)li.quantized_bytes / (double)li.quantized_params : 0.0;
    uint64_t base_params = mi.n_params - mi.n_trainable; /* n_params counts the quantized ones */
    double all_bpp = base_params ? (double)(li.quantized_bytes + 4 * (base_params - li.quantized_params)) /
                                       (double)base_params
                                 : 0.0;
    printf(" \"lora_rank\": %d, \"lora_alpha\": %g, \"lora_targets\": \"%s\", \"adapter_params\": %llu,\n",
           li.enabled ? li.rank : 0, li.enabled ? li.alpha : 0.0, li.enabled ? li.targets : "",
           (unsigned long long)li.adapter_params);
    printf(" \"quantized_params\": %llu, \"quantized_bytes\": %llu, \"qlora_base_bytes_per_param\": %.4f,\n",
           (unsigned long long)li.quantized_params, (unsigned long long)li.quantized_bytes, qbpp);
    printf(" \"base_bytes_per_param_all\": %.4f, \"parameter_bytes\": %llu}\n", all_bpp,
           (unsigned long long)param_bytes);
}

int main(int argc, char **argv)
{
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    lp_threads_init();
    if (a.threads > 0)
        lp_threads_set(a.threads);
    if (!(a.peak_gflops > 0))
        a.peak_gflops = lp_peak_fma_gflops(0.5); /* allocates nothing: no trace in the categories */
    if (!strcmp(a.mode, "peak")) {
        printf("{\"tool\": \"loupe\", \"mode\": \"peak\", \"threads\": %d, \"isa\": \"%s\", \"blas_core\": \"%s\", "
               "\"peak_gflops\": %.3f}\n",
               lp_threads_get(), lp_isa_name(lp_kernels_isa()), lp_threads_blas_core(), a.peak_gflops);
        return 0;
    }
    bool train = !strcmp(a.mode, "train");
    char dir[4096];
    if (write_config(&a, dir, sizeof dir))
        return 1;
    const bool lm = !strcmp(a.shape, "qwen2.5-0.5b") || !strcmp(a.shape, "smollm2-135m");
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = lm ? LP_MODEL_TASK_CAUSAL_LM : LP_MODEL_TASK_SEQ_CLS;
    o.num_labels = lm ? 0 : 2;
    o.grad_checkpointing = a.ckpt;
    head_grad_in_loss = !a.head_recompute;
    o.exec = !strcmp(a.exec, "fused") ? LP_EXEC_MODE_FUSED : LP_EXEC_MODE_EAGER;
    o.training = train;
    o.seed = 42;
    /* max_batch/max_seq stay 0: activations grow on demand during the warm-up, as in `loupe
     * train` (preallocating with no_grad would size the training layout, not inference's) */
    o.quiet = true;
    o.no_grad = !train;
    o.compute = strcmp(a.dtype, "bf16") ? LP_DTYPE_F32 : LP_DTYPE_BF16; /* as loupe train --dtype */
    if (strcmp(a.method, "full")) {
        o.lora.enabled = true;
        o.lora.rank = 8;
        o.lora.alpha = 16;
        o.lora.targets = "q,v";
        o.lora.base_dtype = !strcmp(a.method, "qlora")  ? LP_DTYPE_NF4
                            : o.compute == LP_DTYPE_BF16 ? LP_DTYPE_BF16 /* the base in bf16 only */
                                                         : LP_DTYPE_F32;
    }
    lp_model *m;
    lp_status st = lp_model_load(dir, &o, &m);
    remove_config(dir);
    if (st != LP_OK)
        return die("model");

    int B = a.batch, T = a.seq;
    int32_t *ids = malloc((size_t)B * T * sizeof *ids), *labels = malloc((size_t)B * T * sizeof *labels);
    float *logits = lm ? NULL : malloc((size_t)B * 2 * sizeof *logits);
    if (!ids || !labels || (!lm && !logits)) {
        fprintf(stderr, "bench_step: out of memory for the batch\n");
        return 1;
    }
    lp_model_info mi;
    lp_model_info_get(m, &mi);
    uint64_t s = 1234;
    for (int i = 0; i < B * T; i++) /* seeded random ids over the vocabulary; mask NULL = all real */
        ids[i] = (int32_t)(mix(&s) % (uint64_t)mi.vocab_size);
    for (int i = 0; i < B; i++)
        labels[i] = (int32_t)(mix(&s) % 2);
    if (lm) /* next-token prediction on the batch itself: labels = ids (shifted inside) */
        memcpy(labels, ids, (size_t)B * T * sizeof *ids);

    lp_train_config tc;
    lp_train_config_init(&tc);
    lp_optim opt = {0};
    if (train && lp_optim_init(&opt, m) != LP_OK)
        return die("optimizer state");
    double ms[MAX_RUNS];
    for (int r = 0; r < a.warmup + a.runs; r++) {
        double t0 = now_s();
        if (train) {
            if (train_step(m, &opt, &tc, ids, labels, B, T))
                return 1;
        } else if (lp_model_forward(m, ids, NULL, NULL, B, T, logits) != LP_OK)
            return die("forward");
        double dt = (now_s() - t0) * 1e3;
        if (r >= a.warmup)
            ms[r - a.warmup] = dt;
    }
    /* after the timed runs, so the profiler's bookkeeping never touches the figures above */
    op_table ops = {.steps = a.ops};
    if (a.ops > 0) {
        lp_prof_config pc;
        lp_prof_config_init(&pc);
        pc.on_trace_ready = collect_ops;
        pc.user = &ops;
        if (lp_prof_start(&pc) != LP_OK)
            return die("profiler");
        for (int r = 0; r < a.ops; r++)
            if (train ? train_step(m, &opt, &tc, ids, labels, B, T) != 0
                      : lp_model_forward(m, ids, NULL, NULL, B, T, logits) != LP_OK)
                return die("profiled step");
        if (lp_prof_stop() != LP_OK)
            return die("profiler");
    }
    double fwd = lp_model_forward_flops(m, B, T);
    double mult = !train ? 1.0 : strcmp(a.method, "full") ? 2.0 : 3.0;
    print_json(&a, m, ms, a.runs, mult * fwd * 1e-9, train, &ops);
    lp_optim_free(&opt);
    lp_model_free(m);
    free(ids);
    free(labels);
    free(logits);
    return 0;
}
