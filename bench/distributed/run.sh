#!/usr/bin/env bash
# bench/distributed: data-parallel step time of loupe train at 1 and 2 MPI ranks (one thread
# each) and one rank with two threads, for full fine-tuning and LoRA, the same global batch in
# every run; then one profiled 2-rank run per method for the communication share and its
# overlap with compute (loupe analyze's ranks.csv). Optionally (--torch) PyTorch DDP (gloo) with
# the same model, batch and threads, 1 and 2 processes.
#
#   bench/distributed/run.sh [--loupe build/loupe] [--steps 30] [--batch 16] [--shape small|distilbert] [--torch]
#                            [--veth] [--progress thread|layer] [--zero 0|1]
#
# --zero 0|1: the 2-rank loupe runs' --zero (1: ZeRO-1, gradients reduce-scattered, AdamW on each
# rank's shard, parameters all-gathered; 0: all-reduce); by default loupe's own (1 for full
# fine-tuning, 0 for LoRA). The 1-rank runs are the same either way.
#
# --progress: how the gradient all-reduces progress during backward (LP_DIST_PROGRESS, see
# include/loupe/dist.h): thread (default: the reducer's progress thread) or layer (the main
# thread tests them once per layer, the behaviour before the progress thread).
#
# --veth: the 2-rank runs (loupe's and DDP's) go over TCP between two network namespaces joined
# by a veth pair, one rank in each (tests/dist/veth_env.sh: root, iproute2), instead of shared
# memory: the issue's "across machines over TCP" on one machine.
#
# small: the bundled models/default (4 x 256, FFN 1024); distilbert: DistilBERT's layer shapes
# (6 x 768, 12 heads, FFN 3072) on the bundled 431-token vocabulary, drawn from a seed. Figures
# are medians of the steps after the first two. Prints a table; nothing is asserted.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
L=$root/build/loupe steps=30 batch=16 shape=small torch=0 veth=0 progress=thread
zero=()
while [ $# -gt 0 ]; do
  case $1 in
    --loupe) L=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --batch) batch=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;; --torch) torch=1; shift ;; --veth) veth=1; shift ;;
    --progress) progress=$2; shift 2 ;; --zero) zero=(--zero "$2"); shift 2 ;; *) echo "unknown $1"; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin)"; exit 2; }
# shared memory with single-copy (CMA) transfers: 3x less all-reduce time than copy-in/copy-out here
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LP_DIST_PROGRESS=$progress
T=$(mktemp -d /tmp/lp_bench_dist.XXXXXX)
if [ "$veth" = 1 ]; then
  . "$root/tests/dist/veth_env.sh"
  trap 'lp_veth_down; rm -rf "$T"' EXIT
  lp_veth_up || exit 2
  mpi2() { lp_veth_mpirun 2 -x LP_DIST_PROGRESS "$@"; }
  link="TCP over a veth pair between two network namespaces"
else
  trap 'rm -rf "$T"' EXIT
  mpi2() { OMPI_MCA_btl=self,vader mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x LP_DIST_PROGRESS "$@"; }
  link="shared memory (vader, CMA)"
fi
echo "2 ranks over $link, all-reduce progress: $progress, ${zero[*]:-default --zero}"
M=$T/model
mkdir -p "$M"
cp "$root"/models/default/* "$M/"
python3 - "$M/config.json" "$shape" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["hidden_dropout_prob"] = 0.0; c["attention_probs_dropout_prob"] = 0.0
if sys.argv[2] == "distilbert":
    c.update(hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072)
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
"$L" peak --threads 1 2>/dev/null | grep -i "isa\|cpu" | head -2
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
common=(--model "$M" --max-steps "$steps" --batch-size "$batch" --eval none --quiet --peak-gflops 100 --lr 1e-4)
med() { python3 -c "import csv,statistics,sys; r=list(csv.DictReader(open(sys.argv[1])))[2:]; print(f'{statistics.median(float(x[\"step_ms\"]) for x in r):.1f}')" "$1/steps.csv"; }
printf "%-6s %-22s %10s %9s\n" method run step_ms samples/s
for method in full lora; do
  "$L" train "${common[@]}" --method "$method" --threads 1 --output-dir "$T/r" --run-id "$method-1r1t" >/dev/null 2>&1
  mpi2 "$L" train "${common[@]}" --method "$method" ${zero[@]+"${zero[@]}"} \
    --threads 1 --output-dir "$T/r" --run-id "$method-2r1t" >/dev/null 2>&1
  "$L" train "${common[@]}" --method "$method" --threads 2 --output-dir "$T/r" --run-id "$method-1r2t" >/dev/null 2>&1
  for run in 1r1t 2r1t 1r2t; do
    d=$T/r/$method-$run
    [ -f "$d/steps.csv" ] || { printf "%-6s %-22s failed\n" "$method" "$run"; continue; }
    ms=$(med "$d")
    printf "%-6s %-22s %10s %9.1f\n" "$method" "$run" "$ms" "$(python3 -c "print($batch*1000/$ms)")"
  done
  a=$(med "$T/r/$method-1r1t"); b=$(med "$T/r/$method-2r1t")
  python3 -c "a,b=$a,$b; print(f'{\"$method\":6s} scaling 1 -> 2 ranks: {a/b:.2f}x, efficiency {100*a/(2*b):.0f} %')"
  mpi2 "$L" profile "${common[@]}" --method "$method" ${zero[@]+"${zero[@]}"} --threads 1 \
    --profile-wait 2 --profile-warmup 1 --profile-active 5 --output-dir "$T/r" --run-id "$method-prof" >/dev/null 2>&1
  "$L" analyze "$T/r/$method-prof/profiler" --csv "$T/an-$method" >/dev/null 2>&1 &&
    python3 - "$T/an-$method/ranks.csv" "$method" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    span, comm, ov = int(r["span_ns"]), int(r["comm_ns"]), int(r["overlap_ns"])
    print(f"{sys.argv[2]:6s} rank {r['rank']}: communication {100*comm/span:.1f} % of the span, "
          f"{100*ov/max(comm,1):.0f} % of it overlapped with compute, wait {int(r['comm_wait_ns'])/1e6:.1f} ms")
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$torch" = 1 ] && [ "$veth" = 0 ]; then
  python3 "$(dirname "$0")/torch_ddp.py" --config "$M/config.json" --steps "$steps" --batch "$batch"
elif [ "$torch" = 1 ]; then # one process per namespace, gloo on the veth
  py=$(dirname "$0")/torch_ddp.py
  for method in full lora; do
    one=$(python3 "$py" --config "$M/config.json" --steps "$steps" --batch "$batch" --method "$method" --world 1 \
      2>>"$T/torch.err")
    ip netns exec "$LP_NS_B" env GLOO_SOCKET_IFNAME="lpvb$$" python3 "$py" --config "$M/config.json" --steps "$steps" \
      --batch "$batch" --method "$method" --world 2 --rank 1 --master 10.77.0.1 >/dev/null 2>>"$T/torch.err" &
    two=$(ip netns exec "$LP_NS_A" env GLOO_SOCKET_IFNAME="lpva$$" python3 "$py" --config "$M/config.json" \
      --steps "$steps" --batch "$batch" --method "$method" --world 2 --rank 0 --master 10.77.0.1 2>>"$T/torch.err")
    wait
    python3 -c "a,b=$one,$two; print(f'torch  {\"$method\":5s} 1r1t (no DDP) {a:10.1f} {$batch*1000/a:9.1f}\ntorch  {\"$method\":5s} 2r1t DDP gloo, veth {b:10.1f} {$batch*1000/b:9.1f}\ntorch  {\"$method\":5s} scaling 1 -> 2 processes: {a/b:.2f}x, efficiency {100*a/(2*b):.0f} %')"
  done
fi
