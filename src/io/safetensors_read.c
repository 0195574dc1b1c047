/* safetensors reader: maps the file read-only and validates it the way the reference
 * implementation (huggingface/safetensors, Metadata::validate) does, so a tensor view
 * can point straight into the mapping with every byte accounted for. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* Tensor data is viewed in place, so the host must share the format's byte order. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors views need a little-endian host");

struct lp_st_file {
    char *path;
    const uint8_t *base; /* whole file (or caller's buffer) */
    size_t len;
    bool mapped;
    bool owned; /* base is a malloc'd buffer this file frees (lp_st_file_own_buffer) */
    uint64_t disk_len; /* owned buffers: the size of the file they were made from (0: len) */
    size_t n;
    lp_st_tensor *tensors; /* data-offset order */
    size_t *by_name;       /* indices into tensors, sorted by name */
    char *names;           /* arena holding every tensor name */
    size_t n_meta;
    char **meta; /* 2*n_meta strings: key, value, ... */
};

/* Dtypes the format defines, with the ones loupe reads mapped to lp_st_dtype. */
static const struct {
    const char *name;
    int dtype; /* -1: valid safetensors dtype that loupe refuses */
    unsigned size;
} dtype_table[] = {
    {"F32", LP_ST_DTYPE_F32, 4},   {"F16", LP_ST_DTYPE_F16, 2},  {"BF16", LP_ST_DTYPE_BF16, 2},
    {"F64", LP_ST_DTYPE_F64, 8},   {"I8", LP_ST_DTYPE_I8, 1},    {"U8", LP_ST_DTYPE_U8, 1},
    {"I16", LP_ST_DTYPE_I16, 2},   {"U16", LP_ST_DTYPE_U16, 2},  {"I32", LP_ST_DTYPE_I32, 4},
    {"U32", LP_ST_DTYPE_U32, 4},   {"I64", LP_ST_DTYPE_I64, 8},  {"U64", LP_ST_DTYPE_U64, 8},
    {"BOOL", LP_ST_DTYPE_BOOL, 1}, {"F8_E5M2", -1, 1},           {"F8_E4M3", -1, 1},
    {"F8_E8M0", -1, 1},            {"F8_E4M3FNUZ", -1, 1},       {"F8_E5M2FNUZ", -1, 1},
    {"C64", -1, 8},                {"F4", -1, 0},                {"F6_E2M3", -1, 0},
    {"F6_E3M2", -1, 0},
};
#define N_DTYPES (sizeof dtype_table / sizeof dtype_table[0])

const char *lp_st_dtype_name(lp_st_dtype dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtype_table[i].dtype == (int)dt)
            return dtype_table[i].name;
    return "?";
}

size_t lp_st_dtype_size(lp_st_dtype dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtype_table[i].dtype == (int)dt)
            return dtype_table[i].size;
    return 0;
}

lp_status lp_st_dtype_parse(const char *s, lp_st_dtype *out)
{
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (strcmp(s, dtype_table[i].name) != 0)
            continue;
        if (dtype_table[i].dtype < 0)
            return lp_err(LP_STATUS_UNSUPPORTED,
                          "dtype %s is not supported (loupe reads F32, F16, BF16, F64, I8, U8, I16, U16, "
                          "I32, U32, I64, U64, BOOL)",
                          s);
        *out = (lp_st_dtype)dtype_table[i].dtype;
        return LP_OK;
    }
    return lp_err(LP_STATUS_FORMAT, "unknown dtype \"%.40s\"", s);
}

/* Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF), as Rust's
 * str::from_utf8 that the reference applies to the header. */
bool lp_io_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k + 1;
    }
    return true;
}

/* JSON numbers come through cJSON as doubles: accept exact non-negative integers up to
 * 2^53 (a file that large cannot exist, so nothing valid is lost). */
bool lp_io_json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740992.0 || floor(d) != d)
        return false;
    *out = (uint64_t)d;
    return true;
}

void lp_st_close(lp_st_file *f)
{
    if (!f)
        return;
    if (f->mapped && f->base)
        munmap((void *)f->base, f->len);
    else if (f->owned)
        free((void *)f->base);
    for (size_t i = 0; i < 2 * f->n_meta; i++)
        free(f->meta[i]);
    free(f->meta);
    free(f->tensors);
    free(f->by_name);
    free(f->names);
    free(f->path);
    free(f);
}

static _Thread_local const lp_st_file *sort_ctx; /* qsort has no context argument in C11 */

static int cmp_by_name(const void *a, const void *b)
{
    const lp_st_tensor *t = sort_ctx->tensors;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const lp_st_tensor *x = a, *y = b;
    /* ties broken by the end offset, as the reference sorts by the (begin, end) pair */
    uint64_t xe = x->offset + x->nbytes, ye = y->offset + y->nbytes;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return xe < ye ? -1 : xe > ye;
}

/* Parses one tensor entry into t (name already set). The data_offsets pair goes into
 * t->offset and *end; nbytes is checked against them later, after sorting. */
static lp_status parse_entry(const char *label, const cJSON *e, lp_st_tensor *t, uint64_t *end)
{
    if (!cJSON_IsObject(e))
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': entry is not an object", label, t->name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", label, t->name);
    if (!cJSON_IsArray(sh))
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': missing or non-array \"shape\"", label, t->name);
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end]", label,
                      t->name);
    lp_status st = lp_st_dtype_parse(dt->valuestring, &t->dtype);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s: tensor '%s'", label, t->name);

    int nd = cJSON_GetArraySize(sh);
    if (nd > LP_ST_MAX_DIMS)
        return lp_err(LP_STATUS_UNSUPPORTED, "%s: tensor '%s': %d dimensions (loupe reads at most %d)", label,
                      t->name, nd, LP_ST_MAX_DIMS);
    t->ndim = nd;
    uint64_t numel = 1;
    int i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        uint64_t v;
        if (!lp_io_json_u64(d, &v))
            return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", label,
                          t->name, i);
        t->shape[i] = (int64_t)v;
        if (v != 0 && numel > UINT64_MAX / v)
            return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': shape product overflows", label, t->name);
        numel *= v;
    }
    size_t esz = lp_st_dtype_size(t->dtype);
    if (numel > UINT64_MAX / esz)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': byte size overflows", label, t->name);
    t->numel = numel;
    t->nbytes = numel * esz;

    uint64_t b, en;
    if (!lp_io_json_u64(off->child, &b) || !lp_io_json_u64(off->child->next, &en))
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", label,
                      t->name);
    if (en < b)
        return lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                      label, t->name, (unsigned long long)b, (unsigned long long)en);
    t->offset = b;
    *end = en;
    return LP_OK;
}

static lp_status parse_metadata(lp_st_file *f, const char *label, const cJSON *m)
{
    if (cJSON_IsNull(m))
        return LP_OK;
    if (!cJSON_IsObject(m))
        return lp_err(LP_STATUS_FORMAT, "%s: \"__metadata__\" is not an object of strings", label);
    size_t n = (size_t)cJSON_GetArraySize(m);
    f->meta = lp_calloc(2 * n + 1, sizeof *f->meta);
    if (!f->meta)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", label);
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return lp_err(LP_STATUS_FORMAT, "%s: \"__metadata__\" value for '%s' is not a string", label,
                          e->string);
        for (size_t j = 0; j < f->n_meta; j++)
            if (!strcmp(f->meta[2 * j], e->string))
                return lp_err(LP_STATUS_FORMAT, "%s: \"__metadata__\" key '%s' appears twice", label,
                              e->string);
        f->meta[2 * f->n_meta] = lp_strdup(e->string);
        f->meta[2 * f->n_meta + 1] = lp_strdup(e->valuestring);
        f->n_meta++;
        if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1])
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", label);
    }
    return LP_OK;
}

/* Everything after the bytes are in memory: f->base/len/path set. */
static lp_status parse(lp_st_file *f)
{
    const char *label = f->path;
    if (f->len < 8)
        return lp_err(LP_STATUS_FORMAT,
                      "%s: file is %zu bytes, too small for a safetensors file (the header size alone is 8)",
                      label, f->len);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--)
        hn = (hn << 8) | f->base[i];
    if (hn > LP_ST_MAX_HEADER_SIZE)
        return lp_err(LP_STATUS_FORMAT, "%s: header size %llu exceeds the 100 MB limit (corrupt or not safetensors)",
                      label, (unsigned long long)hn);
    if (hn > f->len - 8)
        return lp_err(LP_STATUS_FORMAT, "%s: header size %llu runs past the end of the file (%zu bytes)", label,
                      (unsigned long long)hn, f->len);
    const uint8_t *h = f->base + 8;
    if (hn == 0 || h[0] != '{')
        return lp_err(LP_STATUS_FORMAT, "%s: header does not start with '{'", label);
    if (!lp_io_utf8_valid(h, hn))
        return lp_err(LP_STATUS_FORMAT, "%s: header is not valid UTF-8", label);
    /* JSON allows no raw control characters (serde refuses them in strings too); a NUL
     * would also cut a tensor name short behind cJSON's back */
    for (uint64_t i = 0; i < hn; i++)
        if (h[i] < 0x20 && h[i] != '\t' && h[i] != '\n' && h[i] != '\r')
            return lp_err(LP_STATUS_FORMAT, "%s: header has control character 0x%02x at byte %llu", label, h[i],
                          (unsigned long long)(8 + i));

    const char *endp = NULL;
    bool oom;
    cJSON *root = lp_json_parse((const char *)h, (size_t)hn, &endp, &oom);
    if (!root)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing the header", label)
                   : lp_err(LP_STATUS_FORMAT, "%s: header is not valid JSON", label);
    lp_status st = LP_OK;
    for (const char *p = endp; p && p < (const char *)h + hn; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = lp_err(LP_STATUS_FORMAT, "%s: header has trailing bytes after the JSON object", label);
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        st = lp_err(LP_STATUS_FORMAT, "%s: header is not a JSON object", label);
        goto out;
    }

    size_t cap = 0, name_bytes = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        cap++;
        name_bytes += strlen(e->string) + 1;
    }
    f->tensors = lp_calloc(cap + 1, sizeof *f->tensors);
    f->by_name = lp_calloc(cap + 1, sizeof *f->by_name);
    f->names = lp_malloc(name_bytes + 1);
    uint64_t *ends = lp_calloc(cap + 1, sizeof *ends);
    if (!f->tensors || !f->by_name || !f->names || !ends) {
        free(ends);
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory for %zu tensor entries", label, cap);
        goto out;
    }
    char *np = f->names;
    bool seen_meta = false;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (seen_meta) {
                st = lp_err(LP_STATUS_FORMAT, "%s: \"__metadata__\" appears twice", label);
                break;
            }
            seen_meta = true;
            if ((st = parse_metadata(f, label, e)) != LP_OK)
                break;
            continue;
        }
        lp_st_tensor *t = &f->tensors[f->n];
        size_t nl = strlen(e->string) + 1;
        memcpy(np, e->string, nl);
        t->name = np;
        np += nl;
        t->file = f->path;
        if ((st = parse_entry(label, e, t, &ends[f->n])) != LP_OK)
            break;
        /* END - BEGIN must hold exactly numel * dtype size (reference: TensorInvalidInfo) */
        if (ends[f->n] - t->offset != t->nbytes) {
            char shp[160] = "";
            size_t k = 0;
            for (int d = 0; d < t->ndim && k < sizeof shp - 24; d++)
                k += (size_t)snprintf(shp + k, sizeof shp - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
            st = lp_err(LP_STATUS_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes but dtype %s x shape [%s] "
                        "needs %llu",
                        label, t->name, (unsigned long long)t->offset, (unsigned long long)ends[f->n],
                        (unsigned long long)(ends[f->n] - t->offset), lp_st_dtype_name(t->dtype), shp,
                        (unsigned long long)t->nbytes);
            break;
        }
        f->n++;
    }
    free(ends);
    if (st != LP_OK)
        goto out;

    /* No duplicate names (cJSON keeps duplicate keys; serde refuses them). */
    for (size_t i = 0; i < f->n; i++)
        f->by_name[i] = i;
    sort_ctx = f;
    qsort(f->by_name, f->n, sizeof *f->by_name, cmp_by_name);
    for (size_t i = 1; i < f->n; i++) {
        if (!strcmp(f->tensors[f->by_name[i]].name, f->tensors[f->by_name[i - 1]].name)) {
            st = lp_err(LP_STATUS_FORMAT, "%s: tensor '%s' appears twice in the header", label,
                        f->tensors[f->by_name[i]].name);
            goto out;
        }
    }

    /* Contiguous, non-overlapping, no holes: sorted by offset, each begins where the
     * previous ended, the first at 0 (reference: InvalidOffset). */
    qsort(f->tensors, f->n, sizeof *f->tensors, cmp_by_offset);
    uint64_t pos = 0;
    for (size_t i = 0; i < f->n; i++) {
        const lp_st_tensor *t = &f->tensors[i];
        if (t->offset != pos) {
            st = lp_err(LP_STATUS_FORMAT, "%s: tensor '%s': data begins at %llu but %s at %llu (%s)", label,
                        t->name, (unsigned long long)t->offset,
                        i ? "the previous tensor ends" : "the data section starts", (unsigned long long)pos,
                        t->offset < pos ? "overlap" : "gap");
            goto out;
        }
        pos += t->nbytes;
    }
    /* reference: MetadataIncompleteBuffer — the data section is exactly the rest of the file */
    uint64_t data_len = (uint64_t)f->len - 8 - hn;
    if (pos != data_len) {
        st = lp_err(LP_STATUS_FORMAT, "%s: tensors cover %llu bytes of data but the file holds %llu after the header (%s)",
                    label, (unsigned long long)pos, (unsigned long long)data_len,
                    pos > data_len ? "offsets out of range: file truncated?" : "trailing bytes");
        goto out;
    }
    const uint8_t *data = f->base + 8 + hn;
    for (size_t i = 0; i < f->n; i++) {
        f->tensors[i].data = data + f->tensors[i].offset;
        f->tensors[i].file_pos = 8 + hn + f->tensors[i].offset;
    }
    /* by_name indexed the pre-sort order; rebuild it over the final order */
    for (size_t i = 0; i < f->n; i++)
        f->by_name[i] = i;
    qsort(f->by_name, f->n, sizeof *f->by_name, cmp_by_name);
out:
    cJSON_Delete(root);
    return st;
}

static lp_st_file *file_new(const char *label)
{
    lp_st_file *f = lp_calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->path = lp_strdup(label ? label : "<buffer>");
    if (!f->path) {
        free(f);
        return NULL;
    }
    return f;
}

lp_status lp_st_parse_buffer(const void *buf, size_t len, const char *label, lp_st_file **out)
{
    *out = NULL;
    lp_st_file *f = file_new(label);
    if (!f)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", label ? label : "<buffer>");
    f->base = buf;
    f->len = len;
    lp_status st = parse(f);
    if (st != LP_OK) {
        lp_st_close(f);
        return st;
    }
    *out = f;
    return LP_OK;
}

void lp_st_file_own_buffer(lp_st_file *f, uint64_t disk_len)
{
    f->owned = true;
    f->disk_len = disk_len;
}

lp_status lp_st_open(const char *path, lp_st_file **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lp_err(errno == ENOENT ? LP_STATUS_NOT_FOUND : LP_STATUS_IO, "%s: cannot open: %s", path,
                      strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return lp_err(LP_STATUS_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return lp_err(LP_STATUS_IO, "%s: not a regular file", path);
    }
    lp_st_file *f = file_new(path);
    if (!f) {
        close(fd);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    f->len = (size_t)sb.st_size;
    if (f->len >= 8) {
        void *p = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            lp_st_close(f);
            return lp_err(LP_STATUS_IO, "%s: cannot map: %s", path, strerror(e));
        }
        f->base = p;
        f->mapped = true;
    }
    close(fd);
    lp_status st = parse(f);
    if (st != LP_OK) {
        lp_st_close(f);
        return st;
    }
    *out = f;
    return LP_OK;
}

size_t lp_st_count(const lp_st_file *f) { return f->n; }
const lp_st_tensor *lp_st_at(const lp_st_file *f, size_t i) { return i < f->n ? &f->tensors[i] : NULL; }
const char *lp_st_path(const lp_st_file *f) { return f->path; }
uint64_t lp_st_file_size(const lp_st_file *f) { return f->disk_len ? f->disk_len : f->len; }
size_t lp_st_metadata_count(const lp_st_file *f) { return f->n_meta; }

const lp_st_tensor *lp_st_find(const lp_st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const lp_st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

void lp_st_metadata_at(const lp_st_file *f, size_t i, const char **key, const char **value)
{
    *key = i < f->n_meta ? f->meta[2 * i] : NULL;
    *value = i < f->n_meta ? f->meta[2 * i + 1] : NULL;
}

const char *lp_st_metadata_get(const lp_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[2 * i], key))
            return f->meta[2 * i + 1];
    return NULL;
}
