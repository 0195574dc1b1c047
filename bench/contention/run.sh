#!/usr/bin/env bash
# Issue 17, "threads that cope with a busy machine": batch-1 inference latency and a short
# training run under 0, 1 and 2 busy-looping processes that this script starts, for each
# OpenMP wait setting in SPINS, and PyTorch beside it when `import torch` works.
#
#   SPINS entries: "loupe"   nothing set: loupe's own bounded spin (LP_THREADS_SPIN)
#                  "libgomp" LP_SPIN=default: the runtime's default (~300,000 spins, ~3 ms)
#                  a number  GOMP_SPINCOUNT=<n>
#
# usage: bench/contention/run.sh [OUT_DIR]
#   env: LOUPE (build/loupe), MODEL (models/default), INFER_MODEL (MODEL), REPS (3),
#        SPINS ("loupe libgomp 0 1000 100000"), BUSY ("0 1 2"), TRAIN_STEPS (12)
# Prints one line per (busy, setting) with the median of REPS runs' p50 batch-1 ms and
# median training step ms, and writes OUT_DIR/results.tsv.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LOUPE=${LOUPE:-$ROOT/build/loupe}
MODEL=${MODEL:-$ROOT/models/default}
INFER_MODEL=${INFER_MODEL:-$MODEL}
REPS=${REPS:-3}
SPINS=${SPINS:-"loupe libgomp 0 1000 100000"}
BUSY=${BUSY:-"0 1 2"}
TRAIN_STEPS=${TRAIN_STEPS:-12}
OUT=${1:-$(mktemp -d /tmp/loupe-contention.XXXXXX)}
mkdir -p "$OUT"
HAVE_TORCH=0
if python3 -c "import torch" 2>/dev/null; then HAVE_TORCH=1; fi

pids=()
stop_busy() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); }
trap stop_busy EXIT

# median of numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print NR ? (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) : "nan"}'; }
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }

run_env() { # setting -> env assignments for `env`
    case "$1" in
        loupe) echo "LP_BENCH_SPIN_UNUSED=1" ;;
        libgomp) echo "LP_SPIN=default" ;;
        *) echo "GOMP_SPINCOUNT=$1" ;;
    esac
}

loupe_infer() { # setting rep -> p50 ms of batch 1
    local id="infer-$2-$RANDOM"
    env $(run_env "$1") "$LOUPE" bench --synthetic --seq-len 32 --batch-sizes 1 --warmup 5 --runs 30 \
        --skip-full-pass --skip-profiling --skip-plots --model "$INFER_MODEL" --output-dir "$OUT/runs" \
        --run-id "$id" --quiet >/dev/null 2>"$OUT/runs.err" || { cat "$OUT/runs.err" >&2; return 1; }
    jget "$OUT/runs/$id/baseline_metrics.json" \
        "d['batch_metrics'][0]['latency_per_batch_ms']['p50']"
}

loupe_train() { # setting rep -> median step ms and the summary's cpu_share
    local id="train-$2-$RANDOM"
    env $(run_env "$1") "$LOUPE" train --model "$MODEL" --eval none --max-steps "$TRAIN_STEPS" --batch-size 8 \
        --output-dir "$OUT/runs" --run-id "$id" --quiet >/dev/null 2>>"$OUT/train.err" || { tail -3 "$OUT/train.err" >&2; return 1; }
    jget "$OUT/runs/$id/summary.json" "'%g %.2f' % (d['step_ms']['median'], d['contention']['cpu_share'])"
}

torch_side() { # kind -> ms
    python3 "$(dirname "$0")/torch_side.py" --kind "$1" --model "$MODEL" --infer-model "$INFER_MODEL" --steps "$TRAIN_STEPS"
}

printf '# %s\n# load before: %s\n' "$("$LOUPE" peak 2>/dev/null | grep -m1 '^loupe peak:' || echo 'loupe peak: ?')" "$(cat /proc/loadavg)" | tee "$OUT/results.tsv"
printf '# cpu: %s, %s CPUs usable\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" "$(nproc)" | tee -a "$OUT/results.tsv"
printf 'busy\tsetting\tinfer_b1_p50_ms\ttrain_step_ms\ttrain_cpu_share\tload\n' | tee -a "$OUT/results.tsv"
for b in $BUSY; do
    stop_busy
    for ((i = 0; i < b; i++)); do sh -c 'while :; do :; done' & pids+=($!); done
    sleep 1
    for s in $SPINS; do
        inf=(); trn=(); shr=()
        for ((r = 0; r < REPS; r++)); do
            inf+=("$(loupe_infer "$s" "$r")")
            read -r t sh < <(loupe_train "$s" "$r")
            trn+=("$t"); shr+=("$sh")
        done
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$b" "loupe:$s" "$(printf '%s\n' "${inf[@]}" | median)" \
            "$(printf '%s\n' "${trn[@]}" | median)" "$(printf '%s\n' "${shr[@]}" | median)" \
            "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/results.tsv"
    done
    if [ "$HAVE_TORCH" = 1 ]; then
        printf '%s\t%s\t%s\t%s\t-\t%s\n' "$b" "pytorch" "$(torch_side infer)" "$(torch_side train)" \
            "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/results.tsv"
    fi
done
stop_busy
[ "$HAVE_TORCH" = 1 ] || echo "# PyTorch: not importable here (python3 -c 'import torch'); loupe only" | tee -a "$OUT/results.tsv"
echo "# results: $OUT/results.tsv"
