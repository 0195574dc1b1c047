#!/usr/bin/env python3
"""Reference GPU figures for Kineto traces from HolisticTraceAnalysis (pip HolisticTraceAnalysis).

For each trace (alone in a temporary directory, as HTA wants a trace directory):
TraceAnalysis.get_temporal_breakdown (idle, compute, non-compute and kernel time, µs),
get_idle_time_breakdown (host wait, kernel wait, other, summed over streams, µs; HTA's default
consecutive_kernel_delay of 30 µs) and get_comm_comp_overlap (ratio). A trace HTA cannot
analyse gets {"error": ...} and no figures. Writes one JSON object to stdout.

usage: /work/main/.venv/bin/python tools/trace_hta_reference.py TRACE... > tests/report/data/foreign_hta.json
"""
import json
import logging
import os
import shutil
import sys
import tempfile

logging.disable(logging.CRITICAL)


def figures(path):
    from hta.trace_analysis import TraceAnalysis
    d = tempfile.mkdtemp(prefix="hta_ref_")
    try:
        name = os.path.basename(path)
        if not name.endswith(".gz") and not name.endswith(".json"):
            name += ".json"
        shutil.copy(path, os.path.join(d, name))
        a = TraceAnalysis(trace_dir=d)
        out = {}
        t = a.get_temporal_breakdown(visualize=False).iloc[0]
        out["kernel_time_us"] = float(t["kernel_time(us)"])
        out["idle_time_us"] = float(t["idle_time(us)"])
        out["compute_time_us"] = float(t["compute_time(us)"])
        out["non_compute_time_us"] = float(t["non_compute_time(us)"])
        try:
            ib = a.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=False)
            ib = ib[0] if isinstance(ib, tuple) else ib
            for cat in ("host_wait", "kernel_wait", "other"):
                out["idle_" + cat + "_us"] = float(ib[ib["idle_category"] == cat]["idle_time"].sum())
        except Exception as e:  # noqa: BLE001 - record what HTA said
            out["idle_error"] = str(e)[:200]
        try:
            ov = a.get_comm_comp_overlap(visualize=False).iloc[0]
            r = float(ov["comp_comm_overlap_pctg"]) / 100.0
            if r == r:  # NaN without communication kernels
                out["comm_overlap_ratio"] = r
        except Exception as e:  # noqa: BLE001
            out["overlap_error"] = str(e)[:200]
        return out
    except Exception as e:  # noqa: BLE001
        return {"error": (type(e).__name__ + ": " + str(e))[:200]}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    import hta
    res = {os.path.basename(p): figures(p) for p in sys.argv[1:]}
    json.dump({"what": "HolisticTraceAnalysis %s figures per trace (tools/trace_hta_reference.py)"
               % getattr(hta, "__version__", "?"), "traces": res}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
