#!/usr/bin/env bash
# Data-parallel training across two test hosts over TCP: two network namespaces joined by a
# veth pair, each rank on its own host (tests/dist/veth_env.sh: mpirun on host a reaches host b
# through an rsh agent; OpenMPI's TCP transport on the veth subnet only, no shared memory).
#  - the same equality as the shared-memory test (mpi_train.sh), all-reduce (--zero 0): models/default as bundled
#    (dropout 0.1 on embeddings, attention probabilities, hidden states, classifier), full
#    fine-tuning with --grad-accum 2: per-step loss of 2 ranks within 1e-5 of one process over
#    20 steps (reduction order and the shards' GEMM blocking: f32 rounding carried by AdamW;
#    dropout draws each global row's mask on whichever rank holds it). The gradients crossed
#    the veth: host b received at least half the gradient bytes per step (a 2-rank all-reduce
#    moves about that much each way);
#  - --zero 1 (ZeRO-1: reduce-scatter, AdamW on each rank's shard, all-gather) over the same
#    link: the same equality, and as many bytes into host b per step (reduce-scatter + all-gather
#    move what an all-reduce does);
#  - kill -9 of the rank on host b mid-run of --zero 1 (checkpoints every 5 steps: rank 0
#    gathers the optimizer shards) ends the job within 60 s, non-zero, mpirun naming the killed
#    process; resuming the last checkpoint over the two hosts again (--zero 1: each rank loads
#    its shard) reproduces the uninterrupted 1-process curve (within 1e-5) to step 20.
# Skips (77) with the reason where namespaces cannot be made (not root, no CAP_NET_ADMIN, a
# container) or this loupe has no MPI.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
. "$(dirname "$0")/veth_env.sh"
T=$(mktemp -d /tmp/lp_mpi_veth.XXXXXX)
job=
cleanup() {
  [ -n "$job" ] && kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null
  lp_veth_down
  rm -rf "$T"
}
trap cleanup EXIT
lp_veth_up
rc=0
fail() { echo "FAIL: $*"; rc=1; }
# constant LR: a run's curve does not depend on its step budget (the killed run has a large one)
common=(--model "$S/models/default" --batch-size 8 --grad-accum 2 --eval none --threads 1 --quiet --peak-gflops 100
  --lr 1e-3 --lr-schedule constant --warmup-steps 0)

lp_veth_mpirun 2 "$L" train "${common[@]}" --max-steps 1 --output-dir "$T/two" --run-id probe >"$T/probe.out" 2>&1
if grep -q "built without MPI" "$T/probe.out"; then echo "SKIP: this loupe was built without MPI"; exit 77; fi
[ -f "$T/two/probe/steps.csv" ] || { echo "FAIL: 2-rank probe run over the veth"; cat "$T/probe.out"; exit 1; }

"$L" train "${common[@]}" --max-steps 20 --output-dir "$T/one" --run-id ref >"$T/ref.out" 2>&1 ||
  { echo "FAIL: 1-process run"; cat "$T/ref.out"; exit 1; }
b0=$(lp_veth_bytes)
lp_veth_mpirun 2 "$L" train "${common[@]}" --zero 0 --max-steps 20 --output-dir "$T/two" --run-id eq >"$T/eq.out" 2>&1 ||
  { echo "FAIL: 2-rank run over the veth"; cat "$T/eq.out"; exit 1; }
b1=$(lp_veth_bytes)
# compare A B FIRST: steps FIRST..20 of B's steps.csv against A's, 1e-5 absolute
compare() {
  python3 - "$1" "$2" "$3" <<'PY'
import csv, sys
a = {int(r["step"]): r for r in csv.DictReader(open(sys.argv[1] + "/steps.csv"))}
b = {int(r["step"]): r for r in csv.DictReader(open(sys.argv[2] + "/steps.csv"))}
first = int(sys.argv[3])
if sorted(a)[-1] != 20 or sorted(b)[-1] != 20 or any(s not in b for s in range(first, 21)):
    print(f"FAIL: steps {sorted(a)[0]}..{sorted(a)[-1]} vs {sorted(b)[0]}..{sorted(b)[-1]}"); sys.exit(1)
worst = 0.0
for s in range(first, 21):
    d = abs(float(a[s]["loss"]) - float(b[s]["loss"]))
    worst = max(worst, d)
    if d > 1e-5 or a[s]["samples"] != b[s]["samples"]:
        print(f"FAIL: step {s}: loss {a[s]['loss']} vs {b[s]['loss']}, samples {a[s]['samples']} vs {b[s]['samples']}")
        sys.exit(1)
print(f"{worst:.2e}")
PY
}
ar_mib=$(( (b1 - b0) / 1048576 ))
bytes=$(python3 -c "import json; print(json.load(open('$T/two/eq/distributed.json'))['optimizer_state_bytes_unsharded'] // 2)")
if w=$(compare "$T/one/ref" "$T/two/eq" 1); then
  if [ $((b1 - b0)) -lt $((20 * bytes / 2)) ]; then
    fail "host b received $((b1 - b0)) bytes over the veth in 20 steps, less than half of 20 x $bytes gradient bytes"
  else
    echo "ok: 2 ranks on two hosts over TCP == 1 process, dropout 0.1, grad-accum 2 (20 steps, largest loss difference $w; $(( (b1 - b0) / 1048576 )) MiB into host b)"
  fi
else
  fail "2 ranks over the veth vs 1 process: $w"
fi

# ---- ZeRO-1 over the veth: the same curve, the same bytes
b0=$(lp_veth_bytes)
lp_veth_mpirun 2 "$L" train "${common[@]}" --zero 1 --max-steps 20 --output-dir "$T/two" --run-id zero >"$T/zero.out" 2>&1 ||
  { echo "FAIL: 2-rank --zero 1 run over the veth"; cat "$T/zero.out"; exit 1; }
b2=$(lp_veth_bytes)
if w=$(compare "$T/one/ref" "$T/two/zero" 1); then
  if [ $((b2 - b0)) -lt $((20 * bytes / 2)) ]; then
    fail "--zero 1: host b received $((b2 - b0)) bytes over the veth in 20 steps, less than half of 20 x $bytes gradient bytes"
  else
    echo "ok: --zero 1 on two hosts over TCP == 1 process (20 steps, largest loss difference $w; $(( (b2 - b0) / 1048576 )) MiB into host b, $ar_mib MiB with all-reduces)"
  fi
else
  fail "--zero 1 on 2 ranks over the veth vs 1 process: $w"
fi

# ---- kill -9 of the rank on host b (ZeRO-1: the checkpoint gathers the shards)
lp_veth_mpirun 2 "$L" train "${common[@]}" --zero 1 --max-steps 100000 --checkpoint-every 5 --keep-checkpoints 0 \
  --output-dir "$T/two" --run-id k >"$T/k.out" 2>&1 &
job=$!
victim=
for _ in $(seq 1 600); do
  for p in $(pgrep -f -- "--output-dir $T/two --run-id k" 2>/dev/null); do
    [ "$(basename "$(readlink "/proc/$p/exe" 2>/dev/null)")" = loupe ] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
  done
  [ -n "$victim" ] && [ -d "$T/two/k/checkpoints/step-5" ] && break
  sleep 0.1
done
[ -n "$victim" ] && [ -d "$T/two/k/checkpoints/step-5" ] || { fail "no rank 1 or no step-5 checkpoint within 60 s"; cat "$T/k.out"; exit 1; }
ns=$(ip netns identify "$victim" 2>/dev/null)
[ "$ns" = "$LP_NS_B" ] || fail "rank 1 (pid $victim) runs in namespace '$ns', not host b's $LP_NS_B"
t0=$(date +%s.%N)
kill -9 "$victim"
for _ in $(seq 1 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$job" 2>/dev/null; then fail "the job still runs 60 s after rank 1 was killed"; cat "$T/k.out"; exit 1; fi
wait "$job"; r=$?; job=
secs=$(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$t0")
if [ $r -eq 0 ] || ! grep -qi "signal 9\|killed" "$T/k.out"; then
  fail "after kill -9 of rank 1 the job exited $r without naming the killed process"; cat "$T/k.out"
else
  echo "ok: kill -9 of rank 1 on host b ended the job in ${secs} s (exit $r): $(grep -i -m1 'signal 9\|killed' "$T/k.out" | sed 's/^ *//')"
fi
ck=$(ls -d "$T"/two/k/checkpoints/step-* | sort -t- -k2 -n | tail -1)
n=${ck##*-}
if [ "$n" -ge 20 ]; then
  echo "note: the job passed step 20 before the kill; resuming from step-15 instead"; ck=$T/two/k/checkpoints/step-15; n=15
fi
lp_veth_mpirun 2 "$L" train "${common[@]}" --zero 1 --max-steps 20 --output-dir "$T/two" --run-id resumed --resume "$ck" \
  >"$T/res.out" 2>&1 || { fail "resume from $(basename "$ck") over the veth"; cat "$T/res.out"; }
if w=$(compare "$T/one/ref" "$T/two/resumed" $((n + 1))); then
  echo "ok: $(basename "$ck") resumed on two hosts reproduces the uninterrupted curve (steps $((n + 1))-20, largest difference $w)"
else
  fail "resumed curve: $w"
fi
exit $rc
