#!/usr/bin/env bash
# Bad input to loupe train / loupe eval on a decoder: one line naming the file or flag, and
# the CLI's exit codes (src/cli/cli.h: 1 a failed job or bad file, 2 a usage error), never a
# crash or a run directory left behind.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_decoder_errors.XXXXXX)
trap 'rm -rf "$T"' EXIT
M="$S/models/tiny-llama"
printf 'review\tlabel\ngood film\t1\n' > "$T/notext.tsv"
printf 'text\ngood film\nbad film\n' > "$T/textonly.tsv"
fail=0
# expect RC PIECE -- command...: exit RC, and stderr holds PIECE on one "loupe <cmd>:" line
expect() {
  local want=$1 piece=$2; shift 3
  "$@" > "$T/out" 2> "$T/err"; local rc=$?
  if [ "$rc" != "$want" ] || ! grep -F -- "$piece" "$T/err" | grep -q '^loupe '; then
    echo "FAIL: $* -> exit $rc (want $want), stderr:"; cat "$T/err"; echo "(wanted a line with: $piece)"; fail=1
  else
    echo "ok: exit $rc: $(grep -F -- "$piece" "$T/err" | head -1)"
  fi
}
run=(--threads 1 --quiet --output-dir "$T/runs" --run-id r --max-steps 2)
expect 1 "notext.tsv: no text column" -- "$L" train --model "$M" --train "$T/notext.tsv" --eval none "${run[@]}"
expect 1 "textonly.tsv: no label column" -- "$L" train --model "$M" --task seq-cls --train "$T/textonly.tsv" --eval none "${run[@]}"
expect 2 "--task expects auto, seq-cls or causal-lm, got 'lm'" -- "$L" train --model "$M" --task lm "${run[@]}"
expect 1 "notext.tsv: no text column" -- "$L" eval --model "$M" --data "$T/notext.tsv"
expect 1 "textonly.tsv: no label column" -- "$L" eval --model "$M" --task seq-cls --data "$T/textonly.tsv"
expect 2 "--task expects auto, seq-cls or causal-lm, got 'x'" -- "$L" eval --model "$M" --task x --data "$T/textonly.tsv"
expect 2 "--model and --data are required" -- "$L" eval --model "$M"
expect 2 "--base-dtype needs --adapter" -- "$L" eval --model "$M" --data "$T/textonly.tsv" --base-dtype nf4
expect 1 "nope" -- "$L" eval --model "$T/nope" --data "$T/textonly.tsv"
expect 1 "$T/nope.tsv" -- "$L" eval --model "$M" --data "$T/nope.tsv"
# the causal LM reads no label: a text-only file trains, and a bad label column is no bad row
printf 'text\tlabel\ngood film\t\nbad film\tnot-a-label\n' > "$T/badlabels.tsv"
"$L" train --model "$M" --train "$T/badlabels.tsv" --eval "$T/textonly.tsv" "${run[@]}" --run-id lm >/dev/null 2>"$T/err" ||
  { echo "FAIL: a causal LM on text with bad labels:"; cat "$T/err"; fail=1; }
# --max-seq-len 3 cuts both rows ("<s> good film </s>" and longer): reported as a count
"$L" train --model "$M" --train "$T/textonly.tsv" --eval none "${run[@]}" --run-id cut --max-seq-len 3 >/dev/null 2>"$T/err"
grep -q "textonly.tsv: 2 of 2 rows truncated to --max-seq-len 3 tokens (longest" "$T/err" ||
  { echo "FAIL: truncation not reported:"; cat "$T/err"; fail=1; }
[ -d "$T/runs/r" ] && { echo "FAIL: a failed run left $T/runs/r behind"; fail=1; }
exit $fail
