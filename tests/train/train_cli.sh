#!/usr/bin/env bash
# loupe train's command-line contract on bad input: each error names the file or flag,
# exits 1 (bad file/data) or 2 (usage), and leaves no run directory behind. Also: the
# YAML config is read and flags override it, and bad LoRA flags are refused.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_train_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
# expect RC PATTERN DESCRIPTION -- args...: exit code, message on stderr, no run dir
expect() {
  local want=$1 pat=$2 what=$3; shift 4
  rm -rf "$T/out"
  "$L" train --output-dir "$T/out" --run-id r --threads 1 --quiet "$@" >"$T/stdout" 2>"$T/stderr"; local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $what: exit $rc, wanted $want"; cat "$T/stderr"; fail=1; return
  fi
  if ! grep -q -- "$pat" "$T/stderr"; then
    echo "FAIL: $what: stderr does not mention '$pat':"; cat "$T/stderr"; fail=1; return
  fi
  if [ -e "$T/out/r" ]; then
    echo "FAIL: $what: a run directory was left behind:"; ls -R "$T/out"; fail=1; return
  fi
  echo "ok: $what"
}
printf 'sentence\tlabel\ngood film \t1\nbad film \t7\n' >"$T/bad_label.tsv"
printf 'sentence\tlabel\n"unterminated\t1\nx\n' >"$T/broken.tsv"
printf 'text,label\n' >"$T/empty.csv"
expect 1 "$T/nope" "missing model dir" -- --model "$T/nope"
expect 1 "$T/missing.tsv" "missing train file" -- --train "$T/missing.tsv"
expect 1 "$T/missing_eval.tsv" "missing eval file" -- --eval "$T/missing_eval.tsv"
expect 1 "bad_label.tsv:3" "label out of range" -- --train "$T/bad_label.tsv"
expect 1 "broken.tsv" "malformed data file" -- --train "$T/broken.tsv"
expect 1 "empty.csv" "data file with no rows" -- --train "$T/empty.csv"
# --skip-bad-rows: the same malformed rows are dropped, counted and named, and training runs
printf 'sentence\tlabel\ngood film\t1\nbad film\t0\nno label here\nawful\t7\nnice\t1\n' >"$T/mixed.tsv"
expect 1 "mixed.tsv:4" "bad row without --skip-bad-rows" -- --train "$T/mixed.tsv" --eval none --max-steps 1
rm -rf "$T/out"
if "$L" train --output-dir "$T/out" --run-id r --threads 1 --quiet --train "$T/mixed.tsv" --eval none \
     --max-steps 1 --skip-bad-rows >"$T/stdout" 2>"$T/stderr" &&
   grep -q "mixed.tsv: skipped 2 bad rows" "$T/stderr" && grep -q "mixed.tsv:5: label 7" "$T/stderr" &&
   [ -f "$T/out/r/summary.json" ]; then
  echo "ok: --skip-bad-rows drops and reports 2 rows"
else
  echo "FAIL: --skip-bad-rows"; cat "$T/stderr"; fail=1
fi
# --eval-split: validation carved from --train with the seed (4000 rows -> 400 evaluated)
rm -rf "$T/out"
if "$L" train --output-dir "$T/out" --run-id r --threads 1 --quiet --max-steps 1 --eval-split 0.1 \
     >"$T/stdout" 2>"$T/stderr" &&
   python3 - "$T/out/r" <<'PY'
import csv, json, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))
t, d = cfg["training"], cfg["data"]
assert t["eval_split"] == 0.1 and t["eval"] is None, t
assert d["train_rows"] == 3600 and d["eval_rows"] == 400, d
PY
then
  echo "ok: --eval-split"
else
  echo "FAIL: --eval-split"; cat "$T/stderr"; fail=1
fi
expect 2 "eval-split" "bad eval split" -- --eval-split 1.5
expect 2 "frobnicate" "unknown flag" -- --frobnicate
expect 2 "batch-size" "bad batch size" -- --batch-size 0
expect 2 "lr" "bad learning rate" -- --lr abc
expect 2 "exec" "bad exec mode" -- --exec turbo
expect 2 "save-adapter needs --method lora" "adapter flags without lora" -- --save-adapter "$T/ad"
# adapter settings with --method full would do nothing: refused, not ignored
expect 2 "rank needs --method lora" "--rank with full fine-tuning" -- --method full --rank 4
expect 2 "lora-dropout needs --method lora" "--lora-dropout with full fine-tuning" -- --lora-dropout 0.1
expect 2 "base-dtype needs --method lora" "--base-dtype with full fine-tuning" -- --base-dtype int8
expect 2 "base-dtype" "bad base dtype" -- --method lora --base-dtype fp8
expect 2 "lora-dropout" "bad lora dropout" -- --method lora --lora-dropout 1.5
expect 2 "matches no Linear" "lora target matching nothing" -- --method lora --targets nope --max-steps 1
expect 1 "adapter_config.json" "missing adapter" -- --method lora --adapter "$T/noadapter" --max-steps 1
expect 2 "unknown method" "bad method" -- --method half
expect 1 "$T/none.yaml" "missing config file" -- --config "$T/none.yaml"
printf 'max_steps: 2\nwibble: 3\n' >"$T/unknown.yaml"
expect 2 "wibble" "unknown key in config" -- --config "$T/unknown.yaml"
printf 'max_steps: [1, 2\n' >"$T/broken.yaml"
expect 1 "broken.yaml" "YAML syntax error" -- --config "$T/broken.yaml"
printf 'batch_size: 0\n' >"$T/badval.yaml"
expect 2 "batch_size" "bad value in config" -- --config "$T/badval.yaml"
printf 'seed: 3\nmax_steps: *x\n' >"$T/alias.yaml"
expect 1 "aliases" "YAML alias in config" -- --config "$T/alias.yaml"
expect 2 "seed" "negative seed after a space" -- --seed " -1"
expect 2 "alpha" "LoRA alpha beyond float range" -- --method lora --alpha 1e300 --max-steps 1
expect 1 "--resume" "resume from nothing" -- --resume "$T/nothing"

# A YAML config whose keys mirror the flags; a flag overrides it.
cat >"$T/run.yaml" <<'YAML'
# keys are the long flags; '-' and '_' alike
max-steps: 3
batch_size: 8
lr: 0.0002
lr-schedule: cosine
eval: none
seed: 7
YAML
rm -rf "$T/out"
if "$L" train --config "$T/run.yaml" --max-steps 2 --output-dir "$T/out" --run-id y --threads 1 --quiet >"$T/stdout" 2>"$T/stderr"; then
  python3 - "$T/out/y" <<'PY' || fail=1
import json, sys, csv
d = sys.argv[1]
c = json.load(open(d + "/config.json"))["training"]
want = {"max_steps": 2, "batch_size": 8, "lr": 0.0002, "lr_schedule": "cosine", "seed": 7, "eval": None}
bad = {k: (c[k], v) for k, v in want.items() if c[k] != v}
rows = list(csv.DictReader(open(d + "/steps.csv")))
if bad or len(rows) != 2 or any(int(r["samples"]) != 8 for r in rows):
    print("FAIL: config file + flag override:", bad, len(rows)); sys.exit(1)
print("ok: YAML config applied, --max-steps overrides it")
PY
else
  echo "FAIL: run with --config exited non-zero"; cat "$T/stderr"; fail=1
fi
# --exec eager runs (op-by-op attention) and is recorded
rm -rf "$T/out"
if "$L" train --exec eager --max-steps 2 --batch-size 4 --eval none --output-dir "$T/out" --run-id e --threads 1 --quiet >/dev/null 2>"$T/stderr" &&
   grep -q '"exec":[[:space:]]*"eager"' "$T/out/e/summary.json"; then
  echo "ok: --exec eager"
else
  echo "FAIL: --exec eager"; cat "$T/stderr"; fail=1
fi
exit $fail
