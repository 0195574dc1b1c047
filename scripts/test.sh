#!/usr/bin/env bash
# Installs what is missing, builds the Release and sanitizer configurations, and runs
# every test: first the sanitizer build (unit tests and brief fuzzing), then the full
# suite on the Release build, whose ctest summary is the last line printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
scripts/build.sh --sanitize
export PATH="$root/.venv/bin:$PATH"
echo "== sanitizer build (ASan + UBSan) =="
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -LE 'ecosystem|slow' -j 2
echo "== release build =="
ctest --test-dir build --output-on-failure -j 2
