/* A run directory read back for report.html: summary.json (through the comparison's
 * reader), steps.csv and epoch_results.csv by column name, and when the run was profiled
 * the Kineto trace under profiler/: torch's key averages per op plus the bytes loupe's ops
 * record, and the memory timeline per category. A bench run is its baseline_metrics.json. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "loupe/report.h"
#include "loupe/io.h"
#include "run_internal.h"

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- CSV by column name ------------------------------------------------------------- */

/* Reads path (a header line, then rows of numbers) and stores, for each row, the values of
 * the columns named in cols (NaN for a column the file lacks or an empty field) into
 * (*rows)[row * ncols + k]. A row with fewer fields than the header or a field that is not
 * a number is FORMAT naming the file and line: a truncated file is an error, not a shorter
 * run. A missing file is 0 rows when optional. */
static lp_status read_csv(const char *path, const char *const *cols, int ncols, int optional, double **rows,
                          int32_t *nrows)
{
    *rows = NULL;
    *nrows = 0;
    if (optional && !is_file(path))
        return LP_OK;
    char *text;
    size_t len;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st != LP_OK)
        return st;
    int idx[32], nhead = 0;
    for (int k = 0; k < ncols; k++)
        idx[k] = -1;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    if (!line || len == 0) {
        free(text);
        return lp_err(LP_STATUS_FORMAT, "%s: empty (no header line)", path);
    }
    for (char *f = line, *next; f; f = next) {
        next = strchr(f, ',');
        if (next)
            *next++ = 0;
        size_t fl = strlen(f);
        if (fl && f[fl - 1] == '\r')
            f[fl - 1] = 0;
        for (int k = 0; k < ncols; k++)
            if (strcmp(f, cols[k]) == 0)
                idx[k] = nhead;
        nhead++;
    }
    if (idx[0] < 0) {
        free(text);
        return lp_err(LP_STATUS_FORMAT, "%s: no \"%s\" column: not a loupe metrics file", path, cols[0]);
    }
    int ended = len > 0 && text[len - 1] == '\n';
    size_t cap = 0;
    double *out = NULL;
    int32_t n = 0, lineno = 1;
    while ((line = strtok_r(NULL, "\n", &save))) {
        lineno++;
        if (!*line || strcmp(line, "\r") == 0)
            continue;
        double vals[64];
        int nf = 0, bad = 0;
        for (char *f = line, *next; f && nf < 64; f = next, nf++) {
            next = strchr(f, ',');
            if (next)
                *next++ = 0;
            char *end;
            vals[nf] = *f && *f != '\r' ? strtod(f, &end) : NAN;
            if (*f && *f != '\r' && *end && *end != '\r')
                bad = 1;
        }
        int last = save == NULL || *save == 0;
        if (nf < nhead || bad) {
            free(out);
            free(text);
            return lp_err(LP_STATUS_FORMAT, "%s: line %d: %s%s", path, lineno,
                          nf < nhead ? "missing fields" : "a field is not a number",
                          last && !ended ? " (the file is truncated)" : "");
        }
        double *o = lp_grow(out, &cap, (size_t)(n + 1) * (size_t)ncols, sizeof *out, 64);
        if (!o) {
            free(out);
            free(text);
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        }
        out = o;
        for (int k = 0; k < ncols; k++)
            out[(size_t)n * ncols + k] = idx[k] >= 0 && idx[k] < nf ? vals[idx[k]] : NAN;
        n++;
    }
    free(text);
    *rows = out;
    *nrows = n;
    return LP_OK;
}

static lp_status read_steps(lp_run_data *d)
{
    static const char *const cols[] = {"step",    "loss",       "lr",           "step_ms",
                                       "data_ms", "forward_ms", "backward_ms",  "optimizer_ms",
                                       "samples", "tokens",     "memory_bytes", "rss_bytes"};
    enum { NC = sizeof cols / sizeof cols[0] };
    _Static_assert(sizeof(lp_run_step) == NC * sizeof(double), "lp_run_step mirrors the columns");
    char path[1100];
    snprintf(path, sizeof path, "%s/steps.csv", d->dir);
    double *v;
    lp_status st = read_csv(path, cols, NC, 1, &v, &d->n_steps);
    d->steps = (lp_run_step *)v; // rows of NC doubles, the struct's layout
    return st;
}

static lp_status read_epochs(lp_run_data *d)
{
    static const char *const cols[] = {"epoch",         "train_loss",    "eval_loss",
                                       "eval_accuracy", "eval_macro_f1", "samples_per_s"};
    enum { NC = sizeof cols / sizeof cols[0] };
    _Static_assert(sizeof(lp_run_epoch) == NC * sizeof(double), "lp_run_epoch mirrors the columns");
    char path[1100];
    snprintf(path, sizeof path, "%s/epoch_results.csv", d->dir);
    double *v;
    lp_status st = read_csv(path, cols, NC, 1, &v, &d->n_epochs);
    d->epochs = (lp_run_epoch *)v;
    return st;
}

/* ---- summary.json's fields beyond the comparison's ----------------------------------- */

lp_status lp_run__read_json(const char *dir, const char *file, const char *what, cJSON **out)
{
    *out = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = NULL;
    size_t len = 0;
    lp_status st = lp_file_read_all(path, &text, &len);
    if (st != LP_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", lp_err_msg());
        return lp_err(st, "%s: not a %s (%s)", dir, what, why);
    }
    bool oom;
    *out = lp_json_parse(text, len, NULL, &oom);
    free(text);
    if (!*out)
        return oom ? lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory parsing the JSON", path)
                   : lp_err(LP_STATUS_FORMAT, "%s: not JSON (truncated?)", path);
    return LP_OK;
}

static lp_status read_summary_extra(lp_run_data *d)
{
    cJSON *j;
    lp_status st = lp_run__read_json(d->dir, "summary.json", "run directory", &j);
    if (st != LP_OK)
        return st;
    d->achieved_gflops = lp_json_num(j, "achieved_gflops");
    d->mfu = lp_json_num(j, "mfu");
    d->peak_gflops = lp_json_num(j, "peak_gflops");
    d->peak_rss_bytes = lp_json_num(j, "peak_rss_bytes");
    d->train_time_s = lp_json_num(j, "train_time_s");
    d->samples = lp_json_num(j, "samples");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
    lp_json_str(d->model, sizeof d->model, m, "name");
    lp_json_str(d->task, sizeof d->task, m, "task");
    cJSON_Delete(j);
    return LP_OK;
}

/* profiler/summary.json: the mean step's breakdown (categories that sum to the step). */
static lp_status read_prof_summary(lp_run_data *d)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/profiler/summary.json", d->dir);
    if (!is_file(path))
        return LP_OK;
    cJSON *j;
    lp_status st = lp_run__read_json(d->dir, "profiler/summary.json", "profiled run directory", &j);
    if (st != LP_OK)
        return st;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "breakdown_ms"),
                *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
    double count = lp_json_num(steps, "count");
    for (const cJSON *c = b ? b->child : NULL; c && d->n_step_parts < 8; c = c->next)
        if (cJSON_IsNumber(c) && c->string) {
            snprintf(d->step_parts[d->n_step_parts], sizeof d->step_parts[0], "%s", c->string);
            d->step_parts_ms[d->n_step_parts++] = c->valuedouble / (count > 0 ? count : 1);
        }
    cJSON_Delete(j);
    return LP_OK;
}

/* ---- the trace ----------------------------------------------------------------------- */

/* The newest trace file under dir/profiler (names sort by time within a run). */
static int find_trace(const lp_run_data *d, char *rel, size_t cap)
{
    char pd[1100];
    snprintf(pd, sizeof pd, "%s/profiler", d->dir);
    DIR *dp = opendir(pd);
    if (!dp)
        return 0;
    char best[256] = "";
    for (struct dirent *e; (e = readdir(dp));) {
        const char *n = e->d_name;
        if ((strstr(n, ".pt.trace.json") || strstr(n, ".trace.json")) && strlen(n) < sizeof best &&
            strcmp(n, best) > 0)
            snprintf(best, sizeof best, "%s", n);
    }
    closedir(dp);
    if (!*best)
        return 0;
    snprintf(rel, cap, "profiler/%s", best);
    return 1;
}

static lp_status read_ops(lp_run_data *d, const lp_prof_events *ev)
{
    lp_prof_keyavg_opts o;
    lp_prof_keyavg_opts_init(&o);
    lp_prof_keyavg ka;
    lp_status st = lp_prof_keyavg_build(ev, &o, &ka);
    if (st != LP_OK)
        return st;
    lp_prof_keyavg_sort(&ka, LP_PROF_SORT_SELF_CPU_TIME_TOTAL);
    size_t n = ka.n < 64 ? ka.n : 64; // the report shows the top ops; the rest is in key_averages
    d->ops = calloc(n ? n : 1, sizeof *d->ops);
    if (!d->ops) {
        lp_prof_keyavg_free(&ka);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", d->dir);
    }
    for (size_t i = 0; i < n; i++) {
        const lp_prof_keyavg_row *r = &ka.rows[i];
        if (strncmp(r->key, "ProfilerStep", 12) == 0)
            continue;
        lp_run_op *op = &d->ops[d->n_ops++];
        snprintf(op->name, sizeof op->name, "%s", r->key);
        op->calls = (double)r->count;
        op->self_ms = r->self_cpu_us / 1e3;
        op->total_ms = r->cpu_total_us / 1e3;
        op->flops = r->flops > 0 ? r->flops : NAN;
        op->bytes = NAN;
    }
    lp_prof_keyavg_free(&ka);
    /* bytes moved per op: summed from the events that record them */
    size_t ne = lp_prof_events_count(ev);
    for (size_t i = 0; i < ne; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph != 'X' || e->bytes < 0)
            continue;
        for (int32_t k = 0; k < d->n_ops; k++)
            if (strcmp(d->ops[k].name, e->name) == 0) {
                d->ops[k].bytes = (isnan(d->ops[k].bytes) ? 0 : d->ops[k].bytes) + e->bytes;
                break;
            }
    }
    return LP_OK;
}

static lp_status read_memory(lp_run_data *d, const lp_prof_events *ev)
{
    const lp_prof_events_info *info = lp_prof_events_info_get(ev);
    size_t ne = lp_prof_events_count(ev), n_mem = 0;
    for (size_t i = 0; i < ne; i++)
        if (lp_prof_events_get(ev, i)->ph == 'i' && lp_prof_events_get(ev, i)->mem_category >= 0)
            n_mem++;
    if (!n_mem)
        return LP_OK;
    size_t every = n_mem / 2000 + 1; // keep the page light: at most ~2000 points (peaks may thin out)
    d->mem = calloc(n_mem / every + 2, sizeof *d->mem);
    if (!d->mem)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", d->dir);
    double live[LP_MEM_CATEGORY__COUNT] = {0};
    if (info->has_mem_baseline)
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++)
            live[c] = (double)info->mem_baseline[c];
    size_t seen = 0;
    for (size_t i = 0; i < ne; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph != 'i' || e->mem_category < 0)
            continue;
        int c = e->mem_category < LP_MEM_CATEGORY__COUNT ? e->mem_category : LP_MEM_CATEGORY_OTHER;
        live[c] += (double)e->mem_bytes;
        if (seen++ % every && seen != n_mem)
            continue;
        lp_run_mem_point *p = &d->mem[d->n_mem++];
        p->t_ms = (double)(e->ts_ns - info->window_start_ns) / 1e6;
        memcpy(p->bytes, live, sizeof live);
    }
    /* Without the window's starting figures, what was live before it (the parameters, say)
     * shows only as frees going below 0: lift each category by its lowest point, the least
     * that must have been live at the start. */
    if (!info->has_mem_baseline)
        for (int c = 0; c < LP_MEM_CATEGORY__COUNT; c++) {
            double lo = 0;
            for (int32_t i = 0; i < d->n_mem; i++)
                lo = fmin(lo, d->mem[i].bytes[c]);
            for (int32_t i = 0; i < d->n_mem; i++)
                d->mem[i].bytes[c] -= lo;
        }
    return LP_OK;
}

static lp_status read_trace(lp_run_data *d)
{
    if (!find_trace(d, d->trace, sizeof d->trace))
        return LP_OK;
    char path[2200];
    snprintf(path, sizeof path, "%s/%s", d->dir, d->trace);
    lp_prof_events *ev;
    lp_trace_info ti;
    lp_status st = lp_trace_load(path, &ev, &ti);
    if (st != LP_OK)
        return st;
    lp_prof_events_sort(ev);
    st = read_ops(d, ev);
    if (st == LP_OK)
        st = read_memory(d, ev);
    lp_prof_events_free(ev);
    return st;
}

/* Without a trace, the ops are summary.json's top ops (self time and calls only). */
static lp_status ops_from_summary(lp_run_data *d)
{
    if (d->sum.n_ops == 0)
        return LP_OK;
    d->ops = calloc((size_t)d->sum.n_ops, sizeof *d->ops);
    if (!d->ops)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", d->dir);
    for (int i = 0; i < d->sum.n_ops; i++) {
        lp_run_op *op = &d->ops[d->n_ops++];
        snprintf(op->name, sizeof op->name, "%s", d->sum.ops[i].name);
        op->calls = d->sum.ops[i].calls;
        op->self_ms = op->total_ms = d->sum.ops[i].self_ms;
        op->flops = op->bytes = NAN;
    }
    return LP_OK;
}

/* ---- the run ------------------------------------------------------------------------- */

void lp_run_free(lp_run_data *d)
{
    if (!d)
        return;
    free(d->steps);
    free(d->epochs);
    free(d->ops);
    free(d->mem);
    free(d->bench);
    free(d);
}

lp_status lp_run_load(const char *dir, lp_run_data **out)
{
    *out = NULL;
    lp_run_data *d = calloc(1, sizeof *d);
    if (!d)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", dir);
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    d->achieved_gflops = d->mfu = d->peak_gflops = d->peak_rss_bytes = d->train_time_s = d->samples = NAN;
    char p1[1100], p2[1100];
    snprintf(p1, sizeof p1, "%s/summary.json", dir);
    snprintf(p2, sizeof p2, "%s/baseline_metrics.json", dir);
    lp_status st;
    if (is_file(p1)) {
        lp_run_summary *s;
        const char *dirs[] = {dir};
        if ((st = lp_compare_load(dirs, 1, &s)) == LP_OK) {
            d->sum = *s;
            free(s);
        }
        if (st == LP_OK)
            st = read_summary_extra(d);
        if (st == LP_OK)
            st = read_steps(d);
        if (st == LP_OK)
            st = read_epochs(d);
        if (st == LP_OK)
            st = read_prof_summary(d);
        if (st == LP_OK)
            st = read_trace(d);
        if (st == LP_OK && !d->trace[0])
            st = ops_from_summary(d);
    } else if (is_file(p2)) {
        d->kind = LP_RUN_BENCH;
        const char *dirs[] = {dir};
        st = lp_bench_curves_load(dirs, 1, &d->bench);
        if (st == LP_OK) // the profiled pass, unless --skip-profiling
            st = read_trace(d);
    } else {
        st = lp_err(LP_STATUS_NOT_FOUND, "%s: not a run directory (no summary.json or baseline_metrics.json)",
                    dir);
    }
    if (st != LP_OK) {
        lp_run_free(d);
        return st;
    }
    *out = d;
    return LP_OK;
}
