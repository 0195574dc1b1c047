/* libFuzzer target: the YAML config of loupe train / profile (--config FILE) over arbitrary
 * bytes. An accepted file leaves every option within the range its flag accepts and every
 * string it set owned by the pool; a refused one says why on stderr. Nothing leaks. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_train.h" /* src/cli, compiled into this target (fuzz/CMakeLists.txt) */

/* s is a default's literal (def) or one of the pool's strings */
static void owned(const char *s, const char *def, const lp_cli_strpool *pool, bool may_be_null)
{
    if (!s) {
        if (!may_be_null)
            abort();
        return;
    }
    if (s == def)
        return;
    for (size_t i = 0; i < pool->n; i++)
        if (s == pool->s[i])
            return;
    abort();
}

#define IN(v, lo, hi)                                                                                                  \
    do {                                                                                                               \
        if (!((v) >= (lo) && (v) <= (hi)))                                                                             \
            abort();                                                                                                   \
    } while (0)

static void check(const lp_train_config *c, const lp_train_config *d, const lp_cli_strpool *pool)
{
    owned(c->model_dir, d->model_dir, pool, false);
    owned(c->train_file, d->train_file, pool, false);
    owned(c->eval_file, d->eval_file, pool, true); // "none" clears it
    owned(c->text_column, NULL, pool, true);
    owned(c->text_pair_column, NULL, pool, true);
    owned(c->label_column, NULL, pool, true);
    owned(c->lora_targets, NULL, pool, true);
    owned(c->adapter, NULL, pool, true);
    owned(c->save_adapter, NULL, pool, true);
    owned(c->merge_dir, NULL, pool, true);
    owned(c->resume, NULL, pool, true);
    owned(c->save_model, NULL, pool, true);
    owned(c->output_dir, d->output_dir, pool, false);
    owned(c->run_id, NULL, pool, true);
    if (c->config_file != d->config_file) // the config cannot name another config
        abort();
    if (c->run_id && (!*c->run_id || strchr(c->run_id, '/') || !strcmp(c->run_id, ".") || !strcmp(c->run_id, "..")))
        abort();
    if (c->eval_split != 0.0 && !(c->eval_split > 0.0 && c->eval_split < 1.0))
        abort();
    IN((int)c->method, LP_TRAIN_METHOD_FULL, LP_TRAIN_METHOD_QLORA);
    IN((int)c->schedule, LP_LR_SCHEDULE_LINEAR, LP_LR_SCHEDULE_CONSTANT);
    IN((int)c->exec, LP_EXEC_MODE_EAGER, LP_EXEC_MODE_FUSED);
    if (c->base_dtype != LP_DTYPE_F32 && c->base_dtype != LP_DTYPE_INT8 && c->base_dtype != LP_DTYPE_NF4)
        abort();
    IN(c->epochs, 1, 1000000);
    IN(c->max_steps, 0, 1000000000);
    IN(c->batch_size, 1, 65536);
    IN(c->grad_accum, 1, 65536);
    IN(c->max_seq_len, 2, 1 << 20);
    IN(c->lr, 0.0, INFINITY);
    IN(c->warmup_ratio, 0.0, 1.0);
    IN(c->warmup_steps, -1, 1000000000);
    IN(c->weight_decay, 0.0, INFINITY);
    IN(c->max_grad_norm, 0.0, INFINITY);
    if (!isfinite(c->lr) || !isfinite(c->weight_decay) || !isfinite(c->max_grad_norm) || !isfinite(c->lora_alpha) ||
        !isfinite(c->peak_gflops))
        abort();
    if (c->beta1 != d->beta1 || c->beta2 != d->beta2 || c->adam_eps != d->adam_eps) // no key sets them
        abort();
    IN(c->threads, 0, 4096);
    IN(c->checkpoint_every, 0, 1000000000);
    IN(c->keep_checkpoints, 0, 1000000);
    IN(c->progress, -1, 1);
    IN(c->log_every, 1, 1000000);
    IN(c->prof_schedule.wait, 0, 1000000);
    IN(c->prof_schedule.warmup, 0, 1000000);
    IN(c->prof_schedule.active, 1, 1000000);
    IN(c->prof_schedule.repeat, 0, 1000000);
    IN(c->memory_log_steps, 0, 1000000000);
    IN(c->lora_rank, 1, 4096);
    IN(c->lora_alpha, 0.0, INFINITY);
    IN(c->lora_dropout, 0.0f, nextafterf(1.0f, 0.0f));
    IN(c->peak_gflops, 0.0, INFINITY);
    IN(c->inject_nan_step, 0, 1000000000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_train_config c, d;
    lp_train_config_init(&c);
    lp_train_config_init(&d);
    lp_cli_strpool pool = {0};
    // the messages go to stderr: catch them (glibc's stderr is an assignable variable)
    char *msg = NULL;
    size_t msg_len = 0;
    FILE *mem = open_memstream(&msg, &msg_len);
    if (!mem)
        return 0;
    FILE *saved = stderr;
    stderr = mem;
    int rc = lp_cli_train_yaml("train", "fuzz.yaml", (const char *)data, size, &c, &pool);
    stderr = saved;
    fclose(mem);
    if (rc == 0) {
        if (msg_len != 0) // a clean file says nothing
            abort();
        check(&c, &d, &pool);
    } else if ((rc != 1 && rc != 2) || msg_len == 0 || !strstr(msg, "loupe train: ")) {
        abort();
    }
    free(msg);
    lp_cli_strpool_free(&pool);
    return 0;
}
