#!/usr/bin/env bash
# Resume equivalence on the bundled decoder (models/tiny-llama): 8 steps in one run versus
# 4 steps, a checkpoint and a resumed run of the other 4 must give the same loss, learning
# rate, gradient norm and batches in steps.csv (within 1e-6: the same arithmetic in the same
# order; the bound only absorbs the %.17g round trip), for the causal LM trained in full with
# gradient checkpointing, and for a QLoRA classifier (--task seq-cls, LoRA dropout on, so
# the dropout stream must come back too). The final eval (perplexity) must agree as well.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_decoder_resume.XXXXXX)
trap 'rm -rf "$T"' EXIT
head -n 101 "$S/data/sst2-mini/dev.tsv" > "$T/dev100.tsv"
head -n 49 "$S/data/sst2-mini/train.tsv" > "$T/train48.tsv"
common=(--model "$S/models/tiny-llama" --max-steps 8 --batch-size 8 --grad-accum 2 --eval "$T/dev100.tsv"
        --threads 1 --quiet --output-dir "$T" --lr 3e-3 --peak-gflops 100)
equiv() { # equiv NAME [flags...]
  local name=$1; shift
  "$L" train "${common[@]}" "$@" --run-id "$name" --checkpoint-every 4 --keep-checkpoints 0 ||
    { echo "FAIL: $name run"; return 1; }
  [ -d "$T/$name/checkpoints/step-4" ] || { echo "FAIL: $name: no step-4 checkpoint"; return 1; }
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
ea = json.load(open(sys.argv[1] + "/summary.json"))["eval"]
eb = json.load(open(sys.argv[2] + "/summary.json"))["eval"]
ra = open(sys.argv[1] + "/epoch_results.csv").read().splitlines()
rb = open(sys.argv[2] + "/epoch_results.csv").read().splitlines()
if len(ra) != len(rb) or [r.split(",")[3:6] for r in ra] != [r.split(",")[3:6] for r in rb]:
    print(f"FAIL: epoch_results.csv differs after resume:\n{ra}\n{rb}"); sys.exit(1)
if abs(ea["loss"] - eb["loss"]) > 1e-6 or ea.keys() != eb.keys():
    print(f"FAIL: final eval {ea} uninterrupted vs {eb} resumed"); sys.exit(1)
print(f"ok: {sys.argv[1].rsplit('/', 1)[1]}: 8 steps uninterrupted == 4 + checkpoint + 4 resumed; eval {eb}")
PY
}
rc=0
# 48 rows = 3 steps an epoch: the checkpoint at step 4 holds a causal LM's epoch record
# (empty accuracy fields, a perplexity) that the resumed run must read back and keep
equiv lm-full --train "$T/train48.tsv" --gradient-checkpointing || rc=1
equiv cls-qlora --task seq-cls --method qlora --targets all-linear --lora-dropout 0.1 || rc=1
exit $rc
