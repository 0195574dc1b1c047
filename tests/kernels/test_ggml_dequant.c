/* GGML block dequantizers against the `gguf` package's (tests/golden/ggml_dequant, written
 * by tools/golden/gen_ggml_dequant.py): random blocks and adversarial ones (scales 0,
 * +-65504, subnormal; all-equal quant bytes). Tolerance: none. Every product is of an f16
 * scale and a small integer, exact in f32, and the one add/subtract rounds once as numpy
 * does (the file is built without fused multiply-add), so the values must be equal bit for
 * bit. Also: the type table's block sizes, unknown numbers, and dequantizing one block at
 * an unaligned address gives the same floats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/base.h"
#include "loupe/io.h"
#include "loupe/kernels.h"

static const struct {
    const char *name;
    lp_ggml_type t;
} types[] = {
    {"F32", LP_GGML_TYPE_F32},   {"F16", LP_GGML_TYPE_F16},   {"BF16", LP_GGML_TYPE_BF16},
    {"Q8_0", LP_GGML_TYPE_Q8_0}, {"Q4_0", LP_GGML_TYPE_Q4_0}, {"Q4_1", LP_GGML_TYPE_Q4_1},
    {"Q4_K", LP_GGML_TYPE_Q4_K}, {"Q6_K", LP_GGML_TYPE_Q6_K}, {"Q5_0", LP_GGML_TYPE_Q5_0},
    {"Q5_1", LP_GGML_TYPE_Q5_1}, {"Q5_K", LP_GGML_TYPE_Q5_K},
};

static bool same_bits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}

static void test_against_gguf(void **state)
{
    (void)state;
    lp_st_file *g = NULL;
    if (lp_st_open("tests/golden/ggml_dequant/golden.safetensors", &g) != LP_OK)
        fail_msg("%s", lp_err_msg());
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s.blocks", types[i].name);
        const lp_st_tensor *b = lp_st_find(g, k);
        snprintf(k, sizeof k, "%s.values", types[i].name);
        const lp_st_tensor *v = lp_st_find(g, k);
        assert_non_null(b);
        assert_non_null(v);
        const lp_ggml_type_traits *tt = lp_ggml_type_traits_get(types[i].t);
        assert_non_null(tt);
        assert_string_equal(tt->name, types[i].name);
        assert_true(tt->dequantizable);
        const int64_t n = (int64_t)v->numel;
        assert_int_equal(b->numel, (uint64_t)(n / tt->block * tt->bytes));
        /* one byte off an aligned address: the dequantizer reads any alignment */
        uint8_t *src = malloc(b->numel + 1);
        float *out = malloc((size_t)n * sizeof *out);
        assert_non_null(src);
        assert_non_null(out);
        memcpy(src + 1, b->data, b->numel);
        lp_ggml_dequantize(types[i].t, src + 1, out, n);
        const float *ref = v->data;
        int64_t bad = 0;
        for (int64_t e = 0; e < n; e++)
            if (!same_bits(out[e], ref[e]) && !(isnan(out[e]) && isnan(ref[e])))
                if (bad++ < 3)
                    printf("%s[%lld]: %.9g vs gguf %.9g\n", types[i].name, (long long)e, out[e], ref[e]);
        printf("%-5s %6lld values, %lld differ\n", types[i].name, (long long)n, (long long)bad);
        assert_int_equal(bad, 0);
        free(src);
        free(out);
    }
    lp_st_close(g);
}

static void test_type_table(void **state)
{
    (void)state;
    /* ggml's sizes for a few types loupe only validates, and retired / unknown numbers */
    const lp_ggml_type_traits *q3k = lp_ggml_type_traits_get(LP_GGML_TYPE_Q3_K);
    assert_non_null(q3k);
    assert_int_equal(q3k->block, 256);
    assert_int_equal(q3k->bytes, 110);
    assert_false(q3k->dequantizable);
    const lp_ggml_type_traits *q5k = lp_ggml_type_traits_get(LP_GGML_TYPE_Q5_K);
    assert_int_equal(q5k->block, 256);
    assert_int_equal(q5k->bytes, 176);
    assert_true(q5k->dequantizable);
    assert_null(lp_ggml_type_traits_get(4)); /* Q4_2, removed from ggml */
    assert_null(lp_ggml_type_traits_get(31));
    assert_null(lp_ggml_type_traits_get(1000));
    assert_null(lp_ggml_type_traits_get(UINT32_MAX));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_gguf),
        cmocka_unit_test(test_type_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
