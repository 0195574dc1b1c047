/* Predicted peak training memory by category (fp32 weights, AdamW), from a model's config
 * and parameter map, laid out the way loupe's engine allocates it: `loupe inspect --method`
 * prints it, and tests/train/mem_estimate.sh holds it within 10 % of what `loupe train`
 * measures (summary.json peak_memory_bytes, the tagged allocator's peak).
 *
 * What "peak" means. The allocator counts every buffer's bytes per category; summary.json's
 * peak_memory_bytes is the highest SUM over categories at one instant, and its
 * memory_by_category holds each category's own highest value (possibly at different
 * instants). The engine allocates its blocks once (parameters, gradients, AdamW state, the
 * activation, scratch and batch blocks, sized for the largest batch seen) and keeps them
 * for the whole run, so at the peak everything below is live together and the peak is the
 * sum of the categories; the only memory that comes and goes is the kernels' scratch inside
 * one layer's pass (`temporary_transient`), and its largest instance adds to the rest.
 * Hence total = the sum of the categories here, which matches both of summary's figures.
 *
 * Notation: B batch, T sequence length, N = B·T, H hidden, A heads, I intermediate,
 * L layers, C labels, r LoRA rank; up16(n) rounds a float count up to 16 (64 bytes: the
 * engine starts every tensor on a 64-byte boundary). Float32 = 4 bytes, masks 1 byte.
 *
 * parameters       4·Σ up16(numel) over every parameter (one block), plus the adapters'
 *                  lora_A (r,in) and lora_B (out,r) on query and value; QLoRA leaves the
 *                  quantized layer linears out (they move to quantized_weights)
 * gradients        4·Σ up16(numel) over the trainable parameters: full: all; LoRA/QLoRA:
 *                  the adapters and the classification head (PEFT's modules_to_save:
 *                  classifier, DistilBERT's pre_classifier; BERT's pooler stays frozen)
 * optimizer_state  AdamW exp_avg and exp_avg_sq: 2·4·Σ numel over the trainable parameters
 * quantized_weights QLoRA: each layer Linear as NF4, blocksize 64, double quantization:
 *                  up64(n/2) code bytes + up64(n/64) u8 absmax + 4 bytes per 256 absmax
 * input            the batch as the model keeps it: ids, mask, token types (3N int32) and
 *                  labels (B), + 64 words
 *
 * activations (BERT / DistilBERT, post-LN; what the engine keeps for backward), per layer:
 *   q, k, v, ctx            4 (N,H)   attention backward
 *   res1 = x + drop(attn)   (N,H)     LayerNorm-1 input (the output projection is summed
 *                                     into it in place); + mean, rstd (N) each
 *   ln1                     (N,H)     FFN input and residual
 *   h, gelu(h)              2 (N,I)   GELU backward, FFN-out input
 *   res2 = ln1 + drop(ffn)  (N,H)     LayerNorm-2 input; + mean, rstd (N) each
 *   out                     (N,H)     the layer output = the next layer's input
 *   eager: P (B,A,T,T) softmax probabilities, + a dropped copy (B,A,T,T) and its u8 mask
 *          when attention dropout > 0 (PyTorch's eager attention keeps the same two);
 *   fused: the log-sum-exp (B,A,T) instead (probabilities recomputed in backward; the
 *          attention dropout mask is redrawn from its rng counters, never kept)
 *   hidden dropout > 0: two u8 masks (N,H)
 *   LoRA: each adapter keeps x·Aᵀ (N,r) (+ a u8 mask of its input (N,in) with LoRA dropout)
 *   => floats 8·NH + 2·NI + 4·N + (eager: A·B·T² [×2 with dropout] | fused: A·B·T)
 * Outside the layers: the embedding sum and its LayerNorm output 2 (N,H) + mean, rstd,
 * its u8 dropout mask (N,H); the head's pooled, dense, activation and dropped (B,H) each,
 * a u8 mask (B,H), the logits (B,C) and their log-sum-exp (B).
 * Gradient checkpointing keeps one layer's set (recomputed layer by layer in backward)
 * plus every layer's output (N,H) instead of L sets. Evaluation reuses the same blocks.
 *
 * temporary: the backward scratch block, kept between steps: two activation gradients
 *   2 (N,H), then max(one layer's backward, 2 (N,H)) where a layer needs 3 (N,H) plus
 *   max(attention: dctx, dq, dk, dv 4 (N,H) [+ dP and its ping-pong partner 2 (B,A,T,T)
 *   eager], FFN: (N,I)); + dlogits (B,C). On top, the largest kernel scratch of one call
 *   (temporary_transient), per Linear (out,in):
 *   eager LoRA backward: dv (N,out) + du (N,r) + dx (N,in) [+ the dropped input (N,in)]
 *                        [+ the dequantized weight (out,in) for QLoRA]
 *   eager QLoRA base:    the dequantized weight (out,in)
 *   fused QLoRA base:    one dequantized slab of W at a time: (out, kc) forward, (ob, in)
 *                        backward, kc and ob 64..256 wide and <= 1 Mi floats a slab
 *   fused LoRA backward: g (N,r) beside the base's slab [or, with dropout, 256 dropped
 *                        input rows (256,in) or threads × 32 masked rows (32,in)]
 *   fused LoRA dropout forward: threads × 64 dropped rows (64,in), before the base's slab
 *   and, not per Linear, the fused attention forward: threads × (⌈T/64⌉·64 + T)·hd floats
 *   (each thread's head keys, transposed in 64-wide tiles, and values, packed once), plus,
 *   for hd > 256 only, each thread's hd-sized tiles (lp_attention_fused_pack_floats)
 *
 * Llama / Qwen2 / Mistral (pre-RMSNorm; the engine does not train these yet, so this is the
 * PyTorch-style contract an engine keeping exactly what backward needs must meet):
 *   x + rstd, n1, q, k after RoPE, v, P (B,A,T,T), ctx, h + rstd, n2, gate, up, silu(gate)·up
 *   => floats 4·NH + N·(2·A·hd + 2·KV·hd) + A·B·T² + 3·NI + 2·N (+ 2·N·r with LoRA on
 *   q_proj, v_proj); outside: final RMSNorm input + rstd and output, causal LM logits and
 *   their softmax (2·N·V) or sequence classification scores (N,C); temporary: two
 *   activation gradients of (N,max(H,I,A·hd)) and dP (B,A,T,T), + the largest dequantized
 *   weight for QLoRA. */
#include "io_internal.h"
#include "loupe/kernels.h" /* header-only: the kernels' scratch layouts (no link dependency) */

#include <string.h>

static uint64_t up16(uint64_t n)
{
    return (n + 15) & ~(uint64_t)15;
}

static uint64_t up64(uint64_t n)
{
    return (n + 63) & ~(uint64_t)63;
}

static uint64_t max2(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Bytes of one NF4 weight of n values as the engine stores it (lp_qweight_quantize). */
static uint64_t nf4_bytes(uint64_t n)
{
    uint64_t blocks = (n + 63) / 64;
    return up64((n + 1) / 2) + up64(blocks) + 4 * ((blocks + 255) / 256);
}

/* Floats of the largest kernel scratch one call on a Linear (out,in) allocates. */
static uint64_t linear_scratch(uint64_t out, uint64_t in, bool adapted, bool quant,
                               const lp_mem_estimate_opts *o, uint64_t N, uint64_t r)
{
    const uint64_t th = o->threads > 0 ? (uint64_t)o->threads : 1;
    const bool drop = adapted && o->lora_dropout > 0;
    if (o->eager) {
        uint64_t w = quant ? out * in : 0;
        if (!adapted)
            return w;
        return N * out + N * r + N * in + (drop ? N * in : 0) + w;
    }
    /* each freed before the next: forward dropped rows, then the slab (out, kc); backward
     * (beside g) the dropped input for dA, the slab (ob, in), the masked LoRA rows */
    uint64_t fwd = max2(quant ? out * (uint64_t)lp_qmatmul_slab_width((int64_t)out, (int64_t)in) : 0, drop ? th * 64 * in : 0);
    uint64_t bwd = max2(quant ? (uint64_t)lp_qmatmul_slab_width((int64_t)in, (int64_t)out) * in : 0, drop ? max2(256 * in, th * 32 * in) : 0);
    return max2(fwd, bwd + (adapted ? N * r : 0));
}

static void bert_terms(const lp_model_config *c, const lp_param_map *m, const lp_mem_estimate_opts *o,
                       lp_mem_estimate *out)
{
    const uint64_t B = (uint64_t)o->batch_size, T = (uint64_t)o->seq_len, N = B * T;
    const uint64_t H = (uint64_t)c->hidden_size, A = (uint64_t)c->num_heads;
    const uint64_t I = (uint64_t)c->intermediate_size;
    const uint64_t L = (uint64_t)c->num_layers, C = (uint64_t)c->num_labels;
    const bool lora = o->method != LP_TRAIN_METHOD_FULL, quant = o->method == LP_TRAIN_METHOD_QLORA;
    const uint64_t r = lora ? (uint64_t)o->lora_rank : 0;
    const bool hdrop = c->hidden_dropout > 0, adrop = o->eager && c->attention_dropout > 0;

    uint64_t f = 8 * N * H + 2 * N * I + 4 * N, u8 = hdrop ? 2 * N * H : 0;
    if (o->eager) {
        f += A * B * T * T * (adrop ? 2 : 1);
        u8 += adrop ? A * B * T * T : 0;
    } else {
        f += A * B * T;
    }
    /* the adapters of one layer (query, value) and the largest kernel scratch of a Linear */
    uint64_t lora_f = 0, lora_u8 = 0, scratch = 0;
    for (size_t i = 0; i < m->n; i++) {
        const lp_param_binding *p = &m->params[i];
        if (p->layer != 0 || !p->is_linear_weight)
            continue;
        const uint64_t po = (uint64_t)p->shape[0], pi = (uint64_t)p->shape[1];
        bool adapted = lora && (p->role == LP_PARAM_ROLE_Q_W || p->role == LP_PARAM_ROLE_V_W);
        if (adapted) {
            lora_f += N * r;
            lora_u8 += o->lora_dropout > 0 ? N * pi : 0;
        }
        scratch = max2(scratch, linear_scratch(po, pi, adapted, quant, o, N, r));
    }
    if (!o->eager && A > 0) { /* the fused attention forward's packed keys and values */
        const uint64_t th = o->threads > 0 ? (uint64_t)o->threads : 1;
        scratch = max2(scratch, th * (uint64_t)lp_attention_fused_pack_floats((int64_t)T, (int64_t)(H / A)));
    }
    out->activations_per_layer = 4 * (f + lora_f) + u8 + lora_u8;
    uint64_t kept = o->grad_checkpointing ? 4 * (f + L * N * H) + u8 : L * (4 * f + u8);
    uint64_t outside = 4 * (2 * N * H + 2 * N + 4 * B * H + B * C + B) + N * H + B * H;
    out->activations = kept + L * (4 * lora_f + lora_u8) + outside;

    uint64_t attn = 4 * N * H + (o->eager ? 2 * A * B * T * T : 0);
    uint64_t layer = 3 * N * H + max2(attn, N * I);
    out->temporary_transient = 4 * scratch;
    out->temporary = 4 * (2 * N * H + max2(layer, 2 * N * H) + C * B) + out->temporary_transient;
    out->input = 4 * (3 * N + B + 64);
}

static void llama_terms(const lp_model_config *c, const lp_param_map *m, const lp_mem_estimate_opts *o,
                        uint64_t quant_numel_max, lp_mem_estimate *out)
{
    const uint64_t B = (uint64_t)o->batch_size, T = (uint64_t)o->seq_len, N = B * T;
    const uint64_t H = (uint64_t)c->hidden_size, A = (uint64_t)c->num_heads;
    const uint64_t I = (uint64_t)c->intermediate_size;
    const uint64_t hd = (uint64_t)c->head_dim;
    const uint64_t KV = (uint64_t)c->num_kv_heads, L = (uint64_t)c->num_layers, C = (uint64_t)c->num_labels;
    const uint64_t V = (uint64_t)c->vocab_size;
    const uint64_t r = o->method != LP_TRAIN_METHOD_FULL ? (uint64_t)o->lora_rank : 0;
    uint64_t floats =
        4 * N * H + N * (2 * A * hd + 2 * KV * hd) + A * B * T * T + 3 * N * I + 2 * N + 2 * N * r;
    uint64_t mask_bytes = c->attention_dropout > 0 ? A * B * T * T : 0;
    uint64_t outside = 4 * (2 * N * H + N);
    if (m->task == LP_MODEL_TASK_CAUSAL_LM)
        outside += 4 * 2 * N * V;
    else if (m->task == LP_MODEL_TASK_SEQ_CLS)
        outside += 4 * N * C;
    out->activations_per_layer = 4 * floats + mask_bytes;
    out->activations = L * out->activations_per_layer + outside;
    uint64_t w = max2(max2(H, I), A * hd);
    out->temporary_transient = o->method == LP_TRAIN_METHOD_QLORA ? 4 * quant_numel_max : 0;
    out->temporary = 4 * (2 * N * w + A * B * T * T) + out->temporary_transient;
    out->input = 4 * (3 * N + B + 64);
}

lp_status lp_mem_estimate_compute(const lp_model_config *c, const lp_param_map *m, const lp_mem_estimate_opts *o,
                                  lp_mem_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (o->batch_size < 1 || o->seq_len < 1 || o->batch_size > (1 << 20) || o->seq_len > (1 << 24))
        return lp_err(LP_STATUS_INVALID_ARG, "memory estimate: batch size and sequence length must be positive");
    if (o->method != LP_TRAIN_METHOD_FULL && (o->lora_rank < 1 || o->lora_rank > 65536))
        return lp_err(LP_STATUS_INVALID_ARG, "memory estimate: LoRA rank must be in [1, 65536]");
    if (!(o->lora_dropout >= 0 && o->lora_dropout < 1) || o->threads < 0 || o->threads > 4096)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "memory estimate: LoRA dropout must be in [0, 1) and threads in [0, 4096]");
    /* the largest terms, in floating point: refuse sizes whose byte counts overflow */
    double big = (double)o->batch_size * (double)o->seq_len *
                 ((double)c->num_heads * (double)o->seq_len + 8.0 * (double)c->hidden_size +
                  3.0 * (double)c->intermediate_size + 2.0 * (double)c->vocab_size + (double)o->lora_rank) *
                 (double)(c->num_layers + 1) * 8.0;
    if (big > 1e18)
        return lp_err(LP_STATUS_RANGE, "memory estimate: batch %lld x seq len %lld is too large to count",
                      (long long)o->batch_size, (long long)o->seq_len);
    const bool lora = o->method != LP_TRAIN_METHOD_FULL, quant = o->method == LP_TRAIN_METHOD_QLORA;
    const uint64_t r = lora ? (uint64_t)o->lora_rank : 0;

    uint64_t head = 0, head_padded = 0, param_floats = 0, adapter_floats = 0, quant_numel_max = 0;
    for (size_t i = 0; i < m->n; i++) {
        const lp_param_binding *p = &m->params[i];
        out->total_params += p->numel;
        /* PEFT's modules_to_save for sequence classification: classifier/score (and
         * DistilBERT's pre_classifier, whose name ends in "classifier") */
        if (p->role >= LP_PARAM_ROLE_PRE_CLS_W && p->role <= LP_PARAM_ROLE_CLS_B) {
            head += p->numel;
            head_padded += up16(p->numel);
        }
        bool stack_linear = p->layer >= 0 && p->is_linear_weight;
        if (stack_linear && (p->role == LP_PARAM_ROLE_Q_W || p->role == LP_PARAM_ROLE_V_W) && lora) {
            uint64_t a = r * (uint64_t)p->shape[1], b = (uint64_t)p->shape[0] * r;
            out->lora_params += a + b;
            adapter_floats += up16(a) + up16(b);
        }
        if (stack_linear && quant) {
            out->quantized_weights += nf4_bytes(p->numel);
            quant_numel_max = max2(quant_numel_max, p->numel);
            continue; /* not in the parameter block */
        }
        param_floats += up16(p->numel);
    }
    out->parameters = 4 * (param_floats + adapter_floats);
    out->trainable_params = lora ? out->lora_params + head : out->total_params;
    out->gradients = 4 * (lora ? adapter_floats + head_padded : param_floats);
    out->optimizer_state = 2 * 4 * out->trainable_params;
    if (c->family == LP_MODEL_FAMILY_BERT)
        bert_terms(c, m, o, out);
    else
        llama_terms(c, m, o, quant_numel_max, out);
    out->total = out->parameters + out->gradients + out->optimizer_state + out->activations +
                 out->quantized_weights + out->temporary + out->input;
    return LP_OK;
}
