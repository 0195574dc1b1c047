#!/usr/bin/env bash
# The CUDA checks, run ON a GPU machine from the repository root, on binaries built
# elsewhere and packed by scripts/gpu-pack.sh: nvidia-smi, every CUDA test binary
# (test_cuda*: the op tables against the CPU reference, with per-case errors and timings), and
# tests/cuda/*.sh (the engine on the GPU, with the pack's loupe), bench/gpu/train_models.sh
# (GPU_CHECK_BENCH=0 skips it) and `loupe peak --device cuda`. Logs go to OUT_DIR (default $OUT, else gpu-logs): summary.txt,
# one <test>.log per test binary, peak.txt. Exit status: 0 when every test passed (a skip,
# exit 77, counts as a failure here: on a GPU machine nothing should skip).
# Each test binary may run GPU_CHECK_TIMEOUT seconds (default 240).
# Usage: scripts/gpu-check.sh PACK_DIR|PACK.tar.gz [OUT_DIR]
set -uo pipefail
pack=${1:?usage: scripts/gpu-check.sh PACK_DIR|PACK.tar.gz [OUT_DIR]}
out=${2:-${OUT:-gpu-logs}}
mkdir -p "$out"
if [ -f "$pack" ]; then # the tarball, unpacked in a temporary folder
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  tar -C "$tmp" -xzf "$pack" || { echo "gpu-check: cannot unpack $pack" >&2; exit 1; }
  pack=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
fi
[ -d "$pack/bin" ] || { echo "gpu-check: $pack has no bin/ (make it with scripts/gpu-pack.sh)" >&2; exit 1; }
pack=$(cd "$pack" && pwd)
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# the CUDA libraries: the pack's, the toolkit's, and those of pip's nvidia-* wheels
libs="$pack/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib; do
  [ -d "$d" ] && libs="$libs:$d"
done
if command -v python3 >/dev/null; then
  py=$(python3 -c 'import glob, os, sys
print(":".join(sorted({d for p in sys.path if os.path.isdir(p) for d in glob.glob(os.path.join(p, "nvidia", "*", "lib"))})))' 2>/dev/null)
  [ -n "$py" ] && libs="$libs:$py"
fi
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LP_SOURCE_DIR=$PWD

say "== gpu-check $(date -u +%FT%TZ) on $(hostname)"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
say "== nvidia-smi"
nvidia-smi 2>&1 | tee -a "$summary" || say "(nvidia-smi failed)"

fail=0
# check NAME LOG GREP CMD...: runs CMD (GPU_CHECK_TIMEOUT seconds at most) into LOG, says how it
# ended (a skip fails here too; with the op tables' " PASS "/" FAIL " lines, their counts) and
# copies LOG's lines matching GREP into the summary
check() {
  local name=$1 log=$2 pat=$3; shift 3
  local start rc secs st counts=""
  start=$(date +%s.%N)
  timeout "${GPU_CHECK_TIMEOUT:-240}" "$@" >"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) st=PASS ;; 77) st="SKIPPED ($(grep -m 1 -i skip "$log" || head -n 1 "$log"))"; fail=1 ;;
    124) st="TIMEOUT"; fail=1 ;; *) st="FAIL (exit $rc)"; fail=1 ;;
  esac
  grep -q ' PASS \| FAIL ' "$log" && counts="; $(grep -c ' PASS ' "$log") PASS, $(grep -c ' FAIL ' "$log") FAIL lines"
  say "== $name: $st in ${secs}s$counts"
  grep -E "$pat" "$log" | head -n 30 | tee -a "$summary"
}

# every CUDA test binary: the op tables against the CPU reference
for t in "$pack"/bin/test_cuda*; do
  [ -x "$t" ] && check "$(basename "$t")" "$out/$(basename "$t").log" ' FAIL |FATAL|worst element|NaN at' "$t"
done

# the engine on the GPU: every tests/cuda/*.sh (loupe eval / train --device cuda against cpu)
# with the pack's loupe, from the repository root (their models and data)
for t in tests/cuda/*.sh; do
  [ -f "$t" ] && LOUPE="$pack/bin/loupe" check "$(basename "$t" .sh)" "$out/$(basename "$t" .sh).log" \
    'FAIL|worst|losses|accuracy|summary:' bash "$t"
done

# loupe train --device cuda on the DistilBERT- and Qwen2.5-0.5B-shaped workloads
# (bench/gpu/train_models.sh: one JSON line per config in OUT/train_models.jsonl; a failed
# config's error is in train_models.log); GPU_CHECK_BENCH=0 skips it
if [ "${GPU_CHECK_BENCH:-1}" != 0 ] && [ -f bench/gpu/train_models.sh ]; then
  say "== bench/gpu/train_models.sh"
  LOUPE="$pack/bin/loupe" timeout "${GPU_CHECK_TIMEOUT:-240}" bash bench/gpu/train_models.sh "$out/train_models.jsonl" \
    >"$out/train_models.log" 2>&1 || { fail=1; say "(bench/gpu/train_models.sh failed: see train_models.log)"; }
  tee -a "$summary" <"$out/train_models.log" >/dev/null
  python3 - "$out/train_models.jsonl" <<'PY' 2>/dev/null | tee -a "$summary"
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if "error" in o:
        print(o["config"], "ERROR", o["error"][-200:]); continue
    mfu = o["mfu_vs_bf16_dense_peak"]
    print(f'{o["config"]:24s} {o["samples_per_s"]:9.1f} samples/s  step {o["step_ms_median"]:7.2f} ms  '
          f'peak alloc {o["peak_allocated_bytes"] / 2**20:8.1f} MiB  reserved {o["peak_reserved_bytes"] / 2**20:8.1f} MiB  '
          f'{o["achieved_tflops"]:6.1f} TFLOP/s  MFU(bf16 dense) {mfu if mfu is None else round(100 * mfu, 1)}%')
PY
fi

say "== loupe peak --device cuda"
{ timeout 120 "$pack/bin/loupe" peak --device cuda && timeout 120 "$pack/bin/loupe" peak --device cuda --json; } \
  >"$out/peak.txt" 2>&1 || { fail=1; say "(loupe peak --device cuda failed)"; }
head -n 8 "$out/peak.txt" | tee -a "$summary"
say "== $( [ $fail = 0 ] && echo 'all CUDA checks passed' || echo 'SOME CUDA CHECKS FAILED' )"
exit $fail
