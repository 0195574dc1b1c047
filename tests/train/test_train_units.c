/* Unit tests of the training engine's small parts: LR schedules against transformers'
 * formulas, CRC-32C and the TensorBoard record bytes against the worked bytes in the
 * reference note (profiler-formats.md 1e), the evaluation metrics, and trainer_state.json
 * parsing (what --resume reads; fuzz/fuzz_ckpt_state fuzzes it). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/train/train_internal.h"
#include "loupe/train.h"

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = 0;
    while (*h) {
        if (*h == ' ') {
            h++;
            continue;
        }
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return n;
}

static void test_lr_schedules(void **state)
{
    (void)state;
    /* get_linear_schedule_with_warmup(warmup=10, total=100), lr 1e-3 */
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_LINEAR, 1e-3, 10, 100, 0), 0.0, 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_LINEAR, 1e-3, 10, 100, 5), 5e-4, 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_LINEAR, 1e-3, 10, 100, 10), 1e-3, 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_LINEAR, 1e-3, 10, 100, 55), 1e-3 * 45.0 / 90.0, 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_LINEAR, 1e-3, 10, 100, 100), 0.0, 1e-15);
    /* cosine: 0.5 * (1 + cos(pi * progress)) */
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_COSINE, 1e-3, 10, 100, 55), 1e-3 * 0.5 * (1 + cos(M_PI * 0.5)), 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_COSINE, 1e-3, 10, 100, 10), 1e-3, 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_COSINE, 1e-3, 0, 100, 25), 1e-3 * 0.5 * (1 + cos(M_PI * 0.25)), 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_CONSTANT, 1e-3, 4, 100, 2), 5e-4, 1e-15);
    assert_float_equal(lp_lr_at(LP_LR_SCHEDULE_CONSTANT, 1e-3, 4, 100, 90), 1e-3, 1e-15);
    lp_lr_schedule s;
    assert_int_equal(lp_lr_schedule_parse("cosine", &s), LP_OK);
    assert_int_equal(s, LP_LR_SCHEDULE_COSINE);
    assert_int_equal(lp_lr_schedule_parse("exp", &s), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "exp"));
}

static void test_crc32c(void **state)
{
    (void)state;
    assert_int_equal(lp_crc32c("123456789", 9), 0xE3069283u);
    uint8_t len[8] = {0x18, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(lp_crc32c_masked(len, 8), 0x224b7fa3u); /* bytes a3 7f 4b 22, little-endian */
}

static void test_tb_worked_bytes(void **state)
{
    (void)state;
    uint8_t want[256], got[256];
    /* the version event as a full record */
    size_t n = unhex("1800000000000000 a37f4b22 0900000040fc54d9411a0d627261696e2e4576656e743a32 eced8f9d", want);
    size_t m = lp_tb_encode_record(got, sizeof got, 1700000000.0, 0, NULL, 0);
    assert_int_equal(m, n);
    assert_memory_equal(got, want, n);
    /* a scalar event: data bytes match; the framing is checked by recomputing the CRCs */
    n = unhex("0900006040fc54d941 1003 2a13 0a11 0a0a 747261696e2f6c6f7373 15 0000803e", want);
    m = lp_tb_encode_record(got, sizeof got, 1700000001.5, 3, "train/loss", 0.25f);
    assert_int_equal(m, n + 16);
    assert_memory_equal(got + 12, want, n);
    uint64_t len = 0;
    memcpy(&len, got, 8);
    assert_int_equal(len, n);
    uint32_t c1, c2;
    memcpy(&c1, got + 8, 4);
    memcpy(&c2, got + 12 + n, 4);
    assert_int_equal(c1, lp_crc32c_masked(got, 8));
    assert_int_equal(c2, lp_crc32c_masked(want, n));
    /* steps >= 128 take a multi-byte varint: 300 = ac 02 */
    m = lp_tb_encode_record(got, sizeof got, 1.0, 300, "a", 1.0f);
    assert_int_equal(got[12 + 9], 0x10);
    assert_int_equal(got[12 + 10], 0xac);
    assert_int_equal(got[12 + 11], 0x02);
    /* too small a buffer: nothing written, size returned */
    memset(got, 0x5a, sizeof got);
    assert_int_equal(lp_tb_encode_record(got, 4, 1.0, 1, "a", 1.0f), m - 1);
    assert_int_equal(got[0], 0x5a);
}

static void test_tb_writer_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/lp_tb_testXXXXXX";
    assert_non_null(mkdtemp(dir));
    lp_tb_writer *w;
    assert_int_equal(lp_tb_writer_open(dir, &w), LP_OK);
    assert_non_null(strstr(lp_tb_writer_path(w), "/events.out.tfevents."));
    for (int i = 1; i <= 200; i++)
        assert_int_equal(lp_tb_writer_scalar(w, "train/loss", i, 1.0f / i, 1700000000.0 + i), LP_OK);
    char path[512];
    snprintf(path, sizeof path, "%s", lp_tb_writer_path(w));
    assert_int_equal(lp_tb_writer_close(w), LP_OK);
    char *buf;
    size_t len;
    assert_int_equal(lp_file_read_all(path, &buf, &len), LP_OK);
    /* walk the records: each frame's CRCs hold, 201 records in all */
    size_t off = 0;
    int records = 0;
    while (off < len) {
        uint64_t l;
        uint32_t c;
        assert_true(off + 12 <= len);
        memcpy(&l, buf + off, 8);
        memcpy(&c, buf + off + 8, 4);
        assert_int_equal(c, lp_crc32c_masked(buf + off, 8));
        assert_true(off + 16 + l <= len);
        memcpy(&c, buf + off + 12 + l, 4);
        assert_int_equal(c, lp_crc32c_masked(buf + off + 12, l));
        off += 16 + l;
        records++;
    }
    assert_int_equal(records, 201);
    free(buf);
    remove(path);
}

static void test_metrics(void **state)
{
    (void)state;
    const int32_t y[] = {0, 0, 1, 1, 1, 2};
    const int32_t p[] = {0, 1, 1, 1, 0, 2};
    double acc, f1;
    lp_metrics_classification(y, p, 6, 3, &acc, &f1);
    assert_float_equal(acc, 4.0 / 6.0, 1e-12);
    /* class 0: tp1 fp1 fn1 -> 0.5; class 1: tp2 fp1 fn1 -> 4/6; class 2: 1 */
    assert_float_equal(f1, (0.5 + 4.0 / 6.0 + 1.0) / 3.0, 1e-12);
    /* all one class predicted on balanced data: accuracy 0.5, macro-F1 (2/3 + 0)/2 */
    const int32_t y2[] = {0, 1, 0, 1}, p2[] = {0, 0, 0, 0};
    lp_metrics_classification(y2, p2, 4, 2, &acc, &f1);
    assert_float_equal(acc, 0.5, 1e-12);
    assert_float_equal(f1, (2.0 / 3.0) / 2.0, 1e-12);
}

#define CKPT_HEAD "{\"format\":\"loupe-checkpoint-1\",\"optimizer_step\":5,\"epoch\":1,\"batch_in_epoch\":2,"
#define CKPT_RNG "\"dropout_rng\":{\"seed\":\"42\",\"stream\":\"2\",\"offset\":\"4096\"},"
#define CKPT_SET(seed) "\"settings\":{\"seed\":\"" seed "\",\"batch_size\":16,\"grad_accum\":1,\"max_seq_len\":128}}"

static void test_ckpt_state_parse(void **state)
{
    (void)state;
    lp_train_config c;
    lp_train_config_init(&c);
    lp_optim o = {0};
    lp_ckpt_state s = {0};
    const char *good = CKPT_HEAD "\"step\":5,\"elapsed_s\":12.5," CKPT_RNG CKPT_SET("42");
    assert_int_equal(lp_ckpt_state_parse(good, strlen(good), "ck/trainer_state.json", &c, &o, &s), LP_OK);
    assert_true(s.step == 5 && o.t == 5 && s.pos.epoch == 1 && s.pos.batch == 2 && s.elapsed_s == 12.5);
    assert_true(s.dropout_rng.seed == 42 && s.dropout_rng.stream == 2 && s.dropout_rng.offset == 4096);
    static const struct {
        const char *json;
        lp_status st;
        const char *msg;
    } bad[] = {
        // an infinite elapsed time (1e999) was taken as is; a fractional step was truncated
        {CKPT_HEAD "\"step\":5,\"elapsed_s\":1e999," CKPT_RNG CKPT_SET("42"), LP_STATUS_FORMAT, "bad field"},
        {CKPT_HEAD "\"step\":5,\"elapsed_s\":-1," CKPT_RNG CKPT_SET("42"), LP_STATUS_FORMAT, "bad field"},
        {CKPT_HEAD "\"step\":5.5,\"elapsed_s\":1," CKPT_RNG CKPT_SET("42"), LP_STATUS_FORMAT, "bad field"},
        {CKPT_HEAD "\"step\":1e16,\"elapsed_s\":1," CKPT_RNG CKPT_SET("42"), LP_STATUS_FORMAT, "bad field"},
        {CKPT_HEAD "\"step\":5,\"elapsed_s\":1," CKPT_RNG CKPT_SET("7"), LP_STATUS_INVALID_ARG, "--seed"},
        {"{\"format\":", LP_STATUS_FORMAT, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lp_status st = lp_ckpt_state_parse(bad[i].json, strlen(bad[i].json), "ck/trainer_state.json", &c, &o, &s);
        if (st != bad[i].st || !strstr(lp_err_msg(), bad[i].msg) || !strstr(lp_err_msg(), "ck/trainer_state.json"))
            fail_msg("case %zu: status %d, message '%s'", i, (int)st, lp_err_msg());
    }
}

/* --task names, and the architecture deciding when it is auto. */
static void test_task(void **state)
{
    (void)state;
    lp_model_task t;
    assert_int_equal(lp_train_task_parse("seq-cls", &t), LP_OK);
    assert_int_equal(t, LP_MODEL_TASK_SEQ_CLS);
    assert_int_equal(lp_train_task_parse("causal-lm", &t), LP_OK);
    assert_string_equal(lp_train_task_name(t), "causal-lm");
    assert_int_equal(lp_train_task_parse("lm", &t), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "--task"));
    assert_non_null(strstr(lp_err_msg(), "'lm'"));
    const char *src = getenv("LP_SOURCE_DIR") ? getenv("LP_SOURCE_DIR") : ".";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/tiny-llama", src);
    assert_int_equal(lp_train_task_resolve(dir, LP_MODEL_TASK_AUTO, &t), LP_OK);
    assert_int_equal(t, LP_MODEL_TASK_CAUSAL_LM); /* LlamaForCausalLM */
    assert_int_equal(lp_train_task_resolve(dir, LP_MODEL_TASK_SEQ_CLS, &t), LP_OK);
    assert_int_equal(t, LP_MODEL_TASK_SEQ_CLS);
    snprintf(dir, sizeof dir, "%s/models/default", src);
    assert_int_equal(lp_train_task_resolve(dir, LP_MODEL_TASK_AUTO, &t), LP_OK);
    assert_int_equal(t, LP_MODEL_TASK_SEQ_CLS); /* BertForSequenceClassification */
    assert_int_not_equal(lp_train_task_resolve("/nonexistent-model", LP_MODEL_TASK_AUTO, &t), LP_OK);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent-model/config.json"));
}

/* epoch_results.csv: values that do not apply are empty fields (absent, not 0 or "nan") and
 * read back as NaN; a file with the older header (no eval_perplexity) still reads. */
static void test_epochs_csv(void **state)
{
    (void)state;
    char path[] = "/tmp/lp_epochs_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    lp_history h = {0}, back = {0};
    lp_epoch_rec lm = {.epoch = 0, .steps = 3, .train_loss = 4.5, .eval_loss = 3.25, .eval_accuracy = NAN,
                       .eval_f1 = NAN, .eval_perplexity = exp(3.25), .complete = true};
    lp_epoch_rec cls = {.epoch = 1, .steps = 3, .train_loss = 0.5, .eval_loss = NAN, .eval_accuracy = NAN,
                        .eval_f1 = NAN, .eval_perplexity = NAN, .complete = false};
    assert_int_equal(lp_history_add_epoch(&h, &lm), LP_OK);
    assert_int_equal(lp_history_add_epoch(&h, &cls), LP_OK);
    assert_int_equal(lp_rundir_write_epochs(path, &h), LP_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_file_read_all(path, &text, &len), LP_OK);
    assert_non_null(strstr(text, ",complete,eval_perplexity\n"));
    assert_non_null(strstr(text, "\n1,3,4.5,3.25,,,"));
    assert_null(strstr(text, "nan"));
    free(text);
    assert_int_equal(lp_rundir_read_epochs(path, &back), LP_OK);
    assert_int_equal(back.n_epochs, 2);
    assert_true(back.epochs[0].eval_loss == 3.25 && isnan(back.epochs[0].eval_accuracy));
    assert_true(fabs(back.epochs[0].eval_perplexity - exp(3.25)) < 1e-12 && isnan(back.epochs[1].eval_perplexity));
    assert_true(isnan(back.epochs[1].eval_loss) && !back.epochs[1].complete);
    lp_history_free(&back);
    const char *v1 = "epoch,steps,train_loss,eval_loss,eval_accuracy,eval_macro_f1,time_s,samples_per_s,"
                     "tokens_per_s,peak_memory_bytes,complete\n1,5,0.7,0.6,0.8,0.79,1.5,10,100,1000,1\n";
    assert_int_equal(lp_file_write_atomic(path, v1, strlen(v1)), LP_OK);
    assert_int_equal(lp_rundir_read_epochs(path, &back), LP_OK);
    assert_true(back.n_epochs == 1 && back.epochs[0].eval_accuracy == 0.8 && isnan(back.epochs[0].eval_perplexity));
    lp_history_free(&back);
    lp_history_free(&h);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_schedules),
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_tb_worked_bytes),
        cmocka_unit_test(test_tb_writer_file),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_ckpt_state_parse),
        cmocka_unit_test(test_task),
        cmocka_unit_test(test_epochs_csv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
