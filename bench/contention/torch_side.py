#!/usr/bin/env python3
"""PyTorch beside loupe in bench/contention/run.sh: the same BERT config (random weights,
transformers' BertForSequenceClassification), 2 threads unless LP_THREADS says otherwise,
batch-1 inference p50 ms on 32 random ids (--kind infer) or the median ms of a training step
at batch 8 (--kind train, AdamW). Prints one number."""
import argparse
import os
import statistics
import time

import torch
from transformers import BertConfig, BertForSequenceClassification

ap = argparse.ArgumentParser()
ap.add_argument("--kind", choices=["infer", "train"], required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--infer-model", required=True)
ap.add_argument("--steps", type=int, default=12)
a = ap.parse_args()
torch.set_num_threads(int(os.environ.get("LP_THREADS", os.cpu_count() or 1)))
torch.manual_seed(0)
cfg = BertConfig.from_pretrained(a.infer_model if a.kind == "infer" else a.model)
m = BertForSequenceClassification(cfg)
ids = torch.randint(1, cfg.vocab_size, (1 if a.kind == "infer" else 8, 32))
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
