#!/usr/bin/env bash
# test_dist as two MPI ranks: the reducer's sums (all-reduce, and ZeRO-1's reduce-scatter and
# all-gather) and the collectives over a real world of 2, with the reducer's progress thread (one
# operation in flight; then 8 in flight, spinning), on the main thread alone
# (LP_DIST_PROGRESS=layer), as three ranks (shards of three, sums of three in rank order), and a
# bad LP_DIST_PROGRESS refused by every rank.
set -u
. "$(dirname "$0")/mpi_env.sh"
lp_mpirun 2 "$1" || exit $? # 77: a build without MPI skips
LP_DIST_INFLIGHT=8 LP_DIST_POLL_US=0 lp_mpirun 2 -x LP_DIST_INFLIGHT -x LP_DIST_POLL_US "$1" || exit $?
LP_DIST_PROGRESS=layer lp_mpirun 2 -x LP_DIST_PROGRESS "$1" || exit $?
lp_mpirun 3 "$1" || exit $?
out=$(LP_DIST_PROGRESS=bogus lp_mpirun 2 -x LP_DIST_PROGRESS "$1" 2>&1)
r=$?
if [ $r -ne 0 ] || [ "$(grep -c "LP_DIST_PROGRESS=bogus: expected thread or layer" <<<"$out")" != 2 ]; then
  echo "FAIL: LP_DIST_PROGRESS=bogus was not refused"; echo "$out"; exit 1
fi
echo "ok: LP_DIST_PROGRESS=bogus refused by both ranks"
