#!/usr/bin/env bash
# Stopping a 2-rank run from outside, as a user would, leaves one consistent checkpoint:
#  - Ctrl-C: SIGINT to mpirun. OpenMPI 4.1's mpirun sends the ranks SIGCONT at once, SIGTERM
#    odls_base_sigkill_timeout seconds later and SIGKILL as many seconds after that (5 here:
#    OMPI_MCA_odls_base_sigkill_timeout; the default 1 s is short on a loaded machine). On
#    SIGTERM the ranks agree (an all-reduced flag at the step boundary) on the step to stop at,
#    rank 0 writes that step's checkpoint and the run files (summary.json interrupted) and every
#    rank exits 130; rank 0 prints "interrupted at step S" once;
#  - SIGUSR1 to mpirun (forwarded to the ranks at once): the same stop, and mpirun exits 130.
# Each time the checkpoint of step S is the run's last, steps.csv has S steps, and resuming it
# on 2 ranks reproduces the uninterrupted curve (a 1-process run, constant LR so the step budget
# does not matter) to step S+3 within 1e-5 (f32 reduction order, as mpi_train.sh), with dropout
# 0.1 (models/default): the dropout stream is saved and resumed with the rest.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
. "$(dirname "$0")/mpi_env.sh"
T=$(mktemp -d /tmp/lp_mpi_sigint.XXXXXX)
job=
cleanup() {
  [ -n "$job" ] && kill -TERM "$job" 2>/dev/null && wait "$job" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
rc=0
fail() { echo "FAIL: $*"; rc=1; }
common=(--model "$S/models/default" --batch-size 8 --eval none --threads 1 --quiet --peak-gflops 100 --lr 1e-3
  --lr-schedule constant --warmup-steps 0)
export OMPI_MCA_odls_base_sigkill_timeout=5

# stop NAME SIGNAL: a 2-rank run stopped by SIGNAL to mpirun once its step-3 checkpoint exists
stop() {
  local name=$1 sig=$2
  lp_mpirun 2 "$L" train "${common[@]}" --max-steps 100000 --checkpoint-every 3 --keep-checkpoints 0 \
    --output-dir "$T/two" --run-id "$name" >"$T/$name.out" 2>&1 &
  job=$!
  local mp=
  for _ in $(seq 1 600); do
    mp=$(pgrep -P "$job" -x mpirun 2>/dev/null || true)
    [ -z "$mp" ] && [ "$(basename "$(readlink "/proc/$job/exe" 2>/dev/null)")" = mpirun ] && mp=$job
    [ -n "$mp" ] && [ -d "$T/two/$name/checkpoints/step-3" ] && break
    grep -q "built without MPI" "$T/$name.out" 2>/dev/null && { echo "SKIP: this loupe was built without MPI"; exit 77; }
    sleep 0.1
  done
  [ -n "$mp" ] && [ -d "$T/two/$name/checkpoints/step-3" ] || { fail "$name: no step-3 checkpoint within 60 s"; cat "$T/$name.out"; return 1; }
  kill "-$sig" "$mp"
  for _ in $(seq 1 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then fail "$name: the job still runs 30 s after SIG$sig"; cat "$T/$name.out"; return 1; fi
  wait "$job"; STOP_RC=$?; job=
  return 0
}

# check NAME: the interrupted run's last checkpoint is the step it stopped at; resumed, the curve
check() {
  local name=$1 n s last
  n=$(grep -c "interrupted at step" "$T/$name.out")
  s=$(grep -o "interrupted at step [0-9]*" "$T/$name.out" | head -1 | grep -o "[0-9]*$")
  last=$(ls -d "$T/two/$name"/checkpoints/step-* 2>/dev/null | sort -t- -k2 -n | tail -1)
  if [ "$n" != 1 ] || [ -z "$s" ] || [ "$last" != "$T/two/$name/checkpoints/step-$s" ]; then
    fail "$name: 'interrupted at step' printed $n times (want 1), step '$s', last checkpoint $(basename "$last")"
    cat "$T/$name.out"; return 1
  fi
  python3 - "$T/two/$name" "$s" <<'PY' || { rc=1; return 1; }
import csv, json, sys
d, s = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(d + "/steps.csv")))
summ = json.load(open(d + "/summary.json"))
if len(rows) != s or not summ.get("interrupted"):
    print(f"FAIL: {d}: {len(rows)} steps in steps.csv for a stop at step {s}, interrupted {summ.get('interrupted')}"); sys.exit(1)
PY
  "$L" train "${common[@]}" --max-steps $((s + 3)) --output-dir "$T/one" --run-id "$name-ref" >"$T/$name-ref.out" 2>&1 ||
    { fail "$name: reference run"; cat "$T/$name-ref.out"; return 1; }
  lp_mpirun 2 "$L" train "${common[@]}" --max-steps $((s + 3)) --output-dir "$T/two" --run-id "$name-res" \
    --resume "$last" >"$T/$name-res.out" 2>&1 || { fail "$name: resume from step-$s"; cat "$T/$name-res.out"; return 1; }
  python3 - "$T/one/$name-ref" "$T/two/$name-res" "$s" "$name" "$STOP_RC" <<'PY' || rc=1
import csv, sys
a = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
b = list(csv.DictReader(open(sys.argv[2] + "/steps.csv")))
s, name = int(sys.argv[3]), sys.argv[4]
if len(a) != s + 3 or len(b) != s + 3:
    print(f"FAIL: {name}: {len(a)} reference and {len(b)} resumed steps, wanted {s + 3}"); sys.exit(1)
worst = max(abs(float(x["loss"]) - float(y["loss"])) for x, y in zip(a, b))
if worst > 1e-5:
    print(f"FAIL: {name}: resumed curve differs by {worst:.2e} from the uninterrupted one"); sys.exit(1)
print(f"ok: {name}: stopped at step {s} (mpirun exit {sys.argv[5]}), checkpoint step-{s}; resumed on 2 ranks it "
      f"reproduces the uninterrupted curve to step {s + 3} (largest difference {worst:.1e})")
PY
}

if stop sigint INT; then
  [ "$STOP_RC" != 0 ] || fail "sigint: mpirun exited 0"
  check sigint
fi
if stop usr1 USR1; then
  [ "$STOP_RC" = 130 ] || { fail "usr1: mpirun exited $STOP_RC, want 130"; cat "$T/usr1.out"; }
  check usr1
fi
exit $rc
