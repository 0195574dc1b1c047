/* Whole-file reads, atomic writes (temp name + fsync + rename) and mkdir -p, so that
 * no command ever leaves a half-written output under its final name. */
#include "loupe/base.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

lp_status lp_file_read_all(const char *path, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return lp_err(LP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = lp_malloc(cap + 1);
    if (!buf) {
        fclose(fp);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory reading file", path);
    }
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (n < cap) {
            if (ferror(fp)) {
                int e = errno;
                free(buf);
                fclose(fp);
                return lp_err(LP_STATUS_IO, "%s: read failed: %s", path, strerror(e));
            }
            break;
        }
        char *bigger = lp_realloc(buf, cap * 2 + 1);
        if (!bigger) {
            free(buf);
            fclose(fp);
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory reading file", path);
        }
        buf = bigger;
        cap *= 2;
    }
    fclose(fp);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return LP_OK;
}

lp_status lp_atomic_open(lp_atomic_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    size_t n = strlen(path) + 32;
    f->path = strdup(path);
    f->tmp_path = malloc(n);
    if (!f->path || !f->tmp_path) {
        lp_atomic_abort(f);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    snprintf(f->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    f->fp = fopen(f->tmp_path, "wb");
    if (!f->fp) {
        int e = errno;
        lp_status st = lp_err(LP_STATUS_IO, "%s: cannot create: %s", f->tmp_path, strerror(e));
        free(f->path);
        free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return st;
    }
    return LP_OK;
}

lp_status lp_atomic_commit(lp_atomic_file *f)
{
    if (!f->fp)
        return lp_err(LP_STATUS_INVALID_ARG, "atomic file was not open");
    int bad = ferror(f->fp);
    int e = 0;
    if (fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0) {
        bad = 1;
        e = errno;
    }
    if (fclose(f->fp) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    f->fp = NULL;
    lp_status st = LP_OK;
    if (bad) {
        st = lp_err(LP_STATUS_IO, "%s: write failed: %s", f->path, e ? strerror(e) : "stream error");
        unlink(f->tmp_path);
    } else if (rename(f->tmp_path, f->path) != 0) {
        st = lp_err(LP_STATUS_IO, "%s: cannot rename into place: %s", f->path, strerror(errno));
        unlink(f->tmp_path);
    }
    free(f->path);
    free(f->tmp_path);
    f->path = f->tmp_path = NULL;
    return st;
}

void lp_atomic_abort(lp_atomic_file *f)
{
    if (f->fp) {
        fclose(f->fp);
        f->fp = NULL;
        if (f->tmp_path)
            unlink(f->tmp_path);
    }
    free(f->path);
    free(f->tmp_path);
    f->path = f->tmp_path = NULL;
}

lp_status lp_file_write_atomic(const char *path, const void *data, size_t len)
{
    lp_atomic_file f;
    lp_status st = lp_atomic_open(&f, path);
    if (st != LP_OK)
        return st;
    if (len && fwrite(data, 1, len, f.fp) != len) {
        int e = errno;
        lp_atomic_abort(&f);
        return lp_err(LP_STATUS_IO, "%s: write failed: %s", path, strerror(e));
    }
    return lp_atomic_commit(&f);
}

lp_status lp_mkdir_p(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return lp_err(LP_STATUS_NO_MEMORY, "out of memory");
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c == '/' || c == '\0') {
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                lp_status st = lp_err(LP_STATUS_IO, "%s: cannot create directory: %s", p, strerror(errno));
                free(p);
                return st;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(p);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return lp_err(LP_STATUS_IO, "%s: exists and is not a directory", path);
    return LP_OK;
}

/* Removes a directory that holds only plain files (what lp_dir_write_atomic's fill wrote). */
static void remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        char p[4096];
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < sizeof p)
                unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

lp_status lp_dir_write_atomic(const char *dir, lp_dir_fill_fn fill, void *ctx)
{
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return lp_err(LP_STATUS_IO, "%s: exists and is not a directory", dir);
        return fill(ctx, dir);
    }
    char tmp[4096], parent[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", dir) >= sizeof tmp)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: path too long", dir);
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        lp_status st = lp_mkdir_p(parent);
        if (st != LP_OK)
            return st;
    }
    if (!mkdtemp(tmp))
        return lp_err(LP_STATUS_IO, "%s: cannot create a temporary directory: %s", tmp, strerror(errno));
    chmod(tmp, 0755);
    lp_status st = fill(ctx, tmp);
    if (st == LP_OK && rename(tmp, dir) != 0)
        st = lp_err(LP_STATUS_IO, "%s: cannot rename %s into place: %s", dir, tmp, strerror(errno));
    if (st != LP_OK)
        remove_flat_dir(tmp);
    return st;
}
