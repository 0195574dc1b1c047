/* loupe train: the fine-tuning engine. Loads a model (models.h) as a classifier or a causal
 * LM (the architecture decides, or lp_train_config.task), tokenizes a dataset (text.h +
 * data.h), runs AdamW with a warm-up + linear/cosine LR schedule, gradient
 * accumulation and clipping, evaluates after each epoch, checkpoints and resumes, stops
 * cleanly on SIGINT or a non-finite loss, optionally profiles (prof.h), and writes a run
 * directory: config.json, steps.csv, epoch_results.csv, summary.json, tensorboard/,
 * profiler/, checkpoints/.
 *
 *   lp_train_config c;
 *   lp_train_config_init(&c);             // bundled defaults: models/default, data/sst2-mini
 *   c.max_steps = 100; c.lr = 1e-3;
 *   lp_train_result r;
 *   lp_status st = lp_train_run(&c, &r);  // LP_STATUS_INTERRUPTED after Ctrl-C (run saved)
 *   if (st != LP_OK && st != LP_STATUS_INTERRUPTED) fprintf(stderr, "%s\n", lp_err_msg());
 *   printf("results in %s\n", r.run_dir);
 *
 * Threads: one training run per process (the profiler and the SIGINT flag are global).
 */
#ifndef LOUPE_TRAIN_H
#define LOUPE_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loupe/base.h"
#include "loupe/io.h"
#include "loupe/models.h"
#include "loupe/nn.h"
#include "loupe/prof.h"

#ifdef __cplusplus
extern "C" {
#endif

/* lp_train_method (full, lora, qlora) is io.h's, shared with the memory estimate. */
const char *lp_train_method_name(lp_train_method m);
/* "full", "lora", "qlora"; INVALID_ARG naming the value otherwise. */
LP_WARN_UNUSED lp_status lp_train_method_parse(const char *s, lp_train_method *out);

typedef enum lp_lr_schedule { LP_LR_SCHEDULE_LINEAR = 0, LP_LR_SCHEDULE_COSINE, LP_LR_SCHEDULE_CONSTANT } lp_lr_schedule;
const char *lp_lr_schedule_name(lp_lr_schedule s);
/* "linear", "cosine", "constant"; INVALID_ARG naming the value otherwise. */
LP_WARN_UNUSED lp_status lp_lr_schedule_parse(const char *s, lp_lr_schedule *out);

/* Learning rate for optimizer step `step` (0-based) of `total`, as transformers'
 * get_{linear,cosine,constant}_schedule_with_warmup: lr * step/warmup during warm-up, then
 * linear to 0 at total / half-cosine to 0 / constant. */
double lp_lr_at(lp_lr_schedule s, double lr, int64_t warmup, int64_t total, int64_t step);

/* What a run trains, as --task spells it: "auto" (the architecture decides: a *ForCausalLM
 * learns next-token prediction on the text column, anything else classifies labels),
 * "seq-cls" (a classification head, e.g. on a causal-LM checkpoint) or "causal-lm". */
const char *lp_train_task_name(lp_model_task t);
/* "auto", "seq-cls", "causal-lm"; INVALID_ARG naming the value otherwise. */
LP_WARN_UNUSED lp_status lp_train_task_parse(const char *s, lp_model_task *out);
/* The task a run on model_dir trains: want when it is SEQ_CLS or CAUSAL_LM, else from
 * model_dir/config.json's architecture (CAUSAL_LM for *ForCausalLM, SEQ_CLS otherwise, bare
 * encoders included). Errors: the config's (NOT_FOUND, FORMAT, UNSUPPORTED naming the file). */
LP_WARN_UNUSED lp_status lp_train_task_resolve(const char *model_dir, lp_model_task want, lp_model_task *out);

/* Every setting of a run. Strings are borrowed (must outlive lp_train_run). */
typedef struct lp_train_config {
    const char *model_dir;      /* --model (default "models/default") */
    const char *train_file;     /* --train (default "data/sst2-mini/train.tsv") */
    const char *eval_file;      /* --eval (default "data/sst2-mini/dev.tsv"); NULL or "" none */
    const char *text_column, *text_pair_column, *label_column; /* NULL: auto */
    double eval_split;          /* --eval-split X in (0,1): validation = a seeded X of --train (overrides --eval) */
    bool skip_bad_rows;         /* --skip-bad-rows: drop malformed rows, count and report them */
    /* instruction tuning (causal LM, JSONL): the layout (NULL or "auto": from the first row's
     * keys; text, prompt-response, alpaca, messages), loss on responses only (-1: TRL's SFT
     * default, on for prompt/response and alpaca rows, off for messages and text; 0; 1), and
     * several samples per --max-seq-len row */
    const char *data_format;
    int train_on_responses;
    bool packing;
    bool exact_match;           /* --exact-match (default on): greedy exact match on prompt/response
                                 * eval rows, before training and after */
    lp_train_method method;
    lp_model_task task;         /* --task: AUTO (the architecture decides), SEQ_CLS or CAUSAL_LM */
    int64_t epochs;             /* default 2 */
    int64_t max_steps;          /* > 0: stop after this many optimizer steps (overrides epochs) */
    int32_t batch_size;         /* micro-batch, default 16 */
    int32_t grad_accum;         /* micro-batches per optimizer step, default 1 */
    int32_t max_seq_len;        /* truncation, default 128 (capped at the model's positions) */
    double lr;                  /* default 5e-4 */
    lp_lr_schedule schedule;    /* default linear */
    double warmup_ratio;        /* of total steps, used when warmup_steps < 0; default 0.1 */
    int64_t warmup_steps;       /* >= 0 overrides warmup_ratio; default -1 */
    double weight_decay;        /* default 0.01 (not on biases/LayerNorm) */
    double beta1, beta2, adam_eps;
    double max_grad_norm;       /* <= 0: no clipping; default 1.0 */
    uint64_t seed;              /* data order and dropout, default 42 */
    lp_exec_mode exec;          /* default fused */
    lp_device device;           /* --device cpu|cuda (cpu): cuda switches the kernels to the GPU
                                   (lp_kernels_use_device) before the model loads */
    bool tf32;                  /* --tf32: with cuda, f32 GEMMs on TF32 tensor cores */
    bool grad_checkpointing;    /* keep layer inputs only, recompute each layer in backward */
    int threads;                /* 0: lp_threads_init's choice */
    double bucket_mb;           /* data-parallel gradient buckets, MiB (25, as DDP's bucket_cap_mb) */
    int32_t zero;               /* data-parallel: 1 = ZeRO stage 1 (gradients reduce-scattered, AdamW on
                                   each rank's shard, parameters all-gathered), 0 = all-reduce;
                                   -1 (default): 1 for full fine-tuning, 0 for LoRA/QLoRA */
    int64_t checkpoint_every;   /* steps; 0 = only at the end */
    int32_t keep_checkpoints;   /* newest kept (0 = all); default 2 */
    const char *resume;         /* checkpoint dir, or a run dir (its newest checkpoint) */
    const char *save_model;     /* HF directory for the fine-tuned model, or NULL */
    const char *output_dir;     /* default "reports" */
    const char *run_id;         /* default: a UTC timestamp */
    bool overwrite;             /* an existing run directory of that id is cleared and reused
                                   (default: refused, unless resuming) */
    const char *config_file;    /* recorded in config.json only */
    const char *loupe_version;  /* "loupe X (git rev)", recorded in config.json (CLI sets it) */
    int progress;               /* -1 auto (a bar on a terminal), 0 plain lines, 1 bar */
    int log_every;              /* plain-line interval in steps (default 10) */
    bool quiet;                 /* no progress output at all */
    /* profiling (loupe profile) */
    bool profile;
    lp_prof_schedule prof_schedule;   /* default wait 1, warmup 1, active 3, repeat 1 */
    int64_t memory_log_steps;   /* > 0: memory line every N steps on stderr + steps.csv always */
    bool export_trace, export_memory_timeline, with_stack, record_shapes;
    /* LoRA / QLoRA (--method lora|qlora; see lp_lora_options in models.h) */
    int32_t lora_rank;
    double lora_alpha;
    const char *lora_targets;
    float lora_dropout;         /* --lora-dropout (0) */
    bool lora_rslora;           /* --rslora: scale alpha/sqrt(r) */
    lp_dtype base_dtype;        /* --base-dtype f32|int8|nf4 (f32; qlora implies nf4) */
    lp_dtype dtype;             /* --dtype f32|bf16: the layer Linears' GEMMs (f32; bf16 = autocast,
                                   lp_model_options.compute; with lora the base is kept in bf16) */
    const char *adapter;        /* --adapter DIR: start from this PEFT adapter */
    const char *save_adapter;   /* --save-adapter DIR: write the trained PEFT adapter */
    const char *merge_dir;      /* --merge DIR: write the merged model (HF directory) */
    double peak_gflops;         /* machine f32 peak for MFU (--peak-gflops); <= 0: measure */
    /* testing: make the loss at this step (1-based) NaN; 0 off (env LOUPE_INJECT_NAN_STEP) */
    int64_t inject_nan_step;
    bool detect_anomaly;        /* --detect-anomaly: name the first tensor where a NaN/Inf appears */
} lp_train_config;

/* The defaults listed above. */
void lp_train_config_init(lp_train_config *c);

/* The optimizer lp_train_run steps, for a loop of one's own over an lp_model (zero grad,
 * loss forward, backward, lp_model_grad_clip, lp_optim_step): AdamW first and second
 * moments for each trainable parameter (OPTIMIZER_STATE memory). */
/* ZeRO-1: a run of one parameter's elements whose AdamW state this rank keeps. */
typedef struct lp_optim_seg {
    size_t param;  /* index in lp_model_params */
    int64_t lo, n; /* elements [lo, lo + n) of it */
    int64_t state; /* their moments at m_shard[state ..], v_shard[state ..] */
} lp_optim_seg;

typedef struct lp_optim {
    size_t n;                  /* = number of model parameters; m[i]/v[i] NULL when frozen */
    float **m, **v;            /* (sharded: all NULL, but while a checkpoint gathers the state) */
    int64_t t;                 /* steps taken (torch's state["step"]) */
    lp_optim_seg *seg;         /* sharded (ZeRO-1): this rank's runs, n_seg of them; else NULL */
    size_t n_seg;
    float *m_shard, *v_shard;  /* sharded: the runs' moments, one after the other */
    int64_t state_bytes;       /* bytes of m and v this process holds */
    bool dev;                  /* m and v live on the device (the model is on one) */
} lp_optim;

LP_WARN_UNUSED lp_status lp_optim_init(lp_optim *o, const lp_model *model);
/* ZeRO stage 1: this rank keeps and updates the AdamW state of the n_seg runs of parameter
 * elements seg (copied; its state offsets are assigned here) only: its shard of every gradient
 * bucket (the data-parallel trainer's lp_dp). lp_optim_step updates those runs alone, reading
 * their gradients where the parameters' grads point; the caller then gathers the parameters
 * from the ranks that updated them. n_seg 0 holds no state. */
LP_WARN_UNUSED lp_status lp_optim_init_sharded(lp_optim *o, const lp_model *model, const lp_optim_seg *seg,
                                              size_t n_seg);
/* One torch.optim.AdamW step over every trainable parameter (sharded: over its runs) at
 * learning rate lr, with c's betas, eps and weight decay (none on biases and LayerNorm, as HF
 * Trainer). */
void lp_optim_step(lp_optim *o, lp_model *model, const lp_train_config *c, double lr);
void lp_optim_free(lp_optim *o);

/* What a run ended with. */
typedef struct lp_train_result {
    char run_dir[1024];
    int64_t steps;              /* optimizer steps done (resumed ones included) */
    double final_loss;          /* last step's loss */
    lp_model_task task;         /* what was trained: SEQ_CLS or CAUSAL_LM */
    double eval_loss, eval_accuracy, eval_macro_f1; /* last evaluation; NaN when none (accuracy
                                                     * and F1 always NaN for a causal LM) */
    double eval_perplexity;     /* causal LM: exp(token-weighted mean eval loss); NaN otherwise */
    bool interrupted;
    /* Data-parallel (mpirun): the error came after the ranks agreed to train, so other ranks
     * may be waiting in a collective for this one: the caller should end the job
     * (lp_dist_abort) rather than return. Always false with one rank. */
    bool abort_job;
    /* HF Trainer's train metrics (what trainer.train() returns and SFTTrainer runs print; also
     * train_results.json): seconds of the whole run, samples and optimizer steps per second
     * (samples: rows, a packed row counting once, as the Trainer counts its dataset's rows),
     * the mean of every step's loss, epochs done (fractional) */
    double train_runtime, train_samples_per_second, train_steps_per_second, train_loss, epoch;
} lp_train_result;

/* Runs a training job as configured. On success and on LP_STATUS_INTERRUPTED (SIGINT:
 * a checkpoint and the run files for the steps done are written) r is filled. Errors name
 * the file or setting: NOT_FOUND/IO/FORMAT for inputs, INVALID_ARG for settings,
 * UNSUPPORTED for a file loupe cannot use (pickle weights, an adapter of another PEFT
 * type), NUMERIC for a non-finite loss (naming the step;
 * the run files for the steps before it are written). A run that fails before its first
 * step leaves no run directory behind. */
LP_WARN_UNUSED lp_status lp_train_run(const lp_train_config *c, lp_train_result *r);

/* Installs the SIGINT/SIGTERM handler that asks a running lp_train_run to stop after the
 * current step (a second Ctrl-C kills the process), and SIGUSR1 asking the same (mpirun
 * forwards it to every rank at once). */
void lp_train_install_signal_handlers(void);
/* True once a stop was requested; lp_train_request_stop asks for one from code. */
bool lp_train_stop_requested(void);
void lp_train_request_stop(void);

/* ---- TensorBoard scalar event files (TFRecord + Event protobuf) ---------------------- */

/* CRC-32C (Castagnoli) of n bytes; TFRecord's masked form. */
uint32_t lp_crc32c(const void *data, size_t n);
uint32_t lp_crc32c_masked(const void *data, size_t n);

typedef struct lp_tb_writer lp_tb_writer;
/* Creates dir (recursively) and dir/events.out.tfevents.<time>.<host>.<pid>.<uid>; writes
 * the file_version record. The file is built in memory and written atomically by
 * lp_tb_writer_flush/close, so it is always whole. Errors: IO naming the path. */
LP_WARN_UNUSED lp_status lp_tb_writer_open(const char *dir, lp_tb_writer **out);
/* Appends a scalar (Summary.Value.simple_value) for tag at step. */
LP_WARN_UNUSED lp_status lp_tb_writer_scalar(lp_tb_writer *w, const char *tag, int64_t step, float value,
                                             double wall_time);
/* Encodes one record (the version event when tag is NULL) into buf (cap bytes); returns
 * the bytes needed. Used by the writer and its tests. */
size_t lp_tb_encode_record(uint8_t *buf, size_t cap, double wall_time, int64_t step, const char *tag, float value);
/* Writes the file atomically (whole file so far). */
LP_WARN_UNUSED lp_status lp_tb_writer_flush(lp_tb_writer *w);
/* Flushes and frees (w may be NULL). */
LP_WARN_UNUSED lp_status lp_tb_writer_close(lp_tb_writer *w);
const char *lp_tb_writer_path(const lp_tb_writer *w);

/* ---- evaluation metrics ---------------------------------------------------------------- */

/* accuracy and macro-F1 (mean over classes that occur in labels or preds of F1; a class
 * with no true and no predicted rows is skipped, as sklearn's "macro" over present labels)
 * of n predictions over L classes. */
void lp_metrics_classification(const int32_t *labels, const int32_t *preds, int64_t n, int32_t L,
                               double *accuracy, double *macro_f1);

/* Checks a checkpoint directory (<run>/checkpoints/step-N) against the crc32 checksums
 * written with it: LP_OK when every file and tensor matches; LP_STATUS_FORMAT naming the
 * damaged file and tensor; NOT_FOUND when dir is not a checkpoint. *has_checksums is false
 * for a checkpoint written before checksums (nothing to check: LP_OK). */
LP_WARN_UNUSED lp_status lp_checkpoint_verify(const char *dir, bool *has_checksums);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_TRAIN_H */
