/* Options of loupe train / loupe profile. One table drives getopt_long and the YAML config
 * (--config FILE: a mapping whose keys are the long flags, '-' or '_' alike); values from
 * the file are applied first, flags after them, so flags win. Then the run is started and
 * its status turned into an exit code. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "cli.h"
#include "cli_train.h"
#include "loupe/data.h"
#include "loupe/dist.h"
#include "loupe/prof.h"

enum {
    O_MODEL = 1000, O_TRAIN, O_EVAL, O_TEXT_COL, O_PAIR_COL, O_LABEL_COL, O_METHOD, O_RANK, O_ALPHA, O_TARGETS,
    O_EPOCHS, O_MAX_STEPS, O_BATCH, O_ACCUM, O_LR, O_SCHED, O_WARMUP_RATIO, O_WARMUP_STEPS, O_WD, O_CLIP, O_SEED,
    O_MAXLEN, O_EXEC, O_THREADS, O_BUCKET_MB, O_ZERO, O_CKPT_EVERY, O_KEEP, O_RESUME, O_SAVE, O_OUTDIR, O_RUNID, O_CONFIG, O_PROGRESS,
    O_NO_PROGRESS, O_LOG_EVERY, O_QUIET, O_PROFILE, O_P_WAIT, O_P_WARMUP, O_P_ACTIVE, O_P_REPEAT, O_MEMLOG,
    O_LORA_DROPOUT, O_RSLORA, O_SKIP_BAD, O_EVAL_SPLIT, O_BASE_DTYPE, O_ADAPTER, O_SAVE_ADAPTER, O_MERGE,
    O_EXPORT_TRACE, O_EXPORT_MEMTL, O_WITH_STACK, O_RECORD_SHAPES, O_INJECT_NAN, O_PEAK, O_GRAD_CKPT, O_TASK, O_OVERWRITE,
    O_ANOMALY, O_DTYPE, O_DEVICE, O_TF32, O_DATA, O_DATA_FORMAT, O_RESPONSES, O_NO_RESPONSES, O_PACKING, O_EXACT_MATCH, O_HELP
};

static const struct option opts[] = {
    {"model", required_argument, NULL, O_MODEL},
    {"train", required_argument, NULL, O_TRAIN},
    {"eval", required_argument, NULL, O_EVAL},
    {"text-column", required_argument, NULL, O_TEXT_COL},
    {"text-pair-column", required_argument, NULL, O_PAIR_COL},
    {"label-column", required_argument, NULL, O_LABEL_COL},
    {"skip-bad-rows", no_argument, NULL, O_SKIP_BAD},
    {"eval-split", required_argument, NULL, O_EVAL_SPLIT},
    {"data", required_argument, NULL, O_DATA},
    {"data-format", required_argument, NULL, O_DATA_FORMAT},
    {"train-on-responses", optional_argument, NULL, O_RESPONSES},
    {"no-train-on-responses", no_argument, NULL, O_NO_RESPONSES},
    {"packing", optional_argument, NULL, O_PACKING},
    {"exact-match", optional_argument, NULL, O_EXACT_MATCH},
    {"task", required_argument, NULL, O_TASK},
    {"method", required_argument, NULL, O_METHOD},
    {"rank", required_argument, NULL, O_RANK},
    {"alpha", required_argument, NULL, O_ALPHA},
    {"targets", required_argument, NULL, O_TARGETS},
    {"lora-dropout", required_argument, NULL, O_LORA_DROPOUT},
    {"rslora", no_argument, NULL, O_RSLORA},
    {"base-dtype", required_argument, NULL, O_BASE_DTYPE},
    {"dtype", required_argument, NULL, O_DTYPE},
    {"device", required_argument, NULL, O_DEVICE},
    {"tf32", no_argument, NULL, O_TF32},
    {"adapter", required_argument, NULL, O_ADAPTER},
    {"save-adapter", required_argument, NULL, O_SAVE_ADAPTER},
    {"merge", required_argument, NULL, O_MERGE},
    {"epochs", required_argument, NULL, O_EPOCHS},
    {"max-steps", required_argument, NULL, O_MAX_STEPS},
    {"batch-size", required_argument, NULL, O_BATCH},
    {"grad-accum", required_argument, NULL, O_ACCUM},
    {"gradient-accumulation-steps", required_argument, NULL, O_ACCUM},
    {"lr", required_argument, NULL, O_LR},
    {"learning-rate", required_argument, NULL, O_LR},
    {"lr-schedule", required_argument, NULL, O_SCHED},
    {"warmup-ratio", required_argument, NULL, O_WARMUP_RATIO},
    {"warmup-steps", required_argument, NULL, O_WARMUP_STEPS},
    {"weight-decay", required_argument, NULL, O_WD},
    {"max-grad-norm", required_argument, NULL, O_CLIP},
    {"seed", required_argument, NULL, O_SEED},
    {"max-seq-len", required_argument, NULL, O_MAXLEN},
    {"exec", required_argument, NULL, O_EXEC},
    {"gradient-checkpointing", optional_argument, NULL, O_GRAD_CKPT},
    {"threads", required_argument, NULL, O_THREADS},
    {"bucket-mb", required_argument, NULL, O_BUCKET_MB},
    {"zero", required_argument, NULL, O_ZERO},
    {"checkpoint-every", required_argument, NULL, O_CKPT_EVERY},
    {"keep-checkpoints", required_argument, NULL, O_KEEP},
    {"resume", required_argument, NULL, O_RESUME},
    {"save-model", required_argument, NULL, O_SAVE},
    {"output-dir", required_argument, NULL, O_OUTDIR},
    {"run-id", required_argument, NULL, O_RUNID},
    {"overwrite", no_argument, NULL, O_OVERWRITE},
    {"detect-anomaly", no_argument, NULL, O_ANOMALY},
    {"config", required_argument, NULL, O_CONFIG},
    {"progress", no_argument, NULL, O_PROGRESS},
    {"no-progress", no_argument, NULL, O_NO_PROGRESS},
    {"log-every", required_argument, NULL, O_LOG_EVERY},
    {"quiet", no_argument, NULL, O_QUIET},
    {"profile", optional_argument, NULL, O_PROFILE},
    {"profile-wait", required_argument, NULL, O_P_WAIT},
    {"profile-warmup", required_argument, NULL, O_P_WARMUP},
    {"profile-active", required_argument, NULL, O_P_ACTIVE},
    {"profile-repeat", required_argument, NULL, O_P_REPEAT},
    {"memory-log-steps", required_argument, NULL, O_MEMLOG},
    {"export-trace", optional_argument, NULL, O_EXPORT_TRACE},
    {"export-memory-timeline", optional_argument, NULL, O_EXPORT_MEMTL},
    {"with-stack", optional_argument, NULL, O_WITH_STACK},
    {"record-shapes", optional_argument, NULL, O_RECORD_SHAPES},
    {"peak-gflops", required_argument, NULL, O_PEAK},
    {"inject-nan-step", required_argument, NULL, O_INJECT_NAN}, /* testing only, not in --help */
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

static void usage(const char *cmd, bool profile)
{
    printf("usage: loupe %s [options]\n\n", cmd);
    if (profile)
        printf("A short training run with the profiler on: each module's forward and backward, the\n"
               "optimizer step and data loading are named ranges; a Kineto trace, key averages and a\n"
               "memory timeline land in <output-dir>/<run-id>/profiler/.\n\n");
    else
        printf("Fine-tune a Hugging Face model: a sequence classifier (labels), or a causal LM\n"
               "(next-token prediction on the text column). With no options: the bundled\n"
               "models/default on data/sst2-mini (train.tsv, dev.tsv as eval).\n\n");
    printf("Data and model:\n"
           "  --model DIR            HF model directory (default models/default)\n"
           "  --train FILE           CSV/TSV/JSONL training data (default data/sst2-mini/train.tsv)\n"
           "  --eval FILE|none       evaluation data (default data/sst2-mini/dev.tsv)\n"
           "  --text-column, --text-pair-column, --label-column NAME\n"
           "  --skip-bad-rows        drop malformed rows (counted and reported) instead of failing\n"
           "  --eval-split X         evaluate on a seeded fraction X of --train (instead of --eval)\n"
           "  --max-seq-len N        truncation length (default 128)\n"
           "  --data DIR|FILE        instruction data: DIR/train.jsonl (and DIR/eval.jsonl when present)\n"
           "  --data-format auto|text|prompt-response|alpaca|messages  (auto: the first row's keys)\n"
           "  --train-on-responses[=BOOL], --no-train-on-responses  loss on assistant tokens only\n"
           "                         (default as TRL's SFT trainer: on for prompt/response and alpaca)\n"
           "  --packing[=BOOL]       several samples per --max-seq-len row, attention kept inside each\n"
           "  --exact-match[=BOOL]   greedy answers to prompt/response eval rows scored before and after\n"
           "                         training (default on; written to exact_match.json)\n"
           "  --task auto|seq-cls|causal-lm  what to train (auto: the architecture decides; seq-cls\n"
           "                         puts a classification head on a causal-LM checkpoint)\n"
           "Training:\n"
           "  --method full|lora|qlora   (qlora = lora on an NF4 base)\n"
           "  --rank N (8), --alpha X (16), --lora-dropout P (0), --rslora (scale alpha/sqrt(r))\n"
           "  --targets LIST         q,k,v,o,ffn_in,ffn_out,all or module names (q_lin,v_lin / query,value)\n"
           "  --base-dtype f32|int8|nf4   frozen base storage (qlora: nf4)\n"
           "  --dtype f32|bf16       the layer Linears' GEMMs (f32). bf16: autocast as PyTorch's CPU\n"
           "                         autocast does: bf16 inputs and weights, f32 accumulation and\n"
           "                         outputs; f32 master weights, gradients, AdamW state, norms,\n"
           "                         softmax and loss (vdpbf16ps on AVX512_BF16 CPUs, else the bf16\n"
           "                         values widened to f32; the summary says which). With lora the\n"
           "                         frozen base is kept in bf16 only; with qlora / --base-dtype int8\n"
           "                         it stays quantized and is rounded to bf16 for each GEMM, as\n"
           "                         bitsandbytes' compute dtype bf16\n"
           "  --adapter DIR          start from a PEFT adapter; --save-adapter DIR writes one\n"
           "  --merge DIR            write the merged model (HF directory)\n"
           "  --epochs N (default 2), --max-steps N (overrides epochs)\n"
           "  --batch-size N (16), --grad-accum N (1)\n"
           "  --lr X (5e-4), --lr-schedule linear|cosine|constant, --warmup-ratio X (0.1), --warmup-steps N\n"
           "  --weight-decay X (0.01), --max-grad-norm X (1.0; 0 = off), --seed N (42)\n"
           "  --exec eager|fused (fused), --threads N\n"
           "  --device cpu|cuda      where the model trains (cpu). cuda: encoders and decoders, full,\n"
           "                         LoRA or QLoRA (NF4 / int8 bases), f32 or --dtype bf16,\n"
           "                         fused attention, one GPU (LP_CUDA_DEVICE, default 0)\n"
           "  --tf32                 with --device cuda: f32 GEMMs (attention's too) on TF32 tensor cores\n"
           "Data-parallel (mpirun -np N loupe train ...; --batch-size stays the global batch):\n"
           "  --bucket-mb X          gradient all-reduce bucket size in MiB (25)\n"
           "  --zero 0|1             1: ZeRO stage 1: gradients reduce-scattered, AdamW's state and update\n"
           "                         on each rank's 1/N shard, parameters all-gathered; 0: all-reduce\n"
           "                         (default: 1 for full fine-tuning, 0 for LoRA/QLoRA)\n"
           "  --gradient-checkpointing[=BOOL]  keep layer inputs only, recompute layers in backward\n"
           "  --checkpoint-every N (0 = at the end only), --keep-checkpoints N (2; 0 = all)\n"
           "  --resume DIR           a checkpoint or a run directory (its newest checkpoint)\n"
           "  --save-model DIR       write the fine-tuned model as a HF directory\n"
           "Output:\n"
           "  --output-dir DIR (reports), --run-id ID (a timestamp)\n"
           "  --overwrite            replace an existing run of that id (default: refused unless --resume)\n"
           "  --config FILE          YAML whose keys mirror the long flags (flags win)\n"
           "  --progress | --no-progress, --log-every N (10), --quiet\n"
           "  --peak-gflops X        machine f32 peak for MFU (default: measured, see loupe peak)\n"
           "  --detect-anomaly       name the first activation or gradient where a NaN/Inf appears\n"
           "Profiling%s:\n"
           "  --profile[=BOOL]       turn profiling on (loupe profile: on)\n"
           "  --profile-wait N (1), --profile-warmup N (1), --profile-active N (3), --profile-repeat N (1)\n"
           "  --memory-log-steps N   print accounted memory every N steps\n"
           "  --export-trace[=BOOL] (on), --export-memory-timeline[=BOOL], --with-stack[=BOOL],\n"
           "  --record-shapes[=BOOL]\n"
           "\nExit status: 0 done, 1 failed, 2 usage error, 130 interrupted (checkpoint saved).\n",
           profile ? " (default max steps 10)" : "");
}

static const char *pool_add(lp_cli_strpool *p, const char *s)
{
    char **ns = lp_grow(p->s, &p->cap, p->n + 1, sizeof *ns, 32);
    if (!ns)
        return NULL;
    p->s = ns;
    char *d = strdup(s);
    if (d)
        p->s[p->n++] = d;
    return d;
}

void lp_cli_strpool_free(lp_cli_strpool *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->s[i]);
    free(p->s);
    memset(p, 0, sizeof *p);
}

static int parse_bool(const char *cmd, const char *flag, const char *v, bool *out)
{
    if (!v || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on")) {
        *out = true;
        return 0;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off")) {
        *out = false;
        return 0;
    }
    lp_cli_usage_error(cmd, "%s expects true or false, got '%s'", flag, v);
    return -1;
}

static int parse_double(const char *cmd, const char *flag, const char *v, double lo, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < lo) {
        lp_cli_usage_error(cmd, "%s expects a number >= %g, got '%s'", flag, lo, v);
        return -1;
    }
    *out = d;
    return 0;
}

/* The first adapter setting c holds that is not its default, as a flag name, or NULL: with
 * --method full it would do nothing, so it is refused rather than ignored. (A flag given
 * with its default value, --rank 8, cannot be told apart and changes nothing.) */
static const char *lora_only_setting(const lp_train_config *c)
{
    lp_train_config d;
    lp_train_config_init(&d);
    if (c->lora_rank != d.lora_rank)
        return "--rank";
    if (c->lora_alpha != d.lora_alpha)
        return "--alpha";
    if (c->lora_targets)
        return "--targets";
    if (c->lora_dropout != d.lora_dropout)
        return "--lora-dropout";
    if (c->lora_rslora)
        return "--rslora";
    if (c->base_dtype != d.base_dtype)
        return "--base-dtype";
    if (c->adapter)
        return "--adapter";
    if (c->save_adapter)
        return "--save-adapter";
    return c->merge_dir ? "--merge" : NULL;
}

/* Applies one option; returns 0, or the exit code for a bad value. */
static int apply(const char *cmd, lp_train_config *c, int id, const char *flag, const char *v)
{
    long n;
    double d;
    bool b;
#define LONG(lo, hi, dst)                                                                                              \
    do {                                                                                                               \
        if (lp_cli_parse_long(cmd, flag, v, lo, hi, &n) != 0)                                                          \
            return LP_EXIT_USAGE;                                                                                      \
        dst = n;                                                                                                       \
    } while (0)
#define DBL(lo, dst)                                                                                                   \
    do {                                                                                                               \
        if (parse_double(cmd, flag, v, lo, &d) != 0)                                                                   \
            return LP_EXIT_USAGE;                                                                                      \
        dst = d;                                                                                                       \
    } while (0)
#define BOOL(dst)                                                                                                      \
    do {                                                                                                               \
        if (parse_bool(cmd, flag, v, &b) != 0)                                                                         \
            return LP_EXIT_USAGE;                                                                                      \
        dst = b;                                                                                                       \
    } while (0)
    switch (id) {
    case O_MODEL: c->model_dir = v; break;
    case O_TRAIN: c->train_file = v; break;
    case O_EVAL: c->eval_file = strcmp(v, "none") ? v : NULL; break;
    case O_TEXT_COL: c->text_column = v; break;
    case O_PAIR_COL: c->text_pair_column = v; break;
    case O_LABEL_COL: c->label_column = v; break;
    case O_SKIP_BAD: c->skip_bad_rows = true; break;
    case O_EVAL_SPLIT:
        DBL(0, c->eval_split);
        if (!(c->eval_split > 0 && c->eval_split < 1))
            return lp_cli_usage_error(cmd, "%s expects a fraction in (0, 1), got '%s'", flag, v);
        break;
    case O_DATA: {
        // a directory holds train.jsonl and, optionally, eval.jsonl; a file is the training data
        static char tr[4200], ev[4200];
        snprintf(tr, sizeof tr, "%s/train.jsonl", v);
        snprintf(ev, sizeof ev, "%s/eval.jsonl", v);
        FILE *fp = fopen(tr, "rb");
        if (fp) {
            fclose(fp);
            c->train_file = tr;
            fp = fopen(ev, "rb");
            c->eval_file = fp ? ev : NULL;
            if (fp)
                fclose(fp);
        } else {
            c->train_file = v;
            c->eval_file = NULL;
        }
        break;
    }
    case O_DATA_FORMAT: {
        lp_sft_format f;
        if (lp_sft_format_parse(v, &f) != LP_OK)
            return lp_cli_usage_error(cmd, "%s", lp_err_msg());
        c->data_format = f == LP_SFT_FORMAT_AUTO ? NULL : v;
        break;
    }
    case O_RESPONSES: BOOL(c->train_on_responses); break;
    case O_NO_RESPONSES: c->train_on_responses = 0; break;
    case O_PACKING: BOOL(c->packing); break;
    case O_EXACT_MATCH: BOOL(c->exact_match); break;
    case O_TASK:
        if (lp_train_task_parse(v, &c->task) != LP_OK)
            return lp_cli_usage_error(cmd, "%s", lp_err_msg());
        break;
    case O_METHOD:
        if (lp_train_method_parse(v, &c->method) != LP_OK)
            return lp_cli_usage_error(cmd, "%s", lp_err_msg());
        break;
    case O_RANK: LONG(1, 4096, c->lora_rank); break;
    case O_ALPHA: DBL(0, c->lora_alpha); break;
    case O_TARGETS: c->lora_targets = v; break;
    case O_LORA_DROPOUT:
        DBL(0, c->lora_dropout);
        if (c->lora_dropout >= 1)
            return lp_cli_usage_error(cmd, "%s expects a probability in [0, 1), got '%s'", flag, v);
        break;
    case O_RSLORA: c->lora_rslora = true; break;
    case O_BASE_DTYPE:
        if (lp_dtype_parse(v, &c->base_dtype) != LP_OK ||
            (c->base_dtype != LP_DTYPE_F32 && c->base_dtype != LP_DTYPE_INT8 && c->base_dtype != LP_DTYPE_NF4))
            return lp_cli_usage_error(cmd, "%s expects f32, int8 or nf4, got '%s'", flag, v);
        break;
    case O_DTYPE:
        if (lp_dtype_parse(v, &c->dtype) != LP_OK || (c->dtype != LP_DTYPE_F32 && c->dtype != LP_DTYPE_BF16))
            return lp_cli_usage_error(cmd, "%s expects f32 or bf16, got '%s'", flag, v);
        break;
    case O_DEVICE:
        if (lp_device_parse(v, &c->device) != LP_OK)
            return lp_cli_usage_error(cmd, "%s expects cpu or cuda, got '%s'", flag, v);
        break;
    case O_TF32: c->tf32 = true; break;
    case O_ADAPTER: c->adapter = v; break;
    case O_SAVE_ADAPTER: c->save_adapter = v; break;
    case O_MERGE: c->merge_dir = v; break;
    case O_EPOCHS: LONG(1, 1000000, c->epochs); break;
    case O_MAX_STEPS: LONG(0, 1000000000, c->max_steps); break;
    case O_BATCH: LONG(1, 65536, c->batch_size); break;
    case O_ACCUM: LONG(1, 65536, c->grad_accum); break;
    case O_LR: DBL(0, c->lr); break;
    case O_SCHED:
        if (lp_lr_schedule_parse(v, &c->schedule) != LP_OK)
            return lp_cli_usage_error(cmd, "%s", lp_err_msg());
        break;
    case O_WARMUP_RATIO:
        DBL(0, c->warmup_ratio);
        if (c->warmup_ratio > 1)
            return lp_cli_usage_error(cmd, "%s expects a ratio in [0, 1], got '%s'", flag, v);
        break;
    case O_WARMUP_STEPS: LONG(0, 1000000000, c->warmup_steps); break;
    case O_WD: DBL(0, c->weight_decay); break;
    case O_CLIP: DBL(0, c->max_grad_norm); break;
    case O_SEED: {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end || strchr(v, '-')) // strtoull takes " -1" as 2^64 - 1
            return lp_cli_usage_error(cmd, "%s expects a non-negative integer, got '%s'", flag, v);
        c->seed = s;
        break;
    }
    case O_MAXLEN: LONG(2, 1 << 20, c->max_seq_len); break;
    case O_EXEC:
        if (lp_exec_mode_parse(v, &c->exec) != LP_OK)
            return lp_cli_usage_error(cmd, "%s", lp_err_msg());
        break;
    case O_THREADS: LONG(1, 4096, c->threads); break;
    case O_ZERO: LONG(0, 1, c->zero); break;
    case O_BUCKET_MB:
        DBL(0, c->bucket_mb);
        if (!(c->bucket_mb > 0))
            return lp_cli_usage_error(cmd, "--bucket-mb must be > 0");
        break;
    case O_GRAD_CKPT: BOOL(c->grad_checkpointing); break;
    case O_CKPT_EVERY: LONG(0, 1000000000, c->checkpoint_every); break;
    case O_KEEP: LONG(0, 1000000, c->keep_checkpoints); break;
    case O_RESUME: c->resume = v; break;
    case O_SAVE: c->save_model = v; break;
    case O_OUTDIR: c->output_dir = v; break;
    case O_RUNID:
        if (!*v || strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, ".."))
            return lp_cli_usage_error(cmd, "%s must be a plain name (no '/'), got '%s'", flag, v);
        c->run_id = v;
        break;
    case O_OVERWRITE: c->overwrite = true; break;
    case O_ANOMALY: c->detect_anomaly = true; break;
    case O_CONFIG: c->config_file = v; break;
    case O_PROGRESS: c->progress = 1; break;
    case O_NO_PROGRESS: c->progress = 0; break;
    case O_LOG_EVERY: LONG(1, 1000000, c->log_every); break;
    case O_QUIET: c->quiet = true; break;
    case O_PROFILE: BOOL(c->profile); break;
    case O_P_WAIT: LONG(0, 1000000, c->prof_schedule.wait); break;
    case O_P_WARMUP: LONG(0, 1000000, c->prof_schedule.warmup); break;
    case O_P_ACTIVE: LONG(1, 1000000, c->prof_schedule.active); break;
    case O_P_REPEAT: LONG(0, 1000000, c->prof_schedule.repeat); break;
    case O_MEMLOG: LONG(0, 1000000000, c->memory_log_steps); break;
    case O_EXPORT_TRACE: BOOL(c->export_trace); break;
    case O_EXPORT_MEMTL: BOOL(c->export_memory_timeline); break;
    case O_WITH_STACK: BOOL(c->with_stack); break;
    case O_RECORD_SHAPES: BOOL(c->record_shapes); break;
    case O_PEAK: DBL(0, c->peak_gflops); break;
    case O_INJECT_NAN: LONG(0, 1000000000, c->inject_nan_step); break;
    default: return lp_cli_usage_error(cmd, "unknown option %s", flag);
    }
    return 0;
#undef LONG
#undef DBL
#undef BOOL
}

static const struct option *find_opt(const char *key)
{
    char norm[128];
    size_t n = strlen(key);
    if (n >= sizeof norm)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = key[i] == '_' ? '-' : key[i];
    for (const struct option *o = opts; o->name; o++)
        if (!strcmp(o->name, norm))
            return o;
    return NULL;
}

/* A YAML mapping of scalars; each key must be a long flag. */
int lp_cli_train_yaml(const char *cmd, const char *path, const char *text, size_t len, lp_train_config *c,
                      lp_cli_strpool *pool)
{
    yaml_parser_t p;
    yaml_event_t ev;
    if (!yaml_parser_initialize(&p)) {
        fprintf(stderr, "loupe %s: %s: out of memory\n", cmd, path);
        return LP_EXIT_FAIL;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = 0, depth = 0, done = 0;
    char key[256] = "";
    bool have_key = false;
    while (!done && rc == 0) {
        if (!yaml_parser_parse(&p, &ev)) {
            fprintf(stderr, "loupe %s: %s:%zu: YAML error: %s\n", cmd, path, p.problem_mark.line + 1,
                    p.problem ? p.problem : "parse error");
            rc = LP_EXIT_FAIL;
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_MAPPING_START_EVENT:
            if (++depth > 1) {
                fprintf(stderr, "loupe %s: %s:%zu: nested mappings are not supported (keys mirror the flags)\n", cmd,
                        path, ev.start_mark.line + 1);
                rc = LP_EXIT_FAIL;
            }
            break;
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_ALIAS_EVENT: // skipping one would pair the next key with this one's flag
            fprintf(stderr, "loupe %s: %s:%zu: aliases (*name) are not supported; write the value\n", cmd, path,
                    ev.start_mark.line + 1);
            rc = LP_EXIT_FAIL;
            break;
        case YAML_SEQUENCE_START_EVENT:
            fprintf(stderr, "loupe %s: %s:%zu: lists are not supported; write LIST values as one string\n", cmd, path,
                    ev.start_mark.line + 1);
            rc = LP_EXIT_FAIL;
            break;
        case YAML_SCALAR_EVENT: {
            const char *s = (const char *)ev.data.scalar.value;
            if (depth != 1) {
                fprintf(stderr, "loupe %s: %s: the top level must be a mapping of flag: value\n", cmd, path);
                rc = LP_EXIT_FAIL;
            } else if (!have_key) {
                snprintf(key, sizeof key, "%s", s);
                have_key = true;
            } else {
                have_key = false;
                const struct option *o = find_opt(key);
                if (!o || o->val == O_CONFIG || o->val == O_HELP) {
                    fprintf(stderr, "loupe %s: %s:%zu: unknown key '%s' (keys are the long flags)\n", cmd, path,
                            ev.start_mark.line + 1, key);
                    rc = LP_EXIT_USAGE;
                    break;
                }
                const char *v = pool_add(pool, s);
                char flag[160];
                snprintf(flag, sizeof flag, "%s (in %s)", key, path);
                if (!v)
                    rc = LP_EXIT_FAIL;
                else if (o->has_arg == no_argument) {
                    bool b;
                    if (parse_bool(cmd, flag, v, &b) != 0)
                        rc = LP_EXIT_USAGE;
                    else if (b)
                        rc = apply(cmd, c, o->val, flag, NULL);
                    else if (o->val == O_PROGRESS)
                        c->progress = 0;
                    else if (o->val == O_QUIET)
                        c->quiet = false;
                } else
                    rc = apply(cmd, c, o->val, flag, v);
            }
            break;
        }
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

static int load_yaml(const char *cmd, const char *path, lp_train_config *c, lp_cli_strpool *pool)
{
    char *text = NULL;
    size_t len = 0;
    if (lp_file_read_all(path, &text, &len) != LP_OK) {
        fprintf(stderr, "loupe %s: config file %s\n", cmd, lp_err_msg());
        return LP_EXIT_FAIL;
    }
    int rc = lp_cli_train_yaml(cmd, path, text, len, c, pool);
    free(text);
    return rc;
}

/* Under mpirun every rank parses the same command line: ranks other than 0 keep stdout and
 * stderr on /dev/null until the job is up, so a usage error (or --help) appears once, rank 0's,
 * and every rank exits with its code. saved[] holds the real streams (-1: not silenced). */
static void quiet_other_ranks(int saved[2])
{
    saved[0] = saved[1] = -1;
    if (lp_dist_env_rank() == 0)
        return;
    int null = open("/dev/null", O_WRONLY);
    if (null < 0)
        return; /* both ranks speak: noisy, not wrong */
    fflush(stdout);
    fflush(stderr);
    saved[0] = dup(STDOUT_FILENO);
    saved[1] = dup(STDERR_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    close(null);
}

static void speak_again(int saved[2])
{
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < 2; i++)
        if (saved[i] >= 0) {
            dup2(saved[i], i ? STDERR_FILENO : STDOUT_FILENO);
            close(saved[i]);
            saved[i] = -1;
        }
}

int lp_cli_train_main(const char *cmd, int argc, char **argv, bool profile)
{
    int saved[2];
    quiet_other_ranks(saved);
    lp_train_config c;
    lp_train_config_init(&c);
    c.loupe_version = lp_cli_version();
    if (profile) {
        c.profile = true;
        c.max_steps = 10;
    }
    const char *env = getenv("LOUPE_INJECT_NAN_STEP");
    if (env && *env)
        c.inject_nan_step = strtoll(env, NULL, 10);
    lp_cli_strpool pool = {0};
    int rc = 0;
    /* the config file first, so flags override it */
    for (int i = 1; i < argc; i++) {
        const char *cf = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            cf = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9))
            cf = argv[i] + 9;
        if (!strcmp(argv[i], "--"))
            break;
        if (cf && (rc = load_yaml(cmd, cf, &c, &pool)) != 0)
            goto out;
    }
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (o == 'h' || o == O_HELP) {
            usage(cmd, profile);
            goto out;
        }
        if (o == '?') {
            rc = lp_cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
            goto out;
        }
        const char *name = "?";
        for (const struct option *p = opts; p->name; p++)
            if (p->val == o) {
                name = p->name;
                break;
            }
        char flag[140];
        snprintf(flag, sizeof flag, "--%s", name);
        if ((rc = apply(cmd, &c, o, flag, optarg)) != 0)
            goto out;
    }
    if (optind < argc) {
        rc = lp_cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    const char *lora_flag = c.method == LP_TRAIN_METHOD_FULL ? lora_only_setting(&c) : NULL;
    if (lora_flag) {
        rc = lp_cli_usage_error(cmd, "%s needs --method lora or qlora (full fine-tuning has no adapter)", lora_flag);
        goto out;
    }
    if (c.overwrite && c.resume && *c.resume) {
        rc = lp_cli_usage_error(cmd, "--overwrite and --resume exclude each other (resume keeps the run's files)");
        goto out;
    }
    if (lp_dist_init() != LP_OK) { // a non-MPI build under mpirun -np N refuses here
        fprintf(stderr, "loupe %s: %s\n", cmd, lp_err_msg());
        rc = LP_EXIT_USAGE;
        goto out;
    }
    speak_again(saved); // the job is up: rank 0 reports, the others speak of their own failures
    lp_train_install_signal_handlers();
    lp_train_result r;
    lp_status st = lp_train_run(&c, &r);
    const int32_t rank = lp_dist_rank(), world = lp_dist_world_size();
    if (world > 1 && ((st != LP_OK && st != LP_STATUS_INTERRUPTED) || rank != 0)) {
        /* rank 0 reports the job; another rank speaks only of a failure of its own */
        if (st != LP_OK && st != LP_STATUS_INTERRUPTED && (rank == 0 || !strstr(lp_err_msg(), "another rank stopped")))
            fprintf(stderr, "loupe %s (rank %d of %d): %s\n", cmd, (int)rank, (int)world, lp_err_msg());
        rc = st == LP_OK                   ? LP_EXIT_OK
             : st == LP_STATUS_INTERRUPTED ? 130
             : st == LP_STATUS_INVALID_ARG ? LP_EXIT_USAGE
                                           : LP_EXIT_FAIL;
        if (r.abort_job) // others may wait for this rank in a collective: end them all
            lp_dist_abort(rc);
        lp_dist_finalize();
        goto out;
    }
    if (st == LP_OK || st == LP_STATUS_INTERRUPTED) {
        if (st == LP_STATUS_INTERRUPTED)
            fprintf(stderr, "loupe %s: %s\n", cmd, lp_err_msg());
        printf("run: %s\nsteps: %lld, final loss %.4f", r.run_dir, (long long)r.steps, r.final_loss);
        if (!isnan(r.eval_perplexity))
            printf(", eval loss %.4f, perplexity %.3f", r.eval_loss, r.eval_perplexity);
        else if (!isnan(r.eval_accuracy))
            printf(", eval loss %.4f, accuracy %.4f, macro-F1 %.4f", r.eval_loss, r.eval_accuracy, r.eval_macro_f1);
        printf("\n");
        if (st == LP_OK) // the line HF Trainer prints at the end of train(), as seed 003 shows it
            printf("{'train_runtime': %.4f, 'train_samples_per_second': %.3f, 'train_steps_per_second': %.3f, "
                   "'train_loss': %.10g, 'epoch': %.4g}\n",
                   r.train_runtime, r.train_samples_per_second, r.train_steps_per_second, r.train_loss, r.epoch);
        if (c.profile && st == LP_OK)
            printf("profiler: %s/profiler/\n", r.run_dir);
        fflush(stdout);
        if (lp_cli_write_report(r.run_dir, 0) != LP_EXIT_OK) // the run stands without its page
            fprintf(stderr, "loupe %s: report.html not written: %s\n", cmd, lp_err_msg());
        rc = st == LP_OK ? LP_EXIT_OK : 130;
    } else if (st == LP_STATUS_INVALID_ARG) { // a flag's value the model refuses (--targets nope)
        // UNSUPPORTED is not here: it comes from a file loupe cannot use (an adapter of another
        // PEFT type, pickle weights, a llama-family model), a failed job like a malformed one
        fprintf(stderr, "loupe %s: %s\n", cmd, lp_err_msg());
        rc = LP_EXIT_USAGE;
    } else {
        rc = lp_cli_fail(cmd);
    }
    lp_dist_finalize();
out:
    speak_again(saved);
    lp_cli_strpool_free(&pool);
    return rc;
}
