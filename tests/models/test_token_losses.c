/* lp_model_token_losses (what `loupe eval` reads for a causal LM): per-token losses from the
 * head and the loss run a chunk of rows at a time, no (B*T, V) logits held. Against
 * lp_model_loss_forward on the same batch (the mean over predicted tokens), with right
 * padding, the head in chunks of 5 rows (the last one short) and in one; against each row's
 * loss recomputed from lp_model_forward's whole logits; refusals. Sums of f32 terms in
 * another order: 1e-5 relative (measured ~1e-7; a token's loss is ~ln V = 6.9, so a wrong
 * target or a shifted row moves a mean by ~1e-1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/core.h"
#include "loupe/models.h"

#define B 3
#define T 12

static lp_model *open_lm(int32_t chunk)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.no_grad = true;
    o.quiet = true;
    o.exec = LP_EXEC_MODE_FUSED;
    o.lm_head_chunk = chunk;
    lp_model *m = NULL;
    if (lp_model_load("tests/golden/llama_lm", &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static void check(int32_t chunk)
{
    lp_model *m = open_lm(chunk);
    lp_model_info info;
    lp_model_info_get(m, &info);
    const int64_t V = info.vocab_size;
    int32_t ids[B * T], mask[B * T], labels[B * T];
    for (int i = 0; i < B * T; i++) {
        const int b = i / T, t = i % T;
        ids[i] = 1 + (i * 7) % (int32_t)(V - 1);
        mask[i] = t < T - 4 * b; /* rows of 12, 8 and 4 real tokens */
        labels[i] = mask[i] ? ids[i] : -100;
    }
    float tl[B * T], loss = 0;
    assert_int_equal(lp_model_token_losses(m, ids, mask, labels, B, T, tl), LP_OK);
    assert_int_equal(lp_model_loss_forward(m, ids, mask, NULL, labels, B, T, NULL, &loss), LP_OK);
    float *logits = malloc((size_t)(B * T * V) * sizeof *logits);
    assert_non_null(logits);
    assert_int_equal(lp_model_forward(m, ids, mask, NULL, B, T, logits), LP_OK);
    double sum = 0;
    int n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int i = b * T + t;
            const bool pred = t + 1 < T && mask[i] && mask[i + 1];
            if (!pred) { /* nothing predicted: 0 */
                assert_true(tl[i] == 0.0f);
                continue;
            }
            /* -log softmax(logits[i])[ids[i+1]] from the whole logits, in double */
            const float *l = logits + (size_t)i * V;
            double mx = l[0], se = 0;
            for (int64_t v = 1; v < V; v++)
                mx = l[v] > mx ? l[v] : mx;
            for (int64_t v = 0; v < V; v++)
                se += exp(l[v] - mx);
            const double want = mx + log(se) - l[ids[i + 1]];
            if (fabs(tl[i] - want) > 1e-5 * fabs(want))
                fail_msg("chunk %d: token %d loss %.9g, want %.9g", chunk, i, (double)tl[i], want);
            sum += tl[i];
            n++;
        }
    assert_int_equal(n, 11 + 7 + 3);
    if (fabs(sum / n - loss) > 1e-5 * fabs(loss))
        fail_msg("chunk %d: mean token loss %.9g, lp_model_loss_forward %.9g", chunk, sum / n, (double)loss);
    free(logits);
    lp_model_free(m);
}

static void test_chunked(void **state)
{
    (void)state;
    check(5);
}

static void test_whole(void **state)
{
    (void)state;
    check(0);
}

static void test_refused(void **state)
{
    (void)state;
    lp_model *m = open_lm(0);
    int32_t ids[T] = {1, 2, 3}, lab[T] = {1, 2, 3};
    float tl[T];
    assert_int_equal(lp_model_token_losses(m, ids, NULL, NULL, 1, 3, tl), LP_STATUS_INVALID_ARG);
    lp_model_free(m);
    lp_model_options o;
    lp_model_options_init(&o);
    o.no_grad = true;
    o.quiet = true;
    assert_int_equal(lp_model_load("tests/golden/llama_cls", &o, &m), LP_OK);
    assert_int_equal(lp_model_token_losses(m, ids, NULL, lab, 1, 3, tl), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "causal LM"));
    lp_model_free(m);
}

int main(void)
{
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_whole),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
