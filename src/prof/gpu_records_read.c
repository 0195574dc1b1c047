/* The strict reader of recorded GPU activity records (loupe-gpu-records JSONL): one flat
 * object per line; unknown keys, duplicate keys, wrong types, out-of-range values and
 * trailing text are errors naming the file and line, so a fixture that drifts from the
 * format fails loudly. The format: tests/fixtures/cupti/README.md. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
static lp_status get_word(line_ctx *c, const char *key, const char *(*word)(int), int n, int32_t *out)
{
    kv *x = find(c, key);
    char msg[96];
    if (!x || x->type != V_STR) {
        snprintf(msg, sizeof msg, "\"%s\" must be a string", key);
        return bad(c, msg);
    }
    for (int i = 0; i < n; i++)
        if (strcmp(x->s, word(i)) == 0) {
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
    for (size_t i = 0; i < lp_gpu_records_n_devices(r); i++)
        if (lp_gpu_records_device(r, i)->id == d.id)
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
        TRY(get_word(c, "copy", lp_gpu_copy_kind_name, LP_GPU_COPY__COUNT, &a.copy_kind));
        TRY(get_word(c, "src", lp_gpu_mem_kind_name, LP_GPU_MEMKIND__COUNT, &a.src_kind));
        /* fallthrough */
    case LP_GPU_MEMSET:
        TRY(get_i(c, "bytes", 1, 0, I64, &a.bytes));
        TRY(get_word(c, "dst", lp_gpu_mem_kind_name, LP_GPU_MEMKIND__COUNT, &a.dst_kind));
        break;
    case LP_GPU_SYNC:
        TRY(get_word(c, "sync", lp_gpu_sync_kind_name, LP_GPU_SYNCKIND__COUNT, &a.sync_kind));
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
        int64_t og, oh;
        if (lp_gpu_records_clock(r, &og, &oh))
            return bad(c, "second clock line");
        lp_gpu_records_set_clock(r, g, h);
        return LP_OK;
    }
    if (strcmp(k->s, "device") == 0)
        return read_device(c, r);
    for (int i = 0; i < LP_GPU_KIND__COUNT; i++)
        if (strcmp(k->s, lp_gpu_kind_name((lp_gpu_kind)i)) == 0)
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
