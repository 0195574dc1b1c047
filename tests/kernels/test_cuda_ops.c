/* The CUDA op table against the CPU reference table (ggml's test-backend-ops pattern): each
 * op runs on the same host inputs on both, over several shapes (odd sizes, not multiples of
 * 32 or 128, large n), and every output is held within a per-op tolerance stated beside the
 * case, with the reason. Backward ops are compared the same way: that is the gradient check
 * (the CPU reference's gradients are themselves checked against finite differences in
 * test_kernels_grad). One line per case: op, shape, worst errors, tolerance, PASS/FAIL and
 * the device time per call (CUDA events, after a warm-up).
 *
 * Without a GPU (or in a build without CUDA) it prints why and exits 77: ctest's skip. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda_test_util.h"

static int fails, cases;

#define CASE(op, shape, got, want, n, atol, rtol, ms) (cases++, fails += ct_check(op, shape, got, want, n, atol, rtol, ms))

/* ---- sgemm (cuBLASLt) ----
 * Inputs uniform in [-1, 1]; the reference accumulates in double. f32: cuBLAS's f32 sums
 * reorder K products of size <= 1, error ~ sqrt(K) * 2^-24 per element: atol 2e-6 sqrt(K)
 * leaves a ~30x margin. TF32 rounds both inputs to 10 mantissa bits (rel. 2^-11 each), so the
 * products carry ~1e-3 relative error that random signs sum to ~1e-3 sqrt(K / 3): atol 1e-3
 * sqrt(K). */
static void sgemm_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha, float beta,
                       bool tf32)
{
    int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
    float *A = kt_rand_f(na, -1, 1), *B = kt_rand_f(nb, -1, 1), *C0 = kt_rand_f(nc, -1, 1);
    float *want = kt_copy(C0, nc), *got = kt_nan(nc);
    ct_ref->sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, want, ldc);
    float *dA = ct_up(A, na), *dB = ct_up(B, nb), *dC = ct_up(C0, nc);
    lp_cuda_set_tf32(ct_be, tf32);
    ct_be->ops->sgemm(ta, tb, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc);
    ct_down(got, dC, nc);
    double ms;
    CT_TIME(ms, ct_be->ops->sgemm(ta, tb, M, N, K, alpha, dA, lda, dB, ldb, 0.0f, dC, ldc));
    lp_cuda_set_tf32(ct_be, false);
    char op[40], shape[64];
    snprintf(op, sizeof op, "sgemm %s %c%c", tf32 ? "tf32" : "f32", ta ? 'T' : 'N', tb ? 'T' : 'N');
    snprintf(shape, sizeof shape, "M%lld N%lld K%lld pad%lld b%g", (long long)M, (long long)N, (long long)K,
             (long long)pad, (double)beta);
    double rk = sqrt((double)(K > 0 ? K : 1));
    CASE(op, shape, got, want, nc, (tf32 ? 1e-3 : 2e-6) * rk, tf32 ? 1e-3 : 1e-5, ms);
    ct_free_all();
    fails += kt_release(op);
}

static void test_sgemm(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 129}, {128, 768, 768}, {257, 3072, 768},
                                        {512, 1000, 4}, {3, 50257, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            sgemm_case(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 0, 1.0f, 0.0f, false);
    sgemm_case(false, true, 100, 300, 200, 3, 0.5f, 1.0f, false); /* views (ld > width), accumulate */
    sgemm_case(true, false, 64, 64, 0, 0, 1.0f, 0.5f, false);     /* K = 0: C scaled by beta */
    sgemm_case(false, true, 128, 768, 768, 0, 1.0f, 0.0f, true);
    sgemm_case(true, false, 257, 3072, 768, 1, 1.0f, 1.0f, true);
}

/* ---- GELU ----
 * f32 erff / tanhf / expf against the double reference: a few ulp of each factor, and
 * cancellation in 1 + erf near x = -4 leaves ~1e-7 absolute; atol 1e-6, rtol 1e-5. */
static void gelu_case(int64_t n, lp_gelu_kind kind)
{
    float *x = kt_rand_f(n, -6, 6), *dy = kt_rand_f(n, -1, 1);
    float *want = kt_nan(n), *dwant = kt_nan(n), *got = kt_nan(n), *dgot = kt_nan(n);
    ct_ref->gelu_forward(want, x, n, kind);
    ct_ref->gelu_backward(dwant, dy, x, n, kind);
    float *dx = ct_up(x, n), *ddy = ct_up(dy, n), *dout = ct_dnan(n), *ddin = ct_dnan(n);
    ct_be->ops->gelu_forward(dout, dx, n, kind);
    ct_be->ops->gelu_backward(ddin, ddy, dx, n, kind);
    ct_down(got, dout, n);
    ct_down(dgot, ddin, n);
    double ms_f, ms_b;
    CT_TIME(ms_f, ct_be->ops->gelu_forward(dout, dx, n, kind));
    CT_TIME(ms_b, ct_be->ops->gelu_backward(ddin, ddy, dx, n, kind));
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    const char *k = kind == LP_GELU_KIND_TANH ? "tanh" : "erf";
    char op[40];
    snprintf(op, sizeof op, "gelu_forward %s", k);
    CASE(op, shape, got, want, n, 1e-6, 1e-5, ms_f);
    snprintf(op, sizeof op, "gelu_backward %s", k);
    CASE(op, shape, dgot, dwant, n, 1e-6, 1e-5, ms_b);
    ct_free_all();
    fails += kt_release("gelu");
}

static void test_gelu(void)
{
    static const int64_t ns[] = {1, 31, 1000, 65537, (1 << 22) + 3};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        gelu_case(ns[i], LP_GELU_KIND_ERF);
        gelu_case(ns[i], LP_GELU_KIND_TANH);
    }
}

/* supports(): true exactly for the filled entries, false outside the table */
static void test_supports(void)
{
    cases++;
    bool ok = ct_be->supports(ct_be, LP_BACKEND_OP(sgemm)) && ct_be->supports(ct_be, LP_BACKEND_OP(gelu_forward)) &&
              !ct_be->supports(ct_be, sizeof(lp_kernel_table)) && !ct_be->supports(ct_be, LP_BACKEND_OP(name));
    printf("%-28s %-30s %s\n", "supports", "filled entries", ok ? "PASS" : "FAIL");
    fails += !ok;
}

int main(void)
{
    int rc = ct_init();
    if (rc)
        return rc;
    test_supports();
    test_sgemm();
    test_gelu();
    printf("%d of %d cases passed\n", cases - fails, cases);
    return fails ? 1 : 0;
}
