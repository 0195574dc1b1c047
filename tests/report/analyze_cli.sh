#!/usr/bin/env bash
# loupe analyze from the outside: PyTorch's trace gives torch's table (columns, rows,
# counts), --sort/--top/--group-by-shape/--csv do what they say, a directory works, and
# every bad input (missing file, truncated gzip, invalid JSON, no traceEvents, empty
# trace, bad flags) is a clear error naming the file with exit 1 (2 for usage) and
# leaves no CSV behind.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
FIX=tests/fixtures/torch_trace
T=$(mktemp -d /tmp/lp_analyze.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# expect RC PATTERN -- cmd...: exit status RC and output (stdout+stderr) matching PATTERN.
expect() {
  local want=$1 pat=$2; shift 3
  "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" != "$want" ]; then bad "$* -> exit $rc, wanted $want"; sed 's/^/    /' "$T/out" | head -20
  elif ! grep -Eq -- "$pat" "$T/out"; then bad "$* -> output lacks /$pat/"; sed 's/^/    /' "$T/out" | head -20
  else echo "ok: $* -> $rc"; fi
}

# --- PyTorch's own trace -------------------------------------------------------------
expect 0 'Self CPU %' -- "$L" analyze --top 0 --csv "$T/ka.csv" $FIX/worker0.pt.trace.json.gz
cp "$T/out" "$T/full.txt"
for col in 'Name' 'Self CPU %' 'Self CPU' 'CPU total %' 'CPU total' 'CPU time avg' '# of Calls'; do
  head -12 "$T/full.txt" | grep -q -- "$col" || bad "table lacks column '$col'"
done
grep -Eq 'Self CPU time total: ' "$T/full.txt" || bad "no 'Self CPU time total' footer"
# The table itself, from the first separator to the footer, is torch's byte for byte
# (same rows, order, numbers and layout: the trace keeps torch's ns timings).
table() { sed -n '/^-----/,/^Self CPU time total/p' "$1"; }
if table "$T/full.txt" | cmp -s - $FIX/key_averages.txt; then
  echo "ok: the key-averages table equals torch's key_averages.txt"
else
  bad "table differs from torch's:"; table "$T/full.txt" | diff - $FIX/key_averages.txt | head -20
fi
# Every row torch printed (name and call count) appears in ours.
rows=0
while IFS= read -r line; do
  name=$(echo "$line" | sed -E 's/^ *(.*[^ ]) +-?[0-9.]+% .*/\1/')
  calls=$(echo "$line" | awk '{print $NF}')
  rows=$((rows + 1))
  grep -F -- "$name" "$T/full.txt" | grep -Eq " $calls *\$" || bad "torch row '$name' ($calls calls) not in ours"
done < <(grep -E '%' $FIX/key_averages.txt | grep -v 'Self CPU %')
[ "$rows" -ge 40 ] || bad "read only $rows rows of torch's table"
echo "ok: all $rows rows of torch's table (name, calls) are in ours"
# Per-step breakdown: steps 2, 3, 4 (wait=1, warmup=1, active=3).
grep -q 'Per-step time breakdown' "$T/full.txt" || bad "no per-step breakdown"
for s in 2 3 4; do grep -Eq "^ +$s +[0-9]+\.[0-9]{3} " "$T/full.txt" || bad "no row for step $s"; done
# CSV: one line per row plus a header, counts as torch's.
n_csv=$(($(wc -l < "$T/ka.csv") - 1))
[ "$n_csv" = "$rows" ] || bad "CSV has $n_csv rows, torch's table $rows"
grep -q 'aten::addmm' "$T/ka.csv" || bad "CSV lacks aten::addmm"

# --sort count: the most-called op first; --top 3: exactly 3 rows.
expect 0 'aten::resolve_conj' -- "$L" analyze --sort count --top 3 $FIX/worker0.pt.trace.json.gz
rows_of() { table "$1" | grep -E '%' | grep -v 'Self CPU %'; }
first=$(rows_of "$T/out" | head -1)
echo "$first" | grep -q 'aten::resolve_conj' || bad "--sort count: first row is '$first'"
[ "$(rows_of "$T/out" | wc -l)" = 3 ] || bad "--top 3 printed another number of rows"
# --group-by-shape: an Input Shapes column with torch's rendering.
expect 0 'Input Shapes' -- "$L" analyze --group-by-shape $FIX/worker0.pt.trace.json.gz
grep -Fq '[[16, 32], [64, 32], [64]]' "$T/out" || bad "--group-by-shape: no aten::linear shape row"
# A directory holding one trace.
mkdir -p "$T/dir" && cp $FIX/worker0.pt.trace.json.gz "$T/dir/"
expect 0 'ProfilerStep\*' -- "$L" analyze "$T/dir"
# Plain JSON works as well as gzip.
gzip -dc $FIX/worker0.pt.trace.json.gz > "$T/plain.pt.trace.json"
expect 0 'ProfilerStep\*' -- "$L" analyze "$T/plain.pt.trace.json"

# A long trace: the breakdown shows the first and last 10 steps unless --all-steps.
{
  printf '{"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [\n'
  for i in $(seq 0 24); do
    printf '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 1, "tid": 1, "ts": %d.000, "dur": 900.000},\n' "$i" "$((i * 1000))"
    printf '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": %d.500, "dur": 600.250},\n' "$((i * 1000 + 100))"
  done
  printf '{"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 25000.000}]}\n'
} > "$T/long.json"
expect 0 '\(5 more steps; --all-steps lists them\)' -- "$L" analyze "$T/long.json"
[ "$(grep -cE '^ +[0-9]+ +0\.900 ' "$T/out")" = 20 ] || bad "long trace: not 20 step rows shown"
grep -Eq '^ +mean +0\.900 +0\.600 \( 66\.7%\)' "$T/out" || bad "long trace: wrong mean row"
grep -Eq '^ +aten::mm .* 25 *$' "$T/out" || bad "long trace: aten::mm not 25 calls"
expect 0 'ProfilerStep' -- "$L" analyze --all-steps "$T/long.json"
[ "$(grep -cE '^ +[0-9]+ +0\.900 ' "$T/out")" = 25 ] || bad "--all-steps: not 25 step rows"

# --- the streaming model's inputs and outputs -------------------------------------------
# stdin, a bare array (pre-1.8), --csv DIR with every table, a directory of ranks as a job
expect 0 'ProfilerStep\*' -- sh -c "gzip -dc $FIX/worker0.pt.trace.json.gz | \"$L\" analyze -"
printf '[{"ph":"X","cat":"Operator","name":"aten::mm","pid":1,"tid":"7","ts":1610366728298146,"dur":90}]' > "$T/bare.json"
expect 0 'aten::mm' -- "$L" analyze "$T/bare.json"
grep -q 'bare-array trace' "$T/out" || bad "bare array not reported as such"
expect 0 'Wrote every table as CSV' -- "$L" analyze --csv "$T/tables" $FIX/worker0.pt.trace.json.gz
for f in ops ops_by_shape kernels steps gpu memory collectives; do
  [ -s "$T/tables/$f.csv" ] || bad "--csv DIR: no $f.csv"
done
grep -q '^"aten::addmm",' "$T/tables/ops.csv" || bad "ops.csv lacks aten::addmm"
mkdir -p "$T/job"
for r in 0 1; do
  printf '{"distributedInfo": {"rank": %d, "world_size": 2}, "traceEvents": [{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float","pid":0,"tid":7,"ts":0,"dur":%d}]}' "$r" "$((r * 100 + 50))" > "$T/job/rank$r.json"
done
expect 0 'Distributed job: 2 ranks' -- "$L" analyze --csv "$T/jobcsv" "$T/job"
grep -q 'rank 1 AllReduce' "$T/out" || bad "job: no per-collective row for rank 1"
[ -s "$T/jobcsv/ranks.csv" ] && [ -s "$T/jobcsv/rank1/kernels.csv" ] || bad "job: CSV tables missing"

# --- bad input: exit 1, the file named, no CSV left behind -----------------------------
head -c 5000 $FIX/worker0.pt.trace.json.gz > "$T/cut.json.gz"
expect 1 "$T/cut.json.gz: truncated gzip" -- "$L" analyze --csv "$T/bad.csv" "$T/cut.json.gz"
printf '{"traceEvents": [{"ph": "X", "name": "a",, }]}' > "$T/broken.json"
expect 1 "$T/broken.json: not valid JSON \\(at line 1, column" -- "$L" analyze --csv "$T/bad.csv" "$T/broken.json"
head -c 3000 "$T/plain.pt.trace.json" > "$T/cut.json"
expect 1 "$T/cut.json: not valid JSON \\(unexpected end of data" -- "$L" analyze "$T/cut.json"
printf '{"schemaVersion": 1, "deviceProperties": []}' > "$T/noev.json"
expect 1 "$T/noev.json: not a Kineto trace: no \"traceEvents\"" -- "$L" analyze --csv "$T/bad.csv" "$T/noev.json"
printf '{"traceEvents": []}' > "$T/empty.json"
expect 1 "$T/empty.json: the trace has no complete" -- "$L" analyze "$T/empty.json"
: > "$T/zero.json"
expect 1 "$T/zero.json: not valid JSON" -- "$L" analyze "$T/zero.json"
expect 1 "$T/missing.json: cannot open" -- "$L" analyze "$T/missing.json"
printf 'not gzip at all' | cat <(printf '\037\213') - > "$T/garbage.gz"
expect 1 "$T/garbage.gz: (corrupt|truncated) gzip" -- "$L" analyze "$T/garbage.gz"
# the cap on the decompressed text (the fixture inflates to ~0.5 MB), gzip and plain alike
expect 1 "$FIX/worker0.pt.trace.json.gz: the trace.s text .decompressed. is longer than 65536 bytes" -- \
  "$L" analyze --max-trace-bytes 64K --csv "$T/bad.csv" $FIX/worker0.pt.trace.json.gz
expect 1 "$T/plain.pt.trace.json: the trace.s text .decompressed. is longer than 1024 bytes, the cap" -- \
  "$L" analyze --max-trace-bytes 1K "$T/plain.pt.trace.json"
expect 0 'Self CPU' -- "$L" analyze --max-trace-bytes 1G $FIX/worker0.pt.trace.json.gz
[ -e "$T/bad.csv" ] && bad "a CSV was left behind after a failed analyze"
ls "$T" | grep -q '\.tmp\.' && bad "a temporary file was left behind"

# --- usage errors: exit 2 ----------------------------------------------------------------
expect 2 'missing TRACE' -- "$L" analyze
expect 2 "unknown column 'bogus'" -- "$L" analyze --sort bogus $FIX/worker0.pt.trace.json.gz
expect 2 '--top expects an integer' -- "$L" analyze --top x $FIX/worker0.pt.trace.json.gz
expect 2 'expected one TRACE' -- "$L" analyze a.json b.json
expect 2 '--max-trace-bytes must be a positive byte count' -- "$L" analyze --max-trace-bytes 0 a.json
expect 2 '--max-trace-bytes must be a positive byte count' -- "$L" analyze --max-trace-bytes 3X a.json
expect 2 'unrecognized option|unknown option' -- "$L" analyze --frob $FIX/worker0.pt.trace.json.gz
mkdir -p "$T/nodir"
expect 2 'no \*\.pt\.trace\.json' -- "$L" analyze "$T/nodir"
expect 0 'usage: loupe analyze' -- "$L" analyze --help
exit $fail
