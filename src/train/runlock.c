/* A run directory is owned by one run: an advisory lock (flock on <run>/.lock, which holds
 * the owner's PID) taken when the run directory is created and released on exit, so a second
 * run with the same --run-id cannot silently replace the first one's files. The kernel drops
 * a dead process's flock, so a lock file whose PID is gone is stale and is taken over. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

#define LOCK_NAME ".lock"

/* The PID written in the lock file, or 0. */
static long read_pid(int fd)
{
    char b[32] = "";
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n <= 0)
        return 0;
    b[n] = '\0';
    return strtol(b, NULL, 10);
}

/* What the directory holds besides the lock: 0 nothing, 1 a loupe run's files only,
 * 2 something else too (not a run directory: never cleared). */
static int contents(const char *dir)
{
    static const char *const run_files[] = {"config.json", "steps.csv",   "epoch_results.csv", "summary.json",
                                            "tensorboard", "checkpoints", "profiler",
                                            /* the CLI's page of the run (cli_report.c) */
                                            "report.html", "plots", "peak.json",
                                            /* HF Trainer's metrics and instruction data's exact
                                               match (loop.c) */
                                            "train_results.json", "exact_match.json", NULL};
    DIR *d = opendir(dir);
    if (!d)
        return 2;
    int what = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, LOCK_NAME))
            continue;
        int known = 0;
        for (const char *const *f = run_files; *f; f++)
            known |=
                !strcmp(e->d_name, *f) || (!strncmp(e->d_name, *f, strlen(*f)) && strstr(e->d_name, ".tmp."));
        what = known && what < 2 ? 1 : 2;
    }
    closedir(d);
    return what;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes everything in dir but the lock (--overwrite). */
static lp_status clear(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return lp_err(LP_STATUS_IO, "%s: cannot open: %s", dir, strerror(errno));
    lp_status st = LP_OK;
    char p[4096];
    for (struct dirent *e; st == LP_OK && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, LOCK_NAME))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            st = lp_err(LP_STATUS_IO, "%s: --overwrite could not remove it: %s", p, strerror(errno));
    }
    closedir(d);
    return st;
}

lp_status lp_runlock_acquire(const char *run_dir, bool overwrite, bool resume, bool quiet, lp_runlock *lk)
{
    lk->fd = -1;
    if ((size_t)snprintf(lk->path, sizeof lk->path, "%s/%s", run_dir, LOCK_NAME) >= sizeof lk->path)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: path too long", run_dir);
    lp_status st = lp_mkdir_p(run_dir);
    if (st != LP_OK)
        return st;
    int fd = -1;
    long pid = 0;
    for (int tries = 0; fd < 0; tries++) {
        fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return lp_err(LP_STATUS_IO, "%s: cannot create the run lock: %s", lk->path, strerror(errno));
        pid = read_pid(fd);
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK) /* a job that cannot run now, not a usage error: exit 1 */
                return lp_err(LP_STATUS_IO,
                              "%s: in use by another run (pid %ld holds %s); wait for it to finish or choose "
                              "another --run-id",
                              run_dir, pid, lk->path);
            return lp_err(LP_STATUS_IO, "%s: cannot lock: %s", lk->path, strerror(e));
        }
        /* the previous owner may have removed the file between our open and our lock: the lock
         * is only ours if it is on the file the path names now */
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(lk->path, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
            close(fd);
            fd = -1;
            if (tries > 8)
                return lp_err(LP_STATUS_IO, "%s: the run lock keeps changing under us", lk->path);
        }
    }
    lk->fd = fd;
    if (pid > 0 && pid != (long)getpid() && !quiet)
        fprintf(stderr, "loupe: %s: stale lock of pid %ld (no longer running) taken over\n", run_dir, pid);
    int what = contents(run_dir);
    if (what && !resume) {
        if (!overwrite)
            st =
                lp_err(LP_STATUS_INVALID_ARG,
                       "%s already holds a run: --resume %s continues it, --overwrite replaces it, or choose "
                       "another --run-id",
                       run_dir, run_dir);
        else if (what == 2)
            st = lp_err(LP_STATUS_INVALID_ARG,
                        "%s holds files that are not a loupe run's: --overwrite does not remove them; choose "
                        "another --run-id or --output-dir",
                        run_dir);
        else
            st = clear(run_dir);
    }
    char b[32];
    int n = snprintf(b, sizeof b, "%ld\n", (long)getpid());
    if (st == LP_OK && (ftruncate(fd, 0) != 0 || pwrite(fd, b, (size_t)n, 0) != n))
        st = lp_err(LP_STATUS_IO, "%s: cannot write the run lock: %s", lk->path, strerror(errno));
    if (st != LP_OK) /* refused: the directory is left as it was, but for a stale lock */
        lp_runlock_release(lk);
    return st;
}

void lp_runlock_release(lp_runlock *lk)
{
    if (lk->fd < 0)
        return;
    unlink(lk->path); /* while still locked: nobody can have taken it in between */
    close(lk->fd);
    lk->fd = -1;
}
