#!/usr/bin/env bash
# loupe compare on two real runs (full and LoRA fine-tuning of the bundled default model,
# 2 steps each): the table names both methods with ratios to the first run, --json carries
# each run's method and trainable parameters (LoRA's far fewer), a bad directory exits 1.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_compare_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
common=(--max-steps 2 --batch-size 4 --eval none --output-dir "$T" --quiet)
"$L" train --method full --run-id full "${common[@]}" >/dev/null 2>&1 || { echo "FAIL: full run"; exit 1; }
"$L" train --method lora --rank 4 --run-id lora "${common[@]}" >/dev/null 2>&1 || { echo "FAIL: lora run"; exit 1; }
out=$("$L" compare "$T/full" "$T/lora") || { echo "FAIL: compare exit $?"; fail=1; }
echo "$out"
echo "$out" | grep -q "full / fused" || { echo "FAIL: no full column"; fail=1; }
echo "$out" | grep -q "lora / fused" || { echo "FAIL: no lora column"; fail=1; }
echo "$out" | grep -Eq "^trainable params .*\(x0\.0[0-9]\)" || { echo "FAIL: trainable ratio"; fail=1; }
json=$("$L" compare --json "$T/full" "$T/lora") || { echo "FAIL: compare --json"; fail=1; }
echo "$json" | grep -q '"method":[[:space:]]*"lora"' || { echo "FAIL: json method"; fail=1; }
echo "$json" | grep -q '"vs_first"' || { echo "FAIL: json ratios"; fail=1; }
"$L" compare "$T/full" "$T/missing" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: missing run dir exit $rc, wanted 1"; fail=1; }
grep -q "$T/missing: not a run directory" "$T/err" || { echo "FAIL: error message: $(cat "$T/err")"; fail=1; }
exit $fail
