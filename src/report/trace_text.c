/* Reads a trace file as text: plain JSON as is, gzip (any number of concatenated members, as
 * `cat a.gz b.gz` makes) stream-decompressed with zlib through one fixed output chunk, so the
 * decompressor's progress is 64-bit and never depends on how much has been kept. A cap on the
 * decompressed size refuses a stream (a hostile one inflates 1000:1) before it exhausts memory;
 * lp_trace_gunzip_stream hands each chunk to a sink and keeps nothing. */
#include "loupe/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define LP_TRACE_CHUNK (1u << 18)

/* Where compressed bytes come from: a file read chunk by chunk, or a memory buffer. */
typedef struct gz_source {
    FILE *fp;
    unsigned char *chunk;
    const unsigned char *mem;
    size_t mem_left;
    int eof;
} gz_source;

/* Refills zs's input from src when it is empty. */
static lp_status gz_fill(const char *name, gz_source *src, z_stream *zs)
{
    if (zs->avail_in > 0 || src->eof)
        return LP_OK;
    if (src->fp && src->mem_left) { /* bytes already read to sniff the format, first */
        zs->next_in = (Bytef *)src->mem;
        zs->avail_in = (uInt)src->mem_left;
        src->mem_left = 0;
        return LP_OK;
    }
    if (src->fp) {
        size_t r = fread(src->chunk, 1, LP_TRACE_CHUNK, src->fp);
        if (r < LP_TRACE_CHUNK) {
            if (ferror(src->fp))
                return lp_err(LP_STATUS_IO, "%s: read failed: %s", name, strerror(errno));
            src->eof = 1;
        }
        zs->next_in = src->chunk;
        zs->avail_in = (uInt)r;
    } else {
        size_t r = src->mem_left > LP_TRACE_CHUNK ? LP_TRACE_CHUNK : src->mem_left;
        zs->next_in = (Bytef *)src->mem;
        zs->avail_in = (uInt)r;
        src->mem += r;
        src->mem_left -= r;
        src->eof = src->mem_left == 0;
    }
    return LP_OK;
}

static lp_status cap_error(const char *name, uint64_t max_bytes)
{
    return lp_err(LP_STATUS_RANGE,
                  "%s: the trace's text (decompressed) is longer than %llu bytes, the cap (loupe analyze "
                  "--max-trace-bytes raises it)",
                  name, (unsigned long long)max_bytes);
}

/* Inflates every gzip member from src through one LP_TRACE_CHUNK output buffer, handing each
 * filled part to sink. zlib's avail_out is 32 bits: it only ever sees the chunk's size. */
static lp_status gz_stream(const char *name, gz_source *src, uint64_t max_bytes, lp_trace_sink_fn sink,
                           void *ctx, uint64_t *total)
{
    *total = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    unsigned char *out = malloc(LP_TRACE_CHUNK);
    if (!out || inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
        free(out);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: cannot initialise zlib", name);
    }
    uint64_t n = 0;
    lp_status st = LP_OK;
    int ended = 0; /* the current member is complete */
    for (;;) {
        if ((st = gz_fill(name, src, &zs)) != LP_OK)
            break;
        if (zs.avail_in == 0) {
            if (!ended)
                st = lp_err(LP_STATUS_FORMAT,
                            "%s: truncated gzip data (ends after %llu decompressed bytes; was the trace "
                            "still being written?)",
                            name, (unsigned long long)n);
            break;
        }
        if (ended) {
            /* More bytes after a complete member: another member, or garbage. */
            if (zs.next_in[0] != 0x1f) {
                st = lp_err(LP_STATUS_FORMAT, "%s: trailing garbage after gzip data", name);
                break;
            }
            inflateReset(&zs);
            ended = 0;
        }
        zs.next_out = out;
        zs.avail_out = LP_TRACE_CHUNK;
        int zr = inflate(&zs, Z_NO_FLUSH);
        size_t got = LP_TRACE_CHUNK - zs.avail_out;
        if (zr == Z_STREAM_END) {
            ended = 1;
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) { /* BUF_ERROR: needs more input */
            st = lp_err(LP_STATUS_FORMAT, "%s: corrupt gzip data (%s)", name,
                        zs.msg ? zs.msg : "inflate failed");
            break;
        }
        if (got > max_bytes - n) {
            st = cap_error(name, max_bytes);
            break;
        }
        n += got;
        if (got && (st = sink(ctx, (const char *)out, got)) != LP_OK)
            break;
    }
    inflateEnd(&zs);
    free(out);
    *total = n;
    return st;
}

/* A sink that appends to a growing NUL-terminated buffer. */
typedef struct text_buf {
    const char *name;
    char *buf;
    size_t len, cap;
} text_buf;

static lp_status append(void *vctx, const char *data, size_t n)
{
    text_buf *t = vctx;
    if (n + 1 > t->cap - t->len || !t->buf) {
        size_t c = t->cap ? t->cap : LP_TRACE_CHUNK;
        while (c - t->len < n + 1) {
            if (c > SIZE_MAX / 2)
                return lp_err(LP_STATUS_NO_MEMORY, "%s: decompressed trace too large for memory", t->name);
            c *= 2;
        }
        char *b = realloc(t->buf, c);
        if (!b)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory decompressing (%zu bytes)", t->name, c);
        t->buf = b;
        t->cap = c;
    }
    memcpy(t->buf + t->len, data, n);
    t->len += n;
    t->buf[t->len] = '\0';
    return LP_OK;
}

static lp_status to_text(const char *name, gz_source *src, uint64_t max_bytes, char **out, size_t *out_len)
{
    text_buf t = {name, NULL, 0, 0};
    uint64_t total;
    lp_status st = gz_stream(name, src, max_bytes, append, &t, &total);
    if (st == LP_OK)
        st = append(&t, "", 0); /* an empty stream still gets its NUL */
    if (st != LP_OK) {
        free(t.buf);
        return st;
    }
    *out = t.buf;
    *out_len = t.len;
    return LP_OK;
}

lp_status lp_trace_gunzip(const char *name, const void *data, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    gz_source src = {.mem = data, .mem_left = len, .eof = len == 0};
    return to_text(name, &src, LP_TRACE_MAX_BYTES_DEFAULT, out, out_len);
}

lp_status lp_trace_gunzip_stream(const char *path, uint64_t max_bytes, lp_trace_sink_fn sink, void *ctx,
                                 uint64_t *total)
{
    *total = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return lp_err(LP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    gz_source src = {.fp = fp, .chunk = malloc(LP_TRACE_CHUNK)};
    lp_status st = src.chunk ? gz_stream(path, &src, max_bytes ? max_bytes : LP_TRACE_MAX_BYTES_DEFAULT, sink,
                                         ctx, total)
                             : lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    free(src.chunk);
    fclose(fp);
    return st;
}

lp_status lp_trace_read_text_max(const char *path, uint64_t max_bytes, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!max_bytes)
        max_bytes = LP_TRACE_MAX_BYTES_DEFAULT;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return lp_err(LP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char magic[2] = {0, 0};
    size_t got = fread(magic, 1, 2, fp);
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        rewind(fp);
        gz_source src = {.fp = fp, .chunk = malloc(LP_TRACE_CHUNK)};
        lp_status st = src.chunk ? to_text(path, &src, max_bytes, out, out_len)
                                 : lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        free(src.chunk);
        fclose(fp);
        return st;
    }
    struct stat sb;
    int big = fstat(fileno(fp), &sb) == 0 && (uint64_t)sb.st_size > max_bytes;
    fclose(fp);
    if (big)
        return cap_error(path, max_bytes);
    return lp_file_read_all(path, out, out_len);
}

lp_status lp_trace_read_text(const char *path, char **out, size_t *out_len)
{
    return lp_trace_read_text_max(path, 0, out, out_len);
}

lp_status lp_trace_stream(const char *path, uint64_t max_bytes, lp_trace_sink_fn sink, void *ctx, uint64_t *total)
{
    *total = 0;
    if (!max_bytes)
        max_bytes = LP_TRACE_MAX_BYTES_DEFAULT;
    int is_stdin = !strcmp(path, "-");
    FILE *fp = is_stdin ? stdin : fopen(path, "rb");
    if (!fp)
        return lp_err(LP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char *chunk = malloc(LP_TRACE_CHUNK), *head = malloc(LP_TRACE_CHUNK);
    lp_status st = LP_OK;
    if (!chunk || !head) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto out;
    }
    /* Sniff the gzip magic from the first bytes read (a pipe cannot be rewound). */
    size_t got = fread(head, 1, LP_TRACE_CHUNK, fp);
    if (ferror(fp)) {
        st = lp_err(LP_STATUS_IO, "%s: read failed: %s", path, strerror(errno));
        goto out;
    }
    if (got >= 2 && head[0] == 0x1f && head[1] == 0x8b) {
        gz_source src = {.fp = fp, .chunk = chunk, .mem = head, .mem_left = got, .eof = 0};
        st = gz_stream(path, &src, max_bytes, sink, ctx, total);
        goto out;
    }
    uint64_t n = 0;
    for (;;) {
        if (got > max_bytes - n) {
            st = cap_error(path, max_bytes);
            break;
        }
        n += got;
        if (got && (st = sink(ctx, (const char *)head, got)) != LP_OK)
            break;
        if (feof(fp))
            break;
        got = fread(head, 1, LP_TRACE_CHUNK, fp);
        if (ferror(fp)) {
            st = lp_err(LP_STATUS_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (!got && feof(fp))
            break;
    }
    *total = n;
out:
    free(chunk);
    free(head);
    if (!is_stdin)
        fclose(fp);
    return st;
}
