#!/usr/bin/env bash
# loupe train on the bundled decoder (models/tiny-llama, config-only: weights drawn from its
# loupe_init_seed), all on one thread, a few seconds each:
#  1. causal LM on sst2-mini text (no label read): eval perplexity on 100 dev rows must fall
#     to below a tenth of the untrained model's (~975, about ln(vocab 1000); measured ~45 after
#     one 50-step epoch); accuracy/F1 absent (empty in epoch_results.csv, no keys in
#     summary.json, no TensorBoard tags), perplexity = exp(eval loss); tokens counted are the
#     real (unpadded) tokens: one epoch's steps.csv tokens sum to config.json's train_tokens;
#     --save-model writes a LlamaForCausalLM that loupe eval reloads to the trainer's eval loss.
#  2. --task seq-cls: a classification head on the causal-LM checkpoint learns sst2-mini:
#     accuracy >= 0.70 on 100 dev rows (chance 0.5, majority class 0.51; measured 0.79 after
#     one epoch); the saved LlamaForSequenceClassification reloads with no --task.
#  3. LoRA (all-linear) on the causal LM and QLoRA (NF4 base) on the classifier: the saved
#     adapters and merged models reload in loupe eval to the trainer's eval loss.
# Reloads compare the same computation on the same batches: within 1e-4 relative (a merged
# model sums W + scale*B@A once, so it differs from base + adapter by float rounding only).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_decoder_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
M="$S/models/tiny-llama"
head -n 801 "$S/data/sst2-mini/train.tsv" > "$T/train800.tsv"
head -n 101 "$S/data/sst2-mini/dev.tsv" > "$T/dev100.tsv"
common=(--model "$M" --eval "$T/dev100.tsv" --threads 1 --no-progress --log-every 1000 --peak-gflops 100
        --output-dir "$T/runs")
rc=0
fail() { echo "FAIL: $*"; rc=1; }
# eval_loss RUN: the last eval loss in RUN's summary.json
eval_loss() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]+'/summary.json'))['eval']['loss'])" "$1"; }
# same_loss WHAT A B: A and B within 1e-4 relative
same_loss() {
  python3 -c "import sys; a,b=float(sys.argv[2]),float(sys.argv[3]); ok=abs(a-b)<=1e-4*abs(b)
print(('ok: ' if ok else 'FAIL: ')+sys.argv[1]+f': {a:.6f} vs {b:.6f}'); sys.exit(0 if ok else 1)" "$@" || rc=1
}
# loupe_eval_loss ARGS...: loupe eval --json's loss
loupe_eval_loss() {
  "$L" eval --data "$T/dev100.tsv" --threads 1 --json "$@" > "$T/eval.json" || { echo "nan"; return 1; }
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['loss'])" "$T/eval.json"
}

# ---- 1. causal LM
before=$("$L" eval --model "$M" --data "$T/dev100.tsv" --threads 1 --json | python3 -c "import json,sys; print(json.load(sys.stdin)['perplexity'])")
"$L" train "${common[@]}" --train "$T/train800.tsv" --epochs 1 --batch-size 16 --lr 3e-3 --run-id lm \
  --save-model "$T/lm-model" || fail "causal-LM training"
python3 - "$T/runs/lm" "$before" <<'PY' || rc=1
import csv, glob, json, math, os, struct, sys
d, before = sys.argv[1], float(sys.argv[2])
s = json.load(open(d + "/summary.json")); cfg = json.load(open(d + "/config.json"))
ep = list(csv.DictReader(open(d + "/epoch_results.csv"))); steps = list(csv.DictReader(open(d + "/steps.csv")))
errs = []
ev = s["eval"]
if s["model"]["task"] != "causal-lm" or cfg["model"]["task"] != "causal-lm":
    errs.append(f"task {s['model']['task']}")
if "accuracy" in ev or "macro_f1" in ev:
    errs.append(f"summary.json eval has accuracy/F1 for a causal LM: {ev}")
if abs(ev["perplexity"] - math.exp(ev["loss"])) > 1e-9 * ev["perplexity"]:
    errs.append(f"perplexity {ev['perplexity']} != exp(loss {ev['loss']})")
if not ev["perplexity"] < before / 10:
    errs.append(f"eval perplexity {ev['perplexity']:.2f} not below a tenth of the untrained {before:.2f}")
last = ep[-1]
if last["eval_accuracy"] != "" or last["eval_macro_f1"] != "" or abs(float(last["eval_perplexity"]) - ev["perplexity"]) > 1e-9 * ev["perplexity"]:
    errs.append(f"epoch_results.csv row {last}")
tok = sum(int(r["tokens"]) for r in steps if r["epoch"] == "0")
if len(steps) != 50 or tok != cfg["data"]["train_tokens"]:
    errs.append(f"{len(steps)} steps with {tok} tokens; one epoch of 800 rows in 16s has {cfg['data']['train_tokens']} real tokens")
tb = open(glob.glob(d + "/tensorboard/events.out.tfevents.*")[0], "rb").read()
if b"eval/perplexity" not in tb or b"eval/accuracy" in tb or b"eval/macro_f1" in tb:
    errs.append("TensorBoard: want eval/perplexity and no eval/accuracy or eval/macro_f1")
saved = json.load(open(os.path.dirname(d) + "/../lm-model/config.json"))
if saved["architectures"] != ["LlamaForCausalLM"]:
    errs.append(f"saved architectures {saved['architectures']}")
for e in errs:
    print("FAIL: " + e)
print(f"causal LM: eval perplexity {before:.1f} untrained -> {ev['perplexity']:.2f} after {len(steps)} steps")
sys.exit(1 if errs else 0)
PY
python3 "$S/tests/train/check_run.py" "$T/runs/lm" --loss-decreases || rc=1
same_loss "saved causal LM reloads (loupe eval)" "$(loupe_eval_loss --model "$T/lm-model")" "$(eval_loss "$T/runs/lm")"

# ---- 2. classification on the decoder
"$L" train "${common[@]}" --task seq-cls --epochs 1 --batch-size 16 --lr 1e-3 --run-id cls \
  --save-model "$T/cls-model" || fail "seq-cls training"
python3 "$S/tests/train/check_run.py" "$T/runs/cls" --min-accuracy 0.70 || rc=1
same_loss "saved classifier reloads with no --task" "$(loupe_eval_loss --model "$T/cls-model")" "$(eval_loss "$T/runs/cls")"
grep -q LlamaForSequenceClassification "$T/eval.json" || fail "the saved classifier is not a LlamaForSequenceClassification"

# ---- 3. LoRA on the causal LM, QLoRA on the classifier: adapters and merges reload
"$L" train "${common[@]}" --train "$T/train800.tsv" --max-steps 20 --batch-size 16 --lr 3e-3 --method lora \
  --targets all-linear --run-id lora --save-adapter "$T/lora-ad" --merge "$T/lora-merged" || fail "LoRA training"
grep -q '"q_proj"' "$T/lora-ad/adapter_config.json" && grep -q '"down_proj"' "$T/lora-ad/adapter_config.json" ||
  fail "all-linear adapter does not target q_proj and down_proj"
same_loss "LoRA adapter reloads on the base" "$(loupe_eval_loss --model "$M" --adapter "$T/lora-ad")" "$(eval_loss "$T/runs/lora")"
same_loss "LoRA merged model reloads" "$(loupe_eval_loss --model "$T/lora-merged")" "$(eval_loss "$T/runs/lora")"
"$L" train "${common[@]}" --task seq-cls --train "$T/train800.tsv" --max-steps 20 --batch-size 16 --lr 3e-3 \
  --method qlora --run-id qlora --save-adapter "$T/qlora-ad" --merge "$T/qlora-merged" || fail "QLoRA training"
same_loss "QLoRA adapter reloads on the NF4 base" \
  "$(loupe_eval_loss --model "$M" --task seq-cls --adapter "$T/qlora-ad" --base-dtype nf4)" "$(eval_loss "$T/runs/qlora")"
same_loss "QLoRA merged model reloads" "$(loupe_eval_loss --model "$T/qlora-merged")" "$(eval_loss "$T/runs/qlora")"
exit $rc
