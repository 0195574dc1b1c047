#!/usr/bin/env bash
# loupe eval --save-predictions against transformers, row by row, on the bundled
# models/tiny-llama (tests/cli/golden/tiny_llama_eval.json, written by
# tools/make_tiny_llama_eval_golden.py in float64): each row's mean token loss as a causal LM
# and its logits and predicted label as a classifier (--task seq-cls) within 1e-4 relative
# (float32 against float64 over 2 layers; measured about 1e-6). Rows are batched 3 at a time
# with right padding, so this also holds that padding changes no row's result.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_eval_golden.XXXXXX)
trap 'rm -rf "$T"' EXIT
G="$S/tests/cli/golden/tiny_llama_eval.json"
n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['rows']))" "$G")
head -n $((n + 1)) "$S/data/sst2-mini/dev.tsv" > "$T/rows.tsv"
fail=0
"$L" eval --model "$S/models/tiny-llama" --data "$T/rows.tsv" --batch-size 3 --threads 1 \
  --save-predictions "$T/lm.jsonl" > "$T/lm.out" || { echo "FAIL: loupe eval (causal LM)"; fail=1; }
"$L" eval --model "$S/models/tiny-llama" --task seq-cls --data "$T/rows.tsv" --batch-size 3 --threads 1 \
  --save-predictions "$T/cls.jsonl" --json > "$T/cls.json" || { echo "FAIL: loupe eval (seq-cls)"; fail=1; }
[ $fail = 0 ] || exit 1
cat "$T/lm.out"
python3 - "$G" "$T/lm.jsonl" "$T/cls.jsonl" "$T/cls.json" "$T/lm.out" <<'PY'
import json, math, sys
g = json.load(open(sys.argv[1]))["rows"]
lm = [json.loads(l) for l in open(sys.argv[2])]
cl = [json.loads(l) for l in open(sys.argv[3])]
summary = json.load(open(sys.argv[4]))
errs, worst = [], 0.0
def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-6)
if len(lm) != len(g) or len(cl) != len(g):
    errs.append(f"{len(lm)} / {len(cl)} prediction lines for {len(g)} golden rows")
for gr, a, c in zip(g, lm, cl):
    r = gr["row"]
    if a["row"] != r or a["tokens"] != len(gr["ids"]):
        errs.append(f"row {r}: {a['tokens']} tokens, transformers' tokenizer gives {len(gr['ids'])}")
    e = rel(a["mean_loss"], gr["mean_loss"]); worst = max(worst, e)
    if e > 1e-4:
        errs.append(f"row {r}: mean loss {a['mean_loss']} vs transformers {gr['mean_loss']} (rel {e:.2e})")
    for k, (x, y) in enumerate(zip(c["logits"], gr["logits"])):
        # logits near 0: relative to the row's largest logit
        e = abs(x - y) / max(max(abs(v) for v in gr["logits"]), 1e-6); worst = max(worst, e)
        if e > 1e-4:
            errs.append(f"row {r}: logit {k} {x} vs transformers {y} (rel {e:.2e})")
    if c["pred"] != gr["pred"] or c["label"] != gr["label"]:
        errs.append(f"row {r}: pred/label {c['pred']}/{c['label']} vs {gr['pred']}/{gr['label']}")
# the summary is the token-weighted mean of the rows (perplexity = its exp)
n_tok = sum(len(x["ids"]) - 1 for x in g)
mean = sum(x["mean_loss"] * (len(x["ids"]) - 1) for x in g) / n_tok
got = float(open(sys.argv[5]).read().split("loss ")[1].split(",")[0])
if abs(got - mean) > 1e-4 * mean + 5e-5:  # printed with 4 decimals
    errs.append(f"eval loss {got} vs the token-weighted mean of transformers' rows {mean:.6f}")
acc = sum(x["pred"] == x["label"] for x in g) / len(g)
if abs(summary["accuracy"] - acc) > 1e-9 or "perplexity" in summary:
    errs.append(f"classifier summary {summary} vs accuracy {acc}")
for e in errs:
    print("FAIL: " + e)
print(f"{len(g)} rows; worst relative difference {worst:.2e} (bound 1e-4)")
sys.exit(1 if errs else 0)
PY
