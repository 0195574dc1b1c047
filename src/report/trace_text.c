/* Reads a trace file into memory as text: plain JSON as is, gzip (any number of
 * concatenated members, as `cat a.gz b.gz` makes) stream-decompressed with zlib so a
 * multi-GB trace never needs its compressed and decompressed forms in memory twice
 * over more than one read chunk. */
#include "loupe/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define LP_TRACE_CHUNK (1u << 18)

/* Grows *buf (capacity *cap) to hold at least need+1 bytes (the +1 for a final NUL). */
static lp_status grow(const char *path, char **buf, size_t *cap, size_t need)
{
    if (need + 1 <= *cap)
        return LP_OK;
    size_t c = *cap ? *cap : LP_TRACE_CHUNK;
    while (c < need + 1) {
        if (c > SIZE_MAX / 2)
            return lp_err(LP_STATUS_NO_MEMORY, "%s: decompressed trace too large for memory", path);
        c *= 2;
    }
    char *b = realloc(*buf, c);
    if (!b)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory decompressing (%zu bytes)", path, c);
    *buf = b;
    *cap = c;
    return LP_OK;
}

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

/* Inflates every gzip member from src into a fresh NUL-terminated buffer. */
static lp_status gz_inflate_all(const char *name, gz_source *src, char **out, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: cannot initialise zlib", name);
    char *buf = NULL;
    size_t cap = 0, n = 0;
    lp_status st = LP_OK;
    int ended = 0; /* the current member is complete */
    for (;;) {
        if ((st = gz_fill(name, src, &zs)) != LP_OK)
            break;
        if (zs.avail_in == 0) {
            if (!ended)
                st = lp_err(LP_STATUS_FORMAT,
                            "%s: truncated gzip data (ends after %zu decompressed bytes; was the trace "
                            "still being written?)",
                            name, n);
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
        if ((st = grow(name, &buf, &cap, n + LP_TRACE_CHUNK)) != LP_OK)
            break;
        zs.next_out = (Bytef *)buf + n;
        zs.avail_out = (uInt)(cap - 1 - n);
        int zr = inflate(&zs, Z_NO_FLUSH);
        n = (size_t)((char *)zs.next_out - buf);
        if (zr == Z_STREAM_END) {
            ended = 1;
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) { /* BUF_ERROR: needs more input */
            st = lp_err(LP_STATUS_FORMAT, "%s: corrupt gzip data (%s)", name, zs.msg ? zs.msg : "inflate failed");
            break;
        }
    }
    inflateEnd(&zs);
    if (st == LP_OK)
        st = grow(name, &buf, &cap, n);
    if (st != LP_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return LP_OK;
}

lp_status lp_trace_gunzip(const char *name, const void *data, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    gz_source src = {.mem = data, .mem_left = len, .eof = len == 0};
    return gz_inflate_all(name, &src, out, out_len);
}

lp_status lp_trace_read_text(const char *path, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return lp_err(LP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char magic[2] = {0, 0};
    size_t got = fread(magic, 1, 2, fp);
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        rewind(fp);
        gz_source src = {.fp = fp, .chunk = malloc(LP_TRACE_CHUNK)};
        lp_status st = src.chunk ? gz_inflate_all(path, &src, out, out_len)
                                 : lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        free(src.chunk);
        fclose(fp);
        return st;
    }
    fclose(fp);
    return lp_file_read_all(path, out, out_len);
}
