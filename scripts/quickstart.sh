#!/usr/bin/env bash
# Installs, builds, and runs loupe's main job on the bundled defaults: a short profiled
# fine-tuning run of models/default on data/sst2-mini. Arguments go to `loupe profile`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
LP_SKIP_PYTHON=1 scripts/bootstrap.sh
scripts/build.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT
./build/loupe profile "$@" | tee "$out"
run=$(sed -n 's/^run: //p' "$out")
echo
echo "quickstart: results in $run/"
echo "  summary.json, steps.csv, epoch_results.csv, config.json, tensorboard/"
echo "  profiler/: Kineto trace (Perfetto, TensorBoard, HTA), key_averages.txt, memory timeline"
echo "  next: ./build/loupe analyze $run/profiler/*.pt.trace.json.gz"
