/* lp_bench_run: the phases in order (load, sweep, full pass, profiled pass) and the output
 * files. After Ctrl-C the phases left are skipped and what was measured is written, marked
 * incomplete; after an error nothing more is written (the caller removes the directory). */
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

static void point_free(lp_bench_point *p)
{
    free(p->batch_ms);
    free(p->padded_len);
    free(p->tokens);
    free(p->rss_bytes);
    free(p->accounted_peak);
}

void lp_bench_result_free(lp_bench_result *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < LP_BENCH_MAX_BATCH_SIZES; i++)
        point_free(&r->points[i]);
    free(r->full.pred);
    free(r->full.precision);
    free(r->full.recall);
    free(r->full.f1);
    free(r->full.support);
    free(r->full.confusion);
    free(r);
}

static lp_status write_outputs(lp_bench_state *s)
{
    lp_status st;
    if (s->label_map_from_data) {
        char path[1200];
        snprintf(path, sizeof path, "%s/label_mappings.json", s->dir);
        if ((st = lp_label_map_save(&s->ds.label_map, path)) != LP_OK)
            return st;
    }
    if ((st = lp_bench__write_csv(s)) != LP_OK || (st = lp_bench__write_predictions(s)) != LP_OK ||
        (st = lp_bench__write_summary(s)) != LP_OK)
        return st;
    /* last: a directory whose baseline_metrics.json exists has every other file */
    return lp_bench__write_json(s);
}

lp_status lp_bench_run(const lp_bench_config *c, const char *dir, lp_bench_result **out)
{
    *out = NULL;
    lp_status st = lp_bench_config_validate(c);
    if (st != LP_OK)
        return st;
    if ((st = lp_mkdir_p(dir)) != LP_OK)
        return st;
    lp_bench_result *r = calloc(1, sizeof *r);
    if (!r)
        return lp_err(LP_STATUS_NO_MEMORY, "bench: out of memory");
    snprintf(r->run_dir, sizeof r->run_dir, "%s", dir);
    r->best = -1;
    lp_threads_init();
    if (c->threads > 0)
        lp_threads_set(c->threads);
    r->threads = lp_threads_get();
    lp_contention_init(&r->busy, r->threads);
    lp_bench_machine(r->cpu, sizeof r->cpu, r->simd, sizeof r->simd);
    lp_bench_state s = {.c = c, .dir = dir, .r = r};
    if ((st = lp_bench__load(&s)) == LP_OK && (st = lp_bench__sweep(&s)) == LP_OK &&
        (st = lp_bench__full_pass(&s)) == LP_OK && (st = lp_bench__f32_reference(&s)) == LP_OK)
        st = lp_bench__profile(&s);
    if (st == LP_OK) {
        r->interrupted = lp_bench_stop_requested();
        st = write_outputs(&s);
    }
    lp_bench__unload(&s);
    if (st != LP_OK) {
        lp_bench_result_free(r);
        return st;
    }
    *out = r;
    return r->interrupted ? lp_err(LP_STATUS_INTERRUPTED, "interrupted: wrote what was measured to %s", dir)
                          : LP_OK;
}
