/* AdamW state: one first- and second-moment buffer per trainable parameter (or, sharded for
 * ZeRO-1, per parameter this rank owns), allocated as OPTIMIZER_STATE so the memory breakdown
 * shows it, and the step that applies torch.optim.AdamW (weight decay skipped on biases and
 * LayerNorm, as HF Trainer). */
#include <stdlib.h>

#include "train_internal.h"

lp_status lp_optim_init(lp_optim *o, const lp_model *model) { return lp_optim_init_sharded(o, model, 0, 1); }

lp_status lp_optim_init_sharded(lp_optim *o, const lp_model *model, int32_t rank, int32_t world)
{
    size_t n;
    const lp_model_param *p = lp_model_params(model, &n);
    *o = (lp_optim){.n = n, .dev = lp_model_on_device(model)}; /* the state lives beside the weights */
    o->m = calloc(n ? n : 1, sizeof *o->m);
    o->v = calloc(n ? n : 1, sizeof *o->v);
    if (world > 1)
        o->owner = calloc(n ? n : 1, sizeof *o->owner);
    if (!o->m || !o->v || (world > 1 && !o->owner)) {
        lp_optim_free(o);
        return lp_err(LP_STATUS_NO_MEMORY, "optimizer state: out of memory");
    }
    if (world > 1) { /* parameter i goes to the rank whose equal share holds its first float */
        int64_t total = 0, before = 0;
        for (size_t i = 0; i < n; i++)
            total += p[i].trainable ? p[i].numel : 0;
        for (size_t i = 0; i < n; i++) {
            o->owner[i] = p[i].trainable ? (int32_t)(before * world / (total ? total : 1)) : -1;
            before += p[i].trainable ? p[i].numel : 0;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!p[i].trainable || (o->owner && o->owner[i] != rank))
            continue;
        size_t bytes = (size_t)p[i].numel * sizeof(float);
        o->m[i] = o->dev ? lp_kernels_dev_alloc(bytes, LP_MEM_CATEGORY_OPTIMIZER_STATE, "adamw.exp_avg")
                         : lp_alloc(bytes, LP_MEM_CATEGORY_OPTIMIZER_STATE, "adamw.exp_avg");
        o->v[i] = o->dev ? lp_kernels_dev_alloc(bytes, LP_MEM_CATEGORY_OPTIMIZER_STATE, "adamw.exp_avg_sq")
                         : lp_alloc(bytes, LP_MEM_CATEGORY_OPTIMIZER_STATE, "adamw.exp_avg_sq");
        if (!o->m[i] || !o->v[i]) {
            lp_optim_free(o);
            return lp_err(LP_STATUS_NO_MEMORY, "optimizer state for %s: out of memory", p[i].name);
        }
        o->state_bytes += 2 * (int64_t)bytes;
    }
    return LP_OK;
}

void lp_optim_step(lp_optim *o, lp_model *model, const lp_train_config *c, double lr)
{
    size_t n;
    const lp_model_param *p = lp_model_params(model, &n);
    o->t++;
    for (size_t i = 0; i < n && i < o->n; i++) {
        if (!p[i].trainable || !o->m[i])
            continue;
        lp_adamw_step(p[i].data, p[i].grad, o->m[i], o->v[i], p[i].numel, lr, c->beta1, c->beta2, c->adam_eps,
                      p[i].no_decay ? 0.0 : c->weight_decay, o->t);
    }
}

void lp_optim_free(lp_optim *o)
{
    for (size_t i = 0; i < o->n; i++) {
        if (o->m)
            o->dev ? lp_kernels_dev_free(o->m[i]) : lp_free(o->m[i]);
        if (o->v)
            o->dev ? lp_kernels_dev_free(o->v[i]) : lp_free(o->v[i]);
    }
    free(o->m);
    free(o->v);
    free(o->owner);
    o->m = o->v = NULL;
    o->owner = NULL;
    o->n = 0;
    o->state_bytes = 0;
}
