/* Trainer defaults (the bundled model and dataset, HF Trainer-like hyperparameters) and the
 * growable step/epoch history. */
#include <stdlib.h>

#include "train_internal.h"

void lp_train_config_init(lp_train_config *c)
{
    *c = (lp_train_config){0};
    c->model_dir = "models/default";
    c->train_file = "data/sst2-mini/train.tsv";
    c->eval_file = "data/sst2-mini/dev.tsv";
    c->method = LP_TRAIN_METHOD_FULL;
    c->epochs = 2;
    c->batch_size = 16;
    c->grad_accum = 1;
    c->max_seq_len = 128;
    c->train_on_responses = -1;
    c->exact_match = true;
    c->lr = 5e-4;
    c->schedule = LP_LR_SCHEDULE_LINEAR;
    c->warmup_ratio = 0.1;
    c->warmup_steps = -1;
    c->weight_decay = 0.01;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->adam_eps = 1e-8;
    c->max_grad_norm = 1.0;
    c->seed = 42;
    c->exec = LP_EXEC_MODE_FUSED;
    c->keep_checkpoints = 2;
    c->bucket_mb = 25.0;
    c->zero = -1; /* ZeRO-1 for full fine-tuning on more than one rank */
    c->output_dir = "reports";
    c->progress = -1;
    c->log_every = 10;
    c->prof_schedule = (lp_prof_schedule){.wait = 1, .warmup = 1, .active = 3, .repeat = 1};
    c->export_trace = true;
    c->lora_rank = 8;
    c->lora_alpha = 16.0;
}

lp_status lp_history_add_step(lp_history *h, const lp_step_rec *r)
{
    if (h->n_steps == h->cap_steps) {
        size_t nc = h->cap_steps ? h->cap_steps * 2 : 256;
        lp_step_rec *ns = realloc(h->steps, nc * sizeof *ns);
        if (!ns)
            return lp_err(LP_STATUS_NO_MEMORY, "step history: out of memory");
        h->steps = ns;
        h->cap_steps = nc;
    }
    h->steps[h->n_steps++] = *r;
    return LP_OK;
}

lp_status lp_history_add_epoch(lp_history *h, const lp_epoch_rec *r)
{
    if (h->n_epochs == h->cap_epochs) {
        size_t nc = h->cap_epochs ? h->cap_epochs * 2 : 16;
        lp_epoch_rec *ne = realloc(h->epochs, nc * sizeof *ne);
        if (!ne)
            return lp_err(LP_STATUS_NO_MEMORY, "epoch history: out of memory");
        h->epochs = ne;
        h->cap_epochs = nc;
    }
    h->epochs[h->n_epochs++] = *r;
    return LP_OK;
}

void lp_history_free(lp_history *h)
{
    free(h->steps);
    free(h->epochs);
    *h = (lp_history){0};
}
