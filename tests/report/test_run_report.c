/* A run directory read back and its report.html, on a run written by the test (so every
 * figure is known): steps.csv by column name, summary.json's top ops, the diagnosis's
 * suggestions firing on the run's own numbers with their thresholds (and staying quiet
 * below them), and bad input: not a run, a truncated or malformed steps.csv, a truncated
 * summary.json, each an error naming the file, with no page written. */
#include "lp_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/report.h"

static void put(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char summary[] =
    "{\"run_id\": \"t1\", \"method\": \"lora\", \"exec\": \"fused\", \"model\": {\"name\": \"m\", \"task\": "
    "\"seq-cls\", \"params_total\": 1000, \"params_trainable\": 10}, \"steps\": 6, \"samples_per_s\": 40, "
    "\"tokens_per_s\": 400, \"step_ms\": {\"mean\": 100}, \"peak_memory_bytes\": 2000000, "
    "\"memory_by_category\": {\"parameter\": 800000, \"activation\": 1000000, \"gradient\": 200000}, "
    "\"final_loss\": 0.25, \"eval\": {\"accuracy\": 0.9}, \"top_ops\": [{\"name\": \"lp::matmul_forward\", "
    "\"calls\": 12, \"self_ms\": 300}, {\"name\": \"lp::gelu_forward\", \"calls\": 6, \"self_ms\": 50}]}";

/* 6 steps of 100 ms: data 12 ms (12 %: above the 5 % threshold), forward 40, backward 40,
 * optimizer 5 (5 %: below 10 %); the slowest step after the first is 100 ms (no jitter). */
static const char steps_hdr[] =
    "step,epoch,loss,lr,grad_norm,step_ms,data_ms,forward_ms,backward_ms,optimizer_ms,"
    "samples,tokens,memory_bytes,memory_peak_bytes,rss_bytes,wall_s\n";

static void make_run(const char *dir)
{
    char steps[2048];
    size_t n = (size_t)snprintf(steps, sizeof steps, "%s", steps_hdr);
    for (int i = 1; i <= 6; i++)
        n += (size_t)snprintf(steps + n, sizeof steps - n,
                              "%d,0,%.2f,0.001,1.0,100,12,40,40,5,4,40,%d,2000000,%d,%.1f\n", i,
                              0.7 - 0.08 * i, 1000000 + i * 1000, 30000000 + i, 0.1 * i);
    put(dir, "summary.json", summary);
    put(dir, "steps.csv", steps);
    put(dir, "epoch_results.csv",
        "epoch,steps,train_loss,eval_loss,eval_accuracy,eval_macro_f1,time_s,"
        "samples_per_s\n1,6,0.4,0.3,0.9,0.89,0.6,40\n");
}

static char *read_page(const char *dir)
{
    char p[512], *text;
    size_t len;
    snprintf(p, sizeof p, "%s/report.html", dir);
    assert_int_equal(lp_file_read_all(p, &text, &len), LP_OK);
    return text;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void run_page(void **state)
{
    (void)state;
    char dir[128];
    assert_int_equal(lp_test_tmpdir_make(dir, sizeof dir, "runrep"), 0);
    make_run(dir);
    lp_run_data *d;
    assert_int_equal(lp_run_load(dir, &d), LP_OK);
    assert_int_equal(d->kind, LP_RUN_TRAIN);
    assert_int_equal(d->n_steps, 6);
    assert_true(d->steps[5].step == 6 && fabs(d->steps[5].loss - 0.22) < 1e-12 && d->steps[5].data_ms == 12);
    assert_true(d->steps[0].rss_bytes == 30000001); // by column name, not position
    assert_int_equal(d->n_epochs, 1);
    assert_true(d->epochs[0].eval_accuracy == 0.9);
    assert_int_equal(d->n_ops, 2); // no trace: summary.json's top ops
    assert_string_equal(d->ops[0].name, "lp::matmul_forward");
    assert_true(isnan(d->ops[0].flops));
    lp_run_ceilings c = {.gflops = 200, .gbs = 10, .source = "test"};
    assert_int_equal(lp_run_report_write(d, &c), LP_OK);
    lp_run_free(d);
    char *page = read_page(dir);
    /* charts: loss_lr, step_time, throughput, memory (per step), memory_peak, top_ops */
    assert_int_equal(count(page, "<figure class=\"lp-chart\""), 6);
    static const char *plots[] = {"loss_lr", "step_time", "throughput", "memory", "memory_peak", "top_ops"};
    for (size_t i = 0; i < 6; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/plots/%s.png", dir, plots[i]);
        assert_int_equal(access(p, F_OK), 0);
        snprintf(p, sizeof p, "%s/plots/%s.svg", dir, plots[i]);
        assert_int_equal(access(p, F_OK), 0);
    }
    assert_non_null(strstr(page, "<span>final loss</span><b>0.2500</b>"));
    assert_non_null(strstr(page, "<span>eval accuracy</span><b>90.0 %</b>"));
    /* the suggestions carry the run's numbers and the threshold; ones below it stay out */
    assert_non_null(strstr(page, "Data loading takes 12.0 % of the step (12.00 of 100.0 ms; threshold 5 %)"));
    assert_null(strstr(page, "The optimizer step takes")); // 5 % < 10 %
    assert_non_null(strstr(page, "Activations are 50 % of the tracked peak (1.0 of 2.0 MB; threshold 40 %)"));
    assert_null(strstr(page, "The slowest step took")); // every step 100 ms
    assert_non_null(strstr(page, "<li>lp::matmul_forward: 300.0 ms self time, 85.7 % of the profiled time"));
    free(page);
    assert_int_equal(lp_test_tmpdir_remove(dir), 0);
}

/* lp_run_load fails with st, its message holding want; and no report.html appears. */
static void load_fails(const char *dir, lp_status st, const char *want)
{
    lp_run_data *d = (lp_run_data *)1;
    assert_int_equal(lp_run_load(dir, &d), st);
    assert_null(d);
    if (!strstr(lp_err_msg(), want)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", lp_err_msg(), want);
        fail();
    }
    char p[512];
    snprintf(p, sizeof p, "%s/report.html", dir);
    assert_int_equal(access(p, F_OK), -1);
}

static void bad_input(void **state)
{
    (void)state;
    char dir[128], want[512];
    assert_int_equal(lp_test_tmpdir_make(dir, sizeof dir, "runbad"), 0);
    snprintf(want, sizeof want, "%s: not a run directory", dir);
    load_fails(dir, LP_STATUS_NOT_FOUND, want);
    make_run(dir);
    /* the last line cut short: truncated */
    char steps[1024];
    snprintf(steps, sizeof steps, "%s1,0,0.6,0.001,1,100,12,40,40,5,4,40,1000,2000,3000,0.1\n2,0,0.5,0.0",
             steps_hdr);
    put(dir, "steps.csv", steps);
    snprintf(want, sizeof want, "%s/steps.csv: line 3: missing fields (the file is truncated)", dir);
    load_fails(dir, LP_STATUS_FORMAT, want);
    /* a field that is not a number, mid-file */
    snprintf(steps, sizeof steps, "%s1,0,0.6x,0.001,1,100,12,40,40,5,4,40,1000,2000,3000,0.1\n", steps_hdr);
    put(dir, "steps.csv", steps);
    snprintf(want, sizeof want, "%s/steps.csv: line 2: a field is not a number", dir);
    load_fails(dir, LP_STATUS_FORMAT, want);
    /* a CSV that is not loupe's */
    put(dir, "steps.csv", "a,b\n1,2\n");
    snprintf(want, sizeof want, "%s/steps.csv: no \"step\" column", dir);
    load_fails(dir, LP_STATUS_FORMAT, want);
    /* summary.json cut short */
    make_run(dir);
    put(dir, "summary.json", "{\"run_id\": \"t1\", \"method\": \"lo");
    snprintf(want, sizeof want, "%s/summary.json", dir);
    load_fails(dir, LP_STATUS_FORMAT, want);
    assert_int_equal(lp_test_tmpdir_remove(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_page),
        cmocka_unit_test(bad_input),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    lp_chart_release_caches();
    return rc;
}
