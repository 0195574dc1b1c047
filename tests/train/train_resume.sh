#!/usr/bin/env bash
# Resume equivalence: 2N steps in one run versus N steps, a checkpoint, and a resumed run
# of the remaining N must give the same loss curve (within 1e-6) in steps.csv, for full
# fine-tuning and for QLoRA (NF4 base rebuilt from the model, adapters and head from the
# checkpoint, LoRA dropout on). Dropout is on in the default model, so this also checks that
# the dropout RNG, the data position, AdamW's moments and step count all come back.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_train_resume.XXXXXX)
trap 'rm -rf "$T"' EXIT
common=(--max-steps 8 --batch-size 8 --grad-accum 2 --eval none --threads 1 --quiet --output-dir "$T" --lr 3e-4)
# equiv NAME [flags...]: the uninterrupted run NAME and NAME-resumed from its step-4 checkpoint
equiv() {
  local name=$1; shift
  "$L" train "${common[@]}" "$@" --run-id "$name" --checkpoint-every 4 --keep-checkpoints 0 ||
    { echo "FAIL: $name run"; return 1; }
  ls "$T/$name/checkpoints" | grep -qx step-4 || { echo "FAIL: $name: no step-4 checkpoint"; ls -R "$T/$name"; return 1; }
  ls "$T/$name/checkpoints" | grep -qx step-8 || { echo "FAIL: $name: no final checkpoint"; return 1; }
  "$L" train "${common[@]}" "$@" --run-id "$name-resumed" --resume "$T/$name/checkpoints/step-4" ||
    { echo "FAIL: $name resumed run"; return 1; }
  python3 - "$T/$name" "$T/$name-resumed" <<'PY'
import csv, json, sys
a = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
b = list(csv.DictReader(open(sys.argv[2] + "/steps.csv")))
if len(a) != 8 or len(b) != 8:
    print(f"FAIL: {len(a)} and {len(b)} rows, wanted 8"); sys.exit(1)
for x, y in zip(a, b):
    for k in ("loss", "lr", "grad_norm"):
        if abs(float(x[k]) - float(y[k])) > 1e-6:
            print(f"FAIL: step {x['step']} {k}: {x[k]} uninterrupted vs {y[k]} resumed"); sys.exit(1)
    if x["samples"] != y["samples"] or x["tokens"] != y["tokens"]:
        print(f"FAIL: step {x['step']}: different batches after resume"); sys.exit(1)
cfg = json.load(open(sys.argv[2] + "/config.json"))
if not (cfg.get("resumed_from") or "").endswith("step-4"):
    print("FAIL: config.json does not record resumed_from"); sys.exit(1)
print(f"ok: {sys.argv[1].rsplit('/', 1)[1]}: 8 steps uninterrupted == 4 + checkpoint + 4 resumed (loss, lr, grad norm, batches)")
PY
}
rc=0
equiv full || rc=1
equiv qlora --method qlora --lora-dropout 0.1 || rc=1
# the checkpoint must match the settings that fix the data stream
"$L" train "${common[@]}" --run-id other --resume "$T/full/checkpoints/step-4" --seed 9 2>"$T/err"
r2=$?
if [ $r2 -eq 0 ] || ! grep -q -- "--seed" "$T/err"; then
  echo "FAIL: resuming with another seed should be refused naming --seed (exit $r2)"; cat "$T/err"; rc=1
else
  echo "ok: resume with a different --seed is refused"
fi
# the checkpoint of a QLoRA run holds adapters and head only: another --method is refused
"$L" train "${common[@]}" --method lora --run-id other2 --resume "$T/qlora/checkpoints/step-4" 2>"$T/err"
r3=$?
if [ $r3 -eq 0 ] || ! grep -q -- "--method" "$T/err"; then
  echo "FAIL: resuming a QLoRA checkpoint with --method lora should be refused naming --method (exit $r3)"
  cat "$T/err"; rc=1
else
  echo "ok: resume with a different --method is refused"
fi
exit $rc
