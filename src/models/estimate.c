/* Predicted peak training memory by category, from the same plan the engine allocates by:
 * the model is opened plan-only (config, parameter table, PEFT setup; no block allocated,
 * no weight read) and every term is what lp_model_load, lp_model__layout_grads, the family's
 * plan(), lp_model__peft_bind, lp_optim_init and the kernels' scratch would take for one
 * (B,T) training step. `loupe inspect --method` prints it; tests/models/test_mem_plan.c
 * and tests/train/mem_estimate.sh hold it against what the allocator measures.
 *
 * What "peak" means. The allocator counts every buffer's bytes per category; summary.json's
 * peak_memory_bytes is the highest SUM over categories at one instant. The engine allocates
 * its blocks once (parameters, gradients, AdamW state, the activation, scratch and batch
 * blocks, sized for the largest batch) and keeps them for the whole run, so at the peak
 * everything is live together; the only memory that comes and goes is the kernels' scratch
 * inside one layer's pass (temporary_transient), and its largest instance adds to the rest.
 *
 * The transient scratch, per Linear (out,in) (the kernels allocate it per call):
 *   eager LoRA backward: dv (N,out) + du (N,r) + dx (N,in) [+ the dropped input (N,in)]
 *                        [+ the dequantized weight (out,in) for a quantized base]
 *   eager quantized base: the dequantized weight (out,in)
 *   fused quantized base: one dequantized slab of W at a time (lp_qmatmul_slab_width),
 *                        none for packed f32 (its forward and backward GEMMs read the panels);
 *                        kept GGML formats forward with the activations quantized (N rows
 *                        of 40 bytes per 32, or 292 per 256; the types without a tiled
 *                        GEMM from LP_GGML_SLAB_MIN_ROWS rows on: one f32 slab (out, kc))
 *                        or per-thread f32 tiles of 16
 *                        rows (F16/BF16); NF4 for N <= 8 through the fused GEMV (none);
 *                        packed bf16 weights: the activations rounded to bf16 (N, even in);
 *                        packed int8 weights (--quantize int8): the activations as bytes
 *                        (N, in) and their row scales (N)
 *   --dtype bf16 (a trained weight's bf16 copy, or LoRA's bf16 base): the forward's rounded
 *                        activations (N, even in); the backward's dY rounded (N, even out)
 *                        for dX, or for dW dY^T (out, even N) plus X's panels (in up to 32,
 *                        even N), whichever is larger (lp_qweight_bf16_train_scratch_nbytes)
 *   fused LoRA backward:  g (N,r) beside the base's slab [with dropout: 256 dropped input
 *                        rows (256,in) or threads x 32 masked rows (32,in)]
 *   fused LoRA dropout forward: threads x 64 dropped rows (64,in)
 * and, not per Linear, the fused attention forward's packed keys and values per thread
 * (lp_attention_fused_pack_floats), or its backward's D-sized tiles and GQA dk/dv per query
 * head (lp_attention_fused_backward_scratch_floats), whichever is larger. */
#include <string.h>

#include "models_internal.h"

static uint64_t max2(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* linear_scratch below, bf16_base: the base's GEMMs are the bf16 ones (a bf16 LoRA base, or
 * QLoRA's per-GEMM bf16 copy) */
static uint64_t linear_scratch_of(const lp_model *m, const lp_model_linear *ml, uint64_t N, uint64_t th,
                                  bool bf16_base)
{
    const uint64_t out = (uint64_t)ml->lin->out, in = (uint64_t)ml->lin->in;
    const bool quant = (m->lora.enabled && m->lora.base_dtype != LP_DTYPE_F32) || ml->quantized;
    const bool adapted = ml->adapted;
    const uint64_t r = adapted ? (uint64_t)m->lora.rank : 0;
    const bool drop = adapted && m->lora.dropout > 0;
    if (lp_model__bf16_cache_nbytes(m, ml)) /* bf16 copy of a trained weight (any exec): the forward's
                                              rounded activations, or the backward's operands */
        return max2((N * (uint64_t)(in + (in & 1)) * 2 + 3) / 4,
                    (lp_qweight_bf16_train_scratch_nbytes((int64_t)N, (int64_t)in, (int64_t)out, true, true) + 3) / 4);
    if (m->exec == LP_EXEC_MODE_EAGER) {
        uint64_t w = quant ? out * in : 0;
        if (!adapted)
            return w;
        return N * out + N * r + N * in + (drop ? N * in : 0) + w;
    }
    /* each freed before the next: forward dropped rows, then the slab (out, kc); backward
     * (beside g) the dropped input for dA, the slab (ob, in), the masked LoRA rows */
    const uint64_t slab = out * (uint64_t)lp_qmatmul_slab_width((int64_t)out, (int64_t)in);
    uint64_t fwd = max2(quant ? slab : 0, drop ? th * 64 * in : 0);
    if (ml->quantized && ml->qdtype == LP_DTYPE_GGML) {
        /* a long prefill of a type without the tiled GEMM: one f32 slab; else the integer
         * kernels' N quantized rows (blocks of 32: 40 bytes, of 256: 292), or f16 tiles */
        const uint64_t blk = (uint64_t)lp_ggml_type_traits_get((uint32_t)ml->qgtype)->block;
        fwd = lp_ggml_forward_by_slabs(ml->qgtype, (int64_t)N) ? slab
              : ml->qgtype == LP_GGML_TYPE_F16 || ml->qgtype == LP_GGML_TYPE_BF16
                  ? th * 16 * in
                  : (N * (in / blk) * (blk == 256 ? 292 : 40) + 3) / 4;
    } else if ((ml->quantized && ml->qdtype == LP_DTYPE_BF16) ||
               bf16_base) /* the activations rounded to bf16, even width */
        fwd = max2((N * (in + (in & 1)) * 2 + 3) / 4, drop ? th * 64 * in : 0);
    else if (ml->quantized && ml->qdtype == LP_DTYPE_INT8) /* the int8 GEMM: N rows of in bytes + N scales */
        fwd = (N * in + 4 * N + 3) / 4;
    else if (ml->quantized && ml->qdtype == LP_DTYPE_F32) /* packed f32: no scratch (a tile on each stack) */
        fwd = 0;
    else if (ml->quantized && N <= 8) /* NF4 decode: the fused GEMV, no scratch */
        fwd = 0;
    /* packed f32 (an inference format, or a LoRA run's packed base): dinp on the panels, no slab */
    const bool slab_bwd = quant && !(ml->quantized && ml->qdtype == LP_DTYPE_F32);
    uint64_t bwd = max2(bf16_base ? (lp_qweight_bf16_train_scratch_nbytes((int64_t)N, (int64_t)in, (int64_t)out, true,
                                                                           false) + 3) / 4
                        : slab_bwd ? (uint64_t)lp_qmatmul_slab_width((int64_t)in, (int64_t)out) * in
                                   : 0,
                        drop ? max2(256 * in, th * 32 * in) : 0);
    return max2(fwd, bwd + (adapted ? N * r : 0));
}

/* Floats of the largest kernel scratch one call on a Linear allocates. QLoRA under --dtype
 * bf16 (lp_nn_linear.qbase_bf16): the base's bf16 copy for the call (both packings) is made
 * from its f32 dequantization (freed before the GEMM) and lives through the bf16 path's own
 * scratch. */
static uint64_t linear_scratch(const lp_model *m, const lp_model_linear *ml, uint64_t N, uint64_t th)
{
    const bool qbf16 = lp_model__qbase_bf16(m);
    const bool bf16_base = m->lora.enabled && (m->lora.base_dtype == LP_DTYPE_BF16 || qbf16);
    const uint64_t s = linear_scratch_of(m, ml, N, th, bf16_base);
    if (!qbf16)
        return s;
    const uint64_t out = (uint64_t)ml->lin->out, in = (uint64_t)ml->lin->in;
    const uint64_t copy = (lp_qweight_bf16_train_plan_nbytes((int64_t)out, (int64_t)in) + 3) / 4;
    return copy + max2(out * in, s);
}

/* A GGML weight's bytes: its blocks, plus the prefill tiles, which replace the blocks where
 * every kernel reads them (lp_qweight_ggml_tiles_only); then *transient is the blocks, held
 * beside the tiles while they are packed. */
static uint64_t ggml_weight_nbytes(lp_ggml_type t, int64_t rows, int64_t cols, uint64_t *transient)
{
    const uint64_t tiles = lp_qweight_ggml_tiles_nbytes(t, rows, cols), blocks = lp_qweight_ggml_plan_nbytes(t, rows, cols);
    const bool only = tiles && lp_qweight_ggml_tiles_only(t);
    *transient = only ? blocks : 0;
    return only ? tiles : blocks + tiles;
}

/* An int8 inference weight: its tiles; *transient the rows and scales they are packed from. */
static uint64_t int8_weight_nbytes(int64_t rows, int64_t cols, uint64_t *transient)
{
    *transient = lp_qweight_plan_nbytes(LP_DTYPE_INT8, rows, cols, false);
    return lp_qweight_int8_tiles_nbytes(rows, cols);
}

static uint64_t up16u(uint64_t n)
{
    return (n + 15) & ~(uint64_t)15;
}

lp_status lp_model_estimate(const char *dir, const lp_model_options *opt, int64_t B, int64_t T, int32_t threads,
                            lp_mem_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (B < 1 || T < 1 || B > (1 << 20) || T > (1 << 24))
        return lp_err(LP_STATUS_INVALID_ARG, "memory estimate: batch size and sequence length must be positive");
    if (threads < 0 || threads > 4096)
        return lp_err(LP_STATUS_INVALID_ARG, "memory estimate: threads must be in [0, 4096]");
    lp_model_options o = *opt;
    o.training = true;
    o.no_grad = false;
    o.quiet = true;
    lp_model *m = NULL;
    lp_status st = lp_model__open(dir, &o, true, &m);
    if (st != LP_OK)
        return st;
    /* what a forward would refuse, refused here; the largest terms, in floating point: refuse
     * sizes whose byte counts overflow */
    const lp_model_config *c = &m->cfg;
    if (T > c->max_position_embeddings) {
        st = lp_err(LP_STATUS_INVALID_ARG, "%s/config.json: sequence length %lld exceeds max_position_embeddings %lld",
                    dir, (long long)T, (long long)c->max_position_embeddings);
        lp_model_free(m);
        return st;
    }
    double big = (double)B * (double)T *
                 ((double)c->num_heads * (double)T + 8.0 * (double)c->hidden_size + 3.0 * (double)c->intermediate_size +
                  2.0 * (double)m->n_classes) *
                 (double)(c->num_layers + 1) * 8.0;
    if (big > 1e18) {
        lp_model_free(m);
        return lp_err(LP_STATUS_RANGE, "memory estimate: batch %lld x seq len %lld is too large to count",
                      (long long)B, (long long)T);
    }
    const uint64_t N = (uint64_t)B * (uint64_t)T, th = threads > 0 ? (uint64_t)threads : 1;

    /* parameters, gradients and AdamW state from the table (lp_model__layout_grads, lp_optim_init) */
    uint64_t grad_floats = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        const lp_model_param *p = &m->params[i];
        out->total_params += (uint64_t)p->numel;
        if (!p->trainable)
            continue;
        out->trainable_params += (uint64_t)p->numel;
        grad_floats += up16u((uint64_t)p->numel);
    }
    for (size_t i = 0; i < m->n_adapters; i++) {
        const lp_nn_linear *l = m->adapters[i].ml->lin;
        out->lora_params += (uint64_t)m->adapters[i].lora.r * (uint64_t)(l->in + l->out);
    }
    const bool quant = m->lora.enabled && m->lora.base_dtype != LP_DTYPE_F32;
    uint64_t qlive = 0; /* the weights are quantized one after another: the peak is the live
                           ones plus one weight's transient blocks */
    for (size_t i = 0; i < m->n_lins; i++) { // quantized bases left the table
        const lp_model_linear *ml = &m->lins[i];
        const lp_nn_linear *l = ml->lin;
        if (lp_model__bf16_cache_nbytes(m, ml)) { /* --dtype bf16: the trained weight's bf16 copy */
            qlive += lp_model__bf16_cache_nbytes(m, ml);
            out->quantized_weights = max2(out->quantized_weights, qlive);
        }
        if (!quant && !ml->quantized)
            continue;
        out->total_params += (uint64_t)(l->out * l->in);
        uint64_t transient = 0;
        const uint64_t bytes = quant && m->lora.base_dtype == LP_DTYPE_BF16 ? lp_qweight_bf16_train_plan_nbytes(l->out, l->in)
                               : quant || ml->qdtype == LP_DTYPE_NF4
                                   ? lp_qweight_plan_nbytes(quant ? m->lora.base_dtype : LP_DTYPE_NF4, l->out, l->in, true)
                               : ml->qdtype == LP_DTYPE_BF16 ? lp_qweight_bf16_plan_nbytes(l->out, l->in)
                               : ml->qdtype == LP_DTYPE_F32  ? lp_qweight_f32_plan_nbytes(l->out, l->in)
                               : ml->qdtype == LP_DTYPE_INT8 ? int8_weight_nbytes(l->out, l->in, &transient)
                                                             : ggml_weight_nbytes(ml->qgtype, l->out, l->in, &transient);
        out->quantized_weights = max2(out->quantized_weights, qlive + bytes + transient);
        qlive += bytes;
    }
    out->parameters = 4 * (uint64_t)m->n_floats;
    out->gradients = 4 * grad_floats;
    out->optimizer_state = 2 * 4 * out->trainable_params;

    /* activations, scratch and batch blocks: the family's plan, plus the adapters' saved x·Aᵀ
     * and dropout masks (lp_model__peft_bind) */
    const bool shared = m->ckpt;
    lp_model_plan pl = m->fam->plan(m, B, T, shared, true);
    uint64_t lora_f = 0, lora_u8 = 0;
    for (size_t i = 0; i < m->n_adapters; i++) {
        lora_f += up16u(N * (uint64_t)m->adapters[i].lora.r);
        if (m->adapters[i].lora.dropout > 0.0f)
            lora_u8 += (N * (uint64_t)m->adapters[i].ml->lin->in + 63) & ~(uint64_t)63;
    }
    out->activations = 4 * ((uint64_t)pl.act + lora_f) + (uint64_t)pl.u8 + lora_u8;
    out->activations_per_layer = 4 * (uint64_t)pl.layer_act + (uint64_t)pl.layer_u8 + (4 * lora_f + lora_u8) / (uint64_t)m->L;
    uint64_t scratch = 0;
    for (size_t i = 0; i < m->n_lins; i++)
        scratch = max2(scratch, linear_scratch(m, &m->lins[i], N, th));
    if (m->exec == LP_EXEC_MODE_FUSED && c->num_heads > 0) {
        // the fused attention forward's packed keys and values; the backward's D-sized tiles
        // (above LP_ATTN_TILE_MAX_D) and, for GQA with fewer (batch, kv head) pairs than twice
        // the threads, dk/dv per query head
        scratch = max2(scratch, th * (uint64_t)lp_attention_fused_pack_floats(T, c->head_dim));
        const lp_attn_geom g = {.B = B, .T = T, .H = c->num_heads, .Hkv = c->num_kv_heads, .D = c->head_dim};
        uint64_t bwd = c->head_dim > LP_ATTN_TILE_MAX_D ? th * (uint64_t)lp_attention_fused_tile_floats(c->head_dim) : 0;
        if (g.H > g.Hkv && (uint64_t)(g.B * g.Hkv) < 2 * th)
            bwd += (uint64_t)lp_attention_fused_backward_scratch_floats(&g);
        scratch = max2(scratch, bwd);
    }
    out->temporary_transient = 4 * scratch;
    out->temporary = 4 * (uint64_t)pl.tmp + out->temporary_transient;
    out->input = 4 * (uint64_t)pl.in;
    out->total = out->parameters + out->gradients + out->optimizer_state + out->activations +
                 out->quantized_weights + out->temporary + out->input;
    lp_model_free(m);
    return LP_OK;
}
