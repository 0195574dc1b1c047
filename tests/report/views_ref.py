#!/usr/bin/env python3
"""Independent recomputation, straight from a trace's JSON, of what loupe analyze's Memory
events table and (op, call stack) rows should hold (issue 15). Used once to write
tests/report/data/foreign_views.json (the foreign traces are not in the repository), and by
analyze_views.sh on a loupe trace made in the test.

  views_ref.py TRACE [K] [N]   -> JSON on stdout:
    mem_top: the K largest allocations ([memory] events with Bytes > 0, larger first, earlier
             first among equals): ts_ns (a string), bytes, device_type, device_id, lifetime_ns (to the
             first later event with the same Addr and device and Bytes < 0; -1 none; -2 the
             trace writes no Addr), op (the innermost host event open on its pid/tid, "" none);
    n_allocs, alloc_bytes, n_frees, free_bytes;
    stacks: per (name, first N frames of the "Call stack" arg) calls and summed dur (ns), for
            events that carry the arg."""
import gzip
import json
import sys
from decimal import Decimal

HOST = {"cpu_op", "operator", "user_annotation", "cuda_runtime", "runtime", "hip_runtime", "cuda_driver",
        "hip_driver"}
DROPPED = {"[memory]", "[OutOfMemory]", "profiler::_record_function_enter", "profiler::_record_function_enter_new",
           "profiler::_record_function_exit", "aten::is_leaf", "aten::output_nr", "aten::_version"}


def ns(v):
    return int((Decimal(str(v)) * 1000).to_integral_value(rounding="ROUND_HALF_UP"))


def main():
    path = sys.argv[1]
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    nfr = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    op = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with op(path, "rt") as f:
        d = json.load(f, parse_float=Decimal)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    ops = {}
    mem = []
    stacks = {}
    for i, e in enumerate(ev):
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph in ("i", "I") and e.get("name") == "[memory]":
            mem.append((ns(e["ts"]), i, e))
        elif ph == "X" and str(e.get("cat", "")).lower() in HOST and e.get("name") not in DROPPED:
            key = (str(e.get("pid")), str(e.get("tid")))
            name = e["name"]
            if name.startswith("ProfilerStep#"):
                name = "ProfilerStep*"
            ops.setdefault(key, []).append((ns(e["ts"]), ns(e["dur"]), name))
            cs = (e.get("args") or {}).get("Call stack")
            if cs:
                fr = tuple(cs.split(";")[:nfr])
                s = stacks.setdefault((name, fr), [0, 0])
                s[0] += 1
                s[1] += ns(e["dur"])
    mem.sort(key=lambda x: (x[0], x[1]))

    def innermost(key, t):
        best = None
        for ts, dur, name in ops.get(key, ()):
            if ts <= t < ts + dur and (best is None or (ts, -dur) > (best[0], -best[1])):
                best = (ts, dur, name)
        return best[2] if best else ""

    allocs = []
    n_frees = free_bytes = 0
    has_addr = False
    for order, (t, i, e) in enumerate(mem):
        a = e.get("args", {})
        b = int(a.get("Bytes", 0))
        has_addr |= "Addr" in a
        if b < 0:
            n_frees += 1
            free_bytes -= b
        elif b > 0:
            allocs.append((b, t, order, e))
    top = sorted(allocs, key=lambda x: (-x[0], x[1], x[2]))[:k]
    out = []
    for b, t, order, e in top:
        a = e["args"]
        dt, di = int(a.get("Device Type", -1)), int(a.get("Device Id", -1))
        life = -2
        if "Addr" in a:
            life = -1
            for t2, _, e2 in mem[order + 1:]:
                a2 = e2.get("args", {})
                if (a2.get("Addr") == a["Addr"] and int(a2.get("Bytes", 0)) < 0 and
                        int(a2.get("Device Type", -1)) == dt and int(a2.get("Device Id", -1)) == di):
                    life = t2 - t
                    break
        # ts as a string: epoch ns do not fit a double
        out.append({"ts_ns": str(t), "bytes": b, "device_type": dt, "device_id": di, "lifetime_ns": life,
                    "op": innermost((str(e.get("pid")), str(e.get("tid"))), t)})
    json.dump({"mem_top": out, "n_allocs": len(allocs), "alloc_bytes": sum(x[0] for x in allocs),
               "n_frees": n_frees, "free_bytes": free_bytes, "has_addr": has_addr,
               "stacks": [{"name": n, "frames": list(fr), "calls": v[0], "cpu_total_ns": v[1]}
                          for (n, fr), v in sorted(stacks.items())]}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
