#!/usr/bin/env bash
# loupe peak --device cuda: on a GPU, the table (bf16 / tf32 / f32 GEMM TFLOP/s, copy GB/s)
# and JSON with positive figures; without one, a clear error and exit 1: "no CUDA GPU is
# present" in a CUDA build, "built without CUDA" in a CPU-only one ($1: the build's
# LP_HAVE_CUDA, ON or OFF). A bad --device is a usage error (exit 2).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
have_cuda=${1:?usage: peak_cuda_cli.sh ON|OFF}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
"$L" peak --device gpu >/dev/null 2>"$tmp/err"; [ $? = 2 ] || { echo "FAIL: --device gpu should exit 2"; fail=1; }
grep -q "cpu or cuda" "$tmp/err" || { echo "FAIL: --device gpu message"; cat "$tmp/err"; fail=1; }
"$L" peak --device cuda --size 100 >/dev/null 2>&1; [ $? = 2 ] || { echo "FAIL: cuda --size 100 should exit 2"; fail=1; }
"$L" peak --device cuda --size 1024 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ]; then
  echo "a CUDA GPU is present:"; cat "$tmp/out"
  for row in "bf16 GEMM" "tf32 GEMM" "f32 GEMM" "device-to-device copy"; do
    grep -q "$row" "$tmp/out" || { echo "FAIL: no '$row' row"; fail=1; }
  done
  "$L" peak --device cuda --size 1024 --json >"$tmp/p.json" || { echo "FAIL: json run"; fail=1; }
  for key in bf16_tflops tf32_tflops f32_tflops copy_gbs; do
    v=$(sed -n "s/.*\"$key\":[[:space:]]*\([0-9.e+]*\).*/\1/p" "$tmp/p.json")
    awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || { echo "FAIL: $key is '$v'"; fail=1; }
  done
else
  echo "no GPU run (exit $rc): $(cat "$tmp/err")"
  [ $rc = 1 ] || { echo "FAIL: expected exit 1, got $rc"; fail=1; }
  if [ "$have_cuda" = ON ]; then want="no CUDA GPU is present"; else want="built without CUDA"; fi
  grep -q "$want" "$tmp/err" || { echo "FAIL: expected '$want' in the message"; fail=1; }
  [ ! -s "$tmp/out" ] || { echo "FAIL: output on stdout despite the error"; fail=1; }
fi
exit $fail
