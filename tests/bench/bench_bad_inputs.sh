#!/usr/bin/env bash
# loupe bench on bad inputs: a data file missing the text or the label column, a label absent
# from the label map, an empty row, a 10 MB row, batch size 0 or absurd, a model whose trained
# head disagrees with the label map. Each is one line on stderr naming the file (and row),
# a clean exit code, and no run directory; a 10 MB row is truncated with a line naming it.
# Then Ctrl-C half way (exit 130, what was measured written and marked incomplete) and a
# failure half way (nothing left behind, not even the temporary directory).
set -u
LOUPE=${LOUPE:-build/loupe}
MODEL=tests/golden/bench_cls
MAP=data/bench-intents/label_mappings.json
T=$(mktemp -d /tmp/lp_bench_bad_XXXXXX)
fail=0
no() { echo "FAIL: $*" >&2; fail=1; }

printf 'sentence_x,labels\nhello,books\n' >"$T/nocol.csv"
printf 'text,category\nhello,books\n' >"$T/nolabel.csv"
printf 'text,labels\nhello,books\nhi there,spaceships\n' >"$T/unknown.csv"
printf 'text,labels\nhello,books\n,books\n' >"$T/empty.csv"
python3 -c "
import sys
sys.stdout.write('text,labels\nhello,books\n\"' + 'word ' * 2097152 + '\",garden\n')" >"$T/big.csv"

# expect CODE NEEDLE... -- ARGS: runs loupe bench, checks the exit code, that stderr's first
# line holds every needle, that the error is one line (a usage error adds "Try ... --help"),
# and that no run directory (or temporary) was left in the output directory
expect() {
  local code=$1; shift
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  rm -rf "$T/out"
  "$LOUPE" bench --output-dir "$T/out" --run-id r --threads 1 --quiet --skip-profiling --skip-plots \
    --warmup 0 --runs 1 "$@" >"$T/stdout" 2>"$T/stderr"
  local rc=$?
  [ $rc -eq "$code" ] || no "$*: exit $rc, expected $code ($(head -c 300 "$T/stderr"))"
  local first; first=$(head -n 1 "$T/stderr")
  for n in "${needles[@]}"; do
    [[ "$first" == *"$n"* ]] || no "$*: stderr '$first' does not name '$n'"
  done
  local lines; lines=$(grep -vc "^Try 'loupe bench --help'" "$T/stderr")
  [ "$lines" -eq 1 ] || no "$*: $lines lines of error: $(cat "$T/stderr")"
  [ ! -e "$T/out/r" ] || no "$*: left a run directory"
  [ -z "$(ls -A "$T/out" 2>/dev/null)" ] || no "$*: left $(ls "$T/out")"
}

expect 1 "$T/nocol.csv" "text" -- --model $MODEL --data "$T/nocol.csv"
expect 1 "$T/nolabel.csv" "label" -- --model $MODEL --data "$T/nolabel.csv"
expect 1 "$T/unknown.csv:3" "spaceships" -- --model $MODEL --data "$T/unknown.csv" --label-map $MAP
expect 1 "$T/empty.csv:3" "empty" -- --model $MODEL --data "$T/empty.csv" --label-map $MAP
expect 2 "--batch-sizes" "0" -- --model $MODEL --batch-sizes 1,0,8
expect 2 "--batch-sizes" "1000000" -- --model $MODEL --batch-sizes 1000000
expect 2 "--runs" -- --model $MODEL --runs 0
expect 1 "tests/golden/cls_bert/config.json" "2 labels" "16" -- --model tests/golden/cls_bert
expect 1 "tests/golden/cls_bert/config.json" "$MAP" -- --model tests/golden/cls_bert --label-map $MAP
expect 1 "--label-map" "$T/missing.json" -- --model $MODEL --label-map "$T/missing.json"
expect 2 "--dtype" "fp8" -- --model $MODEL --dtype fp8
# the YAML config: an unknown key, a bad value, a list, each named with file and line
printf 'batch_sizes: "1,2"\nnot_a_flag: 3\n' >"$T/unknown.yaml"
printf 'warmup: 1\nruns: -4\n' >"$T/value.yaml"
printf 'batch_sizes:\n  - 1\n  - 2\n' >"$T/list.yaml"
expect 2 "$T/unknown.yaml:2" "not-a-flag" -- --model $MODEL --config "$T/unknown.yaml"
expect 2 "runs ($T/value.yaml:2)" "-4" -- --model $MODEL --config "$T/value.yaml"
expect 1 "$T/list.yaml:2" "lists" -- --model $MODEL --config "$T/list.yaml"

# a 10 MB row: truncated to the model's 128 positions, the one line names file and row
rm -rf "$T/out"
if "$LOUPE" bench --model $MODEL --data "$T/big.csv" --output-dir "$T/out" --run-id big --threads 1 \
  --batch-sizes 1,2 --runs 1 --warmup 0 --skip-profiling --skip-plots >"$T/stdout" 2>"$T/stderr"; then
  grep -q "$T/big.csv:3: 1 row truncated to 128 tokens" "$T/stderr" || no "10 MB row: $(head -n 3 "$T/stderr")"
  python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['complete'] and m['data']['max_tokens'] == 128" \
    "$T/out/big/baseline_metrics.json" || no "10 MB row: metrics"
else
  no "10 MB row: exit $? ($(head -c 300 "$T/stderr"))"
fi

# Ctrl-C half way: exit 130; the files say what was measured and that it is incomplete
rm -rf "$T/out"
"$LOUPE" bench --model $MODEL --output-dir "$T/out" --run-id int --threads 1 --batch-sizes 1,2 \
  --warmup 0 --runs 1000000 --skip-plots >"$T/stdout" 2>"$T/stderr" &
pid=$!
sleep 3
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || no "interrupted: exit $rc ($(tail -n 2 "$T/stderr"))"
python3 - "$T/out/int" <<'EOF' || no "interrupted: files"
import csv, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "baseline_metrics.json")))
assert m["complete"] is False and m["interrupted"] is True, "marked incomplete"
assert m["full_dataset_metrics"] is None and m["profile"] is None, "no phases after the interrupt"
assert len(m["batch_metrics"]) == 1 and m["batch_metrics"][0]["runs"] > 0, m["batch_metrics"]
rows = list(csv.DictReader(open(os.path.join(d, "detailed_metrics.csv"))))
assert len(rows) == m["batch_metrics"][0]["runs"], "CSV rows = runs measured"
assert "INCOMPLETE" in open(os.path.join(d, "baseline_summary_report.txt")).read()
EOF

# failing half way (the tokenizer is missing; the model and data loaded): nothing is left
mkdir -p "$T/notok"
cp $MODEL/config.json $MODEL/model.safetensors "$T/notok/"
expect 1 "$T/notok" "tokenizer" -- --model "$T/notok"

if [ $fail -eq 0 ]; then
  rm -rf "$T"
  echo "bench_bad_inputs: all checks passed"
else
  echo "outputs kept in $T" >&2
fi
exit $fail
