/* report.html for a run directory, shared by train, profile, bench and report: the machine
 * ceilings come from the run's peak.json when an earlier render saved them (so a report
 * re-rendered elsewhere keeps the machine the run ran on), else they are measured here
 * (loupe peak's probes, shortened: about a second) and saved beside the run. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loupe/kernels.h"
#include "loupe/report.h"

static int read_peak(const char *path, lp_run_ceilings *c)
{
    char *text;
    size_t len;
    if (lp_file_read_all(path, &text, &len) != LP_OK)
        return 0;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "fma_gflops"),
                *b = cJSON_GetObjectItemCaseSensitive(j, "triad_gbs");
    int ok = cJSON_IsNumber(g) && cJSON_IsNumber(b) && g->valuedouble > 0 && b->valuedouble > 0;
    if (ok) {
        c->gflops = g->valuedouble;
        c->gbs = b->valuedouble;
        snprintf(c->source, sizeof c->source, "loupe peak, saved in peak.json");
    }
    cJSON_Delete(j);
    return ok;
}

/* Measured once per process: train + profile + report in one run share it. */
static int measure(lp_run_ceilings *c)
{
    static lp_run_ceilings cached;
    static int have;
    if (!have) {
        lp_peak_result r;
        if (lp_peak_measure(&r, 0.3, 256) != LP_OK)
            return 0;
        cached.gflops = r.fma_gflops;
        cached.gbs = r.triad_gbs;
        snprintf(cached.source, sizeof cached.source, "loupe peak on this machine, %d threads", r.threads);
        have = 1;
    }
    *c = cached;
    return 1;
}

int lp_cli_write_report(const char *dir, int quiet)
{
    lp_run_data *d;
    if (lp_run_load(dir, &d) != LP_OK)
        return LP_EXIT_FAIL;
    char path[1100];
    snprintf(path, sizeof path, "%s/peak.json", dir);
    lp_run_ceilings c = {.gflops = NAN, .gbs = NAN};
    if (!read_peak(path, &c) && measure(&c)) {
        char json[256];
        int n = snprintf(json, sizeof json, "{\"fma_gflops\": %.3f, \"triad_gbs\": %.3f, \"source\": \"%s\"}\n",
                         c.gflops, c.gbs, c.source);
        (void)!lp_file_write_atomic(path, json, (size_t)n); // a read-only run still gets its report
    }
    lp_status st = lp_run_report_write(d, &c);
    lp_run_free(d);
    lp_chart_release_caches();
    if (st != LP_OK)
        return LP_EXIT_FAIL;
    if (!quiet)
        printf("report: %s/report.html\n", dir);
    return LP_EXIT_OK;
}
