/* Quantized GEMM and LoRA linear: optimized (panel-fused) against reference (loops) against
 * eager (separate ops), forward and backward, over odd shapes (M, K, N not multiples of 64,
 * K not a multiple of the NF4 block so blocks cross rows), ranks 1/4/8/16, with and without
 * dropout, f32/int8/NF4 bases; guard bytes and NaN-filled outputs; finite-difference checks
 * of the LoRA backward; int8 round-trip bounds; memory accounting; argument errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static const lp_kernel_table *R, *O;

/* kind: 0 = f32, 1 = int8, 2 = NF4, 3 = NF4 + double quant */
static void make_base(int kind, const float *w, int64_t OC, int64_t C, lp_qweight *q, lp_lora_base *b,
                      const float *bias)
{
    memset(b, 0, sizeof *b);
    b->bias = bias;
    if (kind == 0) {
        b->weight = w;
        return;
    }
    assert_int_equal(
        lp_qweight_quantize(q, kind == 1 ? LP_DTYPE_INT8 : LP_DTYPE_NF4, w, OC, C, kind == 3, "test"), LP_OK);
    b->q = q;
}

static int run_qgemm(int64_t N, int64_t C, int64_t OC, int kind)
{
    lp_qweight q;
    lp_lora_base b;
    float *w = kt_rand_f(OC * C, -1, 1), *bias = kt_rand_f(OC, -1, 1), *x = kt_rand_f(N * C, -1, 1);
    float *dout = kt_rand_f(N * OC, -1, 1);
    make_base(kind, w, OC, C, &q, &b, bias);
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *o2 = kt_nan(N * OC);
    float *d0 = kt_nan(N * C), *d1 = kt_nan(N * C), *d2 = kt_nan(N * C);
    int f = 0;
    f += R->qmatmul_forward(o0, x, &q, bias, N, C, OC) != LP_OK;
    f += O->qmatmul_forward(o1, x, &q, bias, N, C, OC) != LP_OK;
    f += lp_qmatmul_forward_eager(o2, x, &q, bias, N, C, OC) != LP_OK;
    f += R->qmatmul_backward(d0, dout, &q, N, C, OC) != LP_OK;
    f += O->qmatmul_backward(d1, dout, &q, N, C, OC) != LP_OK;
    f += lp_qmatmul_backward_eager(d2, dout, &q, N, C, OC) != LP_OK;
    char what[96];
    snprintf(what, sizeof what, "qmatmul kind %d [%lld,%lld,%lld]", kind, (long long)N, (long long)C,
             (long long)OC);
    f += kt_close(what, o1, o0, N * OC, 1e-5 * C, 1e-5);
    f += kt_close(what, o2, o0, N * OC, 1e-5 * C, 1e-5);
    f += kt_close(what, d1, d0, N * C, 1e-5 * OC, 1e-5);
    f += kt_close(what, d2, d0, N * C, 1e-5 * OC, 1e-5);
    /* the dequantized panels equal the whole-weight dequantization, element for element */
    float *full0 = kt_nan(OC * C), *full1 = kt_nan(OC * C);
    R->qweight_dequantize(full0, &q, 0, OC * C);
    O->qweight_dequantize(full1, &q, 0, OC * C);
    f += kt_close("dequantize opt vs ref", full1, full0, OC * C, 0, 0);
    lp_qweight_free(&q);
    return f + kt_release(what);
}

static void test_qgemm_table(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 1},     {3, 17, 5},     {5, 64, 64},    {17, 63, 129},
                                        {70, 130, 33}, {33, 200, 300}, {129, 96, 1000},
                                        /* several slabs each way (qgemm.c cuts at 256), rows not
                                           block-aligned */
                                        {40, 600, 300}, {9, 1000, 1100}};
    int f = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int kind = 1; kind <= 3; kind++)
            f += run_qgemm(shapes[s][0], shapes[s][1], shapes[s][2], kind);
    assert_int_equal(f, 0);
}

/* LoRA: ref vs opt vs eager, forward then backward, same dropout mask everywhere. */
static int run_lora(int64_t N, int64_t C, int64_t OC, int64_t r, int kind, float p)
{
    lp_qweight q;
    lp_lora_base b;
    float *w = kt_rand_f(OC * C, -0.5f, 0.5f), *bias = kt_rand_f(OC, -1, 1), *x = kt_rand_f(N * C, -1, 1);
    float *A = kt_rand_f(r * C, -0.5f, 0.5f), *B = kt_rand_f(OC * r, -0.5f, 0.5f),
          *dout = kt_rand_f(N * OC, -1, 1);
    make_base(kind, w, OC, C, &q, &b, kind == 2 ? NULL : bias);
    float s = 2.0f / (float)r;
    float *y[3], *u[3], *dx[3], *dA[3], *dB[3];
    uint8_t *keep[3];
    float *dA0 = kt_rand_f(r * C, -1, 1), *dB0 = kt_rand_f(OC * r, -1, 1);
    int f = 0;
    for (int v = 0; v < 3; v++) {
        y[v] = kt_nan(N * OC), u[v] = kt_nan(N * r), dx[v] = kt_nan(N * C);
        dA[v] = kt_copy(dA0, r * C), dB[v] = kt_copy(dB0, OC * r);
        keep[v] = kt_alloc((size_t)(N * C));
        memset(keep[v], 0xCC, (size_t)(N * C));
        lp_rng rng;
        lp_rng_init(&rng, 7, LP_RNG_STREAM_DROPOUT);
        lp_status st;
        if (v == 0)
            st = R->lora_forward(y[v], u[v], keep[v], x, &b, A, B, s, p, &rng, N, C, OC, r);
        else if (v == 1)
            st = O->lora_forward(y[v], u[v], keep[v], x, &b, A, B, s, p, &rng, N, C, OC, r);
        else
            st = lp_lora_forward_eager(y[v], u[v], keep[v], x, &b, A, B, s, p, &rng, N, C, OC, r);
        f += st != LP_OK;
        f += rng.offset != (p > 0.0f ? (uint64_t)((N * C + 3) / 4) : 0);
        if (v == 0)
            st = R->lora_backward(dx[v], dA[v], dB[v], dout, x, u[v], keep[v], &b, A, B, s, p, N, C, OC, r);
        else if (v == 1)
            st = O->lora_backward(dx[v], dA[v], dB[v], dout, x, u[v], keep[v], &b, A, B, s, p, N, C, OC, r);
        else
            st = lp_lora_backward_eager(dx[v], dA[v], dB[v], dout, x, u[v], keep[v], &b, A, B, s, p, N, C, OC,
                                        r);
        f += st != LP_OK;
    }
    char what[128];
    snprintf(what, sizeof what, "lora kind %d p %g r %lld [%lld,%lld,%lld]", kind, (double)p, (long long)r,
             (long long)N, (long long)C, (long long)OC);
    for (int v = 1; v < 3; v++) {
        if (p > 0.0f && memcmp(keep[v], keep[0], (size_t)(N * C))) {
            fprintf(stderr, "  %s: dropout masks differ (version %d)\n", what, v);
            f++;
        }
        f += kt_close(what, u[v], u[0], N * r, 1e-5 * C, 1e-5);
        f += kt_close(what, y[v], y[0], N * OC, 1e-5 * (C + r), 1e-5);
        f += kt_close(what, dx[v], dx[0], N * C, 1e-5 * (OC + r), 1e-5);
        f += kt_close(what, dA[v], dA[0], r * C, 1e-5 * N, 1e-5);
        f += kt_close(what, dB[v], dB[0], OC * r, 1e-5 * N, 1e-5);
    }
    if (kind)
        lp_qweight_free(&q);
    return f + kt_release(what);
}

static size_t lora_shapes = 5; /* the one-thread rerun keeps to the small ones (ASan time) */

static void test_lora_table(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 3, 2}, {7, 17, 5}, {65, 70, 33}, {64, 64, 64}, {130, 96, 129},
                                        {50, 520, 600}};
    static const int64_t ranks[] = {1, 4, 8, 16};
    int f = 0;
    for (size_t s = 0; s < lora_shapes; s++)
        for (int ri = 0; ri < 4; ri++)
            for (int kind = 0; kind <= 3; kind++)
                for (int pi = 0; pi < 2; pi++)
                    f += run_lora(shapes[s][0], shapes[s][1], shapes[s][2], ranks[ri], kind,
                                  pi ? 0.25f : 0.0f);
    assert_int_equal(f, 0);
}

static void test_tables_one_thread(void **state)
{
    int t = lp_threads_get();
    lp_threads_set(1);
    test_qgemm_table(state);
    lora_shapes = 3;
    test_lora_table(state);
    lora_shapes = 5;
    lp_threads_set(t);
}

/* ---- finite differences of the LoRA backward (reference kernels, fixed mask) ---- */
typedef struct {
    int64_t N, C, OC, r;
    float s, p;
    float *x, *A, *B, *y, *u, *dout;
    uint8_t *keep;
    lp_lora_base *b;
} lo_ctx;

static double lo_loss(lo_ctx *c)
{
    /* the same mask every time: re-seed the generator */
    lp_rng rng;
    lp_rng_init(&rng, 11, LP_RNG_STREAM_DROPOUT);
    assert_int_equal(R->lora_forward(c->y, c->u, c->keep, c->x, c->b, c->A, c->B, c->s, c->p, &rng, c->N,
                                     c->C, c->OC, c->r),
                     LP_OK);
    double L = 0;
    for (int64_t i = 0; i < c->N * c->OC; i++)
        L += (double)c->dout[i] * c->y[i];
    return L;
}

static int fd(const char *what, lo_ctx *c, float *x, int64_t n, const float *g)
{
    const float h = 1e-2f;
    int bad = 0;
    for (int64_t i = 0; i < n; i += (n > 40 ? n / 40 : 1)) {
        float x0 = x[i];
        x[i] = x0 + h;
        double lp = lo_loss(c);
        x[i] = x0 - h;
        double lm = lo_loss(c);
        x[i] = x0;
        double num = (lp - lm) / (2.0 * h);
        if (!(fabs(num - g[i]) <= 2e-3 + 2e-2 * fabs(g[i]))) {
            fprintf(stderr, "  %s[%lld]: analytic %.6g numeric %.6g\n", what, (long long)i, (double)g[i],
                    num);
            bad++;
        }
    }
    return bad;
}

static void test_lora_grad(void **state)
{
    (void)state;
    int bad = 0;
    for (int kind = 0; kind <= 3; kind += 3)
        for (int pi = 0; pi < 2; pi++) {
            lo_ctx c = {.N = 5, .C = 70, .OC = 6, .r = 4, .s = 0.5f, .p = pi ? 0.3f : 0.0f};
            lp_qweight q;
            lp_lora_base b;
            float *w = kt_rand_f(c.OC * c.C, -1, 1), *bias = kt_rand_f(c.OC, -1, 1);
            make_base(kind, w, c.OC, c.C, &q, &b, bias);
            c.b = &b;
            c.x = kt_rand_f(c.N * c.C, -1, 1), c.A = kt_rand_f(c.r * c.C, -1, 1),
            c.B = kt_rand_f(c.OC * c.r, -1, 1);
            c.y = kt_nan(c.N * c.OC), c.u = kt_nan(c.N * c.r), c.dout = kt_rand_f(c.N * c.OC, -1, 1);
            c.keep = kt_alloc((size_t)(c.N * c.C));
            float *dx = kt_nan(c.N * c.C), *dA = kt_alloc((size_t)(c.r * c.C) * 4),
                  *dB = kt_alloc((size_t)(c.OC * c.r) * 4);
            memset(dA, 0, (size_t)(c.r * c.C) * 4);
            memset(dB, 0, (size_t)(c.OC * c.r) * 4);
            lo_loss(&c);
            assert_int_equal(R->lora_backward(dx, dA, dB, c.dout, c.x, c.u, c.keep, &b, c.A, c.B, c.s, c.p,
                                              c.N, c.C, c.OC, c.r),
                             LP_OK);
            bad += fd("lora dx", &c, c.x, c.N * c.C, dx);
            bad += fd("lora dA", &c, c.A, c.r * c.C, dA);
            bad += fd("lora dB", &c, c.B, c.OC * c.r, dB);
            if (kind)
                lp_qweight_free(&q);
            bad += kt_release("lora grad");
        }
    assert_int_equal(bad, 0);
}

/* ---- int8 round trip, sizes, memory categories, errors ---- */
static void test_int8_round_trip(void **state)
{
    (void)state;
    int64_t OC = 37, C = 131;
    float *w = kt_rand_f(OC * C, -2, 2);
    for (int64_t i = 0; i < C; i++)
        w[5 * C + i] = 0.0f; /* an all-zero row: scale 0, exact zeros back */
    w[7 * C + 3] = 1e4f;     /* an outlier only hurts its own row */
    lp_qweight q;
    assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_INT8, w, OC, C, false, "int8"), LP_OK);
    float *d = kt_nan(OC * C);
    lp_qweight_dequantize(d, &q, 0, OC * C);
    int bad = 0;
    for (int64_t o = 0; o < OC; o++) {
        float am = 0;
        for (int64_t i = 0; i < C; i++)
            am = fmaxf(am, fabsf(w[o * C + i]));
        for (int64_t i = 0; i < C; i++) {
            /* half a step of rounding plus a few ulps of the scale */
            double err = fabs((double)d[o * C + i] - w[o * C + i]),
                   bound = am / 127.0 * 0.5 * (1 + 1e-5) + 1e-30;
            if (err > bound) {
                if (!bad)
                    fprintf(stderr, "  int8 [%lld,%lld]: %g vs %g (bound %g)\n", (long long)o, (long long)i,
                            (double)d[o * C + i], (double)w[o * C + i], bound);
                bad++;
            }
        }
        assert_true(q.q[o * C] >= -127);
    }
    for (int64_t i = 0; i < C; i++)
        bad += d[5 * C + i] != 0.0f;
    assert_int_equal(bad, 0);
    assert_true(fabs(lp_qweight_bytes_per_param(&q) - (1.0 + 4.0 / C)) < 0.02);
    lp_qweight_free(&q);
    assert_int_equal(kt_release("int8"), 0);
}

static void test_memory_accounting(void **state)
{
    (void)state;
    int64_t OC = 768, C = 768;
    float *w = kt_rand_f(OC * C, -0.1f, 0.1f);
    lp_alloc_stats s0, s1, s2;
    lp_alloc_stats_get(&s0);
    lp_qweight q, q2;
    assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_NF4, w, OC, C, true, "nf4 dq"), LP_OK);
    lp_alloc_stats_get(&s1);
    uint64_t qb = s1.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT] - s0.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT];
    assert_int_equal(qb, lp_qweight_nbytes(&q));
    assert_int_equal(s1.live[LP_MEM_CATEGORY_TEMPORARY],
                     s0.live[LP_MEM_CATEGORY_TEMPORARY]); /* scratch freed */
    double bpp = lp_qweight_bytes_per_param(&q);
    fprintf(stderr, "  NF4+DQ 768x768: %.5f bytes/param\n", bpp);
    assert_true(bpp > 0.5 && bpp < 0.5 + 1.0 / 64 + 0.001); /* codes + 8-bit absmax + nested + padding */
    assert_int_equal(lp_qweight_quantize(&q2, LP_DTYPE_NF4, w, OC, C, false, "nf4"), LP_OK);
    assert_true(fabs(lp_qweight_bytes_per_param(&q2) - (0.5 + 4.0 / 64)) < 0.001);
    /* the fused GEMM's temporaries are panels, far below an f32 copy of W; all freed */
    float *x = kt_rand_f(256 * C, -1, 1), *y = kt_nan(256 * OC);
    lp_alloc_stats_reset_peak();
    lp_alloc_stats_get(&s1);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_int_equal(lp_qmatmul_forward(y, x, &q, NULL, 256, C, OC), LP_OK);
    lp_alloc_stats_get(&s2);
    uint64_t tmp_peak = s2.peak[LP_MEM_CATEGORY_TEMPORARY] - s1.live[LP_MEM_CATEGORY_TEMPORARY];
    assert_true(tmp_peak < (uint64_t)(OC * C * 4) / 2);
    assert_int_equal(s2.live[LP_MEM_CATEGORY_TEMPORARY], s1.live[LP_MEM_CATEGORY_TEMPORARY]);
    /* the eager path holds the whole f32 weight as a temporary, by design */
    lp_alloc_stats_reset_peak();
    assert_int_equal(lp_qmatmul_forward_eager(y, x, &q, NULL, 256, C, OC), LP_OK);
    lp_alloc_stats_get(&s2);
    assert_true(s2.peak[LP_MEM_CATEGORY_TEMPORARY] - s1.live[LP_MEM_CATEGORY_TEMPORARY] >=
                (uint64_t)(OC * C * 4));
    lp_qweight_free(&q);
    lp_qweight_free(&q2);
    lp_alloc_stats_get(&s2);
    assert_int_equal(s2.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT], s0.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT]);
    assert_int_equal(kt_release("memory"), 0);
}

static void test_errors(void **state)
{
    (void)state;
    float w[6] = {1, 2, 3, 4, NAN, 6};
    lp_qweight q;
    assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_NF4, w, 2, 3, true, "bad"), LP_STATUS_NUMERIC);
    assert_non_null(strstr(lp_err_msg(), "[1, 1]"));
    assert_null(q.mem);
    assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_F32, w, 2, 3, false, "bad"), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_INT8, w, 0, 3, false, "bad"), LP_STATUS_INVALID_ARG);
    w[4] = 5;
    assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_NF4, w, 2, 3, true, "ok"), LP_OK);
    float out[6], x[3] = {1, 1, 1}, A[3] = {1, 1, 1}, B[2] = {1, 1}, u[1];
    assert_int_equal(lp_qmatmul_forward(out, x, &q, NULL, 1, 2, 3), LP_STATUS_INVALID_ARG);
    lp_lora_base none = {0}, both = {.weight = w, .q = &q}, ok = {.q = &q};
    assert_int_equal(lp_lora_forward(out, u, NULL, x, &none, A, B, 1, 0, NULL, 1, 3, 2, 1),
                     LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_lora_forward(out, u, NULL, x, &both, A, B, 1, 0, NULL, 1, 3, 2, 1),
                     LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_lora_forward(out, u, NULL, x, &ok, A, B, 1, 0.5f, NULL, 1, 3, 2, 1),
                     LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_lora_forward(out, u, NULL, x, &ok, A, B, 1, 1.0f, NULL, 1, 3, 2, 1),
                     LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_lora_forward(out, u, NULL, x, &ok, A, B, 1, 0.0f, NULL, 1, 3, 2, 1), LP_OK);
    /* failing allocations are reported, not crashed on (eager temporaries) */
    lp_alloc_fail_at(1);
    assert_int_equal(lp_qmatmul_forward_eager(out, x, &q, NULL, 1, 3, 2), LP_STATUS_NO_MEMORY);
    lp_alloc_fail_at(0);
    lp_qweight_free(&q);
    lp_qweight_free(&q); /* safe on a zeroed struct */
}

/* ---- profiler: fused ops are one range each with their FLOPs; eager shows every step ---- */
typedef struct {
    int lora_fwd, lora_bwd, nf4_mm, nf4_deq, mm, add, mul, qmem;
    double lora_fwd_flops;
    int64_t lora_dims[4];
} seen;

static lp_status on_ready(const lp_prof_events *ev, void *user)
{
    seen *s = user;
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (!strcmp(e->name, "lp::lora_linear_forward")) {
            s->lora_fwd++;
            s->lora_fwd_flops = e->flops;
            if (e->n_inputs == 1 && e->input_ranks[0] == 4)
                memcpy(s->lora_dims, e->input_dims, sizeof s->lora_dims);
        } else if (!strcmp(e->name, "lp::lora_linear_backward"))
            s->lora_bwd++;
        else if (!strcmp(e->name, "lp::nf4_matmul_forward"))
            s->nf4_mm++;
        else if (!strcmp(e->name, "lp::nf4_dequantize"))
            s->nf4_deq++;
        else if (!strcmp(e->name, "lp::matmul_forward"))
            s->mm++;
        else if (!strcmp(e->name, "lp::add"))
            s->add++;
        else if (!strcmp(e->name, "lp::mul"))
            s->mul++;
        else if (!strcmp(e->name, "[memory]") && e->mem_category == LP_MEM_CATEGORY_QUANTIZED_WEIGHT &&
                 e->mem_bytes > 0)
            s->qmem++;
    }
    return LP_OK;
}

static void test_profiler_records(void **state)
{
    (void)state;
    seen s = {0};
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.record_shapes = cfg.profile_memory = cfg.with_flops = 1;
    cfg.on_trace_ready = on_ready;
    cfg.user = &s;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    enum { N = 9, C = 70, OC = 33, r = 4 };
    float *w = kt_rand_f(OC * C, -1, 1), *x = kt_rand_f(N * C, -1, 1), *A = kt_rand_f(r * C, -1, 1);
    float *B = kt_rand_f(OC * r, -1, 1), *y = kt_nan(N * OC), *u = kt_nan(N * r),
          *dy = kt_rand_f(N * OC, -1, 1);
    float *dx = kt_nan(N * C), *dA = kt_rand_f(r * C, 0, 0), *dB = kt_rand_f(OC * r, 0, 0);
    lp_qweight q;
    assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_NF4, w, OC, C, true, "prof"), LP_OK);
    lp_lora_base b = {.q = &q};
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_int_equal(lp_lora_forward(y, u, NULL, x, &b, A, B, 2.0f, 0.0f, NULL, N, C, OC, r), LP_OK);
    assert_int_equal(lp_lora_backward(dx, dA, dB, dy, x, u, NULL, &b, A, B, 2.0f, 0.0f, N, C, OC, r), LP_OK);
    assert_int_equal(lp_qmatmul_forward(y, x, &q, NULL, N, C, OC), LP_OK);
    assert_int_equal(lp_lora_forward_eager(y, u, NULL, x, &b, A, B, 2.0f, 0.0f, NULL, N, C, OC, r), LP_OK);
    lp_qweight_free(&q);
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_int_equal(kt_release("prof"), 0);
    assert_int_equal(s.lora_fwd, 1);
    assert_int_equal(s.lora_bwd, 1);
    assert_int_equal(s.nf4_mm, 1);
    assert_float_equal(s.lora_fwd_flops, 2.0 * N * C * OC + 2.0 * N * C * r + 2.0 * N * r * OC + 2.0 * N * OC,
                       0);
    assert_int_equal(s.lora_dims[0], N);
    assert_int_equal(s.lora_dims[3], r);
    /* eager: dequantize, then three matmuls (lora_A, lora_B, base), the scale and the add */
    assert_int_equal(s.nf4_deq, 1);
    assert_int_equal(s.mm, 3);
    assert_int_equal(s.mul, 1);
    assert_int_equal(s.add, 1);
    assert_int_equal(s.qmem, 1);
}

int main(void)
{
    int isa_rc = kt_isa_init();
    if (isa_rc)
        return isa_rc;
    R = lp_kernels_table(LP_KERNELS_IMPL_REF);
    O = lp_kernels_table(LP_KERNELS_IMPL_OPT);
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qgemm_table),
        cmocka_unit_test(test_lora_table),
        cmocka_unit_test(test_tables_one_thread),
        cmocka_unit_test(test_lora_grad),
        cmocka_unit_test(test_int8_round_trip),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_profiler_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
