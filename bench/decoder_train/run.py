#!/usr/bin/env python3
"""Decoder training step, loupe (bench_step) beside PyTorch + PEFT (+ bitsandbytes) in one run,
issue 11: a Qwen2.5-0.5B-shaped causal LM (24 layers, hidden 896, 14 heads, 2 key/value heads,
FFN 4864, vocab 151936, tied embeddings) at batch 4 x seq 256 and a SmolLM2-135M-shaped one
(30 layers, hidden 576, 9 heads, 3 key/value heads, FFN 1536, vocab 49152) at batch 8 x seq 256;
fp32, dropout off, random weights from a config, next-token loss on the batch itself. Methods:
full fine-tuning, LoRA (r 8, alpha 16, q_proj/v_proj) and QLoRA (NF4 double-quant bases), and
LoRA with gradient checkpointing. Every configuration in its own process (peak RSS is its own);
PyTorch under its default thread settings and OMP_WAIT_POLICY=PASSIVE, the faster kept. MFU of
both sides against one f32 FMA peak measured once, with the same FLOP count (loupe's
llama_forward_flops; torch_ref.py's decoder_forward_flops is the same formula).

usage: python3 bench/decoder_train/run.py [--build build] [--out results.json] [--quick]
           [--shapes qwen2.5-0.5b,smollm2-135m] [--methods full,lora,qlora] [--threads 2]
--quick: SmolLM2 shape with 2 layers, one run each (a smoke run, not figures)."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "train_step"))
import common  # noqa: E402

# issue 11's targets: loupe / PyTorch samples/s, MFU, QLoRA / LoRA step, RSS loupe / PyTorch,
# and gradient checkpointing's activation cut for its extra step time
LORA_RATIO, FULL_RATIO, MFU, QLORA_STEP, RSS_RATIO = 1.3, 1.3, 0.80, 1.15, 0.6
CKPT_ACT_CUT, CKPT_SLOWDOWN = 3.0, 1.35
BATCH = {"qwen2.5-0.5b": 4, "smollm2-135m": 8}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.ROOT, "build"))
    ap.add_argument("--out", help="write every configuration's JSON here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", default="qwen2.5-0.5b,smollm2-135m")
    ap.add_argument("--methods", default="full,lora,qlora")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--blas-coretype", default=os.environ.get("LP_BLAS_CORETYPE", ""))
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--no-torch", action="store_true", help="loupe only")
    a = ap.parse_args()
    shapes = ["smollm2-135m"] if a.quick else a.shapes.split(",")
    methods = a.methods.split(",")
    exe = common.bench_exe(a.build)
    if a.peak_gflops <= 0:
        a.peak_gflops = common.measure_peak(exe, a.threads, a.blas_coretype)
    extra = {"layers": 2} if a.quick else {}
    runs = {"warmup": 0, "runs": 1} if a.quick else {"warmup": a.warmup, "runs": a.runs}
    seq = 32 if a.quick else a.seq

    configs = [(m, False) for m in methods] + ([("lora", True)] if "lora" in methods else [])
    results, t0 = [], time.time()
    for shape in shapes:
        batch = 2 if a.quick else BATCH[shape]
        for method, ckpt in configs:
            kw = dict(shape=shape, mode="train", method=method, batch=batch, seq=seq, **runs)
            flags = {"gradient_checkpointing": ""} if ckpt else {}
            lp = common.loupe_run(exe, a, a.blas_coretype, **kw, **extra, **flags)
            th = None
            if not a.no_torch and not a.quick:
                th = common.torch_best(a, **kw, **flags)
            results.append({"shape": shape, "method": method, "ckpt": ckpt, "batch": batch, "seq": seq,
                            "loupe": lp, "torch": th})

    rows = []
    by = {(x["shape"], x["method"], x["ckpt"]): x for x in results}
    for x in results:
        lp, th = x["loupe"], x["torch"]
        ratio = lp["samples_per_s"] / th["samples_per_s"] if lp and th else None
        rss = lp["peak_rss_bytes"] / th["peak_rss_bytes"] if lp and th else None
        target = {"full": FULL_RATIO, "lora": LORA_RATIO}.get(x["method"]) if not x["ckpt"] else None
        x["ratio"], x["rss_ratio"] = ratio, rss
        note = ""
        lo = by.get((x["shape"], "lora", False))
        if x["method"] == "qlora" and lp and lo and lo["loupe"]:
            q = lp["step_ms_median"] / lo["loupe"]["step_ms_median"]
            x["qlora_over_lora_step"] = q
            note = f"QLoRA/LoRA step {q:.2f} {common.verdict(q, QLORA_STEP, higher=False)}"
        if x["ckpt"] and lp and lo and lo["loupe"]:
            act = lo["loupe"]["mem_peak_bytes"]["activation"] / max(1, lp["mem_peak_bytes"]["activation"])
            slow = lp["step_ms_median"] / lo["loupe"]["step_ms_median"]
            x["ckpt_activation_cut"], x["ckpt_slowdown"] = act, slow
            note = (f"activations /{act:.1f} {common.verdict(act, CKPT_ACT_CUT)}, step x{slow:.2f} "
                    f"{common.verdict(slow, CKPT_SLOWDOWN, higher=False)}")
        rows.append([f"{x['shape']} B{x['batch']} {x['method']}{' +ckpt' if x['ckpt'] else ''}",
                     common.fmt(lp and lp["samples_per_s"], ".3f"), common.fmt(th and th["samples_per_s"], ".3f"),
                     common.fmt(ratio, ".2f"), common.verdict(ratio, target),
                     common.fmt(lp and 100 * lp["mfu"], ".1f"), common.fmt(th and 100 * th["mfu"], ".1f"),
                     common.verdict(lp and lp["mfu"], MFU if not x["ckpt"] else None),
                     common.fmt(lp and lp["peak_rss_bytes"] / 2**20, ".0f"),
                     common.fmt(th and th["peak_rss_bytes"] / 2**20, ".0f"), common.fmt(rss, ".2f"),
                     common.verdict(rss, RSS_RATIO, higher=False), note])
    print(f"\nloupe vs PyTorch (+PEFT, +bitsandbytes), seq {seq}, fp32, {a.threads} threads; peak "
          f"{a.peak_gflops:.1f} GFLOP/s; loupe BLAS core {next((x['loupe']['blas_core'] for x in results if x['loupe']), '?')}")
    common.print_table(["config", "loupe/s", "torch/s", "ratio", "target", "MFU lp%", "MFU pt%", "MFU tgt",
                        "RSS lp MiB", "RSS pt MiB", "RSS ratio", "target", "notes"], rows)
    print(f"({time.time() - t0:.0f} s)")
    if a.out:
        common.write_json(a.out, {"peak_gflops": a.peak_gflops, "threads": a.threads, "results": results})
    return 0 if all(x["loupe"] and (a.no_torch or a.quick or x["torch"]) for x in results) else 1


if __name__ == "__main__":
    sys.exit(main())
