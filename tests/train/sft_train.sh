#!/usr/bin/env bash
# Instruction tuning end to end on the bundled decoder (models/tiny-llama: no chat template, so
# the plain format; one thread, seconds), the CI stand-in for the SmolLM2 measurement in
# bench/README.md:
#  1. LoRA with --packing on the first 200 rows of data/instruct-mini, responses only (the
#     default for prompt/response rows): the mean loss of the last 5 of 40 steps must be below
#     the first 5's by 5% (measured 6.573 -> 6.105, 7% lower; seeded, one thread); exact_match.json scores all 20 eval rows
#     before and after; train_results.json and the printed line carry HF Trainer's four
#     metrics, train_loss = the mean of steps.csv's losses (1e-4 relative: printed to 6 digits).
#  2. Bad input: a missing "response", an unknown role, an empty conversation, messages with
#     no chat template, rows whose responses --max-seq-len cuts away: one line naming the file
#     and line, exit 1 (a bad data file) or 2 (a setting the data cannot meet), no run
#     directory left.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_sft_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
M="$S/models/tiny-llama"
mkdir -p "$T/data"
head -n 200 "$S/data/instruct-mini/train.jsonl" > "$T/data/train.jsonl"
head -n 20 "$S/data/instruct-mini/eval.jsonl" > "$T/data/eval.jsonl"
common=(--model "$M" --threads 1 --no-progress --log-every 1000 --peak-gflops 100 --output-dir "$T/runs")
rc=0
fail() { echo "FAIL: $*"; rc=1; }

"$L" train "${common[@]}" --data "$T/data" --method lora --packing --max-seq-len 128 --batch-size 2 --max-steps 40 \
  --lr 1e-2 --warmup-steps 0 --run-id packed > "$T/out.txt" 2> "$T/err.txt" || { cat "$T/err.txt"; fail "packed LoRA run"; }
python3 - "$T/runs/packed" "$T/out.txt" <<'EOF' || rc=1
import csv, json, sys, re
run, out = sys.argv[1], open(sys.argv[2]).read()
losses = [float(r["loss"]) for r in csv.DictReader(open(run + "/steps.csv"))]
first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
ok = len(losses) == 40 and last < 0.95 * first
print(("ok" if ok else "FAIL") + f": loss {first:.4f} -> {last:.4f} over {len(losses)} steps")
em = json.load(open(run + "/exact_match.json"))
ok2 = em["scored"] == 20 and "before" in em and "after" in em
print(("ok" if ok2 else "FAIL") + f": exact match scored {em['scored']}: before {em.get('before')}, after {em.get('after')}")
tr = json.load(open(run + "/train_results.json"))
keys = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "epoch"}
mean = sum(losses) / len(losses)
ok3 = keys <= set(tr) and abs(tr["train_loss"] - mean) <= 1e-4 * abs(mean) and tr["train_runtime"] > 0
ok3 = ok3 and re.search(r"\{'train_runtime': [0-9.]+, 'train_samples_per_second': [0-9.]+, "
                        r"'train_steps_per_second': [0-9.]+, 'train_loss': [0-9.]+, 'epoch': [0-9.e-]+\}", out)
print(("ok" if ok3 else "FAIL") + f": train_results.json {tr}")
sys.exit(0 if ok and ok2 and ok3 else 1)
EOF

# bad_input CODE NAME CONTENT WANT [ARGS...]: loupe train exits CODE with one line containing WANT
bad_input() {
  local code_want=$1 name=$2 content=$3 want=$4
  shift 4
  printf '%s\n' "$content" > "$T/$name.jsonl"
  "$L" train "${common[@]}" --train "$T/$name.jsonl" --eval none --method lora --max-steps 1 --run-id "bad-$name" \
    "$@" > /dev/null 2> "$T/bad.txt"
  local code=$?
  local lines
  lines=$(grep -vc '^note:\|^loupe: .* has no weights' "$T/bad.txt")
  if [ "$code" -ne "$code_want" ] || ! grep -qF -- "$want" "$T/bad.txt" || [ "$lines" -ne 1 ] || [ -d "$T/runs/bad-$name" ]; then
    fail "$name: exit $code, want $code_want and one line with '$want'"; cat "$T/bad.txt"
  else
    echo "ok: $name: $(grep -F -- "$want" "$T/bad.txt")"
  fi
}
bad_input 1 missing-response $'{"prompt": "a", "response": "b"}\n{"prompt": "c"}' "missing-response.jsonl:2: missing key \"response\""
bad_input 1 unknown-role '{"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}]}' \
  "unknown-role.jsonl:1: message 2 has unknown role \"robot\""
bad_input 1 empty-conversation '{"messages": []}' "empty-conversation.jsonl:1: empty conversation"
bad_input 2 no-template '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}' \
  "no-template.jsonl: chat messages need a chat template"
bad_input 2 cut-away '{"prompt": "a very long prompt that fills the whole window", "response": "b"}' \
  "cut-away.jsonl: no row left to train on (1 skipped; the first: $T/cut-away.jsonl:1: no response token left within --max-seq-len)" \
  --max-seq-len 4
exit $rc
