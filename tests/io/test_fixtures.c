/* Checkpoints written by transformers' save_pretrained (tests/io/fixtures/, made by
 * tools/make_io_fixtures.py): for every architecture loupe reads, the name map binds every
 * saved tensor, leaves nothing unexpected, and counts the parameters transformers counts
 * (expected.json). One is re-saved as a two-shard checkpoint and must map the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loupe/io.h"

static const char *const fixtures[] = {"bert_model", "bert_cls", "distilbert_cls", "llama_lm",
                                       "llama_cls",  "qwen2_lm_tied", "qwen2_cls", "mistral_lm"};

static uint64_t map_total(const lp_param_map *m)
{
    uint64_t t = 0;
    for (size_t i = 0; i < m->n; i++)
        t += m->params[i].numel;
    return t;
}

static bool bound(const lp_param_map *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->params[i].tensor && !strcmp(m->params[i].tensor->name, name))
            return true;
    return false;
}

static void check_dir(const char *dir, const char *expected_json)
{
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    lp_model_config cfg;
    if (lp_hf_config_load(path, &cfg) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_st_set *w = NULL;
    if (lp_st_set_open_dir(dir, &w) != LP_OK)
        fail_msg("%s", lp_err_msg());
    lp_param_map m;
    if (lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());

    char *text;
    size_t len;
    assert_int_equal(lp_file_read_all(expected_json, &text, &len), LP_OK);
    cJSON *exp = cJSON_Parse(text);
    free(text);
    assert_non_null(exp);
    uint64_t want = (uint64_t)cJSON_GetObjectItem(exp, "total_params")->valuedouble;
    if (map_total(&m) != want)
        fail_msg("%s: loupe counts %llu parameters, transformers %llu", dir, (unsigned long long)map_total(&m),
                 (unsigned long long)want);
    assert_int_equal(m.n_unexpected, 0);
    assert_int_equal(m.n_missing_head, 0);
    const cJSON *names = cJSON_GetObjectItem(exp, "tensors");
    assert_int_equal((size_t)cJSON_GetArraySize(names), lp_st_set_count(w));
    for (const cJSON *n = names->child; n; n = n->next)
        if (!bound(&m, n->valuestring))
            fail_msg("%s: saved tensor '%s' is not bound to a parameter", dir, n->valuestring);
    cJSON_Delete(exp);
    lp_param_map_free(&m);
    lp_st_set_close(w);
    lp_model_config_free(&cfg);
}

static void test_transformers_checkpoints(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        char dir[256], exp[300];
        snprintf(dir, sizeof dir, "tests/io/fixtures/%s", fixtures[i]);
        snprintf(exp, sizeof exp, "%s/expected.json", dir);
        print_message("%s\n", fixtures[i]);
        check_dir(dir, exp);
    }
}

/* qwen2_cls split in two shards (half the tensors each) with an index, as HF shards. */
static void test_resharded(void **state)
{
    (void)state;
    char tmp[] = "/tmp/lp_test_fix_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    lp_st_file *f;
    assert_int_equal(lp_st_open("tests/io/fixtures/qwen2_cls/model.safetensors", &f), LP_OK);
    size_t n = lp_st_count(f), half = n / 2;
    lp_st_write_tensor *t = calloc(n, sizeof *t);
    for (size_t i = 0; i < n; i++) {
        const lp_st_tensor *x = lp_st_at(f, i);
        t[i] = (lp_st_write_tensor){x->name, x->dtype, x->ndim, x->shape, x->data};
    }
    char p[400];
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", tmp);
    assert_int_equal(lp_st_write(p, t, half, NULL, 0), LP_OK);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", tmp);
    assert_int_equal(lp_st_write(p, t + half, n - half, NULL, 0), LP_OK);
    cJSON *idx = cJSON_CreateObject(), *wm = cJSON_AddObjectToObject(idx, "weight_map");
    cJSON_AddObjectToObject(idx, "metadata");
    for (size_t i = 0; i < n; i++)
        cJSON_AddStringToObject(wm, t[i].name,
                                i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors");
    char *js = cJSON_Print(idx);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", tmp);
    assert_int_equal(lp_file_write_atomic(p, js, strlen(js)), LP_OK);
    free(js);
    cJSON_Delete(idx);
    free(t);
    lp_st_close(f);
    char *cfg;
    size_t len;
    assert_int_equal(lp_file_read_all("tests/io/fixtures/qwen2_cls/config.json", &cfg, &len), LP_OK);
    snprintf(p, sizeof p, "%s/config.json", tmp);
    assert_int_equal(lp_file_write_atomic(p, cfg, len), LP_OK);
    free(cfg);

    lp_st_set *w;
    assert_int_equal(lp_st_set_open_dir(tmp, &w), LP_OK);
    assert_int_equal(lp_st_set_file_count(w), 2);
    lp_st_set_close(w);
    check_dir(tmp, "tests/io/fixtures/qwen2_cls/expected.json");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_transformers_checkpoints),
                                       cmocka_unit_test(test_resharded)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
