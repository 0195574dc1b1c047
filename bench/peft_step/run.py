#!/usr/bin/env python3
"""Full fine-tuning vs LoRA vs QLoRA training steps, loupe (bench_step) beside PyTorch (full),
PyTorch + PEFT (LoRA) and PyTorch + PEFT + bitsandbytes (QLoRA, NF4 + double quantization on
the CPU), issue 5: DistilBERT shape, batch 16, seq 128, rank 8 alpha 16 on q and v, fp32
compute, dropout off, AdamW + clip 1.0; loupe eager and fused. Each configuration runs in its
own process; PyTorch under default and passive thread settings, the faster kept.
Prints samples/s and ratios, QLoRA/LoRA step time, fused/eager, QLoRA base bytes per
parameter, and loupe's peak memory by category for the three methods.

usage: python3 bench/peft_step/run.py [--build build] [--out results.json] [--quick]
           [--shape distilbert] [--batch 16] [--seq 128] [--threads 2] [--blas-coretype env|NAME]
--quick: fewer runs (a smoke run, not figures); use with --shape minilm --batch 4 --seq 32."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "train_step"))
import common  # noqa: E402

METHODS = ("full", "lora", "qlora")
# ops only --exec eager runs: QLoRA's whole-weight dequantization and LoRA's separate
# scale (mul) and add; the fused kernels fold them into their GEMM passes
EAGER_ONLY_OPS = ("lp::nf4_dequantize", "lp::int8_dequantize", "lp::mul", "lp::add")
TORCH_NAME = {"full": "PyTorch", "lora": "PyTorch+PEFT", "qlora": "PyTorch+PEFT+bnb"}
# Targets of issue 5
LORA_RATIO, QLORA_OVER_LORA, QLORA_FUSED_GAIN, QLORA_BPP = 1.25, 1.25, 1.3, 0.6
# profiled steps per loupe configuration, after its timed runs (the op table)
OPS_STEPS = 2
CATS = ["parameter", "quantized_weight", "gradient", "optimizer_state", "activation", "temporary", "input"]


def op_diff(method, eager, fused):
    """The two exec modes op by op (loupe's profiler, self ms per step), and what fusion can
    remove at most: the ops eager runs that fused has no counterpart of (the whole-weight
    dequantization, LoRA's separate scale and add). The base GEMMs run in both modes."""
    if not eager or not fused or "ops" not in eager or "ops" not in fused:
        return
    e = {o["name"]: o for o in eager["ops"]}
    f = {o["name"]: o for o in fused["ops"]}
    names = sorted(set(e) | set(f), key=lambda n: -max(e.get(n, {}).get("self_ms_per_step", 0),
                                                         f.get(n, {}).get("self_ms_per_step", 0)))
    print(f"\n{method}: eager vs fused op by op (loupe profiler, self ms per step, {eager['ops_steps']} steps each)")
    rows = []
    for n in names:
        ve, vf = e.get(n, {}).get("self_ms_per_step"), f.get(n, {}).get("self_ms_per_step")
        if max(ve or 0, vf or 0) < 0.5:
            continue
        rows.append([n, common.fmt(ve, ".1f"), common.fmt(e.get(n, {}).get("calls_per_step"), ".0f"),
                     common.fmt(vf, ".1f"), common.fmt(f.get(n, {}).get("calls_per_step"), ".0f")])
    tot_e = sum(o["self_ms_per_step"] for o in eager["ops"])
    tot_f = sum(o["self_ms_per_step"] for o in fused["ops"])
    rows.append(["sum of ops", f"{tot_e:.1f}", "", f"{tot_f:.1f}", ""])
    common.print_table(["op", "eager ms", "calls", "fused ms", "calls"], rows)
    only = sum(e[n]["self_ms_per_step"] for n in EAGER_ONLY_OPS if n in e)
    step = eager["step_ms_median"]
    bound = step / (step - only) if step > only else None
    print(f"eager-only ops ({', '.join(n for n in EAGER_ONLY_OPS if n in e)}): {only:.1f} ms of a {step:.0f} ms "
          f"eager step; removing them alone gives fused / eager = {common.fmt(bound, '.3f')}. Anything beyond "
          f"that has to come from the GEMMs, which both modes run at the same FLOPs.")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.ROOT, "build"))
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shape", default="distilbert", choices=["distilbert", "minilm"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blas-coretype", default=os.environ.get("LP_BLAS_CORETYPE", ""))
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    exe = common.bench_exe(a.build)
    if a.peak_gflops <= 0:
        a.peak_gflops = common.measure_peak(exe, a.threads, a.blas_coretype)
    r = {"warmup": 1, "runs": 2} if a.quick else {"warmup": 2, "runs": 5}
    t0 = time.time()
    lp, th = {}, {}
    for m in METHODS:
        if not a.no_torch:
            th[m] = common.torch_best(a, shape=a.shape, mode="train", method=m, batch=a.batch, seq=a.seq, **r)
        for ex in ("eager", "fused"):
            lp[m, ex] = common.loupe_run(exe, a, a.blas_coretype, shape=a.shape, mode="train", method=m, exec=ex,
                                         batch=a.batch, seq=a.seq, ops=OPS_STEPS, **r)

    head = (f"\n{a.shape} shape, batch {a.batch}, seq {a.seq}, fp32, {a.threads} threads, rank 8 alpha 16 on q,v, "
            f"dropout off; peak {a.peak_gflops:.1f} GFLOP/s; loupe BLAS core "
            f"{next((x['blas_core'] for x in lp.values() if x), '?')}")
    print(head)
    rows = []
    for m in METHODS:
        t = th.get(m)
        for ex in ("eager", "fused"):
            x = lp[m, ex]
            ratio = x["samples_per_s"] / t["samples_per_s"] if x and t else None
            ratio_min = t["step_ms_min"] / x["step_ms_min"] if x and t else None
            rows.append([m, ex, common.fmt(x and x["samples_per_s"], ".2f"), common.fmt(x and x["step_ms_median"], ".0f"),
                         TORCH_NAME[m], common.fmt(t and t["samples_per_s"], ".2f"), t["thread_setting"] if t else "-",
                         common.fmt(ratio, ".2f"), common.verdict(ratio, LORA_RATIO if m == "lora" else None), common.fmt(ratio_min, ".2f"),
                         common.fmt(x and 100 * x["mfu"], ".1f"), common.fmt(t and 100 * t["mfu"], ".1f"),
                         common.fmt(x and x["peak_rss_bytes"] / 2**20, ".0f"),
                         common.fmt(t and t["peak_rss_bytes"] / 2**20, ".0f")])
    common.print_table(["method", "exec", "loupe/s", "step ms", "reference", "ref/s", "ref thr", "ratio", "target",
                        "min ratio", "MFU lp%", "MFU ref%", "RSS lp MiB", "RSS ref MiB"], rows)
    if not a.no_torch and th.get("qlora") is None:
        print("PyTorch+PEFT+bitsandbytes QLoRA did not run on this CPU (see the error above): no reference for it.")

    print("\nderived")
    derived = []
    for ex in ("eager", "fused"):
        q, l = lp["qlora", ex], lp["lora", ex]
        v = q["step_ms_median"] / l["step_ms_median"] if q and l else None
        derived.append([f"QLoRA step / LoRA step ({ex})", common.fmt(v, ".2f"),
                        common.verdict(v, QLORA_OVER_LORA, higher=False)])
    for m in METHODS:
        e, f = lp[m, "eager"], lp[m, "fused"]
        v = e["step_ms_median"] / f["step_ms_median"] if e and f else None
        derived.append([f"fused / eager speed ({m})", common.fmt(v, ".2f"),
                        common.verdict(v, QLORA_FUSED_GAIN if m == "qlora" else None)])
    q = lp["qlora", "fused"]
    derived.append(["QLoRA base bytes/param, loupe (NF4 Linears)", common.fmt(q and q["qlora_base_bytes_per_param"], ".3f"),
                    common.verdict(q and q["qlora_base_bytes_per_param"], QLORA_BPP, higher=False)])
    derived.append(["  all frozen base params incl. f32 embeddings", common.fmt(q and q["base_bytes_per_param_all"], ".3f"),
                    ""])
    tq = th.get("qlora")
    derived.append(["QLoRA base bytes/param, bitsandbytes", common.fmt(tq and tq["qlora_base_bytes_per_param"], ".3f"),
                    ""])
    common.print_table(["figure", "value", "target"], derived)

    for m in ("lora", "qlora"):
        op_diff(m, lp[m, "eager"], lp[m, "fused"])

    print("\nloupe peak memory by category, MiB (allocator; peaks of each category, total = peak of the sum)")
    mem_rows = []
    for m in METHODS:
        for ex in ("eager", "fused"):
            x = lp[m, ex]
            if not x:
                continue
            mb = x["mem_peak_bytes"]
            mem_rows.append([m, ex] + [f"{mb[c] / 2**20:.1f}" for c in CATS] +
                            [f"{x['mem_total_peak_bytes'] / 2**20:.1f}", f"{x['peak_rss_bytes'] / 2**20:.0f}"])
    common.print_table(["method", "exec"] + CATS + ["total", "RSS"], mem_rows)
    print(f"({time.time() - t0:.0f} s)")
    if a.out:
        common.write_json(a.out, {"peak_gflops": a.peak_gflops, "threads": a.threads, "shape": a.shape,
                                  "batch": a.batch, "seq": a.seq, "blas_coretype_env": a.blas_coretype,
                                  "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", ""),
                                  "loupe": {f"{m}/{ex}": v for (m, ex), v in lp.items()}, "torch": th})
    return 0 if all(lp.values()) and (a.no_torch or all(th.values())) else 1


if __name__ == "__main__":
    sys.exit(main())
