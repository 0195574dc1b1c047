/* GPU activity records: a CUPTI-neutral container (activities with their own name copies,
 * devices, the GPU/host clock pair) and its JSONL file, read strictly so a recorded
 * fixture that drifts from the format fails loudly with file and line. */
#define _GNU_SOURCE /* strdup */
#include "prof_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lp_gpu_records {
    lp_gpu_activity *a;
    size_t n, cap;
    lp_gpu_device_props *dev;
    size_t n_dev;
    int has_clock;
    int64_t clock_gpu, clock_host;
};

static const char *const kind_names[LP_GPU_KIND__COUNT] = {"kernel", "memcpy", "memset",  "runtime",
                                                           "driver", "sync",   "overhead"};
static const char *const kind_cats[LP_GPU_KIND__COUNT] = {
    "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cuda_sync", "overhead"};
static const char *const copy_names[LP_GPU_COPY__COUNT] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                                           "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
static const char *const mem_names[LP_GPU_MEMKIND__COUNT] = {
    "Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"};
static const char *const sync_names[LP_GPU_SYNCKIND__COUNT] = {"Unknown", "Event Sync", "Stream Wait Event",
                                                               "Stream Sync", "Context Sync"};

const char *lp_gpu_kind_name(lp_gpu_kind k)
{
    return (unsigned)k < LP_GPU_KIND__COUNT ? kind_names[k] : "?";
}
const char *lp_gpu_kind_category(lp_gpu_kind k)
{
    return (unsigned)k < LP_GPU_KIND__COUNT ? kind_cats[k] : "?";
}
const char *lp_gpu_copy_kind_name(int k)
{
    return (unsigned)k < LP_GPU_COPY__COUNT ? copy_names[k] : "Unknown";
}
const char *lp_gpu_mem_kind_name(int k)
{
    return (unsigned)k < LP_GPU_MEMKIND__COUNT ? mem_names[k] : "Unknown";
}
const char *lp_gpu_sync_kind_name(int k)
{
    return (unsigned)k < LP_GPU_SYNCKIND__COUNT ? sync_names[k] : "Unknown";
}

void lp_gpu_activity_init(lp_gpu_activity *a)
{
    memset(a, 0, sizeof *a);
    a->device = a->context = -1;
    a->stream = a->correlation = a->pid = a->tid = -1;
    a->cbid = -1;
    a->registers_per_thread = a->static_smem = a->dynamic_smem = -1;
    a->bytes = -1;
    a->copy_kind = a->src_kind = a->dst_kind = a->sync_kind = -1;
    a->cuda_event_id = -1;
    a->queued_ns = -1;
}

lp_status lp_gpu_records_new(lp_gpu_records **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory");
}

void lp_gpu_records_free(lp_gpu_records *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        free((char *)r->a[i].name);
    free(r->a);
    free(r->dev);
    free(r);
}

lp_status lp_gpu_records_add(lp_gpu_records *r, const lp_gpu_activity *a)
{
    if ((unsigned)a->kind >= LP_GPU_KIND__COUNT)
        return lp_err(LP_STATUS_INVALID_ARG, "GPU records: kind %d out of range", (int)a->kind);
    if (a->end_ns < a->start_ns)
        return lp_err(LP_STATUS_INVALID_ARG, "GPU records: %s record ends (%lld) before it starts (%lld)",
                      kind_names[a->kind], (long long)a->end_ns, (long long)a->start_ns);
    int named = a->kind == LP_GPU_KERNEL || a->kind == LP_GPU_RUNTIME || a->kind == LP_GPU_DRIVER ||
                a->kind == LP_GPU_OVERHEAD;
    if (named && (!a->name || !*a->name))
        return lp_err(LP_STATUS_INVALID_ARG, "GPU records: %s record without a name", kind_names[a->kind]);
    lp_gpu_activity *na = lp_grow(r->a, &r->cap, r->n + 1, sizeof *na, 256);
    if (!na)
        return lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory (%zu records)", r->n);
    r->a = na;
    lp_gpu_activity c = *a;
    c.name = NULL;
    if (named && !(c.name = strdup(a->name)))
        return lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory");
    r->a[r->n++] = c;
    return LP_OK;
}

size_t lp_gpu_records_count(const lp_gpu_records *r)
{
    return r->n;
}
const lp_gpu_activity *lp_gpu_records_get(const lp_gpu_records *r, size_t i)
{
    return i < r->n ? &r->a[i] : NULL;
}

lp_status lp_gpu_records_set_device(lp_gpu_records *r, const lp_gpu_device_props *d)
{
    for (size_t i = 0; i < r->n_dev; i++)
        if (r->dev[i].id == d->id) {
            r->dev[i] = *d;
            return LP_OK;
        }
    lp_gpu_device_props *nd = realloc(r->dev, (r->n_dev + 1) * sizeof *nd);
    if (!nd)
        return lp_err(LP_STATUS_NO_MEMORY, "GPU records: out of memory");
    r->dev = nd;
    r->dev[r->n_dev] = *d;
    r->dev[r->n_dev].name[sizeof d->name - 1] = '\0';
    r->n_dev++;
    return LP_OK;
}

size_t lp_gpu_records_n_devices(const lp_gpu_records *r)
{
    return r->n_dev;
}
const lp_gpu_device_props *lp_gpu_records_device(const lp_gpu_records *r, size_t i)
{
    return i < r->n_dev ? &r->dev[i] : NULL;
}

void lp_gpu_records_set_clock(lp_gpu_records *r, int64_t gpu_ns, int64_t host_mono_ns)
{
    r->has_clock = 1;
    r->clock_gpu = gpu_ns;
    r->clock_host = host_mono_ns;
}

int lp_gpu_records_clock(const lp_gpu_records *r, int64_t *gpu_ns, int64_t *host_mono_ns)
{
    *gpu_ns = r->has_clock ? r->clock_gpu : 0;
    *host_mono_ns = r->has_clock ? r->clock_host : 0;
    return r->has_clock;
}

/* ---- writer ------------------------------------------------------------------------ */

static void put_i(lp_prof_out *o, const char *key, int64_t v)
{
    lp_prof_out_printf(o, ", \"%s\": %lld", key, (long long)v);
}

static void put_dim3(lp_prof_out *o, const char *key, const int32_t d[3])
{
    lp_prof_out_printf(o, ", \"%s\": [%d, %d, %d]", key, (int)d[0], (int)d[1], (int)d[2]);
}

static void put_s(lp_prof_out *o, const char *key, const char *v)
{
    lp_prof_out_printf(o, ", \"%s\": ", key);
    lp_prof_out_json_str(o, v);
}

static void write_record(lp_prof_out *o, const lp_gpu_activity *a)
{
    lp_prof_out_printf(o, "{\"kind\": \"%s\"", kind_names[a->kind]);
    if (a->name)
        put_s(o, "name", a->name);
    put_i(o, "start", a->start_ns);
    put_i(o, "end", a->end_ns);
    switch (a->kind) {
    case LP_GPU_KERNEL:
        put_i(o, "device", a->device);
        put_i(o, "context", a->context);
        put_i(o, "stream", a->stream);
        put_i(o, "correlation", a->correlation);
        put_dim3(o, "grid", a->grid);
        put_dim3(o, "block", a->block);
        put_i(o, "registers", a->registers_per_thread);
        put_i(o, "static_smem", a->static_smem);
        put_i(o, "dynamic_smem", a->dynamic_smem);
        put_i(o, "queued", a->queued_ns);
        break;
    case LP_GPU_MEMCPY:
    case LP_GPU_MEMSET:
        put_i(o, "device", a->device);
        put_i(o, "context", a->context);
        put_i(o, "stream", a->stream);
        put_i(o, "correlation", a->correlation);
        put_i(o, "bytes", a->bytes);
        if (a->kind == LP_GPU_MEMCPY) {
            put_s(o, "copy", lp_gpu_copy_kind_name(a->copy_kind));
            put_s(o, "src", lp_gpu_mem_kind_name(a->src_kind));
        }
        put_s(o, "dst", lp_gpu_mem_kind_name(a->dst_kind));
        break;
    case LP_GPU_RUNTIME:
    case LP_GPU_DRIVER:
        put_i(o, "pid", a->pid);
        put_i(o, "tid", a->tid);
        put_i(o, "correlation", a->correlation);
        put_i(o, "cbid", a->cbid);
        break;
    case LP_GPU_SYNC:
        put_s(o, "sync", lp_gpu_sync_kind_name(a->sync_kind));
        put_i(o, "device", a->device);
        put_i(o, "context", a->context);
        put_i(o, "stream", a->stream);
        put_i(o, "correlation", a->correlation);
        put_i(o, "event", a->cuda_event_id);
        break;
    case LP_GPU_OVERHEAD:
    default:
        put_i(o, "pid", a->pid);
        put_i(o, "tid", a->tid);
        break;
    }
    lp_prof_out_puts(o, "}\n");
}

lp_status lp_gpu_records_write_jsonl(const lp_gpu_records *r, const char *path)
{
    lp_prof_out *o;
    lp_status st = lp_prof_out_open(&o, path, 0);
    if (st != LP_OK)
        return st;
    lp_prof_out_puts(o, "{\"format\": \"loupe-gpu-records\", \"version\": 1}\n");
    if (r->has_clock)
        lp_prof_out_printf(o, "{\"kind\": \"clock\", \"gpu_ns\": %lld, \"host_mono_ns\": %lld}\n",
                           (long long)r->clock_gpu, (long long)r->clock_host);
    for (size_t i = 0; i < r->n_dev; i++) {
        const lp_gpu_device_props *d = &r->dev[i];
        lp_prof_out_printf(o, "{\"kind\": \"device\", \"id\": %d", (int)d->id);
        put_s(o, "name", d->name);
        put_i(o, "totalGlobalMem", d->total_global_mem);
        put_i(o, "computeMajor", d->compute_major);
        put_i(o, "computeMinor", d->compute_minor);
        put_i(o, "maxThreadsPerBlock", d->max_threads_per_block);
        put_i(o, "maxThreadsPerMultiprocessor", d->max_threads_per_sm);
        put_i(o, "regsPerBlock", d->regs_per_block);
        put_i(o, "warpSize", d->warp_size);
        put_i(o, "sharedMemPerBlock", d->shared_mem_per_block);
        put_i(o, "numSms", d->num_sms);
        put_i(o, "regsPerMultiprocessor", d->regs_per_sm);
        put_i(o, "sharedMemPerBlockOptin", d->shared_mem_per_block_optin);
        put_i(o, "sharedMemPerMultiprocessor", d->shared_mem_per_sm);
        put_i(o, "maxBlocksPerMultiprocessor", d->max_blocks_per_sm);
        put_i(o, "maxSmClockMhz", d->max_sm_clock_mhz);
        lp_prof_out_puts(o, "}\n");
    }
    for (size_t i = 0; i < r->n; i++)
        write_record(o, &r->a[i]);
    return lp_prof_out_commit(o);
}

/* ---- strict reader: one flat object per line ---------------------------------------- */

enum { V_INT, V_STR, V_DIM3 };
#define MAX_KEYS 24
typedef struct kv {
    char key[40];
    int type;
    int64_t i;
    int32_t d3[3];
    char *s;
    int used;
} kv;
typedef struct line_ctx {
    const char *name;
    size_t line;
    const char *p, *end;
    kv kv[MAX_KEYS];
    int n;
} line_ctx;

static lp_status bad(const line_ctx *c, const char *what)
{
    return lp_err(LP_STATUS_FORMAT, "%s:%zu: %s", c->name, c->line, what);
}

static void skip_ws(line_ctx *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r'))
        c->p++;
}

/* Appends the UTF-8 of code point u to out[*k] (cap checked by the caller: 4 bytes free). */
static void utf8(char *out, size_t *k, unsigned u)
{
    if (u < 0x80) {
        out[(*k)++] = (char)u;
    } else if (u < 0x800) {
        out[(*k)++] = (char)(0xC0 | (u >> 6));
        out[(*k)++] = (char)(0x80 | (u & 0x3F));
    } else {
        out[(*k)++] = (char)(0xE0 | (u >> 12));
        out[(*k)++] = (char)(0x80 | ((u >> 6) & 0x3F));
        out[(*k)++] = (char)(0x80 | (u & 0x3F));
    }
}

/* Parses a JSON string at c->p into a malloc'd copy (*out); the text's \u escapes of the
 * BMP become UTF-8 (a lone surrogate is an error). */
static lp_status parse_str(line_ctx *c, char **out)
{
    *out = NULL;
    if (c->p >= c->end || *c->p != '"')
        return bad(c, "expected a string");
    c->p++;
    const char *q = c->p;
    size_t cap = 1;
    while (q < c->end && *q != '"') {
        if (*q == '\\')
            q++;
        q++;
        cap += 4;
    }
    if (q >= c->end)
        return bad(c, "unterminated string");
    char *s = malloc(cap);
    if (!s)
        return lp_err(LP_STATUS_NO_MEMORY, "%s:%zu: out of memory", c->name, c->line);
    size_t k = 0;
    while (*c->p != '"') {
        unsigned char ch = (unsigned char)*c->p++;
        if (ch < 0x20) {
            free(s);
            return bad(c, "control character in a string");
        }
        if (ch != '\\') {
            s[k++] = (char)ch;
            continue;
        }
        char e = *c->p++;
        switch (e) {
        case '"':
            s[k++] = '"';
            break;
        case '\\':
            s[k++] = '\\';
            break;
        case '/':
            s[k++] = '/';
            break;
        case 'b':
            s[k++] = '\b';
            break;
        case 'f':
            s[k++] = '\f';
            break;
        case 'n':
            s[k++] = '\n';
            break;
        case 'r':
            s[k++] = '\r';
            break;
        case 't':
            s[k++] = '\t';
            break;
        case 'u': {
            unsigned u = 0;
            for (int j = 0; j < 4; j++, c->p++) {
                char h = c->p < c->end ? *c->p : 0;
                int v = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (v < 0) {
                    free(s);
                    return bad(c, "bad \\u escape");
                }
                u = u * 16 + (unsigned)v;
            }
            if (u == 0 || (u >= 0xD800 && u <= 0xDFFF)) {
                free(s);
                return bad(c, "\\u escape of NUL or a surrogate");
            }
            utf8(s, &k, u);
            break;
        }
        default:
            free(s);
            return bad(c, "bad escape in a string");
        }
    }
    c->p++;
    s[k] = '\0';
    *out = s;
    return LP_OK;
}

static lp_status parse_int(line_ctx *c, int64_t *v)
{
    const char *q = c->p;
    if (q < c->end && *q == '-')
        q++;
    if (q >= c->end || *q < '0' || *q > '9')
        return bad(c, "expected an integer");
    if (*q == '0' && q + 1 < c->end && q[1] >= '0' && q[1] <= '9')
        return bad(c, "integer with a leading zero");
    char buf[32];
    size_t n = 0;
    while (q < c->end && *q >= '0' && *q <= '9')
        q++;
    if (q < c->end && (*q == '.' || *q == 'e' || *q == 'E'))
        return bad(c, "expected an integer, not a fraction");
    n = (size_t)(q - c->p);
    if (n >= sizeof buf)
        return bad(c, "integer out of range");
    memcpy(buf, c->p, n);
    buf[n] = '\0';
    errno = 0;
    long long x = strtoll(buf, NULL, 10);
    if (errno)
        return bad(c, "integer out of range");
    *v = x;
    c->p = q;
    return LP_OK;
}

static void free_kv(line_ctx *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->kv[i].s);
    c->n = 0;
}

/* Parses the line [p, end) into c->kv. */
static lp_status parse_line(line_ctx *c)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p != '{')
        return bad(c, "expected '{' (one JSON object per line)");
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}')
        return bad(c, "empty object");
    for (;;) {
        skip_ws(c);
        if (c->n == MAX_KEYS)
            return bad(c, "too many keys");
        kv *x = &c->kv[c->n];
        memset(x, 0, sizeof *x);
        char *key;
        lp_status st = parse_str(c, &key);
        if (st != LP_OK)
            return st;
        if (strlen(key) >= sizeof x->key) {
            free(key);
            return bad(c, "key too long");
        }
        for (int i = 0; i < c->n; i++)
            if (strcmp(c->kv[i].key, key) == 0) {
                free(key);
                return bad(c, "duplicate key");
            }
        strcpy(x->key, key);
        free(key);
        c->n++;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':')
            return bad(c, "expected ':'");
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == '"') {
            x->type = V_STR;
            if ((st = parse_str(c, &x->s)) != LP_OK)
                return st;
        } else if (c->p < c->end && *c->p == '[') {
            x->type = V_DIM3;
            c->p++;
            for (int j = 0; j < 3; j++) {
                skip_ws(c);
                int64_t v;
                if ((st = parse_int(c, &v)) != LP_OK)
                    return st;
                if (v < 0 || v > INT32_MAX)
                    return bad(c, "dimension out of range");
                x->d3[j] = (int32_t)v;
                skip_ws(c);
                if (c->p >= c->end || *c->p != (j < 2 ? ',' : ']'))
                    return bad(c, "expected an array of 3 integers");
                c->p++;
            }
        } else {
            x->type = V_INT;
            if ((st = parse_int(c, &x->i)) != LP_OK)
                return st;
        }
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            break;
        }
        return bad(c, "expected ',' or '}'");
    }
    skip_ws(c);
    if (c->p != c->end)
        return bad(c, "text after the object");
    return LP_OK;
}

static kv *find(line_ctx *c, const char *key)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->kv[i].key, key) == 0) {
            c->kv[i].used = 1;
            return &c->kv[i];
        }
    return NULL;
}

/* Integer field: required (error when absent) or optional (left as is). */
static lp_status get_i(line_ctx *c, const char *key, int req, int64_t lo, int64_t hi, int64_t *out)
{
    kv *x = find(c, key);
    char msg[96];
    if (!x) {
        if (!req)
            return LP_OK;
        snprintf(msg, sizeof msg, "missing \"%s\"", key);
        return bad(c, msg);
    }
    if (x->type != V_INT || x->i < lo || x->i > hi) {
        snprintf(msg, sizeof msg, "\"%s\" must be an integer in [%lld, %lld]", key, (long long)lo,
                 (long long)hi);
        return bad(c, msg);
    }
    *out = x->i;
    return LP_OK;
}

static lp_status get_i32(line_ctx *c, const char *key, int req, int64_t lo, int64_t hi, int32_t *out)
{
    int64_t v = *out;
    lp_status st = get_i(c, key, req, lo, hi, &v);
    *out = (int32_t)v;
    return st;
}

/* String field naming one of n words; *out = its index. */
static lp_status get_word(line_ctx *c, const char *key, const char *const *words, int n, int32_t *out)
{
    kv *x = find(c, key);
    char msg[96];
    if (!x || x->type != V_STR) {
        snprintf(msg, sizeof msg, "\"%s\" must be a string", key);
        return bad(c, msg);
    }
    for (int i = 0; i < n; i++)
        if (strcmp(x->s, words[i]) == 0) {
            *out = i;
            return LP_OK;
        }
    snprintf(msg, sizeof msg, "unknown \"%s\" value \"%.32s\"", key, x->s);
    return bad(c, msg);
}

static lp_status get_dim3(line_ctx *c, const char *key, int32_t d[3])
{
    kv *x = find(c, key);
    char msg[96];
    if (!x || x->type != V_DIM3) {
        snprintf(msg, sizeof msg, "\"%s\" must be an array of 3 integers", key);
        return bad(c, msg);
    }
    memcpy(d, x->d3, sizeof x->d3);
    return LP_OK;
}

static lp_status no_unused(line_ctx *c)
{
    for (int i = 0; i < c->n; i++)
        if (!c->kv[i].used) {
            char msg[96];
            snprintf(msg, sizeof msg, "unknown key \"%s\"", c->kv[i].key);
            return bad(c, msg);
        }
    return LP_OK;
}

#define I64 INT64_MAX
#define TRY(x)                                                                                               \
    do {                                                                                                     \
        lp_status st_ = (x);                                                                                 \
        if (st_ != LP_OK)                                                                                    \
            return st_;                                                                                      \
    } while (0)

static lp_status read_device(line_ctx *c, lp_gpu_records *r)
{
    lp_gpu_device_props d;
    memset(&d, 0, sizeof d);
    kv *nm = find(c, "name");
    if (!nm || nm->type != V_STR || strlen(nm->s) >= sizeof d.name)
        return bad(c, "\"name\" must be a string under 128 bytes");
    strcpy(d.name, nm->s);
    TRY(get_i32(c, "id", 1, 0, 1023, &d.id));
    TRY(get_i(c, "totalGlobalMem", 1, 0, I64, &d.total_global_mem));
    TRY(get_i32(c, "computeMajor", 1, 1, 99, &d.compute_major));
    TRY(get_i32(c, "computeMinor", 1, 0, 99, &d.compute_minor));
    TRY(get_i32(c, "maxThreadsPerBlock", 1, 0, INT32_MAX, &d.max_threads_per_block));
    TRY(get_i32(c, "maxThreadsPerMultiprocessor", 1, 0, INT32_MAX, &d.max_threads_per_sm));
    TRY(get_i32(c, "regsPerBlock", 1, 0, INT32_MAX, &d.regs_per_block));
    TRY(get_i32(c, "warpSize", 1, 1, 1024, &d.warp_size));
    TRY(get_i(c, "sharedMemPerBlock", 1, 0, I64, &d.shared_mem_per_block));
    TRY(get_i32(c, "numSms", 1, 0, 1 << 20, &d.num_sms));
    TRY(get_i32(c, "regsPerMultiprocessor", 0, 0, INT32_MAX, &d.regs_per_sm));
    TRY(get_i(c, "sharedMemPerBlockOptin", 0, 0, I64, &d.shared_mem_per_block_optin));
    TRY(get_i(c, "sharedMemPerMultiprocessor", 0, 0, I64, &d.shared_mem_per_sm));
    TRY(get_i32(c, "maxBlocksPerMultiprocessor", 0, 0, 1 << 16, &d.max_blocks_per_sm));
    TRY(get_i32(c, "maxSmClockMhz", 0, 0, 1 << 20, &d.max_sm_clock_mhz));
    TRY(no_unused(c));
    for (size_t i = 0; i < r->n_dev; i++)
        if (r->dev[i].id == d.id)
            return bad(c, "device id given twice");
    return lp_gpu_records_set_device(r, &d);
}

static lp_status read_record(line_ctx *c, lp_gpu_records *r, int kind)
{
    lp_gpu_activity a;
    lp_gpu_activity_init(&a);
    a.kind = (lp_gpu_kind)kind;
    kv *nm = find(c, "name");
    int named =
        kind == LP_GPU_KERNEL || kind == LP_GPU_RUNTIME || kind == LP_GPU_DRIVER || kind == LP_GPU_OVERHEAD;
    if (named && (!nm || nm->type != V_STR || !nm->s[0]))
        return bad(c, "\"name\" must be a non-empty string");
    if (!named && nm)
        return bad(c, "unknown key \"name\" (this kind is named by its fields)");
    a.name = named ? nm->s : NULL;
    TRY(get_i(c, "start", 1, 0, I64, &a.start_ns));
    TRY(get_i(c, "end", 1, 0, I64, &a.end_ns));
    if (a.end_ns < a.start_ns)
        return bad(c, "\"end\" before \"start\"");
    const int64_t U32 = UINT32_MAX;
    switch (kind) {
    case LP_GPU_KERNEL:
    case LP_GPU_MEMCPY:
    case LP_GPU_MEMSET:
    case LP_GPU_SYNC:
        TRY(get_i32(c, "device", 1, 0, 1023, &a.device));
        TRY(get_i32(c, "context", 1, -1, INT32_MAX, &a.context));
        TRY(get_i(c, "stream", 1, -1, U32, &a.stream));
        TRY(get_i(c, "correlation", 1, -1, U32, &a.correlation));
        break;
    default:
        TRY(get_i(c, "pid", 1, -1, I64, &a.pid));
        TRY(get_i(c, "tid", 1, -1, I64, &a.tid));
        if (kind != LP_GPU_OVERHEAD) {
            TRY(get_i(c, "correlation", 1, -1, U32, &a.correlation));
            TRY(get_i32(c, "cbid", 1, -1, INT32_MAX, &a.cbid));
        }
        break;
    }
    switch (kind) {
    case LP_GPU_KERNEL:
        TRY(get_dim3(c, "grid", a.grid));
        TRY(get_dim3(c, "block", a.block));
        TRY(get_i32(c, "registers", 1, -1, 65536, &a.registers_per_thread));
        TRY(get_i32(c, "static_smem", 1, -1, INT32_MAX, &a.static_smem));
        TRY(get_i32(c, "dynamic_smem", 1, -1, INT32_MAX, &a.dynamic_smem));
        TRY(get_i(c, "queued", 0, -1, I64, &a.queued_ns));
        break;
    case LP_GPU_MEMCPY:
        TRY(get_word(c, "copy", copy_names, LP_GPU_COPY__COUNT, &a.copy_kind));
        TRY(get_word(c, "src", mem_names, LP_GPU_MEMKIND__COUNT, &a.src_kind));
        /* fallthrough */
    case LP_GPU_MEMSET:
        TRY(get_i(c, "bytes", 1, 0, I64, &a.bytes));
        TRY(get_word(c, "dst", mem_names, LP_GPU_MEMKIND__COUNT, &a.dst_kind));
        break;
    case LP_GPU_SYNC:
        TRY(get_word(c, "sync", sync_names, LP_GPU_SYNCKIND__COUNT, &a.sync_kind));
        TRY(get_i(c, "event", 0, -1, I64, &a.cuda_event_id));
        break;
    default:
        break;
    }
    TRY(no_unused(c));
    lp_status st = lp_gpu_records_add(r, &a);
    if (st != LP_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", lp_err_msg());
        return lp_err(st, "%s:%zu: %s", c->name, c->line, why);
    }
    return LP_OK;
}

static lp_status read_line(line_ctx *c, lp_gpu_records *r, int *seen_header)
{
    TRY(parse_line(c));
    if (!*seen_header) {
        kv *f = find(c, "format");
        int64_t ver = 0;
        if (!f || f->type != V_STR || strcmp(f->s, "loupe-gpu-records") != 0)
            return bad(c, "first line must be {\"format\": \"loupe-gpu-records\", \"version\": 1}");
        TRY(get_i(c, "version", 1, 0, I64, &ver));
        if (ver != 1)
            return bad(c, "unsupported version (this reader knows 1)");
        TRY(no_unused(c));
        *seen_header = 1;
        return LP_OK;
    }
    kv *k = find(c, "kind");
    if (!k || k->type != V_STR)
        return bad(c, "missing \"kind\" string");
    if (strcmp(k->s, "clock") == 0) {
        int64_t g = 0, h = 0;
        TRY(get_i(c, "gpu_ns", 1, 0, I64, &g));
        TRY(get_i(c, "host_mono_ns", 1, 0, I64, &h));
        TRY(no_unused(c));
        if (r->has_clock)
            return bad(c, "second clock line");
        lp_gpu_records_set_clock(r, g, h);
        return LP_OK;
    }
    if (strcmp(k->s, "device") == 0)
        return read_device(c, r);
    for (int i = 0; i < LP_GPU_KIND__COUNT; i++)
        if (strcmp(k->s, kind_names[i]) == 0)
            return read_record(c, r, i);
    char msg[96];
    snprintf(msg, sizeof msg, "unknown kind \"%.32s\"", k->s);
    return bad(c, msg);
}

lp_status lp_gpu_records_parse_jsonl(const char *name, const char *text, size_t len, lp_gpu_records **out)
{
    *out = NULL;
    lp_gpu_records *r;
    lp_status st = lp_gpu_records_new(&r);
    if (st != LP_OK)
        return st;
    line_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        lp_gpu_records_free(r);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", name);
    }
    c->name = name;
    int seen_header = 0;
    const char *p = text, *end = text + len;
    while (p < end && st == LP_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        c->line++;
        c->p = p;
        c->end = le;
        skip_ws(c);
        if (c->p < c->end) { /* blank lines are allowed */
            if (memchr(p, '\0', (size_t)(le - p)))
                st = bad(c, "NUL byte");
            else
                st = read_line(c, r, &seen_header);
            free_kv(c);
        }
        p = nl ? nl + 1 : end;
    }
    if (st == LP_OK && !seen_header)
        st = lp_err(LP_STATUS_FORMAT, "%s: empty (no loupe-gpu-records header line)", name);
    free(c);
    if (st != LP_OK) {
        lp_gpu_records_free(r);
        return st;
    }
    *out = r;
    return LP_OK;
}

lp_status lp_gpu_records_read_jsonl(const char *path, lp_gpu_records **out)
{
    *out = NULL;
    char *buf;
    size_t len;
    lp_status st = lp_file_read_all(path, &buf, &len);
    if (st != LP_OK)
        return st;
    st = lp_gpu_records_parse_jsonl(path, buf, len, out);
    free(buf);
    return st;
}
