/* loupe checkpoint verify DIR: checks checkpoints against the crc32 checksums written with
 * them. DIR is one checkpoint (<run>/checkpoints/step-N) or a run directory (each of its
 * checkpoints, newest first). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "loupe/train.h"

static const char usage[] =
    "usage: loupe checkpoint verify DIR\n"
    "\n"
    "Checks a checkpoint (DIR = <run>/checkpoints/step-N) or every checkpoint of a run\n"
    "(DIR = <run>) against the crc32 of each file and tensor written with it.\n"
    "Exit status: 0 every checkpoint verifies, 1 one is damaged or unreadable (the message\n"
    "names the file and tensor), 2 usage error.\n";

static int verify_one(const char *dir)
{
    bool sums = false;
    if (lp_checkpoint_verify(dir, &sums) != LP_OK) {
        fprintf(stderr, "loupe checkpoint: %s\n", lp_err_msg());
        printf("%s: damaged\n", dir);
        return LP_EXIT_FAIL;
    }
    printf("%s: %s\n", dir, sums ? "ok" : "ok (written before checksums: nothing to check)");
    return LP_EXIT_OK;
}

static int by_step_desc(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int lp_cmd_checkpoint(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return LP_EXIT_OK;
    }
    if (argc != 3 || strcmp(argv[1], "verify"))
        return lp_cli_usage_error("checkpoint", "expected: checkpoint verify DIR");
    const char *dir = argv[2];
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/trainer_state.json", dir);
    if (stat(p, &sb) == 0)
        return verify_one(dir);
    snprintf(p, sizeof p, "%s/checkpoints", dir);
    DIR *d = opendir(p);
    if (!d) {
        fprintf(stderr,
                "loupe checkpoint: %s: neither a checkpoint (no trainer_state.json) nor a run directory "
                "(no checkpoints/)\n",
                dir);
        return LP_EXIT_FAIL;
    }
    long long steps[4096];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 4096;) {
        long long v;
        char tail;
        if (sscanf(e->d_name, "step-%lld%c", &v, &tail) == 1)
            steps[n++] = v;
    }
    closedir(d);
    if (!n) {
        fprintf(stderr, "loupe checkpoint: %s/checkpoints: no checkpoints\n", dir);
        return LP_EXIT_FAIL;
    }
    qsort(steps, n, sizeof steps[0], by_step_desc);
    int rc = LP_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/checkpoints/step-%lld", dir, steps[i]);
        if (verify_one(p) != LP_EXIT_OK)
            rc = LP_EXIT_FAIL;
    }
    return rc;
}
