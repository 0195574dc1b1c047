#!/usr/bin/env python3
"""PyTorch side of bench/int8: f32 or dynamic int8 (torch.ao.quantization.quantize_dynamic,
every nn.Linear as a DynamicQuantizedLinear: qint8 weights per tensor, activations quantized
to quint8 per call from their observed range, fbgemm/x86 int8 GEMM), model.eval(),
torch.no_grad(). One JSON object on stdout.

  torch_int8.py sweep    --model DIR --mode f32|int8 --batch-sizes 1,8,32 --seq-len 128 --warmup 1 --runs 3 --threads 1
  torch_int8.py logits   --model DIR --mode f32|int8 --ids IDS.i32 --batch 8 --seq-len 128 --out OUT.f32 --threads 1
  torch_int8.py accuracy --model DIR --mode f32|int8 --data CSV --threads 1      (text,labels,label_id columns)
  torch_int8.py prefill  --model DIR --mode f32|int8 --seq-len 128 --warmup 1 --runs 3 --threads 1   (a causal LM)
"""
import argparse
import csv
import json
import statistics
import time
import warnings

import torch

warnings.filterwarnings("ignore")  # quantize_dynamic's deprecation notices


def load(path, mode, causal=False):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification
    import os
    if causal:
        if os.path.exists(os.path.join(path, "model.safetensors")):
            m = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
        else:  # a config-only directory: random weights, as bench/generate does
            torch.manual_seed(1234)
            m = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), torch_dtype=torch.float32)
    else:
        m = AutoModelForSequenceClassification.from_pretrained(path, torch_dtype=torch.float32)
    m.eval()
    if mode == "int8":
        from torch.ao.quantization import quantize_dynamic
        m = quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
    return m


def timed(fn, warmup, runs):
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["sweep", "logits", "accuracy", "prefill"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["f32", "int8"], default="f32")
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ids")
    ap.add_argument("--out")
    ap.add_argument("--data")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = {"mode": a.mode, "threads": a.threads, "torch": torch.__version__,
           "engine": torch.backends.quantized.engine}
    with torch.no_grad():
        if a.what == "sweep":
            m = load(a.model, a.mode)
            g = torch.Generator().manual_seed(a.seed)
            V = m.config.vocab_size
            out["points"] = []
            for bs in [int(x) for x in a.batch_sizes.split(",")]:
                ids = torch.randint(1, V, (bs, a.seq_len), generator=g)
                mask = torch.ones_like(ids)
                sps = [bs / t for t in timed(lambda: m(input_ids=ids, attention_mask=mask), a.warmup, a.runs)]
                out["points"].append({"batch_size": bs, "samples_per_s": sps, "mean": statistics.mean(sps),
                                      "std": statistics.stdev(sps) if len(sps) > 1 else 0.0})
        elif a.what == "logits":
            import numpy as np
            m = load(a.model, a.mode)
            ids = torch.from_numpy(np.fromfile(a.ids, dtype=np.int32).astype(np.int64)).reshape(a.batch, a.seq_len)
            lg = m(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            lg.float().numpy().astype(np.float32).tofile(a.out)
        elif a.what == "accuracy":
            from transformers import AutoTokenizer
            m = load(a.model, a.mode)
            tok = AutoTokenizer.from_pretrained(a.model)
            rows = list(csv.DictReader(open(a.data, newline="")))
            correct = 0
            for i in range(0, len(rows), 32):
                chunk = rows[i:i + 32]
                # truncated as loupe bench does: 512, capped at the model's positions
                enc = tok([r["text"] for r in chunk], padding=True, truncation=True,
                          max_length=min(512, m.config.max_position_embeddings), return_tensors="pt")
                pred = m(**enc).logits.argmax(-1)
                correct += sum(int(p) == int(r["label_id"]) for p, r in zip(pred, chunk))
            out["accuracy"], out["rows"] = correct / len(rows), len(rows)
        else:  # prefill: one forward over seq_len tokens, the last position's logits
            m = load(a.model, a.mode, causal=True)
            g = torch.Generator().manual_seed(a.seed)
            ids = torch.randint(1, m.config.vocab_size, (1, a.seq_len), generator=g)
            tps = [a.seq_len / t for t in timed(lambda: m(input_ids=ids, logits_to_keep=1), a.warmup, a.runs)]
            out["tokens_per_s"], out["mean"] = tps, statistics.mean(tps)
            out["std"] = statistics.stdev(tps) if len(tps) > 1 else 0.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
