#!/usr/bin/env bash
# test_dist as two MPI ranks: the reducer's sums and the collectives over a real world of 2.
set -u
. "$(dirname "$0")/mpi_env.sh"
lp_mpirun 2 "$1"
