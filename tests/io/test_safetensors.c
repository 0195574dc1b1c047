/* safetensors reader/writer: a write -> read round trip with values checked, sharded
 * checkpoints, and every malformation the reference implementation rejects, each built
 * in the test and checked for the error status and a message naming file and tensor. */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loupe/io.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    return lp_test_tmpdir_make(tmpdir, sizeof tmpdir, "st");
}

static int teardown(void **state)
{
    (void)state;
    return lp_test_tmpdir_remove(tmpdir);
}

static char *tpath(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

/* A file image: u64 header length (hlen_override if nonzero) + header + data_len bytes
 * of pattern data. */
static uint8_t *image(const char *hdr, uint64_t hlen_override, size_t data_len, size_t *len)
{
    size_t hn = strlen(hdr);
    *len = 8 + hn + data_len;
    uint8_t *b = malloc(*len + 1);
    uint64_t v = hlen_override ? hlen_override : hn;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    memcpy(b + 8, hdr, hn);
    for (size_t i = 0; i < data_len; i++)
        b[8 + hn + i] = (uint8_t)i;
    return b;
}

/* Parses hdr+data and expects status want with every fragment in the message. */
static void expect_parse(const char *hdr, size_t data_len, lp_status want, const char *frag1, const char *frag2)
{
    size_t len;
    uint8_t *b = image(hdr, 0, data_len, &len);
    lp_st_file *f = NULL;
    lp_status st = lp_st_parse_buffer(b, len, "bad.safetensors", &f);
    if (st != want)
        fail_msg("header %s: got status %d (%s), wanted %d", hdr, st, lp_err_msg(), want);
    if (want == LP_OK) {
        lp_st_close(f);
    } else {
        assert_null(f);
        assert_non_null(strstr(lp_err_msg(), "bad.safetensors"));
        if (frag1 && !strstr(lp_err_msg(), frag1))
            fail_msg("message '%s' lacks '%s'", lp_err_msg(), frag1);
        if (frag2 && !strstr(lp_err_msg(), frag2))
            fail_msg("message '%s' lacks '%s'", lp_err_msg(), frag2);
    }
    free(b);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n)
        assert_int_equal(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

static void test_round_trip(void **state)
{
    (void)state;
    float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.125f, 1e30f};
    uint16_t bf16[4] = {0x3f80, 0xbf80, 0x4000, 0x7fc0};
    uint16_t f16[2] = {0x3c00, 0xc000};
    int64_t i64 = -1234567890123LL;
    int32_t i32[3] = {-7, 0, 2147483647};
    int8_t i8[5] = {-128, -1, 0, 1, 127};
    uint8_t u8[3] = {0, 128, 255};
    uint8_t bools[3] = {1, 0, 1};
    int64_t s23[] = {2, 3}, s4[] = {4}, s2[] = {2}, s3[] = {3}, s5[] = {5}, s0[] = {0, 7}, s113[] = {1, 1, 3};
    lp_st_write_tensor t[] = {
        {"w.f32", LP_ST_DTYPE_F32, 2, s23, f32},      {"b.bf16", LP_ST_DTYPE_BF16, 1, s4, bf16},
        {"c.f16", LP_ST_DTYPE_F16, 1, s2, f16},       {"scalar.i64", LP_ST_DTYPE_I64, 0, NULL, &i64},
        {"i32", LP_ST_DTYPE_I32, 3, s113, i32},       {"i8", LP_ST_DTYPE_I8, 1, s5, i8},
        {"u8", LP_ST_DTYPE_U8, 1, s3, u8},            {"mask", LP_ST_DTYPE_BOOL, 1, s3, bools},
        {"empty", LP_ST_DTYPE_F32, 2, s0, NULL},      {"needs \"escape\"\\", LP_ST_DTYPE_U8, 1, s3, u8},
    };
    const char *meta[] = {"format", "pt", "note", "quote \" and tab \t"};
    char *p = tpath("rt.safetensors");
    assert_int_equal(lp_st_write(p, t, 10, meta, 2), LP_OK);

    lp_st_file *f = NULL;
    assert_int_equal(lp_st_open(p, &f), LP_OK);
    assert_int_equal(lp_st_count(f), 10);
    assert_string_equal(lp_st_metadata_get(f, "format"), "pt");
    assert_string_equal(lp_st_metadata_get(f, "note"), "quote \" and tab \t");
    assert_null(lp_st_metadata_get(f, "absent"));

    const lp_st_tensor *x = lp_st_find(f, "w.f32");
    assert_non_null(x);
    assert_int_equal(x->dtype, LP_ST_DTYPE_F32);
    assert_int_equal(x->ndim, 2);
    assert_int_equal(x->shape[0], 2);
    assert_int_equal(x->shape[1], 3);
    assert_int_equal(x->numel, 6);
    assert_int_equal(x->nbytes, 24);
    assert_memory_equal(x->data, f32, sizeof f32);
    /* header padded to 8 bytes + descending dtype size: every tensor is aligned to its dtype */
    for (size_t i = 0; i < lp_st_count(f); i++)
        assert_int_equal(((uintptr_t)lp_st_at(f, i)->data) % lp_st_dtype_size(lp_st_at(f, i)->dtype), 0);

    x = lp_st_find(f, "scalar.i64");
    assert_int_equal(x->ndim, 0);
    assert_int_equal(x->numel, 1);
    assert_memory_equal(x->data, &i64, 8);
    assert_memory_equal(lp_st_find(f, "b.bf16")->data, bf16, sizeof bf16);
    assert_memory_equal(lp_st_find(f, "c.f16")->data, f16, sizeof f16);
    assert_memory_equal(lp_st_find(f, "i32")->data, i32, sizeof i32);
    assert_int_equal(lp_st_find(f, "i32")->shape[2], 3);
    assert_memory_equal(lp_st_find(f, "i8")->data, i8, sizeof i8);
    assert_memory_equal(lp_st_find(f, "u8")->data, u8, sizeof u8);
    assert_memory_equal(lp_st_find(f, "mask")->data, bools, sizeof bools);
    assert_memory_equal(lp_st_find(f, "needs \"escape\"\\")->data, u8, sizeof u8);
    assert_int_equal(lp_st_find(f, "empty")->nbytes, 0);
    assert_int_equal(lp_st_find(f, "empty")->shape[1], 7);
    assert_null(lp_st_find(f, "nope"));

    /* reference layout: descending dtype size, then name; offsets contiguous */
    uint64_t pos = 0;
    size_t prev_size = 8;
    for (size_t i = 0; i < lp_st_count(f); i++) {
        const lp_st_tensor *ti = lp_st_at(f, i);
        assert_int_equal(ti->offset, pos);
        pos += ti->nbytes;
        size_t sz = lp_st_dtype_size(ti->dtype);
        assert_true(sz <= prev_size);
        if (i && sz == lp_st_dtype_size(lp_st_at(f, i - 1)->dtype) && ti->nbytes && lp_st_at(f, i - 1)->nbytes)
            assert_true(strcmp(lp_st_at(f, i - 1)->name, ti->name) < 0);
        prev_size = sz;
    }
    assert_string_equal(lp_st_at(f, 0)->name, "scalar.i64");
    lp_st_close(f);

    /* header length field is a multiple of 8 */
    FILE *fp = fopen(p, "rb");
    uint8_t h8[8];
    assert_int_equal(fread(h8, 1, 8, fp), 8);
    fclose(fp);
    assert_int_equal(h8[0] % 8, 0);
}

static void test_write_errors_leave_nothing(void **state)
{
    (void)state;
    float v[2] = {1, 2};
    int64_t s2[] = {2}, neg[] = {-1};
    lp_st_write_tensor dup[] = {{"a", LP_ST_DTYPE_F32, 1, s2, v}, {"a", LP_ST_DTYPE_F32, 1, s2, v}};
    char *p = tpath("w.safetensors");
    assert_int_equal(lp_st_write(p, dup, 2, NULL, 0), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "'a' given twice"));
    lp_st_write_tensor bad[] = {{"n", LP_ST_DTYPE_F32, 1, neg, v}};
    assert_int_equal(lp_st_write(p, bad, 1, NULL, 0), LP_STATUS_INVALID_ARG);
    lp_st_write_tensor nodata[] = {{"n", LP_ST_DTYPE_F32, 1, s2, NULL}};
    assert_int_equal(lp_st_write(p, nodata, 1, NULL, 0), LP_STATUS_INVALID_ARG);
    assert_int_not_equal(access(p, F_OK), 0);
    /* unwritable destination: IO error, nothing created */
    assert_int_equal(lp_st_write(tpath("no/such/dir/x.safetensors"), dup, 1, NULL, 0), LP_STATUS_IO);
    /* a zero-tensor file is valid and reads back */
    assert_int_equal(lp_st_write(p, NULL, 0, NULL, 0), LP_OK);
    lp_st_file *f;
    assert_int_equal(lp_st_open(p, &f), LP_OK);
    assert_int_equal(lp_st_count(f), 0);
    lp_st_close(f);
}

static void test_empty_and_truncated_files(void **state)
{
    (void)state;
    lp_st_file *f = NULL;
    char *p = tpath("empty.safetensors");
    write_file(p, "", 0);
    assert_int_equal(lp_st_open(p, &f), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), p));
    assert_non_null(strstr(lp_err_msg(), "too small"));
    /* truncated inside the 8-byte length */
    p = tpath("short.safetensors");
    write_file(p, "\x10\x00\x00", 3);
    assert_int_equal(lp_st_open(p, &f), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "too small"));
    /* truncated inside the header: the size says 64 bytes, 10 are there */
    size_t len;
    uint8_t *b = image("{\"a\":{\"dty", 64, 0, &len);
    p = tpath("trunc.safetensors");
    write_file(p, b, len);
    free(b);
    assert_int_equal(lp_st_open(p, &f), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "runs past the end of the file"));
    /* missing file and a directory */
    assert_int_equal(lp_st_open(tpath("absent.safetensors"), &f), LP_STATUS_NOT_FOUND);
    assert_int_equal(lp_st_open(tmpdir, &f), LP_STATUS_IO);
    assert_null(f);
}

static void test_header_size_limits(void **state)
{
    (void)state;
    size_t len;
    lp_st_file *f = NULL;
    uint8_t *b = image("{}", 0xFFFFFFFFFFFFFFF0ull, 0, &len); /* 8 + N overflows */
    assert_int_equal(lp_st_parse_buffer(b, len, "huge.safetensors", &f), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "exceeds the 100 MB limit"));
    free(b);
    b = image("{}", 100000001ull, 0, &len);
    assert_int_equal(lp_st_parse_buffer(b, len, "huge.safetensors", &f), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "100 MB"));
    free(b);
    b = image("{}", 3, 0, &len); /* larger than the file (10 bytes) */
    assert_int_equal(lp_st_parse_buffer(b, len, "x.safetensors", &f), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "runs past the end"));
    free(b);
    assert_null(f);
}

static void test_malformed_headers(void **state)
{
    (void)state;
    const lp_status F = LP_STATUS_FORMAT;
    /* valid baselines, including padding and metadata */
    expect_parse("{}", 0, LP_OK, NULL, NULL);
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}    ", 8, LP_OK, NULL, NULL);
    expect_parse("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
                 1, LP_OK, NULL, NULL);
    /* JSON and structure */
    expect_parse("{\"a\":{\"dtype\":\"F32\",", 0, F, "not valid JSON", NULL);
    expect_parse("[1,2]", 0, F, "does not start with '{'", NULL);
    expect_parse(" {}", 0, F, "does not start with '{'", NULL);
    expect_parse("{} x", 0, F, "trailing bytes", NULL);
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}\xff", 4, F, "UTF-8", NULL);
    expect_parse("{\"a\":5}", 0, F, "'a'", "not an object");
    {
        static const char nul_hdr[] = "{\"a\0b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
        size_t len = 8 + sizeof nul_hdr - 1 + 1;
        uint8_t *b = calloc(1, len);
        b[0] = (uint8_t)(sizeof nul_hdr - 1);
        memcpy(b + 8, nul_hdr, sizeof nul_hdr - 1);
        lp_st_file *f = NULL;
        assert_int_equal(lp_st_parse_buffer(b, len, "bad.safetensors", &f), F);
        assert_non_null(strstr(lp_err_msg(), "control character 0x00"));
        free(b);
    }
    expect_parse("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, F, "'a'", "dtype");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, F, "'a'", "shape");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, F, "'a'", "data_offsets");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, F, "'a'", "shape[0]");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, F, "'a'", "shape[0]");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",4]}}", 4, F, "'a'", "data_offsets");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, F, "'a'", "end before");
    /* metadata must be a string map */
    expect_parse("{\"__metadata__\":{\"n\":1}}", 0, F, "__metadata__", "'n'");
    expect_parse("{\"__metadata__\":[\"x\"]}", 0, F, "__metadata__", NULL);
    /* dtypes */
    expect_parse("{\"a\":{\"dtype\":\"X7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, F, "'a'", "unknown dtype");
    expect_parse("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, LP_STATUS_UNSUPPORTED,
                 "'a'", "F8_E4M3");
    /* dtype x shape vs offsets */
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, F, "'a'", "needs 12");
    expect_parse("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", 4, F, "'a'", "[2, 2]");
    expect_parse("{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, F, "'a'",
                 "overflows");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                 LP_STATUS_UNSUPPORTED, "'a'", "dimensions");
    /* offsets: overlap, gap, out of range, trailing data, first not at 0 */
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12, F, "'b'", "overlap");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                 12, F, "'b'", "gap");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, F, "'a'", "gap");
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, F, "out of range", NULL);
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, F, "trailing bytes", NULL);
    expect_parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 8, F, "'a'", "twice");
    /* entries in any order in the header are fine as long as offsets tile the data */
    expect_parse("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                 "\"a\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[4,4]},"
                 "\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                 8, LP_OK, NULL, NULL);
}

/* Writes a one-tensor shard holding F32 values start, start+1, ... */
static void write_shard(const char *name, const char *tname, float start)
{
    float v[3] = {start, start + 1, start + 2};
    int64_t s[] = {3};
    lp_st_write_tensor t = {tname, LP_ST_DTYPE_F32, 1, s, v};
    assert_int_equal(lp_st_write(tpath(name), &t, 1, NULL, 0), LP_OK);
}

static void test_sharded(void **state)
{
    (void)state;
    char d[300];
    snprintf(d, sizeof d, "%s", tmpdir);
    write_shard("model-00001-of-00002.safetensors", "a.weight", 1);
    write_shard("model-00002-of-00002.safetensors", "b.weight", 10);
    const char *idx = "{\"metadata\":{\"total_size\":24},\"weight_map\":{"
                      "\"a.weight\":\"model-00001-of-00002.safetensors\","
                      "\"b.weight\":\"model-00002-of-00002.safetensors\"}}";
    assert_int_equal(lp_file_write_atomic(tpath("model.safetensors.index.json"), idx, strlen(idx)), LP_OK);
    lp_st_set *s = NULL;
    assert_int_equal(lp_st_set_open_dir(d, &s), LP_OK);
    assert_int_equal(lp_st_set_file_count(s), 2);
    assert_int_equal(lp_st_set_count(s), 2);
    const lp_st_tensor *b = lp_st_set_find(s, "b.weight");
    assert_non_null(b);
    assert_true(((const float *)b->data)[2] == 12.0f);
    assert_non_null(strstr(b->file, "model-00002-of-00002"));
    assert_true(((const float *)lp_st_set_find(s, "a.weight")->data)[0] == 1.0f);
    assert_true(lp_st_set_disk_bytes(s) > 24);
    lp_st_set_close(s);

    /* the index names a tensor its shard does not hold */
    idx = "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
          "\"zzz\":\"model-00002-of-00002.safetensors\"}}";
    assert_int_equal(lp_file_write_atomic(tpath("i1.index.json"), idx, strlen(idx)), LP_OK);
    assert_int_equal(lp_st_set_open(tpath("i1.index.json"), &s), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "'zzz'"));
    /* a shard outside the directory */
    idx = "{\"weight_map\":{\"a.weight\":\"../evil.safetensors\"}}";
    assert_int_equal(lp_file_write_atomic(tpath("i2.index.json"), idx, strlen(idx)), LP_OK);
    assert_int_equal(lp_st_set_open(tpath("i2.index.json"), &s), LP_STATUS_FORMAT);
    /* a missing shard */
    idx = "{\"weight_map\":{\"a.weight\":\"model-00009.safetensors\"}}";
    assert_int_equal(lp_file_write_atomic(tpath("i3.index.json"), idx, strlen(idx)), LP_OK);
    assert_int_equal(lp_st_set_open(tpath("i3.index.json"), &s), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "model-00009.safetensors"));
    /* the same tensor in two shards */
    write_shard("dup.safetensors", "a.weight", 5);
    idx = "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\",\"x\":\"dup.safetensors\"}}";
    assert_int_equal(lp_file_write_atomic(tpath("i4.index.json"), idx, strlen(idx)), LP_OK);
    assert_int_equal(lp_st_set_open(tpath("i4.index.json"), &s), LP_STATUS_FORMAT);
    /* an index without weight_map, and not JSON */
    assert_int_equal(lp_file_write_atomic(tpath("i5.index.json"), "{}", 2), LP_OK);
    assert_int_equal(lp_st_set_open(tpath("i5.index.json"), &s), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "weight_map"));
    assert_int_equal(lp_file_write_atomic(tpath("i6.index.json"), "{,", 2), LP_OK);
    assert_int_equal(lp_st_set_open(tpath("i6.index.json"), &s), LP_STATUS_FORMAT);
    assert_null(s);
    /* a directory with no weights */
    char empty[320];
    snprintf(empty, sizeof empty, "%s/emptydir", tmpdir);
    assert_int_equal(lp_mkdir_p(empty), LP_OK);
    assert_int_equal(lp_st_set_open_dir(empty, &s), LP_STATUS_NOT_FOUND);
    assert_non_null(strstr(lp_err_msg(), "model.safetensors"));
}

static void test_dtype_names(void **state)
{
    (void)state;
    for (int d = 0; d < LP_ST_DTYPE__COUNT; d++) {
        lp_st_dtype back;
        assert_int_equal(lp_st_dtype_parse(lp_st_dtype_name((lp_st_dtype)d), &back), LP_OK);
        assert_int_equal(back, d);
        assert_true(lp_st_dtype_size((lp_st_dtype)d) > 0);
    }
    assert_int_equal(lp_st_dtype_size(LP_ST_DTYPE_BF16), 2);
    assert_int_equal(lp_st_dtype_size(LP_ST_DTYPE_BOOL), 1);
    assert_int_equal(lp_st_dtype_size(LP_ST_DTYPE_I64), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),          cmocka_unit_test(test_write_errors_leave_nothing),
        cmocka_unit_test(test_empty_and_truncated_files), cmocka_unit_test(test_header_size_limits),
        cmocka_unit_test(test_malformed_headers),   cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_dtype_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
