#!/usr/bin/env bash
# Configures and builds loupe: build/ (Release, gcc; --loupe: the command line alone) and, with
# --sanitize, build-asan/ (clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer targets).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
if [ "${1:-}" = --loupe ]; then # the command line alone (quickstart): no tests, benches, examples
  cmake --build build -j "$jobs" --target loupe
  exit 0
fi
cmake --build build -j "$jobs"
if [ "${1:-}" = --sanitize ]; then
  CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLP_SANITIZE=ON -DLP_FUZZ=ON >/dev/null
  cmake --build build-asan -j "$jobs"
fi
