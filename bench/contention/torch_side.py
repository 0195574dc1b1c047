#!/usr/bin/env python3
"""PyTorch beside loupe in bench/contention/run.sh: the same BERT shape (random weights;
transformers' BertForSequenceClassification when importable, else torch.nn's post-norm
TransformerEncoder with GELU, the same layer shapes, and a linear head on the first token),
PyTorch's default thread count (all usable CPUs) unless LP_THREADS says otherwise,
batch-1 inference p50 ms on 32 random ids (--kind infer) or the median ms of a training step
at batch 8 (--kind train, AdamW). Prints one number."""
import argparse
import os
import statistics
import time

import json

import torch

try:
    from transformers import BertConfig, BertForSequenceClassification
except ImportError:
    BertConfig = None


class TorchBert(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.tok = torch.nn.Embedding(c["vocab_size"], h)
        self.pos = torch.nn.Embedding(c["max_position_embeddings"], h)
        self.ln = torch.nn.LayerNorm(h, eps=c["layer_norm_eps"])
        layer = torch.nn.TransformerEncoderLayer(h, c["num_attention_heads"], c["intermediate_size"], dropout=0.1,
                                                 activation="gelu", batch_first=True, layer_norm_eps=c["layer_norm_eps"])
        self.enc = torch.nn.TransformerEncoder(layer, c["num_hidden_layers"], enable_nested_tensor=False)
        self.head = torch.nn.Linear(h, len(c["id2label"]))

    def forward(self, input_ids, labels=None):
        x = self.ln(self.tok(input_ids) + self.pos(torch.arange(input_ids.shape[1])))
        logits = self.head(self.enc(x)[:, 0])
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return type("Out", (), {"logits": logits, "loss": loss})

ap = argparse.ArgumentParser()
ap.add_argument("--kind", choices=["infer", "train"], required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--infer-model", required=True)
ap.add_argument("--steps", type=int, default=12)
a = ap.parse_args()
if os.environ.get("LP_THREADS"):
    torch.set_num_threads(int(os.environ["LP_THREADS"]))
torch.manual_seed(0)
mdir = a.infer_model if a.kind == "infer" else a.model
c = json.load(open(os.path.join(mdir, "config.json")))
m = BertForSequenceClassification(BertConfig.from_pretrained(mdir)) if BertConfig else TorchBert(c)
ids = torch.randint(1, c["vocab_size"], (1 if a.kind == "infer" else 8, 32))
times = []
if a.kind == "infer":
    m.eval()
    with torch.no_grad():
        for i in range(35):
            t = time.perf_counter()
            m(input_ids=ids)
            if i >= 5:
                times.append((time.perf_counter() - t) * 1e3)
else:
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=5e-4)
    labels = torch.randint(0, 2, (ids.shape[0],))
    for i in range(a.steps):
        t = time.perf_counter()
        opt.zero_grad()
        m(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        times.append((time.perf_counter() - t) * 1e3)
print("%.3f" % statistics.median(times))
