/* Data-parallel glue between the training loop and lp_dist: the gradient buckets of a model
 * (stages from the parameters' layers), the backward hook that starts their all-reduces as
 * layers finish, the start-of-run weight check, and agreement on errors so that a failure on
 * one rank before training does not leave the others waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/core.h"
#include "loupe/dist.h"
#include "train_internal.h"

/* The layer of a parameter from its HF name ("...layer.3.attention...", "model.layers.3...",
 * PEFT's "base_model.model....layer.3...lora_A.weight"); -1 when it names none. */
static int32_t layer_of(const char *name)
{
    static const char *const tags[] = {".layer.", ".layers.", ".h."};
    for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
        const char *p = strstr(name, tags[t]);
        if (!p && !strncmp(name, tags[t] + 1, strlen(tags[t]) - 1))
            p = name - 1; /* the tag opens the name */
        if (!p)
            continue;
        p += strlen(tags[t]);
        char *end;
        long l = strtol(p, &end, 10);
        if (end != p && *end == '.' && l >= 0 && l < INT32_MAX)
            return (int32_t)l;
    }
    return -1;
}

static void grad_ready(void *user, int32_t stage)
{
    lp_dp *dp = user;
    if (dp->hook_status == LP_OK)
        dp->hook_status = lp_dist_reducer_ready(dp->reducer, stage);
}

lp_status lp_dp_init(lp_dp *dp, lp_model *model, double bucket_mb)
{
    memset(dp, 0, sizeof *dp);
    dp->rank = lp_dist_rank();
    dp->world = lp_dist_world_size();
    dp->model = model;
    if (dp->world == 1)
        return LP_OK;
    int64_t total;
    float *block = lp_model_grad_block(model, &total);
    size_t np;
    const lp_model_param *p = lp_model_params(model, &np);
    lp_dist_span *spans = malloc((np ? np : 1) * sizeof *spans);
    if (!spans)
        return lp_err(LP_STATUS_NO_MEMORY, "gradient buckets: out of memory");
    /* Layers finish from the last down; a tensor outside the layers is the head's when it lies
     * after every layer's (stage L, final first) and the embeddings' otherwise (final last). */
    lp_model_info mi;
    lp_model_info_get(model, &mi);
    int64_t last_layer_off = -1;
    for (size_t i = 0; i < np; i++)
        if (p[i].grad && layer_of(p[i].name) >= 0 && p[i].grad - block > last_layer_off)
            last_layer_off = p[i].grad - block;
    int32_t n = 0;
    for (size_t i = 0; i < np; i++) {
        if (!p[i].grad)
            continue;
        int32_t l = layer_of(p[i].name);
        const int64_t off = p[i].grad - block;
        if (l < 0)
            l = off > last_layer_off ? (int32_t)mi.num_layers : -1;
        spans[n++] = (lp_dist_span){.off = off, .n = p[i].numel, .stage = l};
    }
    lp_dist_buckets plan;
    lp_status st = lp_dist_buckets_plan(spans, n, total, (int64_t)(bucket_mb * 1048576.0), &plan);
    free(spans);
    if (st != LP_OK)
        return st;
    dp->n_buckets = plan.n;
    st = lp_dist_reducer_init(&dp->reducer, block, &plan);
    lp_dist_buckets_free(&plan);
    return st;
}

void lp_dp_free(lp_dp *dp)
{
    if (dp->model)
        lp_model_set_grad_ready(dp->model, NULL, NULL);
    lp_dist_reducer_free(dp->reducer);
    dp->reducer = NULL;
}

lp_status lp_dp_agree(const lp_dp *dp, lp_status st)
{
    if (dp->world == 1)
        return st;
    double v[2] = {(double)st, dp->rank == 0 ? (double)st : 0}; /* the worst, rank 0's */
    lp_status cs = lp_dist_allreduce_max_f64(v, 2);
    if (cs != LP_OK)
        return cs;
    const lp_status worst = (lp_status)v[0], lead = (lp_status)v[1];
    if (dp->rank != 0 && lead != LP_OK)
        return lp_err(lead, "another rank stopped (%s): see its message", lp_status_str(lead));
    if (st == LP_OK && worst != LP_OK)
        return lp_err(worst, "another rank stopped (%s): see its message", lp_status_str(worst));
    return st;
}

lp_status lp_dp_check_weights(const lp_dp *dp, const lp_model *model)
{
    if (dp->world == 1)
        return LP_OK;
    size_t np;
    const lp_model_param *p = lp_model_params(model, &np);
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the float bits, a word at a time */
    for (size_t i = 0; i < np; i++)
        for (int64_t j = 0; j < p[i].numel; j++) {
            uint32_t w;
            memcpy(&w, &p[i].data[j], sizeof w);
            h = (h ^ w) * 1099511628211ull;
        }
    uint64_t *all = malloc((size_t)dp->world * sizeof *all);
    if (!all)
        return lp_err(LP_STATUS_NO_MEMORY, "weight check: out of memory");
    lp_status st = lp_dist_allgather(&h, all, sizeof h);
    for (int32_t r = 1; st == LP_OK && r < dp->world; r++)
        if (all[r] != all[0])
            st = lp_err(
                LP_STATUS_INVALID_ARG,
                "rank %d starts from other weights than rank 0 (hash %016llx vs %016llx): every rank must "
                "load the same model and seed",
                (int)r, (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
}

void lp_dp_reduce_next_backward(lp_dp *dp, bool on)
{
    if (dp->reducer)
        lp_model_set_grad_ready(dp->model, on ? grad_ready : NULL, on ? dp : NULL);
}

int32_t lp_dp_shard(const lp_dp *dp, const lp_encoded_dataset *e, const int64_t *rows, int32_t n, int32_t *lo,
                    int32_t *nl)
{
    *lo = (int32_t)((int64_t)n * dp->rank / dp->world);
    *nl = (int32_t)((int64_t)n * (dp->rank + 1) / dp->world) - *lo;
    if (dp->world == 1)
        return 0;
    int64_t longest = 0;
    for (int32_t i = 0; i < n; i++) {
        const int64_t len = e->offsets[rows[i] + 1] - e->offsets[rows[i]];
        longest = len > longest ? len : longest;
    }
    return (int32_t)longest;
}

lp_status lp_dp_sync_dropout(const lp_dp *dp, lp_model *model)
{
    if (dp->world == 1)
        return LP_OK;
    lp_rng r;
    lp_model_rng_get(model, &r);
    double off = (double)r.offset; /* exact below 2^53 counter blocks */
    lp_status st = lp_dist_allreduce_max_f64(&off, 1);
    if (st == LP_OK) {
        r.offset = (uint64_t)off;
        lp_model_rng_set(model, &r);
    }
    return st;
}

lp_status lp_dp_finish(lp_dp *dp)
{
    if (!dp->reducer)
        return LP_OK;
    lp_model_set_grad_ready(dp->model, NULL, NULL);
    lp_status st = lp_dist_reducer_finish(dp->reducer);
    if (dp->hook_status != LP_OK && st == LP_OK)
        st = dp->hook_status;
    dp->hook_status = LP_OK;
    return st;
}

lp_status lp_dp_sync_params(const lp_dp *dp, const lp_optim *o, lp_model *model)
{
    if (dp->world == 1 || !o->owner)
        return LP_OK;
    size_t np;
    const lp_model_param *p = lp_model_params(model, &np);
    lp_status st = LP_OK;
    for (size_t i = 0; i < np && st == LP_OK;) {
        if (o->owner[i] < 0) {
            i++;
            continue;
        }
        /* a run [i, j) of one owner, adjacent in the parameter block (64-byte aligned tensors,
         * identical padding on every rank) */
        size_t j = i + 1;
        while (j < np && o->owner[j] == o->owner[i] &&
               p[j].data == p[j - 1].data + ((p[j - 1].numel + 15) & ~(int64_t)15))
            j++;
        const int64_t floats = (int64_t)(p[j - 1].data - p[i].data) + p[j - 1].numel;
        st = lp_dist_broadcast(p[i].data, floats * (int64_t)sizeof(float), o->owner[i]);
        i = j;
    }
    return st;
}

lp_status lp_dp_gather_optim(const lp_dp *dp, lp_optim *o, const lp_model *model)
{
    if (dp->world == 1 || !o->owner)
        return LP_OK;
    size_t np;
    const lp_model_param *p = lp_model_params(model, &np);
    lp_status st = LP_OK;
    for (size_t i = 0; i < np && st == LP_OK; i++) {
        const int32_t own = o->owner[i];
        if (own <= 0 || (dp->rank != 0 && dp->rank != own))
            continue;
        const int64_t bytes = p[i].numel * (int64_t)sizeof(float);
        if (dp->rank == own) {
            if ((st = lp_dist_send(o->m[i], bytes, 0)) == LP_OK)
                st = lp_dist_send(o->v[i], bytes, 0);
            continue;
        }
        o->m[i] = lp_alloc((size_t)bytes, LP_MEM_CATEGORY_TEMPORARY, "zero1.gather.exp_avg");
        o->v[i] = lp_alloc((size_t)bytes, LP_MEM_CATEGORY_TEMPORARY, "zero1.gather.exp_avg_sq");
        if (!o->m[i] || !o->v[i])
            return lp_err(LP_STATUS_NO_MEMORY,
                          "checkpoint: gathering the optimizer state of %s: out of memory",
                          p[i].name); /* the job ends: the owner waits in its send */
        if ((st = lp_dist_recv(o->m[i], bytes, own)) == LP_OK)
            st = lp_dist_recv(o->v[i], bytes, own);
    }
    return st;
}

void lp_dp_release_optim(const lp_dp *dp, lp_optim *o)
{
    if (dp->world == 1 || !o->owner || dp->rank != 0)
        return;
    for (size_t i = 0; i < o->n; i++)
        if (o->owner[i] > 0) {
            lp_free(o->m[i]);
            lp_free(o->v[i]);
            o->m[i] = o->v[i] = NULL;
        }
}

lp_status lp_dp_write_info(const lp_dp *dp, const lp_optim *o, const lp_model *model,
                           const lp_train_config *c, const char *run_dir)
{
    if (dp->world == 1)
        return LP_OK;
    int64_t *all = malloc((size_t)dp->world * sizeof *all);
    if (!all)
        return lp_err(LP_STATUS_NO_MEMORY, "distributed.json: out of memory");
    lp_status st = lp_dist_allgather(&o->state_bytes, all, sizeof o->state_bytes);
    if (st != LP_OK || dp->rank != 0) {
        free(all);
        return st;
    }
    size_t np;
    const lp_model_param *p = lp_model_params(model, &np);
    int64_t full = 0;
    for (size_t i = 0; i < np; i++)
        full += p[i].trainable ? 2 * p[i].numel * (int64_t)sizeof(float) : 0;
    char path[1200];
    snprintf(path, sizeof path, "%s/distributed.json", run_dir);
    lp_atomic_file f;
    if ((st = lp_atomic_open(&f, path)) != LP_OK) {
        free(all);
        return st;
    }
    fprintf(f.fp,
            "{\n  \"backend\": \"%s\",\n  \"world_size\": %d,\n  \"bucket_mb\": %g,\n  \"buckets\": %d,\n"
            "  \"zero\": %d,\n  \"optimizer_state_bytes_unsharded\": %lld,\n  "
            "\"optimizer_state_bytes_per_rank\": [",
            lp_dist_backend(), (int)dp->world, c->bucket_mb, (int)dp->n_buckets, (int)c->zero,
            (long long)full);
    for (int32_t r = 0; r < dp->world; r++)
        fprintf(f.fp, "%s%lld", r ? ", " : "", (long long)all[r]);
    fprintf(f.fp, "]\n}\n");
    free(all);
    return lp_atomic_commit(&f);
}
