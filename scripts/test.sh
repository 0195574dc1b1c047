#!/usr/bin/env bash
# Installs what is missing, builds the Release and sanitizer configurations, and runs
# every test: first the sanitizer build (unit tests and brief fuzzing), then the full
# suite on the Release build. The last line sums both ctest runs as
# "N passed, N failed, N skipped".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
scripts/build.sh --sanitize
export PATH="$root/.venv/bin:$PATH"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
rc=0
echo "== sanitizer build (ASan + UBSan) =="
# The op-table tests run once per ISA level (label isa_<level>); under the sanitizers only
# the baseline and AVX2 copies (the AVX-512 ones run in the release pass below), which
# keeps the sanitizer pass's kernel time within a third more than before.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -LE 'ecosystem|slow|isa_avx512' -j 2 2>&1 | tee "$logs/asan.log" || rc=1
echo "== release build =="
ctest --test-dir build --output-on-failure -j 2 2>&1 | tee "$logs/release.log" || rc=1

# ctest counts skipped tests among the passed ones and lists them after its summary.
passed=0 failed=0 skipped=0
for log in "$logs"/asan.log "$logs"/release.log; do
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1) || true
  if [ -z "$line" ]; then rc=1; continue; fi
  f=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  t=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  s=$(grep -cE '^[[:space:]]+[0-9]+ - .*\(Skipped\)$' "$log") || true
  passed=$((passed + t - f - s)) failed=$((failed + f)) skipped=$((skipped + s))
done
[ "$failed" = 0 ] || rc=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $rc
