/* Status names, error messages and atomic writes: a failed write must leave the old
 * file intact and no temporary behind. */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/base.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    return lp_test_tmpdir_make(tmpdir, sizeof tmpdir, "base");
}

static int teardown(void **state)
{
    (void)state;
    return lp_test_tmpdir_remove(tmpdir);
}

static void test_status_names_distinct(void **state)
{
    (void)state;
    for (int a = 0; a < LP_STATUS__COUNT; a++)
        for (int b = a + 1; b < LP_STATUS__COUNT; b++)
            assert_string_not_equal(lp_status_str(a), lp_status_str(b));
    assert_string_equal(lp_status_str(LP_OK), "ok");
}

static void test_err_message_and_wrap(void **state)
{
    (void)state;
    lp_status st = lp_err(LP_STATUS_FORMAT, "%s: bad header at byte %d", "m.safetensors", 8);
    assert_int_equal(st, LP_STATUS_FORMAT);
    assert_string_equal(lp_err_msg(), "m.safetensors: bad header at byte 8");
    lp_err_wrap(st, "loading %s", "model");
    assert_string_equal(lp_err_msg(), "loading model: m.safetensors: bad header at byte 8");
    lp_err_clear();
    assert_string_equal(lp_err_msg(), "");
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static void test_atomic_write_and_read_back(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/a/b/out.txt", tmpdir);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/a/b", tmpdir);
    assert_int_equal(lp_mkdir_p(dir), LP_OK);
    assert_int_equal(lp_file_write_atomic(path, "hello", 5), LP_OK);
    char *buf;
    size_t len;
    assert_int_equal(lp_file_read_all(path, &buf, &len), LP_OK);
    assert_int_equal(len, 5);
    assert_string_equal(buf, "hello");
    free(buf);
    assert_int_equal(count_entries(dir), 1);
}

static void test_atomic_abort_keeps_old_file(void **state)
{
    (void)state;
    char dir[300], path[320];
    snprintf(dir, sizeof dir, "%s/keep", tmpdir);
    assert_int_equal(lp_mkdir_p(dir), LP_OK);
    snprintf(path, sizeof path, "%s/keep.txt", dir);
    assert_int_equal(lp_file_write_atomic(path, "old", 3), LP_OK);
    lp_atomic_file f;
    assert_int_equal(lp_atomic_open(&f, path), LP_OK);
    fputs("half-written", f.fp);
    lp_atomic_abort(&f);
    char *buf;
    size_t len;
    assert_int_equal(lp_file_read_all(path, &buf, &len), LP_OK);
    assert_string_equal(buf, "old");
    free(buf);
    assert_int_equal(count_entries(dir), 1);
}

static void test_full_disk_is_an_error(void **state)
{
    (void)state;
    if (access("/dev/full", W_OK) != 0)
        skip();
    /* /dev/full cannot be renamed over, but commit must fail on the write first. */
    lp_atomic_file f = {0};
    f.fp = fopen("/dev/full", "w");
    assert_non_null(f.fp);
    f.path = strdup("/dev/full");
    f.tmp_path = strdup("/nonexistent-tmp");
    for (int i = 0; i < 100000; i++)
        fputs("xxxxxxxxxx", f.fp);
    assert_int_equal(lp_atomic_commit(&f), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "write failed"));
}

static void test_missing_file_names_path(void **state)
{
    (void)state;
    char *buf;
    size_t len;
    assert_int_equal(lp_file_read_all("/nonexistent/x.json", &buf, &len), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent/x.json"));
    assert_null(buf);
}

static lp_status fill_two(void *fail_second, const char *dir)
{
    char p[600];
    snprintf(p, sizeof p, "%s/a.txt", dir);
    lp_status st = lp_file_write_atomic(p, "a", 1);
    if (st != LP_OK)
        return st;
    if (fail_second)
        return lp_err(LP_STATUS_IO, "%s: simulated full disk", dir);
    snprintf(p, sizeof p, "%s/b.txt", dir);
    return lp_file_write_atomic(p, "b", 1);
}

static void test_dir_write_atomic(void **state)
{
    (void)state;
    char parent[300], dir[320];
    snprintf(parent, sizeof parent, "%s/dirs", tmpdir);
    snprintf(dir, sizeof dir, "%s/new/model", parent);
    /* a failing fill leaves no directory and no temporary behind */
    assert_int_equal(lp_dir_write_atomic(dir, fill_two, (void *)1), LP_STATUS_IO);
    assert_int_not_equal(access(dir, F_OK), 0);
    snprintf(dir, sizeof dir, "%s/new", parent);
    assert_int_equal(count_entries(dir), 0);
    /* a complete fill appears under its final name with every file */
    snprintf(dir, sizeof dir, "%s/new/model", parent);
    assert_int_equal(lp_dir_write_atomic(dir, fill_two, NULL), LP_OK);
    assert_int_equal(count_entries(dir), 2);
    /* an existing directory is filled in place */
    assert_int_equal(lp_dir_write_atomic(dir, fill_two, NULL), LP_OK);
    assert_int_equal(count_entries(dir), 2);
    /* a file in the way is an error naming it */
    char file[340];
    snprintf(file, sizeof file, "%s/a.txt", dir);
    assert_int_equal(lp_dir_write_atomic(file, fill_two, NULL), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "not a directory"));
}

/* lp_grow: first allocation, doubling past the need, no-op when large enough, and an
 * overflowing request refused with the array and capacity untouched. */
static void test_grow(void **state)
{
    (void)state;
    size_t cap = 0;
    int *v = lp_grow(NULL, &cap, 1, sizeof *v, 8);
    assert_non_null(v);
    assert_int_equal(cap, 8);
    v[7] = 42;
    int *w = lp_grow(v, &cap, 8, sizeof *v, 8); /* already room */
    assert_ptr_equal(w, v);
    assert_int_equal(cap, 8);
    v = lp_grow(v, &cap, 40, sizeof *v, 8); /* 8 -> 16 -> 32 -> 64 */
    assert_non_null(v);
    assert_int_equal(cap, 64);
    assert_int_equal(v[7], 42);
    assert_null(lp_grow(v, &cap, SIZE_MAX / 2, sizeof *v, 8));
    assert_int_equal(cap, 64);
    assert_int_equal(v[7], 42);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names_distinct),
        cmocka_unit_test(test_err_message_and_wrap),
        cmocka_unit_test(test_atomic_write_and_read_back),
        cmocka_unit_test(test_atomic_abort_keeps_old_file),
        cmocka_unit_test(test_full_disk_is_an_error),
        cmocka_unit_test(test_missing_file_names_path),
        cmocka_unit_test(test_dir_write_atomic),
        cmocka_unit_test(test_grow),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
