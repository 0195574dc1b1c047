#!/usr/bin/env python3
"""Runtime ISA dispatch against a -march=native build: the DistilBERT-shaped training step
and inference (bench_step, fused attention) with one binary per configuration, alternated
round by round so machine noise falls on all alike; each figure is the best of --rounds.

  python3 bench/isa/compare.py --native OLD/bench_step --dispatch build/bench/train_step/bench_step
      [--levels default,avx2,avx512] [--rounds 3] [--threads 2]

--native: bench_step built with -DLP_NATIVE=ON (or from a commit before runtime dispatch);
--dispatch: the default build, run once per LP_ISA level ("default" = the detected one).
Every run takes /work/bench.lock when it exists (flock), so two benches never time at once.
"""
import argparse
import json
import os
import shutil
import subprocess

CASES = [("train b16", ["--mode", "train", "--batch", "16"]),
         ("infer b1", ["--mode", "infer", "--batch", "1"]),
         ("infer b32", ["--mode", "infer", "--batch", "32"])]


def run(exe, isa, extra, a):
    env = dict(os.environ)
    env.pop("LP_ISA", None)
    if isa != "default":
        env["LP_ISA"] = isa
    cmd = [exe, "--shape", "distilbert", "--exec", "fused", "--seq", "128", "--threads", str(a.threads),
           "--warmup", "1", "--runs", str(a.runs), "--peak-gflops", "1"] + extra
    if os.path.exists(a.lock) and shutil.which("flock"):
        cmd = ["flock", a.lock] + cmd
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--native", required=True)
    p.add_argument("--dispatch", required=True)
    p.add_argument("--levels", default="default,avx2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lock", default="/work/bench.lock")
    a = p.parse_args()
    configs = [("native", a.native, "default")] + [(f"dispatch {l}", a.dispatch, l) for l in a.levels.split(",")]
    best, isa = {}, {}
    for r in range(a.rounds):
        for case, extra in CASES:
            for name, exe, level in configs:
                j = run(exe, level, extra, a)
                key = (case, name)
                best[key] = min(best.get(key, float("inf")), j["step_ms_min"])
                isa[name] = j.get("isa", "native (-march=native)")
                print(f"  {case:10s} {name:18s} {isa[name]:22s} {j['step_ms_min']:9.1f} ms "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"round {r + 1}/{a.rounds} done; load {os.getloadavg()[0]:.1f}", flush=True)
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"\n{model}, {a.threads} threads, DistilBERT shape, seq 128, fused; best ms of {a.rounds} rounds "
          f"x {a.runs} runs; load after: {os.getloadavg()[0]:.1f}\n")
    print("| case | " + " | ".join(f"{n} ({isa[n]})" for n, _, _ in configs) + " |")
    print("|---|" + "---|" * len(configs))
    for case, _ in CASES:
        base = best[(case, "native")]
        cells = [f"{best[(case, n)]:.1f} ms ({best[(case, n)] / base:.2f}x)" for n, _, _ in configs]
        print(f"| {case} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
