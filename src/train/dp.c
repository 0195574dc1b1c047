/* Data-parallel glue between the training loop and lp_dist: the gradient buckets of a model
 * (stages from the parameters' layers), the backward hook that starts their all-reduces as
 * layers finish, the start-of-run weight check, and agreement on errors so that a failure on
 * one rank before training does not leave the others waiting. ZeRO-1 (sharded) too: each
 * rank's shard of every bucket cut into runs of one parameter for AdamW, the clip norm summed
 * over the shards, the step that all-gathers each bucket as soon as its shard is updated, and
 * the optimizer state gathered for a checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/core.h"
#include "loupe/dist.h"
#include "loupe/kernels.h"
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

/* ZeRO-1: the plan's buckets cut to the hull of their tensors (the padding around them is never
 * reduced nor gathered: a gather into the parameters must not write past them), and where each
 * bucket is gathered: the parameters themselves when they lie as their gradients do (whole
 * fine-tuning: one block each, same order and padding), else the gradient block (staged). */
static lp_status plan_sharded(lp_dp *dp, lp_dist_buckets *plan, float *block, float ***gather_to)
{
    size_t np;
    const lp_model_param *p = lp_model_params(dp->model, &np);
    *gather_to = calloc((size_t)(plan->n ? plan->n : 1), sizeof **gather_to);
    dp->staged = calloc((size_t)(plan->n ? plan->n : 1), sizeof *dp->staged);
    dp->b = malloc((size_t)(plan->n ? plan->n : 1) * sizeof *dp->b);
    if (!*gather_to || !dp->staged || !dp->b)
        return lp_err(LP_STATUS_NO_MEMORY, "ZeRO-1 buckets: out of memory");
    for (int32_t i = 0; i < plan->n; i++) {
        lp_dist_bucket *b = &plan->b[i];
        const lp_model_param *first = NULL;
        int64_t hi = b->off;
        bool affine = true;
        for (size_t k = 0; k < np; k++) {
            const int64_t g = p[k].grad ? p[k].grad - block : -1;
            if (g < b->off || g >= b->off + b->n)
                continue;
            if (!first || g < first->grad - block)
                first = &p[k];
            hi = g + p[k].numel > hi ? g + p[k].numel : hi;
        }
        if (!first) /* a bucket is made of spans: never */
            return lp_err(LP_STATUS_INVALID_ARG, "ZeRO-1: gradient bucket %d holds no tensor", (int)i);
        for (size_t k = 0; k < np; k++) {
            const int64_t g = p[k].grad ? p[k].grad - block : -1;
            if (g >= b->off && g < b->off + b->n)
                affine = affine && p[k].data - first->data == p[k].grad - first->grad;
        }
        b->n = hi - (first->grad - block);
        b->off = first->grad - block;
        dp->b[i] = *b;
        dp->staged[i] = !affine;
        (*gather_to)[i] = affine ? first->data : NULL;
    }
    return LP_OK;
}

lp_status lp_dp_init(lp_dp *dp, lp_model *model, double bucket_mb, int32_t zero)
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
    dp->sharded = zero == 1;
    float **gather_to = NULL;
    if (dp->sharded && (st = plan_sharded(dp, &plan, block, &gather_to)) == LP_OK)
        st = lp_dist_reducer_init_sharded(&dp->reducer, block, &plan, gather_to);
    else if (!dp->sharded)
        st = lp_dist_reducer_init(&dp->reducer, block, &plan);
    free(gather_to);
    lp_dist_buckets_free(&plan);
    return st;
}

/* Rank `rank`'s runs: its shard of each bucket (plan order) cut at the tensors' edges, in
 * gradient-block order within a bucket; seg_at (n_buckets + 1, may be NULL) gets where each
 * bucket's runs start. */
static lp_status shard_runs(const lp_dp *dp, int32_t rank, lp_optim_seg **out, size_t *n_out, size_t *seg_at)
{
    size_t np;
    const lp_model_param *p = lp_model_params(dp->model, &np);
    int64_t total;
    const float *block = lp_model_grad_block(dp->model, &total);
    size_t cap = np + (size_t)dp->n_buckets, n = 0; /* a bucket's shard adds at most one cut tensor */
    lp_optim_seg *seg = malloc((cap ? cap : 1) * sizeof *seg);
    if (!seg)
        return lp_err(LP_STATUS_NO_MEMORY, "ZeRO-1 shard: out of memory");
    for (int32_t i = 0; i < dp->n_buckets; i++) {
        if (seg_at)
            seg_at[i] = n;
        int64_t lo, len;
        lp_dist_shard_range(dp->b[i].n, rank, dp->world, &lo, &len);
        const int64_t s0 = dp->b[i].off + lo, s1 = s0 + len;
        for (size_t k = 0; k < np && len > 0; k++) {
            if (!p[k].grad)
                continue;
            const int64_t g = p[k].grad - block, a = g > s0 ? g : s0, e = g + p[k].numel < s1 ? g + p[k].numel : s1;
            if (a >= e)
                continue;
            if (n == cap) { /* more tensors than expected cut: grow */
                lp_optim_seg *more = realloc(seg, 2 * cap * sizeof *seg);
                if (!more) {
                    free(seg);
                    return lp_err(LP_STATUS_NO_MEMORY, "ZeRO-1 shard: out of memory");
                }
                seg = more, cap *= 2;
            }
            seg[n++] = (lp_optim_seg){.param = k, .lo = a - g, .n = e - a};
        }
    }
    if (seg_at)
        seg_at[dp->n_buckets] = n;
    *out = seg;
    *n_out = n;
    return LP_OK;
}

lp_status lp_dp_optim_init(lp_dp *dp, lp_optim *o, const lp_model *model)
{
    if (!dp->sharded)
        return lp_optim_init(o, model);
    lp_optim_seg *seg = NULL;
    size_t n = 0;
    if (!(dp->seg_at = malloc(((size_t)dp->n_buckets + 1) * sizeof *dp->seg_at)))
        return lp_err(LP_STATUS_NO_MEMORY, "ZeRO-1 shard: out of memory");
    lp_status st = shard_runs(dp, dp->rank, &seg, &n, dp->seg_at);
    if (st != LP_OK)
        return st;
    st = lp_optim_init_sharded(o, model, seg, n);
    free(seg);
    if (st != LP_OK)
        return st;
    const lp_model_param *p = lp_model_params(model, NULL);
    dp->seg_g = malloc((n ? n : 1) * sizeof *dp->seg_g);
    dp->seg_n = malloc((n ? n : 1) * sizeof *dp->seg_n);
    if (!dp->seg_g || !dp->seg_n)
        return lp_err(LP_STATUS_NO_MEMORY, "ZeRO-1 shard: out of memory");
    for (size_t k = 0; k < n; k++) {
        dp->seg_g[k] = p[o->seg[k].param].grad + o->seg[k].lo;
        dp->seg_n[k] = o->seg[k].n;
    }
    return LP_OK;
}

/* The norm's all-reduce on the main thread, a communication range as the buckets' (one double):
 * where a rank waits for the others to finish their reductions. */
static const lp_prof_op_desc norm_all_reduce_desc = {.name = "mpi:all_reduce",
                                                      .cat = LP_PROF_CAT_USER_ANNOTATION,
                                                      .ninputs = 1,
                                                      .rank = {1},
                                                      .type = {"double"}};

lp_status lp_dp_clip(lp_dp *dp, lp_model *model, double max_norm, double *norm)
{
    if (!dp->sharded) {
        *norm = lp_model_grad_clip(model, max_norm);
        return LP_OK;
    }
    const size_t n = dp->seg_at[dp->n_buckets];
    if (n > INT32_MAX)
        return lp_err(LP_STATUS_RANGE, "ZeRO-1: %zu runs in one shard", n);
    double ss = lp_grad_sum_squares(dp->seg_g, dp->seg_n, (int)n);
    lp_prof_op_push(&norm_all_reduce_desc, (const int64_t[1]){1}, -1, sizeof ss);
    lp_status st = lp_dist_allreduce_sum_f64(&ss, 1);
    lp_prof_range_pop();
    if (st != LP_OK)
        return st;
    *norm = sqrt(ss);
    const double coef = max_norm / (*norm + 1e-6); /* as lp_grad_clip */
    if (max_norm > 0 && isfinite(*norm) && coef < 1.0)
        lp_grad_scale(dp->seg_g, dp->seg_n, (int)n, (float)coef);
    return LP_OK;
}

lp_status lp_dp_step(lp_dp *dp, lp_optim *o, lp_model *model, const lp_train_config *c, double lr)
{
    if (!dp->sharded) {
        lp_optim_step(o, model, c, lr);
        return LP_OK;
    }
    const lp_model_param *p = lp_model_params(model, NULL);
    o->t++;
    lp_status st = LP_OK;
    for (int32_t i = 0; i < dp->n_buckets && st == LP_OK; i++) {
        lp_optim_step_runs(o, model, c, lr, dp->seg_at[i], dp->seg_at[i + 1]);
        for (size_t k = dp->seg_at[i]; dp->staged[i] && k < dp->seg_at[i + 1]; k++) { /* its place in the block */
            const lp_optim_seg *s = &o->seg[k];
            memcpy(p[s->param].grad + s->lo, p[s->param].data + s->lo, (size_t)s->n * sizeof(float));
        }
        st = lp_dist_reducer_gather(dp->reducer, i);
    }
    lp_status gs = lp_dist_reducer_gather_finish(dp->reducer);
    if (st != LP_OK || gs != LP_OK)
        return st != LP_OK ? st : gs;
    size_t np;
    p = lp_model_params(model, &np);
    int64_t total;
    const float *block = lp_model_grad_block(model, &total);
    for (int32_t i = 0; i < dp->n_buckets; i++) /* staged: every rank's update, back in place */
        for (size_t k = 0; dp->staged[i] && k < np; k++) {
            const int64_t g = p[k].grad ? p[k].grad - block : -1;
            if (g >= dp->b[i].off && g < dp->b[i].off + dp->b[i].n)
                memcpy(p[k].data, p[k].grad, (size_t)p[k].numel * sizeof(float));
        }
    return LP_OK;
}

void lp_dp_free(lp_dp *dp)
{
    if (dp->model)
        lp_model_set_grad_ready(dp->model, NULL, NULL);
    lp_dist_reducer_free(dp->reducer);
    dp->reducer = NULL;
    free(dp->b);
    free(dp->staged);
    free(dp->seg_at);
    free(dp->seg_g);
    free(dp->seg_n);
    dp->b = NULL;
    dp->staged = NULL;
    dp->seg_at = NULL;
    dp->seg_g = NULL;
    dp->seg_n = NULL;
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

/* Floats to or from rank peer in messages of at most 2^28 (MPI counts bytes in an int). */
static lp_status move_floats(float *buf, int64_t n, int32_t peer, bool send)
{
    lp_status st = LP_OK;
    for (int64_t at = 0; at < n && st == LP_OK;) {
        const int64_t k = n - at < ((int64_t)1 << 28) ? n - at : (int64_t)1 << 28;
        st = send ? lp_dist_send(buf + at, k * (int64_t)sizeof(float), peer)
                  : lp_dist_recv(buf + at, k * (int64_t)sizeof(float), peer);
        at += k;
    }
    return st;
}

lp_status lp_dp_gather_optim(const lp_dp *dp, lp_optim *o, const lp_model *model)
{
    if (dp->world == 1 || !o->seg)
        return LP_OK;
    if (dp->rank != 0) { /* its runs, in order: rank 0 knows them from the same plan */
        lp_status st = LP_OK;
        for (size_t k = 0; k < o->n_seg && st == LP_OK; k++)
            if ((st = move_floats(o->m_shard + o->seg[k].state, o->seg[k].n, 0, true)) == LP_OK)
                st = move_floats(o->v_shard + o->seg[k].state, o->seg[k].n, 0, true);
        return st;
    }
    size_t np;
    const lp_model_param *p = lp_model_params(model, &np);
    for (size_t i = 0; i < np && i < o->n; i++) {
        if (!p[i].trainable)
            continue;
        const size_t bytes = (size_t)p[i].numel * sizeof(float);
        o->m[i] = lp_alloc(bytes, LP_MEM_CATEGORY_TEMPORARY, "zero1.gather.exp_avg");
        o->v[i] = lp_alloc(bytes, LP_MEM_CATEGORY_TEMPORARY, "zero1.gather.exp_avg_sq");
        if (!o->m[i] || !o->v[i]) /* the job ends: the other ranks wait in their sends */
            return lp_err(LP_STATUS_NO_MEMORY, "checkpoint: gathering the optimizer state of %s: out of memory",
                          p[i].name);
    }
    for (size_t k = 0; k < o->n_seg; k++) {
        const lp_optim_seg *s = &o->seg[k];
        memcpy(o->m[s->param] + s->lo, o->m_shard + s->state, (size_t)s->n * sizeof(float));
        memcpy(o->v[s->param] + s->lo, o->v_shard + s->state, (size_t)s->n * sizeof(float));
    }
    lp_status st = LP_OK;
    for (int32_t q = 1; q < dp->world && st == LP_OK; q++) {
        lp_optim_seg *seg = NULL;
        size_t n = 0;
        if ((st = shard_runs(dp, q, &seg, &n, NULL)) != LP_OK)
            return st;
        for (size_t k = 0; k < n && st == LP_OK; k++)
            if ((st = move_floats(o->m[seg[k].param] + seg[k].lo, seg[k].n, q, false)) == LP_OK)
                st = move_floats(o->v[seg[k].param] + seg[k].lo, seg[k].n, q, false);
        free(seg);
    }
    return st;
}

void lp_dp_release_optim(const lp_dp *dp, lp_optim *o)
{
    if (dp->world == 1 || !o->seg || dp->rank != 0)
        return;
    for (size_t i = 0; i < o->n; i++) {
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
    /* per rank: AdamW's state, and the gradient block with the reduce-scatter's receive buffers */
    int64_t grads;
    lp_model_grad_block(dp->model, &grads);
    const int64_t mine[2] = {o->state_bytes,
                             grads * (int64_t)sizeof(float) + lp_dist_reducer_scratch_bytes(dp->reducer)};
    int64_t *all = malloc((size_t)dp->world * sizeof mine);
    if (!all)
        return lp_err(LP_STATUS_NO_MEMORY, "distributed.json: out of memory");
    lp_status st = lp_dist_allgather(mine, all, sizeof mine);
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
            lp_dist_backend(), (int)dp->world, c->bucket_mb, (int)dp->n_buckets, dp->sharded ? 1 : 0,
            (long long)full);
    for (int32_t r = 0; r < dp->world; r++)
        fprintf(f.fp, "%s%lld", r ? ", " : "", (long long)all[2 * r]);
    fprintf(f.fp, "],\n  \"gradient_bytes_per_rank\": [");
    for (int32_t r = 0; r < dp->world; r++)
        fprintf(f.fp, "%s%lld", r ? ", " : "", (long long)all[2 * r + 1]);
    fprintf(f.fp, "]\n}\n");
    free(all);
    return lp_atomic_commit(&f);
}
