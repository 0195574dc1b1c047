/* Inference weights kept quantized without LoRA (lp_model_options.weights): a GGUF's
 * blocks as stored, or an f32/bf16 checkpoint's Linears converted at load to Q8_0, Q4_0,
 * NF4, packed bf16 or packed f32. The Linears leave the f32 parameter table, as QLoRA's base
 * does, and run through lp_qmatmul_* (integer kernels for the GGML formats, the fused GEMV
 * for NF4 decode, the bf16 GEMM of bf16_gemm.c for bf16, a GGUF's BF16 tensors included,
 * the f32 GEMM of f32_gemm.c for packed f32). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

static const char *const fmt_names[] = {"f32", "stored", "q8_0", "q4_0", "nf4", "bf16", "f32_packed", "int8"};

const char *lp_weight_format_name(lp_weight_format f)
{
    return (unsigned)f < sizeof fmt_names / sizeof fmt_names[0] ? fmt_names[f] : "?";
}

lp_status lp_weight_format_parse(const char *s, lp_weight_format *out)
{
    for (size_t i = 0; s && i < sizeof fmt_names / sizeof fmt_names[0]; i++)
        if (!strcmp(s, fmt_names[i])) {
            *out = (lp_weight_format)i;
            return LP_OK;
        }
    if (s && !strcmp(s, "dequantize")) {
        *out = LP_WEIGHT_FORMAT_F32;
        return LP_OK;
    }
    return lp_err(LP_STATUS_INVALID_ARG,
                  "weight format '%s' (expected f32, stored, q8_0, q4_0, nf4, bf16, f32_packed or int8)", s ? s : "(null)");
}

/* Measured (bench/README.md, "Packed f32 GEMM in training", "Packed f32 input gradient at
 * many rows" and "AMD EPYC Zen 3"): a LoRA step with packed bases against the same step on
 * OpenBLAS. On a real AVX2-only CPU (Zen 3, OpenBLAS's Zen kernels at 88-92 % of the peak)
 * the DistilBERT B16 step is 1.14x faster on OpenBLAS (7.39 against 6.46 samples/s at 2
 * threads) and the Qwen2.5-0.5B-shaped one equal (0.324 / 0.321); the 1.03-1.24x once
 * measured for packing was LP_ISA=avx2 on an AVX-512 CPU against OpenBLAS forced to its
 * Haswell kernels, which no user runs. AVX-512: 0.93-1.00x, equal within the noise;
 * baseline: the plain C tiles are far slower. So no CPU packs by default; LP_F32_PACK=1
 * asks for it (the packed tests' way in). */
bool lp_model__pack_f32_bases(void)
{
    const char *e = getenv("LP_F32_PACK");
    return e && !strcmp(e, "1");
}

static uint64_t init_blocks(const lp_model_pslot *s, int64_t numel)
{
    return !s->src && (s->init == LP_INIT_NORMAL || s->init == LP_INIT_KAIMING) ? (uint64_t)(numel + 3) / 4 : 0;
}

lp_status lp_model__drop_keep_init_stream(lp_model *m)
{
    uint64_t at = 0; /* lp_rng_normal / _uniform take one counter block per 4 values */
    for (size_t i = 0; i < m->n_params; i++) {
        m->slots[i].rng_at = at;
        at += init_blocks(&m->slots[i], m->params[i].numel);
    }
    for (size_t i = 0; i < m->n_lins; i++)
        if (m->lins[i].wparam != SIZE_MAX)
            m->lins[i].qrng_at = m->slots[m->lins[i].wparam].rng_at;
    lp_status st = lp_model__drop_linear_params(m, NULL);
    m->n_replay = m->n_params;
    m->rng_end = at;
    return st;
}

/* How Linear ml is kept under the model's format: sets ml->quantized and its type. */
static void plan_linear(lp_model *m, lp_model_linear *ml)
{
    const int64_t in = ml->lin->in;
    ml->quantized = false;
    switch (m->opt.weights) {
    case LP_WEIGHT_FORMAT_STORED: {
        if (!m->qgguf)
            return;
        char hf[300];
        snprintf(hf, sizeof hf, "%s.weight", ml->module);
        int32_t t = lp_gguf_model_weight_type(m->qgguf, hf);
        if (t < 0 || t == LP_GGML_TYPE_F32 || !lp_ggml_type_runnable((lp_ggml_type)t))
            return; /* f32 in the file, or a type only dequantized: f32 */
        ml->quantized = true;
        /* a BF16 tensor runs the bf16 GEMM: repacked at load (lossless), not tile-converted */
        ml->qdtype = t == LP_GGML_TYPE_BF16 ? LP_DTYPE_BF16 : LP_DTYPE_GGML;
        ml->qgtype = (lp_ggml_type)t;
        return;
    }
    case LP_WEIGHT_FORMAT_Q8_0:
    case LP_WEIGHT_FORMAT_Q4_0:
        ml->quantized = in % 32 == 0;
        ml->qdtype = LP_DTYPE_GGML;
        ml->qgtype = m->opt.weights == LP_WEIGHT_FORMAT_Q8_0 ? LP_GGML_TYPE_Q8_0 : LP_GGML_TYPE_Q4_0;
        return;
    case LP_WEIGHT_FORMAT_INT8: /* the integer GEMM's tiles: whole 32-column steps, int32-exact sums */
        ml->quantized = lp_qweight_int8_tiles_nbytes(ml->lin->out, in) > 0;
        ml->qdtype = LP_DTYPE_INT8;
        return;
    case LP_WEIGHT_FORMAT_NF4:
        ml->quantized = in % LP_NF4_BLOCK == 0; /* blocks within rows: the fused GEMV applies */
        ml->qdtype = LP_DTYPE_NF4;
        return;
    case LP_WEIGHT_FORMAT_BF16: /* any shape: the packing pads rows and the odd column */
        ml->quantized = true;
        ml->qdtype = LP_DTYPE_BF16;
        return;
    case LP_WEIGHT_FORMAT_F32_PACKED: /* any shape: the packing pads the last panel */
        ml->quantized = true;
        ml->qdtype = LP_DTYPE_F32;
        return;
    default:
        return;
    }
}

/* *q (a GGUF's BF16 tensor as stored) repacked into the bf16 GEMM's panels: the values are
 * bf16 already, so unpacking to f32 and rounding back is exact. */
static lp_status repack_bf16(lp_qweight *q, const char *name)
{
    if (q->dtype != LP_DTYPE_GGML || q->gtype != LP_GGML_TYPE_BF16)
        return LP_OK;
    float *w = lp_malloc((size_t)q->n * sizeof *w);
    if (!w)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory repacking the bf16 weight", name);
    const int64_t rows = q->rows, cols = q->cols;
    lp_qweight_dequantize(w, q, 0, q->n);
    lp_qweight_free(q); /* first: never two copies in QUANTIZED_WEIGHT (the plan counts one) */
    lp_status st = lp_qweight_pack_bf16(q, w, rows, cols, name);
    free(w);
    return st;
}

lp_status lp_model__quant_setup(lp_model *m)
{
    const lp_weight_format f = m->opt.weights;
    if (f == LP_WEIGHT_FORMAT_F32)
        return LP_OK;
    if ((unsigned)f > LP_WEIGHT_FORMAT_INT8)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: unknown weight format %d", m->dir, (int)f);
    lp_status st;
    if (f == LP_WEIGHT_FORMAT_STORED && lp_path_is_gguf(m->dir) && (st = lp_gguf_open(m->dir, &m->qgguf)) != LP_OK)
        return st;
    bool *drop = lp_calloc(m->n_lins + 1, sizeof *drop);
    if (!drop)
        return lp_err(LP_STATUS_NO_MEMORY, "model: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < m->n_lins; i++) {
        plan_linear(m, &m->lins[i]);
        n += drop[i] = m->lins[i].quantized;
    }
    st = n ? lp_model__drop_linear_params(m, drop) : LP_OK;
    free(drop);
    return st;
}

/* Inference (no_grad) only: the LM head, V x C and often the largest single weight a decode
 * step reads (SmolLM2: 28 M of 135 M parameters; Qwen2.5-0.5B: 136 M of 494 M), gets a
 * quantized copy the head's forward uses; the f32 weight stays, since a tied head shares it
 * with the embedding lookup (which reads a few rows per token). Kept as: with STORED, a
 * GGUF's own quantized output.weight / token_embd.weight blocks, and nothing else (an F32
 * file or an f32 checkpoint keeps an f32 head: weights run as stored, with their numerics);
 * with a format asked for (--quantize q8_0 / q4_0 / nf4 / bf16 / int8), that format, as every
 * Linear gets it. */
static lp_status quantize_head(lp_model *m)
{
    lp_nn_linear *h = m->lm_head;
    /* packed f32: a copy would only add memory (the head is the tied embedding table), and
     * its f32 GEMM is the same arithmetic: the head stays on sgemm */
    if (!h || !m->opt.no_grad || m->opt.weights == LP_WEIGHT_FORMAT_F32 ||
        m->opt.weights == LP_WEIGHT_FORMAT_F32_PACKED || h->in % 32)
        return LP_OK;
    const lp_model_param *p = lp_model_param_find(m, "lm_head.weight");
    const char *hf = p ? "lm_head.weight" : "model.embed_tokens.weight";
    if (!p)
        p = lp_model_param_find(m, hf);
    if (!p || p->numel != h->in * h->out)
        return LP_OK;
    const bool stored = m->opt.weights == LP_WEIGHT_FORMAT_STORED;
    const int32_t t = m->qgguf ? lp_gguf_model_weight_type(m->qgguf, hf) : -1;
    if (stored && !(t > LP_GGML_TYPE_F32 && lp_ggml_type_runnable((lp_ggml_type)t)))
        return LP_OK; /* f32 in the file (or no file): the head runs in f32, as stored */
    if (!(m->head_q = lp_calloc(1, sizeof *m->head_q)))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory quantizing the LM head", m->dir);
    lp_status st;
    if (stored) { /* the file's own blocks (qgguf is open only for STORED) */
        st = lp_gguf_model_qweight(m->qgguf, hf, m->head_q, "lm_head (quantized copy)");
        if (st == LP_OK)
            st = repack_bf16(m->head_q, "lm_head (quantized copy)");
    } else if (m->opt.weights == LP_WEIGHT_FORMAT_BF16) {
        st = lp_qweight_pack_bf16(m->head_q, p->data, h->out, h->in, "lm_head (quantized copy)");
    } else if (m->opt.weights == LP_WEIGHT_FORMAT_INT8 && lp_qweight_int8_tiles_nbytes(h->out, h->in)) {
        st = lp_qweight_quantize_int8_tiles(m->head_q, p->data, h->out, h->in, "lm_head (quantized copy)");
    } else if (m->opt.weights == LP_WEIGHT_FORMAT_NF4 && h->in % LP_NF4_BLOCK == 0) {
        st = lp_qweight_quantize(m->head_q, LP_DTYPE_NF4, p->data, h->out, h->in, true, "lm_head (quantized copy)");
    } else {
        st = lp_qweight_quantize_ggml(m->head_q,
                                      m->opt.weights == LP_WEIGHT_FORMAT_Q4_0 ? LP_GGML_TYPE_Q4_0 : LP_GGML_TYPE_Q8_0,
                                      p->data, h->out, h->in, "lm_head (quantized copy)");
    }
    if (st == LP_OK) /* decode's largest GEMV (SmolLM2: 28 M of 135 M parameters) reads tiles too */
        st = lp_qweight_ggml_pack_tiles(m->head_q);
    if (st != LP_OK)
        return lp_err_wrap(st, "%s: quantizing the LM head", m->dir);
    h->qbase = m->head_q;
    h->ctx = &m->pass_ctx;
    return LP_OK;
}

lp_status lp_model__quant_finish(lp_model *m)
{
    lp_status st = LP_OK;
    lp_rng rng;
    lp_rng_init(&rng, m->opt.seed ^ 0x9e3779b97f4a7c15ull, LP_RNG_STREAM_INIT);
    for (size_t i = 0; st == LP_OK && i < m->n_lins; i++) {
        lp_model_linear *ml = &m->lins[i];
        if (!ml->quantized)
            continue;
        const int64_t out = ml->lin->out, in = ml->lin->in;
        if (!(ml->q = lp_calloc(1, sizeof *ml->q)))
            return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory quantizing %s", m->dir, ml->module);
        if (m->qgguf) {
            char hf[300];
            snprintf(hf, sizeof hf, "%s.weight", ml->module);
            st = lp_gguf_model_qweight(m->qgguf, hf, ml->q, ml->module);
            if (st == LP_OK)
                st = repack_bf16(ml->q, ml->module);
        } else {
            /* the f32 weight exists only for the moment it is quantized */
            float *w = lp_malloc((size_t)(out * in) * sizeof *w);
            if (!w)
                return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory quantizing %s", m->dir, ml->module);
            if (ml->qsrc) {
                lp_model__convert(w, ml->qsrc);
            } else if (m->n_replay) { /* the values the f32 model draws (a packed LoRA base) */
                lp_rng at;
                lp_rng_init(&at, m->opt.seed, LP_RNG_STREAM_INIT);
                at.offset = ml->qrng_at;
                lp_rng_normal(&at, w, out * in, 0.0f, (float)m->init_range);
            } else {
                lp_rng_normal(&rng, w, out * in, 0.0f, (float)m->init_range);
            }
            st = ml->qdtype == LP_DTYPE_NF4    ? lp_qweight_quantize(ml->q, LP_DTYPE_NF4, w, out, in, true, ml->module)
                 : ml->qdtype == LP_DTYPE_INT8 ? lp_qweight_quantize_int8_tiles(ml->q, w, out, in, ml->module)
                 : ml->qdtype == LP_DTYPE_BF16 ? lp_qweight_pack_bf16(ml->q, w, out, in, ml->module)
                 : ml->qdtype == LP_DTYPE_F32  ? lp_qweight_pack_f32(ml->q, w, out, in, ml->module)
                                               : lp_qweight_quantize_ggml(ml->q, ml->qgtype, w, out, in, ml->module);
            free(w);
            if (st != LP_OK)
                st = lp_err_wrap(st, "%s: quantizing %s.weight to %s", m->dir, ml->module,
                                 lp_weight_format_name(m->opt.weights));
        }
        /* prefill's row-interleaved tiles, once the blocks are final (q/k rows unpermuted) */
        if (st == LP_OK)
            st = lp_qweight_ggml_pack_tiles(ml->q);
        ml->qsrc = NULL;
        ml->lin->w = NULL;
        ml->lin->dw = NULL;
        ml->lin->qbase = ml->q;
        ml->lin->ctx = &m->pass_ctx;
    }
    if (st == LP_OK)
        st = quantize_head(m);
    lp_gguf_close(m->qgguf);
    m->qgguf = NULL;
    return st;
}

double lp_model_decode_weight_bytes(const lp_model *m)
{
    double bytes = 0, embed = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        const double b = 4.0 * (double)m->params[i].numel;
        if (strstr(m->params[i].name, "embed_tokens"))
            embed += b; /* a row a token; the whole table only as a tied head (below) */
        else if (!(m->head_q && !strcmp(m->params[i].name, "lm_head.weight")))
            bytes += b; /* an untied head's f32 weight stays beside its copy, unread */
    }
    if (m->head_q)
        bytes += (double)lp_qweight_decode_nbytes(m->head_q);
    else if (lp_model_config_get(m)->tie_word_embeddings)
        bytes += embed;
    for (size_t i = 0; i < m->n_lins; i++)
        if (m->lins[i].q)
            bytes += (double)lp_qweight_decode_nbytes(m->lins[i].q);
    return bytes;
}
