#!/usr/bin/env bash
# The command line's contract: --help/--version succeed, an unknown command or flag
# is a clear error with exit 2.
set -u
fail=0
check() { # check EXPECTED_RC DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  "$@" >/tmp/lp_cli_out.$$ 2>&1; local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $what: exit $rc, wanted $want"; cat /tmp/lp_cli_out.$$; fail=1
  else
    echo "ok: $what"
  fi
}
L=${LOUPE:?LOUPE must point at the loupe binary}
check 0 "--help" -- "$L" --help
check 0 "--version" -- "$L" --version
"$L" --version | grep -Eq '^loupe [0-9]+\.[0-9]+\.[0-9]+ \(' || { echo "FAIL: version format"; fail=1; }
check 2 "no command" -- "$L"
check 2 "unknown command" -- "$L" frobnicate
"$L" frobnicate 2>&1 | grep -q "unknown command 'frobnicate'" || { echo "FAIL: unknown command message"; fail=1; }
check 2 "unknown top-level flag" -- "$L" --frob
for c in train eval profile bench report compare analyze inspect peak tokenize template checkpoint; do
  check 0 "$c --help" -- "$L" "$c" --help
  "$L" "$c" --help | grep -q "loupe $c" || { echo "FAIL: $c --help does not name the command"; fail=1; }
  check 2 "$c unknown flag" -- "$L" "$c" --no-such-flag
done
rm -f /tmp/lp_cli_out.$$
exit $fail
