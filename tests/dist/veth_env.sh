# Sourced (tests/dist/mpi_veth.sh, bench/distributed/run.sh --veth): two test hosts made of
# network namespaces joined by a veth pair, loopback only (nothing leaves the machine):
#   host a: namespace $LP_NS_A, 10.77.0.1/24      host b: namespace $LP_NS_B, 10.77.0.2/24
# Each launch into a host also gets its own UTS namespace, so the hosts have their own names
# (lp-host-a, lp-host-b) as two machines would. `lp_veth_mpirun NP CMD...` runs NP ranks over
# them on TCP: mpirun starts in host a with a hostfile of both addresses and reaches host b
# through a plm rsh agent that execs into b's namespace (the ssh of two real hosts), OpenMPI's
# out-of-band channel and its MPI transport (btl tcp,self: no shared memory) on the veth subnet
# alone. Rank 0 runs on host a, rank 1 on host b (slots 1 each; more ranks alternate).
# lp_veth_up exits 77 with the reason when namespaces cannot be made (not root, no CAP_NET_ADMIN,
# a container without them, no ip/unshare); lp_veth_down removes them (the veth goes with them).
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
LP_NS_A=lpA$$ LP_NS_B=lpB$$ LP_VETH_DIR=

lp_veth_up() {
  local why=
  if [ "$(id -u)" != 0 ]; then why="not root (creating network namespaces needs CAP_NET_ADMIN)"
  elif ! command -v ip >/dev/null 2>&1; then why="no ip command (apt-get install iproute2)"
  elif ! command -v unshare >/dev/null 2>&1; then why="no unshare command (util-linux)"
  elif ! ip netns add "$LP_NS_A" 2>/dev/null; then why="cannot create a network namespace (no CAP_NET_ADMIN: a container?)"
  elif ! ip netns add "$LP_NS_B" 2>/dev/null; then why="cannot create a second network namespace"
  elif ! ip link add "lpva$$" type veth peer name "lpvb$$" 2>/dev/null; then why="cannot create a veth pair"
  fi
  if [ -z "$why" ] && ! { ip link set "lpva$$" netns "$LP_NS_A" && ip link set "lpvb$$" netns "$LP_NS_B" &&
      ip -n "$LP_NS_A" addr add 10.77.0.1/24 dev "lpva$$" && ip -n "$LP_NS_B" addr add 10.77.0.2/24 dev "lpvb$$" &&
      ip -n "$LP_NS_A" link set lo up && ip -n "$LP_NS_B" link set lo up &&
      ip -n "$LP_NS_A" link set "lpva$$" up && ip -n "$LP_NS_B" link set "lpvb$$" up; } 2>/dev/null; then
    why="cannot configure the veth pair"
  fi
  if [ -n "$why" ]; then
    lp_veth_down
    echo "SKIP: $why"
    exit 77
  fi
  # also a test of unshare --uts inside a namespace (some sandboxes allow one, not the other)
  ip netns exec "$LP_NS_A" unshare --uts true 2>/dev/null || { lp_veth_down; echo "SKIP: unshare --uts refused"; exit 77; }
  LP_VETH_DIR=$(mktemp -d /tmp/lp_veth.XXXXXX)
  printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$LP_VETH_DIR/hosts"
  cat >"$LP_VETH_DIR/agent" <<EOF
#!/bin/sh
# plm rsh agent: "agent HOST COMMAND...", as ssh would run COMMAND on HOST
case "\$1" in
  10.77.0.1) ns=$LP_NS_A name=lp-host-a ;;
  10.77.0.2) ns=$LP_NS_B name=lp-host-b ;;
  *) echo "lp veth agent: unknown host \$1" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
EOF
  chmod +x "$LP_VETH_DIR/agent"
}

lp_veth_down() {
  ip netns del "$LP_NS_A" 2>/dev/null
  ip netns del "$LP_NS_B" 2>/dev/null
  ip link del "lpva$$" 2>/dev/null
  [ -n "$LP_VETH_DIR" ] && rm -rf "$LP_VETH_DIR"
  return 0
}

# lp_veth_mpirun NP CMD...: NP ranks of CMD over the two hosts, TCP on the veth only
lp_veth_mpirun() {
  local np=$1; shift
  ip netns exec "$LP_NS_A" unshare --uts sh -c 'hostname lp-host-a && exec "$@"' sh \
    env OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 OMPI_MCA_oob_tcp_if_include=10.77.0.0/24 \
    OMPI_MCA_plm_rsh_agent="$LP_VETH_DIR/agent" \
    mpirun -np "$np" --hostfile "$LP_VETH_DIR/hosts" --oversubscribe --bind-to none "$@"
}

# lp_veth_bytes: bytes received by host b's end of the veth so far
lp_veth_bytes() { ip -n "$LP_NS_B" -s -j link show "lpvb$$" | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['rx']['bytes'])"; }
