/* GGUF reader: maps the file and validates header, metadata and tensor infos before any
 * view is handed out, so every later read (a string, an array element, a tensor's bytes)
 * is known to lie inside the file. Every size computation is overflow-checked. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loupe/kernels.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF views need a little-endian host");

#define GGUF_MAX_DEPTH 8          /* nested arrays deeper than this are refused */
#define GGUF_DEFAULT_ALIGNMENT 32 /* when general.alignment is absent */

struct lp_gguf_file {
    char *path;
    const uint8_t *base;
    size_t len;
    bool mapped;
    uint32_t version;
    size_t n_kv, n_tensors;
    lp_gguf_kv *kv;
    size_t *kv_by_key;
    lp_gguf_tensor *tensors;
    size_t *t_by_name;
    uint64_t alignment, data_start;
};

/* Overflow-checked size arithmetic (base.h has no shared helper on this branch yet). */
static bool ck_add(uint64_t a, uint64_t b, uint64_t *r)
{
    return !__builtin_add_overflow(a, b, r);
}
static bool ck_mul(uint64_t a, uint64_t b, uint64_t *r)
{
    return !__builtin_mul_overflow(a, b, r);
}

typedef struct cursor {
    lp_gguf_file *g;
    uint64_t pos;
    const char *what; /* what is being read, for "truncated" messages */
} cursor;

static lp_status truncated(const cursor *c, uint64_t need)
{
    return lp_err(LP_STATUS_FORMAT, "%s: truncated file: %s needs %llu bytes at offset %llu, file has %zu",
                  c->g->path, c->what, (unsigned long long)need, (unsigned long long)c->pos, c->g->len);
}

static lp_status take(cursor *c, uint64_t n, const uint8_t **p)
{
    uint64_t end;
    if (!ck_add(c->pos, n, &end) || end > c->g->len)
        return truncated(c, n);
    *p = c->g->base + c->pos;
    c->pos = end;
    return LP_OK;
}

static lp_status rd_u32(cursor *c, uint32_t *v)
{
    const uint8_t *p = NULL;
    lp_status st = take(c, 4, &p);
    if (st == LP_OK)
        memcpy(v, p, 4);
    return st;
}

static lp_status rd_u64(cursor *c, uint64_t *v)
{
    const uint8_t *p = NULL;
    lp_status st = take(c, 8, &p);
    if (st == LP_OK)
        memcpy(v, p, 8);
    return st;
}

static lp_status rd_str(cursor *c, lp_gguf_str *s)
{
    uint64_t n;
    const uint8_t *p = NULL;
    lp_status st = rd_u64(c, &n);
    if (st == LP_OK && (st = take(c, n, &p)) == LP_OK) {
        s->s = (const char *)p;
        s->len = n;
    }
    return st;
}

static const char *const type_names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                         "bool",  "string", "array",  "uint64", "int64",  "float64"};

const char *lp_gguf_type_name(lp_gguf_type t)
{
    return (unsigned)t < LP_GGUF_TYPE__COUNT ? type_names[t] : "?";
}

/* Bytes of one scalar element; 0 for string/array. */
static unsigned scalar_size(lp_gguf_type t)
{
    static const unsigned sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return sz[t];
}

static void scalar_decode(lp_gguf_type t, const uint8_t *p, lp_gguf_value *v)
{
    switch (t) {
    case LP_GGUF_TYPE_UINT8:
        v->u = p[0];
        v->i = (int64_t)v->u;
        break;
    case LP_GGUF_TYPE_INT8:
        v->i = (int8_t)p[0];
        break;
    case LP_GGUF_TYPE_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v->u = x;
        v->i = x;
        break;
    }
    case LP_GGUF_TYPE_INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        v->i = x;
        break;
    }
    case LP_GGUF_TYPE_UINT32: {
        uint32_t x;
        memcpy(&x, p, 4);
        v->u = x;
        v->i = x;
        break;
    }
    case LP_GGUF_TYPE_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        v->i = x;
        break;
    }
    case LP_GGUF_TYPE_FLOAT32: {
        float x;
        memcpy(&x, p, 4);
        v->f = x;
        break;
    }
    case LP_GGUF_TYPE_BOOL:
        v->b = p[0] != 0;
        v->i = v->b;
        break;
    case LP_GGUF_TYPE_UINT64:
        memcpy(&v->u, p, 8);
        v->i = (int64_t)v->u;
        break;
    case LP_GGUF_TYPE_INT64:
        memcpy(&v->i, p, 8);
        break;
    case LP_GGUF_TYPE_FLOAT64:
        memcpy(&v->f, p, 8);
        break;
    default:
        break;
    }
    if (t == LP_GGUF_TYPE_INT8 || t == LP_GGUF_TYPE_INT16 || t == LP_GGUF_TYPE_INT32 ||
        t == LP_GGUF_TYPE_INT64)
        v->u = (uint64_t)v->i;
}

static void value_free(lp_gguf_value *v)
{
    if (v->type != LP_GGUF_TYPE_ARRAY)
        return;
    free(v->strs);
    if (v->items)
        for (uint64_t k = 0; k < v->n; k++)
            value_free(&v->items[k]);
    free(v->items);
}

static lp_status rd_value(cursor *c, lp_gguf_type t, lp_gguf_value *v, const char *key, int depth)
{
    lp_gguf_file *g = c->g;
    memset(v, 0, sizeof *v);
    v->type = t;
    if ((unsigned)t >= LP_GGUF_TYPE__COUNT)
        return lp_err(LP_STATUS_FORMAT, "%s: metadata '%s': unknown value type %u", g->path, key,
                      (unsigned)t);
    const uint8_t *p = NULL;
    lp_status st;
    if (t == LP_GGUF_TYPE_STRING)
        return rd_str(c, &v->str);
    if (t != LP_GGUF_TYPE_ARRAY) {
        if ((st = take(c, scalar_size(t), &p)) == LP_OK)
            scalar_decode(t, p, v);
        return st;
    }
    if (depth >= GGUF_MAX_DEPTH)
        return lp_err(LP_STATUS_FORMAT, "%s: metadata '%s': arrays nested deeper than %d", g->path, key,
                      GGUF_MAX_DEPTH);
    uint32_t et;
    if ((st = rd_u32(c, &et)) != LP_OK || (st = rd_u64(c, &v->n)) != LP_OK)
        return st;
    if (et >= LP_GGUF_TYPE__COUNT)
        return lp_err(LP_STATUS_FORMAT, "%s: metadata '%s': unknown array element type %u", g->path, key, et);
    v->elem_type = (lp_gguf_type)et;
    /* Every element takes at least one byte (strings and arrays at least 8): a count the
     * rest of the file cannot hold is refused before anything is allocated. */
    const uint64_t min_elem = scalar_size(v->elem_type) ? scalar_size(v->elem_type) : 8;
    uint64_t need;
    if (!ck_mul(v->n, min_elem, &need) || need > g->len - c->pos)
        return lp_err(LP_STATUS_FORMAT, "%s: metadata '%s': array of %llu %s elements overflows the file",
                      g->path, key, (unsigned long long)v->n, lp_gguf_type_name(v->elem_type));
    if (scalar_size(v->elem_type)) {
        if ((st = take(c, need, &p)) == LP_OK)
            v->raw = p;
        return st;
    }
    if (v->elem_type == LP_GGUF_TYPE_STRING) {
        if (!(v->strs = lp_malloc((size_t)v->n * sizeof *v->strs + 1)))
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", g->path);
        for (uint64_t k = 0; k < v->n; k++)
            if ((st = rd_str(c, &v->strs[k])) != LP_OK)
                return st;
        return LP_OK;
    }
    if (!(v->items = lp_calloc((size_t)v->n + 1, sizeof *v->items)))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", g->path);
    for (uint64_t k = 0; k < v->n; k++) {
        uint32_t it = LP_GGUF_TYPE_ARRAY;
        v->items[k].type = LP_GGUF_TYPE_ARRAY;
        if ((st = rd_value(c, (lp_gguf_type)it, &v->items[k], key, depth + 1)) != LP_OK)
            return st;
    }
    return LP_OK;
}

static _Thread_local const lp_gguf_file *sort_g;

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(sort_g->kv[*(const size_t *)a].key, sort_g->kv[*(const size_t *)b].key);
}

static int cmp_tn(const void *a, const void *b)
{
    return strcmp(sort_g->tensors[*(const size_t *)a].name, sort_g->tensors[*(const size_t *)b].name);
}

/* A GGUF string as a NUL-terminated copy; embedded NULs are refused (names and keys are
 * looked up as C strings). */
static lp_status str_dup(lp_gguf_file *g, const lp_gguf_str *s, const char *what, char **out)
{
    if (memchr(s->s, '\0', (size_t)s->len))
        return lp_err(LP_STATUS_FORMAT, "%s: %s contains a NUL byte", g->path, what);
    if (!(*out = lp_malloc((size_t)s->len + 1)))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", g->path);
    memcpy(*out, s->s, (size_t)s->len);
    (*out)[s->len] = '\0';
    return LP_OK;
}

static lp_status parse_tensor(cursor *c, lp_gguf_tensor *t)
{
    lp_gguf_file *g = c->g;
    lp_gguf_str name;
    lp_status st;
    c->what = "tensor info";
    if ((st = rd_str(c, &name)) != LP_OK ||
        (st = str_dup(g, &name, "a tensor name", (char **)&t->name)) != LP_OK ||
        (st = rd_u32(c, &t->ndim)) != LP_OK)
        return st;
    if (t->ndim > LP_GGUF_MAX_DIMS)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' has %u dimensions (at most %d)", g->path, t->name,
                      t->ndim, LP_GGUF_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < LP_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if ((uint32_t)d < t->ndim && (st = rd_u64(c, &ne)) != LP_OK)
            return st;
        if (ne > INT64_MAX || !ck_mul(numel, ne, &numel) || numel > INT64_MAX)
            return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': element count overflows", g->path, t->name);
        t->ne[d] = (int64_t)ne;
    }
    t->numel = numel;
    if ((st = rd_u32(c, &t->type)) != LP_OK || (st = rd_u64(c, &t->offset)) != LP_OK)
        return st;
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t->type);
    if (!tt)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': unknown tensor type %u", g->path, t->name, t->type);
    if (t->ne[0] % tt->block)
        return lp_err(LP_STATUS_FORMAT,
                      "%s: tensor '%s': first dimension %lld is not a multiple of the %s block (%d)", g->path,
                      t->name, (long long)t->ne[0], tt->name, tt->block);
    if (!ck_mul(numel / (uint64_t)tt->block, (uint64_t)tt->bytes, &t->nbytes))
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': byte size overflows", g->path, t->name);
    return LP_OK;
}

static lp_status parse(lp_gguf_file *g)
{
    cursor c = {g, 0, "header"};
    const uint8_t *p = NULL;
    lp_status st;
    if ((st = take(&c, 4, &p)) != LP_OK)
        return st;
    if (memcmp(p, "GGUF", 4))
        return lp_err(LP_STATUS_FORMAT, "%s: not a GGUF file (magic is not \"GGUF\")", g->path);
    uint64_t n_tensors, n_kv;
    if ((st = rd_u32(&c, &g->version)) != LP_OK)
        return st;
    if (g->version == 1)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: GGUF version 1 is not supported (2 and 3 are)", g->path);
    if (g->version != 2 && g->version != 3)
        return lp_err(LP_STATUS_FORMAT, "%s: unknown GGUF version %u", g->path, g->version);
    if ((st = rd_u64(&c, &n_tensors)) != LP_OK || (st = rd_u64(&c, &n_kv)) != LP_OK)
        return st;
    /* A kv takes at least 8+4+1 bytes, a tensor info 8+4+4+8: bound the counts by the file
     * before allocating for them. */
    if (n_kv > (g->len - c.pos) / 13 || n_tensors > (g->len - c.pos) / 24)
        return lp_err(LP_STATUS_FORMAT,
                      "%s: truncated file or overflowing counts: %llu metadata entries and %llu tensors "
                      "cannot fit in %zu bytes",
                      g->path, (unsigned long long)n_kv, (unsigned long long)n_tensors, g->len);
    g->kv = lp_calloc((size_t)n_kv + 1, sizeof *g->kv);
    g->kv_by_key = lp_calloc((size_t)n_kv + 1, sizeof *g->kv_by_key);
    g->tensors = lp_calloc((size_t)n_tensors + 1, sizeof *g->tensors);
    g->t_by_name = lp_calloc((size_t)n_tensors + 1, sizeof *g->t_by_name);
    if (!g->kv || !g->kv_by_key || !g->tensors || !g->t_by_name)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", g->path);
    for (uint64_t k = 0; k < n_kv; k++) {
        lp_gguf_str key;
        uint32_t t;
        c.what = "metadata";
        if ((st = rd_str(&c, &key)) != LP_OK ||
            (st = str_dup(g, &key, "a metadata key", (char **)&g->kv[k].key)) != LP_OK)
            return st;
        g->n_kv++;
        if ((st = rd_u32(&c, &t)) != LP_OK ||
            (st = rd_value(&c, (lp_gguf_type)t, &g->kv[k].v, g->kv[k].key, 0)) != LP_OK)
            return st;
    }
    sort_g = g;
    for (size_t k = 0; k < g->n_kv; k++)
        g->kv_by_key[k] = k;
    qsort(g->kv_by_key, g->n_kv, sizeof *g->kv_by_key, cmp_kv);
    for (size_t k = 1; k < g->n_kv; k++)
        if (!strcmp(g->kv[g->kv_by_key[k]].key, g->kv[g->kv_by_key[k - 1]].key))
            return lp_err(LP_STATUS_FORMAT, "%s: duplicate metadata key '%s'", g->path,
                          g->kv[g->kv_by_key[k]].key);
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const lp_gguf_value *al = lp_gguf_get(g, "general.alignment");
    if (al) {
        if (al->type != LP_GGUF_TYPE_UINT32)
            return lp_err(LP_STATUS_FORMAT, "%s: metadata 'general.alignment' is %s, expected uint32",
                          g->path, lp_gguf_type_name(al->type));
        if (al->u == 0 || (al->u & (al->u - 1)))
            return lp_err(LP_STATUS_FORMAT, "%s: general.alignment %llu is not a power of two", g->path,
                          (unsigned long long)al->u);
        g->alignment = al->u;
    }
    for (uint64_t k = 0; k < n_tensors; k++) {
        if ((st = parse_tensor(&c, &g->tensors[k])) != LP_OK) {
            g->n_tensors = k + 1;
            return st;
        }
        g->n_tensors++;
    }
    for (size_t k = 0; k < g->n_tensors; k++)
        g->t_by_name[k] = k;
    qsort(g->t_by_name, g->n_tensors, sizeof *g->t_by_name, cmp_tn);
    for (size_t k = 1; k < g->n_tensors; k++)
        if (!strcmp(g->tensors[g->t_by_name[k]].name, g->tensors[g->t_by_name[k - 1]].name))
            return lp_err(LP_STATUS_FORMAT, "%s: duplicate tensor '%s'", g->path,
                          g->tensors[g->t_by_name[k]].name);
    /* The data section starts at the next multiple of the alignment (no tensors: it may be
     * absent altogether). */
    uint64_t start = c.pos;
    if (!ck_add(start, g->alignment - 1, &start))
        return lp_err(LP_STATUS_FORMAT, "%s: data offset overflows", g->path);
    start &= ~(g->alignment - 1);
    g->data_start = start;
    for (size_t k = 0; k < g->n_tensors; k++) {
        lp_gguf_tensor *t = &g->tensors[k];
        uint64_t at, end;
        if (t->offset % g->alignment)
            return lp_err(LP_STATUS_FORMAT,
                          "%s: tensor '%s': data offset %llu is not a multiple of the alignment %llu",
                          g->path, t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (!ck_add(start, t->offset, &at) || !ck_add(at, t->nbytes, &end) || end > g->len)
            return lp_err(LP_STATUS_FORMAT,
                          "%s: tensor '%s': data [%llu, +%llu) past the end of the file (%zu bytes)", g->path,
                          t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes, g->len);
        t->data = g->base + at;
    }
    return LP_OK;
}

void lp_gguf_close(lp_gguf_file *g)
{
    if (!g)
        return;
    if (g->mapped && g->base)
        munmap((void *)g->base, g->len);
    for (size_t k = 0; k < g->n_kv; k++) {
        free((char *)g->kv[k].key);
        value_free(&g->kv[k].v);
    }
    for (size_t k = 0; k < g->n_tensors; k++)
        free((char *)g->tensors[k].name);
    free(g->kv);
    free(g->kv_by_key);
    free(g->tensors);
    free(g->t_by_name);
    free(g->path);
    free(g);
}

static lp_status finish(lp_gguf_file *g, lp_gguf_file **out)
{
    lp_status st = parse(g);
    if (st != LP_OK) {
        lp_gguf_close(g);
        return st;
    }
    *out = g;
    return LP_OK;
}

lp_status lp_gguf_parse_buffer(const void *buf, size_t len, const char *label, lp_gguf_file **out)
{
    *out = NULL;
    if (!label)
        label = "<buffer>";
    lp_gguf_file *g = lp_calloc(1, sizeof *g);
    if (!g || !(g->path = lp_strdup(label))) {
        free(g);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", label);
    }
    g->base = buf;
    g->len = len;
    return finish(g, out);
}

lp_status lp_gguf_open(const char *path, lp_gguf_file **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lp_err(errno == ENOENT ? LP_STATUS_NOT_FOUND : LP_STATUS_IO, "%s: cannot open: %s", path,
                      strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return lp_err(LP_STATUS_IO, "%s: not a regular file", path);
    }
    lp_gguf_file *g = lp_calloc(1, sizeof *g);
    if (!g || !(g->path = lp_strdup(path))) {
        free(g);
        close(fd);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    g->len = (size_t)sb.st_size;
    if (g->len > 0) {
        void *p = mmap(NULL, g->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            lp_gguf_close(g);
            return lp_err(LP_STATUS_IO, "%s: cannot map: %s", path, strerror(e));
        }
        g->base = p;
        g->mapped = true;
    }
    close(fd);
    return finish(g, out);
}

const char *lp_gguf_path(const lp_gguf_file *g)
{
    return g->path;
}
uint32_t lp_gguf_version(const lp_gguf_file *g)
{
    return g->version;
}
uint64_t lp_gguf_file_size(const lp_gguf_file *g)
{
    return g->len;
}
size_t lp_gguf_kv_count(const lp_gguf_file *g)
{
    return g->n_kv;
}
const lp_gguf_kv *lp_gguf_kv_at(const lp_gguf_file *g, size_t i)
{
    return i < g->n_kv ? &g->kv[i] : NULL;
}
size_t lp_gguf_tensor_count(const lp_gguf_file *g)
{
    return g->n_tensors;
}
const lp_gguf_tensor *lp_gguf_tensor_at(const lp_gguf_file *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const lp_gguf_value *lp_gguf_get(const lp_gguf_file *g, const char *key)
{
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, g->kv[g->kv_by_key[mid]].key);
        if (c == 0)
            return &g->kv[g->kv_by_key[mid]].v;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const lp_gguf_tensor *lp_gguf_find_tensor(const lp_gguf_file *g, const char *name)
{
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, g->tensors[g->t_by_name[mid]].name);
        if (c == 0)
            return &g->tensors[g->t_by_name[mid]];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static bool array_elem(const lp_gguf_value *v, uint64_t idx, lp_gguf_value *e)
{
    if (v->type != LP_GGUF_TYPE_ARRAY || !scalar_size(v->elem_type) || idx >= v->n)
        return false;
    memset(e, 0, sizeof *e);
    e->type = v->elem_type;
    scalar_decode(v->elem_type, v->raw + idx * scalar_size(v->elem_type), e);
    return true;
}

static bool is_float(lp_gguf_type t)
{
    return t == LP_GGUF_TYPE_FLOAT32 || t == LP_GGUF_TYPE_FLOAT64;
}

bool lp_gguf_array_i64(const lp_gguf_value *v, uint64_t idx, int64_t *out)
{
    lp_gguf_value e;
    if (!array_elem(v, idx, &e) || is_float(e.type) || (e.type == LP_GGUF_TYPE_UINT64 && e.u > INT64_MAX))
        return false;
    *out = e.i;
    return true;
}

bool lp_gguf_array_f64(const lp_gguf_value *v, uint64_t idx, double *out)
{
    lp_gguf_value e;
    if (!array_elem(v, idx, &e))
        return false;
    *out = is_float(e.type) ? e.f : e.type == LP_GGUF_TYPE_UINT64 ? (double)e.u : (double)e.i;
    return true;
}

static lp_status get_typed(const lp_gguf_file *g, const char *key, const lp_gguf_value **v)
{
    if (!(*v = lp_gguf_get(g, key)))
        return lp_err(LP_STATUS_NOT_FOUND, "%s: metadata '%s' is missing", g->path, key);
    return LP_OK;
}

static lp_status wrong_type(const lp_gguf_file *g, const char *key, const lp_gguf_value *v, const char *want)
{
    return lp_err(LP_STATUS_FORMAT, "%s: metadata '%s' is %s, expected %s", g->path, key,
                  lp_gguf_type_name(v->type), want);
}

lp_status lp_gguf_get_int(const lp_gguf_file *g, const char *key, int64_t *out)
{
    const lp_gguf_value *v;
    lp_status st = get_typed(g, key, &v);
    if (st != LP_OK)
        return st;
    if (is_float(v->type) || v->type == LP_GGUF_TYPE_STRING || v->type == LP_GGUF_TYPE_ARRAY ||
        v->type == LP_GGUF_TYPE_BOOL)
        return wrong_type(g, key, v, "an integer");
    if (v->type == LP_GGUF_TYPE_UINT64 && v->u > INT64_MAX)
        return lp_err(LP_STATUS_RANGE, "%s: metadata '%s' = %llu is out of range", g->path, key,
                      (unsigned long long)v->u);
    *out = v->i;
    return LP_OK;
}

lp_status lp_gguf_get_float(const lp_gguf_file *g, const char *key, double *out)
{
    const lp_gguf_value *v;
    lp_status st = get_typed(g, key, &v);
    if (st != LP_OK)
        return st;
    if (is_float(v->type)) {
        *out = v->f;
        return LP_OK;
    }
    int64_t i;
    if ((st = lp_gguf_get_int(g, key, &i)) != LP_OK)
        return st == LP_STATUS_FORMAT ? wrong_type(g, key, v, "a number") : st;
    *out = (double)i;
    return LP_OK;
}

lp_status lp_gguf_get_bool(const lp_gguf_file *g, const char *key, bool *out)
{
    const lp_gguf_value *v;
    lp_status st = get_typed(g, key, &v);
    if (st != LP_OK)
        return st;
    if (v->type != LP_GGUF_TYPE_BOOL)
        return wrong_type(g, key, v, "bool");
    *out = v->b;
    return LP_OK;
}

lp_status lp_gguf_get_str(const lp_gguf_file *g, const char *key, char **out)
{
    const lp_gguf_value *v;
    lp_status st = get_typed(g, key, &v);
    if (st != LP_OK)
        return st;
    if (v->type != LP_GGUF_TYPE_STRING)
        return wrong_type(g, key, v, "string");
    return str_dup((lp_gguf_file *)g, &v->str, key, out);
}
