#!/usr/bin/env bash
# Under mpirun every rank parses the same command line and checks the same config: the job
# prints a usage or config error once (rank 0's), not once per rank, and every rank exits with
# the same code (2, a usage error), which mpirun returns:
#  - an unknown option (refused while parsing, before the ranks connect);
#  - --help (printed once);
#  - --batch-size 7 on 2 ranks (refused by the trainer's config check on every rank, after the
#    ranks connect: the other ranks keep quiet rather than print "another rank stopped").
# Skips (77) without mpirun or an MPI build.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
. "$(dirname "$0")/mpi_env.sh"
T=$(mktemp -d /tmp/lp_mpi_errors.XXXXXX)
trap 'rm -rf "$T"' EXIT
rc=0
fail() { echo "FAIL: $*"; rc=1; }
# once NAME WANT_RC PATTERN ARGS...: 2 ranks of loupe ARGS exit WANT_RC with PATTERN in exactly one line
once() {
  local name=$1 want=$2 pat=$3; shift 3
  lp_mpirun 2 "$L" "$@" >"$T/$name.out" 2>&1
  local r=$? n
  n=$(grep -c -- "$pat" "$T/$name.out")
  if grep -q "built without MPI" "$T/$name.out"; then echo "SKIP: this loupe was built without MPI"; exit 77; fi
  if [ "$r" != "$want" ] || [ "$n" != 1 ] || grep -q "another rank stopped" "$T/$name.out"; then
    fail "$name: exit $r (want $want), '$pat' printed $n times (want 1)"; cat "$T/$name.out"
  else
    echo "ok: $name: printed once, exit $r"
  fi
}
once unknown-option 2 "unknown or incomplete option" train --model "$S/models/default" --no-such-flag
once help 0 "Exit status:" train --help
once batch-size 2 "is the global batch and must divide by the 2 ranks" train --model "$S/models/default" \
  --batch-size 7 --max-steps 1 --eval none --threads 1 --quiet --output-dir "$T/bad" --run-id bad
[ -e "$T/bad" ] && fail "the refused run created its output folder"
exit $rc
