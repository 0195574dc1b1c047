#!/usr/bin/env bash
# Ecosystem: the trace of a short `loupe profile` run passes the same HTA and
# torch-tb-profiler checks as examples/prof_demo's (tests/ecosystem/), which skip (77) when
# their packages are missing.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
T=$(mktemp -d /tmp/lp_eco_profile.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$L" profile --threads 1 --batch-size 8 --output-dir "$T" --run-id p --max-steps 6 --eval none --quiet \
  >/dev/null || { echo "FAIL: loupe profile"; exit 1; }
trace=$(ls "$T"/p/profiler/*.pt.trace.json.gz | head -1)
[ -f "$trace" ] || { echo "FAIL: no trace"; exit 1; }
rc=0
for check in hta_check tb_profiler_check; do
  sh "$S/tests/ecosystem/run_py.sh" "$S/tests/ecosystem/$check.py" "$trace"
  r=$?
  [ $r -eq 77 ] && exit 77
  [ $r -ne 0 ] && rc=1
done
exit $rc
