/* Buffered output for exporters: text goes through a 64 KiB buffer into an atomic file,
 * optionally through zlib's gzip stream first, so large traces never sit in memory. */
#include "prof_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define OUT_BUF 65536

struct lp_prof_out {
    lp_atomic_file f;
    int gzip;
    z_stream z;
    int failed;
    size_t n;
    unsigned char buf[OUT_BUF];
    unsigned char zbuf[OUT_BUF];
};

lp_status lp_prof_out_open(lp_prof_out **out, const char *path, int gzip)
{
    *out = NULL;
    lp_prof_out *o = calloc(1, sizeof *o);
    if (!o)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    lp_status st = lp_atomic_open(&o->f, path);
    if (st != LP_OK) {
        free(o);
        return st;
    }
    o->gzip = gzip;
    /* windowBits 15 + 16: a gzip header and trailer instead of zlib's */
    if (gzip && deflateInit2(&o->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        lp_atomic_abort(&o->f);
        free(o);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: cannot start gzip stream", path);
    }
    *out = o;
    return LP_OK;
}

static void deflate_some(lp_prof_out *o, int flush)
{
    o->z.next_in = o->buf;
    o->z.avail_in = (uInt)o->n;
    do {
        o->z.next_out = o->zbuf;
        o->z.avail_out = OUT_BUF;
        int r = deflate(&o->z, flush);
        if (r == Z_STREAM_ERROR) {
            o->failed = 1;
            return;
        }
        size_t have = OUT_BUF - o->z.avail_out;
        if (have && fwrite(o->zbuf, 1, have, o->f.fp) != have)
            o->failed = 1;
    } while (o->z.avail_out == 0);
}

static void flush_buf(lp_prof_out *o, int final)
{
    if (o->gzip)
        deflate_some(o, final ? Z_FINISH : Z_NO_FLUSH);
    else if (o->n && fwrite(o->buf, 1, o->n, o->f.fp) != o->n)
        o->failed = 1;
    o->n = 0;
}

void lp_prof_out_write(lp_prof_out *o, const void *p, size_t n)
{
    const unsigned char *s = p;
    while (n) {
        size_t k = OUT_BUF - o->n < n ? OUT_BUF - o->n : n;
        memcpy(o->buf + o->n, s, k);
        o->n += k;
        s += k;
        n -= k;
        if (o->n == OUT_BUF)
            flush_buf(o, 0);
    }
}

void lp_prof_out_puts(lp_prof_out *o, const char *s) { lp_prof_out_write(o, s, strlen(s)); }

void lp_prof_out_printf(lp_prof_out *o, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) {
        o->failed = 1;
        return;
    }
    if ((size_t)k < sizeof small) {
        lp_prof_out_write(o, small, (size_t)k);
        return;
    }
    char *big = malloc((size_t)k + 1);
    if (!big) {
        o->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    lp_prof_out_write(o, big, (size_t)k);
    free(big);
}

void lp_prof_out_json_str(lp_prof_out *o, const char *s)
{
    lp_prof_out_write(o, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        lp_prof_out_write(o, run, (size_t)(s - run));
        char esc[8];
        switch (ch) {
        case '"': lp_prof_out_write(o, "\\\"", 2); break;
        case '\\': lp_prof_out_write(o, "\\\\", 2); break;
        case '\n': lp_prof_out_write(o, "\\n", 2); break;
        case '\t': lp_prof_out_write(o, "\\t", 2); break;
        case '\r': lp_prof_out_write(o, "\\r", 2); break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            lp_prof_out_write(o, esc, 6);
        }
        run = s + 1;
    }
    lp_prof_out_write(o, run, (size_t)(s - run));
    lp_prof_out_write(o, "\"", 1);
}

lp_status lp_prof_out_commit(lp_prof_out *o)
{
    flush_buf(o, 1);
    if (o->gzip)
        deflateEnd(&o->z);
    lp_status st;
    if (o->failed) {
        st = lp_err(LP_STATUS_IO, "%s: write failed", o->f.path);
        lp_atomic_abort(&o->f);
    } else {
        st = lp_atomic_commit(&o->f);
    }
    free(o);
    return st;
}

void lp_prof_out_abort(lp_prof_out *o)
{
    if (!o)
        return;
    if (o->gzip)
        deflateEnd(&o->z);
    lp_atomic_abort(&o->f);
    free(o);
}

void lp_prof_fmt_us(char *buf, size_t cap, int64_t ns)
{
    if (ns < 0)
        ns = 0; /* kineto clamps relative timestamps at 0 */
    snprintf(buf, cap, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}
