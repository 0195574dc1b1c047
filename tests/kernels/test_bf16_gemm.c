/* bf16 weight GEMM (bf16_gemm.c): the active ISA level's optimized kernel against the
 * reference (bf16-rounded operands, double sums) over odd shapes (N, C, OC odd; C odd so
 * the last pair is padded; OC not a multiple of the 32-wide panel; N past one 64-row chunk
 * and not a multiple of the 8- or 4-row tile), with and without bias, many threads and one;
 * the packed layout's unpacking; the whole against f32 arithmetic within bf16 rounding;
 * the backward (dequantize + GEMM) and eager paths; guard bytes; errors. Run once per ISA
 * level (ctest -L isa). */
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
    if (lp_qweight_pack_bf16(&q, w, OC, C, "test") != LP_OK)
        return 1;
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *o2 = kt_nan(N * OC), *o3 = kt_nan(N * OC),
          *of = kt_nan(N * OC);
    float *d0 = kt_nan(N * C), *d1 = kt_nan(N * C);
    f += R->bf16_matmul_forward(o0, x, &q, bias, N, C, OC) != LP_OK;
    f += O->bf16_matmul_forward(o1, x, &q, bias, N, C, OC) != LP_OK;
    f += O->qmatmul_forward(o2, x, &q, bias, N, C, OC) != LP_OK; /* the quant entry routes bf16 here */
    f += lp_qmatmul_forward(o3, x, &q, bias, N, C, OC) != LP_OK;
    lp_sgemm(false, true, N, OC, C, 1.0f, x, C, w, C, 0.0f, of, OC);
    if (bias)
        for (int64_t i = 0; i < N * OC; i++)
            of[i] += bias[i % OC];
    f += R->qmatmul_backward(d0, dout, &q, N, C, OC) != LP_OK;
    f += O->qmatmul_backward(d1, dout, &q, N, C, OC) != LP_OK;
    char what[96];
    snprintf(what, sizeof what, "bf16 gemm [%lld,%lld,%lld]%s", (long long)N, (long long)C, (long long)OC,
             bias ? " bias" : "");
    /* Same bf16 operands, products exact in f32: only the f32 summation order differs from
     * the double reference, <= C * 2^-24 * sum|x w| (sum|x w| <= C here); 1e-6 * C is that
     * bound's scale and ~100x below a single wrong bf16 element's effect (~|x w| 2^-8). */
    f += kt_close(what, o1, o0, N * OC, 1e-6 * C, 1e-6);
    f += kt_close(what, o2, o0, N * OC, 1e-6 * C, 1e-6);
    f += kt_close(what, o3, o0, N * OC, 1e-6 * C, 1e-6);
    /* Against f32 arithmetic on the unrounded operands: rounding each operand to bf16
     * moves a product by <= 2 * 2^-9 relative, so |error| <= 2^-8 sum|x w| <= C / 256
     * (|x|, |w| <= 1); 4e-3 * C is that bound. */
    f += kt_close(what, o1, of, N * OC, 4e-3 * C, 0);
    /* backward: dinp = dout @ W(bf16), the unpacked weight exact; opt sums in f32 */
    f += kt_close(what, d1, d0, N * C, 1e-5 * OC, 1e-5);
    /* unpacking: element for element the weight rounded to bf16 */
    float *full0 = kt_nan(OC * C), *full1 = kt_nan(OC * C);
    R->qweight_dequantize(full0, &q, 0, OC * C);
    O->qweight_dequantize(full1, &q, 0, OC * C);
    for (int64_t i = 0; i < OC * C; i++)
        if (full0[i] != lp_bf16_to_f32(lp_f32_to_bf16(w[i])) || full1[i] != full0[i]) {
            fprintf(stderr, "  %s: unpacked element %lld is %g, want %g\n", what, (long long)i, (double)full1[i],
                    (double)lp_bf16_to_f32(lp_f32_to_bf16(w[i])));
            f++;
            break;
        }
    lp_qweight_free(&q);
    return f + kt_release(what);
}

static const int64_t shapes[][3] = {{1, 1, 1},    {1, 7, 33},    {3, 17, 5},      {8, 64, 64},
                                    {9, 63, 129}, {70, 130, 33}, {131, 201, 97},  {1, 768, 768},
                                    {5, 896, 200}, {67, 96, 1000}};

static void test_table(void **state)
{
    (void)state;
    int f = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int b = 0; b < 2; b++)
            f += run(shapes[s][0], shapes[s][1], shapes[s][2], b);
    assert_int_equal(f, 0);
}

/* Training (bf16_train.c): both packings, dX = dY W and dW += dY^T X, optimized against
 * the reference, and the repack after the master weight changes. */
static int run_train(int64_t N, int64_t C, int64_t OC)
{
    float *w = kt_rand_f(OC * C, -1, 1), *x = kt_rand_f(N * C, -1, 1), *dout = kt_rand_f(N * OC, -1, 1);
    lp_qweight q;
    int f = 0;
    if (lp_qweight_pack_bf16_train(&q, w, OC, C, "train") != LP_OK)
        return 1;
    float *d0 = kt_nan(N * C), *d1 = kt_nan(N * C), *d2 = kt_nan(N * C), *df = kt_nan(N * C);
    float *g0 = kt_rand_f(OC * C, -1, 1), *g1 = kt_nan(OC * C), *gf = kt_nan(OC * C), *o0 = kt_nan(N * OC),
          *o1 = kt_nan(N * OC);
    memcpy(g1, g0, (size_t)(OC * C) * sizeof(float)); /* dW accumulates: same starting values */
    memcpy(gf, g0, (size_t)(OC * C) * sizeof(float));
    f += R->bf16_matmul_backward(d0, g0, dout, x, &q, N, C, OC) != LP_OK;
    f += O->bf16_matmul_backward(d1, g1, dout, x, &q, N, C, OC) != LP_OK;
    f += lp_qmatmul_backward(d2, dout, &q, N, C, OC) != LP_OK; /* the quant entry takes W^T's panels */
    lp_sgemm(false, false, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, df, C);
    lp_sgemm(true, false, OC, C, N, 1.0f, dout, OC, x, C, 1.0f, gf, C);
    char what[96];
    snprintf(what, sizeof what, "bf16 train [%lld,%lld,%lld]", (long long)N, (long long)C, (long long)OC);
    /* same bf16 operands, exact products: f32 summation order only, <= K 2^-24 sum|a b|
     * with the reduction length K (OC for dX, N for dW) and |a|, |b| <= 1 (dW's start <= 1) */
    f += kt_close(what, d1, d0, N * C, 1e-6 * OC, 1e-6);
    f += kt_close(what, d2, d0, N * C, 1e-6 * OC, 1e-6);
    f += kt_close(what, g1, g0, OC * C, 1e-6 * (N + 1), 1e-6);
    /* against f32 on the unrounded operands: <= 2^-8 sum|a b| (see the forward) */
    f += kt_close(what, d1, df, N * C, 4e-3 * OC, 0);
    f += kt_close(what, g1, gf, OC * C, 4e-3 * N + 1e-5, 0);
    /* the repack: a changed master weight gives the forward of the new weight */
    for (int64_t i = 0; i < OC * C; i++)
        w[i] = -0.5f * w[i] + 0.25f;
    lp_qweight_repack_bf16(&q, w);
    f += O->bf16_matmul_forward(o1, x, &q, NULL, N, C, OC) != LP_OK;
    lp_qweight q2;
    f += lp_qweight_pack_bf16(&q2, w, OC, C, "fresh") != LP_OK;
    f += R->bf16_matmul_forward(o0, x, &q2, NULL, N, C, OC) != LP_OK;
    f += kt_close(what, o1, o0, N * OC, 1e-6 * C, 1e-6);
    f += R->bf16_matmul_backward(d0, NULL, dout, NULL, &q, N, C, OC) != LP_OK;
    f += O->bf16_matmul_backward(d1, NULL, dout, NULL, &q, N, C, OC) != LP_OK;
    f += kt_close(what, d1, d0, N * C, 1e-6 * OC, 1e-6);
    lp_qweight_free(&q2);
    lp_qweight_free(&q);
    return f + kt_release(what);
}

static void test_train(void **state)
{
    (void)state;
    int f = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        f += run_train(shapes[s][0], shapes[s][1], shapes[s][2]);
    f += run_train(200, 48, 40); /* dW's reduction past several 64-row chunks, odd N below */
    f += run_train(257, 33, 65);
    assert_int_equal(f, 0);
}

static void test_train_one_thread(void **state)
{
    int t = lp_threads_get();
    lp_threads_set(1);
    test_train(state);
    lp_threads_set(t);
}

/* The repack after an optimizer step: the tiled, streaming-store packing (both packings
 * from 32 x 32 tiles) writes exactly the reference's bytes, padding included, over shapes
 * with partial tiles in either dimension, odd row and column counts (the pad pair), one
 * tile and many threads; with the values whose rounding is special (ties to even, NaN kept
 * quiet, infinities, signed zero, subnormals, the largest finite that rounds to inf). */
static void test_repack(void **state)
{
    (void)state;
    static const int64_t rs[][2] = {{1, 1}, {1, 2}, {2, 1}, {32, 32}, {33, 31}, {31, 33}, {64, 96},
                                    {70, 99}, {129, 257}, {300, 701}, {768, 40}};
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xffa00000u, 0x7f800000u,
                                       0xff800000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu,
                                       0x3f80ffffu, 0x00008000u};
    int f = 0;
    for (size_t s = 0; s < sizeof rs / sizeof rs[0]; s++) {
        const int64_t R_ = rs[s][0], C_ = rs[s][1];
        float *w = kt_rand_f(R_ * C_, -2, 2);
        for (size_t i = 0; i < sizeof special / sizeof special[0] && (int64_t)(i * 7) < R_ * C_; i++)
            memcpy(&w[i * 7], &special[i], 4);
        lp_qweight q0, q1;
        f += lp_qweight_pack_bf16_train(&q0, w, R_, C_, "ref") != LP_OK;
        f += lp_qweight_pack_bf16_train(&q1, w, R_, C_, "opt") != LP_OK;
        const size_t nb = lp_qweight_nbytes(&q0);
        memset(q0.mem, 0, nb);
        memset(q1.mem, 0, nb);
        R->bf16_repack(&q0, w);
        O->bf16_repack(&q1, w);
        if (memcmp(q0.mem, q1.mem, nb)) {
            const uint8_t *a = q0.mem, *b = q1.mem;
            size_t i = 0;
            while (a[i] == b[i])
                i++;
            fprintf(stderr, "  repack [%lld,%lld]: byte %zu of %zu differs (%02x, want %02x)\n", (long long)R_,
                    (long long)C_, i, nb, b[i], a[i]);
            f++;
        }
        /* the public entry (the active table, a profiled op), as the pack calls it */
        lp_qweight_free(&q1);
        f += lp_qweight_pack_bf16_train(&q1, w, R_, C_, "public") != LP_OK;
        f += memcmp(q0.mem, q1.mem, nb) != 0;
        lp_qweight_free(&q0);
        lp_qweight_free(&q1);
    }
    assert_int_equal(f + kt_release("repack"), 0);
}

static void test_repack_one_thread(void **state)
{
    int t = lp_threads_get();
    lp_threads_set(1);
    test_repack(state);
    lp_threads_set(t);
}

/* Both packings in one QUANTIZED_WEIGHT block of the planned size; a weight packed for
 * inference has no W^T panels and the backward says so. */
static void test_train_memory(void **state)
{
    (void)state;
    assert_int_equal(lp_qweight_bf16_train_plan_nbytes(33, 7), (size_t)(64 * 8 * 2 + 32 * 34 * 2));
    float *w = kt_rand_f(40 * 9, -1, 1), dout[40] = {0}, dx[9];
    lp_alloc_stats a, b;
    lp_alloc_stats_get(&a);
    lp_qweight q;
    assert_int_equal(lp_qweight_pack_bf16_train(&q, w, 40, 9, "t"), LP_OK);
    lp_alloc_stats_get(&b);
    assert_int_equal(lp_qweight_nbytes(&q), lp_qweight_bf16_train_plan_nbytes(40, 9));
    assert_int_equal(b.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT] - a.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT],
                     lp_qweight_bf16_train_plan_nbytes(40, 9));
    lp_qweight_free(&q);
    assert_int_equal(lp_qweight_pack_bf16(&q, w, 40, 9, "t"), LP_OK);
    assert_int_equal(O->bf16_matmul_backward(dx, NULL, dout, NULL, &q, 1, 9, 40), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "transposed"));
    assert_int_equal(R->bf16_matmul_backward(dx, NULL, dout, NULL, &q, 1, 9, 40), LP_STATUS_INVALID_ARG);
    lp_qweight_free(&q);
    assert_int_equal(kt_release("train memory"), 0);
}

static void test_one_thread(void **state)
{
    int t = lp_threads_get();
    lp_threads_set(1);
    test_table(state);
    lp_threads_set(t);
}

/* Bytes: rows rounded to panels of 32, cols to even, the block to 64 bytes; QUANTIZED_WEIGHT. */
static void test_memory(void **state)
{
    (void)state;
    assert_int_equal(lp_qweight_bf16_plan_nbytes(33, 7), (size_t)(64 * 8 * 2));
    assert_int_equal(lp_qweight_bf16_plan_nbytes(768, 768), (size_t)(768 * 768 * 2));
    assert_int_equal(lp_qweight_bf16_plan_nbytes(0, 8), 0);
    float *w = kt_rand_f(40 * 9, -1, 1);
    lp_alloc_stats a, b;
    lp_alloc_stats_get(&a);
    lp_qweight q;
    assert_int_equal(lp_qweight_pack_bf16(&q, w, 40, 9, "t"), LP_OK);
    lp_alloc_stats_get(&b);
    assert_int_equal(lp_qweight_nbytes(&q), lp_qweight_bf16_plan_nbytes(40, 9));
    assert_int_equal(b.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT] - a.live[LP_MEM_CATEGORY_QUANTIZED_WEIGHT],
                     lp_qweight_bf16_plan_nbytes(40, 9));
    lp_qweight_free(&q);
    assert_int_equal(kt_release("memory"), 0);
}

static void test_errors(void **state)
{
    (void)state;
    float w[6] = {1, 2, 3, 4, NAN, 6}, x[3] = {0}, out[4];
    lp_qweight q;
    assert_int_equal(lp_qweight_pack_bf16(&q, w, 2, 3, "layer.w"), LP_STATUS_NUMERIC);
    assert_non_null(strstr(lp_err_msg(), "layer.w"));
    assert_null(q.mem);
    assert_int_equal(lp_qweight_pack_bf16(&q, w, 0, 3, "layer.w"), LP_STATUS_INVALID_ARG);
    w[4] = 5;
    assert_int_equal(lp_qweight_pack_bf16(&q, w, 2, 3, "layer.w"), LP_OK);
    assert_int_equal(O->bf16_matmul_forward(out, x, &q, NULL, 1, 2, 3), LP_STATUS_INVALID_ARG);
    assert_int_equal(R->bf16_matmul_forward(out, x, &q, NULL, 1, 2, 3), LP_STATUS_INVALID_ARG);
    assert_int_equal(O->bf16_matmul_forward(out, x, &q, NULL, 1, 3, 2), LP_OK);
    assert_true(out[0] == 0.0f && out[1] == 0.0f);
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
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_train),
        cmocka_unit_test(test_train_one_thread),
        cmocka_unit_test(test_train_memory),
        cmocka_unit_test(test_repack),
        cmocka_unit_test(test_repack_one_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
