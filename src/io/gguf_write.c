/* A GGUF (version 3) writer: metadata key-values (scalars, strings, arrays, nested
 * arrays, or values copied from an open file) and tensors (owned copies of their bytes),
 * written at finish as llama.cpp lays them out: header, key-values, tensor infos, padding
 * to general.alignment, then each tensor's data at an aligned offset. The file is written
 * under "<path>.tmp" and renamed, so a reader never sees half a file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "loupe/kernels.h"

typedef struct wtensor {
    char *name;
    uint32_t ndim, type;
    int64_t ne[LP_GGUF_MAX_DIMS];
    uint8_t *data;
    uint64_t nbytes;
} wtensor;

struct lp_gguf_writer {
    char *path;
    uint32_t alignment;
    uint8_t *kv; /* encoded key-values */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    wtensor *t;
    size_t n_t, cap_t;
    bool oom;
};

static void put(lp_gguf_writer *w, const void *p, size_t n)
{
    if (w->oom)
        return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? 2 * w->kv_cap : 4096;
        while (cap < w->kv_len + n)
            cap *= 2;
        uint8_t *b = lp_realloc(w->kv, cap);
        if (!b) {
            w->oom = true;
            return;
        }
        w->kv = b;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void put_u32(lp_gguf_writer *w, uint32_t x)
{
    uint8_t b[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
    put(w, b, 4);
}

static void put_u64(lp_gguf_writer *w, uint64_t x)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(x >> (8 * i));
    put(w, b, 8);
}

static void put_str(lp_gguf_writer *w, const char *s, uint64_t n)
{
    put_u64(w, n);
    put(w, s, (size_t)n);
}

/* Bytes of one element of a numeric or bool GGUF type; 0 for string / array. */
static size_t elem_size(lp_gguf_type t)
{
    switch (t) {
    case LP_GGUF_TYPE_UINT8:
    case LP_GGUF_TYPE_INT8:
    case LP_GGUF_TYPE_BOOL:
        return 1;
    case LP_GGUF_TYPE_UINT16:
    case LP_GGUF_TYPE_INT16:
        return 2;
    case LP_GGUF_TYPE_UINT32:
    case LP_GGUF_TYPE_INT32:
    case LP_GGUF_TYPE_FLOAT32:
        return 4;
    case LP_GGUF_TYPE_UINT64:
    case LP_GGUF_TYPE_INT64:
    case LP_GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* The value without its type tag (the caller wrote it). */
static void put_scalar(lp_gguf_writer *w, const lp_gguf_value *v)
{
    uint8_t b[8] = {0};
    const size_t n = elem_size(v->type);
    switch (v->type) {
    case LP_GGUF_TYPE_FLOAT32: {
        float f = (float)v->f;
        memcpy(b, &f, 4);
        break;
    }
    case LP_GGUF_TYPE_FLOAT64:
        memcpy(b, &v->f, 8);
        break;
    case LP_GGUF_TYPE_BOOL:
        b[0] = v->b;
        break;
    case LP_GGUF_TYPE_INT8:
    case LP_GGUF_TYPE_INT16:
    case LP_GGUF_TYPE_INT32:
    case LP_GGUF_TYPE_INT64:
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)((uint64_t)v->i >> (8 * i));
        break;
    default:
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)(v->u >> (8 * i));
    }
    put(w, b, n);
}

static void put_value(lp_gguf_writer *w, const lp_gguf_value *v)
{
    if (v->type == LP_GGUF_TYPE_STRING) {
        put_str(w, v->str.s, v->str.len);
    } else if (v->type == LP_GGUF_TYPE_ARRAY) {
        put_u32(w, (uint32_t)v->elem_type);
        put_u64(w, v->n);
        if (v->elem_type == LP_GGUF_TYPE_STRING)
            for (uint64_t i = 0; i < v->n; i++)
                put_str(w, v->strs[i].s, v->strs[i].len);
        else if (v->elem_type == LP_GGUF_TYPE_ARRAY)
            for (uint64_t i = 0; i < v->n; i++)
                put_value(w, &v->items[i]);
        else
            put(w, v->raw, (size_t)(v->n * elem_size(v->elem_type)));
    } else {
        put_scalar(w, v);
    }
}

lp_status lp_gguf_writer_init(lp_gguf_writer **out, const char *path, uint32_t alignment)
{
    *out = NULL;
    if (!alignment || alignment % 8)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: GGUF alignment %u is not a positive multiple of 8", path,
                      alignment);
    lp_gguf_writer *w = lp_calloc(1, sizeof *w);
    if (!w || !(w->path = lp_strdup(path))) {
        free(w);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    w->alignment = alignment;
    *out = w;
    return LP_OK;
}

lp_status lp_gguf_writer_add_kv(lp_gguf_writer *w, const char *key, const lp_gguf_value *v)
{
    if (v->type >= LP_GGUF_TYPE__COUNT || (v->type == LP_GGUF_TYPE_ARRAY && v->elem_type >= LP_GGUF_TYPE__COUNT))
        return lp_err(LP_STATUS_INVALID_ARG, "%s: metadata '%s' has an invalid type", w->path, key);
    put_str(w, key, strlen(key));
    put_u32(w, (uint32_t)v->type);
    put_value(w, v);
    w->n_kv++;
    return w->oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", w->path) : LP_OK;
}

lp_status lp_gguf_writer_add_u32(lp_gguf_writer *w, const char *key, uint32_t x)
{
    lp_gguf_value v = {.type = LP_GGUF_TYPE_UINT32, .u = x};
    return lp_gguf_writer_add_kv(w, key, &v);
}

lp_status lp_gguf_writer_add_str(lp_gguf_writer *w, const char *key, const char *s)
{
    lp_gguf_value v = {.type = LP_GGUF_TYPE_STRING, .str = {s, strlen(s)}};
    return lp_gguf_writer_add_kv(w, key, &v);
}

lp_status lp_gguf_writer_add_tensor(lp_gguf_writer *w, const char *name, uint32_t ndim, const int64_t *ne,
                                    uint32_t type, const void *data, uint64_t nbytes)
{
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(type);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < ndim && d < LP_GGUF_MAX_DIMS; d++)
        numel *= ne[d] > 0 ? (uint64_t)ne[d] : 0;
    if (!tt || ndim < 1 || ndim > LP_GGUF_MAX_DIMS || !numel || ne[0] % tt->block ||
        numel / (uint64_t)tt->block * (uint64_t)tt->bytes != nbytes)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor '%s': %llu bytes do not hold its shape as %s", w->path,
                      name, (unsigned long long)nbytes, tt ? tt->name : "an unknown type");
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *t = lp_realloc(w->t, cap * sizeof *t);
        if (!t)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", w->path);
        w->t = t;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = lp_strdup(name);
    t->data = lp_malloc(nbytes);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory (%llu bytes for '%s')", w->path,
                      (unsigned long long)nbytes, name);
    }
    memcpy(t->data, data, nbytes);
    t->ndim = ndim;
    t->type = type;
    t->nbytes = nbytes;
    for (uint32_t d = 0; d < ndim; d++)
        t->ne[d] = ne[d];
    w->n_t++;
    return LP_OK;
}

static uint64_t pad_to(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

lp_status lp_gguf_writer_finish(lp_gguf_writer *w)
{
    /* tensor infos after the key-values, offsets relative to the aligned data section */
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(w, t->name, strlen(t->name));
        put_u32(w, t->ndim);
        for (uint32_t d = 0; d < t->ndim; d++)
            put_u64(w, (uint64_t)t->ne[d]);
        put_u32(w, t->type);
        put_u64(w, off);
        off = pad_to(off + t->nbytes, w->alignment);
    }
    if (w->oom)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", w->path);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", w->path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return lp_err(LP_STATUS_IO, "%s: cannot create: %s", tmp, strerror(errno));
    static const uint8_t zeros[256];
    uint8_t hdr[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    for (int i = 0; i < 8; i++) {
        hdr[8 + i] = (uint8_t)((uint64_t)w->n_t >> (8 * i));
        hdr[16 + i] = (uint8_t)(w->n_kv >> (8 * i));
    }
    bool good = fwrite(hdr, 1, 24, f) == 24 && fwrite(w->kv, 1, w->kv_len, f) == w->kv_len;
    uint64_t pos = 24 + w->kv_len;
    for (size_t i = 0; good && i <= w->n_t; i++) {
        uint64_t gap = pad_to(pos, w->alignment) - pos; /* before each tensor's data */
        while (good && gap) {
            size_t k = gap < sizeof zeros ? (size_t)gap : sizeof zeros;
            good = fwrite(zeros, 1, k, f) == k;
            gap -= k;
            pos += k;
        }
        if (i < w->n_t && good) {
            good = fwrite(w->t[i].data, 1, (size_t)w->t[i].nbytes, f) == w->t[i].nbytes;
            pos += w->t[i].nbytes;
        }
    }
    good = fflush(f) == 0 && good;
    int err = errno;
    if (fclose(f) != 0 && good) {
        good = false;
        err = errno;
    }
    if (!good) {
        remove(tmp);
        return lp_err(LP_STATUS_IO, "%s: write failed: %s", tmp, strerror(err));
    }
    if (rename(tmp, w->path) != 0) {
        err = errno;
        remove(tmp);
        return lp_err(LP_STATUS_IO, "%s: cannot rename %s into place: %s", w->path, tmp, strerror(err));
    }
    return LP_OK;
}

void lp_gguf_writer_free(lp_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    free(w->kv);
    free(w->path);
    free(w);
}
