#!/usr/bin/env python3
"""PyTorch side of bench/bench_sweep: the batch-size sweep `loupe bench --synthetic` does,
on the same model directory: model.eval(), torch.no_grad(), per batch size `warmup` untimed
and `runs` timed forwards over random ids of seq_len tokens (all real, no padding), the
wall time of each forward. Prints one JSON object: per batch size the samples/s of each
run, their mean and std (n-1), and the sweep's peak RSS (VmHWM reset after the model loaded,
as loupe bench resets it before each batch size). The caller reads the process's peak RSS,
load included, from wait4.

usage: python3 torch_sweep.py --model DIR --batch-sizes 1,4,8 --seq-len 32 --warmup 1 --runs 3 --threads 2
           [--dtype f32|bf16]
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForSequenceClassification


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch-sizes", default="1,4,8,16")
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="bf16: the weights loaded as bfloat16 (torch's bf16 CPU kernels), as users run it")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = AutoModelForSequenceClassification.from_pretrained(
        a.model, torch_dtype=torch.bfloat16 if a.dtype == "bf16" else torch.float32)
    model.eval()
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM := VmRSS: the sweep's own peak from here
        f.write("5")
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(a.seed)
    out = {"dtype": a.dtype, "threads": a.threads, "seq_len": a.seq_len, "torch": torch.__version__, "points": []}
    with torch.no_grad():
        for bs in [int(x) for x in a.batch_sizes.split(",")]:
            times = []
            for i in range(a.warmup + a.runs):
                ids = torch.randint(1, vocab, (bs, a.seq_len), generator=g)
                mask = torch.ones_like(ids)
                t0 = time.perf_counter()
                model(input_ids=ids, attention_mask=mask)
                dt = time.perf_counter() - t0
                if i >= a.warmup:
                    times.append(dt)
            sps = [bs / t for t in times]
            out["points"].append({"batch_size": bs, "samples_per_s": sps, "mean": statistics.mean(sps),
                                  "std": statistics.stdev(sps) if len(sps) > 1 else 0.0})
    with open("/proc/self/status") as f:
        hwm = [line for line in f if line.startswith("VmHWM:")][0]
    out["sweep_peak_rss_mb"] = int(hwm.split()[1]) / 1024.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
