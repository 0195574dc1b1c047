/* A multi-rank job: every trace in a directory, one model each (loaded one after another,
 * so memory is one trace's window plus each rank's tables), ranked by distributedInfo or by
 * the number after "rank"/"worker" in the file name; then the per-rank compute,
 * communication, overlap and idle figures and the slowest rank with the reason. */
#include "loupe/report.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static int is_pt_trace(const char *n)
{
    size_t l = strlen(n);
    return (l > 14 && !strcmp(n + l - 14, ".pt.trace.json")) ||
           (l > 17 && !strcmp(n + l - 17, ".pt.trace.json.gz"));
}

static int is_trace_name(const char *n)
{
    size_t l = strlen(n);
    static const char *const ends[] = {".json", ".json.gz"};
    for (size_t i = 0; i < 2; i++) {
        size_t e = strlen(ends[i]);
        if (l > e && !strcmp(n + l - e, ends[i]))
            return 1;
    }
    return 0;
}

/* The number after "rank" or "worker" in a file name ("rank-3.json", "worker1_step..."); -1. */
static int64_t rank_in_name(const char *n)
{
    static const char *const tags[] = {"rank", "worker"};
    for (size_t i = 0; i < 2; i++) {
        const char *p = strstr(n, tags[i]);
        if (!p)
            continue;
        p += strlen(tags[i]);
        while (*p == '-' || *p == '_')
            p++;
        if (isdigit((unsigned char)*p))
            return strtoll(p, NULL, 10);
    }
    return -1;
}

static int cmp_rank(const void *a, const void *b)
{
    const lp_trace_model *x = *(lp_trace_model *const *)a, *y = *(lp_trace_model *const *)b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void lp_trace_job_free(lp_trace_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++)
        lp_trace_model_free(j->ranks[i]);
    free(j->ranks);
    free(j->rows);
    free(j);
}

static void job_figures(lp_trace_job *j)
{
    int64_t min_comm = -1;
    for (size_t i = 0; i < j->n; i++) {
        const lp_trace_model *m = j->ranks[i];
        const lp_trace_gpu *g = &m->gpu;
        lp_trace_rank_row *r = &j->rows[i];
        r->rank = m->rank;
        r->span_ns = m->has_device ? g->last_ns - g->first_ns : m->last_ns - m->first_ns;
        r->compute_ns = g->compute_ns + g->memory_ns;
        r->comm_ns = g->comm_ns;
        r->overlap_ns = g->comm_overlap_ns;
        r->other_ns = r->span_ns - g->busy_ns;
        if (!m->has_device) {
            /* CPU-only: host threads instead of streams. The step parts give an instant with
             * communication to communication, so compute is its part plus the overlap. */
            r->overlap_ns = m->host_comm_overlap_ns;
            r->compute_ns = m->total.part_ns[LP_TRACE_PART_CPU_EXEC] + r->overlap_ns;
            r->comm_ns = m->total.part_ns[LP_TRACE_PART_COMMUNICATION];
            r->other_ns = r->span_ns - r->compute_ns - r->comm_ns + r->overlap_ns;
        }
        if (min_comm < 0 || r->comm_ns < min_comm)
            min_comm = r->comm_ns;
    }
    size_t slow = 0;
    for (size_t i = 0; i < j->n; i++) {
        j->rows[i].comm_wait_ns = j->rows[i].comm_ns - min_comm;
        if (j->rows[i].compute_ns > j->rows[slow].compute_ns)
            slow = i;
    }
    j->slowest_rank = j->n ? j->rows[slow].rank : -1;
    if (j->n) {
        const lp_trace_rank_row *r = &j->rows[slow];
        /* A collective ends when the last rank arrives: the rank with the most compute has the
         * least communication time, the others' extra communication is waiting for it. */
        int64_t max_wait = 0;
        for (size_t i = 0; i < j->n; i++)
            if (j->rows[i].comm_wait_ns > max_wait)
                max_wait = j->rows[i].comm_wait_ns;
        snprintf(
            j->slowest_why, sizeof j->slowest_why,
            "rank %lld computes longest (%.3f ms); its communication is %.3f ms, %.3f ms above the fastest "
            "rank's, while other ranks spend up to %.3f ms more than the least in communication: %s",
            (long long)r->rank, (double)r->compute_ns / 1e6, (double)r->comm_ns / 1e6,
            (double)r->comm_wait_ns / 1e6, (double)max_wait / 1e6,
            r->comm_wait_ns * 2 < max_wait ? "they are waiting for it (a straggler)"
                                           : "its collectives themselves are slow (transferring)");
    }
}

lp_status lp_trace_job_load(const char *dir, const lp_trace_model_opts *o, lp_trace_job **out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return lp_err(LP_STATUS_IO, "%s: cannot open directory", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    lp_status st = LP_OK;
    /* *.pt.trace.json[.gz] when there are any (run directories hold other JSON), else every
     * *.json[.gz] (HTA's rank-N.json.gz) */
    int pt = 0;
    for (struct dirent *e; (e = readdir(d));)
        pt |= e->d_name[0] != '.' && is_pt_trace(e->d_name);
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !(pt ? is_pt_trace(e->d_name) : is_trace_name(e->d_name)))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **q = realloc(names, cap * sizeof *q);
            if (!q) {
                st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
                break;
            }
            names = q;
        }
        if (!(names[n] = strdup(e->d_name))) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
            break;
        }
        n++;
    }
    closedir(d);
    lp_trace_job *j = NULL;
    if (st == LP_OK && n == 0)
        st = lp_err(LP_STATUS_NOT_FOUND, "%s: no trace (*.json, *.json.gz) in this directory", dir);
    if (st == LP_OK && (!(j = calloc(1, sizeof *j)) || !(j->ranks = calloc(n, sizeof *j->ranks)) ||
                        !(j->rows = calloc(n, sizeof *j->rows))))
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    if (st == LP_OK)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; st == LP_OK && i < n; i++) {
        size_t need = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(need);
        if (!path) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
            break;
        }
        snprintf(path, need, "%s/%s", dir, names[i]);
        st = lp_trace_model_load(path, o, &j->ranks[j->n]);
        free(path);
        if (st == LP_OK) {
            lp_trace_model *m = j->ranks[j->n++];
            int64_t r = rank_in_name(names[i]);
            if (r >= 0 && m->rank < 0)
                m->rank = r;
            if (m->rank < 0)
                m->rank = (int64_t)i;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (st != LP_OK) {
        lp_trace_job_free(j);
        return st;
    }
    for (size_t a = 0; a < j->n; a++)
        for (size_t b = a + 1; b < j->n; b++)
            if (j->ranks[a]->rank == j->ranks[b]->rank) {
                lp_status e = lp_err(LP_STATUS_FORMAT, "%s: two traces claim rank %lld (%s and %s)", dir,
                                     (long long)j->ranks[a]->rank, j->ranks[a]->path, j->ranks[b]->path);
                lp_trace_job_free(j);
                return e;
            }
    qsort(j->ranks, j->n, sizeof *j->ranks, cmp_rank);
    job_figures(j);
    *out = j;
    return LP_OK;
}

void lp_trace_job_write_text(FILE *f, const lp_trace_job *j)
{
    fprintf(f, "\nDistributed job: %zu ranks (ms; GPU time when the traces have device events)\n", j->n);
    fprintf(f, "%6s %12s %12s %14s %12s %12s %12s\n", "Rank", "Span", "Compute", "Communication", "Overlap",
            "Other", "Comm wait");
    for (size_t i = 0; i < j->n; i++) {
        const lp_trace_rank_row *r = &j->rows[i];
        fprintf(f, "%6lld %12.3f %12.3f %14.3f %12.3f %12.3f %12.3f\n", (long long)r->rank, r->span_ns / 1e6,
                r->compute_ns / 1e6, r->comm_ns / 1e6, r->overlap_ns / 1e6, r->other_ns / 1e6,
                r->comm_wait_ns / 1e6);
    }
    fprintf(f, "Slowest rank: %lld: %s\n", (long long)j->slowest_rank, j->slowest_why);
    for (size_t i = 0; i < j->n; i++) {
        const lp_trace_model *m = j->ranks[i];
        for (size_t c = 0; c < m->n_colls; c++)
            fprintf(f, "  rank %lld %-24s %8lld calls %12.3f ms\n", (long long)m->rank, m->colls[c].name,
                    (long long)m->colls[c].calls, m->colls[c].total_ns / 1e6);
    }
}

lp_status lp_trace_job_write_csv(const lp_trace_job *j, const char *dir)
{
    lp_status st = lp_mkdir_p(dir);
    if (st != LP_OK)
        return st;
    size_t cap = 256 + 128 * j->n;
    char *buf = malloc(cap);
    if (!buf)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    size_t len = (size_t)snprintf(
        buf, cap, "rank,span_ns,compute_ns,comm_ns,overlap_ns,other_ns,comm_wait_ns,slowest\n");
    for (size_t i = 0; i < j->n && len < cap; i++) {
        const lp_trace_rank_row *r = &j->rows[i];
        len += (size_t)snprintf(buf + len, cap - len, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%d\n",
                                (long long)r->rank, (long long)r->span_ns, (long long)r->compute_ns,
                                (long long)r->comm_ns, (long long)r->overlap_ns, (long long)r->other_ns,
                                (long long)r->comm_wait_ns, r->rank == j->slowest_rank);
    }
    size_t need = strlen(dir) + 16;
    char *path = malloc(need);
    if (path) {
        snprintf(path, need, "%s/ranks.csv", dir);
        st = lp_file_write_atomic(path, buf, len < cap ? len : cap - 1);
    } else {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    }
    free(path);
    free(buf);
    for (size_t i = 0; st == LP_OK && i < j->n; i++) {
        char sub[1100];
        snprintf(sub, sizeof sub, "%s/rank%lld", dir, (long long)j->ranks[i]->rank);
        st = lp_trace_model_write_csv(j->ranks[i], sub);
    }
    return st;
}
