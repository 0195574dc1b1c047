/* --save-model: the fine-tuned model written as a Hugging Face directory reloads in loupe
 * with every parameter bit-identical to the run's final checkpoint, and gives identical
 * logits to a model rebuilt from that checkpoint; its config keeps the label names. (That
 * transformers loads it is checked by tools/check_saved_model_transformers.py.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loupe/io.h"
#include "loupe/models.h"
#include "loupe/train.h"

static void test_save_and_reload(void **state)
{
    (void)state;
    char dir[] = "/tmp/lp_save_modelXXXXXX";
    assert_non_null(mkdtemp(dir));
    char model_dir[256], ckpt[512], cfg_path[512], vocab[512];
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    snprintf(ckpt, sizeof ckpt, "%s/r/checkpoints/step-3/state.safetensors", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", model_dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", model_dir);

    lp_train_config c;
    lp_train_config_init(&c);
    c.max_steps = 3;
    c.batch_size = 8;
    c.eval_file = NULL;
    c.threads = 1;
    c.quiet = true;
    c.output_dir = dir;
    c.run_id = "r";
    c.save_model = model_dir;
    c.lr = 1e-3;
    lp_train_result r;
    lp_status st = lp_train_run(&c, &r);
    if (st != LP_OK)
        fail_msg("train: %s", lp_err_msg());
    assert_int_equal(r.steps, 3);

    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    lp_model *saved, *rebuilt;
    assert_int_equal(lp_model_load(model_dir, &o, &saved), LP_OK);
    lp_model_info info;
    lp_model_info_get(saved, &info);
    assert_int_equal(info.n_initialized, 0); /* every tensor came from the saved file */
    assert_int_equal(lp_model_load("models/default", &o, &rebuilt), LP_OK);

    lp_st_file *f;
    assert_int_equal(lp_st_open(ckpt, &f), LP_OK);
    size_t n, n2;
    const lp_model_param *ps = lp_model_params(saved, &n);
    const lp_model_param *pr = lp_model_params(rebuilt, &n2);
    assert_int_equal(n, n2);
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
        const lp_st_tensor *t = lp_st_find(f, ps[i].name);
        if (!t)
            fail_msg("checkpoint lacks %s", ps[i].name);
        assert_int_equal((int64_t)t->numel, ps[i].numel);
        if (memcmp(t->data, ps[i].data, (size_t)ps[i].numel * 4))
            fail_msg("%s differs between the saved model and the checkpoint", ps[i].name);
        changed += memcmp(pr[i].data, t->data, (size_t)pr[i].numel * 4) != 0;
        memcpy(pr[i].data, t->data, (size_t)pr[i].numel * 4);
    }
    lp_st_close(f);
    assert_true(changed > n / 2); /* training moved the weights away from the init */

    const int32_t B = 2, T = 6;
    const int32_t ids[] = {2, 100, 200, 300, 3, 0, 2, 50, 60, 70, 80, 3};
    const int32_t mask[] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    float a[4], b[4];
    assert_int_equal(lp_model_forward(saved, ids, mask, NULL, B, T, a), LP_OK);
    assert_int_equal(lp_model_forward(rebuilt, ids, mask, NULL, B, T, b), LP_OK);
    assert_memory_equal(a, b, sizeof a);
    for (int i = 0; i < 4; i++)
        assert_true(isfinite(a[i]));

    char *text;
    size_t len;
    assert_int_equal(lp_file_read_all(cfg_path, &text, &len), LP_OK);
    assert_non_null(strstr(text, "BertForSequenceClassification"));
    assert_non_null(strstr(text, "negative"));
    assert_non_null(strstr(text, "positive"));
    free(text);
    assert_int_equal(lp_file_read_all(vocab, &text, &len), LP_OK);
    assert_int_equal(strncmp(text, "[PAD]\n", 6), 0);
    free(text);
    lp_model_free(saved);
    lp_model_free(rebuilt);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_save_and_reload)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
