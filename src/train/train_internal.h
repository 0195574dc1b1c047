/* Pieces of the training engine shared between its files (not public): per-step and
 * per-epoch records, the AdamW state, checkpoints, run-directory writers, progress. */
#ifndef LOUPE_TRAIN_INTERNAL_H
#define LOUPE_TRAIN_INTERNAL_H

#include <stdio.h>

#include "loupe/core.h"
#include "loupe/data.h"
#include "loupe/models.h"
#include "loupe/text.h"
#include "loupe/train.h"

/* The torch name tools classify as data loading. */
#define LP_TRAIN_RANGE_DATALOADER "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"

typedef struct lp_step_rec {
    int64_t step, epoch;       /* step 1-based; epoch 0-based */
    double loss, lr, grad_norm;
    double step_ms, data_ms, fwd_ms, bwd_ms, opt_ms;
    int64_t samples, tokens;
    int64_t mem_bytes, mem_peak_bytes, rss_bytes;
    double wall_s;             /* seconds since the run started (resumed runs continue) */
} lp_step_rec;

typedef struct lp_epoch_rec {
    int64_t epoch, steps;      /* optimizer steps in this epoch */
    double train_loss, eval_loss, eval_accuracy, eval_f1; /* NaN when not evaluated (accuracy
                                                           * and F1 always for a causal LM) */
    double eval_perplexity;    /* causal LM: exp(eval_loss); NaN otherwise */
    double time_s, samples_per_s, tokens_per_s;
    int64_t peak_mem_bytes;
    bool complete;             /* false: cut by max_steps or a stop */
} lp_epoch_rec;

typedef struct lp_history {
    lp_step_rec *steps;
    size_t n_steps, cap_steps;
    lp_epoch_rec *epochs;
    size_t n_epochs, cap_epochs;
} lp_history;

LP_WARN_UNUSED lp_status lp_history_add_step(lp_history *h, const lp_step_rec *r);
LP_WARN_UNUSED lp_status lp_history_add_epoch(lp_history *h, const lp_epoch_rec *r);
void lp_history_free(lp_history *h);


/* Where the data stream stands: the next micro-batch to read. */
typedef struct lp_data_pos {
    int64_t epoch;             /* 0-based */
    int64_t batch;             /* micro-batch index within the epoch's order */
} lp_data_pos;

/* Settings a resumed run must share with the checkpointed one (the loss curve depends on them). */
typedef struct lp_ckpt_state {
    int64_t step;
    lp_data_pos pos;
    lp_rng dropout_rng;
    double elapsed_s;          /* training seconds so far */
} lp_ckpt_state;

/* Writes dir/checkpoints/step-<N>/ (state.safetensors, trainer_state.json, steps.csv copy
 * of the history) atomically: built in a temporary sibling, then renamed. Keeps the newest
 * c->keep_checkpoints. */
LP_WARN_UNUSED lp_status lp_ckpt_save(const char *run_dir, const lp_train_config *c, const lp_model *model,
                                      const lp_optim *o, const lp_ckpt_state *s, const lp_history *h);
/* Parses a checkpoint's trainer_state.json (len bytes, need not be NUL-terminated; path names
 * it in messages) into s and o->t: counts are integers in [0, 9e15], elapsed_s in [0, 1e12]
 * seconds; the settings that fix the data stream (seed, batch size, grad accum, max seq len)
 * must equal c's. Errors: FORMAT (bad JSON, a missing or bad field), INVALID_ARG (another
 * setting). */
LP_WARN_UNUSED lp_status lp_ckpt_state_parse(const char *text, size_t len, const char *path, const lp_train_config *c,
                                             lp_optim *o, lp_ckpt_state *s);
/* Resolves c->resume (a checkpoint dir or a run dir) and loads it into model/o/s/h. The
 * checkpoint's settings must match c's (INVALID_ARG naming the setting). */
LP_WARN_UNUSED lp_status lp_ckpt_load(const char *path, const lp_train_config *c, lp_model *model, lp_optim *o,
                                      lp_ckpt_state *s, lp_history *h, char *resolved, size_t cap);

/* Datasets tokenized for the model. */
typedef struct lp_train_data {
    lp_tokenizer *tok;
    lp_dataset train, eval;
    lp_encoded_dataset etrain, eeval;
    bool has_eval;
    bool lm;                    /* causal LM: text only, no labels (num_labels 0) */
    int32_t num_labels;
    char **label_names;         /* num_labels, borrowed from train.label_map */
    bool sft;                   /* instruction data (sft_prep.c): strain/seval hold the rows, train/eval
                                 * only their names and counts */
    int sft_responses;          /* loss on responses only (resolved) */
    lp_sft_dataset strain, seval;
    /* exact match on prompt/response eval rows: row i's prompt (rendered with the generation
     * prompt, tokenized) is em_ids[em_off[i] .. em_off[i+1]), its answer em_want[i] */
    int64_t em_n;
    int64_t *em_off;
    int32_t *em_ids;
    char **em_want;
    int32_t *em_budget; /* (em_n) tokens to generate at most: the answer's own + 2 */
} lp_train_data;

/* Greedy exact match (exact_match.c): for each eval prompt, tokens chosen by argmax until a
 * special token (EOS, end of turn) or the budget; a hit when the decoded text, stripped of
 * surrounding whitespace, equals the answer stripped. Each token recomputes the whole
 * sequence (no KV cache): a small stand-in until the generate API takes over. */
LP_WARN_UNUSED lp_status lp_train_exact_match(lp_model *m, const lp_train_data *d, int64_t *hits);

/* Whether c's data goes through the instruction-tuning path (*sft): --packing,
 * --train-on-responses, a --data-format, or a JSONL file whose first row has "prompt",
 * "instruction" or "messages". Errors: NO_MEMORY parsing that row (a guess then would send
 * instruction data to the plain-text reader). */
LP_WARN_UNUSED lp_status lp_train_sft_wanted(const lp_train_config *c, bool *sft);
/* Reads, renders (the model's chat template), tokenizes and (--packing) packs the train and
 * eval files into d->etrain / d->eeval; d->tok must be loaded. Errors name file and line. */
LP_WARN_UNUSED lp_status lp_train_sft_load(lp_train_data *d, const lp_train_config *c, int32_t max_len, int32_t pad);

/* Loads the tokenizer and data. lm: text-only data for a causal LM (labels unused).
 * config_pad is the model config's pad_token_id, config_eos its eos_token_id (-1 when
 * absent): padding falls back to them when the tokenizer has no pad token. Refuses (naming
 * config.json) a model whose vocab_size is below the tokenizer's ids or whose positions
 * cannot hold one token beside the specials (model_vocab, model_positions <= 0: not checked). */
LP_WARN_UNUSED lp_status lp_train_data_load(lp_train_data *d, const lp_train_config *c, int32_t max_len,
                                            int32_t model_labels, bool lm, int64_t config_pad, int64_t config_eos,
                                            int64_t model_vocab, int64_t model_positions);
void lp_train_data_free(lp_train_data *d);

/* Run-directory writers (each file atomic). */
LP_WARN_UNUSED lp_status lp_rundir_write_config(const char *run_dir, const lp_train_config *c,
                                                const lp_model *model, const lp_train_data *d, int64_t total_steps,
                                                int64_t warmup_steps, const char *resumed_from);
LP_WARN_UNUSED lp_status lp_rundir_write_steps(const char *path, const lp_history *h);
LP_WARN_UNUSED lp_status lp_rundir_write_epochs(const char *path, const lp_history *h);
/* Parses a steps.csv written by lp_rundir_write_steps back into h (for resume). */
LP_WARN_UNUSED lp_status lp_rundir_read_steps(const char *path, lp_history *h);
LP_WARN_UNUSED lp_status lp_rundir_read_epochs(const char *path, lp_history *h);

/* What the profiler's saved windows contributed to the summary. */
typedef struct lp_top_op {
    char name[128];
    int64_t calls;
    double self_ms, total_ms, flops;
} lp_top_op;

typedef struct lp_prof_facts {
    bool have;                 /* a window was saved */
    double flops;              /* FLOPs of the outermost op records in the windows */
    double window_s;           /* seconds those windows spanned */
    lp_top_op top[15];
    int n_top;
} lp_prof_facts;

/* on_trace_ready: the default exports, then top ops and FLOPs into user (lp_prof_facts). */
lp_status lp_train_on_trace_ready(const lp_prof_events *ev, void *user);

typedef struct lp_summary_in {
    const lp_train_config *c;
    const lp_model *model;
    const lp_history *h;
    const lp_prof_facts *pf;
    const char *run_id;
    double peak_gflops;        /* machine f32 peak used for MFU (<= 0 unknown) */
    const char *peak_source;
    bool interrupted;
    const char *stop_reason;   /* NULL: finished */
    const lp_contention *busy; /* the steps' CPU share (NULL: not measured) */
} lp_summary_in;

LP_WARN_UNUSED lp_status lp_rundir_write_summary(const char *path, const lp_summary_in *in);

/* Progress display: a bar on a terminal, else plain lines every log_every steps. */
typedef struct lp_progress {
    int mode;                  /* 0 off, 1 lines, 2 bar */
    int log_every;
    int64_t total;
    FILE *out;
    double t0;
    int64_t first_step;
    int64_t samples;
} lp_progress;

void lp_progress_init(lp_progress *p, const lp_train_config *c, int64_t total, int64_t first_step);
void lp_progress_step(lp_progress *p, const lp_step_rec *r);
/* Ends the bar's line (a plain message may follow). */
void lp_progress_end(lp_progress *p);

double lp_train_now_s(void);

/* The run directory's owner lock (runlock.c). */
typedef struct lp_runlock {
    int fd;          /* -1 when not held */
    char path[1100]; /* <run_dir>/.lock */
} lp_runlock;
/* Creates run_dir (mkdir -p) and locks it for this process. Refuses (INVALID_ARG, naming the
 * directory) when another live run holds it, or when it already holds a run's files and
 * neither resume (keep them) nor overwrite (remove them) is set; --overwrite never removes
 * files that are not a loupe run's. A lock left by a dead process is taken over (noted on
 * stderr unless quiet). Released by lp_runlock_release, or by the kernel when the process dies. */
LP_WARN_UNUSED lp_status lp_runlock_acquire(const char *run_dir, bool overwrite, bool resume, bool quiet,
                                            lp_runlock *lk);
void lp_runlock_release(lp_runlock *lk);

/* checksums.json for the checkpoint files in dir (ckpt_sum.c): crc32 of each file and tensor. */
LP_WARN_UNUSED lp_status lp_ckpt_sum_write(const char *dir);
/* Verifies dir's files against its checksums.json: FORMAT naming the damaged file (and the
 * first damaged tensor, with a count) when one differs. A checkpoint without checksums.json
 * (written before them) verifies, with *has_sums false. */
LP_WARN_UNUSED lp_status lp_ckpt_sum_verify(const char *dir, bool *has_sums);

/* --detect-anomaly (anomaly.c): NUMERIC naming the first of the pass's tensors (embeddings,
 * each layer's output, the logits (B,num_labels), may be NULL) that holds a NaN or Inf, or the
 * first parameter gradient in backward order; LP_OK when all are finite. */
LP_WARN_UNUSED lp_status lp_anomaly_forward(const lp_model *m, const float *logits, int32_t B, int32_t T, int64_t step);
LP_WARN_UNUSED lp_status lp_anomaly_backward(const lp_model *m, int64_t step);

/* Data-parallel training over the ranks of lp_dist (dp.c). With one rank every call is a
 * no-op, so the loop has one path and a single process behaves as before. */
typedef struct lp_dp {
    int32_t rank, world;
    lp_model *model;                 /* borrowed */
    struct lp_dist_reducer *reducer; /* NULL with one rank */
    int32_t n_buckets;
    lp_status hook_status;           /* first error of a reduction started from backward */
    /* ZeRO-1 (--zero 1 with more than one rank): the buckets reduce-scatter and all-gather */
    bool sharded;
    struct lp_dist_bucket *b; /* (n_buckets) the reducer's buckets: each the hull of its tensors */
    bool *staged;             /* (n_buckets) gathered through the gradient block: its parameters
                               * are not laid out as their gradients (LoRA's adapters) */
    size_t *seg_at;           /* (n_buckets + 1) bucket i's runs: o->seg[seg_at[i] .. seg_at[i+1]) */
    float **seg_g;            /* (n_seg) each run's gradient, for the clip norm */
    int64_t *seg_n;
} lp_dp;

/* Plans the gradient buckets (bucket_mb MiB) over model's gradient block and builds the
 * reducer (nothing with one rank); zero 1 with more than one rank: the sharded reducer of
 * ZeRO-1, each bucket cut to the hull of its tensors. */
LP_WARN_UNUSED lp_status lp_dp_init(lp_dp *dp, lp_model *model, double bucket_mb, int32_t zero);
/* The optimizer for this rank: lp_optim_init, or sharded (ZeRO-1) over this rank's shard of
 * every bucket, cut into runs of one parameter each. */
LP_WARN_UNUSED lp_status lp_dp_optim_init(lp_dp *dp, lp_optim *o, const lp_model *model);
/* After lp_dp_finish: the global gradient norm, *norm (torch's clip_grad_norm_), and with
 * max_norm > 0 the gradients scaled by max_norm / (norm + 1e-6) when that is below 1. Sharded:
 * each rank's sum of squares over its shards, one all-reduced scalar, its shards scaled.
 * *norm may be inf or NaN (then nothing is scaled). Every rank calls it. */
LP_WARN_UNUSED lp_status lp_dp_clip(lp_dp *dp, lp_model *model, double max_norm, double *norm);
/* The optimizer step (lp_optim_step); sharded: a bucket at a time, each bucket's all-gather
 * started as soon as its shard is updated, all waited before it returns (the parameters are
 * then every rank's updates). Every rank calls it. */
LP_WARN_UNUSED lp_status lp_dp_step(lp_dp *dp, lp_optim *o, lp_model *model, const lp_train_config *c, double lr);
/* Sharded AdamW over runs [k0, k1) of o (optim.c), without counting a step (o->t). */
void lp_optim_step_runs(lp_optim *o, lp_model *model, const lp_train_config *c, double lr, size_t k0, size_t k1);
void lp_dp_free(lp_dp *dp);
/* Every rank gets the worst status of all (a status code is an int: the maximum): a rank whose
 * own st is LP_OK but another's is not gets that status, with a message saying so ("another
 * rank stopped", which the CLI leaves to the rank that failed). When rank 0 failed, it alone
 * reports: the other ranks (that mostly failed the same way: a usage or config error) get
 * rank 0's status with that message too, so the job prints its error once and every rank
 * exits with the same code. */
LP_WARN_UNUSED lp_status lp_dp_agree(const lp_dp *dp, lp_status st);
/* Checks that every rank starts from the same weights: a 64-bit hash of all parameters, compared
 * with rank 0's. INVALID_ARG naming the first rank that differs. */
LP_WARN_UNUSED lp_status lp_dp_check_weights(const lp_dp *dp, const lp_model *model);
/* Reduce the next backward's gradients (true: the last micro-batch of a step) or not. */
void lp_dp_reduce_next_backward(lp_dp *dp, bool on);
/* This rank's shard of the global batch rows[0 .. n): rows [*lo, *lo + *nl) (contiguous, the
 * rank's share), and the length every rank pads its shard to (the global batch's longest row;
 * 0 with one rank: lp_batch_fill's own), so that each rank's rows are the global batch's rows
 * exactly and dropout can draw the global batch's masks (lp_model_set_batch_slice). */
int32_t lp_dp_shard(const lp_dp *dp, const lp_encoded_dataset *e, const int64_t *rows, int32_t n, int32_t *lo,
                    int32_t *nl);
/* After a micro-batch that some rank did not run (an empty shard: its dropout stream did not
 * move): every rank takes the stream of one that ran (the furthest), so the masks stay in step.
 * Every rank calls it, or none. */
LP_WARN_UNUSED lp_status lp_dp_sync_dropout(const lp_dp *dp, lp_model *model);
/* Completes the step's reduction: the gradient block then holds the sum over ranks. */
LP_WARN_UNUSED lp_status lp_dp_finish(lp_dp *dp);
/* ZeRO-1, before rank 0 writes a checkpoint: rank 0 receives every other rank's runs of AdamW
 * state into whole per-parameter buffers (TEMPORARY; o->m[i], o->v[i]), so that the checkpoint
 * holds all of it, as an unsharded run's, and resumes on any number of ranks;
 * lp_dp_release_optim frees them. Every rank calls both. */
LP_WARN_UNUSED lp_status lp_dp_gather_optim(const lp_dp *dp, lp_optim *o, const lp_model *model);
void lp_dp_release_optim(const lp_dp *dp, lp_optim *o);
/* Rank 0 writes run_dir/distributed.json (backend, world size, buckets, ZeRO stage, every rank's
 * optimizer-state bytes against the unsharded figure, and its gradient bytes: the block and
 * the reduce-scatter's receive buffers); every rank calls it. */
LP_WARN_UNUSED lp_status lp_dp_write_info(const lp_dp *dp, const lp_optim *o, const lp_model *model,
                                          const lp_train_config *c, const char *run_dir);

#endif
