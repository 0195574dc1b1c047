#!/usr/bin/env bash
# loupe train --device cuda on the issue's two workloads, per config 13 optimizer steps, the
# first 3 warm-ups, samples/s over the other 10 from steps.csv (each step ends with a device
# sync, so step_ms is the GPU's time), the device allocator's peak allocated / reserved from
# summary.json, and MFU against `loupe peak --device cuda`'s figures: the card's dense bf16
# peak (the issue's yardstick) and the measured GEMM of the config's precision.
#  - DistilBERT-shaped classifier (6 layers x 768, 12 heads, FFN 3072, vocabulary 30522, drawn
#    from a seed; the bundled tokenizer), batch 32 x seq 128: full fine-tuning and LoRA (r 8 on
#    q_lin, v_lin, as PEFT's default; --lora-dropout 0.1) in f32, TF32 and bf16 (--dtype bf16
#    --tf32: the layer Linears' GEMMs in bf16 with f32 accumulation, as autocast, over f32
#    master weights or a bf16 frozen base; attention and the head in TF32), and QLoRA (the same adapters on an NF4 base,
#    dequantized per GEMM into a TF32 GEMM, or under bf16 rounded to a bf16 copy per GEMM: bitsandbytes'
#    compute dtype) in TF32 and bf16.
#  - Qwen2.5-0.5B-shaped causal LM (24 layers x 896, 14 query / 2 key-value heads, FFN 4864,
#    vocabulary 151936, tied embeddings, q/k/v biases; drawn from a seed, the tiny Llama's
#    tokenizer), batch 8 x seq 512: LoRA and QLoRA, r 16 on every Linear, alpha 32, dropout
#    0.05 (as torch_models.py's PEFT side), TF32, and LoRA over a bf16 base / QLoRA with bf16
#    compute (--dtype bf16).
# Rows of synthetic text longer than the sequence, so every batch is full length.
# Model FLOPs per step: forward = 2 x (the layer Linears' weights + the head's) per token +
# attention's 4 T C per token per layer (half of it under the causal mask); full = 3 x
# forward, LoRA / QLoRA = 2 x forward (no weight gradients for the frozen base; the adapters'
# own FLOPs are < 1 % and left out). One JSON line per config on stdout (and appended to $1
# when given), to put beside PyTorch's numbers (torch_models.py).
# Usage: bench/gpu/train_models.sh [OUT.jsonl]   (LOUPE=path/to/loupe, default build/loupe;
#        TRAIN_MODELS=distilbert,qwen picks the workloads)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
L=${LOUPE:-$root/build/loupe}
out=${1:-}
T=$(mktemp -d /tmp/lp_bench_gpu_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
M=$T/distilbert
mkdir -p "$M"
cp "$root/models/default/vocab.txt" "$root/models/default/tokenizer_config.json" "$M/"
cat >"$M/config.json" <<'JSON'
{"architectures": ["DistilBertForSequenceClassification"], "model_type": "distilbert", "vocab_size": 30522,
 "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072, "max_position_embeddings": 512,
 "sinusoidal_pos_embds": false, "dropout": 0.1, "attention_dropout": 0.1, "seq_classif_dropout": 0.2,
 "activation": "gelu", "initializer_range": 0.02, "pad_token_id": 0,
 "id2label": {"0": "negative", "1": "positive"}, "label2id": {"negative": 0, "positive": 1}, "loupe_init_seed": 1}
JSON
Q=$T/qwen
mkdir -p "$Q"
cp "$root/models/tiny-llama/tokenizer.json" "$root/models/tiny-llama/tokenizer_config.json" "$Q/"
cat >"$Q/config.json" <<'JSON'
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
 "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
 "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
 "attention_dropout": 0.0, "tie_word_embeddings": true, "initializer_range": 0.02, "pad_token_id": 0,
 "loupe_init_seed": 1}
JSON
python3 - "$root/models/default/vocab.txt" "$T/train.tsv" "$T/train_long.tsv" <<'PY'
import random, sys
words = [w.strip() for w in open(sys.argv[1]) if w.strip() and not w.startswith("[") and not w.startswith("##")]
r = random.Random(0)
for path, rows, n in ((sys.argv[2], 32 * 16, 160), (sys.argv[3], 8 * 16, 700)):
    with open(path, "w") as f:
        f.write("sentence\tlabel\n")
        for i in range(rows):
            f.write(" ".join(r.choice(words) for _ in range(n)) + f"\t{i % 2}\n")
PY
"$L" peak --device cuda --json --seconds 1 >"$T/peak.json" 2>"$T/peak.err" || {
  echo "train_models: loupe peak --device cuda failed: $(cat "$T/peak.err")" >&2; exit 1; }
# one MODEL METHOD PREC BATCH SEQ TRAIN ARGS...: a config's run and its JSON line
one() {
  local model=$1 method=$2 prec=$3 B=$4 S=$5 data=$6; shift 6
  local extra=("$@") id=$model-$method-$prec dir=$M
  [ "$model" = qwen ] && dir=$Q
  [ "$prec" = tf32 ] && extra+=(--tf32)
  [ "$prec" = bf16 ] && extra+=(--dtype bf16 --tf32) # the Linears in bf16; attention and the head in TF32
  if ! "$L" train --model "$dir" --train "$data" --eval none --max-steps 13 --batch-size "$B" --max-seq-len "$S" \
       --device cuda --quiet --output-dir "$T/runs" --run-id "$id" "${extra[@]}" >"$T/$id.out" 2>"$T/$id.err"; then
    echo "{\"config\": \"$id\", \"error\": $(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()[-400:]))' "$T/$id.err")}"
    return
  fi
  python3 - "$T/runs/$id" "$T/peak.json" "$dir/config.json" "$model" "$method" "$prec" "$B" "$S" <<'PY' | tee -a ${out:-/dev/null}
import csv, json, statistics, sys
run, peak, cfg, model, method, prec = sys.argv[1:7]
B, T = int(sys.argv[7]), int(sys.argv[8])
p, c, s = json.load(open(peak)), json.load(open(cfg)), json.load(open(run + "/summary.json"))
rows = list(csv.DictReader(open(run + "/steps.csv")))
timed = rows[3:13]
ms = [float(r["step_ms"]) for r in timed]
samples = sum(int(r["samples"]) for r in timed)
tokens = sum(int(r["tokens"]) for r in timed)
if model == "distilbert":
    C, I, Ln = c["dim"], c["hidden_dim"], c["n_layers"]
    fwd = B * (Ln * (8 * T * C * C + 4 * T * C * I) + 4 * Ln * T * T * C + 2 * C * C + 2 * C * 2)
else:  # a causal LM: every token through the tied head, attention over the visible half
    C, I, Ln, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    D = C // c["num_attention_heads"]
    QD, KD = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
    w = Ln * (2 * C * QD + 2 * C * KD + 3 * C * I) + V * C
    fwd = 2 * B * T * w + 4 * B * T * T * C * Ln * 0.5
flops = (3 if method == "full" else 2) * fwd
step_s = sum(ms) / len(ms) / 1e3
achieved = flops / step_s
dm = s.get("device_memory", {})
o = {
    "config": f"{model}-{method}-{prec}", "engine": "loupe", "device": s.get("device_name"),
    "method": method, "precision": prec, "batch": B, "seq": T, "steps_timed": len(timed), "warmup_steps": 3,
    "tokens_per_step": tokens / len(timed),
    "samples_per_s": samples / (sum(ms) / 1e3), "step_ms_mean": statistics.mean(ms), "step_ms_median": statistics.median(ms),
    "peak_allocated_bytes": dm.get("peak_allocated_bytes"), "peak_reserved_bytes": dm.get("peak_reserved_bytes"),
    "peak_allocated_by_category": dm.get("peak_allocated_by_category"),
    "model_tflops_per_step": flops / 1e12, "achieved_tflops": achieved / 1e12,
    "bf16_dense_peak_tflops": p.get("bf16_dense_peak_tflops"), "tf32_gemm_tflops_measured": p.get("tf32_tflops"),
    "f32_gemm_tflops_measured": p.get("f32_tflops"),
    "mfu_vs_bf16_dense_peak": achieved / 1e12 / p["bf16_dense_peak_tflops"] if p.get("bf16_dense_peak_tflops") else None,
    "bf16_gemm_tflops_measured": p.get("bf16_tflops"),
    "mfu_vs_measured_gemm": achieved / 1e12 / p[{"tf32": "tf32_tflops", "bf16": "bf16_tflops"}.get(prec, "f32_tflops")],
    "final_loss": float(rows[-1]["loss"]),
}
print(json.dumps(o))
PY
}
want=",${TRAIN_MODELS:-distilbert,qwen},"
if [[ $want == *,distilbert,* ]]; then
  for prec in f32 tf32 bf16; do one distilbert full $prec 32 128 "$T/train.tsv"; done
  for prec in f32 tf32 bf16; do one distilbert lora $prec 32 128 "$T/train.tsv" --method lora --rank 8 --lora-dropout 0.1; done
  for prec in tf32 bf16; do one distilbert qlora $prec 32 128 "$T/train.tsv" --method qlora --rank 8 --lora-dropout 0.1; done
fi
if [[ $want == *,qwen,* ]]; then
  for cfg in lora/tf32 lora/bf16 qlora/tf32 qlora/bf16; do
    one qwen "${cfg%/*}" "${cfg#*/}" 8 512 "$T/train_long.tsv" --method "${cfg%/*}" --rank 16 --alpha 32 \
      --lora-dropout 0.05 --targets all
  done
fi
