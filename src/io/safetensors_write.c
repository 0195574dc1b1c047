/* safetensors writer: lays tensors out as the reference writer does (descending dtype
 * size, then name; header space-padded to 8 bytes so data is 8-byte aligned) and writes
 * through lp_atomic_* so a failed write never leaves a file under the final name. */
#include "io_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + n + 1 > cap)
            cap *= 2;
        char *q = lp_realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_printf(sbuf *b, const char *fmt, ...) LP_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[96];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        sb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* A JSON string literal; control characters escaped as \u00XX. */
static void sb_json_str(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_put(b, e, 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static _Thread_local const lp_st_write_tensor *order_ctx;

static int cmp_layout(const void *a, const void *b)
{
    const lp_st_write_tensor *x = &order_ctx[*(const size_t *)a], *y = &order_ctx[*(const size_t *)b];
    size_t sx = lp_st_dtype_size(x->dtype), sy = lp_st_dtype_size(y->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static lp_status check_input(const char *path, const lp_st_write_tensor *t, size_t n, const char *const *meta,
                             size_t n_meta, uint64_t *nbytes)
{
    for (size_t i = 0; i < n; i++) {
        if (!t[i].name || !t[i].name[0])
            return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor #%zu has no name", path, i);
        if (!strcmp(t[i].name, "__metadata__"))
            return lp_err(LP_STATUS_INVALID_ARG, "%s: '__metadata__' cannot name a tensor", path);
        if (!lp_io_utf8_valid((const uint8_t *)t[i].name, strlen(t[i].name)))
            return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor #%zu: name is not UTF-8", path, i);
        if (lp_st_dtype_size(t[i].dtype) == 0)
            return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor '%s': invalid dtype %d", path, t[i].name,
                          (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > LP_ST_MAX_DIMS || (t[i].ndim > 0 && !t[i].shape))
            return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor '%s': invalid ndim %d", path, t[i].name, t[i].ndim);
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] < 0)
                return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor '%s': negative dimension", path, t[i].name);
            uint64_t v = (uint64_t)t[i].shape[d];
            if (v && numel > UINT64_MAX / v / 8)
                return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor '%s': shape too large", path, t[i].name);
            numel *= v;
        }
        nbytes[i] = numel * lp_st_dtype_size(t[i].dtype);
        if (nbytes[i] && !t[i].data)
            return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor '%s': no data", path, t[i].name);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name))
                return lp_err(LP_STATUS_INVALID_ARG, "%s: tensor '%s' given twice", path, t[i].name);
    }
    for (size_t i = 0; i < 2 * n_meta; i++)
        if (!meta[i] || !lp_io_utf8_valid((const uint8_t *)meta[i], strlen(meta[i])))
            return lp_err(LP_STATUS_INVALID_ARG, "%s: metadata entry %zu is NULL or not UTF-8", path, i / 2);
    for (size_t i = 0; i < n_meta; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(meta[2 * i], meta[2 * j]))
                return lp_err(LP_STATUS_INVALID_ARG, "%s: metadata key '%s' given twice", path, meta[2 * i]);
    return LP_OK;
}

lp_status lp_st_write(const char *path, const lp_st_write_tensor *tensors, size_t n, const char *const *meta,
                      size_t n_meta)
{
    uint64_t *nbytes = lp_calloc(n + 1, sizeof *nbytes);
    size_t *order = lp_calloc(n + 1, sizeof *order);
    sbuf h = {0};
    lp_status st = LP_OK;
    if (!nbytes || !order) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    if ((st = check_input(path, tensors, n, meta, n_meta, nbytes)) != LP_OK)
        goto out;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    order_ctx = tensors;
    qsort(order, n, sizeof *order, cmp_layout);

    sb_put(&h, "{", 1);
    bool first = true;
    if (n_meta) {
        sb_put(&h, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < n_meta; i++) {
            if (i)
                sb_put(&h, ",", 1);
            sb_json_str(&h, meta[2 * i]);
            sb_put(&h, ":", 1);
            sb_json_str(&h, meta[2 * i + 1]);
        }
        sb_put(&h, "}", 1);
        first = false;
    }
    uint64_t pos = 0;
    for (size_t k = 0; k < n; k++) {
        const lp_st_write_tensor *t = &tensors[order[k]];
        if (!first)
            sb_put(&h, ",", 1);
        first = false;
        sb_json_str(&h, t->name);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", lp_st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            sb_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)pos,
                  (unsigned long long)(pos + nbytes[order[k]]));
        pos += nbytes[order[k]];
    }
    sb_put(&h, "}", 1);
    while (!h.oom && h.n % 8 != 0)
        sb_put(&h, " ", 1);
    if (h.oom) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory building the header", path);
        goto out;
    }
    if (h.n > LP_ST_MAX_HEADER_SIZE) {
        st = lp_err(LP_STATUS_INVALID_ARG, "%s: header would be %zu bytes, over the 100 MB limit", path, h.n);
        goto out;
    }

    lp_atomic_file af;
    if ((st = lp_atomic_open(&af, path)) != LP_OK)
        goto out;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    bool ok = fwrite(len8, 1, 8, af.fp) == 8 && fwrite(h.p, 1, h.n, af.fp) == h.n;
    for (size_t k = 0; ok && k < n; k++) {
        size_t nb = (size_t)nbytes[order[k]];
        ok = nb == 0 || fwrite(tensors[order[k]].data, 1, nb, af.fp) == nb;
    }
    if (!ok) {
        int e = errno;
        lp_atomic_abort(&af);
        st = lp_err(LP_STATUS_IO, "%s: write failed: %s", path, strerror(e));
        goto out;
    }
    st = lp_atomic_commit(&af);
out:
    free(h.p);
    free(nbytes);
    free(order);
    return st;
}
