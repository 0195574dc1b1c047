#!/usr/bin/env bash
# One GPU session's program, run ON the GPU machine from the repository root within a time
# budget (device time is short): scripts/gpu-check.sh on PACK (every CUDA test, the engine
# against the CPU, loupe's model bench, loupe peak), then PyTorch's side of the model bench
# (bench/gpu/torch_models.py: the eager rows, then the torch.compile rows while time is left),
# then `loupe profile --device cuda` of the DistilBERT TF32 step. Everything lands in OUT
# (session.txt says what ran when and how it ended), which is also tarred to OUT.tar.gz.
# Usage: scripts/gpu-session.sh PACK_DIR|PACK.tar.gz OUT_DIR [BUDGET_S (default 480)]
set -u
pack=${1:?usage: scripts/gpu-session.sh PACK OUT [BUDGET_S]}
out=${2:?usage: scripts/gpu-session.sh PACK OUT [BUDGET_S]}
budget=${3:-480}
mkdir -p "$out"
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
note() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$out/session.txt"; }
trap 'tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"' EXIT

GPU_CHECK_TIMEOUT=${GPU_CHECK_TIMEOUT:-150} bash scripts/gpu-check.sh "$pack" "$out" >"$out/gpu-check.out" 2>&1
note "gpu-check: exit $? (summary.txt)"
# the pack's libraries, as gpu-check found them (it may have unpacked a tarball that is gone now)
export LD_LIBRARY_PATH
LD_LIBRARY_PATH=$(sed -n 's/^LD_LIBRARY_PATH=//p' "$out/summary.txt" | head -n 1)

eager=distilbert-full-eager-tf32,distilbert-lora-eager-tf32,distilbert-full-eager-bf16,distilbert-lora-eager-bf16
eager=$eager,distilbert-qlora-eager-tf32,distilbert-qlora-eager-bf16,qwen-lora-eager-tf32,qwen-lora-eager-bf16
eager=$eager,qwen-qlora-eager-tf32,qwen-qlora-eager-bf16
compiled=distilbert-full-compile-tf32,distilbert-lora-compile-tf32,distilbert-full-compile-bf16
compiled=$compiled,distilbert-lora-compile-bf16,qwen-lora-compile-tf32,qwen-lora-compile-bf16
for only in "$eager" "$compiled"; do
  t=$(($(left) - 60))
  [ "$t" -gt 30 ] || { note "torch_models: no time left for $only"; continue; }
  PYTHONUNBUFFERED=1 timeout "$t" python3 bench/gpu/torch_models.py --only "$only" \
    >>"$out/torch_models.jsonl" 2>>"$out/torch_models.err"
  note "torch_models ($only): exit $?"
done

t=$(($(left) - 10))
if [ "$t" -gt 30 ] && [ -d "$pack" ]; then
  m=$(mktemp -d)
  cp models/default/vocab.txt models/default/tokenizer_config.json "$m/"
  sed -n '/^cat >"$M\/config.json" <<.JSON./,/^JSON$/p' bench/gpu/train_models.sh | sed '1d;$d' >"$m/config.json"
  python3 -c 'import random, sys
w = [x.strip() for x in open(sys.argv[1]) if x.strip()[:1].isalpha()]
r = random.Random(0)
print("sentence\tlabel")
for i in range(512): print(" ".join(r.choice(w) for _ in range(160)) + f"\t{i % 2}")' models/default/vocab.txt >"$m/train.tsv"
  timeout "$t" "$pack/bin/loupe" profile --model "$m" --train "$m/train.tsv" --eval none --max-steps 8 --batch-size 32 \
    --max-seq-len 128 --device cuda --tf32 --output-dir "$m/runs" --run-id tf32 >"$out/profile_tf32.txt" 2>&1
  note "loupe profile --device cuda --tf32: exit $?"
  cp "$m/runs/tf32/summary.json" "$out/profile_tf32_summary.json" 2>/dev/null
  cp "$m"/runs/tf32/profiler/*.json.gz "$out/" 2>/dev/null
  rm -rf "$m"
fi
note "done"
