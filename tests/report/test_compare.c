/* loupe compare's library: two synthetic run directories (summary.json as the trainer writes
 * it) are read back, the table shows each value and its ratio to the first run, and the JSON
 * parses back to the same numbers; a missing or foreign directory is a clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loupe/report.h"

static void write_run(const char *dir, const char *id, const char *method, double trainable, double step_ms,
                      double grad_bytes, double mm_self)
{
    mkdir(dir, 0755);
    char p[512], text[2048];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    snprintf(
        text, sizeof text,
        "{\"run_id\": \"%s\", \"method\": \"%s\", \"exec\": \"fused\", \"model\": {\"params_total\": 1000000,"
        " \"params_trainable\": %g}, \"steps\": 10, \"samples_per_s\": %g, \"tokens_per_s\": %g,"
        " \"step_ms\": {\"mean\": %g, \"median\": 1}, \"peak_memory_bytes\": %g,"
        " \"memory_by_category\": {\"parameter\": 4000000, \"gradient\": %g, \"quantized_weight\": 0},"
        " \"top_ops\": [{\"name\": \"lp::matmul_forward\", \"calls\": 30, \"self_ms\": %g, \"total_ms\": 9},"
        " {\"name\": \"lp::attention_fused_backward\", \"calls\": 6, \"self_ms\": 1.5}],"
        " \"final_loss\": 0.5, \"eval\": {\"loss\": 0.6, \"accuracy\": 0.75}}",
        id, method, trainable, 1000.0 / step_ms, 16000.0 / step_ms, step_ms, 4000000 + grad_bytes, grad_bytes,
        mm_self);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void compare_two(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/lp_compare_XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/full", tmpl);
    snprintf(b, sizeof b, "%s/lora", tmpl);
    write_run(a, "full", "full", 1000000, 200, 4000000, 40);
    write_run(b, "lora", "lora", 10000, 100, 40000, 20);
    const char *dirs[] = {a, b};
    lp_run_summary *r = NULL;
    assert_int_equal(lp_compare_load(dirs, 2, &r), LP_OK);
    assert_string_equal(r[1].method, "lora");
    assert_true(r[1].params_trainable == 10000);
    assert_true(r[1].step_ms == 100);
    assert_true(lp_run_summary_mem(&r[1], "gradient") == 40000);
    assert_true(lp_run_summary_op_ms(&r[0], "lp::matmul_forward") == 40);
    assert_true(isnan(lp_run_summary_op_ms(&r[0], "nope")));
    assert_true(r[1].eval_accuracy == 0.75);

    char tp[400];
    snprintf(tp, sizeof tp, "%s/table.txt", tmpl);
    FILE *f = fopen(tp, "w+");
    lp_compare_write_text(f, r, 2);
    rewind(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    printf("%s", buf);
    assert_non_null(strstr(buf, "lora / fused"));
    assert_non_null(strstr(buf, "10000 (x0.01)"));  // trainable params
    assert_non_null(strstr(buf, "100.0 (x0.50)"));  // step ms
    assert_non_null(strstr(buf, "10.00 (x2.00)"));  // samples/s
    assert_non_null(strstr(buf, "20.000 (x0.50)")); // matmul self ms
    assert_non_null(strstr(buf, "gradient MiB"));
    assert_null(strstr(buf, "quantized_weight")); // all zero: not shown
    assert_non_null(strstr(buf, "  lp::attention_fused_backward ")); // long op names whole

    char *js = lp_compare_json(r, 2);
    assert_non_null(js);
    cJSON *root = cJSON_Parse(js);
    free(js);
    assert_non_null(root);
    const cJSON *runs = cJSON_GetObjectItem(root, "runs");
    assert_int_equal(cJSON_GetArraySize(runs), 2);
    const cJSON *l = cJSON_GetArrayItem(runs, 1);
    assert_string_equal(cJSON_GetObjectItem(l, "method")->valuestring, "lora");
    assert_true(cJSON_GetObjectItem(l, "step_ms")->valuedouble == 100);
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(l, "memory_by_category"), "gradient")->valuedouble ==
                40000);
    const cJSON *vs = cJSON_GetObjectItem(l, "vs_first");
    assert_true(fabs(cJSON_GetObjectItem(vs, "step_ms")->valuedouble - 0.5) < 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(vs, "params_trainable")->valuedouble - 0.01) < 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(vs, "samples_per_s")->valuedouble - 2.0) < 1e-12);
    const cJSON *op = cJSON_GetArrayItem(cJSON_GetObjectItem(l, "top_ops"), 0);
    assert_string_equal(cJSON_GetObjectItem(op, "name")->valuestring, "lp::matmul_forward");
    assert_true(cJSON_GetObjectItem(op, "self_ms")->valuedouble == 20);
    cJSON_Delete(root);
    free(r);

    /* errors: a directory without summary.json, and a JSON file that is not a run summary */
    const char *bad[] = {a, tmpl};
    assert_int_equal(lp_compare_load(bad, 2, &r), LP_STATUS_IO);
    assert_null(r);
    assert_non_null(strstr(lp_err_msg(), "not a run directory"));
    assert_non_null(strstr(lp_err_msg(), tmpl));
    char other[300];
    snprintf(other, sizeof other, "%s/other", tmpl);
    mkdir(other, 0755);
    snprintf(tp, sizeof tp, "%s/summary.json", other);
    f = fopen(tp, "w");
    fputs("{\"hello\": 1}", f);
    fclose(f);
    const char *bad2[] = {other};
    assert_int_equal(lp_compare_load(bad2, 1, &r), LP_STATUS_FORMAT);
    assert_non_null(strstr(lp_err_msg(), "not a loupe run summary"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(compare_two)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
