#!/usr/bin/env bash
# Round trip through our own files: examples/prof_demo writes a trace and, from the same
# in-memory events, key_averages.txt / .csv; `loupe analyze` on the trace alone must print
# the same table and write the same CSV (so the exporter keeps everything the averages
# need: nesting, ns times, shapes, FLOPs, [memory] bytes).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
demo="${LP_BUILD_DIR:-build}/examples/prof_demo"
[ -x "$demo" ] || { echo "SKIP: $demo is not built"; exit 77; }
T=$(mktemp -d /tmp/lp_analyze_demo.XXXXXX)
trap 'rm -rf "$T"' EXIT
(cd "$T" && "$demo" > demo.log 2>&1) || { echo "FAIL: prof_demo failed"; cat "$T/demo.log"; exit 1; }
P="$T/reports/demo/profiler"
fail=0
"$L" analyze --csv "$T/ours.csv" "$P" > "$T/out.txt" 2>&1 || { echo "FAIL: analyze failed"; cat "$T/out.txt"; exit 1; }
sed -n '/^-----/,/^Self CPU time total/p' "$T/out.txt" > "$T/table.txt"
if cmp -s "$T/table.txt" "$P/key_averages.txt"; then
  echo "ok: analyze's table equals prof_demo's key_averages.txt ($(grep -c '%' "$T/table.txt") lines with %)"
else
  echo "FAIL: table differs from prof_demo's key_averages.txt:"; diff "$T/table.txt" "$P/key_averages.txt" | head -20; fail=1
fi
if cmp -s "$T/ours.csv" "$P/key_averages.csv"; then
  echo "ok: --csv equals prof_demo's key_averages.csv"
else
  echo "FAIL: CSV differs:"; diff "$T/ours.csv" "$P/key_averages.csv" | head -20; fail=1
fi
grep -q 'Per-step time breakdown' "$T/out.txt" || { echo "FAIL: no step breakdown"; fail=1; }
exit $fail
