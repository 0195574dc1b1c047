#!/usr/bin/env python3
"""Reference key averages for Kineto traces written by others, by torch's own code.

torch has no API that loads a trace file into key_averages(): its profiler builds
FunctionEvents from libkineto's in-memory results. This script does what
torch.autograd.profiler.profile._parse_kineto_results does with those results, from the
trace's events, and then lets torch's EventList do the rest (torch's code, not ours):

  * host events (cpu_op / Operator, user_annotation, cuda_runtime / Runtime, cuda_driver)
    become CPU FunctionEvents, names rewritten by torch's _rewrite_name (ProfilerStep#N ->
    ProfilerStep*), torch's _filter_name names dropped; device events (kernel / Kernel,
    cuda_profiler_range, gpu_memcpy / Memcpy, gpu_memset / Memset, gpu_user_annotation)
    become CUDA FunctionEvents;
  * EventList._populate_cpu_children nests them per thread;
  * each kernel is appended (FunctionEvent.append_kernel) to the innermost host op around its
    launching runtime call (the runtime event with the kernel's args.correlation), or, when
    there is none, to the op with the kernel's External id: libkineto links the kernel to
    the op active at launch, which is that op;
  * EventList._remove_dup_nodes folds same-named only children (lifting their kernels);
  * [memory] instants inside no host op's interval become "[memory]" rows, as torch does;
  * EventList.key_averages() (by name, and by name + input shapes) gives the rows.

Times are taken as exact decimals relative to the trace's first event, so floats see small
numbers (as torch's rel_start_ns / 1000). Writes one JSON file with every trace's rows.

usage: python3 tools/trace_keyavg_reference.py TRACE... > tests/report/data/foreign_keyavg.json
"""
import gzip
import json
import sys
from decimal import Decimal

from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent, _filter_name, _rewrite_name

HOST = {"cpu_op": "op", "operator": "op", "user_annotation": "annot", "cuda_runtime": "rt", "runtime": "rt",
        "hip_runtime": "rt", "cuda_driver": "rt", "hip_driver": "rt"}
DEVICE = {"kernel", "cuda_profiler_range", "gpu_memcpy", "memcpy", "gpu_memset", "memset", "gpu_user_annotation"}


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    d = json.loads(raw, parse_float=Decimal)
    return d["traceEvents"] if isinstance(d, dict) else d


def shapes_of(args):
    dims = args.get("Input Dims", args.get("Input dims"))
    if not isinstance(dims, list):
        return None
    return dims


def rows_of(path):
    evs = load(path)
    xs = [e for e in evs if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e
          and isinstance(e.get("name"), str) and Decimal(e["dur"]) >= 0]
    mems = [e for e in evs if isinstance(e, dict) and e.get("ph") in ("i", "I") and e.get("name") == "[memory]"
            and "ts" in e]
    t0 = min([Decimal(e["ts"]) for e in xs + mems])
    threads = {}

    def thread(e):
        return threads.setdefault((str(e.get("pid")), str(e.get("tid"))), len(threads) + 1)

    def us(v):
        return float(Decimal(v) - t0)

    host, device, by_corr_rt, by_ext_op = [], [], {}, {}
    any_shapes = False
    for i, e in enumerate(xs):
        cat = str(e.get("cat", "")).lower()
        name = e["name"]
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if cat in HOST:
            if _filter_name(name):
                continue
            sh = shapes_of(args)
            any_shapes |= sh is not None
            fe = FunctionEvent(id=i, name=_rewrite_name(name, with_wildcard=True), thread=thread(e),
                               start_us=us(e["ts"]), end_us=us(e["ts"]) + float(Decimal(e["dur"])),
                               input_shapes=sh if sh is not None else [], use_device="cuda", stack=[],
                               device_type=DeviceType.CPU, is_user_annotation=HOST[cat] == "annot")
            fe._lp_kind = HOST[cat]
            host.append(fe)
            if HOST[cat] == "rt" and "correlation" in args:
                by_corr_rt[int(args["correlation"])] = fe
            ext = args.get("External id", args.get("external id"))
            if HOST[cat] == "op" and ext is not None:
                by_ext_op.setdefault(int(ext), fe)
        elif cat in DEVICE:
            fe = FunctionEvent(id=i, name=_rewrite_name(name, with_wildcard=True), thread=thread(e), start_us=us(e["ts"]),
                               end_us=us(e["ts"]) + float(Decimal(e["dur"])), input_shapes=[], use_device="cuda", stack=[],
                               device_type=DeviceType.CUDA, is_user_annotation=cat == "gpu_user_annotation")
            fe._lp_args = args
            fe._lp_cat = cat
            device.append(fe)
    # [memory] instants outside every host event's interval (torch's MemRecordsAcc, inclusive)
    spans = sorted((fe.time_range.start, fe.time_range.end) for fe in host)
    lone = 0
    if mems:
        import bisect
        starts = [s for s, _ in spans]
        prefix_max, m = [], float("-inf")
        for _, end in spans:
            m = max(m, end)
            prefix_max.append(m)
        for e in mems:
            t = us(e["ts"])
            k = bisect.bisect_right(starts, t)
            if k == 0 or prefix_max[k - 1] < t:
                lone += 1
    el = EventList(host + device, use_device="cuda")
    el._populate_cpu_children()
    for fe in device:
        if fe._lp_cat == "gpu_user_annotation":
            continue
        args = fe._lp_args
        op = None
        rt = by_corr_rt.get(int(args["correlation"])) if "correlation" in args else None
        if rt is not None:
            p = rt.cpu_parent
            while p is not None and p._lp_kind == "rt":
                p = p.cpu_parent
            op = p
        if op is None:
            ext = args.get("External id", args.get("external id"))
            if ext is not None:
                op = by_ext_op.get(int(ext))
        if op is not None:
            op.append_kernel(fe.name, 0, fe.time_range.end - fe.time_range.start)
    el._remove_dup_nodes()
    el._tree_built = True
    out = {}
    for by_shape in (False, True):
        if by_shape and not any_shapes:
            continue
        rows = []
        for r in el.key_averages(group_by_input_shapes=by_shape):
            rows.append({
                "name": r.key,
                "shapes": str(r.input_shapes) if by_shape else "",
                "device": r.device_type != DeviceType.CPU,
                "annotation": bool(r.is_user_annotation),
                "calls": r.count,
                "self_cpu_us": round(r.self_cpu_time_total, 3),
                "cpu_total_us": round(r.cpu_time_total, 3),
                "self_device_us": round(r.self_device_time_total, 3),
                "device_total_us": round(r.device_time_total, 3),
            })
        if lone and not by_shape:
            rows.append({"name": "[memory]", "shapes": "", "device": False, "annotation": False, "calls": lone,
                         "self_cpu_us": 0, "cpu_total_us": 0, "self_device_us": 0, "device_total_us": 0})
        out["by_shape" if by_shape else "by_name"] = rows
    return out


def main():
    res = {}
    for p in sys.argv[1:]:
        res[p.rsplit("/", 1)[-1]] = rows_of(p)
    json.dump({"what": "torch EventList key_averages over each trace's events (tools/trace_keyavg_reference.py)",
               "traces": res}, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
