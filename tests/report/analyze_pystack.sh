#!/usr/bin/env bash
# loupe analyze's (op, call stack) rows on a real PyTorch 2.x with_stack trace, whose stacks
# are python_function frames open around each op (tools/traces/gen_torch_stack_trace.py wrote
# data/torch_with_stack.pt.trace.json.gz with torch 2.15):
#  - stacks.csv: each host op's stack rows sum exactly (integer ns) to its ops.csv row;
#  - the rows with frames equal a recomputation from the JSON: the python_function events
#    enclosing each host op on its thread, innermost first, 5 frames (an op that is its
#    same-named parent's only child folded away, as torch does); calls and CPU total exact;
#  - the text names the source of the stacks, and --group-by-stack 2 cuts every stack to 2.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
tr="$S/tests/report/data/torch_with_stack.pt.trace.json.gz"
T=$(mktemp -d /tmp/lp_analyze_pystack.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
for n in 5 2; do
    "$L" analyze "$tr" --group-by-stack $n --top 0 --csv "$T/csv$n" >"$T/out$n.txt" 2>&1 ||
        { cat "$T/out$n.txt"; echo "FAIL: analyze --group-by-stack $n"; exit 1; }
done
grep -q 'python_function' "$T/out5.txt" || { echo "FAIL: the text does not say the stacks are python_function frames"; fail=1; }

python3 - "$T" "$tr" <<'PY' || fail=1
import csv, gzip, json, sys
from decimal import Decimal
T, tr = sys.argv[1], sys.argv[2]
bad = 0
def fail(msg):
    global bad
    bad += 1
    print("FAIL:", msg)
HOST = {"cpu_op", "user_annotation"}
DROPPED = {"profiler::_record_function_enter", "profiler::_record_function_enter_new",
           "profiler::_record_function_exit", "aten::is_leaf", "aten::output_nr", "aten::_version"}
d = json.load(gzip.open(tr, "rt"), parse_float=Decimal)
ns = lambda v: int((Decimal(str(v)) * 1000).to_integral_value(rounding="ROUND_HALF_UP"))
by_thread = {}
for e in d["traceEvents"]:
    if e.get("ph") != "X":
        continue
    cat = e.get("cat")
    if cat == "python_function" or (cat in HOST and e["name"] not in DROPPED):
        name = "ProfilerStep*" if e["name"].startswith("ProfilerStep#") else e["name"]
        by_thread.setdefault((e["pid"], e["tid"]), []).append((ns(e["ts"]), ns(e["dur"]), cat == "python_function", name))
for n in (5, 2):
    ops = {(r["name"], r["kind"]): r for r in csv.DictReader(open("%s/csv%d/ops.csv" % (T, n))) if r["is_device"] == "0"}
    rows = list(csv.DictReader(open("%s/csv%d/stacks.csv" % (T, n))))
    F = ["calls", "self_cpu_ns", "cpu_total_ns"]
    sums = {}
    for r in rows:
        s = sums.setdefault((r["name"], r["kind"]), [0] * len(F))
        for i, f in enumerate(F):
            s[i] += int(r[f])
    for k, o in ops.items():
        if sums.get(k) != [int(o[f]) for f in F]:
            fail("N=%d: stack rows of %s sum to %s, ops.csv %s" % (n, k, sums.get(k), [o[f] for f in F]))
    want = {}
    for evs in by_thread.values():
        evs.sort(key=lambda x: (x[0], -x[1], not x[2]))  # a frame before an op starting with it
        # torch's _remove_dup_nodes: an op that is its same-named parent op's only child is
        # folded into it and has no row of its own
        ops_ = [i for i, x in enumerate(evs) if not x[2]]
        parent, kids, stack = {}, {}, []
        for i in ops_:
            ts, dur = evs[i][0], evs[i][1]
            while stack and (ts >= evs[stack[-1]][0] + evs[stack[-1]][1] or
                             ts + dur > evs[stack[-1]][0] + evs[stack[-1]][1]):
                stack.pop()
            if stack:
                parent[i] = stack[-1]
                kids[stack[-1]] = kids.get(stack[-1], 0) + 1
            stack.append(i)
        folded = {i for i, p in parent.items() if kids[p] == 1 and evs[p][3] == evs[i][3]}
        evs = [x for i, x in enumerate(evs) if i not in folded]
        py = []  # open python_function frames: (end, name)
        for ts, dur, is_py, name in evs:
            while py and (ts >= py[-1][0] or ts + dur > py[-1][0]):
                py.pop()
            if is_py:
                py.append((ts + dur, name))
                continue
            fr = tuple(nm for end, nm in reversed(py))[:n]
            if fr:
                w = want.setdefault((name, ";".join(fr)), [0, 0])
                w[0] += 1
                w[1] += dur
    got = {(r["name"], r["stack"]): [int(r["calls"]), int(r["cpu_total_ns"])] for r in rows if int(r["frames"]) > 0}
    if max((int(r["frames"]) for r in rows), default=0) != n:
        fail("N=%d: the deepest stack row has %s frames" % (n, max((int(r["frames"]) for r in rows), default=0)))
    if len(want) < 20:
        fail("N=%d: only %d recomputed stacks: not a with_stack trace?" % (n, len(want)))
    if got != want:
        diff = [k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
        fail("N=%d: %d of %d stack rows differ" % (n, len(diff), len(want)))
        for k in diff[:5]:
            print("  %s: ours %s, recomputed %s" % (k, got.get(k), want.get(k)))
    print("ok N=%d: %d stack rows, %d with frames recomputed, %d host ops summed" % (n, len(rows), len(want), len(ops)))
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "analyze_pystack: all checks passed"
exit $fail
