#!/usr/bin/env python3
"""--dtype bf16 training beside f32 and beside PyTorch's CPU autocast (issue 17): a
DistilBERT-shaped classifier (6 layers, hidden 768, FFN 3072, vocab 30522), full fine-tuning
and LoRA (r 8 on q,v), and QLoRA (--methods qlora: NF4 base, bitsandbytes' compute dtype bf16 on
the PyTorch side), one thread by default, seq 128. Each configuration is its own process:
loupe bench_step --dtype f32|bf16 and torch_ref.py --dtype f32|bf16 (autocast around forward
and loss; PyTorch under both thread settings, the faster kept). Then a loss-curve comparison:
`loupe train` on the bundled model and data for --curve-steps steps in f32 and in bf16
(same seed, data order and dropout), the max abs / rel difference of the per-step losses.

Issue 17's targets: bf16 >= 1.5x loupe's own f32, >= 1.3x PyTorch's bf16 autocast.
Run it wrapped in flock so that benchmarks do not overlap:
  flock /work/bench.lock python3 bench/train_step/bf16.py --out bf16.json
usage: bf16.py [--build build] [--threads 1] [--batch 8] [--seq 128] [--runs 3] [--warmup 1]
               [--methods full,lora] [--curve-steps 200] [--no-torch] [--out FILE]"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SELF_RATIO, TORCH_RATIO = 1.5, 1.3


def isa_line(build):
    exe = os.path.join(build, "loupe")
    p = subprocess.run([exe, "peak"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [ln for ln in p.stdout.splitlines() if "ISA" in ln or "isa" in ln or "CPU" in ln]
    return " | ".join(lines[:3]) or p.stdout.strip().splitlines()[0]


def cpu_model():
    for ln in open("/proc/cpuinfo"):
        if ln.startswith("model name"):
            return ln.split(":", 1)[1].strip()
    return "?"


def curve(build, steps, threads, rows):
    """Per-step losses of `loupe train` on the bundled model in f32 and bf16 (same seed, data
    order, dropout): over the whole of data/sst2-mini (rows 0), or over its first `rows` rows
    of every 60th line, epochs enough for `steps` (the model memorizes them: it learns, where
    200 steps of the whole set leave it near chance)."""
    exe = os.path.join(build, "loupe")
    out = {}
    with tempfile.TemporaryDirectory(prefix="lp_bf16_curve.") as d:
        data = []
        if rows:
            src = open(os.path.join(common.ROOT, "data", "sst2-mini", "train.tsv")).read().splitlines()
            with open(os.path.join(d, "small.tsv"), "w") as f:
                f.write("\n".join([src[0]] + src[1::60][:rows]) + "\n")
            data = ["--train", os.path.join(d, "small.tsv"), "--epochs", str(-(-steps * 16 // rows)), "--lr", "1e-3"]
        for dt in ("f32", "bf16"):
            cmd = [exe, "train", "--threads", str(threads), "--max-steps", str(steps), "--output-dir", d,
                   "--run-id", dt, "--dtype", dt, "--quiet", "--eval", "none", "--peak-gflops", "1",
                   "--max-seq-len", "64", *data]
            print("  " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=common.ROOT)
            out[dt] = [float(r["loss"]) for r in csv.DictReader(open(os.path.join(d, dt, "steps.csv")))]
            out[dt + "_summary"] = json.load(open(os.path.join(d, dt, "summary.json")))
    a, b = out["f32"], out["bf16"]
    n = min(len(a), len(b))
    diffs = [abs(b[i] - a[i]) for i in range(n)]
    rels = [diffs[i] / abs(a[i]) for i in range(n)]
    w = max(range(n), key=lambda i: rels[i])
    # 10-step moving averages: the curves' shape without the step-to-step noise
    ma = lambda x: [sum(x[i:i + 10]) / 10 for i in range(n - 9)]  # noqa: E731
    mad = [abs(p - q) for p, q in zip(ma(a), ma(b))]
    return {"rows": rows or "all", "steps": n, "max_abs_ma10": max(mad),
            "max_rel_first30": max(rels[:30]), "max_abs_after30": max(diffs[30:]) if n > 30 else None, "max_abs": max(diffs), "max_rel": rels[w], "max_rel_step": w + 1,
            "mean_rel": sum(rels) / n, "first": [a[0], b[0]], "last10_mean": [sum(a[-10:]) / 10, sum(b[-10:]) / 10],
            "f32": a, "bf16": b, "bf16_path": out["bf16_summary"].get("bf16_path"),
            "step_ms_median": [out["f32_summary"]["step_ms"]["median"], out["bf16_summary"]["step_ms"]["median"]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.ROOT, "build"))
    ap.add_argument("--out")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--methods", default="full,lora")
    ap.add_argument("--curve-steps", type=int, default=200)
    ap.add_argument("--curve-rows", default="0,64", help="curves to run: 0 = all of sst2-mini, N = N rows memorized")
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--blas-coretype", default=os.environ.get("LP_BLAS_CORETYPE", ""))
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    exe = common.bench_exe(a.build)
    if a.peak_gflops <= 0:
        a.peak_gflops = common.measure_peak(exe, a.threads, a.blas_coretype)
    t0 = time.time()
    res = {"cpu": cpu_model(), "loupe_peak": isa_line(a.build), "threads": a.threads, "batch": a.batch,
           "seq": a.seq, "peak_gflops": a.peak_gflops, "load_at_start": os.getloadavg(), "results": []}
    rows = []
    for method in a.methods.split(","):
        kw = dict(shape="distilbert", mode="train", method=method, batch=a.batch, seq=a.seq, warmup=a.warmup,
                  runs=a.runs)
        lp = {dt: common.loupe_run(exe, a, a.blas_coretype, dtype=dt, **kw) for dt in ("f32", "bf16")}
        th = {dt: None if a.no_torch else common.torch_best(a, dtype=dt, **kw) for dt in ("f32", "bf16")}
        sps = lambda r: r["samples_per_s"] if r else None  # noqa: E731
        self_r = sps(lp["bf16"]) / sps(lp["f32"]) if lp["bf16"] and lp["f32"] else None
        torch_r = sps(lp["bf16"]) / sps(th["bf16"]) if lp["bf16"] and th["bf16"] else None
        f32_r = sps(lp["f32"]) / sps(th["f32"]) if lp["f32"] and th["f32"] else None
        torch_self = sps(th["bf16"]) / sps(th["f32"]) if th["bf16"] and th["f32"] else None
        res["results"].append({"method": method, "loupe": lp, "torch": th, "bf16_vs_loupe_f32": self_r,
                               "bf16_vs_torch_bf16": torch_r, "f32_vs_torch_f32": f32_r,
                               "torch_bf16_vs_torch_f32": torch_self})
        rows.append([f"distilbert {method} B{a.batch}", common.fmt(sps(lp["f32"]), ".3f"),
                     common.fmt(sps(lp["bf16"]), ".3f"), common.fmt(self_r, ".2f"), common.verdict(self_r, SELF_RATIO),
                     common.fmt(sps(th["f32"]), ".3f"), common.fmt(sps(th["bf16"]), ".3f"),
                     common.fmt(torch_r, ".2f"), common.verdict(torch_r, TORCH_RATIO), common.fmt(f32_r, ".2f")])
    print(f"\n{res['cpu']}; {res['loupe_peak']}; {a.threads} thread(s), seq {a.seq}, load at start "
          f"{res['load_at_start'][0]:.1f}; samples/s (medians), PyTorch the faster thread setting")
    common.print_table(["config", "lp f32", "lp bf16", "bf16/f32", "target", "pt f32", "pt bf16", "bf16 lp/pt",
                        "target", "f32 lp/pt"], rows)
    res["curves"] = []
    for rows in ([int(x) for x in a.curve_rows.split(",")] if a.curve_steps > 0 else []):
        c = curve(a.build, a.curve_steps, a.threads, rows)
        res["curves"].append(c)
        print(f"\nloss curve, bundled model, {c['rows']} rows, {c['steps']} steps, bf16 ({c['bf16_path']}) vs f32: "
              f"max |d| {c['max_abs']:.3e}, max rel {c['max_rel']:.3e} (step {c['max_rel_step']}), mean rel "
              f"{c['mean_rel']:.2e}; first 30 steps max rel {c['max_rel_first30']:.2e}; 10-step moving averages "
              f"max |d| {c['max_abs_ma10']:.3e}; last-10 mean {c['last10_mean'][0]:.4f} (f32) vs "
              f"{c['last10_mean'][1]:.4f} (bf16)")
    print(f"({time.time() - t0:.0f} s)")
    if a.out:
        common.write_json(a.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
