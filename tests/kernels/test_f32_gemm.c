/* Packed f32 weight GEMM (f32_gemm.c): the active ISA level's optimized kernel against the
 * reference (double sums) and against OpenBLAS sgemm on the unpacked weight, over odd
 * shapes: N = 1 (the decode tile), N past one row chunk (256 rows AVX-512, 192 AVX2, 128
 * baseline) and not a multiple of the 8-, 6- or 4-row tile; C past one and several 256-wide
 * K blocks with a ragged (and odd) last block; OC not a multiple of the 32-wide panel, and
 * past one 8-panel block;
 * with and without bias, many threads and one; the packed layout's unpacking (exact); the
 * backward (dinp = dout @ W on the panels, ref and opt, and through the quant entry: the
 * dot-product tiles below 16 / 128 / 64 rows at avx512 / avx2 / baseline and the transposing
 * path from there, both on each level; dinp's 32-column panels, K blocks of 256 and o
 * blocks of 256 each with a ragged end) and
 * eager paths; LoRA over a packed base against LoRA over the same f32 base; guard bytes; memory category; errors. Run once
 * per ISA level (ctest -L isa). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static const lp_kernel_table *R, *O;

static int run(int64_t N, int64_t C, int64_t OC, bool with_bias)
{
    float *w = kt_rand_f(OC * C, -1, 1), *x = kt_rand_f(N * C, -1, 1), *dout = kt_rand_f(N * OC, -1, 1);
    float *bias = with_bias ? kt_rand_f(OC, -1, 1) : NULL;
    lp_qweight q;
    int f = 0;
    if (lp_qweight_pack_f32(&q, w, OC, C, "test") != LP_OK)
        return 1;
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *o2 = kt_nan(N * OC), *o3 = kt_nan(N * OC),
          *o4 = kt_nan(N * OC), *of = kt_nan(N * OC);
    float *d0 = kt_nan(N * C), *d1 = kt_nan(N * C), *df = kt_nan(N * C), *d2 = kt_nan(N * C),
          *d3 = kt_nan(N * C);
    f += R->f32_matmul_forward(o0, x, &q, bias, N, C, OC) != LP_OK;
    f += O->f32_matmul_forward(o1, x, &q, bias, N, C, OC) != LP_OK;
    f += O->qmatmul_forward(o2, x, &q, bias, N, C, OC) != LP_OK; /* the quant entry routes packed f32 here */
    f += lp_qmatmul_forward(o3, x, &q, bias, N, C, OC) != LP_OK;
    f += lp_qmatmul_forward_eager(o4, x, &q, bias, N, C, OC) != LP_OK;
    lp_sgemm(false, true, N, OC, C, 1.0f, x, C, w, C, 0.0f, of, OC);
    if (bias)
        for (int64_t i = 0; i < N * OC; i++)
            of[i] += bias[i % OC];
    f += R->qmatmul_backward(d0, dout, &q, N, C, OC) != LP_OK;
    f += O->qmatmul_backward(d1, dout, &q, N, C, OC) != LP_OK;
    f += R->f32_matmul_backward(d2, dout, &q, N, C, OC) != LP_OK;
    f += O->f32_matmul_backward(d3, dout, &q, N, C, OC) != LP_OK;
    lp_sgemm(false, false, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, df, C);
    char what[96];
    snprintf(what, sizeof what, "f32 gemm [%lld,%lld,%lld]%s", (long long)N, (long long)C, (long long)OC,
             bias ? " bias" : "");
    /* Same operands, only the f32 summation order differs from the double reference:
     * |error| <= ~C * 2^-24 * sum|x w| in the worst case, far less in practice (|x|, |w| <= 1,
     * sum|x w| ~ C / 4); 1e-6 * C is the bf16 GEMM test's bound, ~1e3 x below the effect
     * of one wrong or missing product (~0.25) and of a misplaced panel. */
    f += kt_close(what, o1, o0, N * OC, 1e-6 * C, 1e-6);
    f += kt_close(what, o2, o0, N * OC, 1e-6 * C, 1e-6);
    f += kt_close(what, o3, o0, N * OC, 1e-6 * C, 1e-6);
    f += kt_close(what, o4, o0, N * OC, 1e-6 * C, 1e-6);
    f += kt_close(what, of, o0, N * OC, 1e-6 * C, 1e-6); /* OpenBLAS on the unpacked weight */
    /* backward: dinp = dout @ W, the unpacked weight exact; f32 sums over OC */
    f += kt_close(what, d1, d0, N * C, 1e-6 * OC, 1e-6);
    f += kt_close(what, df, d0, N * C, 1e-6 * OC, 1e-6);
    f += kt_close(what, d2, d0, N * C, 1e-6 * OC, 1e-6); /* the packed dot-product kernel */
    f += kt_close(what, d3, d0, N * C, 1e-6 * OC, 1e-6);
    /* unpacking: element for element the weight, bit-exact */
    float *full0 = kt_nan(OC * C), *full1 = kt_nan(OC * C);
    R->qweight_dequantize(full0, &q, 0, OC * C);
    O->qweight_dequantize(full1, &q, 0, OC * C);
    for (int64_t i = 0; i < OC * C; i++)
        if (full0[i] != w[i] || full1[i] != w[i]) {
            fprintf(stderr, "  %s: unpacked element %lld is %g / %g, want %g\n", what, (long long)i,
                    (double)full0[i], (double)full1[i], (double)w[i]);
            f++;
            break;
        }
    lp_qweight_free(&q);
    return f + kt_release(what);
}

static const int64_t shapes[][3] = {{1, 1, 1},     {1, 7, 33},     {3, 17, 5},     {8, 64, 64},    {9, 63, 129},
                                    {70, 130, 33}, {131, 601, 97}, {1, 768, 768},  {1, 1001, 70},  {5, 896, 200},
                                    {67, 96, 1000}, {49, 257, 64}, {200, 512, 96}, {7, 300, 31},
                                    {300, 520, 300}, {16, 300, 64}, {128, 288, 520}};

static void test_table(void **state)
{
    (void)state;
    int f = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int b = 0; b < 2; b++)
            f += run(shapes[s][0], shapes[s][1], shapes[s][2], b);
    assert_int_equal(f, 0);
}

static void test_one_thread(void **state)
{
    int t = lp_threads_get();
    lp_threads_set(1);
    test_table(state);
    lp_threads_set(t);
}

/* LoRA over a packed base (its forward's base GEMM and its backward's dinp run the packed
 * kernels) against LoRA over the same weight in f32 (OpenBLAS): with and without dropout
 * (the same rng, so the same mask), bias, rank 4. Only f32 summation order differs: the
 * bounds are the GEMM table's (1e-6 x the reduction length), ~1e3 x below one wrong product. */
static float *zeros(int64_t n)
{
    float *p = kt_alloc((size_t)n * sizeof(float));
    memset(p, 0, (size_t)n * sizeof(float));
    return p;
}

static int lora_case(int64_t N, int64_t C, int64_t OC, float p)
{
    const int64_t r = 4;
    const float s = 2.0f;
    float *w = kt_rand_f(OC * C, -1, 1), *x = kt_rand_f(N * C, -1, 1), *dout = kt_rand_f(N * OC, -1, 1);
    float *bias = kt_rand_f(OC, -1, 1), *A = kt_rand_f(r * C, -1, 1), *B = kt_rand_f(OC * r, -1, 1);
    lp_qweight q;
    if (lp_qweight_pack_f32(&q, w, OC, C, "lora base") != LP_OK)
        return 1;
    const lp_lora_base bf = {.weight = w, .bias = bias}, bq = {.q = &q, .bias = bias};
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *u0 = kt_nan(N * r), *u1 = kt_nan(N * r);
    float *d0 = kt_nan(N * C), *d1 = kt_nan(N * C), *dA0 = zeros(r * C), *dA1 = zeros(r * C);
    float *dB0 = zeros(OC * r), *dB1 = zeros(OC * r);
    uint8_t *k0 = p > 0 ? kt_alloc(N * C) : NULL, *k1 = p > 0 ? kt_alloc(N * C) : NULL;
    lp_rng g0, g1;
    lp_rng_init(&g0, 7, 1);
    lp_rng_init(&g1, 7, 1);
    int f = 0;
    f += O->lora_forward(o0, u0, k0, x, &bf, A, B, s, p, p > 0 ? &g0 : NULL, N, C, OC, r) != LP_OK;
    f += O->lora_forward(o1, u1, k1, x, &bq, A, B, s, p, p > 0 ? &g1 : NULL, N, C, OC, r) != LP_OK;
    f += O->lora_backward(d0, dA0, dB0, dout, x, u0, k0, &bf, A, B, s, p, N, C, OC, r) != LP_OK;
    f += O->lora_backward(d1, dA1, dB1, dout, x, u1, k1, &bq, A, B, s, p, N, C, OC, r) != LP_OK;
    char what[96];
    snprintf(what, sizeof what, "lora packed base [%lld,%lld,%lld] p %g", (long long)N, (long long)C,
             (long long)OC, (double)p);
    f += kt_close(what, o1, o0, N * OC, 1e-6 * C, 1e-6);
    f += kt_close(what, u1, u0, N * r, 1e-30, 0); /* x @ A^T: the same sgemm call both ways */
    f += kt_close(what, d1, d0, N * C, 1e-6 * OC, 1e-6);
    f += kt_close(what, dA1, dA0, r * C, 1e-30, 0);
    f += kt_close(what, dB1, dB0, OC * r, 1e-30, 0);
    lp_qweight_free(&q);
    return f + kt_release(what);
}

static void test_lora_packed_base(void **state)
{
    (void)state;
    int f = 0;
    f += lora_case(37, 130, 96, 0.0f);
    f += lora_case(64, 257, 70, 0.1f);
    f += lora_case(5, 64, 33, 0.0f);
    assert_int_equal(f, 0);
}

/* Bytes: rows rounded to panels of 32, the block to 64 bytes; QUANTIZED_WEIGHT. */
static void test_memory(void **state)
{
    (void)state;
    assert_int_equal(lp_qweight_f32_plan_nbytes(33, 7), (size_t)(64 * 7 * 4));
    assert_int_equal(lp_qweight_f32_plan_nbytes(768, 768), (size_t)(768 * 768 * 4));
    assert_int_equal(lp_qweight_f32_plan_nbytes(0, 8), 0);
    float *w = kt_rand_f(40 * 9, -1, 1);
    lp_alloc_stats a, b;
    lp_alloc_stats_get(&a);
    lp_qweight q;
    assert_int_equal(lp_qweight_pack_f32(&q, w, 40, 9, "t"), LP_OK);
    lp_alloc_stats_get(&b);
    assert_int_equal(lp_qweight_nbytes(&q), lp_qweight_f32_plan_nbytes(40, 9));
    assert_int_equal(b.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT] - a.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT],
                     lp_qweight_f32_plan_nbytes(40, 9));
    lp_qweight_free(&q);
    assert_int_equal(kt_release("memory"), 0);
}

static void test_errors(void **state)
{
    (void)state;
    float w[6] = {1, 2, 3, 4, 5, 6}, x[3] = {1, 1, 1}, out[4];
    lp_qweight q, b;
    assert_int_equal(lp_qweight_pack_f32(&q, w, 0, 3, "layer.w"), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "layer.w"));
    assert_null(q.mem);
    assert_int_equal(lp_qweight_pack_f32(&q, w, 2, 3, "layer.w"), LP_OK);
    assert_int_equal(O->f32_matmul_forward(out, x, &q, NULL, 1, 2, 3), LP_STATUS_INVALID_ARG);
    assert_int_equal(R->f32_matmul_forward(out, x, &q, NULL, 1, 2, 3), LP_STATUS_INVALID_ARG);
    assert_int_equal(O->f32_matmul_forward(out, x, &q, NULL, 1, 3, 2), LP_OK);
    assert_true(out[0] == 6.0f && out[1] == 15.0f);
    /* a weight of another format is refused, not read as packed f32 */
    assert_int_equal(lp_qweight_pack_bf16(&b, w, 2, 3, "layer.b"), LP_OK);
    assert_int_equal(O->f32_matmul_forward(out, x, &b, NULL, 1, 3, 2), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "not packed f32"));
    lp_qweight_free(&b);
    lp_qweight_free(&q);
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
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_one_thread),
        cmocka_unit_test(test_lora_packed_base),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
