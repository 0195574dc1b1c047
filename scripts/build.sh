#!/usr/bin/env bash
# Configures and builds loupe: build/ (Release, gcc; --loupe: the command line alone) and, with
# --sanitize, build-asan/ (clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer targets).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)
if [ "${1:-}" = --loupe ]; then # the command line alone (quickstart): no tests, benches, examples
  # Without an NVIDIA GPU the CUDA kernels would only lengthen a newcomer's first build
  # (LP_CUDA=AUTO builds them wherever nvcc is): CPU-only unless a GPU is visible or LP_CUDA says.
  cuda=${LP_CUDA:-OFF}
  [ -z "${LP_CUDA:-}" ] && { [ -e /dev/nvidiactl ] || nvidia-smi -L >/dev/null 2>&1; } && cuda=AUTO
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLP_CUDA="$cuda" >/dev/null
  cmake --build build -j "$jobs" --target loupe
  exit 0
fi
# the tests required (LP_TESTS=ON): a build for testing must not leave them out quietly
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLP_CUDA="${LP_CUDA:-AUTO}" -DLP_TESTS=ON >/dev/null
cmake --build build -j "$jobs"
if [ "${1:-}" = --sanitize ]; then
  CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLP_SANITIZE=ON -DLP_FUZZ=ON -DLP_TESTS=ON >/dev/null
  cmake --build build-asan -j "$jobs"
fi
