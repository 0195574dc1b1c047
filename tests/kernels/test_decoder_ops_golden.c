/* The decoder ops against transformers (tests/golden/decoder_ops, written by
 * tools/golden/gen_decoder_ops.py): LlamaRMSNorm, silu(gate) * up, and LlamaRotaryEmbedding +
 * apply_rotary_pos_emb for every rope_scaling type loupe takes -- forward and autograd
 * backward, through both kernel tables. Each comparison prints its largest difference; the
 * bounds are a few times the float32-vs-float64 noise that golden.json records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "loupe/io.h"

#define GOLDEN "tests/golden/decoder_ops/golden.safetensors"

static lp_st_file *G;

static const lp_st_tensor *need(const char *prefix, const char *name, lp_st_dtype dt)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", prefix, name);
    const lp_st_tensor *t = lp_st_find(G, key);
    if (!t)
        fprintf(stderr, "  missing tensor %s\n", key);
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    return t;
}

static const float *f32(const char *prefix, const char *name)
{
    return need(prefix, name, LP_ST_DTYPE_F32)->data;
}

/* |got - want| <= atol + rtol * |want| everywhere (no NaN); prints the largest difference and
 * its ratio to the bound. Returns 1 on failure. */
static int cmp(const char *what, const char *impl, const float *got, const float *want, int64_t n,
               double atol, double rtol)
{
    double worst = 0.0, maxabs = 0.0;
    int64_t wi = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i])) {
            fprintf(stderr, "  %s (%s): NaN at %lld (got %g, want %g)\n", what, impl, (long long)i,
                    (double)got[i], (double)want[i]);
            return 1;
        }
        double d = fabs((double)got[i] - want[i]), e = d / (atol + rtol * fabs((double)want[i]));
        maxabs = d > maxabs ? d : maxabs;
        if (e > worst)
            worst = e, wi = i;
    }
    fprintf(stderr, "  %-28s %s: max |diff| %.3g, worst %.2f of the bound (element %lld: %.9g vs %.9g)\n",
            what, impl, maxabs, worst, (long long)wi, (double)got[wi], (double)want[wi]);
    return worst > 1.0;
}

/* ---- RMSNorm: f32 noise out ~1e-7 relative, rstd ~1e-7, dinp ~2e-6, dweight ~1e-5
 * elementwise (dweight sums rows of different sign); bounds: out, rstd 2e-6 relative; dinp
 * 1e-5 of the row's rstd (its natural scale) + 1e-5 relative; dweight 1e-6 absolute + 1e-5. */
static void test_rmsnorm_golden(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        float eps;
    } cases[] = {{"rms_96", 1e-6f}, {"rms_896", 1e-6f}, {"rms_7", 1e-5f}};
    int bad = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *p = cases[k].name;
        const lp_st_tensor *xt = need(p, "x", LP_ST_DTYPE_F32);
        int64_t N = xt->shape[0], C = xt->shape[1];
        const float *x = xt->data, *w = f32(p, "weight"), *dout = f32(p, "dout");
        for (int impl = 0; impl < 2; impl++) {
            lp_kernels_select(impl ? LP_KERNELS_IMPL_OPT : LP_KERNELS_IMPL_REF);
            const char *in = impl ? "opt" : "ref";
            float *out = kt_nan(N * C), *rstd = kt_nan(N), *dx = kt_nan(N * C), *dw = kt_alloc((size_t)C * 4);
            memset(dw, 0, (size_t)C * 4);
            lp_rmsnorm_forward(out, rstd, x, w, N, C, cases[k].eps);
            lp_rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C);
            char what[64];
            snprintf(what, sizeof what, "%s out", p);
            bad += cmp(what, in, out, f32(p, "out"), N * C, 1e-30, 2e-6);
            snprintf(what, sizeof what, "%s rstd", p);
            bad += cmp(what, in, rstd, f32(p, "rstd"), N, 1e-30, 2e-6);
            const float *want = f32(p, "dinp");
            for (int64_t i = 0; i < N; i++) {
                snprintf(what, sizeof what, "%s dinp row %lld", p, (long long)i);
                bad += cmp(what, in, dx + i * C, want + i * C, C, 1e-5 * rstd[i], 1e-5);
            }
            snprintf(what, sizeof what, "%s dweight", p);
            bad += cmp(what, in, dw, f32(p, "dweight"), C, 1e-6, 1e-5);
            bad += kt_release(p);
        }
    }
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_int_equal(bad, 0);
}

/* ---- SwiGLU, gates up to +-1e30: f32 noise ~2e-8 relative (out, dup), dgate ~1e-7 of its
 * scale; the optimized exp adds 2e-7 relative. Bounds 1e-6 absolute + 2e-6 relative. */
static void test_swiglu_golden(void **state)
{
    (void)state;
    const lp_st_tensor *gt = need("swiglu", "gate_up", LP_ST_DTYPE_F32);
    int64_t N = gt->shape[0], F = gt->shape[1] / 2, ld = 2 * F;
    const float *gu = gt->data, *dout = f32("swiglu", "dout");
    const float *want_out = f32("swiglu", "out"), *want_dg = f32("swiglu", "dgate"),
                *want_du = f32("swiglu", "dup");
    int bad = 0;
    for (int impl = 0; impl < 2; impl++) {
        lp_kernels_select(impl ? LP_KERNELS_IMPL_OPT : LP_KERNELS_IMPL_REF);
        const char *in = impl ? "opt" : "ref";
        float *out = kt_nan(N * F), *g = kt_nan(N * ld), *dg = kt_nan(N * F), *du = kt_nan(N * F);
        lp_swiglu_forward(out, gu, gu + F, N, F, ld);
        lp_swiglu_backward(g, g + F, dout, gu, gu + F, N, F, ld);
        for (int64_t n = 0; n < N; n++) {
            memcpy(dg + n * F, g + n * ld, (size_t)F * 4);
            memcpy(du + n * F, g + n * ld + F, (size_t)F * 4);
        }
        bad += cmp("swiglu out", in, out, want_out, N * F, 1e-6, 2e-6);
        bad += cmp("swiglu dgate", in, dg, want_dg, N * F, 1e-6, 2e-6);
        bad += cmp("swiglu dup", in, du, want_du, N * F, 1e-6, 2e-6);
        bad += kt_release("swiglu");
    }
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_int_equal(bad, 0);
}

/* ---- RoPE: the cases of gen_decoder_ops.py's ROPE_CASES, as loupe's lp_rope_scaling ---- */
typedef struct {
    const char *name;
    double theta;
    lp_rope_scaling s;
} rope_case;

static const rope_case rope_cases[] = {
    {"rope_default", 10000.0, {.type = LP_ROPE_TYPE_DEFAULT}},
    {"rope_default_d8", 10000.0, {.type = LP_ROPE_TYPE_DEFAULT}},
    {"rope_qwen2", 1000000.0, {.type = LP_ROPE_TYPE_DEFAULT}},
    {"rope_linear", 10000.0, {.type = LP_ROPE_TYPE_LINEAR, .factor = 2.0}},
    {"rope_llama3",
     500000.0,
     {.type = LP_ROPE_TYPE_LLAMA3,
      .factor = 8.0,
      .low_freq_factor = 1.0,
      .high_freq_factor = 4.0,
      .original_max_pos = 8192}},
    {"rope_yarn", 10000.0, {.type = LP_ROPE_TYPE_YARN, .factor = 4.0, .original_max_pos = 2048}},
    {"rope_yarn_mscale",
     10000.0,
     {.type = LP_ROPE_TYPE_YARN,
      .factor = 8.0,
      .original_max_pos = 4096,
      .beta_fast = 16.0,
      .beta_slow = 2.0,
      .mscale = 1.0,
      .mscale_all_dim = 0.5,
      .no_truncate = true}},
    {"rope_yarn_attn",
     1000000.0,
     {.type = LP_ROPE_TYPE_YARN, .factor = 4.0, .original_max_pos = 32768, .attention_factor = 1.5}},
};

/* inv_freq: transformers' float pow is not correctly rounded, so each value may be an ulp
 * off (2 ulps bound: 2.4e-7 relative); the attention factor is a double rounded to float
 * in both. Prints how many frequencies are bit-exact. */
static int check_inv_freq(const rope_case *rc, int64_t D, float *inv, float *af)
{
    int bad = lp_rope_inv_freq(inv, D, rc->theta, &rc->s, af) != LP_OK;
    const float *want = f32(rc->name, "inv_freq");
    int64_t exact = 0;
    for (int64_t i = 0; i < D / 2; i++)
        exact += inv[i] == want[i];
    fprintf(stderr, "  %s: %lld of %lld frequencies bit-exact\n", rc->name, (long long)exact,
            (long long)(D / 2));
    bad += cmp("inv_freq", "-", inv, want, D / 2, 0, 2.4e-7);
    float want_af = *f32(rc->name, "attn_factor");
    bad += cmp("attn_factor", "-", af, &want_af, 1, 0, 1.2e-7);
    return bad;
}

/* The cache from loupe's own inv_freq: an ulp of inv_freq moves the float32 angle by up to
 * pos * 2^-23 relative, which cos and sin follow; the bound is two ulps of each angle (and
 * 3e-7 for the cos/sin rounding), times the attention factor. */
static int check_own_cache(const rope_case *rc, const float *c, const float *s, const int32_t *pos,
                           const float *inv, float af, int64_t N, int64_t half)
{
    const float *wc = f32(rc->name, "cos"), *ws = f32(rc->name, "sin");
    double worst = 0.0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < half; i++) {
            double ang = fabs((double)pos[n] * inv[i]), bound = af * (3e-7 + ang * ldexp(1.0, -22));
            int64_t e = n * half + i;
            double r = fmax(fabs((double)c[e] - wc[e]), fabs((double)s[e] - ws[e])) / bound;
            worst = r > worst ? r : worst;
        }
    fprintf(stderr, "  %-28s cos/sin from loupe's inv_freq: worst %.2f of the angle-ulp bound\n", rc->name,
            worst);
    return worst > 1.0;
}

static void test_rope_golden(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t k = 0; k < sizeof rope_cases / sizeof rope_cases[0]; k++) {
        const rope_case *rc = &rope_cases[k];
        const char *p = rc->name;
        const lp_st_tensor *qt = need(p, "q", LP_ST_DTYPE_F32), *kt = need(p, "k", LP_ST_DTYPE_F32);
        const lp_st_tensor *pt = need(p, "pos", LP_ST_DTYPE_I32);
        int64_t N = qt->shape[0] * qt->shape[1], H = qt->shape[2], D = qt->shape[3], Hkv = kt->shape[2];
        int64_t half = D / 2, ld = (H + 2 * Hkv) * D; /* q, k, v of one token in one packed row */
        const int32_t *pos = pt->data;
        assert_int_equal((int64_t)pt->numel, N);
        float inv[128], af = NAN; /* not a kt_ buffer: kt_release below frees those per impl */
        assert_true(half <= 128);
        bad += check_inv_freq(rc, D, inv, &af);
        const float *ginv = f32(p, "inv_freq"), gaf = *f32(p, "attn_factor");
        for (int impl = 0; impl < 2; impl++) {
            lp_kernels_select(impl ? LP_KERNELS_IMPL_OPT : LP_KERNELS_IMPL_REF);
            const char *in = impl ? "opt" : "ref";
            float *c = kt_nan(N * half), *s = kt_nan(N * half);
            /* from transformers' own inv_freq: the same float angles, cos/sin within an ulp or so each */
            lp_rope_cache(c, s, pos, ginv, gaf, N, D);
            bad += cmp("cos", in, c, f32(p, "cos"), N * half, 3e-7 * gaf, 0);
            bad += cmp("sin", in, s, f32(p, "sin"), N * half, 3e-7 * gaf, 0);
            float *c2 = kt_nan(N * half), *s2 = kt_nan(N * half);
            lp_rope_cache(c2, s2, pos, inv, af, N, D);
            bad += check_own_cache(rc, c2, s2, pos, inv, af, N, half);
            /* rotation of q and k inside the packed row; torch rounds q*cos and rotate_half(q)*sin
             * apart, loupe may fuse them: a few ulps of |q| * attn_factor (|q| < 5) */
            float *qkv = kt_nan(N * ld), *g = kt_nan(N * ld);
            const float *q = qt->data, *kk = kt->data, *dqe = f32(p, "dq_embed"), *dke = f32(p, "dk_embed");
            for (int64_t n = 0; n < N; n++) {
                memcpy(qkv + n * ld, q + n * H * D, (size_t)(H * D) * 4);
                memcpy(qkv + n * ld + H * D, kk + n * Hkv * D, (size_t)(Hkv * D) * 4);
                memcpy(g + n * ld, dqe + n * H * D, (size_t)(H * D) * 4);
                memcpy(g + n * ld + H * D, dke + n * Hkv * D, (size_t)(Hkv * D) * 4);
            }
            lp_rope_forward(qkv, c, s, N, H, D, ld);
            lp_rope_forward(qkv + H * D, c, s, N, Hkv, D, ld);
            lp_rope_backward(g, c, s, N, H, D, ld);
            lp_rope_backward(g + H * D, c, s, N, Hkv, D, ld);
            float *got[4] = {kt_nan(N * H * D), kt_nan(N * Hkv * D), kt_nan(N * H * D), kt_nan(N * Hkv * D)};
            for (int64_t n = 0; n < N; n++) {
                memcpy(got[0] + n * H * D, qkv + n * ld, (size_t)(H * D) * 4);
                memcpy(got[1] + n * Hkv * D, qkv + n * ld + H * D, (size_t)(Hkv * D) * 4);
                memcpy(got[2] + n * H * D, g + n * ld, (size_t)(H * D) * 4);
                memcpy(got[3] + n * Hkv * D, g + n * ld + H * D, (size_t)(Hkv * D) * 4);
                for (int64_t e = (H + Hkv) * D; e < ld; e++) /* v is not touched */
                    bad += !isnan(qkv[n * ld + e]) || !isnan(g[n * ld + e]);
            }
            static const char *names[4] = {"q_embed", "k_embed", "dq", "dk"};
            for (int t = 0; t < 4; t++) {
                char what[64];
                snprintf(what, sizeof what, "%s %s", p, names[t]);
                bad += cmp(what, in, got[t], f32(p, names[t]), N * (t % 2 ? Hkv : H) * D, 2e-6 * gaf, 1e-6);
            }
            bad += kt_release(p);
        }
    }
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_int_equal(bad, 0);
}

/* Bad rope configurations are errors naming the field, never a crash or NaN frequencies. */
static void test_rope_inv_freq_errors(void **state)
{
    (void)state;
    float inv[64], af;
    lp_rope_scaling s = {.type = LP_ROPE_TYPE_DEFAULT};
    assert_int_equal(lp_rope_inv_freq(inv, 7, 10000.0, &s, &af), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "even"));
    assert_int_equal(lp_rope_inv_freq(inv, 0, 10000.0, &s, &af), LP_STATUS_INVALID_ARG);
    assert_int_equal(lp_rope_inv_freq(inv, 64, 0.5, &s, &af), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "rope_theta"));
    assert_int_equal(lp_rope_inv_freq(inv, 64, INFINITY, &s, &af), LP_STATUS_INVALID_ARG);
    s.type = LP_ROPE_TYPE_LINEAR;
    assert_int_equal(lp_rope_inv_freq(inv, 64, 10000.0, &s, &af), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "factor"));
    s = (lp_rope_scaling){.type = LP_ROPE_TYPE_LLAMA3,
                          .factor = 8.0,
                          .low_freq_factor = 1.0,
                          .high_freq_factor = 1.0,
                          .original_max_pos = 8192};
    assert_int_equal(lp_rope_inv_freq(inv, 64, 10000.0, &s, &af), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "high_freq_factor"));
    s = (lp_rope_scaling){.type = LP_ROPE_TYPE_YARN, .factor = 4.0};
    assert_int_equal(lp_rope_inv_freq(inv, 64, 10000.0, &s, &af), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "original_max_position_embeddings"));
    s = (lp_rope_scaling){.type = LP_ROPE_TYPE_DYNAMIC, .factor = 2.0};
    assert_int_equal(lp_rope_inv_freq(inv, 64, 10000.0, &s, &af), LP_STATUS_UNSUPPORTED);
    assert_non_null(strstr(lp_err_msg(), "dynamic"));
    s = (lp_rope_scaling){.type = (lp_rope_type)99};
    assert_int_equal(lp_rope_inv_freq(inv, 64, 10000.0, &s, &af), LP_STATUS_INVALID_ARG);
    /* NULL scaling = default, attention factor 1 */
    assert_int_equal(lp_rope_inv_freq(inv, 64, 10000.0, NULL, &af), LP_OK);
    assert_true(af == 1.0f && inv[0] == 1.0f);
}

static int setup(void **state)
{
    (void)state;
    return lp_st_open(GOLDEN, &G) == LP_OK ? 0 : (fprintf(stderr, "%s\n", lp_err_msg()), -1);
}

static int teardown(void **state)
{
    (void)state;
    lp_st_close(G);
    return 0;
}

int main(void)
{
    int isa_rc = kt_isa_init();
    if (isa_rc)
        return isa_rc;
    lp_threads_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_golden),
        cmocka_unit_test(test_swiglu_golden),
        cmocka_unit_test(test_rope_golden),
        cmocka_unit_test(test_rope_inv_freq_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
