/* Run comparison (`loupe compare`): reads each run directory's summary.json and lays the
 * runs side by side: method, exec, trainable parameters, step time, throughput, peak memory
 * by category, final loss, eval accuracy and the top ops' self time, with each number's
 * ratio against the first run. Text table or JSON. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/report.h"
#include "loupe/io.h"
#include "run_internal.h"

enum { TOP_OPS = 8 }; /* each run's ops by self time that the text table lists */

static lp_status load_one(const char *dir, lp_run_summary *r)
{
    memset(r, 0, sizeof *r);
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    cJSON *j;
    lp_status st = lp_run__read_json(dir, "summary.json", "run directory", &j);
    if (st != LP_OK)
        return st;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return lp_err(LP_STATUS_FORMAT, "%s: not a JSON object", path);
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model"),
                *sm = cJSON_GetObjectItemCaseSensitive(j, "step_ms"),
                *mc = cJSON_GetObjectItemCaseSensitive(j, "memory_by_category"),
                *ev = cJSON_GetObjectItemCaseSensitive(j, "eval"),
                *top = cJSON_GetObjectItemCaseSensitive(j, "top_ops");
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "method")) || !cJSON_IsObject(sm)) {
        cJSON_Delete(j);
        return lp_err(LP_STATUS_FORMAT, "%s: not a loupe run summary (no \"method\" or \"step_ms\")", path);
    }
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    lp_json_str(r->run_id, sizeof r->run_id, j, "run_id");
    lp_json_str(r->method, sizeof r->method, j, "method");
    lp_json_str(r->exec, sizeof r->exec, j, "exec");
    lp_json_str(r->dtype, sizeof r->dtype, j, "dtype");
    lp_json_str(r->bf16_path, sizeof r->bf16_path, j, "bf16_path");
    if (!strcmp(r->dtype, "?")) /* absent (older summaries, or no bf16): shown as nothing */
        r->dtype[0] = '\0';
    if (!strcmp(r->bf16_path, "?"))
        r->bf16_path[0] = '\0';
    r->params_total = lp_json_num(model, "params_total");
    r->params_trainable = lp_json_num(model, "params_trainable");
    r->steps = lp_json_num(j, "steps");
    r->step_ms = lp_json_num(sm, "mean");
    r->samples_per_s = lp_json_num(j, "samples_per_s");
    r->tokens_per_s = lp_json_num(j, "tokens_per_s");
    r->peak_bytes = lp_json_num(j, "peak_memory_bytes");
    r->final_loss = lp_json_num(j, "final_loss");
    r->eval_accuracy = lp_json_num(ev, "accuracy");
    for (const cJSON *c = mc ? mc->child : NULL; c && r->n_mem < LP_COMPARE_MAX_CATS; c = c->next)
        if (cJSON_IsNumber(c) && c->string) {
            snprintf(r->mem[r->n_mem].name, sizeof r->mem[r->n_mem].name, "%s", c->string);
            r->mem[r->n_mem++].bytes = c->valuedouble;
        }
    for (const cJSON *o = cJSON_IsArray(top) ? top->child : NULL; o && r->n_ops < LP_COMPARE_MAX_OPS;
         o = o->next) {
        lp_json_str(r->ops[r->n_ops].name, sizeof r->ops[r->n_ops].name, o, "name");
        r->ops[r->n_ops].self_ms = lp_json_num(o, "self_ms");
        r->ops[r->n_ops].calls = lp_json_num(o, "calls");
        r->n_ops++;
    }
    cJSON_Delete(j);
    return LP_OK;
}

lp_status lp_compare_load(const char *const *dirs, int n, lp_run_summary **out)
{
    *out = NULL;
    if (n < 1)
        return lp_err(LP_STATUS_INVALID_ARG, "compare: no run directories");
    lp_run_summary *r = calloc((size_t)n, sizeof *r);
    if (!r)
        return lp_err(LP_STATUS_NO_MEMORY, "compare: out of memory");
    for (int i = 0; i < n; i++) {
        lp_status st = load_one(dirs[i], &r[i]);
        if (st != LP_OK) {
            free(r);
            return st;
        }
    }
    *out = r;
    return LP_OK;
}

double lp_run_summary_mem(const lp_run_summary *r, const char *category)
{
    for (int i = 0; i < r->n_mem; i++)
        if (!strcmp(r->mem[i].name, category))
            return r->mem[i].bytes;
    return NAN;
}

double lp_run_summary_op_ms(const lp_run_summary *r, const char *op)
{
    for (int i = 0; i < r->n_ops; i++)
        if (!strcmp(r->ops[i].name, op))
            return r->ops[i].self_ms;
    return NAN;
}

static double ratio(double v, double base)
{
    return isfinite(v) && isfinite(base) && base != 0 ? v / base : NAN;
}

/* One table row: label, each run's value, and "(x1.23)" against the first run. */
static void row(FILE *f, int w, const char *label, const double *v, int n, const char *fmt, double scale,
                bool ratios)
{
    fprintf(f, "%-*s", w, label);
    for (int i = 0; i < n; i++) {
        char cell[64];
        if (!isfinite(v[i]))
            snprintf(cell, sizeof cell, "-");
        else
            snprintf(cell, sizeof cell, fmt, v[i] / scale);
        if (ratios && i > 0 && isfinite(ratio(v[i], v[0]))) {
            size_t k = strlen(cell);
            snprintf(cell + k, sizeof cell - k, " (x%.2f)", ratio(v[i], v[0]));
        }
        fprintf(f, " %24s", cell);
    }
    fputc('\n', f);
}

void lp_compare_write_text(FILE *f, const lp_run_summary *r, int n)
{
    double v[64] = {0};
    n = n > 64 ? 64 : n;
    // the label column fits the longest op name shown (kernel names run past 26 characters)
    int w = 28;
    for (int k = 0; k < n; k++)
        for (int o = 0; o < r[k].n_ops && o < TOP_OPS; o++) {
            int len = 2 + (int)strlen(r[k].ops[o].name);
            w = len > w ? len : w;
        }
    fprintf(f, "%-*s", w, "run");
    for (int i = 0; i < n; i++)
        fprintf(f, " %24.24s", r[i].run_id);
    fprintf(f, "\n%-*s", w, "method / exec");
    for (int i = 0; i < n; i++) {
        char c[64];
        snprintf(c, sizeof c, "%s / %s", r[i].method, r[i].exec);
        fprintf(f, " %24s", c);
    }
    fputc('\n', f);
#define ROW(label, field, fmt, scale, rat)                                                                   \
    do {                                                                                                     \
        for (int i = 0; i < n; i++)                                                                          \
            v[i] = r[i].field;                                                                               \
        row(f, w, label, v, n, fmt, scale, rat);                                                             \
    } while (0)
    ROW("trainable params", params_trainable, "%.0f", 1.0, true);
    ROW("total params", params_total, "%.0f", 1.0, true);
    ROW("steps", steps, "%.0f", 1.0, false);
    ROW("step ms (mean)", step_ms, "%.1f", 1.0, true);
    ROW("samples/s", samples_per_s, "%.2f", 1.0, true);
    ROW("tokens/s", tokens_per_s, "%.0f", 1.0, true);
    ROW("peak memory MiB", peak_bytes, "%.2f", 1048576.0, true);
    // every category any run has, in the first run's order, then the others'
    for (int k = 0; k < n; k++)
        for (int c = 0; c < r[k].n_mem; c++) {
            const char *cat = r[k].mem[c].name;
            bool seen = false;
            for (int j = 0; j < k && !seen; j++)
                seen = isfinite(lp_run_summary_mem(&r[j], cat));
            if (seen)
                continue;
            bool any = false;
            for (int i = 0; i < n; i++) {
                v[i] = lp_run_summary_mem(&r[i], cat);
                any |= isfinite(v[i]) && v[i] > 0;
            }
            if (!any)
                continue;
            char label[64];
            snprintf(label, sizeof label, "  %s MiB", cat);
            row(f, w, label, v, n, "%.2f", 1048576.0, true);
        }
    ROW("final loss", final_loss, "%.4f", 1.0, false);
    ROW("eval accuracy", eval_accuracy, "%.4f", 1.0, false);
#undef ROW
    // top ops by self time: the union of each run's top TOP_OPS
    bool header = false;
    for (int k = 0; k < n; k++)
        for (int o = 0; o < r[k].n_ops && o < TOP_OPS; o++) {
            const char *op = r[k].ops[o].name;
            bool seen = false;
            for (int j = 0; j < k && !seen; j++)
                for (int p = 0; p < r[j].n_ops && p < TOP_OPS && !seen; p++)
                    seen = !strcmp(r[j].ops[p].name, op);
            if (seen)
                continue;
            if (!header) {
                fprintf(f, "top ops, self ms (profiled window):\n");
                header = true;
            }
            for (int i = 0; i < n; i++)
                v[i] = lp_run_summary_op_ms(&r[i], op);
            char label[256];
            snprintf(label, sizeof label, "  %s", op);
            row(f, w, label, v, n, "%.3f", 1.0, true);
        }
    if (!header)
        fprintf(f, "top ops: none recorded (run with loupe profile or --profile)\n");
    if (n > 1)
        fprintf(f, "(xN) = ratio to the first run, %s\n", r[0].run_id);
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

char *lp_compare_json(const lp_run_summary *r, int n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *runs = cJSON_AddArrayToObject(root, "runs");
    for (int i = 0; i < n; i++) {
        const lp_run_summary *s = &r[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "dir", s->dir);
        cJSON_AddStringToObject(o, "run_id", s->run_id);
        cJSON_AddStringToObject(o, "method", s->method);
        cJSON_AddStringToObject(o, "exec", s->exec);
        add_num(o, "params_trainable", s->params_trainable);
        add_num(o, "params_total", s->params_total);
        add_num(o, "steps", s->steps);
        add_num(o, "step_ms", s->step_ms);
        add_num(o, "samples_per_s", s->samples_per_s);
        add_num(o, "tokens_per_s", s->tokens_per_s);
        add_num(o, "peak_memory_bytes", s->peak_bytes);
        cJSON *mem = cJSON_AddObjectToObject(o, "memory_by_category");
        for (int c = 0; c < s->n_mem; c++)
            add_num(mem, s->mem[c].name, s->mem[c].bytes);
        add_num(o, "final_loss", s->final_loss);
        add_num(o, "eval_accuracy", s->eval_accuracy);
        cJSON *ops = cJSON_AddArrayToObject(o, "top_ops");
        for (int k = 0; k < s->n_ops; k++) {
            cJSON *op = cJSON_CreateObject();
            cJSON_AddStringToObject(op, "name", s->ops[k].name);
            add_num(op, "self_ms", s->ops[k].self_ms);
            add_num(op, "calls", s->ops[k].calls);
            cJSON_AddItemToArray(ops, op);
        }
        // ratios against the first run
        cJSON *rat = cJSON_AddObjectToObject(o, "vs_first");
        add_num(rat, "params_trainable", ratio(s->params_trainable, r[0].params_trainable));
        add_num(rat, "step_ms", ratio(s->step_ms, r[0].step_ms));
        add_num(rat, "samples_per_s", ratio(s->samples_per_s, r[0].samples_per_s));
        add_num(rat, "tokens_per_s", ratio(s->tokens_per_s, r[0].tokens_per_s));
        add_num(rat, "peak_memory_bytes", ratio(s->peak_bytes, r[0].peak_bytes));
        cJSON_AddItemToArray(runs, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}
