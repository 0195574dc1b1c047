#!/usr/bin/env python3
"""Measures what PyTorch eager autograd keeps for backward in one BERT layer, to set
beside the per-layer activation formula in src/io/estimate.c (loupe inspect's
activations_per_layer).

usage: python3 tools/activation_bytes.py MODEL_DIR [--batch-size 16] [--seq-len 128]

Runs the model's first encoder layer in training mode (attn_implementation="eager", so
the attention is the textbook matmul-softmax-dropout-matmul) under
torch.autograd.graph.saved_tensors_hooks and sums the bytes of the distinct storages saved
(views of one storage count once; the layer's input counts, as in the formula). Prints
JSON: measured bytes and a per-dtype split (dropout masks are torch.bool).
"""
import argparse
import json

import torch
from transformers import AutoConfig, AutoModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-dropout", action="store_true", help="dropout probabilities 0 (no masks)")
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.model_dir)
    if a.no_dropout:
        cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
    model = AutoModel.from_pretrained(a.model_dir, config=cfg, attn_implementation="eager")
    model.train()
    layer = model.encoder.layer[0]
    B, T, H = a.batch_size, a.seq_len, cfg.hidden_size
    torch.manual_seed(0)
    x = torch.randn(B, T, H, requires_grad=True)
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        key = s.data_ptr()
        seen[key] = max(seen.get(key, (0, None))[0], s.nbytes()), str(t.dtype)
        if a.verbose:
            print(tuple(t.shape), t.dtype, s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = layer(x)
        out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    by_dtype = {}
    for nbytes, dt in seen.values():
        by_dtype[dt] = by_dtype.get(dt, 0) + nbytes
    # parameters are saved too (Linear saves its weight): not activations
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    act = sum(n for k, (n, _) in seen.items() if k not in params)
    print(json.dumps({"batch_size": B, "seq_len": T, "measured_bytes": act, "by_dtype_incl_params": by_dtype}))


if __name__ == "__main__":
    main()
