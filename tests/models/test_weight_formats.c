/* A model forward with its Linear weights kept quantized (lp_model_options.weights) against
 * the dequantize-at-load path: the same model loaded in f32 with each quantized Linear's
 * weight replaced by its exact dequantization, so both forwards multiply the same weight
 * values and only the kernels differ. Over the tiny decoders smollm_lm (llama, tied
 * embeddings) and qwen2_lm (GQA, q/k/v biases), Q8_0, Q4_0 and NF4, prefill (T = 12) and
 * decode-sized (T = 1) passes.
 *
 * Tolerances, normwise (max|a - b| / max|ref| over the logits):
 * - Q8_0 / Q4_0 run integer dot products on activations rounded to 8 bits per block of 32:
 *   each element moves by at most half a step (max|x| / 254), so a Linear's output moves by
 *   at most ~0.4 % of sum |w x|; relative to the output itself that is ~0.5-1 % per Linear
 *   for these random-weight models (outputs are sums of cancelling terms), compounding over
 *   9 Linears in sequence per token and attention's softmax, and the logits of a random
 *   tiny model are themselves small differences. Measured (printed): 1.0-2.3 % at T = 1,
 *   3-5 % at T = 12 (llama.cpp's Q8_0 activations make the same error). Bound 8e-2: a
 *   wrong block scale, nibble order or row permutation moves the logits by O(1).
 * - NF4 dequantizes exactly in both paths (the fused GEMV for T = 1, slabs for T = 12):
 *   f32 summation order only, 1e-5. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/base.h"
#include "loupe/io.h"
#include "loupe/kernels.h"
#include "loupe/models.h"

static bool g_no_grad; /* inference-only loads also quantize the LM head (a copy) */

static lp_model *load(const char *path, lp_weight_format f)
{
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.no_grad = g_no_grad;
    o.task = LP_MODEL_TASK_CAUSAL_LM;
    o.weights = f;
    o.exec = LP_EXEC_MODE_FUSED; /* eager dequantizes the whole weight: the reference path */
    lp_model *m = NULL;
    if (lp_model_load(path, &o, &m) != LP_OK)
        fail_msg("%s", lp_err_msg());
    return m;
}

/* Overwrites ref's f32 copy of every Linear q keeps quantized with q's dequantization;
 * returns how many. */
static int dequantize_into(lp_model *ref, const lp_model *q)
{
    size_t np;
    const lp_model_param *p = lp_model_params(ref, &np);
    int n = 0;
    for (size_t i = 0; i < np; i++) {
        const lp_qweight *w = lp_model_qweight(q, p[i].name);
        if (!w)
            continue;
        assert_int_equal(w->n, p[i].numel);
        lp_qweight_dequantize(p[i].data, w, 0, w->n);
        n++;
    }
    return n;
}

static double rel_err(const float *a, const float *b, int64_t n)
{
    double d = 0.0, r = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        d = fmax(d, fabs((double)a[i] - b[i]));
        r = fmax(r, fabs((double)b[i]));
    }
    return d / r;
}

static bool g_raw_ref; /* compare with the f32 weights as they are, not q's dequantization */

static void check(const char *dir, lp_weight_format f, int want_quantized, double tol)
{
    lp_model *q = load(dir, f), *ref = load(dir, LP_WEIGHT_FORMAT_F32);
    if (g_raw_ref)
        assert_non_null(lp_model_qweight(q, "model.layers.0.self_attn.q_proj.weight"));
    else
        assert_int_equal(dequantize_into(ref, q), want_quantized);
    lp_model_info info;
    lp_model_info_get(q, &info);
    const int64_t V = info.vocab_size;
    int32_t ids[12];
    for (int i = 0; i < 12; i++)
        ids[i] = (int32_t)(1 + (i * 37) % (V - 1));
    for (int T = 1; T <= 12; T += 11) {
        float *a = malloc((size_t)(T * V) * sizeof *a), *b = malloc((size_t)(T * V) * sizeof *b);
        assert_non_null(a);
        assert_non_null(b);
        if (lp_model_forward(q, ids, NULL, NULL, 1, T, a) != LP_OK ||
            lp_model_forward(ref, ids, NULL, NULL, 1, T, b) != LP_OK)
            fail_msg("%s", lp_err_msg());
        double e = rel_err(a, b, T * V);
        printf("%-24s %-5s T=%-2d %d Linears quantized, logits rel. error %.3g (bound %g)\n", dir,
               lp_weight_format_name(f), T, want_quantized, e, tol);
        assert_true(e <= tol);
        free(a);
        free(b);
    }
    lp_model_free(q);
    lp_model_free(ref);
}

static void test_smollm(void **state)
{
    (void)state;
    /* 2 layers x 7 Linears; NF4 keeps down_proj (160 inputs, not whole 64-blocks) in f32 */
    check("tests/golden/smollm_lm", LP_WEIGHT_FORMAT_Q8_0, 14, 8e-2);
    check("tests/golden/smollm_lm", LP_WEIGHT_FORMAT_Q4_0, 14, 8e-2);
    check("tests/golden/smollm_lm", LP_WEIGHT_FORMAT_NF4, 12, 1e-5);
}

/* bf16: every Linear (any shape) rounded to bf16 and run by the bf16 GEMM, which rounds the
 * activations to bf16 too. Against the f32 model with the same (bf16) weights only the
 * activation rounding differs: each Linear's output moves by <= 2^-9 sum|x w|, a few 1e-3
 * of the largest logit through two layers; against the unrounded f32 weights the weight
 * rounding adds as much again. Bounds 2e-2 and 3e-2 (measured 0.004-0.009 and 0.007-0.017). */
static void test_bf16(void **state)
{
    (void)state;
    check("tests/golden/smollm_lm", LP_WEIGHT_FORMAT_BF16, 14, 2e-2);
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_BF16, 14, 2e-2);
    g_raw_ref = true;
    check("tests/golden/smollm_lm", LP_WEIGHT_FORMAT_BF16, 14, 3e-2);
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_BF16, 14, 3e-2);
    g_no_grad = true; /* inference: the LM head gets a bf16 copy as well (one more rounding) */
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_BF16, 14, 4e-2);
    g_no_grad = false;
    g_raw_ref = false;
}

/* packed f32: every Linear's f32 values packed (exactly) for the f32 GEMM of f32_gemm.c.
 * Against the f32 model (OpenBLAS on the same values) only the f32 summation order differs:
 * 1e-5 normwise (a misplaced panel or K block moves the logits by O(1)). Inference loads
 * keep the head on sgemm: no copy of it is made. */
static void test_f32_packed(void **state)
{
    (void)state;
    check("tests/golden/smollm_lm", LP_WEIGHT_FORMAT_F32_PACKED, 14, 1e-5);
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_F32_PACKED, 14, 1e-5);
    g_raw_ref = true;
    g_no_grad = true;
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_F32_PACKED, 14, 1e-5);
    g_raw_ref = false;
    lp_model *m = load("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_F32_PACKED);
    g_no_grad = false;
    assert_null(lp_model_qweight(m, "lm_head.weight")); /* no second copy of the head */
    const lp_qweight *w = lp_model_qweight(m, "model.layers.1.mlp.down_proj.weight");
    assert_non_null(w);
    assert_int_equal(w->dtype, LP_DTYPE_F32);
    assert_int_equal(lp_qweight_nbytes(w), lp_qweight_f32_plan_nbytes(w->rows, w->cols));
    lp_model_free(m);
}

/* int8 (per-row weights packed for the integer GEMM, activations quantized per token to
 * 7 bits): every Linear of both models (inputs 64 and 160: whole 32-column steps). Against
 * the f32 model on the same (dequantized) weights only the activation rounding differs:
 * each element by <= max|x_row| / 126, i.e. <= 0.8 % of sum |w| max|x| per output,
 * compounding over two layers; bound 0.16, twice Q8_0's as the step is twice its (measured
 * 0.03-0.09; a wrong scale, sign or offset moves the logits by O(1)). Inference loads give
 * the head an int8 copy too; the weight is its tiles only. */
static void test_int8(void **state)
{
    (void)state;
    check("tests/golden/smollm_lm", LP_WEIGHT_FORMAT_INT8, 14, 0.16);
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_INT8, 14, 0.16);
    g_no_grad = true; /* the head's int8 copy is the 15th */
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_INT8, 15, 0.16);
    lp_model *m = load("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_INT8);
    g_no_grad = false;
    const lp_qweight *h = lp_model_qweight(m, "lm_head.weight");
    assert_non_null(h);
    assert_int_equal(h->dtype, LP_DTYPE_INT8);
    const lp_qweight *w = lp_model_qweight(m, "model.layers.1.mlp.down_proj.weight");
    assert_non_null(w);
    assert_int_equal(w->dtype, LP_DTYPE_INT8);
    assert_null(w->q);
    assert_true(w->tiles == w->mem);
    assert_int_equal(lp_qweight_nbytes(w), lp_qweight_int8_tiles_nbytes(w->rows, w->cols));
    lp_model_free(m);
}

static void test_qwen2(void **state)
{
    (void)state;
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_Q8_0, 14, 8e-2);
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_Q4_0, 14, 8e-2);
    check("tests/golden/qwen2_lm", LP_WEIGHT_FORMAT_NF4, 12, 1e-5);
}

/* The real SmolLM2-135M-Instruct GGUF (Q4_1 with some Q8_0/Q6_K tensors; skipped when
 * tools/smollm2_gguf.sh finds no file) kept as stored against the same file dequantized at
 * load (--dequantize: the gguf package's exact values, so again only the kernels differ).
 * 30 layers of a trained model: its activations have outlier channels, which the 8-bit
 * activation blocks round coarsely; bound 0.1 normwise; measured 1.6 % (T = 1) and 2.5 %
 * (T = 8), the same argmax. */
static void test_smollm2_stored(void **state)
{
    (void)state;
    char path[1024] = "";
    FILE *p = popen("bash tools/smollm2_gguf.sh 2>/dev/null", "r");
    if (p) {
        if (!fgets(path, (int)sizeof path, p))
            path[0] = '\0';
        pclose(p);
    }
    path[strcspn(path, "\n")] = '\0';
    if (!path[0])
        skip();
    lp_model *q = load(path, LP_WEIGHT_FORMAT_STORED), *ref = load(path, LP_WEIGHT_FORMAT_F32);
    int n = dequantize_into(ref, q);
    printf("%s: %d Linears kept as stored\n", path, n);
    assert_true(n >= 200); /* 30 layers x 7, less any F32 tensor */
    lp_model_info info;
    lp_model_info_get(q, &info);
    const int64_t V = info.vocab_size;
    int32_t ids[8] = {1, 9690, 28, 614, 253, 4123, 282, 2};
    for (int T = 1; T <= 8; T += 7) {
        float *a = malloc((size_t)(T * V) * sizeof *a), *b = malloc((size_t)(T * V) * sizeof *b);
        assert_non_null(a);
        assert_non_null(b);
        if (lp_model_forward(q, ids, NULL, NULL, 1, T, a) != LP_OK ||
            lp_model_forward(ref, ids, NULL, NULL, 1, T, b) != LP_OK)
            fail_msg("%s", lp_err_msg());
        double e = rel_err(a + (T - 1) * V, b + (T - 1) * V, V);
        int am = 0, bm = 0;
        for (int64_t v = 1; v < V; v++) {
            am = a[(T - 1) * V + v] > a[(T - 1) * V + am] ? (int)v : am;
            bm = b[(T - 1) * V + v] > b[(T - 1) * V + bm] ? (int)v : bm;
        }
        printf("SmolLM2 stored T=%d: last logits rel. error %.3g (bound 0.1), argmax %d vs %d\n", T, e, am, bm);
        assert_true(e <= 0.1);
        free(a);
        free(b);
    }
    lp_model_free(q);
    lp_model_free(ref);
}

/* A GGUF's BF16 tensors kept as stored run the bf16 GEMM: repacked at load, they hold the
 * very values --quantize bf16 gives the f32 source (rounding to bf16 is what both did), and
 * the logits are the same bit for bit (same kernel, same operands). */
static void test_stored_bf16(void **state)
{
    (void)state;
    const char *src = "tests/golden/gguf_tiny/qwen2_lm.gguf";
    char out[] = "/tmp/loupe_bf16XXXXXX.gguf";
    int fd = mkstemps(out, 5);
    assert_true(fd >= 0);
    close(fd);
    /* the source with its layers' matrices as BF16, through the GGUF writer */
    lp_gguf_file *g = NULL;
    lp_gguf_writer *w = NULL;
    if (lp_gguf_open(src, &g) != LP_OK || lp_gguf_writer_init(&w, out, 32) != LP_OK)
        fail_msg("%s", lp_err_msg());
    for (size_t i = 0; i < lp_gguf_kv_count(g); i++)
        assert_int_equal(lp_gguf_writer_add_kv(w, lp_gguf_kv_at(g, i)->key, &lp_gguf_kv_at(g, i)->v), LP_OK);
    int nbf = 0;
    for (size_t i = 0; i < lp_gguf_tensor_count(g); i++) {
        const lp_gguf_tensor *t = lp_gguf_tensor_at(g, i);
        assert_int_equal(t->type, LP_GGML_TYPE_F32);
        if (t->ndim != 2 || strncmp(t->name, "blk.", 4)) { /* the embedding stays F32, like the source's */
            assert_int_equal(lp_gguf_writer_add_tensor(w, t->name, t->ndim, t->ne, LP_GGML_TYPE_F32, t->data,
                                                       t->numel * 4),
                             LP_OK);
            continue;
        }
        uint16_t *h = malloc((size_t)t->numel * 2);
        assert_non_null(h);
        lp_ggml_quantize(LP_GGML_TYPE_BF16, t->data, h, (int64_t)t->numel);
        assert_int_equal(lp_gguf_writer_add_tensor(w, t->name, 2, t->ne, LP_GGML_TYPE_BF16, h, t->numel * 2), LP_OK);
        free(h);
        nbf++;
    }
    assert_true(nbf >= 14);
    assert_int_equal(lp_gguf_writer_finish(w), LP_OK);
    lp_gguf_writer_free(w);
    lp_gguf_close(g);
    lp_model *a = load(out, LP_WEIGHT_FORMAT_STORED), *b = load(src, LP_WEIGHT_FORMAT_BF16);
    const lp_qweight *qa = lp_model_qweight(a, "model.layers.1.mlp.down_proj.weight"),
                     *qb = lp_model_qweight(b, "model.layers.1.mlp.down_proj.weight");
    assert_non_null(qa);
    assert_non_null(qb);
    assert_int_equal(qa->dtype, LP_DTYPE_BF16);
    assert_int_equal(lp_qweight_nbytes(qa), lp_qweight_nbytes(qb));
    assert_memory_equal(qa->bf16, qb->bf16, lp_qweight_nbytes(qa));
    lp_model_info info;
    lp_model_info_get(a, &info);
    const int64_t V = info.vocab_size, T = 5;
    int32_t ids[5] = {1, 7, 3, 9, 2};
    float *la = malloc((size_t)(T * V) * sizeof *la), *lb = malloc((size_t)(T * V) * sizeof *lb);
    assert_non_null(la);
    assert_non_null(lb);
    if (lp_model_forward(a, ids, NULL, NULL, 1, T, la) != LP_OK || lp_model_forward(b, ids, NULL, NULL, 1, T, lb) != LP_OK)
        fail_msg("%s", lp_err_msg());
    assert_memory_equal(la, lb, (size_t)(T * V) * sizeof *la);
    free(la);
    free(lb);
    lp_model_free(a);
    lp_model_free(b);
    remove(out);
}

/* STORED on a GGUF whose tensors are F32 keeps them f32; on a safetensors directory too. */
static void test_stored_f32(void **state)
{
    (void)state;
    lp_model *m = load("tests/golden/gguf_tiny/smollm_lm.gguf", LP_WEIGHT_FORMAT_STORED);
    assert_null(lp_model_qweight(m, "model.layers.0.self_attn.q_proj.weight"));
    assert_non_null(lp_model_param_find(m, "model.layers.0.self_attn.q_proj.weight"));
    lp_model_free(m);
}

/* `loupe quantize` (lp_gguf_quantize_file) then a load kept as stored gives the very
 * blocks that quantizing the source at load gives: the file's q/k rows are in llama.cpp's
 * permuted order and the loader puts them back, whole rows, so every block must match
 * byte for byte. Errors: a missing source, an unwritable output, a type loupe does not write. */
static void test_quantize_file_reloads(void **state)
{
    (void)state;
    static const struct {
        uint32_t t;
        lp_weight_format f;
    } k[] = {{LP_GGML_TYPE_Q8_0, LP_WEIGHT_FORMAT_Q8_0}, {LP_GGML_TYPE_Q4_0, LP_WEIGHT_FORMAT_Q4_0}};
    const char *src = "tests/golden/gguf_tiny/smollm_lm.gguf";
    for (int i = 0; i < 2; i++) {
        char out[] = "/tmp/loupe_qfileXXXXXX.gguf";
        int fd = mkstemps(out, 5);
        assert_true(fd >= 0);
        close(fd);
        if (lp_gguf_quantize_file(src, out, k[i].t) != LP_OK)
            fail_msg("%s", lp_err_msg());
        lp_model *a = load(out, LP_WEIGHT_FORMAT_STORED), *b = load(src, k[i].f);
        size_t np, n = 0;
        (void)lp_model_params(b, &np);
        static const char *const mods[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                           "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                           "mlp.down_proj"};
        for (int l = 0; l < 2; l++)
            for (int j = 0; j < 7; j++) {
                char nm[128];
                snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", l, mods[j]);
                const lp_qweight *qa = lp_model_qweight(a, nm), *qb = lp_model_qweight(b, nm);
                assert_non_null(qa);
                assert_non_null(qb);
                assert_int_equal(qa->gtype, k[i].t);
                assert_int_equal(qa->rows * qa->row_bytes, qb->rows * qb->row_bytes);
                if (qa->blocks && qb->blocks)
                    assert_memory_equal(qa->blocks, qb->blocks, (size_t)(qa->rows * qa->row_bytes));
                else /* the tiles replaced the blocks (lp_qweight_ggml_tiles_only): the same bytes */
                    assert_memory_equal(qa->tiles, qb->tiles, lp_qweight_ggml_tiles_nbytes(qa->gtype, qa->rows, qa->cols));
                n++;
            }
        assert_int_equal(n, 14);
        lp_model_free(a);
        lp_model_free(b);
        remove(out);
    }
    /* a source that is not there, and an output directory that is not there: one line each */
    assert_int_equal(lp_gguf_quantize_file("tests/golden/gguf_tiny/none.gguf", "/tmp/x.gguf", LP_GGML_TYPE_Q8_0),
                     LP_STATUS_NOT_FOUND);
    assert_int_equal(lp_gguf_quantize_file(src, "/nonexistent-dir/x.gguf", LP_GGML_TYPE_Q8_0), LP_STATUS_IO);
    assert_non_null(strstr(lp_err_msg(), "/nonexistent-dir/x.gguf"));
    assert_int_equal(lp_gguf_quantize_file(src, "/tmp/x.gguf", LP_GGML_TYPE_Q4_K), LP_STATUS_UNSUPPORTED);
}

/* Inference loads (no_grad) give the LM head a quantized copy: the logits then move by the
 * head's own weight rounding too. Against the same model with an f32 head: Q8_0 rounds
 * each head weight by at most half a step of max|w_block| / 127 (0.4 % of the block's
 * largest weight; ~0.1-0.2 % rms), so the logits move by ~0.2-0.5 % of their scale, plus
 * the 8-bit activations of the head's input; Q4_0's 16 levels move them by ~5-10 %.
 * Bounds 3e-2 (Q8_0), 0.25 (Q4_0): an unquantized head shows 0, a wrong one O(1). */
static void test_head_copy(void **state)
{
    (void)state;
    static const struct {
        lp_weight_format f;
        double tol;
    } k[] = {{LP_WEIGHT_FORMAT_Q8_0, 3e-2}, {LP_WEIGHT_FORMAT_Q4_0, 0.25}};
    for (int i = 0; i < 2; i++) {
        g_no_grad = false;
        lp_model *a = load("tests/golden/smollm_lm", k[i].f);
        g_no_grad = true;
        lp_model *b = load("tests/golden/smollm_lm", k[i].f);
        g_no_grad = false;
        const lp_qweight *h = lp_model_qweight(b, "lm_head.weight");
        assert_non_null(h);
        assert_null(lp_model_qweight(a, "lm_head.weight"));
        assert_int_equal(h->dtype, LP_DTYPE_GGML);
        lp_model_info info;
        lp_model_info_get(a, &info);
        const int64_t V = info.vocab_size;
        int32_t ids[4] = {5, 17, 99, 3};
        float *x = malloc((size_t)(4 * V) * sizeof *x), *y = malloc((size_t)(4 * V) * sizeof *y);
        assert_non_null(x);
        assert_non_null(y);
        if (lp_model_forward(a, ids, NULL, NULL, 1, 4, x) != LP_OK || lp_model_forward(b, ids, NULL, NULL, 1, 4, y) != LP_OK)
            fail_msg("%s", lp_err_msg());
        double e = rel_err(y, x, 4 * V);
        printf("smollm_lm %s head copy: logits rel. error %.3g vs an f32 head (bound %g)\n",
               lp_weight_format_name(k[i].f), e, k[i].tol);
        assert_true(e > 0.0 && e <= k[i].tol);
        free(x);
        free(y);
        lp_model_free(a);
        lp_model_free(b);
    }
}

/* Bytes of a weight kept in format t as one decode GEMV reads them: the tiles that replace
 * Q8_0 / Q4_0 blocks at AVX2 and above (f32 scales, rows padded to 16), else the blocks
 * (34 / 18 bytes per 32 values). */
static double gemv_bytes(uint32_t t, int64_t rows, int64_t cols)
{
    return lp_qweight_ggml_tiles_only(t) ? (double)lp_qweight_ggml_tiles_nbytes(t, rows, cols)
                                         : (double)(rows * cols / 32 * (t == LP_GGML_TYPE_Q8_0 ? 34 : 18));
}

/* The weight bytes one decode step reads (lp_model_decode_weight_bytes: bench-gen's GB/s)
 * on smollm_lm (2 layers, C = 64, I = 160, 4 + 4 heads of 16, V = 128, tied embeddings).
 * An F32 file kept as stored runs its tied head in f32 (no quantized copy: the file's
 * numerics), so a token reads every parameter once, the table as the head. Its Q8_0 and
 * Q4_0 copies (lp_gguf_quantize_file) read the norms in f32 and every Linear and the tied
 * head as that format's blocks or tiles, computed here from the shapes: the f32 table
 * (V x C x 4 = 32 KiB, as large as all the Q8_0 Linears) must not be counted. Exact: byte
 * counts, integers in a double. */
static void test_decode_bytes(void **state)
{
    (void)state;
    const char *src = "tests/golden/gguf_tiny/smollm_lm.gguf";
    g_no_grad = true;
    lp_model *f = load(src, LP_WEIGHT_FORMAT_STORED);
    const lp_model_config *c = lp_model_config_get(f);
    assert_true(c->tie_word_embeddings && c->hidden_size == 64 && c->intermediate_size == 160 && c->vocab_size == 128);
    assert_null(lp_model_qweight(f, "lm_head.weight"));
    size_t np;
    const lp_model_param *p = lp_model_params(f, &np);
    double all = 0, norms = 0;
    for (size_t i = 0; i < np; i++) {
        all += 4.0 * (double)p[i].numel;
        if (!strstr(p[i].name, "embed_tokens") && !strstr(p[i].name, "_proj"))
            norms += 4.0 * (double)p[i].numel;
    }
    printf("smollm_lm F32 stored: %.0f bytes a token\n", lp_model_decode_weight_bytes(f));
    assert_true(lp_model_decode_weight_bytes(f) == all);
    assert_true(norms > 0 && norms < all);
    lp_model_free(f);
    static const uint32_t types[] = {LP_GGML_TYPE_Q8_0, LP_GGML_TYPE_Q4_0};
    for (int i = 0; i < 2; i++) {
        const uint32_t t = types[i];
        char out[] = "/tmp/loupe_qbytesXXXXXX.gguf";
        int fd = mkstemps(out, 5);
        assert_true(fd >= 0);
        close(fd);
        if (lp_gguf_quantize_file(src, out, t) != LP_OK)
            fail_msg("%s", lp_err_msg());
        lp_model *m = load(out, LP_WEIGHT_FORMAT_STORED);
        const lp_qweight *h = lp_model_qweight(m, "lm_head.weight"); /* the file's token_embd blocks */
        assert_non_null(h);
        assert_int_equal(h->gtype, t);
        /* per layer q, k, v, o (64 x 64), gate and up (160 x 64), down (64 x 160); the head */
        const double want = norms + 2 * (4 * gemv_bytes(t, 64, 64) + 2 * gemv_bytes(t, 160, 64) + gemv_bytes(t, 64, 160)) +
                            gemv_bytes(t, 128, 64);
        printf("smollm_lm %s stored: %.0f bytes a token (want %.0f; the f32 table alone is %.0f)\n",
               lp_ggml_type_traits_get(t)->name, lp_model_decode_weight_bytes(m), want, 128.0 * 64 * 4);
        assert_true(lp_model_decode_weight_bytes(m) == want);
        lp_model_free(m);
        remove(out);
    }
    g_no_grad = false;
}

static void test_errors(void **state)
{
    (void)state;
    lp_weight_format f;
    assert_int_equal(lp_weight_format_parse("q4_0", &f), LP_OK);
    assert_int_equal(f, LP_WEIGHT_FORMAT_Q4_0);
    assert_int_equal(lp_weight_format_parse("bf16", &f), LP_OK);
    assert_int_equal(f, LP_WEIGHT_FORMAT_BF16);
    assert_string_equal(lp_weight_format_name(LP_WEIGHT_FORMAT_BF16), "bf16");
    assert_int_equal(lp_weight_format_parse("f32_packed", &f), LP_OK);
    assert_int_equal(f, LP_WEIGHT_FORMAT_F32_PACKED);
    assert_string_equal(lp_weight_format_name(LP_WEIGHT_FORMAT_F32_PACKED), "f32_packed");
    assert_int_equal(lp_weight_format_parse("dequantize", &f), LP_OK);
    assert_int_equal(f, LP_WEIGHT_FORMAT_F32);
    /* int8: per-row weights and per-token activations, its own format beside q8_0 */
    assert_int_equal(lp_weight_format_parse("int8", &f), LP_OK);
    assert_int_equal(f, LP_WEIGHT_FORMAT_INT8);
    assert_string_equal(lp_weight_format_name(LP_WEIGHT_FORMAT_INT8), "int8");
    assert_int_equal(lp_weight_format_parse("q5_k", &f), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "q5_k"));
    lp_model_options o;
    lp_model_options_init(&o);
    o.quiet = true;
    o.weights = LP_WEIGHT_FORMAT_Q8_0;
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.lora.enabled = true;
    lp_model *m = NULL;
    assert_int_equal(lp_model_load("tests/golden/llama_lm", &o, &m), LP_STATUS_INVALID_ARG);
    assert_non_null(strstr(lp_err_msg(), "LoRA"));
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16), cmocka_unit_test(test_f32_packed), cmocka_unit_test(test_smollm),
        cmocka_unit_test(test_qwen2),           cmocka_unit_test(test_int8),
        cmocka_unit_test(test_stored_bf16), cmocka_unit_test(test_stored_f32),
        cmocka_unit_test(test_smollm2_stored),
        cmocka_unit_test(test_quantize_file_reloads),
        cmocka_unit_test(test_head_copy),
        cmocka_unit_test(test_decode_bytes),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
