#!/usr/bin/env bash
# loupe analyze's call-stack rows and Memory events table on a trace loupe writes itself
# (loupe profile --with-stack: module ranges as stacks, profile_memory's [memory] events):
#  - stacks.csv: each host op's (op, stack) rows sum exactly (integer ns) to its ops.csv row;
#    the rows with frames equal a recomputation from the JSON (the user_annotation ranges open
#    around each op, innermost first, 3 frames), calls and CPU total exact;
#  - memory_events.csv: the 5 largest allocations equal views_ref.py's recomputation (time,
#    bytes, device, lifetime to the free at the same Addr, allocating op), the "rest" row
#    brings the bytes to every allocation's; the text prints the same table;
#  - the page carries both tables and renders in headless Chromium (no console error,
#    charts non-blank; 77 (skip) for that part when Chromium is missing).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
T=$(mktemp -d /tmp/lp_analyze_views.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$L" profile --method lora --rank 4 --max-steps 3 --batch-size 4 --eval none --output-dir "$T" --run-id p \
    --with-stack >"$T/profile.log" 2>&1 || { cat "$T/profile.log"; echo "FAIL: loupe profile --with-stack"; exit 1; }
tr=$(ls "$T"/p/profiler/*.pt.trace.json.gz 2>/dev/null | head -1)
[ -n "$tr" ] || { echo "FAIL: no trace written"; exit 1; }
"$L" analyze "$tr" --group-by-stack 3 --memory-events 5 --top 0 --csv "$T/csv" --html "$T/page.html" \
    >"$T/out.txt" 2>&1 || { cat "$T/out.txt"; echo "FAIL: analyze"; exit 1; }
grep -q '^Key averages by call stack (3 frames' "$T/out.txt" || bad "text lacks the call-stack table"
grep -q '^Largest allocations (5 of' "$T/out.txt" || bad "text lacks the largest allocations"
python3 "$S/tests/report/views_ref.py" "$tr" 5 3 >"$T/ref.json" || bad "views_ref.py"

python3 - "$T" "$tr" <<'PY' || fail=1
import csv, gzip, json, sys
from decimal import Decimal
T, tr = sys.argv[1], sys.argv[2]
bad = 0
def fail(msg):
    global bad
    bad += 1
    print("FAIL:", msg)
ops = {(r["name"], r["kind"]): r for r in csv.DictReader(open(T + "/csv/ops.csv")) if r["is_device"] == "0"}
rows = list(csv.DictReader(open(T + "/csv/stacks.csv")))
F = ["calls", "self_cpu_ns", "cpu_total_ns", "self_device_ns", "device_total_ns"]
sums = {}
for r in rows:
    s = sums.setdefault((r["name"], r["kind"]), [0] * 5)
    for i, f in enumerate(F):
        s[i] += int(r[f])
for k, o in ops.items():
    if sums.get(k) != [int(o[f]) for f in F]:
        fail("stack rows of %s sum to %s, ops.csv %s" % (k, sums.get(k), [o[f] for f in F]))
# recomputed: the ranges open around each host event on its thread, innermost first
d = json.load(gzip.open(tr, "rt"), parse_float=Decimal)
ns = lambda v: int(Decimal(str(v)) * 1000)
by_thread = {}
for e in d["traceEvents"]:
    if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
        name = "ProfilerStep*" if e["name"].startswith("ProfilerStep#") else e["name"]
        by_thread.setdefault((e["pid"], e["tid"]), []).append((ns(e["ts"]), ns(e["dur"]), name, e["cat"]))
want = {}
for evs in by_thread.values():
    evs.sort(key=lambda x: (x[0], -x[1]))
    open_ = []
    for ts, dur, name, cat in evs:
        while open_ and (ts >= open_[-1][0] or ts + dur > open_[-1][0]):
            open_.pop()
        fr = tuple(n for end, n, c in reversed(open_) if c == "user_annotation")[:3]
        if fr:
            w = want.setdefault((name, ";".join(fr)), [0, 0])
            w[0] += 1
            w[1] += dur
        open_.append((ts + dur, name, cat))
got = {(r["name"], r["stack"]): [int(r["calls"]), int(r["cpu_total_ns"])] for r in rows if int(r["frames"]) > 0}
if got != want:
    for k in sorted(set(got) | set(want))[:10]:
        if got.get(k) != want.get(k):
            fail("stack row %s: ours %s, recomputed %s" % (k, got.get(k), want.get(k)))
print("ok: %d stack rows, %d with frames recomputed, %d ops summed" % (len(rows), len(want), len(ops)))
ref = json.load(open(T + "/ref.json"))
mem = list(csv.DictReader(open(T + "/csv/memory_events.csv")))
top, rest = mem[:-1], mem[-1]
if len(top) != len(ref["mem_top"]) or len(top) != 5:
    fail("memory_events.csv has %d rows, recomputed %d" % (len(top), len(ref["mem_top"])))
for r, w in zip(top, ref["mem_top"]):
    ours = (r["ts_ns"], int(r["bytes"]), int(r["device_type"]), int(r["device_id"]), int(r["lifetime_ns"]), r["op"])
    theirs = (w["ts_ns"], w["bytes"], w["device_type"], w["device_id"], w["lifetime_ns"], w["op"])
    if ours != theirs:
        fail("allocation #%s: ours %s, recomputed %s" % (r["rank"], ours, theirs))
if sum(int(r["bytes"]) for r in mem) != ref["alloc_bytes"]:
    fail("memory_events.csv's bytes do not add up to %d" % ref["alloc_bytes"])
print("ok: 5 largest of %d allocations as recomputed" % ref["n_allocs"])
sys.exit(1 if bad else 0)
PY

# out-of-range counts are usage errors (exit 2) naming the flag
"$L" analyze "$tr" --group-by-stack 0 >/dev/null 2>"$T/e1"; [ $? = 2 ] && grep -q -- '--group-by-stack' "$T/e1" ||
    bad "--group-by-stack 0 is not a usage error"
"$L" analyze "$tr" --memory-events 1001 >/dev/null 2>"$T/e2"; [ $? = 2 ] && grep -q -- '--memory-events' "$T/e2" ||
    bad "--memory-events 1001 is not a usage error"

grep -q '>By operator and call stack<' "$T/page.html" || bad "page lacks the call-stack table"
grep -q '>Largest allocations<' "$T/page.html" || bad "page lacks the largest allocations"
python3 "$S/tests/report/html_check.py" "$T/page.html"; rc=$?
[ $rc = 77 ] && { echo "skip: no chromium"; exit $([ $fail = 0 ] && echo 77 || echo 1); }
[ $rc = 0 ] || bad "page in Chromium"
exit $fail
