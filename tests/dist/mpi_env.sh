# Sourced by the mpi-labelled tests: lp_mpirun NP CMD... runs CMD as NP ranks on this machine,
# one thread each, oversubscribed (CI machines have fewer cores than ranks at times), allowed
# as root (containers). Skips (exit 77) when mpirun is absent or loupe was built without MPI.
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# shared memory between the ranks, no probing of network interfaces a container may not have;
# copy-in/copy-out rather than cross-process reads (CMA), which some containers forbid (the
# tests' messages are small; bench/distributed uses CMA)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
lp_mpirun() {
  local np=$1; shift
  mpirun -np "$np" --oversubscribe --bind-to none "$@"
}
