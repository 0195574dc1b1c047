/* Decompressed sizes past 4 GiB: a gzip stream of 4.5 GiB (72 members of 64 MiB of JSON
 * whitespace, ~4.6 MB compressed), generated here, never stored. The streaming reader counts
 * every byte in 64-bit (zlib's output space is 32-bit: handed the room left in a > 4 GiB
 * buffer, cut to 32 bits, it reached 0 and `loupe analyze` looped forever), in bounded memory;
 * the whole-text reader refuses the stream at its cap, naming the file and the cap. */
#include "../lp_test_util.h" /* first: it defines _GNU_SOURCE */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/resource.h>
#include <zlib.h>

#include "loupe/report.h"

#define MEMBER_BYTES ((uint64_t)64 << 20)
#define MEMBERS 72 /* 4.5 GiB: past 2^32 by half a GiB */

static char dir[128], path[256];

/* One gzip member of MEMBER_BYTES spaces, deflated from a 1 MiB buffer fed repeatedly. */
static unsigned char *make_member(size_t *len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
    size_t in_len = 1 << 20, cap = 1 << 20;
    unsigned char *in = malloc(in_len), *out = malloc(cap);
    assert_non_null(in);
    assert_non_null(out);
    memset(in, ' ', in_len);
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    for (uint64_t fed = 0; fed < MEMBER_BYTES; fed += in_len) {
        zs.next_in = in;
        zs.avail_in = (uInt)in_len;
        int flush = fed + in_len == MEMBER_BYTES ? Z_FINISH : Z_NO_FLUSH;
        int zr = deflate(&zs, flush);
        assert_true(zr == Z_OK || zr == Z_STREAM_END);
        assert_int_equal(zs.avail_in, 0);
        assert_true(zs.avail_out > 0); /* 1 MiB holds a 64 MiB member of spaces (~64 KB) */
    }
    *len = cap - zs.avail_out;
    deflateEnd(&zs);
    free(in);
    return out;
}

static int setup(void **state)
{
    (void)state;
    if (lp_test_tmpdir_make(dir, sizeof dir, "trace_big") != 0)
        return -1;
    snprintf(path, sizeof path, "%s/big.pt.trace.json.gz", dir);
    size_t len;
    unsigned char *m = make_member(&len);
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    for (int i = 0; i < MEMBERS; i++)
        if (fwrite(m, 1, len, fp) != len)
            return -1;
    free(m);
    return fclose(fp);
}

static int teardown(void **state)
{
    (void)state;
    return lp_test_tmpdir_remove(dir);
}

typedef struct counter {
    uint64_t bytes, chunks;
    size_t largest;
    int only_spaces;
} counter;

static lp_status count(void *vctx, const char *data, size_t n)
{
    counter *c = vctx;
    c->bytes += n;
    c->chunks++;
    if (n > c->largest)
        c->largest = n;
    for (size_t i = 0; i < n; i += 4093) /* a sample: the content arrives as written */
        c->only_spaces &= data[i] == ' ';
    return LP_OK;
}

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The whole stream, counted exactly: 72 x 64 MiB = 4,831,838,208 bytes, past 2^32, with the
 * process's peak RSS growing by less than 64 MiB (the reader keeps 512 KiB; the rest is
 * slack for the C library), and the sink never handed more than the 256 KiB chunk. */
static void test_stream_past_4gib(void **state)
{
    (void)state;
    counter c = {0, 0, 0, 1};
    uint64_t total = 0;
    long rss0 = max_rss_kib();
    assert_int_equal(lp_trace_gunzip_stream(path, (uint64_t)5 << 30, count, &c, &total), LP_OK);
    assert_true(total == MEMBER_BYTES * MEMBERS);
    assert_true(c.bytes == total);
    assert_true(total > UINT32_MAX);
    assert_true(c.largest <= 256 * 1024);
    assert_true(c.only_spaces);
    long grew = max_rss_kib() - rss0;
    print_message("4.5 GiB streamed in %llu chunks; peak RSS grew %ld KiB\n", (unsigned long long)c.chunks,
                  grew);
    assert_true(grew < 64 * 1024);
}

/* Below the stream's size, the cap refuses it as soon as it is passed: exactly the cap's
 * bytes were handed over, and the message names the file and the cap. */
static void test_stream_cap(void **state)
{
    (void)state;
    counter c = {0, 0, 0, 1};
    uint64_t total = 0, cap = ((uint64_t)4 << 30) + 12345; /* inside the 65th member, past 2^32 */
    assert_int_equal(lp_trace_gunzip_stream(path, cap, count, &c, &total), LP_STATUS_RANGE);
    assert_true(c.bytes <= cap && cap - c.bytes < 256 * 1024);
    assert_non_null(strstr(lp_err_msg(), path));
    assert_non_null(strstr(lp_err_msg(), "4294979641"));
}

/* The reader that keeps the text (what loupe analyze parses) refuses at its cap, having
 * held at most about twice the cap, in the time it takes to inflate the cap's bytes. */
static void test_read_text_cap(void **state)
{
    (void)state;
    char *text = (char *)1;
    size_t len = 7;
    long rss0 = max_rss_kib();
    assert_int_equal(lp_trace_read_text_max(path, (uint64_t)32 << 20, &text, &len), LP_STATUS_RANGE);
    assert_null(text);
    assert_int_equal(len, 0);
    assert_non_null(strstr(lp_err_msg(), path));
    assert_non_null(strstr(lp_err_msg(), "33554432"));
    assert_true(max_rss_kib() - rss0 < 128 * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_past_4gib),
        cmocka_unit_test(test_stream_cap),
        cmocka_unit_test(test_read_text_cap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
