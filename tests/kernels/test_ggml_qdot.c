/* GGML formats at run time: the quantizers against the `gguf` package (bytes equal), the
 * integer dot products against the gguf-dequantized blocks (random and adversarial, from
 * tests/golden/ggml_dequant), the quantized GEMM optimized (integer) against reference
 * (exact dequantization, double accumulation) and eager over odd shapes, the backward, and
 * the NF4 fused GEMV against NF4 dequantize-then-multiply.
 *
 * Tolerance of the integer paths: the activations are rounded to 8 bits per block, each
 * element by at most d_a / 2 (d_a = the block's max|x| / 127), so the dot product may move
 * by sum_blocks (d_a / 2) sum_block |w|; on top, f32 accumulation in another order, bounded
 * by 1e-5 * sum |w x|. The test computes that bound per output element and holds the
 * result to it; the bound is tight enough that a wrong scale, nibble order or sign shows
 * up (it is about 1 % of sum |w x| for random data). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "loupe/base.h"
#include "loupe/io.h"

static const lp_kernel_table *R, *O;
enum { QGEMM_MIN_ROWS = 8 }; /* LP_QGEMM_MIN_ROWS (cpu_kernels.h): prefill's tiled GEMM from here */

static const struct {
    const char *name;
    lp_ggml_type t;
} types[] = {
    {"Q8_0", LP_GGML_TYPE_Q8_0}, {"Q4_0", LP_GGML_TYPE_Q4_0}, {"Q4_1", LP_GGML_TYPE_Q4_1},
    {"Q4_K", LP_GGML_TYPE_Q4_K}, {"Q6_K", LP_GGML_TYPE_Q6_K}, {"F16", LP_GGML_TYPE_F16},
    {"BF16", LP_GGML_TYPE_BF16}, {"Q5_0", LP_GGML_TYPE_Q5_0}, {"Q5_1", LP_GGML_TYPE_Q5_1},
    {"Q5_K", LP_GGML_TYPE_Q5_K},
};
#define NTYPES (sizeof types / sizeof types[0])

static bool is_half(lp_ggml_type t)
{
    return t == LP_GGML_TYPE_F16 || t == LP_GGML_TYPE_BF16;
}

/* The allowed |integer result - exact| for W row w (C) times x (C), see the top. */
static double dot_bound(lp_ggml_type t, const float *w, const float *x, int64_t C)
{
    const int64_t ab =
        is_half(t) ? C : lp_ggml_type_traits_get(t)->block; /* the activation block: 32 or 256 */
    double b = 0.0, mag = 0.0;
    for (int64_t k0 = 0; k0 < C; k0 += ab) {
        double amax = 0.0, wsum = 0.0;
        for (int64_t k = k0; k < k0 + ab; k++) {
            amax = fmax(amax, fabs((double)x[k]));
            wsum += fabs((double)w[k]);
            mag += fabs((double)w[k] * x[k]);
        }
        b += is_half(t) ? 0.0 : amax / 127.0 / 2.0 * wsum * 1.0001;
    }
    return b + 1e-5 * mag + 1e-30;
}

static void test_quantize_vs_gguf(void **state)
{
    (void)state;
    lp_st_file *g = NULL;
    if (lp_st_open("tests/golden/ggml_quant/golden.safetensors", &g) != LP_OK)
        fail_msg("%s", lp_err_msg());
    const lp_st_tensor *in = lp_st_find(g, "input");
    assert_non_null(in);
    const int64_t n = (int64_t)in->numel;
    static const lp_ggml_type qt[] = {LP_GGML_TYPE_Q8_0, LP_GGML_TYPE_Q4_0};
    for (int i = 0; i < 2; i++) {
        const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(qt[i]);
        const lp_st_tensor *want = lp_st_find(g, tt->name);
        assert_non_null(want);
        assert_int_equal(want->numel, (uint64_t)(n / 32 * tt->bytes));
        uint8_t *got = malloc(want->numel);
        assert_non_null(got);
        lp_ggml_quantize(qt[i], in->data, got, n);
        int64_t bad = 0;
        for (uint64_t b = 0; b < want->numel; b++)
            if (got[b] != ((const uint8_t *)want->data)[b] && bad++ < 3)
                printf("%s byte %llu (block %llu): %u vs gguf %u\n", tt->name, (unsigned long long)b,
                       (unsigned long long)(b / (uint64_t)tt->bytes), got[b], ((const uint8_t *)want->data)[b]);
        printf("%-5s %lld blocks, %lld bytes differ\n", tt->name, (long long)(n / 32), (long long)bad);
        assert_int_equal(bad, 0);
        /* and the weight made from them round-trips through the GGML qweight exactly */
        lp_qweight q;
        assert_int_equal(lp_qweight_quantize_ggml(&q, qt[i], in->data, n / 32, 32, "golden"), LP_OK);
        assert_memory_equal(q.blocks, want->data, want->numel);
        lp_qweight_free(&q);
        free(got);
    }
    lp_st_close(g);
}

/* The integer dot of each golden block row (gguf's random and adversarial blocks) with
 * random activations, against the gguf-dequantized values in double. */
static void test_dot_vs_gguf(void **state)
{
    (void)state;
    lp_st_file *g = NULL;
    if (lp_st_open("tests/golden/ggml_dequant/golden.safetensors", &g) != LP_OK)
        fail_msg("%s", lp_err_msg());
    for (size_t i = 0; i < NTYPES; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s.blocks", types[i].name);
        const lp_st_tensor *b = lp_st_find(g, k);
        snprintf(k, sizeof k, "%s.values", types[i].name);
        const lp_st_tensor *v = lp_st_find(g, k);
        assert_non_null(b);
        assert_non_null(v);
        const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(types[i].t);
        const float *wv = v->data;
        /* rows of one block (K-quants) or of 2 blocks, so every adversarial block is a row */
        const int64_t cols = is_half(types[i].t) ? 2 : tt->block * (tt->block == 256 ? 1 : 2);
        const int64_t rows = (int64_t)v->numel / cols;
        lp_qweight q;
        assert_int_equal(lp_qweight_from_ggml(&q, types[i].t, b->data, rows, cols, "golden"), LP_OK);
        int bad = 0;
        for (int trial = 0; trial < 3; trial++) {
            float *x = kt_rand_f(cols, -1, 1);
            if (trial == 1) /* one large activation per block, the rest tiny */
                for (int64_t e = 0; e < cols; e++)
                    x[e] = e % 32 == 5 ? 100.0f : x[e] * 1e-3f;
            if (trial == 2) /* all-zero activations */
                memset(x, 0, (size_t)cols * sizeof *x);
            for (int64_t r = 0; r < rows; r++) {
                const float *w = wv + r * cols;
                bool finite = true;
                double want = 0.0;
                for (int64_t e = 0; e < cols; e++) {
                    finite = finite && isfinite(w[e]);
                    want += (double)w[e] * x[e];
                }
                if (!finite) /* F16 / BF16 golden rows hold inf on purpose: nothing to compare */
                    continue;
                const float got = lp_qweight_ggml_row_dot(&q, r, x);
                const double bound = dot_bound(types[i].t, w, x, cols);
                if (!(fabs(got - want) <= bound) && bad++ < 3)
                    printf("%s row %lld trial %d: %.9g vs %.9g (bound %.3g)\n", types[i].name, (long long)r, trial,
                           (double)got, want, bound);
            }
            kt_release(types[i].name);
        }
        printf("%-5s %lld rows x 3 activations, %d outside the bound\n", types[i].name, (long long)rows, bad);
        assert_int_equal(bad, 0);
        lp_qweight_free(&q);
    }
    lp_st_close(g);
}

/* A (OC, C) weight of type t: quantized from random f32 where loupe quantizes to t, else
 * random block bytes with their f16 scale fields set to small finite values. */
static void make_weight(lp_qweight *q, lp_ggml_type t, int64_t OC, int64_t C)
{
    if (lp_ggml_can_quantize(t)) {
        float *w = kt_rand_f(OC * C, -1, 1);
        assert_int_equal(lp_qweight_quantize_ggml(q, t, w, OC, C, "test"), LP_OK);
        return;
    }
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t);
    const int64_t nb = OC * C / tt->block;
    uint8_t *raw = kt_alloc((size_t)(nb * tt->bytes));
    for (int64_t i = 0; i < nb * tt->bytes; i++)
        raw[i] = (uint8_t)kt_rand();
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = raw + b * tt->bytes;
        int offs[2] = {t == LP_GGML_TYPE_Q6_K ? 208 : 0, t == LP_GGML_TYPE_Q6_K ? -1 : 2};
        for (int s = 0; s < 2; s++)
            if (offs[s] >= 0) {
                uint16_t h = lp_f32_to_f16(kt_uniform(-0.02f, 0.02f));
                p[offs[s]] = (uint8_t)(h & 0xFF);
                p[offs[s] + 1] = (uint8_t)(h >> 8);
            }
    }
    assert_int_equal(lp_qweight_from_ggml(q, t, raw, OC, C, "test"), LP_OK);
}

static int run_gemm(lp_ggml_type t, int64_t N, int64_t C, int64_t OC)
{
    lp_qweight q;
    make_weight(&q, t, OC, C);
    float *x = kt_rand_f(N * C, -1, 1), *bias = kt_rand_f(OC, -1, 1), *dout = kt_rand_f(N * OC, -1, 1);
    if (N > 2) /* an all-zero activation row and one with a spike */
        for (int64_t k = 0; k < C; k++)
            x[C + k] = 0.0f, x[2 * C + k] *= k == C / 2 ? 50.0f : 1.0f;
    float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *o2 = kt_nan(N * OC);
    float *d0 = kt_nan(N * C), *d1 = kt_nan(N * C), *wf = kt_nan(OC * C);
    int f = 0;
    f += R->qmatmul_forward(o0, x, &q, bias, N, C, OC) != LP_OK;
    f += O->qmatmul_forward(o1, x, &q, bias, N, C, OC) != LP_OK;
    f += lp_qmatmul_forward_eager(o2, x, &q, bias, N, C, OC) != LP_OK;
    f += R->qmatmul_backward(d0, dout, &q, N, C, OC) != LP_OK;
    f += O->qmatmul_backward(d1, dout, &q, N, C, OC) != LP_OK;
    R->qweight_dequantize(wf, &q, 0, OC * C);
    /* the tiles packed at load (lp_qweight_ggml_pack_tiles) hold the bytes the per-call
     * packing makes: at N >= QGEMM_MIN_ROWS the same kernel on them gives the same bits;
     * below it (decode) the tiles replace the GEMV loop, held to the reference's bound
     * below (other types ignore them) */
    float *o3 = NULL;
    if (lp_qweight_ggml_tiles_nbytes(t, OC, C)) {
        o3 = kt_nan(N * OC);
        f += lp_qweight_ggml_pack_tiles(&q) != LP_OK || !q.tiles;
        /* at AVX2 and above the tiles replace the blocks; dequantizing rebuilds each block
         * from them, bit for bit (from an offset inside a block too) */
        f += !q.blocks != lp_qweight_ggml_tiles_only(t);
        float *wt = kt_nan(OC * C);
        R->qweight_dequantize(wt, &q, 0, OC * C);
        R->qweight_dequantize(wt + 5, &q, 5, C + 40 < OC * C - 5 ? C + 40 : OC * C - 5);
        if (memcmp(wt, wf, (size_t)(OC * C) * sizeof(float)) && ++f)
            fprintf(stderr, "  %s [%lld,%lld]: dequantized from the tiles differs from the blocks\n",
                    lp_ggml_type_traits_get(t)->name, (long long)C, (long long)OC);
        f += O->qmatmul_forward(o3, x, &q, bias, N, C, OC) != LP_OK;
        if (N >= QGEMM_MIN_ROWS && memcmp(o3, o1, (size_t)(N * OC) * sizeof(float)) && ++f)
            fprintf(stderr, "  %s [%lld,%lld,%lld]: tiles packed at load differ from tiles packed per call\n",
                    lp_ggml_type_traits_get(t)->name, (long long)N, (long long)C, (long long)OC);
    }
    char what[96];
    snprintf(what, sizeof what, "%s [%lld,%lld,%lld]", lp_ggml_type_traits_get(t)->name, (long long)N, (long long)C,
             (long long)OC);
    int64_t bad = 0;
    double worst = 0.0;
    for (int k = 0; k < (o3 ? 2 : 1); k++) /* the optimized output without tiles, then with */
        for (int64_t i = 0; i < N; i++)
            for (int64_t o = 0; o < OC; o++) {
                const float *oo = k ? o3 : o1;
                double e = fabs((double)oo[i * OC + o] - o0[i * OC + o]),
                       b = dot_bound(t, wf + o * C, x + i * C, C) + 1e-6 * fabs((double)bias[o]);
                worst = fmax(worst, e / b);
                if (!(e <= b) && bad++ < 3)
                    fprintf(stderr, "  %s%s: out[%lld,%lld] %.9g vs %.9g (bound %.3g)\n", what, k ? " (tiles)" : "",
                            (long long)i, (long long)o, (double)oo[i * OC + o], (double)o0[i * OC + o], b);
            }
    f += bad != 0;
    /* the eager path and the backward dequantize exactly: f32 rounding only */
    f += kt_close(what, o2, o0, N * OC, 1e-5 * C, 1e-5);
    f += kt_close(what, d1, d0, N * C, 1e-5 * OC, 1e-5);
    lp_qweight_free(&q);
    (void)worst;
    return f + kt_release(what);
}

static void test_gemm_table(void **state)
{
    (void)state;
    /* N: decode (1), a few rows, prefill-sized, and past LP_GGML_SLAB_MIN_ROWS (the types
     * without a tiled GEMM then multiply f32 slabs); OC odd and not a multiple of the 16-row
     * tile or of the thread split; C several blocks, up to 8 K-quant super-blocks */
    static const int64_t shapes[][3] = {{1, 256, 1},   {1, 512, 37},   {2, 256, 129}, {3, 768, 100},
                                        {7, 1024, 33}, {1, 2048, 300}, {33, 512, 70}, {64, 256, 257},
                                        {96, 512, 45}, {130, 1536, 67}};
    int f = 0;
    for (size_t i = 0; i < NTYPES; i++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            f += run_gemm(types[i].t, shapes[s][0], shapes[s][1], shapes[s][2]);
    assert_int_equal(f, 0);
}

/* The tiled integer GEMM of prefill (qgemm_ggml.c: Q8_0, Q4_0, Q4_1 at N >= 8) against the
 * reference, to the activation-quantization bound of dot_bound: N at and past the
 * threshold, odd, and past the activation chunk (129 rows of C = 4096 cross it); OC below,
 * at and past the 8- and 16-row tiles; C a single block, odd block counts, multiples of
 * 256. Then adversarial blocks: Q8_0 bytes of -128 and 127 and Q4 nibbles all 15 or all 0
 * against activations of one sign at full scale (each block's q_a = 127): the sums that
 * would saturate maddubs' int16 pairs if the unsigned / signed split were wrong. */
static int run_tiled_adversarial(lp_ggml_type t, int64_t N, int64_t C, int64_t OC)
{
    lp_qweight q;
    make_weight(&q, t, OC, C);
    const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(t);
    const int64_t nb = OC * C / 32, qoff = t == LP_GGML_TYPE_Q4_1 ? 4 : 2;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = q.blocks + b * tt->bytes;
        uint16_t h = lp_f32_to_f16(b % 3 ? 0.01f : 0.0f); /* some scales of 0 */
        p[0] = (uint8_t)(h & 0xFF), p[1] = (uint8_t)(h >> 8);
        for (int j = 0; j < tt->bytes - qoff; j++)
            p[qoff + j] = t == LP_GGML_TYPE_Q8_0 ? (uint8_t)(b % 2 ? 0x80 : 0x7F) : (uint8_t)(b % 2 ? 0xFF : 0x00);
    }
    float *x = kt_nan(N * C), *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *wf = kt_nan(OC * C);
    for (int64_t i = 0; i < N * C; i++)
        x[i] = (i / C) % 2 ? -1.0f : 1.0f; /* whole rows of +1 or -1: every q_a = +-127 */
    int f = 0;
    f += R->qmatmul_forward(o0, x, &q, NULL, N, C, OC) != LP_OK;
    f += lp_qweight_ggml_pack_tiles(&q) != LP_OK; /* the adversarial blocks through the load-time tiles */
    f += O->qmatmul_forward(o1, x, &q, NULL, N, C, OC) != LP_OK;
    R->qweight_dequantize(wf, &q, 0, OC * C);
    char what[96];
    snprintf(what, sizeof what, "adversarial %s [%lld,%lld,%lld]", tt->name, (long long)N, (long long)C, (long long)OC);
    int64_t bad = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < OC; o++) {
            const double e = fabs((double)o1[i * OC + o] - o0[i * OC + o]), b = dot_bound(t, wf + o * C, x + i * C, C);
            if (!(e <= b) && bad++ < 3)
                fprintf(stderr, "  %s: out[%lld,%lld] %.9g vs %.9g (bound %.3g)\n", what, (long long)i, (long long)o,
                        (double)o1[i * OC + o], (double)o0[i * OC + o], b);
        }
    lp_qweight_free(&q);
    return (f + (bad != 0)) + kt_release(what);
}

static void test_qgemm_tiled(void **state)
{
    (void)state;
    static const lp_ggml_type tiled[] = {LP_GGML_TYPE_Q8_0, LP_GGML_TYPE_Q4_0, LP_GGML_TYPE_Q4_1};
    static const int64_t shapes[][3] = {{8, 32, 1},    {9, 96, 15},    {16, 256, 16},  {17, 800, 17},
                                        {37, 256, 70}, {64, 512, 257}, {129, 4096, 37}, {31, 1536, 24}};
    int f = 0;
    for (size_t i = 0; i < 3; i++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            f += run_gemm(tiled[i], shapes[s][0], shapes[s][1], shapes[s][2]);
        f += run_tiled_adversarial(tiled[i], 19, 256, 21);
        f += run_tiled_adversarial(tiled[i], 8, 1024, 16);
    }
    assert_int_equal(f, 0);
}

/* The tiled GEMM splits the weight's tiles across threads; each output is summed by one
 * thread in one order, so 1 and 3 threads (7 tiles: an uneven split) agree bit for bit. */
static void test_qgemm_threads(void **state)
{
    (void)state;
    static const lp_ggml_type tiled[] = {LP_GGML_TYPE_Q8_0, LP_GGML_TYPE_Q4_0, LP_GGML_TYPE_Q4_1};
    const int64_t N = 21, C = 1024, OC = 100;
    const int t0 = lp_threads_get();
    for (size_t i = 0; i < 3; i++) {
        lp_qweight q;
        make_weight(&q, tiled[i], OC, C);
        if (i % 2) /* Q4_0 through its load-time tiles, the others packed per call */
            assert_int_equal(lp_qweight_ggml_pack_tiles(&q), LP_OK);
        float *x = kt_rand_f(N * C, -1, 1), *o1 = kt_nan(N * OC), *o3 = kt_nan(N * OC);
        lp_threads_set(1);
        assert_int_equal(O->qmatmul_forward(o1, x, &q, NULL, N, C, OC), LP_OK);
        lp_threads_set(3);
        assert_int_equal(O->qmatmul_forward(o3, x, &q, NULL, N, C, OC), LP_OK);
        assert_memory_equal(o1, o3, (size_t)(N * OC) * sizeof(float));
        lp_qweight_free(&q);
        assert_int_equal(kt_release("qgemm threads"), 0);
    }
    lp_threads_set(t0);
}

/* NF4 fused GEMV (decode, N <= 8) against NF4 dequantize-then-multiply (the reference's
 * exact dequantization, double accumulation): f32 sums in another order only, with the
 * block scale applied once per block instead of per element; 1e-5 relative to sum |w x|. */
static void test_nf4_gemv(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 64, 1}, {1, 576, 1536}, {3, 128, 65}, {8, 960, 17}, {5, 64, 300}};
    int f = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int dq = 0; dq < 2; dq++) {
            const int64_t N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
            float *w = kt_rand_f(OC * C, -1, 1), *x = kt_rand_f(N * C, -1, 1), *bias = kt_rand_f(OC, -1, 1);
            lp_qweight q;
            assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_NF4, w, OC, C, dq, "nf4"), LP_OK);
            float *o0 = kt_nan(N * OC), *o1 = kt_nan(N * OC), *wf = kt_nan(OC * C);
            f += R->qmatmul_forward(o0, x, &q, bias, N, C, OC) != LP_OK;
            f += O->qmatmul_forward(o1, x, &q, bias, N, C, OC) != LP_OK;
            R->qweight_dequantize(wf, &q, 0, OC * C);
            for (int64_t i = 0; i < N; i++)
                for (int64_t o = 0; o < OC; o++) {
                    double mag = fabs((double)bias[o]);
                    for (int64_t k = 0; k < C; k++)
                        mag += fabs((double)wf[o * C + k] * x[i * C + k]);
                    double e = fabs((double)o1[i * OC + o] - o0[i * OC + o]);
                    if (!(e <= 1e-5 * mag) && f++ < 3)
                        fprintf(stderr, "  nf4 gemv [%lld,%lld,%lld] out[%lld,%lld]: %.9g vs %.9g\n", (long long)N,
                                (long long)C, (long long)OC, (long long)i, (long long)o, (double)o1[i * OC + o],
                                (double)o0[i * OC + o]);
                }
            lp_qweight_free(&q);
            f += kt_release("nf4 gemv");
        }
    assert_int_equal(f, 0);
}

static void test_errors(void **state)
{
    (void)state;
    lp_qweight q;
    float w[64] = {0};
    uint8_t raw[4 * 34] = {0};
    /* not whole blocks per row */
    assert_int_equal(lp_qweight_from_ggml(&q, LP_GGML_TYPE_Q8_0, raw, 2, 48, "bad"), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "bad"));
    assert_null(q.mem);
    /* a type kept only as a file type */
    assert_int_equal(lp_qweight_from_ggml(&q, LP_GGML_TYPE_Q3_K, raw, 1, 256, "q3"), LP_STATUS_UNSUPPORTED);
    assert_non_null(strstr(lp_err_msg(), "Q3_K"));
    assert_int_equal(lp_qweight_quantize_ggml(&q, LP_GGML_TYPE_Q4_K, w, 1, 64, "k"), LP_STATUS_UNSUPPORTED);
    w[3] = NAN;
    assert_int_equal(lp_qweight_quantize_ggml(&q, LP_GGML_TYPE_Q8_0, w, 2, 32, "nan"), LP_STATUS_NUMERIC);
    assert_non_null(strstr(lp_err_msg(), "[0, 3]"));
    assert_int_equal(lp_qweight_ggml_plan_nbytes(LP_GGML_TYPE_Q4_K, 3, 512), (size_t)((3 * 2 * 144 + 63) & ~63));
    assert_int_equal(lp_qweight_ggml_plan_nbytes(LP_GGML_TYPE_Q4_K, 3, 500), 0);
    /* the memory tracker sees the block under QUANTIZED_WEIGHT */
    assert_int_equal(lp_qweight_from_ggml(&q, LP_GGML_TYPE_Q8_0, raw, 2, 64, "ok"), LP_OK);
    assert_int_equal(lp_qweight_nbytes(&q), lp_qweight_ggml_plan_nbytes(LP_GGML_TYPE_Q8_0, 2, 64));
    lp_qweight_free(&q);
}

int main(void)
{
    int isa_rc = kt_isa_init(); /* LP_ISA picks the level (the *_isa_<level> entries) */
    if (isa_rc)
        return isa_rc;
    R = lp_kernels_table(LP_KERNELS_IMPL_REF);
    O = lp_kernels_table(LP_KERNELS_IMPL_OPT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_vs_gguf), cmocka_unit_test(test_dot_vs_gguf),
        cmocka_unit_test(test_gemm_table),       cmocka_unit_test(test_qgemm_tiled),
        cmocka_unit_test(test_qgemm_threads),
        cmocka_unit_test(test_nf4_gemv),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
