#!/usr/bin/env python3
"""torch.profiler's overhead on loops comparable to prof_overhead's, for the ratio:
  1. ns per record_function range (enter + exit): profiler recording, and no profiler;
  2. step time of 100 layer ranges x 49 op ranges (5,000 ranges per step), each op range
     around one small aten op, with steps alternately idle and recorded
     (schedule(wait=1, warmup=0, active=1)), medians of interleaved pairs.
Run: python3 bench/prof_overhead/torch_overhead.py [--json FILE]"""
import json
import statistics
import sys
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


def ranges(n):
    for _ in range(n):
        with record_function("bench.range"):
            pass


def per_range_ns(recording, n=20000, reps=5):
    best = float("inf")
    for _ in range(reps):
        if recording:
            with profile(activities=[ProfilerActivity.CPU]):
                t0 = time.perf_counter_ns()
                ranges(n)
                t1 = time.perf_counter_ns()
        else:
            t0 = time.perf_counter_ns()
            ranges(n)
            t1 = time.perf_counter_ns()
        best = min(best, (t1 - t0) / n)
    return best


def step(x):
    for _ in range(100):
        with record_function("bench.layer"):
            for _ in range(49):
                with record_function("bench::op"):
                    torch.mul(x, 1.0000001)


def step_times(pairs=15):
    x = torch.ones(64)
    off, on = [], []
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=0, active=1, repeat=0),
                 on_trace_ready=lambda p: None) as p:
        for s in range(2 * pairs):
            recording = s % 2 == 1  # step 0 waits, step 1 records, ...
            t0 = time.perf_counter_ns()
            step(x)
            ms = (time.perf_counter_ns() - t0) / 1e6
            (on if recording else off).append(ms)
            p.step()
    return statistics.median(off), statistics.median(on)


def main():
    out = None
    if len(sys.argv) == 3 and sys.argv[1] == "--json":
        out = sys.argv[2]
    elif len(sys.argv) != 1:
        print(__doc__)
        return 2
    per_range_ns(True, 2000, 1)  # warm-up
    rec = per_range_ns(True)
    off = per_range_ns(False)
    print(f"torch {torch.__version__}: ns per record_function range (enter + exit), min of 5 x 20000:")
    print(f"  recording              {rec:8.1f} ns")
    print(f"  no profiler            {off:8.1f} ns")
    step_times(2)  # warm-up
    b, r = step_times()
    pct = (r - b) / b * 100
    print("torch step, 5000 record_function ranges + 4900 aten::mul (medians of 15 interleaved pairs):")
    print(f"  profiler idle (wait)   {b:8.3f} ms")
    print(f"  recorded               {r:8.3f} ms")
    print(f"  overhead               {pct:8.2f} %  ({(r - b) * 1e6 / 5000:.0f} ns per range)")
    if out:
        with open(out, "w") as f:
            json.dump({"torch": torch.__version__, "ns_per_range": {"recording": rec, "off": off},
                       "step": {"off_ms": b, "recorded_ms": r, "overhead_pct": pct}}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
