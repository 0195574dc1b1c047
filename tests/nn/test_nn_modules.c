/* nn module checks the goldens cannot make (their dropout is 0): the eager attention composed
 * from ops equals the eager kernel at p = 0 (forward and backward); with dropout on the
 * probabilities its backward matches central finite differences of its forward under the
 * same mask, and the fused kernel (ref and opt) drops the same elements and gives the same
 * output and gradients; a whole model trains the same in eager and fused mode with every
 * dropout on; a model with every dropout on gives bit-identical gradients with and without
 * gradient checkpointing (the recompute replays the masks); a config-only directory is
 * initialized deterministically from the seed as documented; eval mode ignores dropout. */
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

#include "../../src/nn/nn_internal.h"
#include "loupe/models.h"
#include "lp_test_model.h"

static float *rnd(lp_rng *r, int64_t n, float s)
{
    float *v = malloc((size_t)n * sizeof *v);
    lp_rng_normal(r, v, n, 0.0f, s);
    return v;
}

static double maxdiff(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

enum { B = 2, T = 7, H = 3, D = 4, C = H * D };
static const lp_attn_geom G = {.B = B, .T = T, .H = H, .Hkv = H, .D = D, .ldq = C, .ldkv = C};

/* The first sequence full, the others 5 real tokens then padding. */
static void padded_mask(int32_t mask[B * T])
{
    for (int i = 0; i < B * T; i++)
        mask[i] = (i % T) < (i / T ? 5 : T);
}

static void composed_equals_kernel(void **state)
{
    (void)state;
    lp_rng r;
    lp_rng_init(&r, 7, LP_RNG_STREAM_INIT);
    const int64_t N = B * T, A = B * H * T * T;
    float *q = rnd(&r, N * C, 1), *k = rnd(&r, N * C, 1), *v = rnd(&r, N * C, 1), *dctx = rnd(&r, N * C, 1);
    int32_t mask[B * T];
    for (int i = 0; i < B * T; i++)
        mask[i] = (i % T) < (i / T ? 4 : T); // row 1 padded after 4 tokens
    float *c1 = calloc(N * C, 4), *c2 = calloc(N * C, 4), *att1 = calloc(A, 4), *att2 = calloc(A, 4),
          *attd = calloc(A, 4), *datt = calloc(2 * A, 4);
    uint8_t *keep = calloc(A, 1);
    lp_attention_eager_forward(c1, att1, q, k, v, mask, &G);
    lp_nn__attention_composed_forward(c2, att2, attd, keep, q, k, v, mask, &G, 0.0f, &r);
    printf("composed vs kernel forward: ctx %.3e, probabilities %.3e\n", maxdiff(c1, c2, N * C),
           maxdiff(att1, att2, A));
    assert_true(maxdiff(c1, c2, N * C) < 1e-5 && maxdiff(att1, att2, A) < 1e-6);
    float *g1[3], *g2[3];
    for (int i = 0; i < 3; i++) {
        g1[i] = calloc(N * C, 4);
        g2[i] = calloc(N * C, 4);
    }
    lp_attention_eager_backward(g1[0], g1[1], g1[2], datt, dctx, att1, q, k, v, &G);
    lp_nn__attention_composed_backward(g2[0], g2[1], g2[2], datt, dctx, att2, attd, keep, q, k, v, &G, 0.0f, false);
    for (int i = 0; i < 3; i++) {
        printf("composed vs kernel backward d%c: %.3e\n", "qkv"[i], maxdiff(g1[i], g2[i], N * C));
        assert_true(maxdiff(g1[i], g2[i], N * C) < 1e-5);
        free(g1[i]);
        free(g2[i]);
    }
    free(q), free(k), free(v), free(dctx), free(c1), free(c2), free(att1), free(att2), free(attd), free(datt),
        free(keep);
}

/* The composed path under a decoder geometry (4 query heads over 2 kv heads, causal, window
 * 3, separate q and k/v buffers of different widths, the second sequence left-padded so its
 * first two queries see no key) equals the eager kernel at p = 0, forward and backward
 * (1e-5: the same f32 products in another order), with finite values everywhere and the
 * blind queries' outputs exactly 0. */
static void composed_equals_kernel_gqa_causal(void **state)
{
    (void)state;
    enum { Hq = 4, Hk = 2, Cq = Hq * D, Ck = Hk * D };
    const lp_attn_geom g = {.B = B, .T = T, .H = Hq, .Hkv = Hk, .D = D, .ldq = Cq, .ldkv = Ck, .causal = true,
                            .window = 3};
    lp_rng r;
    lp_rng_init(&r, 23, LP_RNG_STREAM_INIT);
    const int64_t N = B * T, A = B * Hq * T * T;
    float *q = rnd(&r, N * Cq, 1), *k = rnd(&r, N * Ck, 1), *v = rnd(&r, N * Ck, 1), *dctx = rnd(&r, N * Cq, 1);
    int32_t mask[B * T];
    for (int i = 0; i < B * T; i++)
        mask[i] = i / T == 0 || (i % T) >= 2;
    float *c1 = calloc(N * Cq, 4), *c2 = calloc(N * Cq, 4), *att1 = calloc(A, 4), *att2 = calloc(A, 4),
          *attd = calloc(A, 4), *datt = calloc(2 * A, 4);
    uint8_t *keep = calloc(A, 1);
    lp_attention_eager_forward(c1, att1, q, k, v, mask, &g);
    lp_nn__attention_composed_forward(c2, att2, attd, keep, q, k, v, mask, &g, 0.0f, &r);
    for (int64_t i = 0; i < N * Cq; i++)
        assert_true(isfinite(c2[i]));
    for (int64_t t = 0; t < 2; t++)
        for (int64_t c = 0; c < Cq; c++)
            assert_true(c2[(T + t) * Cq + c] == 0.0f);
    printf("composed vs kernel, gqa causal window: ctx %.3e, probabilities %.3e\n", maxdiff(c1, c2, N * Cq),
           maxdiff(att1, att2, A));
    assert_true(maxdiff(c1, c2, N * Cq) < 1e-5 && maxdiff(att1, att2, A) < 1e-6);
    const int64_t n[3] = {N * Cq, N * Ck, N * Ck};
    float *g1[3], *g2[3];
    for (int i = 0; i < 3; i++)
        g1[i] = calloc(n[i], 4), g2[i] = calloc(n[i], 4);
    lp_attention_eager_backward(g1[0], g1[1], g1[2], datt, dctx, att1, q, k, v, &g);
    lp_nn__attention_composed_backward(g2[0], g2[1], g2[2], datt, dctx, att2, attd, keep, q, k, v, &g, 0.0f, false);
    for (int i = 0; i < 3; i++) {
        for (int64_t e = 0; e < n[i]; e++)
            assert_true(isfinite(g2[i][e]));
        printf("composed vs kernel backward d%c: %.3e\n", "qkv"[i], maxdiff(g1[i], g2[i], n[i]));
        assert_true(maxdiff(g1[i], g2[i], n[i]) < 1e-5);
        free(g1[i]), free(g2[i]);
    }
    free(q), free(k), free(v), free(dctx), free(c1), free(c2), free(att1), free(att2), free(attd), free(datt),
        free(keep);
}

/* loss = sum(ctx * R) with a fixed dropout mask (the RNG state is replayed per evaluation). */
static double composed_loss(const float *q, const float *k, const float *v, const int32_t *mask,
                            const float *R, lp_rng rng, float p)
{
    const int64_t N = B * T, A = B * H * T * T;
    float *ctx = calloc(N * C, 4), *att = calloc(A, 4), *attd = calloc(A, 4);
    uint8_t *keep = calloc(A, 1);
    lp_nn__attention_composed_forward(ctx, att, attd, keep, q, k, v, mask, &G, p, &rng);
    double s = 0;
    for (int64_t i = 0; i < N * C; i++)
        s += (double)ctx[i] * R[i];
    free(ctx), free(att), free(attd), free(keep);
    return s;
}

static void composed_dropout_finite_differences(void **state)
{
    (void)state;
    lp_rng r, drop;
    lp_rng_init(&r, 11, LP_RNG_STREAM_INIT);
    lp_rng_init(&drop, 5, LP_RNG_STREAM_DROPOUT);
    const float p = 0.3f;
    const int64_t N = B * T, A = B * H * T * T;
    float *x[3] = {rnd(&r, N * C, 1), rnd(&r, N * C, 1), rnd(&r, N * C, 1)}, *R = rnd(&r, N * C, 1);
    int32_t mask[B * T];
    padded_mask(mask);
    float *ctx = calloc(N * C, 4), *att = calloc(A, 4), *attd = calloc(A, 4), *datt = calloc(2 * A, 4);
    uint8_t *keep = calloc(A, 1);
    lp_rng d0 = drop;
    lp_nn__attention_composed_forward(ctx, att, attd, keep, x[0], x[1], x[2], mask, &G, p, &d0);
    int dropped = 0;
    for (int64_t i = 0; i < A; i++)
        dropped += !keep[i];
    assert_true(dropped > 0);
    float *g[3] = {calloc(N * C, 4), calloc(N * C, 4), calloc(N * C, 4)};
    lp_nn__attention_composed_backward(g[0], g[1], g[2], datt, R, att, attd, keep, x[0], x[1], x[2], &G, p, true);
    double worst = 0;
    for (int w = 0; w < 3; w++)
        for (int64_t i = 0; i < N * C; i += 5) {
            float keepv = x[w][i];
            const double h = 1e-2;
            x[w][i] = keepv + (float)h;
            double lp = composed_loss(x[0], x[1], x[2], mask, R, drop, p);
            x[w][i] = keepv - (float)h;
            double lm = composed_loss(x[0], x[1], x[2], mask, R, drop, p);
            x[w][i] = keepv;
            double fd = (lp - lm) / (2 * h), err = fabs(fd - g[w][i]) / (1e-2 + fabs(fd));
            worst = fmax(worst, err);
        }
    printf("composed attention with dropout p=%.1f (%d of %lld dropped): worst FD error %.3e\n", p, dropped,
           (long long)A, worst);
    assert_true(worst < 2e-2);
    for (int w = 0; w < 3; w++)
        free(x[w]), free(g[w]);
    free(R), free(ctx), free(att), free(attd), free(datt), free(keep);
}

/* The fused kernel draws its dropout mask from the counters the composed path's
 * lp_dropout_forward uses, so with the same rng both give the same output and gradients
 * (up to summation order: 1e-5 on values of order 1). */
static void fused_dropout_equals_composed(void **state)
{
    (void)state;
    lp_rng r, drop;
    lp_rng_init(&r, 13, LP_RNG_STREAM_INIT);
    lp_rng_init(&drop, 21, LP_RNG_STREAM_DROPOUT);
    drop.offset = 5; /* not at a counter boundary of its own */
    const float p = 0.3f;
    const int64_t N = B * T, A = B * H * T * T;
    float *q = rnd(&r, N * C, 1), *k = rnd(&r, N * C, 1), *v = rnd(&r, N * C, 1), *dctx = rnd(&r, N * C, 1);
    int32_t mask[B * T];
    padded_mask(mask);
    float *c1 = calloc(N * C, 4), *att = calloc(A, 4), *attd = calloc(A, 4), *datt = calloc(2 * A, 4);
    uint8_t *keep = calloc(A, 1);
    lp_rng d0 = drop;
    lp_nn__attention_composed_forward(c1, att, attd, keep, q, k, v, mask, &G, p, &d0);
    float *g1[3];
    for (int i = 0; i < 3; i++)
        g1[i] = calloc(N * C, 4);
    lp_nn__attention_composed_backward(g1[0], g1[1], g1[2], datt, dctx, att, attd, keep, q, k, v, &G, p, true);
    lp_attn_dropout ad = {p, drop.seed, drop.stream, drop.offset, drop.lane};
    for (int impl = 0; impl < 2; impl++) {
        lp_kernels_select(impl ? LP_KERNELS_IMPL_OPT : LP_KERNELS_IMPL_REF);
        float *c2 = calloc(N * C, 4), *lse = calloc(B * H * T, 4), *g2[3];
        for (int i = 0; i < 3; i++)
            g2[i] = calloc(N * C, 4);
        lp_attention_fused_forward(c2, lse, q, k, v, mask, &G, &ad);
        lp_attention_fused_backward(g2[0], g2[1], g2[2], dctx, c2, lse, q, k, v, mask, &G, &ad);
        double worst = maxdiff(c1, c2, N * C);
        for (int i = 0; i < 3; i++)
            worst = fmax(worst, maxdiff(g1[i], g2[i], N * C));
        printf("fused (%s) vs composed attention, dropout %.1f: max |d| %.3e over ctx, dq, dk, dv\n",
               impl ? "opt" : "ref", p, worst);
        assert_true(worst < 1e-5);
        /* and without the dropout the output differs: the mask is really applied */
        lp_attention_fused_forward(c2, lse, q, k, v, mask, &G, NULL);
        assert_true(maxdiff(c1, c2, N * C) > 1e-2);
        for (int i = 0; i < 3; i++)
            free(g2[i]);
        free(c2), free(lse);
    }
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    for (int i = 0; i < 3; i++)
        free(g1[i]);
    free(q), free(k), free(v), free(dctx), free(c1), free(att), free(attd), free(datt), free(keep);
}

/* A config-only model directory with every dropout on (written under the build dir). */
static const char *tiny_dir(void)
{
    static char dir[512];
    const char *bd = getenv("LP_BUILD_DIR");
    snprintf(dir, sizeof dir, "%s/test_nn_tiny_bert", bd ? bd : "build");
    static const char cfg[] =
        "{\"architectures\": [\"BertForSequenceClassification\"], \"model_type\": \"bert\", \"hidden_size\": "
        "16,"
        " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"intermediate_size\": 32, \"vocab_size\": "
        "50,"
        " \"max_position_embeddings\": 16, \"type_vocab_size\": 2, \"hidden_act\": \"gelu\", "
        "\"layer_norm_eps\": 1e-12,"
        " \"hidden_dropout_prob\": 0.2, \"attention_probs_dropout_prob\": 0.25, \"classifier_dropout\": 0.3,"
        " \"initializer_range\": 0.05, \"pad_token_id\": 0, \"num_labels\": 3}";
    char p[600];
    assert_int_equal(lp_mkdir_p(dir), LP_OK);
    snprintf(p, sizeof p, "%s/config.json", dir);
    assert_int_equal(lp_file_write_atomic(p, cfg, sizeof cfg - 1), LP_OK);
    return dir;
}

static lp_model *load_tiny(lp_exec_mode exec, bool ckpt, bool training, uint64_t seed)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.exec = exec;
    o.grad_checkpointing = ckpt;
    o.training = training;
    o.seed = seed;
    o.quiet = true;
    lp_model *m = NULL;
    if (lp_model_load(tiny_dir(), &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

static const int32_t ids[2 * 9] = {2, 5, 9, 11, 4, 3, 0, 0, 0, 2, 7, 7, 8, 13, 21, 17, 6, 3};
static const int32_t msk[2 * 9] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const int32_t typ[2 * 9] = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
static const int32_t lab[2] = {2, 0};

static void grads_of(lp_model *m, float *loss, float **out, int64_t *n_out)
{
    lp_model_zero_grad(m);
    if (lp_model_loss_forward(m, ids, msk, typ, lab, 2, 9, NULL, loss) != LP_OK ||
        lp_model_backward(m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    *out = lp_test_model_grads(m, n_out);
    assert_non_null(*out);
}

static void checkpointing_replays_dropout(void **state)
{
    (void)state;
    for (int e = 0; e < 2; e++) {
        lp_exec_mode exec = e ? LP_EXEC_MODE_FUSED : LP_EXEC_MODE_EAGER;
        lp_model *a = load_tiny(exec, false, true, 3), *b = load_tiny(exec, true, true, 3);
        float la, lb, *ga, *gb;
        int64_t na, nb;
        grads_of(a, &la, &ga, &na);
        grads_of(b, &lb, &gb, &nb);
        assert_int_equal(na, nb);
        printf("%s with dropout: loss %.7f vs %.7f with checkpointing, grads max|d| %.3e\n",
               lp_exec_mode_name(exec), la, lb, maxdiff(ga, gb, na));
        assert_true(la == lb);
        assert_true(memcmp(ga, gb, (size_t)na * sizeof *ga) == 0);
        // dropout really is on: eval mode gives another loss
        lp_model_set_training(a, false);
        float le;
        assert_int_equal(lp_model_loss_forward(a, ids, msk, typ, lab, 2, 9, NULL, &le), LP_OK);
        assert_true(le != la);
        free(ga);
        free(gb);
        lp_model_free(a);
        lp_model_free(b);
    }
}

/* Every dropout on, training mode: eager (composed attention with a stored mask) and fused
 * (mask drawn in the kernel) consume the same rng and drop the same elements, so loss and
 * gradients agree to float summation order. */
static void eager_and_fused_train_alike(void **state)
{
    (void)state;
    lp_model *a = load_tiny(LP_EXEC_MODE_EAGER, false, true, 3), *b = load_tiny(LP_EXEC_MODE_FUSED, false, true, 3);
    float la, lb, *ga, *gb;
    int64_t na, nb;
    for (int step = 0; step < 2; step++) { /* the second step starts from the advanced rng */
        grads_of(a, &la, &ga, &nb);
        grads_of(b, &lb, &gb, &na);
        double scale = 0;
        for (int64_t i = 0; i < na; i++)
            scale = fmax(scale, fabs(ga[i]));
        printf("step %d with dropout: eager loss %.7f, fused %.7f, grads max|d| %.3e (max |g| %.3e)\n", step, la,
               lb, maxdiff(ga, gb, na), scale);
        assert_true(fabs(la - lb) < 1e-5);
        assert_true(maxdiff(ga, gb, na) < 1e-4 * scale);
        free(ga);
        free(gb);
    }
    lp_model_free(a);
    lp_model_free(b);
}

/* lp_model_grad_clip: the global norm over every gradient (the padding of the gradient
 * block adds nothing), and clipping scales every gradient by max_norm / norm. */
static void grad_clip_is_global(void **state)
{
    (void)state;
    lp_model *m = load_tiny(LP_EXEC_MODE_FUSED, false, true, 3);
    float loss, *g;
    int64_t n;
    grads_of(m, &loss, &g, &n);
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)g[i] * g[i];
    double norm = sqrt(ss), got = lp_model_grad_clip(m, 0.0);
    printf("global grad norm %.9g, lp_model_grad_clip %.9g\n", norm, got);
    assert_true(norm > 0 && fabs(got - norm) <= 1e-6 * norm);
    assert_true(fabs(lp_model_grad_clip(m, norm / 2) - norm) <= 1e-6 * norm); // the norm before clipping
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    const float *w = g;
    for (size_t i = 0; i < np; i++)
        if (p[i].grad) {
            for (int64_t j = 0; j < p[i].numel; j++)
                assert_true(fabsf(p[i].grad[j] - 0.5f * w[j]) <= 1e-6f * fabsf(w[j]) + 1e-12f);
            w += p[i].numel;
        }
    assert_true(fabs(lp_model_grad_clip(m, 0.0) - norm / 2) <= 1e-5 * norm);
    free(g);
    lp_model_free(m);
}

static void seeded_init(void **state)
{
    (void)state;
    lp_model *a = load_tiny(LP_EXEC_MODE_EAGER, false, false, 9),
             *b = load_tiny(LP_EXEC_MODE_EAGER, false, false, 9),
             *c = load_tiny(LP_EXEC_MODE_EAGER, false, false, 10);
    size_t np, nb;
    const lp_model_param *pa = lp_model_params(a, &np), *pb = lp_model_params(b, &nb),
                         *pc = lp_model_params(c, &nb);
    assert_int_equal(np, nb);
    bool differs = false;
    double ss = 0;
    int64_t cnt = 0;
    for (size_t i = 0; i < np; i++) {
        assert_string_equal(pa[i].name, pb[i].name);
        assert_memory_equal(pa[i].data, pb[i].data, (size_t)pa[i].numel * sizeof(float));
        differs |= memcmp(pa[i].data, pc[i].data, (size_t)pa[i].numel * sizeof(float)) != 0;
        assert_false(pa[i].from_checkpoint);
        const char *n = pa[i].name;
        size_t len = strlen(n);
        bool is_bias = len > 5 && !strcmp(n + len - 5, ".bias");
        bool is_ln = strstr(n, "LayerNorm") != NULL;
        for (int64_t j = 0; j < pa[i].numel; j++) {
            float v = pa[i].data[j];
            if (is_bias)
                assert_true(v == 0.0f);
            else if (is_ln)
                assert_true(v == 1.0f);
            else {
                ss += (double)v * v;
                cnt++;
            }
        }
        if (!strcmp(n, "bert.embeddings.word_embeddings.weight"))
            for (int64_t j = 0; j < pa[i].shape[1]; j++)
                assert_true(pa[i].data[j] == 0.0f); // padding row (pad_token_id 0)
    }
    assert_true(differs);
    double sd = sqrt(ss / (double)cnt);
    printf("seeded init: %lld weights, std %.4f (initializer_range 0.05)\n", (long long)cnt, sd);
    assert_true(fabs(sd - 0.05) < 0.005);
    lp_model_info info;
    lp_model_info_get(a, &info);
    assert_int_equal(info.n_initialized, info.n_tensors);
    assert_int_equal(info.num_labels, 3);
    lp_model_free(a);
    lp_model_free(b);
    lp_model_free(c);
}

static void bad_inputs(void **state)
{
    (void)state;
    lp_model *m = load_tiny(LP_EXEC_MODE_EAGER, false, false, 1);
    float loss;
    int32_t bad_ids[2 * 9];
    memcpy(bad_ids, ids, sizeof bad_ids);
    bad_ids[3] = 50; // vocabulary is 50
    assert_int_equal(lp_model_loss_forward(m, bad_ids, msk, typ, lab, 2, 9, NULL, &loss), LP_STATUS_RANGE);
    printf("bad id: %s\n", lp_err_msg());
    int32_t bad_lab[2] = {3, 0};
    assert_int_equal(lp_model_loss_forward(m, ids, msk, typ, bad_lab, 2, 9, NULL, &loss), LP_STATUS_RANGE);
    assert_int_equal(lp_model_backward(m), LP_STATUS_INVALID_ARG); // no successful loss forward
    int32_t empty[2 * 9] = {0};
    assert_int_equal(lp_model_forward(m, ids, empty, typ, 2, 9, NULL), LP_STATUS_INVALID_ARG);
    int32_t long_ids[17] = {0}, long_mask[17];
    for (int i = 0; i < 17; i++)
        long_mask[i] = 1;
    assert_int_equal(lp_model_forward(m, long_ids, long_mask, NULL, 1, 17, NULL), LP_STATUS_INVALID_ARG);
    printf("too long: %s\n", lp_err_msg());
    lp_model_free(m);
    // inference only: no gradient block, the loss still computes, a backward is refused
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = o.no_grad = true;
    assert_int_equal(lp_model_load(tiny_dir(), &o, &m), LP_OK);
    size_t np;
    const lp_model_param *p = lp_model_params(m, &np);
    for (size_t i = 0; i < np; i++)
        assert_null(p[i].grad);
    assert_int_equal(lp_model_loss_forward(m, ids, msk, typ, lab, 2, 9, NULL, &loss), LP_OK);
    assert_int_equal(lp_model_backward(m), LP_STATUS_INVALID_ARG);
    lp_model_free(m);
    lp_model *x = NULL;
    assert_int_not_equal(lp_model_load("tests/golden/does-not-exist", NULL, &x), LP_OK);
    assert_null(x);
    printf("missing dir: %s\n", lp_err_msg());
}

int main(void)
{
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(composed_equals_kernel),
        cmocka_unit_test(composed_equals_kernel_gqa_causal),
        cmocka_unit_test(composed_dropout_finite_differences),
        cmocka_unit_test(checkpointing_replays_dropout),
        cmocka_unit_test(fused_dropout_equals_composed),
        cmocka_unit_test(eager_and_fused_train_alike),
        cmocka_unit_test(grad_clip_is_global),
        cmocka_unit_test(seeded_init),
        cmocka_unit_test(bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
