/* Checkpoints: <run>/checkpoints/step-<N>/ holds state.safetensors (parameters by their HF
 * names, AdamW moments as optimizer.exp_avg.<name> / optimizer.exp_avg_sq.<name>),
 * trainer_state.json (step, optimizer step, data position, dropout RNG, elapsed time, the
 * settings that fix the data stream) and the history so far (steps.csv, epoch_results.csv).
 * A checkpoint is built in a temporary sibling directory and renamed into place, so a
 * crash leaves either the old set or the new one. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "loupe/io.h"
#include "train_internal.h"

#define CKPT_FORMAT "loupe-checkpoint-1"

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = lp_malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

static lp_status write_state(const char *path, const lp_model *model, const lp_optim *o)
{
    size_t n;
    const lp_model_param *p = lp_model_params(model, &n);
    lp_st_write_tensor *t = lp_calloc(3 * n + 1, sizeof *t);
    char **names = lp_calloc(2 * n + 1, sizeof *names);
    float **host = o->dev ? lp_calloc(2 * n + 1, sizeof *host) : NULL; /* a GPU's AdamW state, downloaded */
    size_t k = 0;
    lp_status st = LP_OK;
    if (!t || !names || (o->dev && !host)) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        t[k++] = (lp_st_write_tensor){p[i].name, LP_ST_DTYPE_F32, p[i].ndim, p[i].shape, p[i].data};
        if (!o->m[i])
            continue;
        size_t len = strlen(p[i].name) + 32;
        if (!(names[2 * i] = lp_malloc(len)) || !(names[2 * i + 1] = lp_malloc(len))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        snprintf(names[2 * i], len, "optimizer.exp_avg.%s", p[i].name);
        snprintf(names[2 * i + 1], len, "optimizer.exp_avg_sq.%s", p[i].name);
        const float *mi = o->m[i], *vi = o->v[i];
        if (o->dev) {
            const size_t bytes = (size_t)p[i].numel * sizeof(float);
            if (!(host[2 * i] = lp_malloc(bytes)) || !(host[2 * i + 1] = lp_malloc(bytes))) {
                st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
                goto out;
            }
            if ((st = lp_kernels_download(host[2 * i], mi, bytes)) != LP_OK ||
                (st = lp_kernels_download(host[2 * i + 1], vi, bytes)) != LP_OK)
                goto out;
            mi = host[2 * i], vi = host[2 * i + 1];
        }
        t[k++] = (lp_st_write_tensor){names[2 * i], LP_ST_DTYPE_F32, p[i].ndim, p[i].shape, mi};
        t[k++] = (lp_st_write_tensor){names[2 * i + 1], LP_ST_DTYPE_F32, p[i].ndim, p[i].shape, vi};
    }
    const char *meta[] = {"format", CKPT_FORMAT};
    st = lp_st_write(path, t, k, meta, 1);
out:
    for (size_t i = 0; names && i < 2 * n; i++)
        free(names[i]);
    for (size_t i = 0; host && i < 2 * n; i++)
        free(host[i]);
    free(host);
    free(names);
    free(t);
    return st;
}

static char *u64s(uint64_t v, char *buf)
{
    sprintf(buf, "%" PRIu64, v);
    return buf;
}

static lp_status write_trainer_state(const char *path, const lp_train_config *c, const lp_optim *o,
                                     const lp_ckpt_state *s)
{
    cJSON *j = cJSON_CreateObject(), *rng = cJSON_CreateObject(), *set = cJSON_CreateObject();
    char b[32];
    cJSON_AddStringToObject(j, "format", CKPT_FORMAT);
    cJSON_AddNumberToObject(j, "step", (double)s->step);
    cJSON_AddNumberToObject(j, "optimizer_step", (double)o->t);
    cJSON_AddNumberToObject(j, "epoch", (double)s->pos.epoch);
    cJSON_AddNumberToObject(j, "batch_in_epoch", (double)s->pos.batch);
    cJSON_AddNumberToObject(j, "elapsed_s", s->elapsed_s);
    cJSON_AddStringToObject(rng, "seed", u64s(s->dropout_rng.seed, b));
    cJSON_AddStringToObject(rng, "stream", u64s(s->dropout_rng.stream, b));
    cJSON_AddStringToObject(rng, "offset", u64s(s->dropout_rng.offset, b));
    cJSON_AddItemToObject(j, "dropout_rng", rng);
    cJSON_AddStringToObject(set, "seed", u64s(c->seed, b));
    cJSON_AddNumberToObject(set, "batch_size", c->batch_size);
    cJSON_AddNumberToObject(set, "grad_accum", c->grad_accum);
    cJSON_AddNumberToObject(set, "max_seq_len", c->max_seq_len);
    cJSON_AddStringToObject(set, "method", lp_train_method_name(c->method));
    cJSON_AddItemToObject(j, "settings", set);
    return lp_json_write_file(path, j);
}

/* Keeps the newest `keep` step-* directories. */
static void prune(const char *ckdir, int32_t keep)
{
    if (keep <= 0)
        return;
    DIR *d = opendir(ckdir);
    if (!d)
        return;
    int64_t steps[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096) {
        long long v;
        char tail;
        if (sscanf(e->d_name, "step-%lld%c", &v, &tail) == 1)
            steps[n++] = v;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int k = 0; k < n; k++)
            newer += steps[k] > steps[i];
        if (newer >= keep) {
            char p[4096];
            if (snprintf(p, sizeof p, "%s/step-%lld", ckdir, (long long)steps[i]) < (int)sizeof p)
                rm_tree(p);
        }
    }
}

lp_status lp_ckpt_save(const char *run_dir, const lp_train_config *c, const lp_model *model, const lp_optim *o,
                       const lp_ckpt_state *s, const lp_history *h)
{
    char ckdir[4096], tmp[4096], fin[4096];
    if (snprintf(ckdir, sizeof ckdir, "%s/checkpoints", run_dir) >= (int)sizeof ckdir ||
        snprintf(tmp, sizeof tmp, "%s/.step-%lld.tmp.%d", ckdir, (long long)s->step, (int)getpid()) >= (int)sizeof tmp ||
        snprintf(fin, sizeof fin, "%s/step-%lld", ckdir, (long long)s->step) >= (int)sizeof fin)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: path too long", run_dir);
    lp_status st = lp_mkdir_p(tmp);
    if (st != LP_OK)
        return st;
    char *p1 = join(tmp, "state.safetensors"), *p2 = join(tmp, "trainer_state.json"), *p3 = join(tmp, "steps.csv"),
         *p4 = join(tmp, "epoch_results.csv");
    if (!p1 || !p2 || !p3 || !p4)
        st = lp_err(LP_STATUS_NO_MEMORY, "checkpoint: out of memory");
    if (st == LP_OK)
        st = write_state(p1, model, o);
    if (st == LP_OK)
        st = lp_rundir_write_steps(p3, h);
    if (st == LP_OK)
        st = lp_rundir_write_epochs(p4, h);
    if (st == LP_OK) /* its presence marks a complete checkpoint */
        st = write_trainer_state(p2, c, o, s);
    if (st == LP_OK) /* of what is on disk, before the rename makes it a checkpoint */
        st = lp_ckpt_sum_write(tmp);
    free(p1), free(p2), free(p3), free(p4);
    if (st == LP_OK) {
        rm_tree(fin); /* a resumed run may rewrite a step it restarted from */
        if (rename(tmp, fin) != 0)
            st = lp_err(LP_STATUS_IO, "%s: cannot rename checkpoint into place: %s", fin, strerror(errno));
    }
    if (st != LP_OK) {
        rm_tree(tmp);
        return lp_err_wrap(st, "checkpoint at step %lld", (long long)s->step);
    }
    prune(ckdir, c->keep_checkpoints);
    return LP_OK;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* path is a checkpoint (has trainer_state.json) or a run dir (its newest checkpoint below
 * step `below`; *is_run says which). */
static lp_status resolve(const char *path, long long below, char *out, size_t cap, bool *is_run)
{
    *is_run = false;
    char p[4096];
    snprintf(p, sizeof p, "%s/trainer_state.json", path);
    if (is_file(p)) {
        snprintf(out, cap, "%s", path);
        return LP_OK;
    }
    char ckdir[4096];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", path);
    DIR *d = opendir(ckdir);
    if (!d)
        return lp_err(LP_STATUS_NOT_FOUND, "--resume %s: not a checkpoint (no trainer_state.json) and no checkpoints/ in it",
                      path);
    *is_run = true;
    long long best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long v;
        char tail;
        if (sscanf(e->d_name, "step-%lld%c", &v, &tail) == 1 && v > best && v < below) {
            if (snprintf(p, sizeof p, "%s/%s/trainer_state.json", ckdir, e->d_name) < (int)sizeof p && is_file(p))
                best = v;
        }
    }
    closedir(d);
    if (best < 0)
        return lp_err(LP_STATUS_NOT_FOUND, "--resume %s: no complete checkpoint in %s", path, ckdir);
    snprintf(out, cap, "%s/step-%lld", ckdir, best);
    return LP_OK;
}

static int get_u64(const cJSON *o, const char *k, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsString(v))
        return 0;
    char *end;
    errno = 0;
    *out = strtoull(v->valuestring, &end, 10);
    return errno == 0 && *end == 0 && end != v->valuestring;
}

/* A count: an integer in [0, 9e15] (exact as a double) */
static int get_i64(const cJSON *o, const char *k, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9e15) || v->valuedouble != floor(v->valuedouble))
        return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

lp_status lp_ckpt_state_parse(const char *text, size_t len, const char *path, const lp_train_config *c, lp_optim *o,
                              lp_ckpt_state *s)
{
    bool oom;
    cJSON *j = lp_json_parse(text, len, NULL, &oom);
    if (!j)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing the JSON", path)
                   : lp_err(LP_STATUS_FORMAT, "%s: not valid JSON", path);
    const cJSON *rng = cJSON_GetObjectItemCaseSensitive(j, "dropout_rng");
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(j, "settings");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    const cJSON *el = cJSON_GetObjectItemCaseSensitive(j, "elapsed_s");
    uint64_t seed;
    int64_t bs, ga, msl;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT) || !get_i64(j, "step", &s->step) ||
        !get_i64(j, "optimizer_step", &o->t) || !get_i64(j, "epoch", &s->pos.epoch) ||
        !get_i64(j, "batch_in_epoch", &s->pos.batch) || !get_u64(rng, "seed", &s->dropout_rng.seed) ||
        !get_u64(rng, "stream", &s->dropout_rng.stream) || !get_u64(rng, "offset", &s->dropout_rng.offset) ||
        !get_u64(set, "seed", &seed) || !get_i64(set, "batch_size", &bs) || !get_i64(set, "grad_accum", &ga) ||
        !get_i64(set, "max_seq_len", &msl) || !cJSON_IsNumber(el) ||
        !(el->valuedouble >= 0 && el->valuedouble <= 1e12)) { // 1e999 parses as inf
        cJSON_Delete(j);
        return lp_err(LP_STATUS_FORMAT, "%s: missing or bad field (format %s expected)", path, CKPT_FORMAT);
    }
    s->elapsed_s = el->valuedouble;
    // the method decides which tensors the checkpoint holds (every weight, or adapters and head)
    const cJSON *me = cJSON_GetObjectItemCaseSensitive(set, "method");
    bool other_method = cJSON_IsString(me) && strcmp(me->valuestring, lp_train_method_name(c->method)) != 0;
    cJSON_Delete(j);
    const char *bad = seed != c->seed ? "--seed"
                      : bs != c->batch_size ? "--batch-size"
                      : ga != c->grad_accum ? "--grad-accum"
                      : msl != c->max_seq_len ? "--max-seq-len"
                      : other_method ? "--method"
                                              : NULL;
    if (bad)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: the checkpoint was made with another %s; resume with the same settings",
                      path, bad);
    return LP_OK;
}

static lp_status read_trainer_state(const char *path, const lp_train_config *c, lp_optim *o, lp_ckpt_state *s)
{
    char *text = NULL;
    size_t len = 0;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st == LP_OK)
        st = lp_ckpt_state_parse(text, len, path, c, o, s);
    free(text);
    return st;
}

/* Elements [lo, lo + n) of tensor name (numel f32 elements) into dst. */
static lp_status copy_part(const lp_st_file *f, const char *name, float *dst, int64_t numel, int64_t lo, int64_t n,
                           const char *path)
{
    const lp_st_tensor *t = lp_st_find(f, name);
    if (!t)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor %s missing", path, name);
    if (t->dtype != LP_ST_DTYPE_F32 || (int64_t)t->numel != numel)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor %s has the wrong dtype or size", path, name);
    memcpy(dst, (const float *)t->data + lo, (size_t)n * sizeof(float));
    return LP_OK;
}

static lp_status copy_tensor(const lp_st_file *f, const char *name, float *dst, int64_t numel, const char *path)
{
    return copy_part(f, name, dst, numel, 0, numel, path);
}

lp_status lp_ckpt_load(const char *path, const lp_train_config *c, lp_model *model, lp_optim *o, lp_ckpt_state *s,
                       lp_history *h, char *resolved, size_t cap)
{
    bool is_run, sums;
    lp_status st = resolve(path, LLONG_MAX, resolved, cap, &is_run);
    if (st != LP_OK)
        return st;
    st = lp_ckpt_sum_verify(resolved, &sums);
    if (st == LP_STATUS_NO_MEMORY) // not damage: no fallback to an older checkpoint
        return st;
    if (st != LP_OK) {
        /* a run directory falls back to its newest checkpoint that verifies */
        char first[1024];
        snprintf(first, sizeof first, "%s", lp_err_msg());
        while (is_run && st != LP_OK) {
            long long step = -1;
            const char *s_at = strrchr(resolved, '/');
            if (!s_at || sscanf(s_at + 1, "step-%lld", &step) != 1 ||
                resolve(path, step, resolved, cap, &is_run) != LP_OK)
                break;
            if ((st = lp_ckpt_sum_verify(resolved, &sums)) == LP_STATUS_NO_MEMORY)
                return st;
        }
        if (st != LP_OK)
            return lp_err(LP_STATUS_FORMAT, "--resume %s: %s; %s", path, first,
                          is_run ? "no older checkpoint verifies" : "the checkpoint cannot be resumed");
        /* even with --quiet: the run continues from an older step than asked for */
        fprintf(stderr, "loupe: %s\nloupe: resuming from the previous good checkpoint %s\n", first, resolved);
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/trainer_state.json", resolved);
    if ((st = read_trainer_state(p, c, o, s)) != LP_OK)
        return st;
    snprintf(p, sizeof p, "%s/state.safetensors", resolved);
    lp_st_file *f;
    if ((st = lp_st_open(p, &f)) != LP_OK)
        return st;
    size_t n;
    const lp_model_param *mp = lp_model_params(model, &n);
    char name[512];
    for (size_t i = 0; i < n && st == LP_OK; i++) {
        st = copy_tensor(f, mp[i].name, mp[i].data, mp[i].numel, p);
        if (st == LP_OK && o->m[i]) {
            snprintf(name, sizeof name, "optimizer.exp_avg.%s", mp[i].name);
            st = copy_tensor(f, name, o->m[i], mp[i].numel, p);
            snprintf(name, sizeof name, "optimizer.exp_avg_sq.%s", mp[i].name);
            if (st == LP_OK)
                st = copy_tensor(f, name, o->v[i], mp[i].numel, p);
        }
    }
    for (size_t k = 0; k < o->n_seg && st == LP_OK; k++) { /* ZeRO-1: this rank's runs of the state */
        const lp_optim_seg *g = &o->seg[k];
        snprintf(name, sizeof name, "optimizer.exp_avg.%s", mp[g->param].name);
        st = copy_part(f, name, o->m_shard + g->state, mp[g->param].numel, g->lo, g->n, p);
        snprintf(name, sizeof name, "optimizer.exp_avg_sq.%s", mp[g->param].name);
        if (st == LP_OK)
            st = copy_part(f, name, o->v_shard + g->state, mp[g->param].numel, g->lo, g->n, p);
    }
    lp_st_close(f);
    if (st != LP_OK)
        return st;
    lp_model_rng_set(model, &s->dropout_rng);
    snprintf(p, sizeof p, "%s/steps.csv", resolved);
    if ((st = lp_rundir_read_steps(p, h)) != LP_OK)
        return st;
    if (h->n_steps != (size_t)s->step)
        return lp_err(LP_STATUS_FORMAT, "%s: %zu rows for a checkpoint at step %lld", p, h->n_steps, (long long)s->step);
    snprintf(p, sizeof p, "%s/epoch_results.csv", resolved);
    return lp_rundir_read_epochs(p, h);
}

lp_status lp_checkpoint_verify(const char *dir, bool *has_checksums)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/trainer_state.json", dir);
    if (!is_file(p))
        return lp_err(LP_STATUS_NOT_FOUND, "%s: not a checkpoint (no trainer_state.json)", dir);
    return lp_ckpt_sum_verify(dir, has_checksums);
}
