#!/usr/bin/env bash
# The README's first command on a fresh Debian 12, timed: a debootstrapped bookworm root
# (minbase plus git and ca-certificates, what a cloud image has for `git clone`; made once at
# $BASE and kept), copied to $ROOT for each run, this checkout's HEAD cloned into it, then
# `time scripts/quickstart.sh` in a chroot with /proc, /sys, /dev bound in; the host's load
# average is sampled every 10 s beside the log. Root only; unmounts whatever it mounted.
#   bench/quickstart/fresh_debian.sh LOG
#   BASE (default /work/fresh-root.base), ROOT (default /work/fresh-root),
#   MIRROR (default http://deb.debian.org/debian)
set -euo pipefail
log=$(realpath -m "${1:?usage: fresh_debian.sh LOG}")
src=$(cd "$(dirname "$0")/../.." && pwd)
BASE=${BASE:-/work/fresh-root.base} ROOT=${ROOT:-/work/fresh-root}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "fresh_debian: needs root (debootstrap, mount, chroot)" >&2; exit 1; }
mounted() { grep -q " $1[/ ]" /proc/mounts; }

if [ ! -d "$BASE" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  debootstrap --variant=minbase --include=git,ca-certificates bookworm "$BASE" "$MIRROR"
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
    "$MIRROR" "$MIRROR" "$MIRROR" >"$BASE/etc/apt/sources.list"
  # a fresh image: no cached packages, no package lists
  chroot "$BASE" apt-get clean
  rm -rf "$BASE"/var/lib/apt/lists/* && mkdir -p "$BASE/var/lib/apt/lists/partial"
fi

# never delete a root that still has the host's /dev bound in
if mounted "$ROOT"; then echo "fresh_debian: something is mounted under $ROOT" >&2; exit 1; fi
rm -rf --one-file-system "$ROOT"
cp -a "$BASE" "$ROOT"
git clone -q "$src" "$ROOT/root/loupe"

sampler=""
cleanup() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  for m in dev/shm dev/pts dev sys proc; do
    mountpoint -q "$ROOT/$m" && { umount "$ROOT/$m" || umount -l "$ROOT/$m"; }
  done
  if mounted "$ROOT"; then echo "fresh_debian: still mounted under $ROOT" >&2; fi
}
trap cleanup EXIT
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
mount -t proc proc "$ROOT/proc"
mount --bind /sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
mount --bind /dev/shm "$ROOT/dev/shm"
# a network behind a TLS-intercepting proxy: the chroot trusts the host's extra CAs (a machine
# on the open internet needs none)
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  chroot "$ROOT" update-ca-certificates >/dev/null 2>&1
fi

(while true; do echo "load $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 10; done) >"$log.load" &
sampler=$!
{
  echo "start $(date -u +%FT%TZ), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), nproc $(nproc)," \
    "load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$ROOT/root/loupe" log --oneline -1)"
  chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c 'cd /root/loupe && TIMEFORMAT="TOTAL scripts/quickstart.sh: %R s wall, %U s user, %S s sys"
             time scripts/quickstart.sh'
  echo "end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$log" 2>&1
