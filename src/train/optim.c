/* AdamW state: one first- and second-moment buffer per trainable parameter (or, sharded for
 * ZeRO-1, one pair of flat buffers for the runs of elements this rank updates), allocated as
 * OPTIMIZER_STATE so the memory breakdown shows it, and the step that applies
 * torch.optim.AdamW (weight decay skipped on biases and LayerNorm, as HF Trainer). */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

lp_status lp_optim_init(lp_optim *o, const lp_model *model)
{
    size_t n;
    const lp_model_param *p = lp_model_params(model, &n);
    *o = (lp_optim){.n = n, .dev = lp_model_on_device(model)}; /* the state lives beside the weights */
    o->m = calloc(n ? n : 1, sizeof *o->m);
    o->v = calloc(n ? n : 1, sizeof *o->v);
    if (!o->m || !o->v) {
        lp_optim_free(o);
        return lp_err(LP_STATUS_NO_MEMORY, "optimizer state: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (!p[i].trainable)
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

lp_status lp_optim_init_sharded(lp_optim *o, const lp_model *model, const lp_optim_seg *seg, size_t n_seg)
{
    size_t n;
    const lp_model_param *p = lp_model_params(model, &n);
    *o = (lp_optim){.n = n};
    o->m = calloc(n ? n : 1, sizeof *o->m);
    o->v = calloc(n ? n : 1, sizeof *o->v);
    o->seg = malloc((n_seg ? n_seg : 1) * sizeof *o->seg);
    if (!o->m || !o->v || !o->seg) {
        lp_optim_free(o);
        return lp_err(LP_STATUS_NO_MEMORY, "optimizer state: out of memory");
    }
    int64_t floats = 0;
    for (size_t k = 0; k < n_seg; k++) {
        const lp_optim_seg *s = &seg[k];
        if (s->param >= n || !p[s->param].trainable || s->lo < 0 || s->n < 1 || s->lo + s->n > p[s->param].numel) {
            lp_optim_free(o);
            return lp_err(LP_STATUS_INVALID_ARG, "sharded optimizer: run %zu (parameter %zu, [%lld, +%lld)) is not "
                          "inside a trainable parameter", k, s->param, (long long)s->lo, (long long)s->n);
        }
        o->seg[k] = *s;
        o->seg[k].state = floats;
        floats += s->n;
    }
    o->n_seg = n_seg;
    const size_t bytes = (size_t)floats * sizeof(float);
    o->m_shard = lp_alloc(bytes, LP_MEM_CATEGORY_OPTIMIZER_STATE, "adamw.exp_avg (shard)");
    o->v_shard = lp_alloc(bytes, LP_MEM_CATEGORY_OPTIMIZER_STATE, "adamw.exp_avg_sq (shard)");
    if (!o->m_shard || !o->v_shard) {
        lp_optim_free(o);
        return lp_err(LP_STATUS_NO_MEMORY, "optimizer state shard of %lld floats: out of memory", (long long)floats);
    }
    o->state_bytes = 2 * (int64_t)bytes;
    return LP_OK;
}

/* The tensors of a step go to lp_adamw_multi in batches: on a GPU a few launches for a
 * model's hundreds of tensors instead of one each; on the CPU the same per-tensor steps. */
enum { BATCH = 192 };
typedef struct step_batch {
    lp_adamw_tensor t[BATCH];
    int n;
    double lr;
    const lp_train_config *c;
    int64_t step;
} step_batch;

static void batch_flush(step_batch *b)
{
    if (b->n)
        lp_adamw_multi(b->t, b->n, b->lr, b->c->beta1, b->c->beta2, b->c->adam_eps, b->step);
    b->n = 0;
}

static void batch_add(step_batch *b, const lp_model_param *p, int64_t lo, float *m, float *v, int64_t n)
{
    if (b->n == BATCH)
        batch_flush(b);
    b->t[b->n++] =
        (lp_adamw_tensor){p->data + lo, p->grad + lo, m, v, n, p->no_decay ? 0.0 : b->c->weight_decay};
}

void lp_optim_step_runs(lp_optim *o, lp_model *model, const lp_train_config *c, double lr, size_t k0, size_t k1)
{
    const lp_model_param *p = lp_model_params(model, NULL);
    step_batch b = {.lr = lr, .c = c, .step = o->t};
    for (size_t k = k0; k < k1 && k < o->n_seg; k++) {
        const lp_optim_seg *s = &o->seg[k];
        batch_add(&b, &p[s->param], s->lo, o->m_shard + s->state, o->v_shard + s->state, s->n);
    }
    batch_flush(&b);
}

void lp_optim_step(lp_optim *o, lp_model *model, const lp_train_config *c, double lr)
{
    size_t n;
    const lp_model_param *p = lp_model_params(model, &n);
    o->t++;
    if (o->seg) {
        lp_optim_step_runs(o, model, c, lr, 0, o->n_seg);
        return;
    }
    step_batch b = {.lr = lr, .c = c, .step = o->t};
    for (size_t i = 0; i < n && i < o->n; i++)
        if (p[i].trainable && o->m[i])
            batch_add(&b, &p[i], 0, o->m[i], o->v[i], p[i].numel);
    batch_flush(&b);
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
    free(o->seg);
    lp_free(o->m_shard);
    lp_free(o->v_shard);
    o->m = o->v = NULL;
    o->seg = NULL;
    o->m_shard = o->v_shard = NULL;
    o->n = o->n_seg = 0;
    o->state_bytes = 0;
}
