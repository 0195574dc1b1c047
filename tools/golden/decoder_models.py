# Tiny random decoder models (Llama, Mistral, Qwen2, SmolLM-shaped Llama) and the two padded
# batches (right and left padding) shared by the decoder goldens. Same seed -> same weights
# and batches in every golden, so results can be cross-checked between them (llama_cls is
# the base of lora_llama_cls, qwen2_lm of lora_qwen2_lm, llama_lm of qlora_llama_lm).
import torch

import golden_common as gc
import tiny_models as tm

VOCAB = 128
HIDDEN = 64
LAYERS = 2
FFN = 160          # not a multiple of 64: catches tiling bugs in the C kernels
HEAD_DIM = 16
MAX_POS = 128
EPS = 1e-6
PAD = 0            # pad_token_id; real tokens are drawn from [1, VOCAB)
NUM_LABELS = 3

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 32}

# family: transformers model family; head: "cls" (ForSequenceClassification) or "lm"
# (ForCausalLM). rope_theta differs between archs so an engine that hard-codes 10000 fails.
ARCHS = {
    "llama_cls": {"family": "llama", "head": "cls", "heads": 4, "kv_heads": 2,
                  "rope_theta": 10000.0, "tie": False},
    "llama_lm": {"family": "llama", "head": "lm", "heads": 4, "kv_heads": 2,
                 "rope_theta": 10000.0, "rope_scaling": LLAMA3_ROPE, "tie": False},
    "mistral_lm": {"family": "mistral", "head": "lm", "heads": 4, "kv_heads": 2,
                   "rope_theta": 1000000.0, "sliding_window": 5, "tie": False},
    "qwen2_cls": {"family": "qwen2", "head": "cls", "heads": 4, "kv_heads": 1,
                  "rope_theta": 1000000.0, "tie": False},
    "qwen2_lm": {"family": "qwen2", "head": "lm", "heads": 4, "kv_heads": 1,
                 "rope_theta": 1000000.0, "tie": False},
    "smollm_lm": {"family": "llama", "head": "lm", "heads": 4, "kv_heads": 4,
                  "rope_theta": 100000.0, "tie": True},
}

# Real lengths of the three rows of each batch: all different, the longest 14 so that
# Mistral's sliding window (5) binds, the shortest short enough that its row is mostly pad.
LENGTHS = {"right": [14, 6, 11], "left": [9, 14, 4]}
CLS_LABELS = [2, 0, 1]


def _classes(family, head):
    import transformers as T
    cfg = {"llama": T.LlamaConfig, "mistral": T.MistralConfig, "qwen2": T.Qwen2Config}[family]
    model = {("llama", "cls"): T.LlamaForSequenceClassification,
             ("llama", "lm"): T.LlamaForCausalLM,
             ("mistral", "lm"): T.MistralForCausalLM,
             ("qwen2", "cls"): T.Qwen2ForSequenceClassification,
             ("qwen2", "lm"): T.Qwen2ForCausalLM}[(family, head)]
    return cfg, model


def config(arch):
    a = ARCHS[arch]
    cfg_cls, model_cls = _classes(a["family"], a["head"])
    kw = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
              num_hidden_layers=LAYERS, num_attention_heads=a["heads"],
              num_key_value_heads=a["kv_heads"], head_dim=HEAD_DIM,
              max_position_embeddings=MAX_POS, rms_norm_eps=EPS, hidden_act="silu",
              attention_dropout=0.0, pad_token_id=PAD, bos_token_id=1, eos_token_id=2,
              tie_word_embeddings=a["tie"], rope_theta=a["rope_theta"],
              architectures=[model_cls.__name__])
    if "rope_scaling" in a:
        kw["rope_scaling"] = dict(a["rope_scaling"])
    if a["family"] == "mistral":
        kw["sliding_window"] = a["sliding_window"]
    if a["family"] == "qwen2":
        kw["use_sliding_window"] = False
    if a["head"] == "cls":
        kw["num_labels"] = NUM_LABELS
    return cfg_cls(**kw), model_cls


def build(arch, seed=gc.SEED):
    """Deterministic tiny model with every parameter random (f32, eager attention).

    HF init leaves RMSNorm weights at 1 and q/k/v biases at 0; we redraw them too, so a C
    engine that forgot a norm weight or a bias would not pass by luck.
    """
    cfg, model_cls = config(arch)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = model_cls(cfg)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    model.eval()
    assert model.config._attn_implementation == "eager"
    return model


INIT_NOTE = ("weights: matrices and embeddings ~ N(0, 0.2^2); biases (Qwen2 q/k/v) ~ N(0, 0.1^2); "
             "RMSNorm weights ~ 1 + N(0, 0.1^2) (torch.Generator seed SEED+1, drawn in "
             "named_parameters order); the pad row (id 0) of embed_tokens is random too "
             "(padding_idx only zeroes its gradient)")


def save_model(model, out_dir):
    tm.save_model(model, out_dir)


def make_batch(padding, head, seed=gc.SEED):
    """Three rows of random token ids in [1, VOCAB) padded with PAD to the longest row.

    right: forward without position_ids (transformers then uses arange(T)); left: for
    causal LM the forward gets position_ids = (cumsum(mask) - 1).clamp(min=0), so real
    tokens are numbered from 0 as in the right-padded rows; classification never passes
    position_ids (as its training path), so there left pads shift real positions.
    """
    lens = LENGTHS[padding]
    T = max(lens)
    g = torch.Generator().manual_seed(seed + {"right": 10, "left": 11}[padding])
    ids = torch.full((len(lens), T), PAD, dtype=torch.long)
    mask = torch.zeros((len(lens), T), dtype=torch.long)
    for r, n in enumerate(lens):
        toks = torch.randint(1, VOCAB, (n,), generator=g)
        if padding == "right":
            ids[r, :n], mask[r, :n] = toks, 1
        else:
            ids[r, T - n:], mask[r, T - n:] = toks, 1
    b = {"input_ids": ids, "attention_mask": mask}
    if head == "cls":
        b["labels"] = torch.tensor(CLS_LABELS, dtype=torch.long)
        b["position_ids"] = torch.arange(T).expand(len(lens), T).clone()
        b["pass_position_ids"] = False
    else:
        b["labels"] = ids.masked_fill(mask == 0, -100)
        if padding == "left":
            b["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0)
            b["pass_position_ids"] = True
        else:
            b["position_ids"] = torch.arange(T).expand(len(lens), T).clone()
            b["pass_position_ids"] = False
    return b


def forward_kwargs(batch):
    kw = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if batch["pass_position_ids"]:
        kw["position_ids"] = batch["position_ids"]
    return kw


def batch_tensors(batch):
    return {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}


def last_non_pad(input_ids):
    """transformers' GenericForSequenceClassification rule (see CLS_POOL_RULE)."""
    non_pad = (input_ids != PAD).to(torch.int32)
    idx = torch.arange(input_ids.shape[-1], dtype=torch.int32)
    return (idx * non_pad).argmax(-1)


CLS_POOL_RULE = (
    "transformers GenericForSequenceClassification.forward (modeling_layers.py): "
    "non_pad_mask = (input_ids != config.pad_token_id).int(); token_indices = arange(T); "
    "last_non_pad_token = (token_indices * non_pad_mask).argmax(-1); pooled_logits = "
    "logits[arange(B), last_non_pad_token] ('the rightmost token that is not equal to "
    "pad_token_id', to handle both left and right padding). It looks at input_ids, NOT at "
    "attention_mask: right padding -> index length-1, left padding -> index T-1. The score "
    "head (no bias) is applied to every position and then gathered.")

MASK_RULE = {
    "causal": "key j visible to query i iff j <= i and attention_mask[b, j] == 1 (i, j are "
              "indices in the padded row, not position_ids)",
    "sliding": "Mistral (sliding_window W, every layer): key j visible to query i iff "
               "i - W < j <= i and attention_mask[b, j] == 1, i.e. the query and the W-1 keys "
               "before it (masking_utils.sliding_window_overlay: kv_idx > q_idx - "
               "sliding_window, and-ed with causal_mask_function: kv_idx <= q_idx); indices "
               "in the padded row",
    "eager": "eager attention adds a float mask: 0 where visible, torch.finfo(dtype).min where "
             "not; softmax over the keys in float32 (the f64 run: float64)",
    "fully_masked_rows": "a query that sees no key (a left-pad position: every key j <= i is "
                         "pad) gets finfo.min on every key; score + finfo.min rounds to "
                         "finfo.min exactly, so softmax is uniform 1/T over ALL T keys of the "
                         "row (pads and later real tokens included): its attention output is "
                         "the mean of the value vectors of the whole row",
    "checked": "the generator checks these rules on output_attentions of both batches: "
               "weights non-zero exactly on the visible keys, 1/T everywhere on a query that "
               "sees none",
}
