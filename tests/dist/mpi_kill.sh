#!/usr/bin/env bash
# A rank killed with kill -9 mid-run ends the whole job: mpirun notices the lost process
# (OpenMPI's default: errors are fatal, the job aborts), the surviving rank does not hang in
# its all-reduce, and the job exits non-zero within 60 s naming the killed process; the run's
# last checkpoint (written by rank 0 every 5 steps) stays loadable: a 1-process --resume from it
# trains on.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
. "$(dirname "$0")/mpi_env.sh"
T=$(mktemp -d /tmp/lp_mpi_kill.XXXXXX)
job=
cleanup() { # mpirun forwards SIGTERM to its ranks
  [ -n "$job" ] && pkill -TERM -P "$job" -x mpirun 2>/dev/null
  [ -n "$job" ] && wait "$job" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
lp_mpirun 2 "$L" train --max-steps 100000 --batch-size 8 --eval none --threads 1 --quiet --peak-gflops 100 \
  --checkpoint-every 5 --keep-checkpoints 0 --output-dir "$T" --run-id k >"$T/out" 2>&1 &
job=$!
# rank 1: the loupe of this job (its output folder on the command line) whose environment says
# OMPI_COMM_WORLD_RANK=1
victim=
for _ in $(seq 1 600); do
  for p in $(pgrep -f -- "--output-dir $T --run-id k" 2>/dev/null); do
    [ "$(basename "$(readlink "/proc/$p/exe" 2>/dev/null)")" = loupe ] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then victim=$p; fi
  done
  [ -n "$victim" ] && [ -d "$T/k/checkpoints/step-5" ] && break
  kill -0 "$job" 2>/dev/null || break # the job ended by itself (a build without MPI refuses)
  sleep 0.1
done
# a build without MPI refuses on every rank: its rank 1 may have been seen before it exited
if grep -q "built without MPI" "$T/out"; then echo "SKIP: this loupe was built without MPI"; exit 77; fi
if [ -z "$victim" ] || [ ! -d "$T/k/checkpoints/step-5" ]; then
  echo "FAIL: no rank 1 process or no step-5 checkpoint within 60 s"; cat "$T/out"; exit 1
fi
t0=$(date +%s.%N)
kill -9 "$victim"
for _ in $(seq 1 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$job" 2>/dev/null; then
  echo "FAIL: the job still runs 60 s after rank 1 was killed"; cat "$T/out"; exit 1
fi
wait "$job"; r=$?; job=
secs=$(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$t0")
if [ $r -eq 0 ] || ! grep -qi "signal 9\|killed" "$T/out"; then
  echo "FAIL: after kill -9 of rank 1 the job exited $r without naming the killed process"; cat "$T/out"; exit 1
fi
echo "ok: kill -9 of rank 1 ended the job in ${secs} s (exit $r): $(grep -i -m1 'signal 9\|killed' "$T/out" | sed 's/^ *//')"
ck=$(ls -d "$T"/k/checkpoints/step-* | sort -t- -k2 -n | tail -1)
"$L" train --batch-size 8 --eval none --threads 1 --quiet --peak-gflops 100 --max-steps $(( ${ck##*-} + 2 )) \
  --output-dir "$T" --run-id resumed --resume "$ck" >"$T/res.out" 2>&1 ||
  { echo "FAIL: resume from $ck after the kill"; cat "$T/res.out"; exit 1; }
echo "ok: the last checkpoint ($(basename "$ck")) resumes in one process"
