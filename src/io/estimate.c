/* Predicted peak training memory by category (fp32 weights, AdamW), from a model's
 * config and parameter map. The activation formula is the contract a training engine
 * that keeps exactly what backward needs must meet (checked later within 10 %).
 *
 * Notation: B batch, T sequence length, H hidden, A heads, hd head dim, KV kv heads,
 * I intermediate, V vocab, C labels, r LoRA rank; all tensors float32 (4 bytes) except
 * dropout masks (1 byte per element, kept only when that dropout probability is > 0).
 *
 * BERT / DistilBERT layer (post-LN), saved for backward:
 *   x      (B,T,H)   layer input: dW of the Q, K, V linears
 *   q,k,v  3(B,T,H)  attention backward (dScores needs q,k; dV needs probs, dProbs needs v)
 *   P      (B,A,T,T) softmax probabilities (+ uint8 mask if attention dropout)
 *   ctx    (B,T,H)   input of the attention output dense
 *   x̂1     (B,T,H)   normalized LayerNorm-1 input, + rstd (B,T)   (+ uint8 mask (B,T,H))
 *   h1     (B,T,H)   LayerNorm-1 output: input of FFN-in and the residual
 *   u      (B,T,I)   FFN-in pre-activation (GELU backward)
 *   g      (B,T,I)   GELU output: input of FFN-out
 *   x̂2     (B,T,H)   normalized LayerNorm-2 input, + rstd (B,T)   (+ uint8 mask (B,T,H))
 *   => floats 8·BTH + 2·BTI + A·B·T² + 2·BT; masks 2·BTH + A·B·T² bytes.
 *   LoRA on query and value adds the rank-r projection x·Aᵀ: 2·B·T·r floats.
 * Outside the layers: embedding LayerNorm x̂ + rstd (+ mask), the last layer's output
 * (B,T,H), and the head's small inputs/outputs (2·B·H + 2·B·C).
 * Checked against PyTorch (tools/activation_bytes.py: distinct storages autograd saves in
 * one eager BertLayer of all-MiniLM-L6-v2, B=16, T=128): dropout off, PyTorch keeps
 * 62,947,328 bytes, this formula says 62,930,944 (PyTorch also keeps the LayerNorm means,
 * +16 KiB); dropout 0.1, PyTorch keeps 94,404,608 against 67,649,536 here, because its CPU
 * dropout saves float32 noise (not uint8 masks) and a second copy of the dropped
 * probabilities — an engine that keeps those must say so rather than miss this bound.
 *
 * Llama / Qwen2 / Mistral layer (pre-RMSNorm), saved for backward:
 *   x (B,T,H) + rstd (B,T); n1 (B,T,H); q,k after RoPE (B,T,A·hd),(B,T,KV·hd); v (B,T,KV·hd);
 *   P (B,A,T,T); ctx (B,T,A·hd); h (B,T,H) + rstd (B,T); n2 (B,T,H); gate, up, silu(gate)·up 3(B,T,I)
 *   => floats 4·BTH + BT·(2·A·hd + 2·KV·hd) + A·B·T² + 3·BTI + 2·BT (+ 2·B·T·r with LoRA on q_proj, v_proj).
 * Outside: final RMSNorm input + rstd and output (2·BTH + BT); causal LM logits and their
 * softmax (2·B·T·V); sequence classification scores (B,T,C).
 *
 * Other categories:
 *   parameters       full: all × 4; LoRA: (all + adapters) × 4; QLoRA: the same minus the
 *                    quantized layer linears (their weights move to quantized_weights)
 *   gradients        trainable × 4 (full: all; LoRA/QLoRA: adapters + classification head,
 *                    which PEFT trains in full as modules_to_save)
 *   optimizer_state  AdamW m and v: 2 × gradients
 *   quantized_weights QLoRA only: every Linear weight inside the layer stack as NF4 with
 *                    blocksize 64 and double quantization: n/2 code bytes + one u8 absmax per
 *                    64 values + one f32 per 256 absmax + the 16- and 256-entry f32 code maps
 *   temporary        one layer's backward working set: two activation-gradient buffers of
 *                    (B,T,max(H,I,A·hd)) and dP (B,A,T,T); QLoRA adds the largest
 *                    dequantized weight */
#include "io_internal.h"

#include <string.h>

static uint64_t nf4_bytes(uint64_t n)
{
    uint64_t blocks = (n + 63) / 64;
    return (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256) + 16 * 4 + 256 * 4 + 4;
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

lp_status lp_mem_estimate_compute(const lp_model_config *c, const lp_param_map *m, const lp_mem_estimate_opts *o,
                                  lp_mem_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (o->batch_size < 1 || o->seq_len < 1 || o->batch_size > (1 << 20) || o->seq_len > (1 << 24))
        return lp_err(LP_STATUS_INVALID_ARG, "memory estimate: batch size and sequence length must be positive");
    if (o->method != LP_TRAIN_METHOD_FULL && (o->lora_rank < 1 || o->lora_rank > 65536))
        return lp_err(LP_STATUS_INVALID_ARG, "memory estimate: LoRA rank must be in [1, 65536]");
    const uint64_t B = (uint64_t)o->batch_size, T = (uint64_t)o->seq_len, H = (uint64_t)c->hidden_size;
    const uint64_t A = (uint64_t)c->num_heads, I = (uint64_t)c->intermediate_size, hd = (uint64_t)c->head_dim;
    const uint64_t KV = (uint64_t)c->num_kv_heads, L = (uint64_t)c->num_layers, C = (uint64_t)c->num_labels;
    const uint64_t V = (uint64_t)c->vocab_size;
    /* the largest terms, in floating point: refuse sizes whose byte counts overflow */
    double big = (double)o->batch_size * (double)o->seq_len *
                 ((double)c->num_heads * (double)o->seq_len + 8.0 * (double)c->hidden_size +
                  3.0 * (double)c->intermediate_size + 2.0 * (double)c->vocab_size) *
                 (double)(c->num_layers + 1) * 8.0;
    if (big > 1e18)
        return lp_err(LP_STATUS_RANGE, "memory estimate: batch %lld x seq len %lld is too large to count",
                      (long long)o->batch_size, (long long)o->seq_len);
    const bool lora = o->method != LP_TRAIN_METHOD_FULL;
    const uint64_t r = lora ? (uint64_t)o->lora_rank : 0;

    uint64_t head = 0, quant_numel = 0, quant_numel_max = 0;
    for (size_t i = 0; i < m->n; i++) {
        const lp_param_binding *p = &m->params[i];
        out->total_params += p->numel;
        /* PEFT's modules_to_save for sequence classification: classifier/score (and
         * DistilBERT's pre_classifier, whose name ends in "classifier") */
        if (p->role >= LP_PARAM_ROLE_PRE_CLS_W && p->role <= LP_PARAM_ROLE_CLS_B)
            head += p->numel;
        if (p->layer >= 0 && p->is_linear_weight) {
            if (p->role == LP_PARAM_ROLE_Q_W || p->role == LP_PARAM_ROLE_V_W)
                out->lora_params += r * (uint64_t)(p->shape[0] + p->shape[1]);
            if (o->method == LP_TRAIN_METHOD_QLORA) {
                out->quantized_weights += nf4_bytes(p->numel);
                quant_numel += p->numel;
                if (p->numel > quant_numel_max)
                    quant_numel_max = p->numel;
            }
        }
    }
    out->parameters = 4 * (out->total_params - quant_numel + out->lora_params);
    out->trainable_params = lora ? out->lora_params + head : out->total_params;
    out->gradients = 4 * out->trainable_params;
    out->optimizer_state = 2 * out->gradients;

    uint64_t floats, mask_bytes = 0, outside, outside_masks = 0, tmp_width;
    if (c->family == LP_MODEL_FAMILY_BERT) {
        floats = 8 * B * T * H + 2 * B * T * I + A * B * T * T + 2 * B * T + 2 * B * T * r;
        if (c->attention_dropout > 0)
            mask_bytes += A * B * T * T;
        if (c->hidden_dropout > 0) {
            mask_bytes += 2 * B * T * H;
            outside_masks = B * T * H;
        }
        outside = 4 * (B * T * H + B * T + B * T * H + 2 * B * H + 2 * B * C) + outside_masks;
        tmp_width = max3(H, I, A * hd);
    } else {
        floats = 4 * B * T * H + B * T * (2 * A * hd + 2 * KV * hd) + A * B * T * T + 3 * B * T * I + 2 * B * T +
                 2 * B * T * r;
        if (c->attention_dropout > 0)
            mask_bytes += A * B * T * T;
        outside = 4 * (2 * B * T * H + B * T);
        if (m->task == LP_MODEL_TASK_CAUSAL_LM)
            outside += 4 * 2 * B * T * V;
        else if (m->task == LP_MODEL_TASK_SEQ_CLS)
            outside += 4 * B * T * C;
        tmp_width = max3(H, I, A * hd);
    }
    out->activations_per_layer = 4 * floats + mask_bytes;
    out->activations = L * out->activations_per_layer + outside;
    out->temporary = 4 * (2 * B * T * tmp_width + A * B * T * T);
    if (o->method == LP_TRAIN_METHOD_QLORA)
        out->temporary += 4 * quant_numel_max;
    out->total = out->parameters + out->gradients + out->optimizer_state + out->activations +
                 out->quantized_weights + out->temporary;
    return LP_OK;
}
