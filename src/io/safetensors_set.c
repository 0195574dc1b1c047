/* A model's weights as one set of tensors: a single model.safetensors or a sharded
 * checkpoint described by model.safetensors.index.json ({"metadata": {...},
 * "weight_map": {"tensor": "model-00001-of-00002.safetensors", ...}}). */
#include "io_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct lp_st_set {
    size_t nfiles;
    lp_st_file **files;
    size_t n;
    const lp_st_tensor **order;   /* file by file, offset order */
    const lp_st_tensor **by_name; /* sorted by name */
};

char *lp_io_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = lp_malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

void lp_st_set_close(lp_st_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nfiles; i++)
        lp_st_close(s->files[i]);
    free(s->files);
    free(s->order);
    free(s->by_name);
    free(s);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const lp_st_tensor *const *)a)->name, (*(const lp_st_tensor *const *)b)->name);
}

/* Builds the combined views once every file is open; a name in two files is an error. */
static lp_status set_finish(lp_st_set *s, const char *label)
{
    for (size_t i = 0; i < s->nfiles; i++)
        s->n += lp_st_count(s->files[i]);
    s->order = lp_calloc(s->n + 1, sizeof *s->order);
    s->by_name = lp_calloc(s->n + 1, sizeof *s->by_name);
    if (!s->order || !s->by_name)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", label);
    size_t k = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        for (size_t j = 0; j < lp_st_count(s->files[i]); j++)
            s->order[k++] = lp_st_at(s->files[i], j);
    memcpy(s->by_name, s->order, s->n * sizeof *s->order);
    qsort(s->by_name, s->n, sizeof *s->by_name, cmp_tensor_name);
    for (size_t i = 1; i < s->n; i++)
        if (!strcmp(s->by_name[i]->name, s->by_name[i - 1]->name))
            return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' is in two shards (%s and %s)", label,
                          s->by_name[i]->name, s->by_name[i - 1]->file, s->by_name[i]->file);
    return LP_OK;
}

void lp_st_index_free(lp_st_index *ix)
{
    for (size_t i = 0; i < ix->n_shards; i++)
        free(ix->shards[i]);
    free(ix->shards);
    for (size_t i = 0; i < ix->n_tensors; i++)
        free(ix->tensors[i]);
    free(ix->tensors);
    free(ix->shard_of);
    memset(ix, 0, sizeof *ix);
}

lp_status lp_st_index_parse(const char *text, size_t len, const char *path, lp_st_index *ix)
{
    memset(ix, 0, sizeof *ix);
    bool oom;
    cJSON *root = lp_json_parse(text, len, NULL, &oom);
    if (!root)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing JSON", path)
                   : lp_err(LP_STATUS_FORMAT, "%s: not valid JSON", path);
    lp_status st = LP_OK;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: missing \"weight_map\" object", path);
        goto out;
    }
    size_t cap = (size_t)cJSON_GetArraySize(wm);
    ix->shards = lp_calloc(cap + 1, sizeof *ix->shards);
    ix->tensors = lp_calloc(cap + 1, sizeof *ix->tensors);
    ix->shard_of = lp_calloc(cap + 1, sizeof *ix->shard_of);
    if (!ix->shards || !ix->tensors || !ix->shard_of) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    /* Distinct shard names, in first-seen order; each must be a plain file name. */
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring[0])
            { st = lp_err(LP_STATUS_FORMAT, "%s: weight_map['%s'] is not a file name", path, e->string); goto out; }
        const char *fn = e->valuestring;
        if (strchr(fn, '/') || !strcmp(fn, "..") || !strcmp(fn, ".")) {
            st = lp_err(LP_STATUS_FORMAT, "%s: weight_map['%s'] = '%s': shard must be a file name in the same directory",
                        path, e->string, fn);
            goto out;
        }
        size_t j = 0;
        while (j < ix->n_shards && strcmp(ix->shards[j], fn))
            j++;
        if (j == ix->n_shards && !(ix->shards[ix->n_shards++] = lp_strdup(fn))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        ix->shard_of[ix->n_tensors] = j;
        if (!(ix->tensors[ix->n_tensors++] = lp_strdup(e->string))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
    }
    if (ix->n_shards == 0)
        st = lp_err(LP_STATUS_FORMAT, "%s: weight_map is empty", path);
out:
    cJSON_Delete(root);
    if (st != LP_OK)
        lp_st_index_free(ix);
    return st;
}

static lp_status open_index(lp_st_set *s, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    lp_st_index ix;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st != LP_OK)
        return st;
    st = lp_st_index_parse(text, len, path, &ix);
    free(text);
    if (st != LP_OK)
        return st;
    char *dir = lp_strdup(path);
    if (!dir) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        strcpy(dir, ".");
    if (!(s->files = lp_calloc(ix.n_shards + 1, sizeof *s->files))) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    for (size_t j = 0; j < ix.n_shards; j++) {
        char *p = lp_io_path_join(dir, ix.shards[j]);
        if (!p) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto out;
        }
        st = lp_st_open(p, &s->files[s->nfiles]);
        free(p);
        if (st != LP_OK) {
            lp_err_wrap(st, "%s: shard %zu of %zu", path, j + 1, ix.n_shards);
            goto out;
        }
        s->nfiles++;
    }
    /* Every tensor the index places in a shard must be there. */
    for (size_t i = 0; i < ix.n_tensors; i++) {
        if (!lp_st_find(s->files[ix.shard_of[i]], ix.tensors[i])) {
            st = lp_err(LP_STATUS_FORMAT, "%s: index places tensor '%s' in %s, but that shard does not hold it", path,
                        ix.tensors[i], ix.shards[ix.shard_of[i]]);
            goto out;
        }
    }
    st = set_finish(s, path);
out:
    free(dir);
    lp_st_index_free(&ix);
    return st;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

lp_status lp_st_set_open(const char *path, lp_st_set **out)
{
    *out = NULL;
    lp_st_set *s = lp_calloc(1, sizeof *s);
    if (!s)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    lp_status st;
    if (has_suffix(path, ".json")) {
        st = open_index(s, path);
    } else {
        s->files = lp_calloc(1, sizeof *s->files);
        if (!s->files)
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        else if ((st = lp_st_open(path, &s->files[0])) == LP_OK) {
            s->nfiles = 1;
            st = set_finish(s, path);
        }
    }
    if (st != LP_OK) {
        lp_st_set_close(s);
        return st;
    }
    *out = s;
    return LP_OK;
}

lp_status lp_st_set_from_file(lp_st_file *f, const char *label, lp_st_set **out)
{
    *out = NULL;
    lp_st_set *s = lp_calloc(1, sizeof *s);
    if (!s || !(s->files = lp_calloc(1, sizeof *s->files))) {
        free(s);
        lp_st_close(f);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", label);
    }
    s->files[0] = f;
    s->nfiles = 1;
    lp_status st = set_finish(s, label);
    if (st != LP_OK) {
        lp_st_set_close(s);
        return st;
    }
    *out = s;
    return LP_OK;
}

lp_status lp_st_set_open_dir(const char *dir, lp_st_set **out)
{
    *out = NULL;
    static const char *const candidates[] = {"model.safetensors.index.json", "model.safetensors"};
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return lp_err(LP_STATUS_NOT_FOUND, "%s: not a directory", dir);
    for (size_t i = 0; i < 2; i++) {
        char *p = lp_io_path_join(dir, candidates[i]);
        if (!p)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
        if (stat(p, &sb) == 0) {
            lp_status st = lp_st_set_open(p, out);
            free(p);
            return st;
        }
        free(p);
    }
    return lp_err(LP_STATUS_NOT_FOUND,
                  "%s: no model.safetensors or model.safetensors.index.json (only safetensors weights are read; "
                  "convert pytorch_model.bin first)",
                  dir);
}

size_t lp_st_set_count(const lp_st_set *s) { return s->n; }
const lp_st_tensor *lp_st_set_at(const lp_st_set *s, size_t i) { return i < s->n ? s->order[i] : NULL; }
size_t lp_st_set_file_count(const lp_st_set *s) { return s->nfiles; }
const lp_st_file *lp_st_set_file(const lp_st_set *s, size_t i) { return i < s->nfiles ? s->files[i] : NULL; }

const lp_st_tensor *lp_st_set_find(const lp_st_set *s, const char *name)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, s->by_name[mid]->name);
        if (c == 0)
            return s->by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

uint64_t lp_st_set_disk_bytes(const lp_st_set *s)
{
    uint64_t t = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        t += lp_st_file_size(s->files[i]);
    return t;
}

lp_status lp_st_set_open_weights(const char *dir, lp_st_set **out)
{
    lp_status st = lp_st_set_open_dir(dir, out);
    struct stat sb;
    if (st != LP_STATUS_NOT_FOUND || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return st;
    static const char *const pickles[] = {"pytorch_model.bin", "pytorch_model.bin.index.json"};
    for (size_t i = 0; i < 2; i++) {
        char *p = lp_io_path_join(dir, pickles[i]);
        if (!p)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
        bool pickle = stat(p, &sb) == 0;
        free(p);
        if (pickle)
            return lp_err(LP_STATUS_UNSUPPORTED,
                          "%s: only pytorch_model.bin (pickle) weights; loupe reads safetensors "
                          "(convert with transformers: model.save_pretrained(dir, safe_serialization=True))",
                          dir);
    }
    lp_err_clear();
    return LP_OK;
}
