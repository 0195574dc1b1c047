/* Run-directory files: config.json (every resolved setting plus machine, threads, library
 * versions), steps.csv and epoch_results.csv, and their readers (a resumed run starts from
 * the checkpoint's history). Every file is written atomically. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "loupe/kernels.h"
#include "train_internal.h"

char *openblas_get_config(void);

static const char steps_header[] =
    "step,epoch,loss,lr,grad_norm,step_ms,data_ms,forward_ms,backward_ms,optimizer_ms,samples,tokens,"
    "memory_bytes,memory_peak_bytes,rss_bytes,wall_s\n";
/* eval_perplexity (causal LMs) came last so older files still read (epochs_header_v1); a
 * value that does not apply (no eval, or accuracy of a causal LM) is an empty field */
static const char epochs_header[] = "epoch,steps,train_loss,eval_loss,eval_accuracy,eval_macro_f1,time_s,"
                                    "samples_per_s,tokens_per_s,peak_memory_bytes,complete,eval_perplexity\n";
static const char epochs_header_v1[] = "epoch,steps,train_loss,eval_loss,eval_accuracy,eval_macro_f1,time_s,"
                                       "samples_per_s,tokens_per_s,peak_memory_bytes,complete\n";

/* %.17g, or nothing for NaN (absent, not 0) */
static const char *opt_num(char *buf, size_t cap, double v)
{
    if (isnan(v))
        buf[0] = 0;
    else
        snprintf(buf, cap, "%.17g", v);
    return buf;
}

lp_status lp_rundir_write_steps(const char *path, const lp_history *h)
{
    lp_atomic_file f;
    lp_status st = lp_atomic_open(&f, path);
    if (st != LP_OK)
        return st;
    fputs(steps_header, f.fp);
    for (size_t i = 0; i < h->n_steps; i++) {
        const lp_step_rec *r = &h->steps[i];
        /* %.17g: a resumed run reads these back and must continue bit for bit */
        fprintf(f.fp, "%lld,%lld,%.17g,%.17g,%.17g,%.4f,%.4f,%.4f,%.4f,%.4f,%lld,%lld,%lld,%lld,%lld,%.4f\n",
                (long long)r->step, (long long)r->epoch, r->loss, r->lr, r->grad_norm, r->step_ms, r->data_ms,
                r->fwd_ms, r->bwd_ms, r->opt_ms, (long long)r->samples, (long long)r->tokens, (long long)r->mem_bytes,
                (long long)r->mem_peak_bytes, (long long)r->rss_bytes, r->wall_s);
    }
    return lp_atomic_commit(&f);
}

lp_status lp_rundir_write_epochs(const char *path, const lp_history *h)
{
    lp_atomic_file f;
    lp_status st = lp_atomic_open(&f, path);
    if (st != LP_OK)
        return st;
    fputs(epochs_header, f.fp);
    for (size_t i = 0; i < h->n_epochs; i++) {
        const lp_epoch_rec *r = &h->epochs[i];
        char b[4][40];
        fprintf(f.fp, "%lld,%lld,%.17g,%s,%s,%s,%.4f,%.3f,%.3f,%lld,%d,%s\n", (long long)r->epoch + 1,
                (long long)r->steps, r->train_loss, opt_num(b[0], 40, r->eval_loss),
                opt_num(b[1], 40, r->eval_accuracy), opt_num(b[2], 40, r->eval_f1), r->time_s, r->samples_per_s,
                r->tokens_per_s, (long long)r->peak_mem_bytes, r->complete ? 1 : 0,
                opt_num(b[3], 40, r->eval_perplexity));
    }
    return lp_atomic_commit(&f);
}

/* Splits a line on commas into at most max fields (in place). */
static int split(char *line, char **fields, int max)
{
    int n = 0;
    char *s = line;
    while (n < max) {
        fields[n++] = s;
        char *c = strchr(s, ',');
        if (!c)
            break;
        *c = 0;
        s = c + 1;
    }
    return n;
}

typedef lp_status (*row_fn)(lp_history *h, char **f, int n, const char *path, int line);

/* header_v1 (or NULL): an older header with cols_v1 columns, also accepted */
static lp_status read_csv(const char *path, const char *header, int cols, const char *header_v1, int cols_v1,
                          row_fn fn, lp_history *h)
{
    char *text;
    size_t len;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st != LP_OK)
        return st;
    size_t hl = strlen(header);
    if (header_v1 && !(len >= hl && !memcmp(text, header, hl)) && len >= strlen(header_v1) &&
        !memcmp(text, header_v1, strlen(header_v1))) {
        header = header_v1;
        hl = strlen(header);
        cols = cols_v1;
    }
    if (len < hl || memcmp(text, header, hl)) {
        free(text);
        return lp_err(LP_STATUS_FORMAT, "%s: unexpected header", path);
    }
    char *s = text + hl, *end = text + len;
    int line = 1;
    while (s < end && st == LP_OK) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl)
            nl = end;
        *nl = 0;
        line++;
        char *f[32];
        int n = split(s, f, 32);
        st = n == cols ? fn(h, f, n, path, line) : lp_err(LP_STATUS_FORMAT, "%s:%d: %d fields, %d expected", path, line, n, cols);
        s = nl + 1;
    }
    free(text);
    return st;
}

static int num(const char *s, double *out)
{
    char *e;
    *out = strtod(s, &e);
    return e != s && *e == 0;
}

static lp_status step_row(lp_history *h, char **f, int n, const char *path, int line)
{
    double v[16];
    for (int i = 0; i < n; i++)
        if (!num(f[i], &v[i]))
            return lp_err(LP_STATUS_FORMAT, "%s:%d: field %d is not a number", path, line, i + 1);
    lp_step_rec r = {.step = (int64_t)v[0], .epoch = (int64_t)v[1], .loss = v[2], .lr = v[3], .grad_norm = v[4],
                     .step_ms = v[5], .data_ms = v[6], .fwd_ms = v[7], .bwd_ms = v[8], .opt_ms = v[9],
                     .samples = (int64_t)v[10], .tokens = (int64_t)v[11], .mem_bytes = (int64_t)v[12],
                     .mem_peak_bytes = (int64_t)v[13], .rss_bytes = (int64_t)v[14], .wall_s = v[15]};
    return lp_history_add_step(h, &r);
}

static lp_status epoch_row(lp_history *h, char **f, int n, const char *path, int line)
{
    double v[12] = {[11] = NAN};
    for (int i = 0; i < n; i++)
        if (i >= 3 && i <= 5 && !f[i][0]) /* an eval value that does not apply */
            v[i] = NAN;
        else if (i == 11 && !f[i][0])
            v[i] = NAN;
        else if (!num(f[i], &v[i]))
            return lp_err(LP_STATUS_FORMAT, "%s:%d: field %d is not a number", path, line, i + 1);
    lp_epoch_rec r = {.epoch = (int64_t)v[0] - 1, .steps = (int64_t)v[1], .train_loss = v[2], .eval_loss = v[3],
                      .eval_accuracy = v[4], .eval_f1 = v[5], .time_s = v[6], .samples_per_s = v[7],
                      .tokens_per_s = v[8], .peak_mem_bytes = (int64_t)v[9], .complete = v[10] != 0,
                      .eval_perplexity = v[11]};
    return lp_history_add_epoch(h, &r);
}

lp_status lp_rundir_read_steps(const char *path, lp_history *h)
{
    return read_csv(path, steps_header, 16, NULL, 0, step_row, h);
}

lp_status lp_rundir_read_epochs(const char *path, lp_history *h)
{
    return read_csv(path, epochs_header, 12, epochs_header_v1, 11, epoch_row, h);
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ')
                    c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, cap, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

lp_status lp_rundir_write_config(const char *run_dir, const lp_train_config *c, const lp_model *model,
                                 const lp_train_data *d, int64_t total_steps, int64_t warmup_steps,
                                 const char *resumed_from)
{
    cJSON *j = cJSON_CreateObject(), *t = cJSON_CreateObject(), *m = cJSON_CreateObject(),
          *p = cJSON_CreateObject(), *lib = cJSON_CreateObject(), *ds = cJSON_CreateObject(),
          *lora = cJSON_CreateObject();
    char b[512];
    add_str(j, "loupe_version", c->loupe_version ? c->loupe_version : "unknown");
    add_str(j, "config_file", c->config_file);
    add_str(j, "resumed_from", resumed_from);
    add_str(t, "method", lp_train_method_name(c->method));
    add_str(t, "model", c->model_dir);
    add_str(t, "train", c->train_file);
    add_str(t, "eval", c->eval_split > 0 ? NULL : c->eval_file && *c->eval_file ? c->eval_file : NULL);
    cJSON_AddNumberToObject(t, "eval_split", c->eval_split);
    cJSON_AddBoolToObject(t, "skip_bad_rows", c->skip_bad_rows);
    add_str(t, "text_column", c->text_column);
    add_str(t, "text_pair_column", c->text_pair_column);
    add_str(t, "label_column", c->label_column);
    cJSON_AddNumberToObject(t, "epochs", (double)c->epochs);
    cJSON_AddNumberToObject(t, "max_steps", (double)c->max_steps);
    cJSON_AddNumberToObject(t, "total_steps", (double)total_steps);
    cJSON_AddNumberToObject(t, "batch_size", c->batch_size);
    cJSON_AddNumberToObject(t, "grad_accum", c->grad_accum);
    cJSON_AddNumberToObject(t, "effective_batch_size", (double)c->batch_size * c->grad_accum);
    cJSON_AddNumberToObject(t, "max_seq_len", c->max_seq_len);
    cJSON_AddNumberToObject(t, "lr", c->lr);
    add_str(t, "lr_schedule", lp_lr_schedule_name(c->schedule));
    cJSON_AddNumberToObject(t, "warmup_ratio", c->warmup_ratio);
    cJSON_AddNumberToObject(t, "warmup_steps", (double)warmup_steps);
    cJSON_AddNumberToObject(t, "weight_decay", c->weight_decay);
    cJSON_AddNumberToObject(t, "adam_beta1", c->beta1);
    cJSON_AddNumberToObject(t, "adam_beta2", c->beta2);
    cJSON_AddNumberToObject(t, "adam_epsilon", c->adam_eps);
    cJSON_AddNumberToObject(t, "max_grad_norm", c->max_grad_norm);
    snprintf(b, sizeof b, "%" PRIu64, c->seed);
    cJSON_AddRawToObject(t, "seed", b);
    add_str(t, "exec", lp_exec_mode_name(c->exec));
    cJSON_AddBoolToObject(t, "gradient_checkpointing", c->grad_checkpointing);
    cJSON_AddNumberToObject(t, "checkpoint_every", (double)c->checkpoint_every);
    cJSON_AddNumberToObject(t, "keep_checkpoints", c->keep_checkpoints);
    add_str(t, "resume", c->resume);
    add_str(t, "save_model", c->save_model);
    add_str(t, "output_dir", c->output_dir);
    cJSON_AddNumberToObject(lora, "rank", c->lora_rank);
    cJSON_AddNumberToObject(lora, "alpha", c->lora_alpha);
    add_str(lora, "targets", c->lora_targets);
    cJSON_AddNumberToObject(lora, "dropout", c->lora_dropout);
    cJSON_AddBoolToObject(lora, "rslora", c->lora_rslora);
    add_str(lora, "base_dtype", lp_dtype_name(c->base_dtype));
    add_str(t, "dtype", lp_dtype_name(c->dtype));
    add_str(lora, "adapter", c->adapter);
    add_str(lora, "save_adapter", c->save_adapter);
    add_str(lora, "merge", c->merge_dir);
    cJSON_AddItemToObject(t, "lora", lora);
    cJSON_AddItemToObject(j, "training", t);

    cJSON_AddBoolToObject(p, "enabled", c->profile);
    cJSON_AddNumberToObject(p, "wait", (double)c->prof_schedule.wait);
    cJSON_AddNumberToObject(p, "warmup", (double)c->prof_schedule.warmup);
    cJSON_AddNumberToObject(p, "active", (double)c->prof_schedule.active);
    cJSON_AddNumberToObject(p, "repeat", (double)c->prof_schedule.repeat);
    cJSON_AddNumberToObject(p, "memory_log_steps", (double)c->memory_log_steps);
    cJSON_AddBoolToObject(p, "export_trace", c->export_trace);
    cJSON_AddBoolToObject(p, "export_memory_timeline", c->export_memory_timeline);
    cJSON_AddBoolToObject(p, "with_stack", c->with_stack);
    cJSON_AddBoolToObject(p, "record_shapes", c->record_shapes);
    cJSON_AddItemToObject(j, "profiler", p);

    lp_model_info mi;
    lp_model_info_get(model, &mi);
    add_str(m, "dir", c->model_dir);
    add_str(m, "architecture", lp_hf_arch_name(mi.arch));
    add_str(m, "task", lp_train_task_name(mi.task));
    cJSON_AddNumberToObject(m, "num_layers", (double)mi.num_layers);
    cJSON_AddNumberToObject(m, "hidden_size", (double)mi.hidden_size);
    cJSON_AddNumberToObject(m, "num_heads", (double)mi.num_heads);
    cJSON_AddNumberToObject(m, "intermediate_size", (double)mi.intermediate_size);
    cJSON_AddNumberToObject(m, "vocab_size", (double)mi.vocab_size);
    cJSON_AddNumberToObject(m, "num_labels", (double)mi.num_labels);
    cJSON_AddNumberToObject(m, "params_total", (double)mi.n_params);
    cJSON_AddNumberToObject(m, "params_trainable", (double)mi.n_trainable);
    cJSON_AddNumberToObject(m, "tensors_initialized", (double)mi.n_initialized);
    cJSON_AddItemToObject(j, "model", m);

    cJSON_AddNumberToObject(ds, "train_rows", (double)d->train.n);
    cJSON_AddNumberToObject(ds, "train_rows_skipped", (double)d->train.n_skipped);
    cJSON_AddNumberToObject(ds, "eval_rows", d->has_eval ? (double)d->eval.n : 0.0);
    cJSON_AddNumberToObject(ds, "num_labels", d->num_labels);
    if (d->sft) { // instruction data: how it was read, masked, packed and cut
        cJSON_AddStringToObject(ds, "data_format", lp_sft_format_name(d->strain.format));
        cJSON_AddBoolToObject(ds, "train_on_responses", d->sft_responses);
        cJSON_AddBoolToObject(ds, "packing", c->packing);
        cJSON_AddNumberToObject(ds, "train_sequences", (double)d->etrain.n);
        cJSON_AddNumberToObject(ds, "train_samples_truncated", (double)d->etrain.n_truncated);
        cJSON_AddNumberToObject(ds, "train_tokens_dropped", (double)d->etrain.n_dropped_tokens);
        cJSON_AddNumberToObject(ds, "train_samples_skipped", (double)d->etrain.n_skipped);
        cJSON_AddNumberToObject(ds, "exact_match_rows", (double)d->em_n);
    }
    lp_length_stats ls;
    if (lp_encoded_length_stats(&d->etrain, &ls) == LP_OK) {
        cJSON_AddNumberToObject(ds, "train_tokens", (double)ls.total_tokens);
        cJSON_AddNumberToObject(ds, "train_len_mean", ls.mean);
        cJSON_AddNumberToObject(ds, "train_len_p90", ls.p90);
        cJSON_AddNumberToObject(ds, "train_len_max", ls.max);
        cJSON_AddNumberToObject(ds, "train_truncated", (double)ls.n_truncated);
    }
    cJSON_AddItemToObject(j, "data", ds);

    cJSON *mach = cJSON_CreateObject();
    struct utsname u;
    if (uname(&u) == 0) {
        add_str(mach, "hostname", u.nodename);
        snprintf(b, sizeof b, "%s %s %s", u.sysname, u.release, u.machine);
        add_str(mach, "os", b);
    }
    cpu_model(b, sizeof b);
    add_str(mach, "cpu", b);
    cJSON_AddNumberToObject(mach, "cores", (double)lp_threads_cores());
    cJSON_AddNumberToObject(mach, "threads", (double)lp_threads_get());
    add_str(mach, "blas_threading", lp_threads_blas_mode());
    add_str(mach, "blas_core", lp_threads_blas_core());
    add_str(mach, "isa", lp_isa_name(lp_kernels_isa())); /* the level the kernels ran at */
    add_str(mach, "isa_detected", lp_isa_name(lp_isa_detect()));
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    cJSON_AddNumberToObject(mach, "memory_bytes", pages > 0 && psz > 0 ? (double)pages * (double)psz : 0.0);
    cJSON_AddItemToObject(j, "machine", mach);

    add_str(lib, "openblas", openblas_get_config());
    add_str(lib, "cjson", cJSON_Version());
    add_str(lib, "zlib", zlibVersion());
    add_str(lib, "compiler", __VERSION__);
    cJSON_AddItemToObject(j, "libraries", lib);

    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", run_dir);
    return lp_json_write_file(path, j);
}
