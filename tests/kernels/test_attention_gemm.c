/* Attention as GEMMs (src/kernels/attn_gemm.h): the composition the CUDA backend runs on the
 * tensor cores, here over the CPU's steps, against the fused reference
 * (attention_fused_ref.c) on every lp_attn_geom feature: GQA, packed qkv strides, causal,
 * window, right / left padding (rows that see no key), segments, scale, Philox dropout.
 *
 * Tolerances (|got - ref| <= atol + rtol |ref|):
 *  - f32 GEMMs (the ref table's sgemm, double accumulation; the optimized one, OpenBLAS):
 *    1e-5 + 1e-5 |ref| on out, lse, dq, dk, dv. Both sides compute the same f32 scores and
 *    probabilities, in another order (the reference streams keys with an online softmax);
 *    inputs in [-1, 1], T <= 70, so sums of <= 70 O(1) terms: a few ulps of 1e-7.
 *  - TF32 GEMMs as the tensor cores run them (each operand truncated to 10 mantissa bits, f32
 *    accumulation): no tolerance of its own, it measures the error the GPU test
 *    (test_cuda_nn, TF32 path) allows, and fails when the measure comes within a factor 3 of
 *    that allowance (so the GPU bound has room for cuBLAS's accumulation order and for the
 *    larger shapes there). See ATTN_TF32_* in test_cuda_nn.c.
 * Then: the error paths (scratch refused, a GEMM refused: outputs untouched, error returned),
 * and the scratch size formula. Guard bytes around every buffer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kernels/attn_gemm.h"
#include "kernel_test_util.h"
#include "loupe/kernels.h"

/* the GPU test's TF32 tolerances (test_cuda_nn.c): keep the two in step */
#define ATTN_TF32_ATOL_OUT 3e-3
#define ATTN_TF32_RTOL_OUT 5e-3
#define ATTN_TF32_ATOL_GRAD 1e-2
#define ATTN_TF32_RTOL_GRAD 1e-2

static int fails;

/* the worst |got - want| / (atol + rtol |want|); equal infinities count 0, a NaN or an
 * unequal infinity counts INFINITY */
static double worst(const float *got, const float *want, int64_t n, double atol, double rtol)
{
    double w = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(want[i]) && got[i] == want[i])
            continue;
        double d = fabs((double)got[i] - want[i]);
        double e = isfinite(d) ? d / (atol + rtol * fabs((double)want[i])) : INFINITY;
        if (!(e <= w))
            w = e;
    }
    return w;
}

static void expect(int ok, const char *what, const char *shape)
{
    printf("%-52s %-40s %s\n", what, shape, ok ? "PASS" : "FAIL");
    if (!ok)
        fails++;
}

/* ---- TF32 GEMM as the tensor cores run it ------------------------------------------------- */

static float tf32(float x) /* truncated to 10 mantissa bits (the hardware drops the rest) */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= 0xFFFFE000u;
    memcpy(&x, &u, 4);
    return x;
}

static lp_status tf32_gemm(void *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                           int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta, float *C,
                           int64_t ldc, int64_t sc, int64_t batch)
{
    (void)ctx;
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                const float *a = A + z * sa, *b = B + z * sb;
                float acc = 0.0f;
                for (int64_t p = 0; p < K; p++)
                    acc += tf32(ta ? a[p * lda + i] : a[i * lda + p]) * tf32(tb ? b[j * ldb + p] : b[p * ldb + j]);
                float *c = C + z * sc + i * ldc + j;
                *c = alpha * acc + (beta == 0.0f ? 0.0f : beta * *c);
            }
    return LP_OK;
}

/* ---- failing steps ------------------------------------------------------------------------ */

static int alloc_budget; /* allocations granted before one is refused */
static void *stingy_alloc(void *ctx, size_t bytes, const char *what)
{
    (void)ctx;
    if (alloc_budget-- <= 0) {
        lp_err(LP_STATUS_NO_MEMORY, "test: %zu bytes for %s refused", bytes, what);
        return NULL;
    }
    return malloc(bytes);
}

static int gemm_budget; /* GEMMs run before one is refused */
static lp_status flaky_gemm(void *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                            int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float beta, float *C,
                            int64_t ldc, int64_t sc, int64_t batch)
{
    if (gemm_budget-- <= 0)
        return lp_err(LP_STATUS_UNSUPPORTED, "test: GEMM refused");
    for (int64_t i = 0; i < batch; i++)
        lp_kernels_table(LP_KERNELS_IMPL_REF)
            ->sgemm(ta, tb, M, N, K, alpha, A + i * sa, lda, B + i * sb, ldb, beta, C + i * sc, ldc);
    (void)ctx;
    return LP_OK;
}

/* ---- one geometry ------------------------------------------------------------------------- */

typedef struct tcase {
    const char *name;
    lp_attn_geom g;
    int packed;   /* q, k, v in one (B,T,(H+2Hkv)D) buffer */
    int mask;     /* 0 none, 1 right padding, 2 left padding, 3 segments */
    float drop_p; /* 0: none */
} tcase;

typedef struct run {
    float *out, *lse, *dqkv[3]; /* dq, dk, dv: views into one buffer when packed */
    float *gbuf[3];
} run;

static void run_case(tcase tc, double *tf32_out, double *tf32_grad)
{
    lp_attn_geom g = tc.g;
    const int64_t B = g.B, T = g.T, H = g.H, Hkv = g.Hkv, D = g.D, C = H * D;
    char shape[160];
    snprintf(shape, sizeof shape, "%s B%lld T%lld H%lld/%lld D%lld%s%s%s%s", tc.name, (long long)B, (long long)T,
             (long long)H, (long long)Hkv, (long long)D, g.causal ? " causal" : "",
             tc.mask == 1   ? " rpad"
             : tc.mask == 2 ? " lpad"
             : tc.mask == 3 ? " seg"
                            : "",
             tc.packed ? " packed" : "", tc.drop_p > 0 ? " drop" : "");
    int64_t nq, nkv, ko, vo;
    if (tc.packed) {
        g.ldq = g.ldkv = (H + 2 * Hkv) * D;
        nq = nkv = B * T * g.ldq;
        ko = H * D, vo = (H + Hkv) * D;
    } else {
        g.ldq = C, g.ldkv = Hkv * D;
        nq = B * T * C, nkv = B * T * Hkv * D;
        ko = vo = 0;
    }
    float *q = kt_rand_f(nq, -1, 1), *k = tc.packed ? q : kt_rand_f(nkv, -1, 1), *v = tc.packed ? q : kt_rand_f(nkv, -1, 1);
    int32_t *mask = NULL;
    if (tc.mask) {
        mask = kt_alloc((size_t)(B * T) * sizeof(int32_t));
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                int64_t pad = (b * 7 + 3) % (T / 3 + 1);
                mask[b * T + t] = tc.mask == 1   ? t < T - pad
                                  : tc.mask == 2 ? t >= pad
                                                 : (t >= T - pad ? 0 : t < T / 3 ? 1 : t < 2 * T / 3 ? 2 : 3);
            }
        g.segments = tc.mask == 3;
    }
    lp_attn_dropout drop = {.p = tc.drop_p, .seed = 77, .stream = 5, .offset = 1000, .lane = 1};
    const lp_attn_dropout *dp = tc.drop_p > 0 ? &drop : NULL;
    float *dout = kt_rand_f(B * T * C, -1, 1);
    const lp_kernel_table *R = lp_kernels_table(LP_KERNELS_IMPL_REF);

    /* the reference; then the composition over three GEMMs */
    run r[4];
    for (int w = 0; w < 4; w++) {
        r[w].out = kt_nan(B * T * C), r[w].lse = kt_nan(B * H * T);
        r[w].gbuf[0] = kt_nan(nq);
        r[w].gbuf[1] = tc.packed ? r[w].gbuf[0] : kt_nan(nkv);
        r[w].gbuf[2] = tc.packed ? r[w].gbuf[0] : kt_nan(nkv);
        r[w].dqkv[0] = r[w].gbuf[0], r[w].dqkv[1] = r[w].gbuf[1] + ko, r[w].dqkv[2] = r[w].gbuf[2] + vo;
    }
    R->attention_fused_forward(r[0].out, r[0].lse, q, k + ko, v + vo, mask, &g, dp);
    R->attention_fused_backward(r[0].dqkv[0], r[0].dqkv[1], r[0].dqkv[2], dout, r[0].out, r[0].lse, q, k + ko, v + vo,
                                mask, &g, dp);
    lp_attn_gemm_ops ops[3] = {lp_attn_gemm_ops_cpu(NULL), lp_attn_gemm_ops_cpu(lp_kernels_table(LP_KERNELS_IMPL_OPT)),
                               lp_attn_gemm_ops_cpu(NULL)};
    ops[2].gemm = tf32_gemm;
    static const char *const names[3] = {"f32 GEMMs (ref sgemm)", "f32 GEMMs (opt sgemm)", "TF32 GEMMs"};
    for (int w = 1; w < 4; w++) {
        const lp_attn_gemm_ops *o = &ops[w - 1];
        lp_status s1 = lp_attn_gemm_forward(o, r[w].out, r[w].lse, q, k + ko, v + vo, mask, &g, dp);
        /* the backward from the reference's out and lse (what the GPU gets from either path) */
        lp_status s2 = lp_attn_gemm_backward(o, r[w].dqkv[0], r[w].dqkv[1], r[w].dqkv[2], dout, r[0].out, r[0].lse,
                                             q, k + ko, v + vo, mask, &g, dp);
        double e_out, e_grad = 0.0;
        if (w < 3) {
            e_out = fmax(worst(r[w].out, r[0].out, B * T * C, 1e-5, 1e-5), worst(r[w].lse, r[0].lse, B * H * T, 1e-5, 1e-5));
            for (int t = 0; t < (tc.packed ? 1 : 3); t++)
                e_grad = fmax(e_grad, worst(r[w].gbuf[t], r[0].gbuf[t], t ? nkv : nq, 1e-5, 1e-5));
            char what[96];
            snprintf(what, sizeof what, "%s out+lse (%.2fx tol)", names[w - 1], e_out);
            expect(s1 == LP_OK && e_out <= 1.0, what, shape);
            snprintf(what, sizeof what, "%s dq,dk,dv (%.2fx tol)", names[w - 1], e_grad);
            expect(s2 == LP_OK && e_grad <= 1.0, what, shape);
        } else {
            e_out = fmax(worst(r[w].out, r[0].out, B * T * C, ATTN_TF32_ATOL_OUT, ATTN_TF32_RTOL_OUT),
                         worst(r[w].lse, r[0].lse, B * H * T, ATTN_TF32_ATOL_OUT, ATTN_TF32_RTOL_OUT));
            for (int t = 0; t < (tc.packed ? 1 : 3); t++)
                e_grad = fmax(e_grad, worst(r[w].gbuf[t], r[0].gbuf[t], t ? nkv : nq, ATTN_TF32_ATOL_GRAD,
                                            ATTN_TF32_RTOL_GRAD));
            char what[96];
            snprintf(what, sizeof what, "%s: %.2fx / %.2fx the GPU bounds", names[2], e_out, e_grad);
            expect(s1 == LP_OK && s2 == LP_OK && e_out <= 1.0 / 3 && e_grad <= 1.0 / 3, what, shape);
            *tf32_out = fmax(*tf32_out, e_out), *tf32_grad = fmax(*tf32_grad, e_grad);
        }
    }

    /* error paths: scratch refused at each of its buffers, a GEMM refused at each GEMM: the
     * call returns the error and leaves the outputs as they were (NaN) */
    float *o2 = kt_nan(B * T * C), *l2 = kt_nan(B * H * T), *g2 = kt_nan(nq);
    lp_attn_gemm_ops bad = lp_attn_gemm_ops_cpu(NULL);
    bad.alloc = stingy_alloc;
    int untouched = 1;
    for (int n = 0; n < 4; n++) {
        alloc_budget = n;
        untouched &= lp_attn_gemm_forward(&bad, o2, l2, q, k + ko, v + vo, mask, &g, dp) == LP_STATUS_NO_MEMORY;
    }
    for (int n = 0; n < 6; n++) {
        alloc_budget = n;
        untouched &= lp_attn_gemm_backward(&bad, g2, g2, g2, dout, r[0].out, r[0].lse, q, k + ko, v + vo, mask, &g,
                                           dp) == LP_STATUS_NO_MEMORY;
    }
    bad = lp_attn_gemm_ops_cpu(NULL);
    bad.gemm = flaky_gemm;
    for (int n = 0; n < 2; n++) {
        gemm_budget = n;
        untouched &= lp_attn_gemm_forward(&bad, o2, l2, q, k + ko, v + vo, mask, &g, dp) == LP_STATUS_UNSUPPORTED;
    }
    for (int n = 0; n < 5; n++) {
        gemm_budget = n;
        untouched &= lp_attn_gemm_backward(&bad, g2, g2, g2, dout, r[0].out, r[0].lse, q, k + ko, v + vo, mask, &g,
                                           dp) == LP_STATUS_UNSUPPORTED;
    }
    for (int64_t i = 0; i < B * T * C; i++)
        untouched &= isnan(o2[i]) != 0;
    for (int64_t i = 0; i < nq; i++)
        untouched &= isnan(g2[i]) != 0;
    expect(untouched, "scratch or a GEMM refused: error, outputs untouched", shape);
    expect(kt_release(shape) == 0, "guard bytes intact", shape);
}

int main(void)
{
    if (lp_kernels_init() != LP_OK)
        return 1;
#define G(B_, T_, H_, Hkv_, D_, causal_, window_)                                                                       \
    ((lp_attn_geom){.B = B_, .T = T_, .H = H_, .Hkv = Hkv_, .D = D_, .causal = causal_, .window = window_})
    tcase cases[] = {
        {"mha", G(2, 37, 2, 2, 64, false, 0), 0, 0, 0},
        {"mha-pad", G(3, 50, 3, 3, 64, false, 0), 0, 1, 0},
        {"gqa2-lpad", G(2, 40, 2, 1, 80, true, 0), 0, 2, 0}, /* left padding under causal: empty rows */
        {"gqa7-win", G(1, 45, 7, 1, 32, true, 8), 0, 1, 0},
        {"gqa7-win-nc", G(2, 65, 7, 1, 64, false, 9), 0, 0, 0},
        {"seg", G(1, 40, 2, 2, 32, false, 0), 0, 3, 0},
        {"seg-causal-gqa", G(2, 40, 4, 2, 40, true, 0), 0, 3, 0},
        {"packed-gqa3", G(2, 35, 6, 2, 96, true, 0), 1, 1, 0},
        {"d7-scale", G(1, 19, 3, 1, 7, false, 0), 0, 1, 0},
        {"dropout", G(2, 40, 4, 2, 64, true, 0), 0, 1, 0.1f},
        {"dropout-gqa7-win", G(1, 70, 7, 1, 128, true, 20), 0, 2, 0.2f},
        {"t1", G(3, 1, 2, 1, 64, true, 0), 0, 1, 0},
        {"win1-nc", G(1, 33, 2, 2, 16, false, 1), 0, 0, 0},
        {"d256-scale", G(1, 40, 2, 1, 256, false, 0), 0, 0, 0}, /* as test_cuda_nn's d256: scale 0.3 */
        /* longer rows, as the GPU test's DistilBERT- and Qwen-shaped cases: the TF32 error grows
         * with the GEMMs' K (D forward, T and grp*T backward) */
        {"bert-like", G(2, 128, 2, 2, 64, false, 0), 0, 1, 0.1f},
        {"qwen-like", G(1, 384, 7, 1, 64, true, 0), 0, 0, 0},
    };
#undef G
    cases[8].g.scale = 0.3f;
    cases[13].g.scale = 0.3f;
    double e_out = 0.0, e_grad = 0.0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(cases[i], &e_out, &e_grad);
    printf("TF32 GEMMs (truncated operands): worst error %.3f / %.3f of the GPU test's bounds (out+lse %g+%g|ref|, "
           "grads %g+%g|ref|)\n",
           e_out, e_grad, ATTN_TF32_ATOL_OUT, ATTN_TF32_RTOL_OUT, ATTN_TF32_ATOL_GRAD, ATTN_TF32_RTOL_GRAD);

    lp_attn_geom g = {.B = 2, .T = 3, .H = 4, .Hkv = 2, .D = 5, .ldq = 20, .ldkv = 10};
    /* forward Qh + Kh + Vh + S = 2*4*3*5 + 2 * 2*2*3*5 + 2*4*3*3; backward twice Qh, Kh+Vh, S */
    expect(lp_attn_gemm_scratch_bytes(&g, false) == (size_t)(120 + 120 + 72) * 4 &&
               lp_attn_gemm_scratch_bytes(&g, true) == (size_t)(240 + 120 + 144) * 4,
           "scratch bytes", "B2 T3 H4/2 D5");
    lp_attn_geom bad = g;
    bad.H = 3;
    lp_attn_gemm_ops o = lp_attn_gemm_ops_cpu(NULL);
    expect(lp_attn_gemm_forward(&o, NULL, NULL, NULL, NULL, NULL, NULL, &bad, NULL) == LP_STATUS_INVALID_ARG,
           "H not a multiple of Hkv: INVALID_ARG", "B2 T3 H3/2 D5");
    printf("%d failed\n", fails);
    return fails ? 1 : 0;
}
