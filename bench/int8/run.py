#!/usr/bin/env python3
"""int8 inference, loupe beside PyTorch's dynamic quantization (issue 17), side by side in one
run, same thread count, each side in its own process:

- speed: a DistilBERT-shaped classifier (6 layers, hidden 768, FFN 3072, 2 labels, random
  weights written once by bench/bench_sweep/run.py), batch sizes 1/8/32 x 128 tokens:
  `loupe bench --synthetic` with --dtype f32 and int8 (int8 weights with a scale per output
  row packed at load, activations quantized per row (token) at run time, int32 sums over the
  whole row: VNNI vpdpbusd or AVX2 maddubs; src/kernels/cpu/i8gemm.c), against PyTorch f32 and
  PyTorch dynamic int8
  (torch.ao.quantization.quantize_dynamic on every nn.Linear: qint8 weights, activations
  quantized per call, fbgemm / x86 int8 GEMM), torch_int8.py;
- accuracy agreement, "logits vs f32 for both": on one batch of random ids (8 x 128) of the
  same model, each int8 path's logits against its own side's f32 logits (normwise max|a-b| /
  max|f32|, and argmax agreement), plus loupe f32 against PyTorch f32; and the accuracy on the
  bundled labelled set (data/bench-intents val, 960 rows, the tiny classifier
  tests/golden/bench_cls trained on it) of each path, the change against its f32;
- `--qwen`: a Qwen2.5-0.5B-shaped decoder prefill (one sequence of --prefill tokens, random
  weights): loupe `bench-gen -p N -n 0` with --quantize int8 and f32 against PyTorch's
  Qwen2ForCausalLM forward (logits_to_keep=1) in f32 and dynamic int8.

The sides alternate --repeat times; each keeps its best sweep per batch size (a busy machine
reads low, never high).

usage: python3 bench/int8/run.py [--threads 1] [--batch-sizes 1,8,32] [--seq-len 128] [--runs 3]
           [--repeat 2] [--qwen] [--parts speed,agreement,qwen] [--prefill 128] [--out results.json]
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LOUPE = os.environ.get("LOUPE", os.path.join(ROOT, "build", "loupe"))
DTYPES = ["f32", "int8"]
PAIRS = (("loupe int8", "loupe f32"), ("torch int8", "torch f32"), ("loupe f32", "torch f32"))


def sweep_module():
    spec = importlib.util.spec_from_file_location("bench_sweep_run", os.path.join(ROOT, "bench", "bench_sweep", "run.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def torch_job(env, *args):
    out, _ = SW.run([sys.executable, os.path.join(HERE, "torch_int8.py"), *args], env)
    return json.loads(out.strip().splitlines()[-1])


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def main():
    global SW
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--qwen", action="store_true")
    ap.add_argument("--parts", default="speed,agreement",
                    help="speed, agreement (logits and accuracy), qwen (the same as --qwen)")
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out")
    a = ap.parse_args()
    os.chdir(ROOT)
    SW = sweep_module()
    a.shape, a.loupe_only = "distilbert", False
    a.model_dir = os.path.join(tempfile.gettempdir(), "loupe-bench-sweep-distilbert")
    SW.make_model(a.model_dir, "distilbert")
    work = tempfile.mkdtemp(prefix="lp_bench_int8_")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    sizes = [int(x) for x in a.batch_sizes.split(",")]
    common = ["--model", a.model_dir, "--seq-len", str(a.seq_len), "--threads", str(a.threads)]

    def better(best, pts):
        return {bs: max(best.get(bs, (0, 0)), v) for bs, v in pts.items()}

    speed = {f"torch {m}": {} for m in ("f32", "int8")}
    speed.update({f"loupe {d}": {} for d in DTYPES})
    machine, engine = None, None
    parts = a.parts.split(",")
    a.qwen = a.qwen or "qwen" in parts
    for _ in range(a.repeat if "speed" in parts else 0):
        for mode in ("f32", "int8"):
            tj = torch_job(env, "sweep", "--mode", mode, "--batch-sizes", a.batch_sizes, "--warmup", str(a.warmup),
                           "--runs", str(a.runs), *common)
            engine = tj["engine"]
            speed[f"torch {mode}"] = better(speed[f"torch {mode}"],
                                            {p["batch_size"]: (p["mean"], p["std"]) for p in tj["points"]})
        for d in DTYPES:
            pts, _, machine = SW.loupe_sweep(a.model_dir, a, d, work)
            speed[f"loupe {d}"] = better(speed[f"loupe {d}"], pts)

    if "speed" in parts:
        print(f"\nDistilBERT-shaped classifier, seq {a.seq_len}, {a.threads} thread(s) each side, {a.runs} runs, "
              f"best of {a.repeat}; {machine['cpu']}, loupe {machine['simd']}, PyTorch {engine} engine\n")
        print("| batch | PyTorch f32 | PyTorch dynamic int8 | loupe f32 | loupe int8 | "
              "loupe int8 / PyTorch int8 (target >= 1.3) | PyTorch int8 / f32 | loupe int8 / f32 |")
        print("|---|---|---|---|---|---|---|---|")
        for bs in sizes:
            c = {k: v[bs] for k, v in speed.items()}
            cell = lambda k: f"{c[k][0]:.1f} ± {c[k][1]:.1f}"  # noqa: E731
            print(f"| {bs} | {cell('torch f32')} | {cell('torch int8')} | {cell('loupe f32')} | "
                  f"{cell('loupe int8')} | {c['loupe int8'][0] / c['torch int8'][0]:.2f}x | "
                  f"{c['torch int8'][0] / c['torch f32'][0]:.2f}x | {c['loupe int8'][0] / c['loupe f32'][0]:.2f}x |")
        sys.stdout.flush()  # the speed table survives a later failure

    logits, acc = {}, {}
    if "agreement" in parts:
        # logits agreement on one batch of random ids
        B, T = 8, a.seq_len
        ids = np.random.default_rng(7).integers(1, 30522, size=(B, T), dtype=np.int32)
        idf = os.path.join(work, "ids.i32")
        ids.tofile(idf)
        tool = os.path.join(a.build, "bench", "int8", "bench_int8_logits")
        for d in DTYPES:
            o = os.path.join(work, f"loupe-{d}.f32")
            SW.run([tool, a.model_dir, d, idf, str(B), str(T), str(a.threads), o])
            logits[f"loupe {d}"] = np.fromfile(o, dtype=np.float32).astype(np.float64).reshape(B, -1)
        for mode in ("f32", "int8"):
            o = os.path.join(work, f"torch-{mode}.f32")
            torch_job(env, "logits", "--mode", mode, "--ids", idf, "--batch", str(B), "--out", o, *common)
            logits[f"torch {mode}"] = np.fromfile(o, dtype=np.float32).astype(np.float64).reshape(B, -1)

        # accuracy on the bundled set
        acc = {f"loupe {d}": SW.accuracy(d, work, a) for d in DTYPES}
        for mode in ("f32", "int8"):
            acc[f"torch {mode}"] = torch_job(env, "accuracy", "--model", os.path.join(ROOT, "tests/golden/bench_cls"),
                                             "--mode", mode, "--data", os.path.join(ROOT, "data/bench-intents/val.csv"),
                                             "--threads", str(a.threads))["accuracy"]

        print(f"\nlogits on {B} x {T} random ids (normwise rel = max|a-b| / max|ref|; argmax agreement):")
        print("| path | against | rel | argmax agree |")
        print("|---|---|---|---|")
        for k, ref in PAIRS:
            agree = int(np.sum(logits[k].argmax(-1) == logits[ref].argmax(-1)))
            print(f"| {k} | {ref} | {rel(logits[k], logits[ref]):.2e} | {agree}/{B} |")
        print("\naccuracy on data/bench-intents val (tests/golden/bench_cls, 960 rows):")
        print("| path | accuracy | change vs its f32 (target within 0.5 points) |")
        print("|---|---|---|")
        for k in ("torch f32", "torch int8", "loupe f32", "loupe int8"):
            base = acc["torch f32"] if k.startswith("torch") else acc["loupe f32"]
            print(f"| {k} | {acc[k]:.4f} | {100 * (acc[k] - base):+.2f} points |")
        sys.stdout.flush()

    qwen = {}
    if a.qwen:
        qd = os.path.join(work, "qwen")
        os.makedirs(qd)
        cfg = SW.config_of("qwen2.5-0.5b")
        cfg.update({"architectures": ["Qwen2ForCausalLM"], "id2label": None, "label2id": None})
        cfg = {k: v for k, v in cfg.items() if v is not None}
        json.dump(cfg, open(os.path.join(qd, "config.json"), "w"))
        for _ in range(a.repeat):
            for q in ("f32", "int8"):
                j = os.path.join(work, f"bg-{q}.json")
                SW.run([LOUPE, "bench-gen", "-m", qd, "-p", str(a.prefill), "-n", "0", "-t", str(a.threads), "-r",
                        str(a.runs), "--json", j] + (["--dequantize"] if q == "f32" else ["--quantize", q]))
                r = [x for x in json.load(open(j))["results"] if x["test"].startswith("pp")][0]
                v = (r["tokens_per_s"], r["tokens_per_s_sd"])
                qwen[f"loupe {q}"] = max(qwen.get(f"loupe {q}", (0, 0)), v)
            for mode in ("f32", "int8"):
                tj = torch_job(env, "prefill", "--model", qd, "--mode", mode, "--seq-len", str(a.prefill),
                               "--warmup", str(a.warmup), "--runs", str(a.runs), "--threads", str(a.threads))
                qwen[f"torch {mode}"] = max(qwen.get(f"torch {mode}", (0, 0)), (tj["mean"], tj["std"]))

    if qwen:
        print(f"\nQwen2.5-0.5B-shaped decoder, prefill of {a.prefill} tokens (one sequence), tokens/s:")
        print("| PyTorch f32 | PyTorch dynamic int8 | loupe f32 | loupe int8 | loupe int8 / PyTorch int8 |")
        print("|---|---|---|---|---|")
        f = lambda k: f"{qwen[k][0]:.1f} ± {qwen[k][1]:.1f}"  # noqa: E731
        print(f"| {f('torch f32')} | {f('torch int8')} | {f('loupe f32')} | {f('loupe int8')} | "
              f"{qwen['loupe int8'][0] / qwen['torch int8'][0]:.2f}x |")
    if a.out:
        with open(a.out, "w") as fo:
            json.dump({"threads": a.threads, "seq_len": a.seq_len, "machine": machine, "torch_engine": engine,
                       "speed": {k: {str(b): v for b, v in d.items()} for k, d in speed.items()},
                       "logits_rel": {k: rel(logits[k], logits[r]) for k, r in PAIRS} if logits else {},
                       "accuracy": acc, "qwen_prefill": qwen}, fo, indent=1)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
