#!/usr/bin/env bash
# Ecosystem: what loupe writes for a decoder loads in transformers + PEFT and computes what
# loupe computes. models/tiny-llama's weights (drawn by loupe from its seed) are written by
# a learning-rate-0 run (AdamW at lr 0 moves nothing); a LoRA run (all-linear) on the causal
# LM saves a PEFT adapter and a merged model; PeftModel.from_pretrained on the base and
# LlamaForCausalLM on the merged directory must give each row's mean token loss that
# `loupe eval --adapter ... --save-predictions` gives, within 1e-4 relative (float32 vs
# float64; measured ~1e-7). Skips (77) without torch, transformers and peft.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_eco_decoder_peft.XXXXXX)
trap 'rm -rf "$T"' EXIT
py=
for c in "$S/.venv/bin/python" python3; do
  if "$c" -c "import torch, transformers, peft" 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python with torch, transformers and peft"; exit 77; }
M="$S/models/tiny-llama"
head -n 7 "$S/data/sst2-mini/dev.tsv" > "$T/rows.tsv"
q=(--threads 1 --quiet --peak-gflops 100 --output-dir "$T/runs" --eval none)
"$L" train --model "$M" --train "$T/rows.tsv" --lr 0 --max-steps 1 "${q[@]}" --run-id base --save-model "$T/base" \
  > /dev/null || { echo "FAIL: base weights"; exit 1; }
"$L" train --model "$M" --train "$S/data/sst2-mini/train.tsv" --max-steps 10 --lr 1e-2 --method lora \
  --targets all-linear "${q[@]}" --run-id lora --save-adapter "$T/ad" --merge "$T/merged" > /dev/null ||
  { echo "FAIL: LoRA run"; exit 1; }
"$L" eval --model "$M" --adapter "$T/ad" --data "$T/rows.tsv" --threads 1 --save-predictions "$T/p.jsonl" \
  > /dev/null || { echo "FAIL: loupe eval"; exit 1; }
"$py" - "$T" <<'PY'
import json, sys
import torch
from transformers import AutoTokenizer, LlamaForCausalLM
from peft import PeftModel
t = sys.argv[1]
tok = AutoTokenizer.from_pretrained(t + "/base")
base = LlamaForCausalLM.from_pretrained(t + "/base", torch_dtype=torch.float64)
peft = PeftModel.from_pretrained(base, t + "/ad").eval()
merged = LlamaForCausalLM.from_pretrained(t + "/merged", torch_dtype=torch.float64).eval()
rows = [l.rstrip("\n").split("\t")[0] for l in open(t + "/rows.tsv")][1:]
got = [json.loads(l)["mean_loss"] for l in open(t + "/p.jsonl")]
errs, worst = [], 0.0
with torch.no_grad():
    for i, text in enumerate(rows):
        ids = tok(text, return_tensors="pt").input_ids
        for name, m in (("PEFT adapter", peft), ("merged model", merged)):
            ref = m(input_ids=ids, labels=ids).loss.item()
            e = abs(got[i] - ref) / ref
            worst = max(worst, e)
            if e > 1e-4:
                errs.append(f"row {i}: loupe {got[i]} vs {name} in transformers {ref}")
for e in errs:
    print("FAIL: " + e)
print(f"{len(rows)} rows: loupe eval --adapter vs PEFT and the merged model: worst relative {worst:.1e}")
sys.exit(1 if errs else 0)
PY
