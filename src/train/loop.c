/* The training loop: builds the run (model, data, optimizer, optional resume), then runs
 * optimizer steps of grad_accum micro-batches with clipping and the LR schedule, evaluates
 * at each epoch end, records every step, checkpoints, and writes the run directory. Stops
 * early on SIGINT (checkpoint + run files, LP_STATUS_INTERRUPTED) or a non-finite loss
 * (run files for the steps before it, LP_STATUS_NUMERIC naming the step). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "loupe/dist.h"
#include "train_internal.h"

typedef struct run {
    const lp_train_config *c;
    lp_model *model;
    lp_train_data d;
    lp_optim opt;
    lp_history h;
    lp_batch batch;
    int64_t *order;
    float *logits;              /* (batch, num_labels) for a classifier's eval; NULL for a causal LM,
                                 * whose (B*T, vocab) logits the trainer never copies out */
    lp_model_task task;         /* SEQ_CLS or CAUSAL_LM */
    bool type_ids;              /* the model reads token type ids (BERT); decoders take none */
    int64_t n_batches, steps_per_epoch, total, warmup;
    char run_dir[1024], run_id[256];
    lp_tb_writer *tb;
    lp_prof_facts pf;
    bool prof_on;
    double t_start, elapsed0;
    int64_t em_before;          /* exact-match hits before training; -1 not measured */
    lp_contention busy;         /* step wall vs process CPU time: is the machine busy? */
    lp_dp dp;                   /* data-parallel ranks (one: a plain run) */
    bool lead;                  /* rank 0: evaluates, logs and writes the run directory */
} run;

/* models/default keeps the seed its weights are drawn from in config.json. */
static uint64_t init_seed(const char *model_dir, uint64_t fallback)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    cJSON *j;
    if (lp_json_read_file(path, &j) != LP_OK)
        return fallback; /* the model loader reports what is wrong with the file */
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "loupe_init_seed");
    uint64_t v = cJSON_IsNumber(s) && s->valuedouble >= 0 ? (uint64_t)s->valuedouble : fallback;
    cJSON_Delete(j);
    return v;
}

static lp_status check_config(const lp_train_config *c)
{
    if (c->method == LP_TRAIN_METHOD_FULL && (c->adapter || c->save_adapter || c->merge_dir))
        return lp_err(LP_STATUS_INVALID_ARG, "--adapter, --save-adapter and --merge need --method lora or qlora");
    if (c->batch_size < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "--batch-size must be >= 1");
    if (c->grad_accum < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "--grad-accum must be >= 1");
    const int32_t world = lp_dist_world_size();
    if (c->batch_size % world)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "--batch-size %d is the global batch and must divide by the %d ranks (each takes an equal "
                      "shard); use a multiple of %d",
                      c->batch_size, (int)world, (int)world);
    if (!(c->bucket_mb > 0))
        return lp_err(LP_STATUS_INVALID_ARG, "--bucket-mb must be > 0");
    if (c->zero < -1 || c->zero > 1)
        return lp_err(LP_STATUS_INVALID_ARG, "--zero %d: only stage 0 (off) and 1 (AdamW state sharded) exist",
                      (int)c->zero);
    if (c->max_seq_len < 2)
        return lp_err(LP_STATUS_INVALID_ARG, "--max-seq-len must be >= 2");
    if (c->epochs < 1 && c->max_steps < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "--epochs or --max-steps must be >= 1");
    if (!(c->lr >= 0) || !(c->weight_decay >= 0) || !(c->warmup_ratio >= 0 && c->warmup_ratio <= 1))
        return lp_err(LP_STATUS_INVALID_ARG, "--lr, --weight-decay must be >= 0 and --warmup-ratio in [0, 1]");
    if (c->profile && lp_prof_schedule_validate(&c->prof_schedule) != LP_OK)
        return lp_err_wrap(LP_STATUS_INVALID_ARG, "profiler schedule");
    if (c->tf32 && c->device != LP_DEVICE_CUDA)
        return lp_err(LP_STATUS_INVALID_ARG, "--tf32 needs --device cuda");
    if (c->device != LP_DEVICE_CPU) { /* what a GPU run does not do yet, said before any work */
        const char *no = world > 1                       ? "data parallelism (one process, one GPU)"
                         : c->detect_anomaly             ? "--detect-anomaly"
                         : c->resume && *c->resume       ? "--resume"
                         : c->exec != LP_EXEC_MODE_FUSED ? "--exec eager (the GPU has fused attention only)"
                                                         : NULL;
        if (no)
            return lp_err(LP_STATUS_UNSUPPORTED, "--device %s does not support %s yet", lp_device_name(c->device), no);
    }
    struct stat sb;
    if (stat(c->model_dir, &sb) != 0 || (!S_ISDIR(sb.st_mode) && !lp_path_is_gguf(c->model_dir)))
        return lp_err(LP_STATUS_NOT_FOUND, "model directory (or .gguf file) %s not found", c->model_dir);
    return LP_OK;
}

static void mem_now(int64_t *cur, int64_t *peak, int64_t *rss)
{
    lp_mem_stats ms;
    lp_prof_mem_stats(&ms);
    *cur = ms.total_current;
    *peak = ms.total_peak;
    int64_t pr;
    if (lp_prof_rss(rss, &pr) != LP_OK)
        *rss = 0;
}

/* The batch's token type ids for a model that reads them (BERT), else NULL: decoders take none. */
static const int32_t *type_ids_of(const run *R) { return R->type_ids ? R->batch.token_type_ids : NULL; }

/* The tokens a causal LM's loss counts in a batch: token t of a row is predicted from t-1 of
 * the same sample (packing) when its label is not -100. */
static int64_t predicted_tokens(const lp_batch *b)
{
    int64_t n = 0;
    for (int32_t r = 0; r < b->B; r++)
        for (int32_t t = 1; t < b->T; t++) {
            const int64_t i = (int64_t)r * b->T + t;
            n += b->attention_mask[i] && b->attention_mask[i] == b->attention_mask[i - 1] && b->lm_labels[i] != -100;
        }
    return n;
}

/* A causal LM's eval: the token-weighted mean loss over every predicted token (each row of
 * len real tokens predicts len-1: the model shifts the labels; fewer under response-only
 * labels), so batches of short rows do not weigh more than their tokens. */
static lp_status evaluate_lm(run *R, double *loss, double *ppl)
{
    const lp_encoded_dataset *e = &R->d.eeval;
    int32_t bs = R->c->batch_size;
    int64_t *rows = malloc((size_t)bs * sizeof *rows);
    lp_status st = rows ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "evaluation: out of memory");
    double sum = 0.0, count = 0.0;
    lp_model_set_training(R->model, false);
    LP_PROF_SCOPE("evaluate");
    for (int64_t s = 0; st == LP_OK && s < e->n; s += bs) {
        int32_t n = (int32_t)(e->n - s < bs ? e->n - s : bs);
        for (int32_t i = 0; i < n; i++)
            rows[i] = s + i;
        if ((st = lp_batch_fill(&R->batch, e, rows, n, 0)) != LP_OK)
            break;
        int64_t predicted = predicted_tokens(&R->batch);
        if (predicted < 1) /* one-token rows (or no response token) predict nothing */
            continue;
        float l;
        st = lp_model_loss_forward(R->model, R->batch.input_ids, R->batch.attention_mask, type_ids_of(R),
                                   R->batch.lm_labels, n, R->batch.T, NULL, &l);
        if (st != LP_OK)
            break;
        sum += (double)l * (double)predicted;
        count += (double)predicted;
    }
    lp_model_set_training(R->model, true);
    free(rows);
    if (st == LP_OK && count == 0)
        st = lp_err(LP_STATUS_INVALID_ARG, "evaluation: every row of %s has a single token: nothing to predict",
                    R->d.eval.source);
    if (st == LP_OK) {
        *loss = sum / count;
        *ppl = exp(*loss);
    }
    return st;
}

/* Loss, accuracy and macro-F1 over the eval set in file order (eval mode: no dropout). */
static lp_status evaluate(run *R, double *loss, double *acc, double *f1)
{
    const lp_encoded_dataset *e = &R->d.eeval;
    int32_t L = R->d.num_labels, bs = R->c->batch_size;
    int32_t *pred = malloc((size_t)e->n * sizeof *pred);
    int64_t *rows = malloc((size_t)bs * sizeof *rows);
    lp_status st = pred && rows ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "evaluation: out of memory");
    double sum = 0.0;
    lp_model_set_training(R->model, false);
    LP_PROF_SCOPE("evaluate");
    for (int64_t s = 0; st == LP_OK && s < e->n; s += bs) {
        int32_t n = (int32_t)(e->n - s < bs ? e->n - s : bs);
        for (int32_t i = 0; i < n; i++)
            rows[i] = s + i;
        float l;
        if ((st = lp_batch_fill(&R->batch, e, rows, n, 0)) != LP_OK)
            break;
        st = lp_model_loss_forward(R->model, R->batch.input_ids, R->batch.attention_mask, type_ids_of(R),
                                   R->batch.labels, n, R->batch.T, R->logits, &l);
        if (st != LP_OK)
            break;
        sum += (double)l * n;
        for (int32_t i = 0; i < n; i++) {
            int32_t best = 0;
            for (int32_t k = 1; k < L; k++)
                if (R->logits[(size_t)i * L + k] > R->logits[(size_t)i * L + best])
                    best = k;
            pred[s + i] = best;
        }
    }
    lp_model_set_training(R->model, true);
    if (st == LP_OK) {
        *loss = sum / (double)e->n;
        lp_metrics_classification(e->labels, pred, e->n, L, acc, f1);
    }
    free(pred);
    free(rows);
    return st;
}

/* Closes epoch `epoch` in the history: train loss and throughput from its steps, plus an
 * evaluation when there is an eval set. */
static lp_status finish_epoch(run *R, int64_t epoch, bool complete, bool do_eval)
{
    lp_epoch_rec er = {.epoch = epoch, .eval_loss = NAN, .eval_accuracy = NAN, .eval_f1 = NAN,
                       .eval_perplexity = NAN, .complete = complete};
    double loss = 0, ms = 0, samples = 0, tokens = 0;
    for (size_t i = 0; i < R->h.n_steps; i++) {
        const lp_step_rec *s = &R->h.steps[i];
        if (s->epoch != epoch)
            continue;
        er.steps++;
        loss += s->loss;
        ms += s->step_ms;
        samples += (double)s->samples;
        tokens += (double)s->tokens;
        if (s->mem_peak_bytes > er.peak_mem_bytes)
            er.peak_mem_bytes = s->mem_peak_bytes;
    }
    if (er.steps == 0)
        return LP_OK;
    er.train_loss = loss / (double)er.steps;
    er.time_s = ms / 1000.0;
    er.samples_per_s = ms > 0 ? samples / er.time_s : 0;
    er.tokens_per_s = ms > 0 ? tokens / er.time_s : 0;
    if (do_eval && R->d.has_eval && R->lead) { /* the other ranks hold the same weights */
        const bool lm = R->task == LP_MODEL_TASK_CAUSAL_LM;
        lp_status st = lm ? evaluate_lm(R, &er.eval_loss, &er.eval_perplexity)
                          : evaluate(R, &er.eval_loss, &er.eval_accuracy, &er.eval_f1);
        if (st != LP_OK)
            return lp_err_wrap(st, "evaluation after epoch %lld", (long long)epoch + 1);
        if (!R->c->quiet && lm)
            fprintf(stderr, "epoch %lld: train loss %.4f, eval loss %.4f, perplexity %.3f\n", (long long)epoch + 1,
                    er.train_loss, er.eval_loss, er.eval_perplexity);
        else if (!R->c->quiet)
            fprintf(stderr, "epoch %lld: train loss %.4f, eval loss %.4f, accuracy %.4f, macro-F1 %.4f\n",
                    (long long)epoch + 1, er.train_loss, er.eval_loss, er.eval_accuracy, er.eval_f1);
        double wt = (double)time(NULL);
        if (R->tb) { /* a causal LM has no accuracy: its scalars are absent, not 0 */
            int64_t st_n = (int64_t)R->h.n_steps;
            lp_status s2 = lp_tb_writer_scalar(R->tb, "eval/loss", st_n, (float)er.eval_loss, wt);
            if (s2 == LP_OK && lm)
                s2 = lp_tb_writer_scalar(R->tb, "eval/perplexity", st_n, (float)er.eval_perplexity, wt);
            if (s2 == LP_OK && !lm)
                s2 = lp_tb_writer_scalar(R->tb, "eval/accuracy", st_n, (float)er.eval_accuracy, wt);
            if (s2 == LP_OK && !lm)
                s2 = lp_tb_writer_scalar(R->tb, "eval/macro_f1", st_n, (float)er.eval_f1, wt);
            if (s2 != LP_OK)
                return s2;
        }
    }
    return lp_history_add_epoch(&R->h, &er);
}

/* One optimizer step over up to grad_accum micro-batches starting at pos. */
static lp_status train_step(run *R, lp_data_pos *pos, int64_t step, lp_step_rec *rec)
{
    const lp_train_config *c = R->c;
    double t0 = lp_train_now_s();
    int64_t left = R->n_batches - pos->batch;
    int32_t k = (int32_t)(left < c->grad_accum ? left : c->grad_accum);
    memset(rec, 0, sizeof *rec);
    rec->step = step;
    lp_model_weights_changed(R->model); /* a resume may have loaded weights since: no-op twice */
    rec->epoch = pos->epoch;
    lp_model_zero_grad(R->model);
    const int32_t world = R->dp.world;
    /* one rank knows its loss scale (1/k) before the forward, so a causal LM's trained head can
     * take its gradient in the loss forward; ranks learn theirs from the all-reduced counts */
    lp_model_set_head_grad_in_loss(R->model, world == 1);
    if (world == 1)
        lp_model_set_dloss_scale(R->model, (float)(1.0 / (double)k));
    double loss = 0;
    for (int32_t a = 0; a < k; a++) {
        int64_t first = pos->batch * c->batch_size;
        int32_t n = (int32_t)(R->d.etrain.n - first < c->batch_size ? R->d.etrain.n - first : c->batch_size);
        /* this rank's contiguous shard of the global batch (all of it with one rank), padded as
         * the global batch: dropout draws its slice of the global batch's masks */
        int32_t lo, nl;
        const int32_t pad = lp_dp_shard(&R->dp, &R->d.etrain, R->order + first, n, &lo, &nl);
        lp_model_set_batch_slice(R->model, lo, world > 1 ? n : 0);
        double t1 = lp_train_now_s();
        lp_status st = LP_OK;
        if (nl > 0) {
            lp_prof_range_push(LP_TRAIN_RANGE_DATALOADER);
            st = lp_batch_fill(&R->batch, &R->d.etrain, R->order + first + lo, nl, pad);
            lp_prof_range_pop();
        }
        double t2 = lp_train_now_s();
        if (st != LP_OK)
            return st;
        /* a causal LM's labels are the ids (-100 on padding); a classifier's, one per row. Its
         * loss is a mean over rows, or over predicted tokens: the count that weighs a shard. */
        const bool lm = R->task == LP_MODEL_TASK_CAUSAL_LM;
        const int32_t *labels = lm ? R->batch.lm_labels : R->batch.labels;
        float *lg = c->detect_anomaly ? R->logits : NULL;
        float l = 0;
        double count = nl > 0 ? (world > 1 && lm ? (double)predicted_tokens(&R->batch) : (double)nl) : 0;
        const bool run_pass = count > 0; /* a shard with nothing to predict adds nothing */
        if (run_pass) {
            st = lp_model_loss_forward(R->model, R->batch.input_ids, R->batch.attention_mask, type_ids_of(R),
                                       labels, R->batch.B, R->batch.T, lg, &l);
            if (st == LP_STATUS_NUMERIC)
                l = NAN;
            else if (st != LP_OK)
                return lp_err_wrap(st, "step %lld", (long long)step);
            if (c->detect_anomaly && (st = lp_anomaly_forward(R->model, lg, R->batch.B, R->batch.T, step)) != LP_OK)
                return st;
        }
        /* the global batch's loss: the shards' means weighed by their counts (one rank: l) */
        double g[4] = {count > 0 ? (double)l * count : 0, count, nl > 0 ? (double)R->batch.n_tokens : 0, !run_pass};
        if (world > 1 && (st = lp_dist_allreduce_sum_f64(g, 4)) != LP_OK)
            return st;
        if (g[3] > 0 && (st = lp_dp_sync_dropout(&R->dp, R->model)) != LP_OK) /* a rank sat this one out */
            return st;
        double gl = world > 1 ? g[0] / g[1] : (double)l;
        double t3 = lp_train_now_s();
        if (c->inject_nan_step == step)
            gl = NAN;
        if (!isfinite(gl))
            return lp_err(LP_STATUS_NUMERIC, "loss is %s at step %lld (epoch %lld); stopping (try a lower --lr)",
                          isnan(gl) ? "NaN" : "infinite", (long long)step, (long long)pos->epoch + 1);
        /* each rank's gradient weighs its shard, so that their sum is the global batch's */
        lp_model_set_dloss_scale(R->model, (float)((world > 1 ? count / g[1] : 1.0) / (double)k));
        lp_dp_reduce_next_backward(&R->dp, a == k - 1); /* no all-reduce on accumulation steps */
        if (run_pass && (st = lp_model_backward(R->model)) != LP_OK)
            return lp_err_wrap(st, "step %lld backward", (long long)step);
        if (a == k - 1 && (st = lp_dp_finish(&R->dp)) != LP_OK)
            return lp_err_wrap(st, "step %lld gradient all-reduce", (long long)step);
        if (c->detect_anomaly && (st = lp_anomaly_backward(R->model, step)) != LP_OK)
            return st;
        double t4 = lp_train_now_s();
        loss += gl;
        rec->data_ms += (t2 - t1) * 1e3;
        rec->fwd_ms += (t3 - t2) * 1e3;
        rec->bwd_ms += (t4 - t3) * 1e3;
        rec->samples += n;
        rec->tokens += (int64_t)g[2];
        pos->batch++;
    }
    rec->loss = loss / k;
    double t5 = lp_train_now_s();
    lp_prof_range_push(LP_PROF_NAME_OPTIMIZER_STEP);
    lp_status cs = lp_dp_clip(&R->dp, R->model, c->max_grad_norm, &rec->grad_norm); /* ZeRO-1: over the shards */
    if (cs != LP_OK) {
        lp_prof_range_pop();
        return lp_err_wrap(cs, "step %lld gradient norm", (long long)step);
    }
    if (!isfinite(rec->grad_norm)) {
        lp_prof_range_pop();
        return lp_err(LP_STATUS_NUMERIC, "gradient norm is not finite at step %lld (epoch %lld); stopping",
                      (long long)step, (long long)pos->epoch + 1);
    }
    rec->lr = lp_lr_at(c->schedule, c->lr, R->warmup, R->total, step - 1);
    lp_status ss = lp_dp_step(&R->dp, &R->opt, R->model, c, rec->lr); /* ZeRO-1: and the all-gathers */
    lp_model_weights_changed(R->model); /* --dtype bf16: the next pass rounds the new weights */
    lp_status ks = lp_kernels_sync(); /* a GPU's step ends when its queue does (no-op on the CPU) */
    lp_prof_range_pop();
    if (ss != LP_OK)
        return lp_err_wrap(ss, "step %lld parameter all-gather", (long long)step);
    if (ks != LP_OK)
        return lp_err_wrap(ks, "step %lld on the device", (long long)step);
    double t6 = lp_train_now_s();
    rec->opt_ms = (t6 - t5) * 1e3;
    rec->step_ms = (t6 - t0) * 1e3;
    mem_now(&rec->mem_bytes, &rec->mem_peak_bytes, &rec->rss_bytes);
    rec->wall_s = R->elapsed0 + (t6 - R->t_start);
    return LP_OK;
}

static lp_status write_run_files(run *R, bool interrupted, const char *stop_reason, double peak, const char *peak_src)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/steps.csv", R->run_dir);
    lp_status st = lp_rundir_write_steps(p, &R->h);
    snprintf(p, sizeof p, "%s/epoch_results.csv", R->run_dir);
    if (st == LP_OK)
        st = lp_rundir_write_epochs(p, &R->h);
    lp_summary_in in = {.c = R->c,
                        .model = R->model,
                        .h = &R->h,
                        .pf = &R->pf,
                        .run_id = R->run_id,
                        .peak_gflops = peak,
                        .peak_source = peak_src,
                        .interrupted = interrupted,
                        .stop_reason = stop_reason,
                        /* on a GPU the host waits for the device: a low CPU share says nothing */
                        .busy = R->c->device == LP_DEVICE_CPU ? &R->busy : NULL};
    snprintf(p, sizeof p, "%s/summary.json", R->run_dir);
    if (st == LP_OK)
        st = lp_rundir_write_summary(p, &in);
    if (st == LP_OK && R->tb)
        st = lp_tb_writer_flush(R->tb);
    return st;
}

static lp_status setup(run *R, const lp_train_config *c, char *resumed, size_t rcap, lp_ckpt_state *cs)
{
    lp_status st = check_config(c);
    if (st != LP_OK)
        return st;
    // the GPU before anything is read or written: a build without CUDA or a machine without a
    // GPU stops here, leaving no run directory
    if (c->device != LP_DEVICE_CPU && (st = lp_kernels_use_device(c->device)) != LP_OK)
        return st;
    lp_kernels_set_tf32(c->tf32);
    lp_threads_init();
    if (lp_threads_blas_note() && !c->quiet)
        fprintf(stderr, "note: %s\n", lp_threads_blas_note());
    if (c->dtype == LP_DTYPE_BF16 && !c->quiet && lp_dist_rank() == 0)
        fprintf(stderr, "dtype bf16: the Linears' GEMMs %s, f32 accumulation\n", lp_bf16_gemm_path());
    if (c->threads > 0)
        lp_threads_set(c->threads);
    if ((st = lp_train_task_resolve(c->model_dir, c->task, &R->task)) != LP_OK)
        return st;
    lp_model_options mo;
    lp_model_options_init(&mo);
    mo.task = R->task;
    mo.exec = c->exec;
    mo.grad_checkpointing = c->grad_checkpointing;
    mo.training = true;
    mo.quiet = c->quiet;
    mo.seed = init_seed(c->model_dir, c->seed);
    if (c->method != LP_TRAIN_METHOD_FULL) { // adapters on a frozen (and for qlora quantized) base
        mo.lora.enabled = true;
        mo.lora.rank = c->lora_rank;
        mo.lora.alpha = c->lora_alpha;
        mo.lora.dropout = c->lora_dropout;
        mo.lora.rslora = c->lora_rslora;
        mo.lora.targets = c->lora_targets;
        mo.lora.adapter_dir = c->adapter;
        mo.lora.base_dtype =
            c->method == LP_TRAIN_METHOD_QLORA && c->base_dtype == LP_DTYPE_F32 ? LP_DTYPE_NF4 : c->base_dtype;
        /* bf16 LoRA: the frozen base's only copy, packed for the bf16 GEMMs; an NF4 / int8 base
         * (QLoRA) stays quantized and is rounded to bf16 for each use (bitsandbytes' compute dtype) */
        if (c->dtype == LP_DTYPE_BF16 && mo.lora.base_dtype == LP_DTYPE_F32)
            mo.lora.base_dtype = LP_DTYPE_BF16;
    }
    mo.compute = c->dtype;
    if ((st = lp_model_load(c->model_dir, &mo, &R->model)) != LP_OK)
        return st;
    lp_rng drop;
    lp_rng_init(&drop, c->seed, LP_RNG_STREAM_DROPOUT);
    lp_model_rng_set(R->model, &drop);
    lp_model_info mi;
    lp_model_info_get(R->model, &mi);
    R->type_ids = mi.family == LP_MODEL_FAMILY_BERT;
    int32_t max_len = c->max_seq_len < mi.max_positions ? c->max_seq_len : (int32_t)mi.max_positions;
    const lp_model_config *cfg = lp_model_config_get(R->model);
    if ((st = lp_train_data_load(&R->d, c, max_len, (int32_t)mi.num_labels, R->task == LP_MODEL_TASK_CAUSAL_LM,
                                 cfg->pad_token_id, cfg->eos_token_id, mi.vocab_size, mi.max_positions)) != LP_OK)
        return st;
    R->n_batches = lp_batch_count(R->d.etrain.n, c->batch_size, 0);
    R->steps_per_epoch = (R->n_batches + c->grad_accum - 1) / c->grad_accum;
    R->total = c->max_steps > 0 ? c->max_steps : c->epochs * R->steps_per_epoch;
    if (c->profile)
        R->total = lp_prof_schedule_adjust_max_steps(&c->prof_schedule, R->total);
    R->warmup = c->warmup_steps >= 0 ? c->warmup_steps : (int64_t)ceil(c->warmup_ratio * (double)R->total);
    lp_batch_init(&R->batch);
    R->order = malloc((size_t)R->d.etrain.n * sizeof *R->order);
    if (R->task == LP_MODEL_TASK_SEQ_CLS)
        R->logits = malloc((size_t)c->batch_size * mi.num_labels * sizeof *R->logits);
    if (!R->order || (R->task == LP_MODEL_TASK_SEQ_CLS && !R->logits))
        return lp_err(LP_STATUS_NO_MEMORY, "training buffers: out of memory");
    /* ZeRO-1 shards AdamW's state as the reducer shards the buckets: the plan first. By default
     * for full fine-tuning (bench/README.md: faster than the all-reduce at 2 ranks, half the
     * optimizer memory); LoRA's state is small and its adapters are gathered through a copy */
    const int32_t zero = c->zero >= 0 ? c->zero : c->method == LP_TRAIN_METHOD_FULL;
    if ((st = lp_dp_init(&R->dp, R->model, c->bucket_mb, zero)) != LP_OK)
        return st;
    if ((st = lp_dp_optim_init(&R->dp, &R->opt, R->model)) != LP_OK)
        return st;
    if (c->resume && *c->resume) {
        if ((st = lp_ckpt_load(c->resume, c, R->model, &R->opt, cs, &R->h, resumed, rcap)) != LP_OK)
            return st;
        R->elapsed0 = cs->elapsed_s;
    }
    return LP_OK;
}

/* Greedy exact match on the eval prompts: "before" at step 0, "after" at the end; both go
 * to stderr and exact_match.json. */
static lp_status exact_match(run *R, bool after)
{
    if (!R->c->exact_match || !R->d.em_n)
        return LP_OK;
    int64_t hits = 0;
    double t0 = lp_train_now_s();
    lp_status st = lp_train_exact_match(R->model, &R->d, &hits);
    if (st != LP_OK)
        return lp_err_wrap(st, "exact match on %s", R->d.eval.source);
    const double secs = lp_train_now_s() - t0, n = (double)R->d.em_n;
    if (!after) {
        R->em_before = hits;
        if (!R->c->quiet)
            fprintf(stderr, "exact match before training: %lld/%lld (%.1f%%, %.1f s)\n", (long long)hits,
                    (long long)R->d.em_n, 100.0 * (double)hits / n, secs);
        return LP_OK;
    }
    if (!R->c->quiet)
        fprintf(stderr, "exact match after training: %lld/%lld (%.1f%%, %.1f s)\n", (long long)hits,
                (long long)R->d.em_n, 100.0 * (double)hits / n, secs);
    char p[1100];
    snprintf(p, sizeof p, "%s/exact_match.json", R->run_dir);
    lp_atomic_file f;
    if ((st = lp_atomic_open(&f, p)) != LP_OK)
        return st;
    fprintf(f.fp, "{\"eval_file\": \"%s\", \"scored\": %lld, \"after\": %lld, \"after_rate\": %.6f", R->d.eval.source,
            (long long)R->d.em_n, (long long)hits, (double)hits / n);
    if (R->em_before >= 0)
        fprintf(f.fp, ", \"before\": %lld, \"before_rate\": %.6f", (long long)R->em_before,
                (double)R->em_before / n);
    fprintf(f.fp, "}\n");
    return lp_atomic_commit(&f);
}

/* HF Trainer's train metrics beside loupe's own (seed 003 prints them): train_results.json
 * with the keys trainer.save_metrics("train") writes. */
static lp_status trainer_metrics(run *R, lp_train_result *res)
{
    double loss = 0, samples = 0;
    for (size_t i = 0; i < R->h.n_steps; i++)
        loss += R->h.steps[i].loss, samples += (double)R->h.steps[i].samples;
    const double rt = R->elapsed0 + lp_train_now_s() - R->t_start, n = (double)R->h.n_steps;
    res->train_runtime = rt;
    res->train_samples_per_second = rt > 0 ? samples / rt : 0;
    res->train_steps_per_second = rt > 0 ? n / rt : 0;
    res->train_loss = n > 0 ? loss / n : NAN;
    res->epoch = R->steps_per_epoch > 0 ? (double)res->steps / (double)R->steps_per_epoch : 0;
    char p[1100];
    snprintf(p, sizeof p, "%s/train_results.json", R->run_dir);
    lp_atomic_file f;
    lp_status st = lp_atomic_open(&f, p);
    if (st != LP_OK)
        return st;
    fprintf(f.fp,
            "{\n    \"epoch\": %.4f,\n    \"train_loss\": %.6f,\n    \"train_runtime\": "
            "%.4f,\n    \"train_samples_per_second\": %.3f,\n    \"train_steps_per_second\": %.3f\n}\n",
            res->epoch, res->train_loss, rt, res->train_samples_per_second, res->train_steps_per_second);
    return lp_atomic_commit(&f);
}

static void make_run_id(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "run-%Y%m%d-%H%M%S", &tm);
}

/* A timestamp id is unique per second only: runs started within the same second (in parallel,
 * too) each claim their own directory with mkdir, which exactly one caller wins, the others
 * taking the next suffix. */
static lp_status claim_auto_dir(const char *out_dir, const char *id, char *dir, size_t cap)
{
    lp_status st = lp_mkdir_p(out_dir);
    if (st != LP_OK)
        return st;
    for (int k = 1; k < 1000; k++) {
        if (k == 1)
            snprintf(dir, cap, "%s/%s", out_dir, id);
        else
            snprintf(dir, cap, "%s/%s-%d", out_dir, id, k);
        if (mkdir(dir, 0755) == 0)
            return LP_OK;
        if (errno != EEXIST)
            return lp_err(LP_STATUS_IO, "%s: cannot create the run directory: %s", dir, strerror(errno));
    }
    return lp_err(LP_STATUS_IO, "%s: 999 runs named %s already; choose --run-id", out_dir, id);
}

/* Rank 0's run directory: its id, the lock, config.json and the TensorBoard writer. */
static lp_status open_run_dir(run *R, lp_train_result *res, lp_runlock *lock, const char *resumed)
{
    const lp_train_config *c = R->c;
    if (c->run_id && *c->run_id)
        snprintf(R->run_id, sizeof R->run_id, "%s", c->run_id);
    else
        make_run_id(R->run_id, sizeof R->run_id);
    const char *out_dir = c->output_dir ? c->output_dir : "reports";
    snprintf(R->run_dir, sizeof R->run_dir, "%s/%s", out_dir, R->run_id);
    lp_status st;
    if (!(c->run_id && *c->run_id) &&
        (st = claim_auto_dir(out_dir, R->run_id, R->run_dir, sizeof R->run_dir)) != LP_OK)
        return st;
    snprintf(res->run_dir, sizeof res->run_dir, "%s", R->run_dir);
    if ((st = lp_runlock_acquire(R->run_dir, c->overwrite, c->resume && *c->resume, c->quiet, lock)) != LP_OK)
        return st;
    if ((st = lp_rundir_write_config(R->run_dir, c, R->model, &R->d, R->total, R->warmup, *resumed ? resumed : NULL)) !=
        LP_OK)
        return st;
    char p[1200];
    snprintf(p, sizeof p, "%s/tensorboard", R->run_dir);
    return lp_tb_writer_open(p, &R->tb);
}

lp_status lp_train_run(const lp_train_config *c0, lp_train_result *res)
{
    /* Data-parallel: rank 0 logs the global figures and alone writes the run directory; the
     * other ranks train silently and write nothing but their own trace. */
    lp_train_config cc = *c0;
    const bool lead = lp_dist_rank() == 0;
    if (!lead) {
        cc.quiet = true;
        cc.progress = 0;
        cc.exact_match = false;
        cc.memory_log_steps = 0;
    }
    const lp_train_config *c = &cc;
    run R = {.c = c, .em_before = -1, .lead = lead};
    R.dp.rank = lp_dist_rank();
    R.dp.world = lp_dist_world_size();
    memset(res, 0, sizeof *res);
    res->eval_loss = res->eval_accuracy = res->eval_macro_f1 = res->eval_perplexity = NAN;
    char resumed[1024] = "";
    lp_ckpt_state cs = {0};
    bool prof_started = false;
    lp_runlock lock = {.fd = -1};
    /* every rank sets up alike; one that fails stops them all here, before any other collective */
    lp_status st = lp_dp_agree(&R.dp, setup(&R, c, resumed, sizeof resumed, &cs));
    if (st != LP_OK)
        goto done;
    if ((st = lp_dp_check_weights(&R.dp, R.model)) != LP_OK)
        goto done;

    /* inputs are good: the run directory appears now (rank 0's; the others learn its path) */
    if (lead)
        st = open_run_dir(&R, res, &lock, resumed);
    if ((st = lp_dp_agree(&R.dp, st)) != LP_OK)
        goto done;
    if ((st = lp_dist_broadcast(R.run_dir, sizeof R.run_dir, 0)) != LP_OK ||
        (st = lp_dist_broadcast(R.run_id, sizeof R.run_id, 0)) != LP_OK)
        goto done;
    snprintf(res->run_dir, sizeof res->run_dir, "%s", R.run_dir);
    if ((st = lp_dp_write_info(&R.dp, &R.opt, R.model, c, R.run_dir)) != LP_OK)
        goto done;
    char p[1200];

    /* machine peak for MFU: given, or measured with the run's thread count. The probe keeps
     * the best of many short runs, so a busy machine reads low: 0.25 s per figure gives it
     * a few chances at an uncontended slice (--peak-gflops avoids the guess). */
    double peak = c->peak_gflops;
    const char *peak_src = "--peak-gflops";
    if (peak <= 0 && lead) {
        peak_src = "lp_peak_fma_gflops";
        peak = lp_peak_fma_gflops(0.25);
    }

    if (cs.step == 0 && (st = exact_match(&R, false)) != LP_OK)
        goto done;

    if (c->profile) {
        lp_prof_config pc;
        lp_prof_config_init(&pc);
        snprintf(p, sizeof p, "%s/profiler", R.run_dir);
        pc.out_dir = p;
        pc.use_gzip = 1;
        pc.record_shapes = c->record_shapes;
        pc.profile_memory = 1;
        pc.with_flops = 1;
        pc.with_stack = c->with_stack;
        pc.use_schedule = 1;
        pc.schedule = c->prof_schedule;
        pc.exports = LP_PROF_EXPORT_KEYAVG | LP_PROF_EXPORT_SUMMARY | (c->export_trace ? LP_PROF_EXPORT_TRACE : 0) |
                     (c->export_memory_timeline ? LP_PROF_EXPORT_MEMORY : 0) |
                     (c->with_stack ? LP_PROF_EXPORT_STACKS : 0);
        pc.on_trace_ready = lp_train_on_trace_ready;
        pc.user = &R.pf;
        char worker[32];
        if (R.dp.world > 1) { /* rankN.<ns>.pt.trace.json.gz side by side in one folder */
            snprintf(worker, sizeof worker, "rank%d", (int)R.dp.rank);
            pc.worker_name = worker;
        }
        if (!lead) { /* its trace alone: the tables and summary are rank 0's */
            pc.exports = c->export_trace ? LP_PROF_EXPORT_TRACE : 0;
            pc.on_trace_ready = NULL;
            pc.user = NULL;
        }
        lp_prof_set_distributed(lp_dist_backend(), R.dp.rank, R.dp.world);
        lp_prof_set_thread_name("main");
        /* on the GPU the kernels, copies and runtime calls join the trace (CUPTI), linked to
         * their ops by correlation id as PyTorch's traces are; a trace without them still helps */
        if (c->device == LP_DEVICE_CUDA && lp_prof_cupti_attach() != LP_OK)
            fprintf(stderr, "loupe: the trace will hold no GPU activity: %s\n", lp_err_msg());
        if ((st = lp_prof_start(&pc)) != LP_OK)
            goto done;
        prof_started = true;
    }

    lp_data_pos pos = cs.pos;
    int64_t step = cs.step;
    lp_progress pg;
    lp_progress_init(&pg, c, R.total, step);
    R.t_start = lp_train_now_s();
    lp_contention_init(&R.busy, lp_threads_get());
    const char *stop_reason = NULL;
    char step_msg[1024] = "";
    bool order_ready = false;
    lp_status step_st = LP_OK;
    while (step < R.total) {
        if (pos.batch >= R.n_batches) { /* resumed exactly at an epoch boundary */
            pos.epoch++;
            pos.batch = 0;
            order_ready = false;
        }
        if (!order_ready) {
            if ((st = lp_epoch_order(R.d.etrain.n, c->seed, pos.epoch, 1, R.order)) != LP_OK)
                break;
            order_ready = true;
        }
        lp_step_rec rec;
        double cpu0 = lp_cpu_time_s();
        if ((step_st = train_step(&R, &pos, step + 1, &rec)) != LP_OK) {
            snprintf(step_msg, sizeof step_msg, "%s", lp_err_msg());
            break;
        }
        step++;
        if (c->device == LP_DEVICE_CPU &&
            lp_contention_add(&R.busy, rec.step_ms / 1e3, lp_cpu_time_s() - cpu0) && lead) {
            char note[512];
            lp_progress_end(&pg);
            fprintf(stderr, "loupe train: step %lld: %s\n", (long long)step,
                    lp_contention_note(&R.busy, note, sizeof note));
        }
        if ((st = lp_history_add_step(&R.h, &rec)) != LP_OK)
            break;
        double wt = (double)time(NULL);
        if (R.tb && ((st = lp_tb_writer_scalar(R.tb, "train/loss", step, (float)rec.loss, wt)) != LP_OK ||
            (st = lp_tb_writer_scalar(R.tb, "train/lr", step, (float)rec.lr, wt)) != LP_OK ||
            (st = lp_tb_writer_scalar(R.tb, "train/grad_norm", step, (float)rec.grad_norm, wt)) != LP_OK ||
            (st = lp_tb_writer_scalar(R.tb, "train/samples_per_s", step,
                                      (float)(rec.step_ms > 0 ? rec.samples * 1e3 / rec.step_ms : 0), wt)) != LP_OK))
            break;
        lp_progress_step(&pg, &rec);
        if (c->memory_log_steps > 0 && step % c->memory_log_steps == 0 && !c->quiet) {
            lp_progress_end(&pg);
            fprintf(stderr, "memory at step %lld: %.1f MiB accounted (peak %.1f MiB), RSS %.1f MiB\n", (long long)step,
                    rec.mem_bytes / 1048576.0, rec.mem_peak_bytes / 1048576.0, rec.rss_bytes / 1048576.0);
        }
        if (prof_started && (st = lp_prof_step()) != LP_OK)
            break;
        if (pos.batch >= R.n_batches) {
            if ((st = finish_epoch(&R, pos.epoch, true, true)) != LP_OK)
                break;
            pos.epoch++;
            pos.batch = 0;
            order_ready = false;
            if (c->max_steps <= 0 && pos.epoch >= c->epochs)
                break;
        }
        bool stop = lp_train_stop_requested();
        if (R.dp.world > 1) { /* a signal reaches the ranks at different steps: stop together */
            double any = stop;
            if ((st = lp_dist_allreduce_max_f64(&any, 1)) != LP_OK)
                break;
            stop = any > 0;
        }
        if ((c->checkpoint_every > 0 && step % c->checkpoint_every == 0 && step < R.total) || stop) {
            lp_ckpt_state now = {.step = step, .pos = pos, .elapsed_s = R.elapsed0 + lp_train_now_s() - R.t_start};
            lp_model_rng_get(R.model, &now.dropout_rng);
            if ((st = lp_dp_gather_optim(&R.dp, &R.opt, R.model)) == LP_OK && lead &&
                (st = lp_model_host_params(R.model, true)) == LP_OK) { /* a GPU's weights, downloaded */
                st = lp_ckpt_save(R.run_dir, c, R.model, &R.opt, &now, &R.h);
                lp_status hs = lp_model_host_params(R.model, false);
                st = st != LP_OK ? st : hs;
            }
            lp_dp_release_optim(&R.dp, &R.opt);
            if (st != LP_OK)
                break;
        }
        if (stop) {
            res->interrupted = true;
            stop_reason = "interrupted (SIGINT)";
            break;
        }
    }
    lp_progress_end(&pg);
    if (prof_started) {
        lp_status ps = lp_prof_stop();
        prof_started = false;
        if (st == LP_OK && step_st == LP_OK)
            st = ps;
    }
    if (st != LP_OK || step_st != LP_OK)
        res->abort_job = R.dp.world > 1; /* the other ranks may wait in this step's collectives */
    if (st != LP_OK)
        goto done;
    if (step_st == LP_OK && !res->interrupted && (st = lp_dp_gather_optim(&R.dp, &R.opt, R.model)) != LP_OK) {
        res->abort_job = R.dp.world > 1; /* for the final checkpoint: every rank takes part */
        goto done;
    }
    if (!lead) { /* the run's files are rank 0's */
        res->steps = step;
        res->final_loss = R.h.n_steps ? R.h.steps[R.h.n_steps - 1].loss : NAN;
        st = step_st != LP_OK ? lp_err(step_st, "%s", step_msg)
             : res->interrupted ? lp_err(LP_STATUS_INTERRUPTED, "interrupted at step %lld", (long long)step)
                                : LP_OK;
        goto done;
    }
    if (step_st == LP_OK && !res->interrupted) {
        /* final checkpoint before a partial epoch's record, so a resume continues the epoch */
        lp_ckpt_state now = {.step = step, .pos = pos, .elapsed_s = R.elapsed0 + lp_train_now_s() - R.t_start};
        lp_model_rng_get(R.model, &now.dropout_rng);
        if ((st = lp_model_host_params(R.model, true)) == LP_OK) { /* a GPU's weights, downloaded */
            st = lp_ckpt_save(R.run_dir, c, R.model, &R.opt, &now, &R.h);
            lp_status hs = lp_model_host_params(R.model, false);
            st = st != LP_OK ? st : hs;
        }
        lp_dp_release_optim(&R.dp, &R.opt);
        if (st != LP_OK)
            goto done;
        if (pos.batch > 0 && (st = finish_epoch(&R, pos.epoch, false, true)) != LP_OK)
            goto done;
        /* the saves read the host copy of a GPU's weights (no pass follows them) */
        if ((st = lp_model_host_params(R.model, true)) != LP_OK)
            goto done;
        if (c->save_model && *c->save_model && (st = lp_model_save_hf(R.model, c->save_model)) != LP_OK)
            goto done;
        if (c->save_adapter && *c->save_adapter && (st = lp_model_save_adapter(R.model, c->save_adapter)) != LP_OK)
            goto done;
        if (c->merge_dir && *c->merge_dir && (st = lp_model_save_hf(R.model, c->merge_dir)) != LP_OK)
            goto done; // a LoRA model saves merged (merge_and_unload)
    }
    if (step_st != LP_OK) {
        res->steps = step;
        lp_status ws = write_run_files(&R, false, step_msg, peak, peak_src);
        st = ws != LP_OK ? ws : lp_err(step_st, "%s", step_msg);
        goto done;
    }
    if (!res->interrupted && (st = exact_match(&R, true)) != LP_OK)
        goto done;
    if ((st = write_run_files(&R, res->interrupted, stop_reason, peak, peak_src)) != LP_OK)
        goto done;
    res->steps = step;
    res->final_loss = R.h.n_steps ? R.h.steps[R.h.n_steps - 1].loss : NAN;
    if ((st = trainer_metrics(&R, res)) != LP_OK)
        goto done;
    res->task = R.task;
    for (size_t i = 0; i < R.h.n_epochs; i++)
        if (!isnan(R.h.epochs[i].eval_loss)) {
            res->eval_loss = R.h.epochs[i].eval_loss;
            res->eval_accuracy = R.h.epochs[i].eval_accuracy;
            res->eval_macro_f1 = R.h.epochs[i].eval_f1;
            res->eval_perplexity = R.h.epochs[i].eval_perplexity;
        }
    if (res->interrupted)
        st = lp_err(LP_STATUS_INTERRUPTED, "interrupted at step %lld; checkpoint in %s/checkpoints", (long long)step,
                    R.run_dir);
done:
    if (prof_started && lp_prof_stop() != LP_OK && st == LP_OK)
        st = LP_STATUS_IO;
    if (R.tb) {
        lp_status ts = lp_tb_writer_close(R.tb);
        if (st == LP_OK)
            st = ts;
    }
    lp_dp_free(&R.dp);
    free(R.order);
    free(R.logits);
    lp_batch_free(&R.batch);
    lp_optim_free(&R.opt);
    lp_history_free(&R.h);
    lp_train_data_free(&R.d);
    lp_model_free(R.model);
    lp_runlock_release(&lock);
    return st;
}
