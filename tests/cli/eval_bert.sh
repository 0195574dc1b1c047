#!/usr/bin/env bash
# loupe eval on the encoder family too: models/default (BERT) trained 30 steps and saved;
# loupe eval on the saved model must report the trainer's final eval (same rows, same
# batches of 16, same arithmetic: loss within 1e-4 relative, accuracy and macro-F1 equal),
# and --save-predictions must hold one line per row whose argmax and labels give that
# accuracy.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_eval_bert.XXXXXX)
trap 'rm -rf "$T"' EXIT
head -n 101 "$S/data/sst2-mini/dev.tsv" > "$T/dev100.tsv"
"$L" train --max-steps 30 --eval "$T/dev100.tsv" --threads 1 --quiet --peak-gflops 100 --output-dir "$T" \
  --run-id r --save-model "$T/model" > /dev/null || { echo "FAIL: loupe train"; exit 1; }
"$L" eval --model "$T/model" --data "$T/dev100.tsv" --threads 1 --json --save-predictions "$T/p.jsonl" > "$T/e.json" ||
  { echo "FAIL: loupe eval"; exit 1; }
python3 - "$T/r/summary.json" "$T/e.json" "$T/p.jsonl" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["eval"]; e = json.load(open(sys.argv[2]))
p = [json.loads(l) for l in open(sys.argv[3])]
errs = []
if abs(e["loss"] - t["loss"]) > 1e-4 * t["loss"]:
    errs.append(f"loss {e['loss']} vs the trainer's {t['loss']}")
if e["accuracy"] != t["accuracy"] or abs(e["macro_f1"] - t["macro_f1"]) > 1e-12:
    errs.append(f"accuracy/F1 {e['accuracy']}/{e['macro_f1']} vs {t['accuracy']}/{t['macro_f1']}")
if e["task"] != "seq-cls" or e["architecture"] != "BertForSequenceClassification" or "perplexity" in e:
    errs.append(f"summary {e}")
acc = sum(max(range(len(r["logits"])), key=lambda k: r["logits"][k]) == r["label"] for r in p) / max(len(p), 1)
if len(p) != 100 or abs(acc - e["accuracy"]) > 1e-12 or any(r["pred_label"] not in ("negative", "positive") for r in p):
    errs.append(f"{len(p)} prediction lines, accuracy from their logits {acc}")
for x in errs:
    print("FAIL: " + x)
print(f"bert: loupe eval {e['loss']:.6f}/{e['accuracy']} == trainer {t['loss']:.6f}/{t['accuracy']}")
sys.exit(1 if errs else 0)
PY
