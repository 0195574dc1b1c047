#!/usr/bin/env bash
# LoRA over packed f32 bases (LP_F32_PACK=1: every frozen Linear packed once for the f32 GEMM,
# the packed copy replacing the f32 weight) against the same run on OpenBLAS (LP_F32_PACK=0),
# `loupe train --method lora` for 20 steps on one thread, on the bundled BERT classifier
# (models/default), the tiny Llama as a causal LM (all-linear, dropout 0.1) and a
# DistilBERT-shaped classifier (config only, written here): the per-step losses of
# steps.csv and the eval loss agree within 1e-5 relative. Only f32 summation order differs
# (the GEMM kernels: ~1e-6 relative per op, the test_f32_gemm bounds), and 20 AdamW steps
# carry it into the weights; measured differences are <= 1e-7 (an error in the packed path,
# e.g. a wrong panel or a missing bias, moves the first step's loss by far more than 1e-2).
# Each packed run must hold its bases as QUANTIZED_WEIGHT (summary.json memory_by_category)
# and the OpenBLAS run none, so the comparison is between the two paths.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_lora_packed.XXXXXX)
trap 'rm -rf "$T"' EXIT
head -n 321 "$S/data/sst2-mini/train.tsv" > "$T/train.tsv"
head -n 65 "$S/data/sst2-mini/dev.tsv" > "$T/dev.tsv"
mkdir -p "$T/distil"
cp "$S/models/default/vocab.txt" "$S/models/default/tokenizer_config.json" "$T/distil/"
cat > "$T/distil/config.json" <<'JSON'
{"architectures": ["DistilBertForSequenceClassification"], "model_type": "distilbert",
 "vocab_size": 431, "dim": 96, "n_layers": 2, "n_heads": 4, "hidden_dim": 200,
 "max_position_embeddings": 128, "dropout": 0.0, "attention_dropout": 0.0,
 "seq_classif_dropout": 0.0, "activation": "gelu", "initializer_range": 0.02, "pad_token_id": 0,
 "id2label": {"0": "negative", "1": "positive"}, "label2id": {"negative": 0, "positive": 1},
 "loupe_init_seed": 1234}
JSON
rc=0
run() { # NAME PACK MODEL ARGS...
  local name=$1 pack=$2 model=$3; shift 3
  LP_F32_PACK=$pack "$L" train --model "$model" --train "$T/train.tsv" --eval "$T/dev.tsv" --method lora \
    --max-steps 20 --batch-size 16 --lr 2e-3 --threads 1 --no-progress --log-every 1000 --peak-gflops 100 \
    --output-dir "$T/runs" --run-id "$name-$pack" "$@" > "$T/$name-$pack.log" 2>&1 ||
    { echo "FAIL: $name LP_F32_PACK=$pack"; cat "$T/$name-$pack.log"; rc=1; }
}
compare() { # NAME
  python3 - "$T/runs/$1-0" "$T/runs/$1-1" "$1" <<'PY' || rc=1
import csv, json, sys
a, b, name = sys.argv[1:4]
la = [float(r["loss"]) for r in csv.DictReader(open(a + "/steps.csv"))]
lb = [float(r["loss"]) for r in csv.DictReader(open(b + "/steps.csv"))]
sa, sb = json.load(open(a + "/summary.json")), json.load(open(b + "/summary.json"))
errs = []
if len(la) != 20 or len(lb) != 20:
    errs.append(f"{len(la)} / {len(lb)} steps, want 20")
worst = max((abs(x - y) / abs(x) for x, y in zip(la, lb)), default=0.0)
if worst > 1e-5:
    errs.append(f"per-step loss differs by {worst:.2e} relative (bound 1e-5): {la[:4]} vs {lb[:4]}")
ea, eb = sa["eval"]["loss"], sb["eval"]["loss"]
if abs(ea - eb) > 1e-5 * abs(ea):
    errs.append(f"eval loss {ea} vs {eb}")
qa = sa["memory_by_category"]["quantized_weight"]
qb = sb["memory_by_category"]["quantized_weight"]
if qa != 0 or qb <= 0:
    errs.append(f"quantized_weight bytes: OpenBLAS run {qa}, packed run {qb} (want 0 and > 0)")
for e in errs:
    print(f"FAIL: {name}: {e}")
print(f"{name}: 20 steps, per-step loss max relative difference {worst:.2e}, eval {ea:.6f} vs {eb:.6f}, packed bases {qb / 2**20:.2f} MiB")
sys.exit(1 if errs else 0)
PY
}
for p in 0 1; do
  run bert $p "$S/models/default"
  run llama $p "$S/models/tiny-llama" --targets all-linear --lora-dropout 0.1
  run distil $p "$T/distil"
done
compare bert
compare llama
compare distil
exit $rc
