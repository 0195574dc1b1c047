/* Finite-difference checks of every backward, on the reference kernels (the op table holds
 * the optimized ones equal to these). L = sum(w * forward(x)) with fixed random w, so the
 * analytic gradient is backward(dout = w); the numeric one is the central difference
 * (L(x+h) - L(x-h)) / 2h, h = 1e-2 in f32. Tolerance: |num - ana| <= 2e-3 + 2e-2 * |ana|
 * (the O(h^2) truncation and f32 rounding both sit well inside it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static const lp_kernel_table *R;

typedef double (*loss_fn)(void *ctx);

/* Checks grad against finite differences of fn at up to 48 elements of x. */
static int fd_check(const char *what, loss_fn fn, void *ctx, float *x, int64_t n, const float *grad)
{
    const float h = 1e-2f;
    int64_t step = n > 48 ? n / 48 : 1;
    int bad = 0;
    for (int64_t i = 0; i < n; i += step) {
        float x0 = x[i];
        x[i] = x0 + h;
        double lp = fn(ctx);
        x[i] = x0 - h;
        double lm = fn(ctx);
        x[i] = x0;
        double num = (lp - lm) / (2.0 * h);
        if (!(fabs(num - grad[i]) <= 2e-3 + 2e-2 * fabs(grad[i]))) {
            fprintf(stderr, "  %s[%lld]: analytic %.6g, numeric %.6g\n", what, (long long)i, (double)grad[i], num);
            bad++;
        }
    }
    return bad;
}

static double dotw(const float *w, const float *y, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)w[i] * y[i];
    return s;
}

/* ---- matmul ---- */
typedef struct {
    int64_t N, C, OC;
    float *x, *w, *b, *out, *dout;
} mm_ctx;

static double mm_loss(void *p)
{
    mm_ctx *c = p;
    lp_matmul_forward(c->out, c->x, c->w, c->b, c->N, c->C, c->OC);
    return dotw(c->dout, c->out, c->N * c->OC);
}

static void test_grad_matmul(void **state)
{
    (void)state;
    mm_ctx c = {.N = 5, .C = 7, .OC = 3};
    c.x = kt_rand_f(c.N * c.C, -1, 1), c.w = kt_rand_f(c.OC * c.C, -1, 1), c.b = kt_rand_f(c.OC, -1, 1);
    c.out = kt_nan(c.N * c.OC), c.dout = kt_rand_f(c.N * c.OC, -1, 1);
    float *dx = kt_nan(c.N * c.C), *dw = kt_alloc((size_t)(c.OC * c.C) * 4), *db = kt_alloc((size_t)c.OC * 4);
    memset(dw, 0, (size_t)(c.OC * c.C) * 4);
    memset(db, 0, (size_t)c.OC * 4);
    lp_kernels_select(LP_KERNELS_IMPL_REF);
    lp_matmul_backward(dx, dw, db, c.dout, c.x, c.w, c.N, c.C, c.OC);
    int bad = fd_check("matmul dinp", mm_loss, &c, c.x, c.N * c.C, dx);
    bad += fd_check("matmul dweight", mm_loss, &c, c.w, c.OC * c.C, dw);
    bad += fd_check("matmul dbias", mm_loss, &c, c.b, c.OC, db);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    bad += kt_release("matmul");
    assert_int_equal(bad, 0);
}

/* ---- layernorm ---- */
typedef struct {
    int64_t N, C;
    float *x, *w, *b, *out, *mean, *rstd, *dout;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    R->layernorm_forward(c->out, c->mean, c->rstd, c->x, c->w, c->b, c->N, c->C, 1e-5f);
    return dotw(c->dout, c->out, c->N * c->C);
}

static void test_grad_layernorm(void **state)
{
    (void)state;
    ln_ctx c = {.N = 4, .C = 9};
    c.x = kt_rand_f(c.N * c.C, -2, 2), c.w = kt_rand_f(c.C, 0.5f, 1.5f), c.b = kt_rand_f(c.C, -1, 1);
    c.out = kt_nan(c.N * c.C), c.mean = kt_nan(c.N), c.rstd = kt_nan(c.N), c.dout = kt_rand_f(c.N * c.C, -1, 1);
    float *dx = kt_nan(c.N * c.C), *dw = kt_alloc((size_t)c.C * 4), *db = kt_alloc((size_t)c.C * 4);
    memset(dw, 0, (size_t)c.C * 4);
    memset(db, 0, (size_t)c.C * 4);
    ln_loss(&c);
    R->layernorm_backward(dx, dw, db, c.dout, c.x, c.w, c.mean, c.rstd, c.N, c.C);
    int bad = fd_check("layernorm dinp", ln_loss, &c, c.x, c.N * c.C, dx);
    bad += fd_check("layernorm dweight", ln_loss, &c, c.w, c.C, dw);
    bad += fd_check("layernorm dbias", ln_loss, &c, c.b, c.C, db);
    bad += kt_release("layernorm");
    assert_int_equal(bad, 0);
}

/* ---- elementwise: gelu (both), softmax, dropout ---- */
typedef struct {
    int64_t N, C;
    int kind; /* 0 gelu erf, 1 gelu tanh, 2 softmax, 3 dropout */
    float *x, *out, *dout;
    uint8_t *keep;
} ew_ctx;

static double ew_loss(void *p)
{
    ew_ctx *c = p;
    int64_t n = c->N * c->C;
    if (c->kind < 2)
        R->gelu_forward(c->out, c->x, n, (lp_gelu_kind)c->kind);
    else if (c->kind == 2)
        R->softmax_forward(c->out, c->x, c->N, c->C);
    else {
        lp_rng r;
        lp_rng_init(&r, 3, LP_RNG_STREAM_DROPOUT);
        R->dropout_forward(c->out, c->keep, c->x, n, 0.3f, &r);
    }
    return dotw(c->dout, c->out, n);
}

static void test_grad_elementwise(void **state)
{
    (void)state;
    static const char *names[] = {"gelu dinp", "gelu_tanh dinp", "softmax dinp", "dropout dinp"};
    int bad = 0;
    for (int kind = 0; kind < 4; kind++) {
        ew_ctx c = {.N = 3, .C = 11, .kind = kind};
        c.x = kt_rand_f(c.N * c.C, -4, 4), c.out = kt_nan(c.N * c.C), c.dout = kt_rand_f(c.N * c.C, -1, 1);
        c.keep = kt_alloc((size_t)(c.N * c.C));
        float *dx = kt_nan(c.N * c.C);
        ew_loss(&c);
        if (kind < 2)
            R->gelu_backward(dx, c.dout, c.x, c.N * c.C, (lp_gelu_kind)kind);
        else if (kind == 2)
            R->softmax_backward(dx, c.dout, c.out, c.N, c.C);
        else
            R->dropout_backward(dx, c.dout, c.keep, c.N * c.C, 0.3f);
        bad += fd_check(names[kind], ew_loss, &c, c.x, c.N * c.C, dx);
        bad += kt_release(names[kind]);
    }
    assert_int_equal(bad, 0);
}

/* ---- attention (eager and fused) ---- */
typedef struct {
    lp_attn_geom g; /* q, k, v packed in one buffer: token stride (H + 2 Hkv) D */
    int fused;
    float *qkv, *out, *att, *lse, *dout;
    int32_t *mask;
    const lp_attn_dropout *drop; /* fused: dropout on the probabilities (fixed counters = fixed mask) */
} at_ctx;

static double at_loss(void *p)
{
    at_ctx *c = p;
    const lp_attn_geom *g = &c->g;
    const float *q = c->qkv, *k = q + g->H * g->D, *v = k + g->Hkv * g->D;
    if (c->fused)
        R->attention_fused_forward(c->out, c->lse, q, k, v, c->mask, g, c->drop);
    else
        R->attention_eager_forward(c->out, c->att, q, k, v, c->mask, g);
    return dotw(c->dout, c->out, g->B * g->T * g->H * g->D);
}

/* MHA with right padding (BERT), GQA (4 query heads over 2 kv heads) under a causal mask
 * with a sliding window of 3 and left padding (two queries of the second sequence see no
 * key), and GQA causal over packed samples (sample ids 1 1 2 2 2 3 3 and 1 1 1 2 2 0 0):
 * eager, fused, fused with dropout. dk and dv of a kv head are sums over its two query
 * heads, which the finite differences of the shared k, v see directly. */
static void test_grad_attention(void **state)
{
    (void)state;
    int bad = 0;
    static const lp_attn_dropout ad = {0.3f, 17, LP_RNG_STREAM_DROPOUT, 0, 0};
    static const char *names[3][3] = {{"attention eager dqkv", "attention fused dqkv", "attention fused dqkv, dropout"},
                                      {"attention gqa causal window eager dqkv", "attention gqa causal window fused dqkv",
                                       "attention gqa causal window fused dqkv, dropout"},
                                      {"attention packed samples eager dqkv", "attention packed samples fused dqkv",
                                       "attention packed samples fused dqkv, dropout"}};
    static const int32_t packed[14] = {1, 1, 2, 2, 2, 3, 3, 1, 1, 1, 2, 2, 0, 0};
    for (int geo = 0; geo < 3; geo++)
        for (int fused = 0; fused < 3; fused++) { /* eager, fused, fused with dropout */
            at_ctx c = {.fused = fused, .drop = fused == 2 ? &ad : NULL};
            if (geo == 0)
                c.g = (lp_attn_geom){.B = 2, .T = 5, .H = 2, .Hkv = 2, .D = 3};
            else if (geo == 1)
                c.g = (lp_attn_geom){.B = 2, .T = 7, .H = 4, .Hkv = 2, .D = 3, .causal = true, .window = 3};
            else
                c.g = (lp_attn_geom){.B = 2, .T = 7, .H = 4, .Hkv = 2, .D = 3, .causal = true, .segments = true};
            lp_attn_geom *g = &c.g;
            const int64_t B = g->B, T = g->T, C = g->H * g->D, ld = (g->H + 2 * g->Hkv) * g->D, nx = B * T * ld;
            g->ldq = g->ldkv = ld;
            c.qkv = kt_rand_f(nx, -1.5f, 1.5f), c.out = kt_nan(B * T * C), c.dout = kt_rand_f(B * T * C, -1, 1);
            c.att = kt_nan(B * g->H * T * T), c.lse = kt_nan(B * g->H * T);
            c.mask = kt_alloc((size_t)(B * T) * 4);
            for (int64_t i = 0; i < B * T; i++) /* second sequence: 3 (MHA: right) or 2 (GQA: left) padded */
                c.mask[i] = geo == 0   ? (i % T) < (i / T ? 2 : 5)
                            : geo == 1 ? (i / T == 0 || (i % T) >= 2)
                                       : packed[i];
            float *gr = kt_nan(nx), *datt = kt_nan(B * g->H * T * T);
            float *dk = gr + C, *dv = dk + g->Hkv * g->D;
            at_loss(&c);
            if (fused)
                R->attention_fused_backward(gr, dk, dv, c.dout, c.out, c.lse, c.qkv, c.qkv + C, c.qkv + C + g->Hkv * g->D,
                                            c.mask, g, c.drop);
            else
                R->attention_eager_backward(gr, dk, dv, datt, c.dout, c.att, c.qkv, c.qkv + C,
                                            c.qkv + C + g->Hkv * g->D, g);
            bad += fd_check(names[geo][fused], at_loss, &c, c.qkv, nx, gr);
            /* padded keys get exactly zero gradient; so do the queries that see no key */
            for (int64_t bt = 0; bt < B * T; bt++)
                if (!c.mask[bt])
                    for (int64_t j = C; j < ld; j++)
                        bad += gr[bt * ld + j] != 0.0f;
            if (geo == 1)
                for (int64_t t = 0; t < 2; t++)
                    for (int64_t j = 0; j < C; j++)
                        bad += gr[(T + t) * ld + j] != 0.0f || c.out[(T + t) * C + j] != 0.0f;
            bad += kt_release("attention");
        }
    assert_int_equal(bad, 0);
}

/* ---- cross-entropy ---- */
typedef struct {
    int64_t N, V;
    float *x, *lse;
    int32_t *t;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    float loss;
    if (R->cross_entropy_forward(&loss, c->lse, c->x, c->t, c->N, c->V, -100) != LP_OK)
        return NAN;
    return loss;
}

static void test_grad_cross_entropy(void **state)
{
    (void)state;
    ce_ctx c = {.N = 5, .V = 7};
    c.x = kt_rand_f(c.N * c.V, -3, 3), c.lse = kt_nan(c.N);
    c.t = kt_alloc((size_t)c.N * 4);
    int32_t labels[5] = {0, 6, -100, 3, 3};
    memcpy(c.t, labels, sizeof labels);
    float *g = kt_nan(c.N * c.V);
    ce_loss(&c);
    R->cross_entropy_backward(g, c.x, c.lse, c.t, c.N, c.V, -100, 1.0f);
    int bad = fd_check("cross_entropy dlogits", ce_loss, &c, c.x, c.N * c.V, g);
    /* the mean is over the 4 counted rows: check the loss value by hand for one layout */
    float x2[4] = {0, 0, 0, 0}, lse2[2];
    int32_t t2[2] = {1, -100};
    float loss;
    assert_int_equal(R->cross_entropy_forward(&loss, lse2, x2, t2, 2, 2, -100), LP_OK);
    assert_float_equal(loss, logf(2.0f), 1e-6);
    t2[0] = -100;
    assert_int_equal(R->cross_entropy_forward(&loss, lse2, x2, t2, 2, 2, -100), LP_OK);
    assert_float_equal(loss, 0.0f, 0);
    bad += kt_release("cross_entropy");
    assert_int_equal(bad, 0);
}

/* ---- embedding (linear: the gradient is exact) ---- */
typedef struct {
    int64_t B, T, C, V;
    int32_t *ids, *tt;
    float *wte, *wpe, *wtt, *out, *dout;
} em_ctx;

static double em_loss(void *p)
{
    em_ctx *c = p;
    if (R->embedding_forward(c->out, c->ids, c->tt, c->wte, c->wpe, c->wtt, c->B, c->T, c->C, c->V, c->T, 2, 0) !=
        LP_OK)
        return NAN;
    return dotw(c->dout, c->out, c->B * c->T * c->C);
}

static void test_grad_embedding(void **state)
{
    (void)state;
    em_ctx c = {.B = 2, .T = 4, .C = 3, .V = 5};
    c.ids = kt_alloc(8 * 4), c.tt = kt_alloc(8 * 4);
    int32_t ids[8] = {1, 1, 4, 0, 2, 1, 1, 3}, tt[8] = {0, 0, 1, 1, 0, 1, 0, 1};
    memcpy(c.ids, ids, sizeof ids);
    memcpy(c.tt, tt, sizeof tt);
    c.wte = kt_rand_f(c.V * c.C, -1, 1), c.wpe = kt_rand_f(c.T * c.C, -1, 1), c.wtt = kt_rand_f(2 * c.C, -1, 1);
    c.out = kt_nan(c.B * c.T * c.C), c.dout = kt_rand_f(c.B * c.T * c.C, -1, 1);
    float *g[3] = {kt_alloc((size_t)(c.V * c.C) * 4), kt_alloc((size_t)(c.T * c.C) * 4), kt_alloc((size_t)(2 * c.C) * 4)};
    memset(g[0], 0, (size_t)(c.V * c.C) * 4);
    memset(g[1], 0, (size_t)(c.T * c.C) * 4);
    memset(g[2], 0, (size_t)(2 * c.C) * 4);
    R->embedding_backward(g[0], g[1], g[2], c.dout, c.ids, c.tt, c.B, c.T, c.C, 0);
    int bad = fd_check("embedding dwte", em_loss, &c, c.wte, c.V * c.C, g[0]);
    bad += fd_check("embedding dwpe", em_loss, &c, c.wpe, c.T * c.C, g[1]);
    bad += fd_check("embedding dwtt", em_loss, &c, c.wtt, 2 * c.C, g[2]);
    bad += kt_release("embedding");
    assert_int_equal(bad, 0);
}

/* ---- AdamW against torch.optim.AdamW (values printed by PyTorch 2.x for this exact
 * sequence: lr 0.1, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01). Step 1 of element 0
 * by hand: p = 1 * (1 - 0.001) = 0.999; m = 0.05; v = 0.00025; step size 0.1 / 0.1 = 1;
 * denom = sqrt(0.00025) / sqrt(0.001) + 1e-8 = 0.5; p = 0.999 - 0.05 / 0.5 = 0.899. */
static void test_adamw_torch(void **state)
{
    (void)state;
    static const float grads[3][4] = {{0.5f, -0.25f, 1e-3f, 0.0f}, {-0.25f, 0.5f, -2.0f, 1.0f}, {0.125f, 0.0f, 3.0f, -1.0f}};
    static const float want_p[3][4] = {
        {0.8990000486373901f, -0.3995000123977661f, 1.8980010747909546f, 0.0f},
        {0.8714673519134521f, -0.4357108473777771f, 1.9704833030700684f, -0.07441367954015732f},
        {0.8365529775619507f, -0.4635750353336334f, 1.9472342729568481f, -0.06982103735208511f}};
    static const float want_m[4] = {0.030500000342726707f, 0.0247499980032444f, 0.12008100003004074f, -0.010000002570450306f};
    static const float want_v[4] = {0.0003275627677794546f, 0.00031212507747113705f, 0.012996001169085503f,
                                    0.0019990000873804092f};
    for (int impl = 0; impl < 2; impl++) {
        const lp_kernel_table *t = lp_kernels_table((lp_kernels_impl)impl);
        float p[4] = {1.0f, -0.5f, 2.0f, 0.0f}, m[4] = {0}, v[4] = {0};
        for (int s = 0; s < 3; s++) {
            t->adamw_step(p, grads[s], m, v, 4, 0.1, 0.9, 0.999, 1e-8, 0.01, s + 1);
            for (int i = 0; i < 4; i++)
                assert_float_equal(p[i], want_p[s][i], 2e-7 + 1e-6 * fabsf(want_p[s][i]));
        }
        for (int i = 0; i < 4; i++) {
            assert_float_equal(m[i], want_m[i], 1e-6 * fabsf(want_m[i]) + 1e-12);
            assert_float_equal(v[i], want_v[i], 1e-6 * fabsf(want_v[i]) + 1e-12);
        }
    }
}

/* ---- global norm clipping (torch.nn.utils.clip_grad_norm_ semantics) ---- */
static void test_grad_clip(void **state)
{
    (void)state;
    float a[3] = {3.0f, 0.0f, 0.0f}, b[2] = {0.0f, 4.0f};
    float *gs[2] = {a, b};
    int64_t sizes[2] = {3, 2};
    assert_float_equal(lp_grad_norm(gs, sizes, 2), 5.0, 1e-12);
    double n = lp_grad_clip(gs, sizes, 2, 10.0); /* below the limit: untouched */
    assert_float_equal(n, 5.0, 1e-12);
    assert_float_equal(a[0], 3.0f, 0);
    n = lp_grad_clip(gs, sizes, 2, 1.0);
    assert_float_equal(n, 5.0, 1e-12);
    assert_float_equal(a[0], 3.0f / (5.0f + 1e-6f), 1e-7);
    assert_float_equal(b[1], 4.0f / (5.0f + 1e-6f), 1e-7);
    assert_float_equal(lp_grad_norm(gs, sizes, 2), 1.0, 1e-6);
    b[0] = NAN; /* a non-finite norm is reported and nothing is scaled */
    n = lp_grad_clip(gs, sizes, 2, 1.0);
    assert_true(isnan(n));
    assert_float_equal(b[1], 4.0f / (5.0f + 1e-6f), 1e-7);
}

/* ---- decoder ops: RMSNorm, SwiGLU, RoPE (through the lp_* wrappers, reference table) ---- */
typedef struct {
    int64_t N, C;
    float *x, *w, *out, *rstd, *dout;
} rms_ctx;

static double rms_loss(void *p)
{
    rms_ctx *c = p;
    lp_rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->N, c->C, 1e-6f);
    return dotw(c->dout, c->out, c->N * c->C);
}

static void test_grad_rmsnorm(void **state)
{
    (void)state;
    lp_kernels_select(LP_KERNELS_IMPL_REF);
    rms_ctx c = {.N = 4, .C = 9};
    c.x = kt_rand_f(c.N * c.C, -2, 2), c.w = kt_rand_f(c.C, 0.5f, 1.5f);
    c.out = kt_nan(c.N * c.C), c.rstd = kt_nan(c.N), c.dout = kt_rand_f(c.N * c.C, -1, 1);
    float *dx = kt_nan(c.N * c.C), *dw = kt_alloc((size_t)c.C * 4);
    memset(dw, 0, (size_t)c.C * 4);
    rms_loss(&c);
    lp_rmsnorm_backward(dx, dw, c.dout, c.x, c.w, c.rstd, c.N, c.C);
    int bad = fd_check("rmsnorm dinp", rms_loss, &c, c.x, c.N * c.C, dx);
    bad += fd_check("rmsnorm dweight", rms_loss, &c, c.w, c.C, dw);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    bad += kt_release("rmsnorm");
    assert_int_equal(bad, 0);
}

/* gate and up as the two halves of one padded (N, 2F+2) buffer */
typedef struct {
    int64_t N, F, ld;
    float *gu, *out, *dout;
} sw_ctx;

static double sw_loss(void *p)
{
    sw_ctx *c = p;
    lp_swiglu_forward(c->out, c->gu, c->gu + c->F, c->N, c->F, c->ld);
    return dotw(c->dout, c->out, c->N * c->F);
}

static void test_grad_swiglu(void **state)
{
    (void)state;
    lp_kernels_select(LP_KERNELS_IMPL_REF);
    sw_ctx c = {.N = 3, .F = 7, .ld = 16};
    c.gu = kt_rand_f(c.N * c.ld, -4, 4), c.out = kt_nan(c.N * c.F), c.dout = kt_rand_f(c.N * c.F, -1, 1);
    float *g = kt_alloc((size_t)(c.N * c.ld) * 4);
    memset(g, 0, (size_t)(c.N * c.ld) * 4); /* the padding columns have zero gradient */
    lp_swiglu_backward(g, g + c.F, c.dout, c.gu, c.gu + c.F, c.N, c.F, c.ld);
    int bad = fd_check("swiglu dgate, dup", sw_loss, &c, c.gu, c.N * c.ld, g);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    bad += kt_release("swiglu");
    assert_int_equal(bad, 0);
}

/* RoPE on q heads inside a padded row (ld > H*D), attention factor 1.3 (so the backward is
 * the transpose, not the inverse); the loss reads the whole buffer, padding included. */
typedef struct {
    int64_t N, H, D, ld;
    float *x, *y, *cos, *sin, *dout;
} rp_ctx;

static double rp_loss(void *p)
{
    rp_ctx *c = p;
    memcpy(c->y, c->x, (size_t)(c->N * c->ld) * 4);
    lp_rope_forward(c->y, c->cos, c->sin, c->N, c->H, c->D, c->ld);
    return dotw(c->dout, c->y, c->N * c->ld);
}

static void test_grad_rope(void **state)
{
    (void)state;
    lp_kernels_select(LP_KERNELS_IMPL_REF);
    rp_ctx c = {.N = 3, .H = 2, .D = 8, .ld = 19};
    int32_t pos[3] = {0, 5, 1000};
    float inv[4];
    assert_int_equal(lp_rope_inv_freq(inv, c.D, 10000.0, NULL, NULL), LP_OK);
    c.cos = kt_nan(c.N * c.D / 2), c.sin = kt_nan(c.N * c.D / 2);
    lp_rope_cache(c.cos, c.sin, pos, inv, 1.3f, c.N, c.D);
    c.x = kt_rand_f(c.N * c.ld, -1, 1), c.y = kt_nan(c.N * c.ld), c.dout = kt_rand_f(c.N * c.ld, -1, 1);
    float *dx = kt_copy(c.dout, c.N * c.ld);
    lp_rope_backward(dx, c.cos, c.sin, c.N, c.H, c.D, c.ld);
    int bad = fd_check("rope dx", rp_loss, &c, c.x, c.N * c.ld, dx);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    bad += kt_release("rope");
    assert_int_equal(bad, 0);
}

int main(void)
{
    int isa_rc = kt_isa_init();
    if (isa_rc)
        return isa_rc;
    lp_threads_init();
    R = lp_kernels_table(LP_KERNELS_IMPL_REF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_matmul),    cmocka_unit_test(test_grad_layernorm),
        cmocka_unit_test(test_grad_elementwise), cmocka_unit_test(test_grad_attention),
        cmocka_unit_test(test_grad_cross_entropy), cmocka_unit_test(test_grad_embedding),
        cmocka_unit_test(test_adamw_torch),    cmocka_unit_test(test_grad_clip),
        cmocka_unit_test(test_grad_rmsnorm),   cmocka_unit_test(test_grad_swiglu),
        cmocka_unit_test(test_grad_rope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
