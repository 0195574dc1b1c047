"""HolisticTraceAnalysis on a loupe GPU trace agrees with `loupe analyze` within 2 %.

Usage: hta_gpu_check.py GPU_RECORDS_TRACE_BINARY RECORDS.jsonl
       hta_gpu_check.py --trace TRACE.json[.gz]

The trace is loupe's Kineto trace of recorded CUPTI activity (tests/fixtures/cupti/*.jsonl,
written by the gpu_records_trace test binary), or (--trace) one `loupe profile --device cuda`
wrote on a GPU (tests/fixtures/cupti/h200_*.pt.trace.json.gz). HTA leaves the last
ProfilerStep's kernels out by default (an unfinished step, in its view): its temporal figures
are compared with gpu.csv's "hta" scope, which does the same, and, run again with
include_last_profiler_step=True, every figure with the "all" scope and kernels.csv. HTA 0.5's get_temporal_breakdown and
get_gpu_kernel_breakdown are compared with the tables of `loupe analyze --csv DIR`:
  HTA idle_time            vs (last - first device event) - busy   (gpu.csv, scope hta)
  HTA compute_time         vs compute_ns  (union of compute kernels over the streams)
  HTA non_compute_time     vs memory_ns + comm_ns
  HTA kernel_time          vs last_ns - first_ns  (HTA's name for the device span)
  kernel_type sums         vs kernels.csv summed by class (memory / compute)
  per-kernel "sum (us)"    vs kernels.csv total_ns, by name
Definitional differences, and how each is handled:
  - HTA rounds every event to whole µs inward (ts ceiled, ts + dur floored: its
    round_down_time_stamps), so each event loses up to 2 µs (a 2.048 µs memset reads
    1 µs). HTA is run twice. With HTA_DISABLE_NS_ROUNDING=1 (HTA's switch for that) every
    figure must agree within 2 %. With HTA's default rounding, each per-kernel sum must equal
    loupe's less the rounding loss of its events, computed event by event from the trace
    (to 0.01 µs), and every union figure must agree within 2 % plus the summed rounding loss
    of the device events (a union of shrunk intervals shrinks by at most that).
  - HTA's kernel-type "sum" is the union of that type's intervals (merge_kernel_intervals),
    split by the set of types running, each piece truncated to whole µs (astype(int)): the
    rows naming a type are summed and compared with loupe's compute_ns / memory_ns unions,
    allowing 1 µs per piece (the boundaries of the merged intervals, counted from the trace).
  - HTA counts CUDA synchronization records (cat cuda_sync) as kernels. loupe's collector
    records them only with LP_PROF_CUDA_SYNC=1 (as PyTorch: enable_cuda_sync_events), and
    gpu_records_trace drops those in older fixtures, so both see the same device work.
Skips (77) when HTA or pandas is missing, or when the binary was not built."""
import collections
import csv
import gzip
import json
import logging
import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import eco_common as ec  # noqa: E402

ec.need("pandas", "pandas")
ec.need("hta.trace_analysis", "HolisticTraceAnalysis")
from hta.trace_analysis import TraceAnalysis  # noqa: E402

logging.getLogger("hta").setLevel(logging.ERROR)
failures = []
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
ROUNDING_ENV = "HTA_DISABLE_NS_ROUNDING"


def near(what, hta_us, loupe_us, tol):
    ok = abs(hta_us - loupe_us) <= tol
    rel = abs(hta_us - loupe_us) / loupe_us * 100 if loupe_us else 0.0
    print(f"  {what:<52} HTA {hta_us:10.3f} us  loupe {loupe_us:10.3f} us  "
          f"({rel:4.1f} %, tolerance {tol:.3f} us) {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(what)


def hta_figures(tdir, rounding, last_step):
    """HTA 0.5's temporal and kernel breakdowns of the one trace in tdir (last_step: with the
    last ProfilerStep's kernels, which HTA leaves out by default)."""
    if rounding:
        os.environ.pop(ROUNDING_ENV, None)
    else:
        os.environ[ROUNDING_ENV] = "1"
    ta = TraceAnalysis(trace_dir=tdir, include_last_profiler_step=last_step)
    tb = ta.get_temporal_breakdown(visualize=False)
    if len(tb) != 1:
        ec.fail(f"HTA temporal breakdown has {len(tb)} rows, wanted one rank")
    t = tb.iloc[0]
    kt, kb = ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=10**6,
                                         include_memory_kernels=True, image_renderer="")
    return {
        "idle": float(t["idle_time(us)"]), "compute": float(t["compute_time(us)"]),
        "non_compute": float(t["non_compute_time(us)"]), "span": float(t["kernel_time(us)"]),
        "types": {r["kernel_type"]: float(r["sum"]) for _, r in kt.iterrows()},
        "names": {n: float(g["sum (us)"].sum()) for n, g in kb.groupby("name")},
    }


def pieces(evs):
    """Per HTA kernel type, the pieces HTA's type breakdown truncates: the boundaries of the
    type's merged intervals (each may start or end a piece)."""
    by = collections.defaultdict(list)
    for e in evs:
        by["COMPUTATION" if e["cat"] == "kernel" else "MEMORY"].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    n = {}
    for typ, iv in by.items():
        iv.sort()
        merged, end = 0, -math.inf
        for a, b in iv:
            if a > end:
                merged += 1
            end = max(end, b)
        n[typ] = 2 * merged
    return n


def main():
    if len(sys.argv) != 3:
        ec.fail("usage: hta_gpu_check.py GPU_RECORDS_TRACE_BINARY RECORDS.jsonl | --trace TRACE.json[.gz]")
    loupe = os.environ.get("LOUPE") or shutil.which("loupe")
    if not loupe or not os.access(loupe, os.X_OK):
        ec.skip(f"the loupe binary ({loupe or 'LOUPE not set'}) is not built")
    d = ec.tempdir("lp_hta_gpu_")
    tdir = os.path.join(d, "trace")
    os.mkdir(tdir)
    if sys.argv[1] == "--trace":
        records = sys.argv[2]
        trace = os.path.join(tdir, "gpu.pt.trace.json" + (".gz" if records.endswith(".gz") else ""))
        shutil.copyfile(records, trace)
    else:
        exe, records = sys.argv[1], sys.argv[2]
        if not os.access(exe, os.X_OK):
            ec.skip(f"{exe} not built")
        trace = os.path.join(tdir, "gpu.pt.trace.json")
        subprocess.run([exe, records, trace], check=True)
    csv_dir = os.path.join(d, "csv")
    subprocess.run([loupe, "analyze", trace, "--csv", csv_dir], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(csv_dir, "gpu.csv")) as f:  # per scope, in µs
        scopes = {r["scope"]: {k: int(v) / 1000.0 for k, v in r.items() if k != "scope"} for r in csv.DictReader(f)}
    with open(os.path.join(csv_dir, "kernels.csv")) as f:
        kernels = {k["name"]: k for k in csv.DictReader(f)}
    # HTA's rounding loss, event by event, from the numbers HTA reads
    with (gzip.open(trace, "rt") if trace.endswith(".gz") else open(trace)) as f:
        evs = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS]
    n_pieces = pieces(evs)
    loss = collections.defaultdict(float)
    for e in evs:
        ts, dur = float(e["ts"]), float(e["dur"])
        loss[e["name"]] += dur - (math.floor(ts + dur) - math.ceil(ts))
    all_loss = sum(loss.values())
    def loupe_fig(g):
        return {"idle": g["last_ns"] - g["first_ns"] - g["busy_ns"], "compute": g["compute_ns"],
                "non_compute": g["memory_ns"] + g["comm_ns"], "span": g["last_ns"] - g["first_ns"]}

    g = scopes["all"]
    loupe_type = {"COMPUTATION": g["compute_ns"], "MEMORY": g["memory_ns"], "COMMUNICATION": g["comm_ns"]}
    print(f"{records}: {len(evs)} device events on {int(g['streams'] * 1000)} streams, HTA rounding "
          f"loses {all_loss:.3f} us over them")
    labels = {"idle": "idle time (span - busy)", "compute": "compute time (union)",
              "non_compute": "non-compute time (memory + communication)",
              "span": "kernel time (first device event to last)"}

    def temporal(h, fig, rounding):
        for k, label in labels.items():
            # a union's or the span's shrink is bounded by the summed loss of its events
            extra = (2.0 if k == "span" else all_loss) if rounding else 0.0
            near(label, h[k], fig[k], 0.02 * fig[k] + extra + 1e-3)

    # HTA's default leaves out the last ProfilerStep's kernels: gpu.csv's "hta" scope does too
    for rounding in (False, True):
        print(f" HTA's default steps (all but the last ProfilerStep), with{'' if rounding else 'out'} its µs rounding:")
        temporal(hta_figures(tdir, rounding, False), loupe_fig(scopes["hta"]), rounding)
    # every step (include_last_profiler_step): the "all" scope and kernels.csv
    for rounding in (False, True):
        print(f" HTA over every step, with{'' if rounding else 'out'} its µs rounding:")
        h = hta_figures(tdir, rounding, True)
        temporal(h, loupe_fig(g), rounding)
        # HTA splits time by the set of types running ("COMPUTATION overlapping MEMORY"):
        # a type's union is the sum of the rows naming it. The table holds whole µs, so
        # each row may be up to 1 µs off even without the rounding.
        for typ in sorted({t for row in h["types"] for t in row.split(" overlapping ")}):
            if typ not in loupe_type:
                failures.append(f"unknown HTA kernel type {typ}")
                continue
            rows = [row for row in h["types"] if typ in row.split(" overlapping ")]
            near(f"{typ} kernels (union)", sum(h["types"][r] for r in rows), loupe_type[typ],
                 0.02 * loupe_type[typ] + max(len(rows), n_pieces.get(typ, 0)) + (all_loss if rounding else 0.0))
        for name, v in h["names"].items():
            if name not in kernels:
                failures.append(f"HTA kernel {name!r} not in loupe's kernels.csv")
                continue
            total = int(kernels[name]["total_ns"]) / 1000.0
            if rounding:  # exactly loupe's sum less the rounding of its events
                near(f"{name[:34]} sum - rounding", v, total - loss[name], 0.01)
            else:
                near(f"{name[:34]} sum", v, total, 0.02 * total + 1e-3)
        missing = set(kernels) - set(h["names"])
        if missing:
            failures.append(f"loupe kernels missing from HTA's breakdown: {sorted(missing)}")
    if failures:
        ec.fail("HTA and loupe disagree: " + "; ".join(failures))
    print("OK: HTA's temporal and kernel breakdowns agree with loupe analyze")


if __name__ == "__main__":
    main()
