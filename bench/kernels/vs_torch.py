#!/usr/bin/env python3
"""Attention and GELU kernels beside PyTorch in one run (issue 17).

Runs build/bench/kernels/bench_kernels --json (loupe, best of its 10 reps) and times PyTorch
at the same shapes and thread count in this process, best of the same number of reps:

- attention at DistilBERT's shape (B16 T128, 12 heads of 64) and MiniLM's (12 heads of 32), q, k,
  v as strided views of one packed (B, T, 3C) tensor, the padding mask bench_kernels uses
  (sample b has its last 3b tokens padded): `F.scaled_dot_product_attention` forward, and its
  backward (grad of q, k, v for a given dout) against loupe's fused kernels;
- GELU (erf) on 2048 x 3072: `F.gelu` forward, and its backward through autograd;
- softmax over rows of 128 (the eager attention's 192 x 128 x 128 probabilities): `torch.softmax`;
- cross-entropy of 128 tokens over a 49152-entry vocabulary (SmolLM2's LM head): `F.cross_entropy`
  forward, and its backward through autograd.

Prints loupe ms, PyTorch ms and PyTorch / loupe (> 1: loupe faster). A figure, not a test.
Usage: vs_torch.py [--build build] [--threads 2] [--reps 10]
"""
import argparse
import json
import os
import platform
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def best(fn, reps):
    fn()  # warm-up
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t * 1e3


def torch_rows(threads, reps):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    rows = {}
    B, T, H = 16, 128, 12
    keep = torch.tensor([[t < T - 3 * b for t in range(T)] for b in range(B)])
    mask = keep[:, None, None, :]  # (B, 1, 1, T): True = attend
    for D, tag in ((64, ""), (32, " d32")):
        C = H * D
        qkv = (torch.rand(B, T, 3 * C) * 2 - 1).requires_grad_(True)

        def heads(i):
            return qkv[:, :, i * C:(i + 1) * C].view(B, T, H, D).transpose(1, 2)

        dout = torch.rand(B, H, T, D) * 2 - 1
        with torch.no_grad():
            rows[f"attention fused fwd{tag}"] = best(
                lambda: F.scaled_dot_product_attention(heads(0), heads(1), heads(2), attn_mask=mask), reps)
        out = F.scaled_dot_product_attention(heads(0), heads(1), heads(2), attn_mask=mask)

        def bwd():
            qkv.grad = None
            out.backward(dout, retain_graph=True)

        rows[f"attention fused bwd{tag}"] = best(bwd, reps)
    x = (torch.rand(2048, 3072) * 8 - 4).requires_grad_(True)
    with torch.no_grad():
        rows["gelu fwd 2048x3072"] = best(lambda: F.gelu(x), reps)
    y = F.gelu(x)
    dy = torch.rand(2048, 3072)

    def gbwd():
        x.grad = None
        y.backward(dy, retain_graph=True)

    rows["gelu bwd 2048x3072"] = best(gbwd, reps)
    att = torch.rand(B * H * T, T) * 8 - 4
    with torch.no_grad():
        rows["softmax fwd 192x128x128"] = best(lambda: torch.softmax(att, -1), reps)
    logits = (torch.rand(128, 49152) * 2 - 1).requires_grad_(True)
    tg = torch.arange(128) * 7919 % 49152
    with torch.no_grad():
        rows["cross-entropy fwd 128x49152"] = best(lambda: F.cross_entropy(logits, tg), reps)
    loss = F.cross_entropy(logits, tg)

    def cbwd():
        logits.grad = None
        loss.backward(retain_graph=True)

    rows["cross-entropy bwd 128x49152"] = best(cbwd, reps)
    return rows, torch.__version__


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    env = dict(os.environ, LP_THREADS=str(a.threads))
    lp = json.loads(subprocess.run([os.path.join(a.build, "bench", "kernels", "bench_kernels"), "--json"],
                                   env=env, check=True, stdout=subprocess.PIPE, text=True).stdout)
    lrows = {r["name"]: r["ms"] for r in lp["rows"]}
    trows, tv = torch_rows(a.threads, a.reps)
    cpu = "?"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    isa = subprocess.run([os.path.join(a.build, "loupe"), "peak", "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env).stdout
    try:
        isa = json.loads(isa).get("isa", "?")
    except ValueError:
        isa = "?"
    print(f"{cpu} ({platform.machine()}), loupe kernels {isa}, {a.threads} threads, PyTorch {tv}; best of "
          f"{a.reps} each; ms (PyTorch / loupe > 1: loupe faster)")
    print(f"| op | loupe fused | loupe eager | PyTorch | PyTorch / loupe fused |")
    print("|---|---|---|---|---|")
    for name, t in trows.items():
        l = lrows.get(name)
        e = lrows.get(name.replace("fused", "eager"), None) if "fused" in name else None
        es = f"{e:.2f}" if e is not None else "-"
        print(f"| {name} | {l:.2f} | {es} | {t:.2f} | {t / l:.2f}x |")


if __name__ == "__main__":
    main()
