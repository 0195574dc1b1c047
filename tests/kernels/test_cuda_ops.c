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

#include "cuda/cuda_alloc.h"
#include "kernels/cuda_test_util.h"

static int fails, cases;

#define CASE(op, shape, got, want, n, atol, rtol, ms)                                                          \
    (cases++, fails += ct_check(op, shape, got, want, n, atol, rtol, ms))

/* ---- sgemm (cuBLASLt) ----
 * Inputs uniform in [-1, 1]; the reference accumulates in double. f32: cuBLAS's f32 sums
 * reorder K products of size <= 1, error ~ sqrt(K) * 2^-24 per element: atol 2e-6 sqrt(K)
 * leaves a ~30x margin. TF32 keeps 10 mantissa bits of each input (rel. error up to 2^-10
 * each if truncated), so a product of mean size 1/4 carries up to ~5e-4 absolute error, and
 * random signs sum K of them to a standard deviation of ~2e-4 sqrt(K); the worst of a million
 * elements is ~5 of those: atol 2e-3 sqrt(K) (plus rtol 1e-3) leaves a 2x margin. */
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
    CASE(op, shape, got, want, nc, (tf32 ? 2e-3 : 2e-6) * rk, tf32 ? 1e-3 : 1e-5, ms);
    if (M * N * K >= 1 << 24 && ms > 0)
        printf("    %.2f TFLOP/s\n", 2.0 * M * N * K / (ms * 1e-3) / 1e12);
    ct_free_all();
    fails += kt_release(op);
}

/* ---- linear_forward: a Linear's GEMM with its bias in cuBLASLt's epilogue (or, where it has
 * none, broadcast and accumulated into): against the reference's broadcast + sgemm (beta 1),
 * the sgemm tolerances above (the bias adds one rounding). bias_off 1 offsets the bias by one
 * float (4-byte aligned: the heuristic must pick a kernel for it, or the fallback run). ---- */
static void linear_case(int64_t N, int64_t C, int64_t OC, bool tf32, int bias_off)
{
    if (!ct_be->ops->linear_forward) {
        printf("%-28s skipped: this backend has no linear_forward\n", "linear_forward");
        return;
    }
    float *x = kt_rand_f(N * C, -1, 1), *w = kt_rand_f(OC * C, -1, 1), *b = kt_rand_f(OC + 1, -1, 1);
    float *want = kt_nan(N * OC), *got = kt_nan(N * OC);
    ct_ref->bias_broadcast(want, b + bias_off, N, OC);
    ct_ref->sgemm(false, true, N, OC, C, 1.0f, x, C, w, C, 1.0f, want, OC);
    float *dx = ct_up(x, N * C), *dw = ct_up(w, OC * C), *db = ct_up(b, OC + 1), *dout = ct_dnan(N * OC);
    lp_cuda_set_tf32(ct_be, tf32);
    ct_be->ops->linear_forward(dout, dx, dw, db + bias_off, N, C, OC);
    ct_down(got, dout, N * OC);
    double ms;
    CT_TIME(ms, ct_be->ops->linear_forward(dout, dx, dw, db + bias_off, N, C, OC));
    lp_cuda_set_tf32(ct_be, false);
    char op[40], shape[64];
    snprintf(op, sizeof op, "linear_forward %s", tf32 ? "tf32" : "f32");
    snprintf(shape, sizeof shape, "N%lld C%lld OC%lld bias+%d", (long long)N, (long long)C, (long long)OC,
             bias_off);
    double rk = sqrt((double)(C > 0 ? C : 1));
    CASE(op, shape, got, want, N * OC, (tf32 ? 2e-3 : 2e-6) * rk, tf32 ? 1e-3 : 1e-5, ms);
    ct_free_all();
    fails += kt_release(op);
}

static void test_sgemm(void)
{
    /* every transpose on small and odd shapes; the large ones (the reference's triple loop
     * takes seconds on them) in the linear layer's forward (NT) and weight-gradient (TN) forms */
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 129}, {128, 768, 768}, {512, 1000, 4},
                                        {3, 50257, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            sgemm_case(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 0, 1.0f, 0.0f, false);
    sgemm_case(false, true, 512, 3072, 768, 0, 1.0f, 0.0f, false);
    sgemm_case(true, false, 384, 768, 512, 0, 1.0f, 1.0f, false);
    sgemm_case(false, true, 100, 300, 200, 3, 0.5f, 1.0f, false); /* views (ld > width), accumulate */
    sgemm_case(true, false, 64, 64, 0, 0, 1.0f, 0.5f, false);     /* K = 0: C scaled by beta */
    sgemm_case(false, true, 128, 768, 768, 0, 1.0f, 0.0f, true);
    sgemm_case(false, true, 512, 3072, 768, 1, 1.0f, 1.0f, true);
    static const int64_t lin[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 129, 65}, {512, 768, 3072}, {5, 0, 7}};
    for (size_t s = 0; s < sizeof lin / sizeof lin[0]; s++)
        for (int off = 0; off < 2; off++)
            linear_case(lin[s][0], lin[s][1], lin[s][2], false, off);
    linear_case(4096, 768, 768, true, 0);
    linear_case(4096, 896, 4864, true, 1);
}

/* ---- bf16 GEMM (lp_cuda_gemm_bf16: the peak probe's) ----
 * Against the reference sgemm on the same bf16 values widened to f32: bf16 x bf16 products
 * are exact in f32 (8 + 8 significant bits), so only the f32 accumulation differs, as in the
 * f32 case: atol 2e-6 sqrt(K), rtol 1e-5. */
static void gemm_bf16_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K)
{
    int64_t lda = ta ? M : K, ldb = tb ? K : N, na = M * K, nb = K * N;
    float *A = kt_rand_f(na, -1, 1), *B = kt_rand_f(nb, -1, 1), *want = kt_nan(M * N), *got = kt_nan(M * N);
    uint16_t *A16 = kt_alloc((size_t)na * 2), *B16 = kt_alloc((size_t)nb * 2);
    lp_f32_to_bf16_n(A16, A, na);
    lp_f32_to_bf16_n(B16, B, nb);
    lp_bf16_to_f32_n(A, A16, na);
    lp_bf16_to_f32_n(B, B16, nb);
    ct_ref->sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, want, N);
    uint16_t *dA = ct_up_bytes(A16, (size_t)na * 2), *dB = ct_up_bytes(B16, (size_t)nb * 2);
    float *dC = ct_dnan(M * N);
    if (lp_cuda_gemm_bf16(ct_be, ta, tb, M, N, K, 1.0f, dA, lda, dB, ldb, 0.0f, dC, N) != LP_OK)
        printf("    error: %s\n", lp_err_msg()); /* kept pending too: ct_down fills NaN, the case fails */
    ct_down(got, dC, M * N);
    double ms;
    lp_status gst = LP_OK;
    CT_TIME(ms, gst |= lp_cuda_gemm_bf16(ct_be, ta, tb, M, N, K, 1.0f, dA, lda, dB, ldb, 0.0f, dC, N));
    (void)gst; /* a failure shows as the case's FAIL above */
    char op[40], shape[64];
    snprintf(op, sizeof op, "gemm_bf16 %c%c", ta ? 'T' : 'N', tb ? 'T' : 'N');
    snprintf(shape, sizeof shape, "M%lld N%lld K%lld", (long long)M, (long long)N, (long long)K);
    CASE(op, shape, got, want, M * N, 2e-6 * sqrt((double)K), 1e-5, ms);
    if (M * N * K >= 1 << 24 && ms > 0)
        printf("    %.2f TFLOP/s\n", 2.0 * M * N * K / (ms * 1e-3) / 1e12);
    ct_free_all();
    fails += kt_release(op);
}

static void test_gemm_bf16(void)
{
    gemm_bf16_case(false, true, 7, 13, 5);
    gemm_bf16_case(false, true, 128, 768, 768);
    gemm_bf16_case(false, false, 257, 1000, 768);
    gemm_bf16_case(true, false, 64, 100, 300);
    gemm_bf16_case(false, true, 512, 3072, 768);
}

/* ---- --dtype bf16's entries (cuda_bf16.c) against the CPU reference's (bf16_train.c) ----
 * The device copy of W (lp_cuda_qweight_bf16_train, and bf16_repack after a change) is the
 * CPU's rounding bit for bit (tolerance 0). The GEMMs round their activation / gradient
 * operand with the same rule, so both sides multiply the same bf16 values exactly and differ
 * by f32 summation order only: the f32 GEMM's tolerance, atol 2e-6 sqrt(K) (inputs in
 * [-1, 1]), rtol 1e-5; dW accumulates onto a nonzero start, as a gradient does. */
static void bf16_copy_check(const char *op, const char *shape, const lp_qweight *dq, const float *w,
                            int64_t n)
{
    uint16_t *h = kt_alloc((size_t)n * 2);
    float *want = kt_nan(n), *got = kt_nan(n);
    lp_f32_to_bf16_n(h, w, n);
    lp_bf16_to_f32_n(want, h, n);
    ct_down_bytes(h, dq->bf16, (size_t)n * 2);
    lp_bf16_to_f32_n(got, h, n);
    CASE(op, shape, got, want, n, 0, 0, 0.0);
}

static void bf16_train_case(int64_t N, int64_t C, int64_t OC, bool with_bias)
{
    float *x = kt_rand_f(N * C, -1, 1), *w = kt_rand_f(OC * C, -1, 1), *dy = kt_rand_f(N * OC, -1, 1),
          *dw0 = kt_rand_f(OC * C, -1, 1), *b = with_bias ? kt_rand_f(OC, -1, 1) : NULL;
    char shape[64];
    snprintf(shape, sizeof shape, "N%lld C%lld OC%lld%s", (long long)N, (long long)C, (long long)OC,
             with_bias ? " bias" : "");
    lp_qweight hq, dq;
    if (lp_qweight_pack_bf16_train(&hq, w, OC, C, "test weight") != LP_OK)
        ct_die("bf16 pack");
    float *dW = ct_up(w, OC * C);
    if (lp_cuda_qweight_bf16_train(ct_be, &dq, dW, OC, C, "test weight", LP_MEM_CATEGORY_QUANTIZED_WEIGHT) !=
        LP_OK)
        ct_die("device bf16 copy");
    bf16_copy_check("bf16 copy", shape, &dq, w, OC * C);

    float *want = kt_nan(N * OC), *got = kt_nan(N * OC);
    if (ct_ref->bf16_matmul_forward(want, x, &hq, b, N, C, OC) != LP_OK)
        ct_die("cpu bf16_matmul_forward");
    float *dx = ct_up(x, N * C), *db = b ? ct_up(b, OC) : NULL, *dout = ct_dnan(N * OC);
    if (ct_be->ops->bf16_matmul_forward(dout, dx, &dq, db, N, C, OC) != LP_OK)
        printf("    error: %s\n", lp_err_msg());
    ct_down(got, dout, N * OC);
    double ms;
    lp_status gst = LP_OK;
    CT_TIME(ms, gst |= ct_be->ops->bf16_matmul_forward(dout, dx, &dq, db, N, C, OC));
    CASE("bf16_matmul_forward", shape, got, want, N * OC, 2e-6 * sqrt((double)C), 1e-5, ms);

    float *want_dx = kt_nan(N * C), *got_dx = kt_nan(N * C), *want_dw = kt_copy(dw0, OC * C),
          *got_dw = kt_nan(OC * C);
    if (ct_ref->bf16_matmul_backward(want_dx, want_dw, dy, x, &hq, N, C, OC) != LP_OK)
        ct_die("cpu bf16_matmul_backward");
    float *ddy = ct_up(dy, N * OC), *ddx = ct_dnan(N * C), *ddw = ct_up(dw0, OC * C);
    if (ct_be->ops->bf16_matmul_backward(ddx, ddw, ddy, dx, &dq, N, C, OC) != LP_OK)
        printf("    error: %s\n", lp_err_msg());
    ct_down(got_dx, ddx, N * C);
    ct_down(got_dw, ddw, OC * C);
    CT_TIME(ms, gst |= ct_be->ops->bf16_matmul_backward(ddx, ddw, ddy, dx, &dq, N, C, OC));
    (void)gst; /* a failure shows as the cases' FAIL */
    CASE("bf16_matmul_backward dinp", shape, got_dx, want_dx, N * C, 2e-6 * sqrt((double)OC), 1e-5, ms);
    CASE("bf16_matmul_backward dw", shape, got_dw, want_dw, OC * C, 2e-6 * sqrt((double)N), 1e-5, 0.0);
    /* a frozen bf16 base (LoRA): the input gradient only, no input or weight gradient given;
     * the same products as above, so the same result */
    float *ddx1 = ct_dnan(N * C), *got_dx1 = kt_nan(N * C);
    if (ct_be->ops->bf16_matmul_backward(ddx1, NULL, ddy, NULL, &dq, N, C, OC) != LP_OK)
        printf("    error: %s\n", lp_err_msg());
    ct_down(got_dx1, ddx1, N * C);
    CASE("bf16_matmul_backward dinp only", shape, got_dx1, want_dx, N * C, 2e-6 * sqrt((double)OC), 1e-5,
         0.0);

    for (int64_t i = 0; i < OC * C; i++) /* an optimizer step's change, then the repack */
        w[i] = w[i] * 0.75f + 1e-3f;
    float *dW2 = ct_up(w, OC * C);
    ct_be->ops->bf16_repack(&dq, dW2);
    bf16_copy_check("bf16_repack", shape, &dq, w, OC * C);
    lp_cuda_qweight_free(ct_be, &dq);
    lp_qweight_free(&hq);
    ct_free_all();
    fails += kt_release("bf16 train");
}

static void test_bf16_train(void)
{
    bf16_train_case(1, 1, 1, true);
    bf16_train_case(7, 33, 5, false); /* odd shapes: the unaligned rounding path */
    bf16_train_case(37, 130, 70, true);
    bf16_train_case(512, 768, 768, true);
    bf16_train_case(512, 768, 3072, true); /* DistilBERT's FFN up, 512 tokens */
}

/* ---- GELU ----
 * f32 erff / tanhf / expf against the double reference. CUDA's erff and tanhf are within
 * 2 ulp; near -1 that is 2.4e-7 absolute, which 1 + erf keeps (cancellation) and 0.5 x
 * (|x| <= 6) scales to 7e-7; the backward adds as much again from its second term. glibc's
 * f32 functions (the CPU emulator's) gave 6e-7: atol 3e-6, rtol 1e-5. */
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
    CASE(op, shape, got, want, n, 3e-6, 1e-5, ms_f);
    snprintf(op, sizeof op, "gelu_backward %s", k);
    CASE(op, shape, dgot, dwant, n, 3e-6, 1e-5, ms_b);
    ct_free_all();
    fails += kt_release("gelu");
}

/* ---- the heads' activations (tanh, ReLU): CUDA's tanhf within 2 ulp of the double reference
 * (values in [-1, 1]: atol 3e-7); ReLU's select exact; tanh's 1 - y^2 may contract to an FMA
 * on either side (atol 1e-7 on |dout| <= 1) ---- */
static void act_case(int64_t n, lp_act_kind kind)
{
    float *x = kt_rand_f(n, -4, 4), *dout = kt_rand_f(n, -1, 1), *want = kt_nan(n), *got = kt_nan(n),
          *gwant = kt_nan(n), *ggot = kt_nan(n);
    ct_ref->act_forward(want, x, n, kind);
    ct_ref->act_backward(gwant, dout, x, want, n, kind);
    float *dx = ct_up(x, n), *dy = ct_dnan(n), *dd = ct_up(dout, n), *dg = ct_dnan(n),
          *dwant = ct_up(want, n);
    ct_be->ops->act_forward(dy, dx, n, kind);
    ct_be->ops->act_backward(dg, dd, dx, dwant, n, kind);
    ct_down(got, dy, n);
    ct_down(ggot, dg, n);
    double ms;
    CT_TIME(ms, ct_be->ops->act_forward(dy, dx, n, kind));
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    const bool tanh_form = kind == LP_ACT_TANH;
    CASE(tanh_form ? "act_forward tanh" : "act_forward relu", shape, got, want, n, tanh_form ? 3e-7 : 0, 0,
         ms);
    CASE(tanh_form ? "act_backward tanh" : "act_backward relu", shape, ggot, gwant, n, tanh_form ? 1e-7 : 0,
         0, 0.0);
    ct_free_all();
    fails += kt_release("act");
}

static void test_gelu(void)
{
    for (int kind = 0; kind < 2; kind++) {
        act_case(1, (lp_act_kind)kind);
        act_case(32 * 768, (lp_act_kind)kind); /* DistilBERT's head at batch 32 */
        act_case(65537, (lp_act_kind)kind);
    }
    static const int64_t ns[] = {1, 31, 1000, 65537, (1 << 22) + 3};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        gelu_case(ns[i], LP_GELU_KIND_ERF);
        gelu_case(ns[i], LP_GELU_KIND_TANH);
    }
}


/* ---- SwiGLU ----
 * f32 expf (2 ulp on CUDA) against the double reference: the forward's products carry a few
 * ulp (rtol 1e-5); the backward's 1 + g (1 - s) cancels near g = -1.28, leaving ~3e-7
 * absolute, times |dout * up| <= 2: atol 3e-6. gate and up strided by ld (halves of one
 * buffer). */
static void swiglu_case(int64_t N, int64_t F, int64_t ld)
{
    int64_t nin = N * ld;
    float *gate = kt_rand_f(nin, -8, 8), *upv = kt_rand_f(nin, -2, 2), *dy = kt_rand_f(N * F, -1, 1);
    float *want = kt_nan(N * F), *got = kt_nan(N * F);
    float *dg_want = kt_nan(nin), *du_want = kt_nan(nin), *dg_got = kt_nan(nin), *du_got = kt_nan(nin);
    ct_ref->swiglu_forward(want, gate, upv, N, F, ld);
    ct_ref->swiglu_backward(dg_want, du_want, dy, gate, upv, N, F, ld);
    float *g = ct_up(gate, nin), *u = ct_up(upv, nin), *d = ct_up(dy, N * F), *o = ct_dnan(N * F);
    float *dg = ct_dnan(nin), *du = ct_dnan(nin); /* the ld - F columns past each row's F stay NaN on both sides */
    ct_be->ops->swiglu_forward(o, g, u, N, F, ld);
    ct_be->ops->swiglu_backward(dg, du, d, g, u, N, F, ld);
    ct_down(got, o, N * F);
    ct_down(dg_got, dg, nin);
    ct_down(du_got, du, nin);
    double ms_f, ms_b;
    CT_TIME(ms_f, ct_be->ops->swiglu_forward(o, g, u, N, F, ld));
    CT_TIME(ms_b, ct_be->ops->swiglu_backward(dg, du, d, g, u, N, F, ld));
    char shape[64];
    snprintf(shape, sizeof shape, "N%lld F%lld ld%lld", (long long)N, (long long)F, (long long)ld);
    CASE("swiglu_forward", shape, got, want, N * F, 3e-6, 1e-5, ms_f);
    CASE("swiglu_backward dgate", shape, dg_got, dg_want, nin, 3e-6, 1e-5, ms_b);
    CASE("swiglu_backward dup", shape, du_got, du_want, nin, 3e-6, 1e-5, -1);
    ct_free_all();
    fails += kt_release("swiglu");
}

/* ---- bias ----
 * add and broadcast are the same single f32 operation per element: bit for bit. The
 * gradient is held against the column sums taken in double (then added to dbias in f32, as
 * both kernels do), not against the reference's sequential f32 sum: that one is the less
 * accurate side (its error reached 1e-3 on sums of ~100 at N = 4097 in the CPU emulator,
 * ~65 ulp, as big as any bound that would still catch a kernel error). The GPU's blocked
 * sums add ~N/32 values per thread then 32 partials (then chunks): a few ulp of partial sums
 * of size ~sqrt(N), well inside atol 2^-24 * 4 * N. The reference still sets the element
 * count and layout (it is checked equal to the double sums within its own, looser, bound). */
static void bias_case(int64_t N, int64_t C)
{
    float *x = kt_rand_f(N * C, -1, 1), *b = kt_rand_f(C, -1, 1), *db0 = kt_rand_f(C, -1, 1);
    float *add_want = kt_copy(x, N * C), *bc_want = kt_nan(N * C), *db_want = kt_copy(db0, C);
    float *add_got = kt_nan(N * C), *bc_got = kt_nan(N * C), *db_got = kt_nan(C);
    ct_ref->bias_add_forward(add_want, b, N, C);
    ct_ref->bias_broadcast(bc_want, b, N, C);
    float *db_ref = kt_copy(db0, C);
    ct_ref->bias_backward(db_ref, x, N, C);
    for (int64_t c = 0; c < C; c++) {
        double t = 0;
        for (int64_t i = 0; i < N; i++)
            t += x[i * C + c];
        db_want[c] += (float)t;
    }
    float *dx = ct_up(x, N * C), *dbias = ct_up(b, C), *ddb = ct_up(db0, C), *dbc = ct_dnan(N * C);
    ct_be->ops->bias_broadcast(dbc, dbias, N, C);
    ct_be->ops->bias_backward(ddb, dx, N, C); /* before dx changes */
    ct_be->ops->bias_add_forward(dx, dbias, N, C);
    ct_down(add_got, dx, N * C);
    ct_down(bc_got, dbc, N * C);
    ct_down(db_got, ddb, C);
    double ms_a, ms_c, ms_b;
    CT_TIME(ms_a, ct_be->ops->bias_add_forward(dx, dbias, N, C));
    CT_TIME(ms_c, ct_be->ops->bias_broadcast(dbc, dbias, N, C));
    CT_TIME(ms_b, ct_be->ops->bias_backward(ddb, dbc, N, C));
    char shape[64];
    snprintf(shape, sizeof shape, "N%lld C%lld", (long long)N, (long long)C);
    CASE("bias_add_forward", shape, add_got, add_want, N * C, 0, 0, ms_a);
    CASE("bias_broadcast", shape, bc_got, bc_want, N * C, 0, 0, ms_c);
    CASE("bias_backward", shape, db_got, db_want, C, 0x1p-22 * (double)N, 0, ms_b);
    if (kt_close("bias_backward: the CPU reference against the double sums", db_ref, db_want, C,
                 0x1p-24 * (double)N * sqrt((double)N), 0)) /* its sequential f32 sum: a random walk of N roundings */
        fails++;
    ct_free_all();
    fails += kt_release("bias");
}

/* ---- scale, add_inplace: one f32 operation per element, bit for bit ---- */
static void scale_add_case(int64_t n)
{
    float *x = kt_rand_f(n, -5, 5), *y = kt_rand_f(n, -5, 5);
    float *sc_want = kt_copy(x, n), *add_want = kt_copy(y, n), *got = kt_nan(n), *got2 = kt_nan(n);
    ct_ref->scale(sc_want, n, 0.37f);
    ct_ref->add_inplace(add_want, x, n);
    float *dx = ct_up(x, n), *dy = ct_up(y, n);
    ct_be->ops->add_inplace(dy, dx, n);
    ct_be->ops->scale(dx, n, 0.37f);
    ct_down(got, dx, n);
    ct_down(got2, dy, n);
    double ms_s, ms_a;
    CT_TIME(ms_s, ct_be->ops->scale(dx, n, 1.0f));
    CT_TIME(ms_a, ct_be->ops->add_inplace(dy, dx, n));
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    CASE("scale", shape, got, sc_want, n, 0, 0, ms_s);
    CASE("add_inplace", shape, got2, add_want, n, 0, 0, ms_a);
    ct_free_all();
    fails += kt_release("scale/add");
}

/* ---- sum_squares: both sum in double, in different orders. For positive terms recursive
 * summation is within (n - 1) 2^-53 relative of the exact sum (the GPU's tree, within less):
 * rtol 2^-52 n (the CPU emulator measured 1.5e-12 at n = 4M, the bound is 9e-10) ---- */
static void sum_squares_case(int64_t n)
{
    float *x = kt_rand_f(n, -3, 3);
    double want = ct_ref->sum_squares(x, n);
    float *dx = ct_up(x, n);
    double got = ct_be->ops->sum_squares(dx, n), ms;
    CT_TIME(ms, (void)ct_be->ops->sum_squares(dx, n));
    double rel = fabs(got - want) / (want > 0 ? want : 1.0), tol = 0x1p-52 * (double)(n > 1 ? n : 1);
    int fail = !(rel <= tol);
    cases++;
    fails += fail;
    printf("%-28s n=%-28lld got %.17g want %.17g rel %.2e  tol rtol %.0e  %s  %.4f ms\n", "sum_squares",
           (long long)n, got, want, rel, tol, fail ? "FAIL" : "PASS", ms);
    ct_free_all();
    fails += kt_release("sum_squares");
}

/* ---- AdamW: the reference's f32 operations in its order, no FMA: bit for bit over three
 * steps (bias correction changes with the step) ---- */
static void adamw_case(int64_t n)
{
    float *p = kt_rand_f(n, -1, 1), *g = kt_rand_f(n, -1, 1), *m = kt_rand_f(n, -0.1f, 0.1f);
    float *v = kt_rand_f(n, 0, 0.01f);
    float *dp = ct_up(p, n), *dg = ct_up(g, n), *dm = ct_up(m, n), *dv = ct_up(v, n);
    for (int64_t step = 1; step <= 3; step++) {
        ct_ref->adamw_step(p, g, m, v, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
        ct_be->ops->adamw_step(dp, dg, dm, dv, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, step);
    }
    float *gp = kt_nan(n), *gm = kt_nan(n), *gv = kt_nan(n);
    ct_down(gp, dp, n);
    ct_down(gm, dm, n);
    ct_down(gv, dv, n);
    double ms;
    CT_TIME(ms, ct_be->ops->adamw_step(dp, dg, dm, dv, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, 4));
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld 3 steps", (long long)n);
    CASE("adamw_step param", shape, gp, p, n, 0, 0, ms);
    CASE("adamw_step m", shape, gm, m, n, 0, 0, -1);
    CASE("adamw_step v", shape, gv, v, n, 0, 0, -1);
    ct_free_all();
    fails += kt_release("adamw");
}

/* ---- multi-tensor AdamW: the same element arithmetic as adamw_step, so bit for bit with the
 * reference applied tensor by tensor over three steps. 101 tensors (three launches of up to
 * 48), sizes from 0 through several chunks, decay on every other one, like a model's
 * weights, norms and biases; each tensor a slice of one buffer per array with 3 floats
 * between slices, which must come back untouched. ---- */
static void adamw_multi_case(void)
{
    enum { NT = 101, GAP = 3 };
    static const int64_t sizes[] = {0, 1, 3, 768, 4095, 4096, 4097, 12289, 65537};
    int64_t at[NT], total = 0;
    for (int i = 0; i < NT; i++) {
        at[i] = total;
        total += sizes[(i * 7) % (int)(sizeof sizes / sizeof sizes[0])] + GAP;
    }
    float *p = kt_rand_f(total, -1, 1), *g = kt_rand_f(total, -1, 1), *m = kt_rand_f(total, -0.1f, 0.1f);
    float *v = kt_rand_f(total, 0, 0.01f);
    float *dp = ct_up(p, total), *dg = ct_up(g, total), *dm = ct_up(m, total), *dv = ct_up(v, total);
    lp_adamw_tensor t[NT];
    for (int i = 0; i < NT; i++)
        t[i] = (lp_adamw_tensor){dp + at[i],
                                 dg + at[i],
                                 dm + at[i],
                                 dv + at[i],
                                 (i + 1 < NT ? at[i + 1] : total) - at[i] - GAP,
                                 i % 2 ? 0.0 : 0.01};
    for (int64_t step = 1; step <= 3; step++) {
        for (int i = 0; i < NT; i++)
            ct_ref->adamw_step(p + at[i], g + at[i], m + at[i], v + at[i], t[i].n, 1e-3, 0.9, 0.999, 1e-8,
                               t[i].weight_decay, step);
        ct_be->ops->adamw_multi(t, NT, 1e-3, 0.9, 0.999, 1e-8, step);
    }
    float *gp = kt_nan(total), *gm = kt_nan(total), *gv = kt_nan(total);
    ct_down(gp, dp, total);
    ct_down(gm, dm, total);
    ct_down(gv, dv, total);
    double ms;
    CT_TIME(ms, ct_be->ops->adamw_multi(t, NT, 1e-3, 0.9, 0.999, 1e-8, 4));
    char shape[48];
    snprintf(shape, sizeof shape, "%d tensors, %lld el, 3 steps", NT, (long long)total);
    CASE("adamw_multi param", shape, gp, p, total, 0, 0, ms);
    CASE("adamw_multi m", shape, gm, m, total, 0, 0, -1);
    CASE("adamw_multi v", shape, gv, v, total, 0, 0, -1);
    ct_free_all();
    fails += kt_release("adamw_multi");
}

/* ---- rows gather / scatter-add: copies, and adds in the reference's order: bit for bit
 * (indices repeat, so the scatter's order matters) ---- */
static void rows_case(int64_t rows, int64_t n, int64_t C)
{
    float *x = kt_rand_f(rows * C, -1, 1), *dout = kt_rand_f(n * C, -1, 1), *dx0 = kt_rand_f(rows * C, -1, 1);
    int64_t *idx = (int64_t *)kt_alloc((size_t)n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        idx[i] = (int64_t)(kt_rand() % (uint32_t)rows);
    float *g_want = kt_nan(n * C), *s_want = kt_copy(dx0, rows * C), *g_got = kt_nan(n * C), *s_got = kt_nan(rows * C);
    ct_ref->rows_gather(g_want, x, idx, n, C);
    ct_ref->rows_scatter_add(s_want, dout, idx, n, C);
    float *dx = ct_up(x, rows * C), *dd = ct_up(dout, n * C), *ddx = ct_up(dx0, rows * C), *go = ct_dnan(n * C);
    int64_t *di = ct_up_bytes(idx, (size_t)n * sizeof(int64_t));
    ct_be->ops->rows_gather(go, dx, di, n, C);
    ct_be->ops->rows_scatter_add(ddx, dd, di, n, C);
    ct_down(g_got, go, n * C);
    ct_down(s_got, ddx, rows * C);
    double ms_g, ms_s;
    CT_TIME(ms_g, ct_be->ops->rows_gather(go, dx, di, n, C));
    CT_TIME(ms_s, ct_be->ops->rows_scatter_add(ddx, dd, di, n, C));
    char shape[64];
    snprintf(shape, sizeof shape, "rows%lld n%lld C%lld", (long long)rows, (long long)n, (long long)C);
    CASE("rows_gather", shape, g_got, g_want, n * C, 0, 0, ms_g);
    CASE("rows_scatter_add", shape, s_got, s_want, rows * C, 0, 0, ms_s);
    ct_free_all();
    fails += kt_release("rows");
}

/* ---- mean pooling: the same double sums in the same order: bit for bit; L2 normalize sums
 * squares in double in another order, so its scale may differ by an ulp: rtol 2.5e-7 ---- */
static void pool_case(int64_t B, int64_t T, int64_t C, bool with_mask)
{
    float *x = kt_rand_f(B * T * C, -2, 2), *dout = kt_rand_f(B * C, -1, 1);
    int32_t *mask = NULL;
    if (with_mask) {
        mask = (int32_t *)kt_alloc((size_t)(B * T) * sizeof(int32_t));
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) /* right padding of a varying length; row 0 all padding */
                mask[b * T + t] = b > 0 && t < 1 + (b * 7) % T;
    }
    float *f_want = kt_nan(B * C), *b_want = kt_nan(B * T * C), *n_want = kt_copy(x, B * T * C);
    float *f_got = kt_nan(B * C), *b_got = kt_nan(B * T * C), *n_got = kt_nan(B * T * C);
    ct_ref->mean_pool_forward(f_want, x, mask, B, T, C);
    ct_ref->mean_pool_backward(b_want, dout, mask, B, T, C);
    ct_ref->l2_normalize(n_want, B * T, C);
    float *dx = ct_up(x, B * T * C), *dd = ct_up(dout, B * C), *fo = ct_dnan(B * C), *bo = ct_dnan(B * T * C);
    int32_t *dm = mask ? ct_up_bytes(mask, (size_t)(B * T) * sizeof(int32_t)) : NULL;
    ct_be->ops->mean_pool_forward(fo, dx, dm, B, T, C);
    ct_be->ops->mean_pool_backward(bo, dd, dm, B, T, C);
    ct_be->ops->l2_normalize(dx, B * T, C);
    ct_down(f_got, fo, B * C);
    ct_down(b_got, bo, B * T * C);
    ct_down(n_got, dx, B * T * C);
    double ms_f, ms_b, ms_n;
    CT_TIME(ms_f, ct_be->ops->mean_pool_forward(fo, dx, dm, B, T, C));
    CT_TIME(ms_b, ct_be->ops->mean_pool_backward(bo, dd, dm, B, T, C));
    CT_TIME(ms_n, ct_be->ops->l2_normalize(dx, B * T, C));
    char shape[64];
    snprintf(shape, sizeof shape, "B%lld T%lld C%lld %s", (long long)B, (long long)T, (long long)C,
             with_mask ? "mask" : "nomask");
    CASE("mean_pool_forward", shape, f_got, f_want, B * C, 0, 0, ms_f);
    CASE("mean_pool_backward", shape, b_got, b_want, B * T * C, 0, 0, ms_b);
    CASE("l2_normalize", shape, n_got, n_want, B * T * C, 0, 2.5e-7, ms_n);
    ct_free_all();
    fails += kt_release("pool");
}

/* ---- dropout: the CPU's Philox mask element for element, outputs bit for bit, and the rng
 * advanced as the CPU advances it; lane > 0: a fill starting mid counter block (a data-parallel
 * rank's rows of the global batch's mask, lp_rng_at) ---- */
static void dropout_case(int64_t n, float p, uint32_t lane)
{
    float *x = kt_rand_f(n, -1, 1), *dy = kt_rand_f(n, -1, 1);
    float *o_want = kt_nan(n), *d_want = kt_nan(n), *o_got = kt_nan(n), *d_got = kt_nan(n);
    uint8_t *k_want = kt_alloc((size_t)n), *k_got = kt_alloc((size_t)n);
    lp_rng r1 = {.seed = 1234, .stream = 7, .offset = 11, .lane = lane}, r2 = r1;
    ct_ref->dropout_forward(o_want, k_want, x, n, p, &r1);
    ct_ref->dropout_backward(d_want, dy, k_want, n, p);
    float *dx = ct_up(x, n), *ddy = ct_up(dy, n), *o = ct_dnan(n), *d = ct_dnan(n);
    uint8_t *k = ct_dalloc((size_t)n);
    ct_be->ops->dropout_forward(o, k, dx, n, p, &r2);
    ct_be->ops->dropout_backward(d, ddy, k, n, p);
    ct_down(o_got, o, n);
    ct_down(d_got, d, n);
    ct_down_bytes(k_got, k, (size_t)n);
    double ms_f, ms_b;
    lp_rng r3 = r2;
    CT_TIME(ms_f, ct_be->ops->dropout_forward(o, k, dx, n, p, &r3));
    CT_TIME(ms_b, ct_be->ops->dropout_backward(d, ddy, k, n, p));
    char shape[48];
    snprintf(shape, sizeof shape, "n=%lld p=%g lane=%u", (long long)n, (double)p, (unsigned)lane);
    int64_t kdiff = 0;
    for (int64_t i = 0; i < n; i++)
        kdiff += k_got[i] != k_want[i];
    cases++;
    int kfail = kdiff != 0 || r1.offset != r2.offset || r1.lane != r2.lane;
    fails += kfail;
    printf("%-28s %-30s %lld of %lld mask elements differ, rng offset %llu vs %llu  %s\n", "dropout_forward mask",
           shape, (long long)kdiff, (long long)n, (unsigned long long)r2.offset, (unsigned long long)r1.offset,
           kfail ? "FAIL" : "PASS");
    CASE("dropout_forward", shape, o_got, o_want, n, 0, 0, ms_f);
    CASE("dropout_backward", shape, d_got, d_want, n, 0, 0, ms_b);
    ct_free_all();
    fails += kt_release("dropout");
}

/* ---- qweight_dequantize: NF4 (double quant or not, the bnb CPU row lookup) and int8 on a
 * weight uploaded with lp_cuda_qweight_upload: the same rounded f32 operations, bit for bit,
 * over a range starting mid-block at an odd element ---- */
static void dequant_case(lp_dtype dt, int64_t rows, int64_t cols, bool dq, bool cpu_rows)
{
    int64_t n = rows * cols;
    float *w = kt_rand_f(n, -0.5f, 0.5f);
    lp_qweight hq, dqw;
    if (lp_qweight_quantize(&hq, dt, w, rows, cols, dq, "test weight") != LP_OK)
        ct_die("quantize");
    hq.bnb_cpu_rows = cpu_rows;
    if (lp_cuda_qweight_upload(ct_be, &hq, &dqw, "test weight") != LP_OK)
        ct_die("qweight upload");
    int64_t start = n > 100 ? 37 : 0, len = n - start;
    float *want = kt_nan(len), *got = kt_nan(len);
    ct_ref->qweight_dequantize(want, &hq, start, len);
    float *o = ct_dnan(len);
    ct_be->ops->qweight_dequantize(o, &dqw, start, len);
    ct_down(got, o, len);
    double ms;
    CT_TIME(ms, ct_be->ops->qweight_dequantize(o, &dqw, start, len));
    char op[48], shape[64];
    snprintf(op, sizeof op, "qweight_dequantize %s%s%s", lp_dtype_name(dt), dq ? " dq" : "", cpu_rows ? " rows" : "");
    snprintf(shape, sizeof shape, "%lldx%lld from %lld", (long long)rows, (long long)cols, (long long)start);
    CASE(op, shape, got, want, len, 0, 0, ms);
    lp_cuda_qweight_free(ct_be, &dqw);
    lp_qweight_free(&hq);
    ct_free_all();
    fails += kt_release("dequant");
}

static void test_rest(void)
{
    static const int64_t sw[][3] = {{1, 1, 1}, {7, 33, 70}, {129, 1000, 2000}, {512, 2816, 5632}};
    for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++)
        swiglu_case(sw[i][0], sw[i][1], sw[i][2]);
    static const int64_t bs[][2] = {{1, 1}, {7, 33}, {513, 768}, {4097, 3072}, {16384, 129}};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        bias_case(bs[i][0], bs[i][1]);
    static const int64_t ns[] = {1, 1000, 65537, (1 << 22) + 3};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        scale_add_case(ns[i]);
        sum_squares_case(ns[i]);
        adamw_case(ns[i]);
        dropout_case(ns[i], 0.1f, 0);
    }
    adamw_multi_case();
    dropout_case(4099, 0.0f, 0);
    dropout_case(4099, 0.9f, 0);
    dropout_case(4099, 0.1f, 3);
    dropout_case(65537, 0.1f, 1);
    rows_case(5, 3, 1);
    rows_case(64, 100, 768); /* more picks than rows: repeats */
    rows_case(4096, 8, 896);
    pool_case(1, 1, 1, false);
    pool_case(3, 17, 65, true);
    pool_case(32, 128, 768, true);
    pool_case(8, 512, 384, false);
    dequant_case(LP_DTYPE_NF4, 7, 9, false, false);
    dequant_case(LP_DTYPE_NF4, 64, 768, true, false);
    dequant_case(LP_DTYPE_NF4, 33, 80, true, true); /* cols % 64 != 0: per-row lookup differs */
    dequant_case(LP_DTYPE_NF4, 300, 1000, false, false);
    dequant_case(LP_DTYPE_NF4, 2048, 2048, true, false);
    dequant_case(LP_DTYPE_INT8, 33, 77, false, false);
}

/* The caching allocator over cudaMalloc: tagged counters, reuse, empty_cache; and the pending
 * error of a void op (an unsupported dequantize, a foreign free) returned by the next sync. */
static void test_device_memory(void)
{
    const int ACT = LP_MEM_CATEGORY_ACTIVATION, GRAD = LP_MEM_CATEGORY_GRADIENT;
    lp_cu_alloc_stats s0, s1, s2;
    lp_cuda_empty_cache(ct_be);
    lp_cuda_alloc_stats(ct_be, &s0);
    void *a = ct_be->alloc_tagged(ct_be->ctx, 1000, ACT, "a");
    void *g = ct_be->alloc_tagged(ct_be->ctx, 3u << 20, GRAD, "g"); /* class 4 MiB */
    lp_cuda_alloc_stats(ct_be, &s1);
    int ok = a && g && s1.allocated[ACT] - s0.allocated[ACT] == 1024 &&
             s1.allocated[GRAD] - s0.allocated[GRAD] == (4 << 20) && s1.reserved_total >= s1.allocated_total &&
             s1.allocated[LP_MEM_CATEGORY_OTHER] >= (32 << 20); /* the cuBLASLt workspace */
    ct_be->free(ct_be->ctx, a);
    void *a2 = ct_be->alloc_tagged(ct_be->ctx, 900, ACT, "a2"); /* same class: the cached block */
    ok = ok && a2 == a;
    ct_be->free(ct_be->ctx, a2);
    ct_be->free(ct_be->ctx, g);
    lp_cuda_empty_cache(ct_be);
    lp_cuda_alloc_stats(ct_be, &s2);
    ok = ok && s2.reserved_total == s2.allocated_total && s2.allocated_total == s0.allocated_total &&
         ct_be->sync(ct_be->ctx) == LP_OK;
    cases++, fails += !ok;
    printf("%-28s %-30s allocated +%lld / +%lld, workspace %lld MiB, reserved %lld after empty_cache  %s\n",
           "device allocator", "tagged, reuse, empty_cache", (long long)(s1.allocated[ACT] - s0.allocated[ACT]),
           (long long)(s1.allocated[GRAD] - s0.allocated[GRAD]),
           (long long)(s1.allocated[LP_MEM_CATEGORY_OTHER] >> 20), (long long)s2.reserved_total, ok ? "PASS" : "FAIL");

    int local = 0;
    ct_be->free(ct_be->ctx, &local); /* not a device block: kept, reported at sync */
    lp_status st1 = ct_be->sync(ct_be->ctx);
    int ok1 = st1 == LP_STATUS_INVALID_ARG && strstr(lp_err_msg(), "did not allocate");
    lp_qweight fake = {.dtype = LP_DTYPE_GGML, .rows = 1, .cols = 32, .n = 32};
    ct_be->ops->qweight_dequantize(NULL, &fake, 0, 32);
    lp_status st2 = ct_be->sync(ct_be->ctx);
    int ok2 = st2 == LP_STATUS_UNSUPPORTED && strstr(lp_err_msg(), "qweight_dequantize");
    lp_status st3 = ct_be->sync(ct_be->ctx); /* cleared */
    cases++, fails += !(ok1 && ok2 && st3 == LP_OK);
    printf("%-28s %-30s %s\n", "pending errors at sync", "foreign free, unsupported op",
           ok1 && ok2 && st3 == LP_OK ? "PASS" : "FAIL");
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
    test_device_memory();
    test_sgemm();
    test_gemm_bf16();
    test_bf16_train();
    test_gelu();
    test_rest();
    printf("%d of %d cases passed\n", cases - fails, cases);
    return fails ? 1 : 0;
}
