#!/usr/bin/env bash
# report.html of real runs, put in front of headless Chromium (html_check.py: no console
# error, every chart in the DOM and non-blank in a screenshot, the PNG copies hold the
# series colours):
#  - loupe profile (3 steps of LoRA on the bundled model) writes report.html with its 7
#    charts; its headline and bottlenecks carry the run's own numbers (final loss from
#    summary.json, the top op of key_averages.csv);
#  - loupe report renders it again after the page and plots are deleted;
#  - loupe train writes its page too; loupe compare --html puts two runs side by side (5
#    charts, the table's method row names both);
#  - a bench run (2 batch sizes) writes its page with 3 charts;
#  - bad input: a directory that is not a run, a run whose steps.csv or summary.json is
#    truncated: exit 1, one line on stderr naming the file, no report.html, no temp file.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:?}
T=$(mktemp -d /tmp/lp_report_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
check() { python3 "$S/tests/report/html_check.py" "$@"; local rc=$?; [ $rc -eq 77 ] && exit 77; return $rc; }

"$L" profile --method lora --rank 4 --max-steps 3 --batch-size 4 --eval none --output-dir "$T" --run-id p \
    >"$T/out" 2>&1 || { cat "$T/out"; echo "FAIL: profile run"; exit 1; }
R=$T/p
grep -q "^report: $R/report.html" "$T/out" || { echo "FAIL: the run does not print where report.html is"; fail=1; }
check "$R/report.html" --charts 7 --plots "$R/plots" || { echo "FAIL: profile report.html"; fail=1; }
loss=$(python3 -c "import json;print('%.4f' % json.load(open('$R/summary.json'))['final_loss'])")
grep -q "<span>final loss</span><b>$loss</b>" "$R/report.html" || { echo "FAIL: headline final loss $loss"; fail=1; }
top=$(sed -n 2p "$R/profiler/key_averages.csv" | cut -d, -f1)
sed -n '/Top 3 bottlenecks/,/<\/ol>/p' "$R/report.html" | grep -q "<li>$top: " ||
    { echo "FAIL: the first bottleneck is not $top (key_averages.csv's top op)"; fail=1; }
grep -q "threshold" "$R/report.html" || { echo "FAIL: no threshold stated in the diagnosis"; fail=1; }
[ -f "$R/peak.json" ] || { echo "FAIL: no peak.json saved"; fail=1; }

# loupe report renders the same page again
rm -rf "$R/report.html" "$R/plots"
"$L" report "$R" >"$T/out2" 2>&1 || { cat "$T/out2"; echo "FAIL: loupe report"; fail=1; }
check "$R/report.html" --charts 7 --plots "$R/plots" >/dev/null || { echo "FAIL: re-rendered report.html"; fail=1; }

# the compare page: the profiled run and a plain training run side by side (5 charts: loss,
# step time, throughput + accuracy, memory, top ops); its table names both runs
"$L" train --method full --max-steps 2 --batch-size 4 --eval none --output-dir "$T" --run-id t --quiet \
    >/dev/null 2>&1 || { echo "FAIL: train run"; fail=1; }
[ -f "$T/t/report.html" ] || { echo "FAIL: loupe train wrote no report.html"; fail=1; }
"$L" compare "$R" "$T/t" --html "$T/cmp.html" >"$T/out4" 2>&1 || { cat "$T/out4"; echo "FAIL: compare --html"; fail=1; }
check "$T/cmp.html" --charts 5 --plots "$T/cmp-plots" || { echo "FAIL: compare page"; fail=1; }
grep -q "<td>lora / fused</td><td>full / fused</td>" "$T/cmp.html" || { echo "FAIL: compare table methods"; fail=1; }
"$L" compare "$R" "$T/empty-not-there" --html "$T/cmp2.html" >/dev/null 2>&1 && { echo "FAIL: compare of a missing run"; fail=1; }
[ ! -e "$T/cmp2.html" ] || { echo "FAIL: compare page written for a missing run"; fail=1; }

# a bench run's page
"$L" bench --batch-sizes 1,2 --warmup 1 --runs 2 --samples 8 --skip-full-pass --skip-profiling --quiet \
    --output-dir "$T" --run-id b >"$T/out3" 2>&1 || { cat "$T/out3"; echo "FAIL: bench run"; fail=1; }
check "$T/b/report.html" --charts 3 --plots "$T/b/plots" || { echo "FAIL: bench report.html"; fail=1; }

# bad input
bad() { # DIR WANT_IN_MESSAGE
    local out rc
    out=$("$L" report "$1" 2>&1 >/dev/null)
    rc=$?
    [ $rc -eq 1 ] || { echo "FAIL: loupe report $1: exit $rc, wanted 1"; fail=1; }
    [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: not one line: $out"; fail=1; }
    printf '%s\n' "$out" | grep -q -- "$2" || { echo "FAIL: '$out' does not say '$2'"; fail=1; }
    [ ! -e "$1/report.html" ] || { echo "FAIL: $1/report.html written"; fail=1; }
    ! ls -a "$1" 2>/dev/null | grep -q '\.tmp\.' || { echo "FAIL: a temp file left in $1"; fail=1; }
    echo "bad input ok: $out"
}
mkdir "$T/empty"
bad "$T/empty" "$T/empty: not a run directory"
cp -r "$R" "$T/trunc" && rm -rf "$T/trunc/report.html" "$T/trunc/plots"
size=$(stat -c %s "$T/trunc/steps.csv")
last=$(wc -l <"$T/trunc/steps.csv")
truncate -s $((size - 30)) "$T/trunc/steps.csv" # the last line cut in the middle
bad "$T/trunc" "$T/trunc/steps.csv: line $last: missing fields (the file is truncated)"
cp -r "$R" "$T/trunc2" && rm -rf "$T/trunc2/report.html" "$T/trunc2/plots"
truncate -s 200 "$T/trunc2/summary.json"
bad "$T/trunc2" "$T/trunc2/summary.json"
exit $fail
