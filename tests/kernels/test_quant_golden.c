/* NF4 against bitsandbytes, bit for bit: every matrix of tests/golden/nf4 (codes, absmax,
 * double-quantization offset, nested absmax, absmax codes, reconstructed scales and
 * dequantized values, reference and optimized dequantizers) and every quantized linear of
 * the QLoRA DistilBERT golden (the tensors a saved bitsandbytes Linear4bit holds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "loupe/io.h"

static const lp_st_tensor *need(const lp_st_file *f, const char *name, lp_st_dtype dt)
{
    const lp_st_tensor *t = lp_st_find(f, name);
    if (!t)
        fprintf(stderr, "  missing tensor %s\n", name);
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    return t;
}

/* Bitwise equality of n 4-byte or 1-byte elements; prints the first difference. */
static int same_bits(const char *what, const void *got, const void *want, size_t n, size_t elem)
{
    if (!memcmp(got, want, n * elem))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * elem, (const char *)want + i * elem, elem)) {
            if (elem == 4)
                fprintf(stderr, "  %s: element %zu: got %.9g, want %.9g\n", what, i,
                        (double)((const float *)got)[i], (double)((const float *)want)[i]);
            else
                fprintf(stderr, "  %s: byte %zu: got %u, want %u\n", what, i, ((const uint8_t *)got)[i],
                        ((const uint8_t *)want)[i]);
            break;
        }
    return 1;
}

static void test_code_tables(void **state)
{
    (void)state;
    lp_st_file *f = NULL;
    assert_int_equal(lp_st_open("tests/golden/nf4/golden.safetensors", &f), LP_OK);
    int bad = same_bits("code.nf4", lp_nf4_code, need(f, "code.nf4", LP_ST_DTYPE_F32)->data, 16, 4);
    bad +=
        same_bits("code.dynamic", lp_nf4_dynamic_map, need(f, "code.dynamic", LP_ST_DTYPE_F32)->data, 256, 4);
    lp_st_close(f);
    assert_int_equal(bad, 0);
}

/* Dequantized values through both table entries, whole range and an odd sub-range. */
static int check_dequant(const char *what, const lp_qweight *q, const float *want)
{
    int bad = 0;
    float *out = kt_nan(q->n);
    for (int impl = 0; impl < 2; impl++) {
        const lp_kernel_table *t = lp_kernels_table(impl ? LP_KERNELS_IMPL_OPT : LP_KERNELS_IMPL_REF);
        t->qweight_dequantize(out, q, 0, q->n);
        char w[160];
        snprintf(w, sizeof w, "%s dequant (%s)", what, t->name);
        bad += same_bits(w, out, want, (size_t)q->n, 4);
        if (q->n > 10) {
            int64_t s = 3, len = q->n - 7;
            t->qweight_dequantize(out, q, s, len);
            snprintf(w, sizeof w, "%s dequant [3, n-4) (%s)", what, t->name);
            bad += same_bits(w, out, want + s, (size_t)len, 4);
        }
    }
    return bad + kt_release(what);
}

static void test_nf4_golden_matrices(void **state)
{
    (void)state;
    lp_st_file *f = NULL;
    assert_int_equal(lp_st_open("tests/golden/nf4/golden.safetensors", &f), LP_OK);
    int bad = 0, matrices = 0;
    for (size_t i = 0; i < lp_st_count(f); i++) {
        const lp_st_tensor *in = lp_st_at(f, i);
        size_t L = strlen(in->name);
        if (L < 7 || strcmp(in->name + L - 6, ".input") || !strncmp(in->name, "serialized", 10))
            continue;
        char m[96], key[160];
        snprintf(m, sizeof m, "%.*s", (int)(L - 6), in->name);
        matrices++;
        int64_t rows = in->shape[0], cols = in->shape[1];
        for (int dq = 0; dq < 2; dq++) {
            lp_qweight q;
            assert_int_equal(lp_qweight_quantize(&q, LP_DTYPE_NF4, in->data, rows, cols, dq, "golden"),
                             LP_OK);
            char what[160];
            snprintf(key, sizeof key, "%s.packed", m);
            snprintf(what, sizeof what, "%s%s codes", m, dq ? " dq" : "");
            bad += same_bits(what, q.codes, need(f, key, LP_ST_DTYPE_U8)->data, (size_t)(q.n + 1) / 2, 1);
            if (!dq) {
                snprintf(key, sizeof key, "%s.absmax", m);
                bad += same_bits(key, q.absmax, need(f, key, LP_ST_DTYPE_F32)->data, (size_t)q.n_blocks, 4);
                snprintf(key, sizeof key, "%s.dequant", m);
            } else {
                snprintf(key, sizeof key, "%s.dq.offset", m);
                bad += same_bits(key, &q.offset, need(f, key, LP_ST_DTYPE_F32)->data, 1, 4);
                snprintf(key, sizeof key, "%s.dq.nested_absmax", m);
                const lp_st_tensor *na = need(f, key, LP_ST_DTYPE_F32);
                assert_int_equal((int64_t)na->numel, q.n_nested);
                bad += same_bits(key, q.nested_absmax, na->data, (size_t)q.n_nested, 4);
                snprintf(key, sizeof key, "%s.dq.absmax_q", m);
                bad += same_bits(key, q.absmax_q, need(f, key, LP_ST_DTYPE_U8)->data, (size_t)q.n_blocks, 1);
                snprintf(key, sizeof key, "%s.dq.absmax_dequant", m);
                const float *want = need(f, key, LP_ST_DTYPE_F32)->data;
                for (int64_t b = 0; b < q.n_blocks; b++) {
                    float s = lp_qweight_nf4_block_absmax(&q, b);
                    if (memcmp(&s, &want[b], 4)) {
                        fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", key, (long long)b, (double)s,
                                (double)want[b]);
                        bad++;
                        break;
                    }
                }
                snprintf(key, sizeof key, "%s.dq.dequant", m);
            }
            bad += check_dequant(key, &q, need(f, key, LP_ST_DTYPE_F32)->data);
            /* memory: codes + scales, nothing else, all in QUANTIZED_WEIGHT */
            assert_int_equal(lp_alloc_category(q.mem), LP_MEM_CATEGORY_QUANTIZED_WEIGHT);
            lp_qweight_free(&q);
        }
    }
    lp_st_close(f);
    assert_int_equal(matrices, 8);
    assert_int_equal(bad, 0);
}

/* Every quantized linear of the QLoRA DistilBERT: our quantization of the float32 base
 * weight equals the Linear4bit tensors bitsandbytes saved, and the dequantized weights
 * equal the ones its forward used. */
static void test_qlora_distilbert_layers(void **state)
{
    (void)state;
    lp_st_file *base = NULL, *saved = NULL, *gold = NULL;
    assert_int_equal(lp_st_open("tests/golden/qlora_distilbert/model.safetensors", &base), LP_OK);
    assert_int_equal(lp_st_open("tests/golden/qlora_distilbert/quantized_model/model.safetensors", &saved),
                     LP_OK);
    assert_int_equal(lp_st_open("tests/golden/qlora_distilbert/golden.safetensors", &gold), LP_OK);
    static const char *mods[] = {"attention.q_lin",   "attention.k_lin", "attention.v_lin",
                                 "attention.out_lin", "ffn.lin1",        "ffn.lin2"};
    int bad = 0, n = 0;
    for (int layer = 0; layer < 2; layer++)
        for (int k = 0; k < 6; k++) {
            char m[128], key[256];
            snprintf(m, sizeof m, "distilbert.transformer.layer.%d.%s", layer, mods[k]);
            snprintf(key, sizeof key, "%s.weight", m);
            const lp_st_tensor *w = need(base, key, LP_ST_DTYPE_F32);
            lp_qweight q;
            assert_int_equal(
                lp_qweight_quantize(&q, LP_DTYPE_NF4, w->data, w->shape[0], w->shape[1], true, "q"), LP_OK);
            bad += same_bits(key, q.codes, need(saved, key, LP_ST_DTYPE_U8)->data, (size_t)(q.n + 1) / 2, 1);
            snprintf(key, sizeof key, "%s.weight.absmax", m);
            bad += same_bits(key, q.absmax_q, need(saved, key, LP_ST_DTYPE_U8)->data, (size_t)q.n_blocks, 1);
            snprintf(key, sizeof key, "%s.weight.nested_absmax", m);
            bad += same_bits(key, q.nested_absmax, need(saved, key, LP_ST_DTYPE_F32)->data,
                             (size_t)q.n_nested, 4);
            snprintf(key, sizeof key, "%s.weight.quant_map", m);
            bad += same_bits(key, lp_nf4_code, need(saved, key, LP_ST_DTYPE_F32)->data, 16, 4);
            snprintf(key, sizeof key, "%s.weight.nested_quant_map", m);
            bad += same_bits(key, lp_nf4_dynamic_map, need(saved, key, LP_ST_DTYPE_F32)->data, 256, 4);
            /* the offset lives in the quant-state JSON: "nested_offset": <float> */
            snprintf(key, sizeof key, "%s.weight.quant_state.bitsandbytes__nf4", m);
            const lp_st_tensor *js = need(saved, key, LP_ST_DTYPE_U8);
            char json[512] = {0};
            memcpy(json, js->data, js->nbytes < sizeof json - 1 ? js->nbytes : sizeof json - 1);
            const char *at = strstr(json, "\"nested_offset\":");
            assert_non_null(at);
            float off = (float)strtod(at + strlen("\"nested_offset\":"), NULL);
            if (memcmp(&off, &q.offset, 4)) {
                fprintf(stderr, "  %s offset: got %.9g want %.9g\n", m, (double)q.offset, (double)off);
                bad++;
            }
            /* hidden size 32: bitsandbytes' CPU dequantizer read every row's scales from
             * the wrong blocks (see lp_qweight.bnb_cpu_rows); with the flag set we
             * reproduce the weights its Linear4bit used, bit for bit */
            snprintf(key, sizeof key, "dequant.%s.weight", m);
            q.bnb_cpu_rows = true;
            bad += check_dequant(key, &q, need(gold, key, LP_ST_DTYPE_F32)->data);
            q.bnb_cpu_rows = false;
            float *flat = kt_nan(q.n);
            lp_qweight_dequantize(flat, &q, 0, q.n);
            for (int64_t e = 0; e < q.n; e++) /* and the layout itself is flat */
                if (flat[e] != lp_nf4_code[(e & 1) ? q.codes[e >> 1] & 15 : q.codes[e >> 1] >> 4] *
                                   lp_qweight_nf4_block_absmax(&q, e / 64)) {
                    bad++;
                    break;
                }
            bad += kt_release("flat");
            lp_qweight_free(&q);
            n++;
        }
    lp_st_close(base);
    lp_st_close(saved);
    lp_st_close(gold);
    assert_int_equal(n, 12);
    assert_int_equal(bad, 0);
}

int main(void)
{
    int isa_rc = kt_isa_init();
    if (isa_rc)
        return isa_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_code_tables),
        cmocka_unit_test(test_nf4_golden_matrices),
        cmocka_unit_test(test_qlora_distilbert_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
