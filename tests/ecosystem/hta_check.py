"""Holistic Trace Analysis loads a Kineto trace and sees what the file says: rank 0, one
iteration per ProfilerStep#N, every op/range by name with the same count, and the same
durations (after HTA's own ns->µs rounding: ts ceiled, ts+dur floored).

Usage: hta_check.py [demo|fixture]  (demo: loupe's trace from examples/prof_demo;
fixture: PyTorch's own trace, a control that this check is right)."""
import collections
import gzip
import logging
import math
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
import eco_common as ec  # noqa: E402

ec.need("pandas", "pandas")
ec.need("hta.trace_analysis", "HolisticTraceAnalysis")
from hta.trace_analysis import TraceAnalysis  # noqa: E402

logging.getLogger("hta").setLevel(logging.ERROR)


def hta_dur(e):
    """HTA's rounding of fractional-µs events (trace_parser.round_down_time_stamps)."""
    ts, dur = float(e["ts"]), float(e["dur"])
    return math.floor(ts + dur) - math.ceil(ts)


def main():
    trace_path = ec.trace_source(sys.argv)
    trace = ec.load_trace(trace_path)
    if ec.trace_kind(sys.argv) == "demo":
        # HTA finds a file's rank by scanning its text for this pattern (trace_file.py);
        # without it the trace still loads, as rank 0 with a warning. Ours must carry it.
        text = (gzip.open if trace_path.endswith(".gz") else open)(trace_path, "rt").read()
        if not re.search(r'"rank":\s+(\d+)', text):
            ec.fail(f"{trace_path}: no '\"rank\": N' (distributedInfo) for HTA's rank scan")
    events = ec.complete_events(trace)
    if not events:
        ec.fail(f"{trace_path}: no complete events")
    floats = any(isinstance(e["ts"], float) or isinstance(e["dur"], float) for e in events)

    # HTA parses every .json/.gz directly in trace_dir: give it the trace alone.
    d = ec.tempdir("lp_hta_")
    shutil.copy(trace_path, d)
    ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
    t = ta.t
    if t.get_ranks() != [0]:
        ec.fail(f"HTA ranks {t.get_ranks()}, wanted [0] (distributedInfo.rank)")
    df = t.get_trace(0)
    names = t.symbol_table.sym_table
    df = df.assign(s_name=df["name"].map(lambda i: names[i]))

    # Iterations: one per ProfilerStep#N in the file.
    steps = {int(re.match(r"ProfilerStep\s*#\s*(\d+)", e["name"]).group(1)): e
             for e in events if re.match(r"ProfilerStep\s*#\s*\d+", e["name"])}
    if not steps:
        ec.fail(f"{trace_path}: no ProfilerStep#N events")
    iters = [int(i) for i in t.get_iterations(0)]
    if iters != sorted(steps):
        ec.fail(f"HTA iterations {iters}, trace has ProfilerStep#{sorted(steps)}")
    print(f"ok: HTA finds iterations {iters}")

    # Names and counts: every op/range HTA keeps, exactly as many times as in the file.
    want = collections.Counter(e["name"] for e in events)
    have = collections.Counter(df["s_name"])
    if want != have:
        diff = {k: (want.get(k, 0), have.get(k, 0)) for k in set(want) | set(have) if want.get(k) != have.get(k)}
        ec.fail(f"name counts differ (trace, HTA): {dict(list(diff.items())[:10])}")
    print(f"ok: {len(want)} distinct names, {sum(want.values())} events, counts equal")

    # Durations, per name (summed) and per step.
    exp_dur = collections.defaultdict(float)
    for e in events:
        exp_dur[e["name"]] += hta_dur(e) if floats else float(e["dur"])
    got_dur = df.groupby("s_name")["dur"].sum()
    for name, v in exp_dur.items():
        if abs(float(got_dur[name]) - v) > 1e-6 * max(1.0, v):
            ec.fail(f"{name}: total dur {float(got_dur[name])} in HTA, {v} from the trace")
    for n, e in steps.items():
        row = df[df["s_name"] == e["name"]]
        want_d = hta_dur(e) if floats else float(e["dur"])
        if len(row) != 1 or abs(float(row["dur"].iloc[0]) - want_d) > 1e-6:
            ec.fail(f"ProfilerStep#{n}: HTA dur {list(row['dur'])}, trace says {want_d}")
    print(f"ok: durations of {len(exp_dur)} names and {len(steps)} steps match")

    # Events HTA puts inside each iteration: those starting inside the step (CPU rows).
    for n, s in steps.items():
        s0 = math.ceil(float(s["ts"])) if floats else s["ts"]
        s1 = s0 + (hta_dur(s) if floats else s["dur"])
        inside = sum(1 for e in events if s0 <= (math.ceil(float(e["ts"])) if floats else e["ts"]) < s1)
        got = int((df["iteration"] == n).sum())
        if got != inside:
            ec.fail(f"iteration {n}: HTA assigns {got} events, {inside} start inside the step")
    print("ok: events per iteration match")
    print(f"PASS: HTA reads {os.path.basename(trace_path)}")


if __name__ == "__main__":
    main()
