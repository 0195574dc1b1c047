#!/usr/bin/env bash
# loupe profile: a short profiled run writes profiler/ (Kineto trace with ProfilerStep#N,
# the module forward/backward ranges, the data-loading and optimizer ranges torch's tools
# classify, op records with FLOPs; key averages; memory timeline; stacks) and a summary
# whose top ops and MFU come from the profiler's op records.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_train_profile.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$L" profile --threads 1 --batch-size 8 --output-dir "$T" --run-id p --profile-wait 1 --profile-warmup 1 \
  --profile-active 2 --max-steps 4 --export-memory-timeline --with-stack --record-shapes --memory-log-steps 2 --peak-gflops 100 \
  >"$T/out" 2>"$T/err" || { echo "FAIL: loupe profile"; cat "$T/err"; exit 1; }
grep -q "profiler: $T/p/profiler/" "$T/out" || { echo "FAIL: loupe profile does not say where the results are"; cat "$T/out"; exit 1; }
grep -q "memory at step 2" "$T/err" || { echo "FAIL: --memory-log-steps printed nothing"; exit 1; }
python3 "$(dirname "$0")/check_run.py" "$T/p" --profiled || exit 1
python3 - "$T/p/profiler" <<'PY'
import glob, gzip, json, os, sys
d = sys.argv[1]
for f in ("key_averages.txt", "stacks.txt", "memory_timeline.html", "memory_timeline.json", "summary.json"):
    if not os.path.getsize(os.path.join(d, f)):
        print(f"FAIL: profiler/{f} empty"); sys.exit(1)
s = json.load(open(os.path.join(os.path.dirname(d), "summary.json")))
if s["peak_source"] != "--peak-gflops" or abs(s["mfu"] - s["achieved_gflops"] / 100) > 1e-9:
    print(f"FAIL: MFU {s['mfu']} is not achieved {s['achieved_gflops']} GFLOP/s over --peak-gflops 100"); sys.exit(1)
traces = glob.glob(d + "/*.pt.trace.json.gz")
if len(traces) != 1:
    print(f"FAIL: traces {traces}"); sys.exit(1)
ev = [e for e in json.load(gzip.open(traces[0], "rt"))["traceEvents"] if e.get("ph") == "X"]
names = {e["name"] for e in ev}
steps = sorted(e["name"] for e in ev if e["name"].startswith("ProfilerStep#"))
need = ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "Optimizer.step#AdamW.step",
        "bert.forward", "bert.backward"]
missing = [n for n in need if n not in names]
layer = [n for n in names if n.startswith("bert.") and ".layer." in n]
fwd = [n for n in layer if n.endswith(".forward")]
bwd = [n for n in layer if n.endswith(".backward")]
ops = [e for e in ev if e.get("cat") == "cpu_op"]
flops = [e for e in ops if e.get("args", {}).get("FLOPs", 0) > 0]
shapes = [e for e in ops if e.get("args", {}).get("Input Dims")]
if steps != ["ProfilerStep#2", "ProfilerStep#3"] or missing or not fwd or not bwd or not flops or not shapes:
    print(f"FAIL: steps {steps}, missing {missing}, layer ranges {len(fwd)}/{len(bwd)}, ops {len(ops)}, "
          f"with flops {len(flops)}, with shapes {len(shapes)}"); sys.exit(1)
print(f"ok: trace has {steps}, {len(fwd)} module forward and {len(bwd)} backward ranges, data loading and "
      f"optimizer ranges, {len(ops)} ops ({len(flops)} with FLOPs)")
PY
