#!/usr/bin/env python3
"""Training step and inference throughput, loupe (bench_step) beside PyTorch (torch_ref.py),
issue 4: DistilBERT- and MiniLM-shaped classifiers, fp32, seq 128, dropout off, the same
thread count; full fine-tuning at batch 16 (AdamW, clip 1.0) eager and fused, inference at
batch 1, 8 and 32. Every configuration runs in its own process (peak RSS is per
configuration); PyTorch runs under its default thread settings and under
OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4, and the faster is compared. MFU of both
sides is against one f32 FMA peak measured once (bench_step --mode peak) or --peak-gflops.

usage: python3 bench/train_step/run.py [--build build] [--out results.json] [--quick]
           [--shapes distilbert,minilm] [--threads 2] [--blas-coretype env|NAME] [--peak-gflops G]
--quick: MiniLM only, fewer runs, inference at batch 1 and 8 (a smoke run, not figures)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Targets of issue 4 (ratios are loupe / PyTorch samples/s; memory is peak RSS loupe / PyTorch)
TRAIN_RATIO, TRAIN_MFU, MEM_RATIO = 1.25, 0.65, 0.7
INFER_RATIO = {1: 1.6, 32: 1.1}
INFER_MFU = {32: 0.72}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.ROOT, "build"))
    ap.add_argument("--out", help="write every configuration's JSON here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", default=None, help="comma-separated: distilbert,minilm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--train-batch", type=int, default=16)
    ap.add_argument("--infer-batches", default=None, help="default 1,8,32 (--quick: 1,8)")
    ap.add_argument("--blas-coretype", default=os.environ.get("LP_BLAS_CORETYPE", ""),
                    help="LP_BLAS_CORETYPE for bench_step (env: keep OPENBLAS_CORETYPE; a set name forces it)")
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--no-torch", action="store_true", help="loupe only")
    a = ap.parse_args()
    shapes = (a.shapes or ("minilm" if a.quick else "distilbert,minilm")).split(",")
    batches = [int(x) for x in (a.infer_batches or ("1,8" if a.quick else "1,8,32")).split(",") if x]
    exe = common.bench_exe(a.build)
    if a.peak_gflops <= 0:
        a.peak_gflops = common.measure_peak(exe, a.threads, a.blas_coretype)
    print(f"f32 FMA peak {a.peak_gflops:.1f} GFLOP/s ({a.threads} threads); "
          f"LP_BLAS_CORETYPE={a.blas_coretype or '(unset)'} OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}",
          file=sys.stderr)

    def runs(batch, train):
        if a.quick:
            return {"warmup": 1, "runs": 2}
        if train:
            return {"warmup": 2, "runs": 5}
        return {"warmup": 3, "runs": 20 if batch == 1 else 10 if batch <= 8 else 5}

    configs = [("train", a.train_batch)] + [("infer", b) for b in batches]
    results = []
    t0 = time.time()
    for shape in shapes:
        for mode, batch in configs:
            r = runs(batch, mode == "train")
            torch_r = None if a.no_torch else common.torch_best(a, shape=shape, mode=mode, method="full",
                                                                batch=batch, seq=a.seq, **r)
            for ex in ("eager", "fused"):
                lp = common.loupe_run(exe, a, a.blas_coretype, shape=shape, mode=mode, method="full", exec=ex,
                                      batch=batch, seq=a.seq, **r)
                results.append({"shape": shape, "mode": mode, "batch": batch, "exec": ex, "loupe": lp,
                                "torch": torch_r})

    rows = []
    for x in results:
        lp, th = x["loupe"], x["torch"]
        train = x["mode"] == "train"
        ratio = lp["samples_per_s"] / th["samples_per_s"] if lp and th else None
        # best run of each side: on a shared machine the least disturbed figure
        ratio_min = th["step_ms_min"] / lp["step_ms_min"] if lp and th else None
        mem = lp["peak_rss_bytes"] / th["peak_rss_bytes"] if lp and th else None
        r_target = TRAIN_RATIO if train else INFER_RATIO.get(x["batch"])
        m_target = TRAIN_MFU if train else INFER_MFU.get(x["batch"])
        x["ratio"], x["ratio_min"], x["rss_ratio"] = ratio, ratio_min, mem
        rows.append([f"{x['shape']} {x['mode']} B{x['batch']}", x["exec"],
                     common.fmt(lp and lp["samples_per_s"], ".2f"), common.fmt(th and th["samples_per_s"], ".2f"),
                     th["thread_setting"] if th else "-", common.fmt(ratio, ".2f"),
                     common.verdict(ratio, r_target), common.fmt(ratio_min, ".2f"),
                     common.fmt(lp and 100 * lp["mfu"], ".1f"), common.fmt(th and 100 * th["mfu"], ".1f"),
                     common.verdict(lp and lp["mfu"], m_target),
                     common.fmt(lp and lp["peak_rss_bytes"] / 2**20, ".0f"),
                     common.fmt(th and th["peak_rss_bytes"] / 2**20, ".0f"), common.fmt(mem, ".2f"),
                     common.verdict(mem, MEM_RATIO if train else None, higher=False)])
    print(f"\nloupe vs PyTorch, seq {a.seq}, fp32, {a.threads} threads, dropout off; peak {a.peak_gflops:.1f} GFLOP/s; "
          f"loupe BLAS core {next((x['loupe']['blas_core'] for x in results if x['loupe']), '?')}; "
          f"PyTorch: the faster of default / passive threads; ratio of medians (target) and of best runs")
    common.print_table(["config", "exec", "loupe/s", "torch/s", "torch thr", "ratio", "target", "min ratio", "MFU lp%",
                        "MFU pt%", "MFU tgt", "RSS lp MiB", "RSS pt MiB", "RSS ratio", "target"], rows)
    print(f"({time.time() - t0:.0f} s)")
    if a.out:
        common.write_json(a.out, {"peak_gflops": a.peak_gflops, "threads": a.threads, "seq": a.seq,
                                  "blas_coretype_env": a.blas_coretype,
                                  "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", ""),
                                  "torch_thread_settings": common.TORCH_ENVS, "results": results})
    return 0 if all(x["loupe"] and (a.no_torch or x["torch"]) for x in results) else 1


if __name__ == "__main__":
    sys.exit(main())
