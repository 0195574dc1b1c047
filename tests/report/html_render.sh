#!/usr/bin/env bash
# The HTML toolkit's page in headless Chromium: test_html --demo writes a page with tabs,
# a sortable table and one chart of each kind; html_check.py loads it (no console error,
# script ran, 4 charts in the DOM, each non-blank in a screenshot, the PNG copies hold the
# series colours) and its self-test shows the checks catch a broken page. 77 (skip) when
# chromium is missing.
set -u
B=${LP_BUILD_DIR:?}
S=${LP_SOURCE_DIR:?}
T=$(mktemp -d /tmp/lp_html_render.XXXXXX)
trap 'rm -rf "$T"' EXIT
python3 "$S/tests/report/html_check.py" --self-test "$T"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: the checker did not catch a broken page"; exit 1; }
"$B/tests/report/test_html" --demo "$T" >/dev/null || { echo "FAIL: demo page"; exit 1; }
python3 "$S/tests/report/html_check.py" "$T/page.html" --charts 4 --plots "$T/plots"
