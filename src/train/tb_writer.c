/* TensorBoard scalar event files written without TensorFlow: TFRecord framing (length,
 * masked CRC-32C, data, masked CRC-32C) around hand-encoded Event protobufs (wall_time,
 * step, file_version or summary{value{tag, simple_value}}). The file is kept in memory and
 * rewritten atomically on flush so a reader never sees a torn record. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loupe/train.h"

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t lp_crc32c(const void *data, size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t lp_crc32c_masked(const void *data, size_t n)
{
    uint32_t c = lp_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

/* ---- protobuf pieces (writes nothing past cap, always counts) ---- */

typedef struct buf {
    uint8_t *p;
    size_t cap, n;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->n + n <= b->cap)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_byte(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_varint(buf *b, uint64_t v)
{
    while (v >= 0x80) {
        put_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    put_byte(b, (uint8_t)v);
}
static void put_le(buf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        put_byte(b, (uint8_t)(v >> (8 * i)));
}
static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* The Event message body. */
static void put_event(buf *b, double wall_time, int64_t step, const char *tag, float value)
{
    uint64_t wt;
    memcpy(&wt, &wall_time, 8);
    put_byte(b, 0x09);
    put_le(b, wt, 8);
    if (!tag) {
        static const char ver[] = "brain.Event:2";
        put_byte(b, 0x1A);
        put_varint(b, sizeof ver - 1);
        put(b, ver, sizeof ver - 1);
        return;
    }
    if (step != 0) {
        put_byte(b, 0x10);
        put_varint(b, (uint64_t)step);
    }
    size_t tl = strlen(tag);
    size_t value_len = 1 + varint_len(tl) + tl + 1 + 4; /* tag field + simple_value field */
    size_t summary_len = 1 + varint_len(value_len) + value_len;
    put_byte(b, 0x2A);
    put_varint(b, summary_len);
    put_byte(b, 0x0A);
    put_varint(b, value_len);
    put_byte(b, 0x0A);
    put_varint(b, tl);
    put(b, tag, tl);
    uint32_t fv;
    memcpy(&fv, &value, 4);
    put_byte(b, 0x15);
    put_le(b, fv, 4);
}

size_t lp_tb_encode_record(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag, float value)
{
    buf probe = {NULL, 0, 0};
    put_event(&probe, wall_time, step, tag, value);
    size_t dlen = probe.n, need = 8 + 4 + dlen + 4;
    if (!out || cap < need)
        return need;
    buf b = {out, cap, 0};
    put_le(&b, dlen, 8);
    put_le(&b, lp_crc32c_masked(out, 8), 4);
    put_event(&b, wall_time, step, tag, value);
    put_le(&b, lp_crc32c_masked(out + 12, dlen), 4);
    return need;
}

struct lp_tb_writer {
    char *path;
    uint8_t *data;
    size_t n, cap;
};

static lp_status append_record(lp_tb_writer *w, double wall_time, int64_t step, const char *tag, float value)
{
    size_t need = lp_tb_encode_record(NULL, 0, wall_time, step, tag, value);
    uint8_t *nd = lp_grow(w->data, &w->cap, w->n + need, 1, 4096);
    if (!nd)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", w->path);
    w->data = nd;
    w->n += lp_tb_encode_record(w->data + w->n, need, wall_time, step, tag, value);
    return LP_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

lp_status lp_tb_writer_open(const char *dir, lp_tb_writer **out)
{
    *out = NULL;
    lp_status st = lp_mkdir_p(dir);
    if (st != LP_OK)
        return st;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    double t = now_s();
    lp_tb_writer *w = calloc(1, sizeof *w);
    size_t plen = strlen(dir) + strlen(host) + 96;
    if (!w || !(w->path = malloc(plen))) {
        free(w);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    }
    snprintf(w->path, plen, "%s/events.out.tfevents.%010lld.%s.%d.0", dir, (long long)t, host, (int)getpid());
    if ((st = append_record(w, t, 0, NULL, 0)) != LP_OK || (st = lp_tb_writer_flush(w)) != LP_OK) {
        free(w->data);
        free(w->path);
        free(w);
        return st;
    }
    *out = w;
    return LP_OK;
}

lp_status lp_tb_writer_scalar(lp_tb_writer *w, const char *tag, int64_t step, float value, double wall_time)
{
    if (!tag || !*tag)
        return lp_err(LP_STATUS_INVALID_ARG, "tensorboard: empty tag");
    return append_record(w, wall_time > 0 ? wall_time : now_s(), step, tag, value);
}

lp_status lp_tb_writer_flush(lp_tb_writer *w)
{
    return lp_file_write_atomic(w->path, w->data, w->n);
}

lp_status lp_tb_writer_close(lp_tb_writer *w)
{
    if (!w)
        return LP_OK;
    lp_status st = lp_tb_writer_flush(w);
    free(w->data);
    free(w->path);
    free(w);
    return st;
}

const char *lp_tb_writer_path(const lp_tb_writer *w) { return w->path; }
