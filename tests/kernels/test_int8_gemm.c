/* The row-scaled int8 GEMM (i8gemm.c: `--dtype int8` inference) on a weight quantized into
 * tiles (lp_qweight_quantize_int8_tiles), run once per ISA level (test_int8_gemm_isa_<level>):
 *
 * - the quantizer: every dequantized tile value an integer multiple (at most 63) of
 *   max|w_row| / 63 (7-bit codes) and within half that step of the weight;
 * - bit for bit against the reference (plain loops over the tiles' elements): the int8
 *   products are summed exactly in int32 and each output is fma((float)sum, scale_w *
 *   scale_x, bias) on every level, so any difference is a bug (tolerance 0: memcmp);
 * - against f32 arithmetic on the dequantized weight, to the activation rounding bound:
 *   each element of a row moves by at most d / 2 (d = max|x_row| / 63), so an output by
 *   d / 2 * sum |w|, plus 1e-5 * sum |w x| for f32 rounding of the scale products; a wrong
 *   scale, sign or offset misses it by orders of magnitude;
 * - adversarial sums at C = LP_INT8_MAX_COLS: rows of +-63 against activations of +-1 at
 *   full scale, the largest |sum| the x + 64 offset produces (127 * 63 a product; the
 *   pmaddubsw pairs of two steps, added in int16, reach 4 * 127 * 63 = 32004): exact, so
 *   against the closed form too;
 * - 1 and 3 threads equal bit for bit; the shapes and weights quantizing refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "loupe/base.h"

static const lp_kernel_table *R, *O;

/* w (OC, C) in [-1, 1] with a few rows of other magnitudes and one zero row */
static float *make_w(int64_t OC, int64_t C)
{
    float *w = kt_rand_f(OC * C, -1, 1);
    for (int64_t o = 0; o < OC; o++) {
        const float s = o % 7 == 3 ? 0.0f : o % 5 == 1 ? 40.0f : o % 3 == 2 ? 1e-3f : 1.0f;
        for (int64_t k = 0; k < C; k++)
            w[o * C + k] *= s;
    }
    return w;
}

/* x (N, C): rows of different scales, an outlier channel in some, one all-zero row */
static float *make_x(int64_t N, int64_t C)
{
    float *x = kt_rand_f(N * C, -2, 2);
    for (int64_t i = 0; i < N; i++) {
        if (i % 11 == 5)
            memset(x + i * C, 0, (size_t)C * sizeof(float));
        if (i % 4 == 1)
            x[i * C + (i * 7) % C] = 60.0f;
        if (i % 3 == 2)
            for (int64_t k = 0; k < C; k++)
                x[i * C + k] *= 1e-2f;
    }
    return x;
}

static int run_shape(int64_t N, int64_t C, int64_t OC, bool with_bias)
{
    lp_qweight q;
    float *w = make_w(OC, C), *x = make_x(N, C), *bias = with_bias ? kt_rand_f(OC, -1, 1) : NULL;
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *wf = kt_nan(OC * C), *wt = kt_nan(OC * C);
    int f = 0;
    f += lp_qweight_quantize_int8_tiles(&q, w, OC, C, "int8 gemm test") != LP_OK;
    f += q.q != NULL || q.tiles != q.mem || lp_qweight_nbytes(&q) != lp_qweight_int8_tiles_nbytes(OC, C);
    R->qweight_dequantize(wf, &q, 0, OC * C);
    O->qweight_dequantize(wt, &q, 0, OC * C);
    f += memcmp(wf, wt, (size_t)(OC * C) * sizeof(float)) != 0;
    for (int64_t o = 0; o < OC; o++) { /* 7-bit codes: each value (a multiple of max|w_row| / 63) within half a step */
        float am = 0.0f;
        for (int64_t k = 0; k < C; k++)
            am = fmaxf(am, fabsf(w[o * C + k]));
        const double step = am / 63.0;
        for (int64_t k = 0; k < C && am > 0.0f; k++) {
            const double code = wf[o * C + k] / step;
            f += !(fabs(code - nearbyint(code)) <= 1e-3 && fabs(code) <= 63.0 + 1e-3 &&
                   fabs(wf[o * C + k] - w[o * C + k]) <= step * 0.5 * 1.0001);
        }
    }
    f += R->qmatmul_forward(o0, x, &q, bias, N, C, OC) != LP_OK;
    f += O->qmatmul_forward(o1, x, &q, bias, N, C, OC) != LP_OK;
    char what[96];
    snprintf(what, sizeof what, "int8 gemm [%lld,%lld,%lld]%s", (long long)N, (long long)C, (long long)OC,
             with_bias ? " + bias" : "");
    if (memcmp(o0, o1, (size_t)(N * OC) * sizeof(float))) {
        for (int64_t e = 0, shown = 0; e < N * OC && shown < 3; e++)
            if (memcmp(&o0[e], &o1[e], sizeof(float)) && ++shown)
                fprintf(stderr, "  %s: out[%lld] ref %.9g opt %.9g\n", what, (long long)e, (double)o0[e], (double)o1[e]);
        f++;
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < N; i++) {
        double amax = 0.0;
        for (int64_t k = 0; k < C; k++)
            amax = fmax(amax, fabs((double)x[i * C + k]));
        for (int64_t o = 0; o < OC; o++) {
            double exact = bias ? bias[o] : 0.0, wsum = 0.0, mag = 0.0;
            for (int64_t k = 0; k < C; k++) {
                exact += (double)wf[o * C + k] * x[i * C + k];
                wsum += fabs((double)wf[o * C + k]);
                mag += fabs((double)wf[o * C + k] * x[i * C + k]);
            }
            const double b = amax / LP_INT8_ACT_QMAX / 2.0 * wsum * 1.0001 + 1e-5 * (mag + (bias ? fabs(bias[o]) : 0.0)) + 1e-30;
            if (!(fabs(o1[i * OC + o] - exact) <= b) && bad++ < 3)
                fprintf(stderr, "  %s: out[%lld,%lld] %.9g vs f32 %.9g (bound %.3g)\n", what, (long long)i,
                        (long long)o, (double)o1[i * OC + o], exact, b);
        }
    }
    lp_qweight_free(&q);
    return f + (bad != 0) + kt_release(what);
}

static void test_shapes(void **state)
{
    (void)state;
    /* N: decode, below / at / past the AVX-512 (6) and AVX2 (3) row blocks, past the
     * activation chunk (129 x 4096); OC below, at and past the 8- and 16-row vectors and
     * the two-tile group; C one step block to many */
    static const int64_t shapes[][3] = {{1, 32, 1},    {1, 64, 17},    {2, 96, 15},    {3, 128, 8},
                                        {5, 256, 16},  {6, 256, 32},   {7, 800, 33},   {13, 512, 100},
                                        {37, 1024, 70}, {64, 768, 257}, {129, 4096, 37}, {1, 2048, 300}};
    int f = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        f += run_shape(shapes[s][0], shapes[s][1], shapes[s][2], s % 2 == 0);
    assert_int_equal(f, 0);
}

/* C = LP_INT8_MAX_COLS, weight rows all +1 or all -1 (q = +-63, scale 1/63), activation
 * rows all +1 or all -1 (q = +-63, d = 1/63): every output is +-63 * 63 * C exactly in
 * integers (the offset path's raw sum reaches 127 * 63 * C = 5.2e8 < 2^31, its int16 pairs
 * of two steps +-32004). The result must equal the reference bit for bit and
 * fma((float)(+-63 * 63 * C), (1/63) (1/63) in f32, 0) exactly. */
static void test_adversarial(void **state)
{
    (void)state;
    const int64_t N = 7, C = LP_INT8_MAX_COLS, OC = 18;
    float *w = kt_alloc((size_t)(OC * C) * sizeof(float)), *x = kt_alloc((size_t)(N * C) * sizeof(float));
    for (int64_t o = 0; o < OC; o++)
        for (int64_t k = 0; k < C; k++)
            w[o * C + k] = o % 2 ? -1.0f : 1.0f;
    for (int64_t i = 0; i < N; i++)
        for (int64_t k = 0; k < C; k++)
            x[i * C + k] = i % 3 ? 1.0f : -1.0f;
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC);
    lp_qweight q;
    assert_int_equal(lp_qweight_quantize_int8_tiles(&q, w, OC, C, "adversarial"), LP_OK);
    assert_int_equal(R->qmatmul_forward(o0, x, &q, NULL, N, C, OC), LP_OK);
    assert_int_equal(O->qmatmul_forward(o1, x, &q, NULL, N, C, OC), LP_OK);
    assert_memory_equal(o0, o1, (size_t)(N * OC) * sizeof(float));
    const float sc = (1.0f / 63.0f) * (1.0f / 63.0f); /* scale_w * d as the kernels form it */
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < OC; o++) {
            const int64_t sign = (o % 2 ? -1 : 1) * (i % 3 ? 1 : -1);
            const float want = fmaf((float)(sign * 63 * 63 * C), sc, 0.0f);
            if (o1[i * OC + o] != want)
                fail_msg("out[%lld,%lld] %.9g, want %.9g", (long long)i, (long long)o, (double)o1[i * OC + o],
                         (double)want);
        }
    lp_qweight_free(&q);
    assert_int_equal(kt_release("adversarial"), 0);
}

/* Each output is summed by one thread in one order: 1 and 3 threads (an uneven split of 7
 * tiles) agree bit for bit. */
static void test_threads(void **state)
{
    (void)state;
    const int64_t N = 21, C = 1024, OC = 100;
    const int t0 = lp_threads_get();
    lp_qweight q;
    assert_int_equal(lp_qweight_quantize_int8_tiles(&q, make_w(OC, C), OC, C, "threads"), LP_OK);
    float *x = make_x(N, C), *o1 = kt_nan(N * OC), *o3 = kt_nan(N * OC);
    lp_threads_set(1);
    assert_int_equal(O->qmatmul_forward(o1, x, &q, NULL, N, C, OC), LP_OK);
    lp_threads_set(3);
    assert_int_equal(O->qmatmul_forward(o3, x, &q, NULL, N, C, OC), LP_OK);
    lp_threads_set(t0);
    assert_memory_equal(o1, o3, (size_t)(N * OC) * sizeof(float));
    lp_qweight_free(&q);
    assert_int_equal(kt_release("threads"), 0);
}

/* Quantizing refuses columns that are not whole 32-steps or above the int32-exact bound,
 * and a non-finite weight, each with *q zeroed. */
static void test_errors(void **state)
{
    (void)state;
    assert_int_equal(lp_qweight_int8_tiles_nbytes(3, 48), 0);
    assert_int_equal(lp_qweight_int8_tiles_nbytes(3, LP_INT8_MAX_COLS + 32), 0);
    assert_int_equal(lp_qweight_int8_tiles_nbytes(17, 64), 2 * (128 + 16 * 64));
    float *w = kt_rand_f(3 * 64, -1, 1);
    lp_qweight q;
    assert_int_equal(lp_qweight_quantize_int8_tiles(&q, w, 3, 48, "odd"), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "48 columns"));
    assert_non_null(strstr(lp_err_msg(), "odd"));
    assert_null(q.q);
    assert_null(q.tiles);
    w[70] = NAN;
    assert_int_equal(lp_qweight_quantize_int8_tiles(&q, w, 3, 64, "nan"), LP_STATUS_NUMERIC);
    assert_non_null(strstr(lp_err_msg(), "[1, 6]"));
    assert_null(q.tiles);
    assert_int_equal(kt_release("errors"), 0);
}

int main(void)
{
    int isa_rc = kt_isa_init(); /* LP_ISA picks the level (the *_isa_<level> entries) */
    if (isa_rc)
        return isa_rc;
    R = lp_kernels_table(LP_KERNELS_IMPL_REF);
    O = lp_kernels_table(LP_KERNELS_IMPL_OPT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_adversarial),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
