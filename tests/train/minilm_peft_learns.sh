#!/usr/bin/env bash
# LoRA and QLoRA on a real pretrained encoder: the all-MiniLM-L6-v2 from PyPI (extracted by
# tools/minilm_dir.sh; exit 77 = skipped without the package) fine-tuned for one epoch on
# data/sst2-mini with rank 8 on query/value must reach >= 0.85 dev accuracy (measured 0.93-0.95
# for one epoch, 0.96 for two), with a decreasing loss and a consistent run directory; only the
# adapters and the head train (trainable parameters well under 1 % of the model).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
here=$(cd "$(dirname "$0")" && pwd)
model=$(bash "$here/../../tools/minilm_dir.sh") || exit $?
T=$(mktemp -d /tmp/lp_minilm_peft.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
for m in lora qlora; do
  "$L" train --model "$model" --method "$m" --lr 1e-3 --epochs 1 --threads 2 --output-dir "$T" --run-id "$m" \
    --no-progress --log-every 1000 >"$T/$m.log" 2>&1 || { echo "FAIL: loupe train --method $m"; cat "$T/$m.log"; fail=1; continue; }
  tail -1 "$T/$m.log"
  python3 "$here/check_run.py" "$T/$m" --min-accuracy 0.85 --loss-decreases || fail=1
  python3 - "$T/$m/summary.json" "$m" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
m = s["model"]
frac = m["params_trainable"] / m["params_total"]
print(f"{sys.argv[2]}: {m['params_trainable']} of {m['params_total']} parameters train ({100 * frac:.2f} %)")
if not 0 < frac < 0.01:
    sys.exit(f"FAIL: {sys.argv[2]} trains {100 * frac:.2f} % of the parameters")
PY
done
exit $fail
