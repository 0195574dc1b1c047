"""torch-tb-profiler (the TensorBoard plugin, last PyPI release 0.4.3) loads a Kineto trace
the way TensorBoard does (run directory discovery by file name, RunLoader in a worker
process, every view generated) and finds the steps, the operators with the file's call
counts, and step times equal to the ProfilerStep durations.

Usage: tb_profiler_check.py [demo|fixture]  (demo: loupe's trace from examples/prof_demo;
fixture: PyTorch's own trace, a control that this check is right). The plugin does not
import torch; it needs pandas and tensorboard."""
import collections
import logging
import os
import re
import shutil
import sys
import warnings

sys.path.insert(0, os.path.dirname(__file__))
import eco_common as ec  # noqa: E402

ec.need("tensorboard", "tensorboard")
ec.need("torch_tb_profiler", "torch-tb-profiler")
warnings.filterwarnings("ignore")
logging.getLogger("torch_tb_profiler").setLevel(logging.ERROR)
from torch_tb_profiler import consts, io  # noqa: E402
from torch_tb_profiler.profiler.data import RunProfileData  # noqa: E402
from torch_tb_profiler.profiler.event_parser import ProfileRole  # noqa: E402
from torch_tb_profiler.profiler.loader import RunLoader  # noqa: E402
from torch_tb_profiler.profiler.run_generator import RunGenerator  # noqa: E402


def main():
    trace_path = ec.trace_source(sys.argv)
    base = os.path.basename(trace_path)
    m = consts.WORKER_PATTERN.match(base)
    if not m:
        ec.fail(f"{base}: TensorBoard would not list it (plugin's WORKER_PATTERN does not match)")
    worker = m.group(1)
    events = ec.complete_events(ec.load_trace(trace_path))
    steps = sorted(int(re.match(r"ProfilerStep#(\d+)", e["name"]).group(1))
                   for e in events if e["name"].startswith("ProfilerStep#"))
    step_dur = {int(e["name"].split("#")[1]): float(e["dur"]) for e in events if e["name"].startswith("ProfilerStep#")}
    if not steps:
        ec.fail(f"{trace_path}: no ProfilerStep#N events")

    # As TensorBoard does: logdir/run/<worker>.pt.trace.json[.gz], loaded by RunLoader.
    logdir = ec.tempdir("lp_tb_")
    run_dir = os.path.join(logdir, "run1")
    os.makedirs(run_dir)
    shutil.copy(trace_path, run_dir)
    cache = io.Cache(ec.tempdir("lp_tb_cache_"))
    run = RunLoader("run1", run_dir, cache).load()
    workers = run.get_workers("Operator") if hasattr(run, "get_workers") else None
    profiles = [p for (w, _), p in run.profiles.items() if w == worker]
    profile = profiles[0] if len(profiles) == 1 else None
    if profile is None:
        ec.fail(f"RunLoader produced no profile for worker {worker!r} (profiles: {list(run.profiles)}); "
                "see the plugin's warning above")
    if profile.overview is None or profile.operation_table_by_name is None:
        ec.fail("the Overview or Operator view is missing")
    print(f"ok: RunLoader loads worker {worker!r}; views: {profile.views}")

    # The same data, in process, for the numbers behind the views.
    data = RunProfileData.parse(worker, None, trace_path, ec.tempdir("lp_tb_cache_"))
    if data.steps_names != [str(s) for s in steps]:
        ec.fail(f"steps {data.steps_names}, trace has ProfilerStep#{steps}")
    print(f"ok: steps {data.steps_names}")
    for name, cost in zip(data.steps_names, data.steps_costs):
        total = cost.costs[ProfileRole.Total]
        if abs(total - step_dur[int(name)]) > 1e-3:
            ec.fail(f"step {name}: plugin's step time {total} us, ProfilerStep dur {step_dur[int(name)]} us")
    print("ok: step times equal the ProfilerStep durations")

    want = collections.Counter(e["name"] for e in events if e["cat"].lower() in ("cpu_op", "operator"))
    if not want:
        ec.fail(f"{trace_path}: no cpu_op events")
    have = {o.name: o for o in data.op_list_groupby_name}
    for name, n in want.items():
        if name not in have:
            ec.fail(f"operator {name!r} ({n} calls in the trace) missing from the Operator view")
        if have[name].calls != n:
            ec.fail(f"operator {name!r}: {have[name].calls} calls in the plugin, {n} in the trace")
        if have[name].self_host_duration > have[name].host_duration + 1e-6:
            ec.fail(f"operator {name!r}: self time above total time")
    extra = set(have) - set(want)
    if extra:
        ec.fail(f"operators in the plugin but not in the trace: {sorted(extra)[:5]}")
    print(f"ok: {len(want)} operators, call counts equal")

    # Memory view: the plugin's peak is the largest "Total Allocated" of the [memory] events.
    mem = [e for e in ec.load_trace(trace_path)["traceEvents"]
           if e.get("ph") == "i" and e.get("name") == "[memory]"]
    if mem:
        peak = max(e["args"]["Total Allocated"] for e in mem)
        got = dict(data.memory_snapshot.get_peak_memory()) if data.memory_snapshot else {}
        cpu = [v for (dev, _), v in got.items() if int(dev) == 0]
        if cpu != [peak]:
            ec.fail(f"Memory view peak {got}, trace's largest Total Allocated {peak}")
        print(f"ok: Memory view from {len(mem)} [memory] events, peak {peak} bytes")
    elif ec.trace_kind(sys.argv) == "demo":
        ec.fail(f"{trace_path}: no [memory] events (profile_memory is on in prof_demo)")

    RunGenerator(worker, None, data).generate_run_profile()  # every view builds
    print(f"PASS: torch-tb-profiler reads {base}")


if __name__ == "__main__":
    main()
