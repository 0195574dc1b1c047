#!/usr/bin/env bash
# Ctrl-C: SIGINT to a running training saves a checkpoint and writes the run files for the
# steps done (exit 130); resuming the run directory then finishes with the same losses as
# an uninterrupted run. A NaN loss (hidden --inject-nan-step) stops with an error naming
# the step, and the run files hold the steps before it.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_train_sigint.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
common=(--batch-size 4 --eval none --threads 1 --output-dir "$T" --no-progress --log-every 1 --lr 3e-4)
"$L" train "${common[@]}" --max-steps 30 --run-id int >"$T/out" 2>"$T/err" &
pid=$!
# wait for a few steps to be logged, then interrupt
for _ in $(seq 1 300); do
  n=$(grep -c '^step ' "$T/err" 2>/dev/null || true)
  [ "${n:-0}" -ge 3 ] && break
  sleep 0.2
done
kill -INT $pid
wait $pid
rc=$?
if [ $rc -ne 130 ]; then echo "FAIL: exit $rc after SIGINT, wanted 130"; cat "$T/err"; exit 1; fi
grep -q "interrupted at step" "$T/err" || { echo "FAIL: no interruption message"; cat "$T/err"; exit 1; }
python3 - "$T/int" <<'PY' || exit 1
import csv, json, os, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/steps.csv")))
s = json.load(open(d + "/summary.json"))
ck = sorted(os.listdir(d + "/checkpoints"))
n = len(rows)
if not (3 <= n < 30) or s["steps"] != n or not s["interrupted"] or ck[-1] != f"step-{n}":
    print(f"FAIL: rows {n}, summary steps {s['steps']} interrupted {s['interrupted']}, checkpoints {ck}"); sys.exit(1)
print(f"ok: SIGINT after {n} steps: checkpoint step-{n}, steps.csv and summary.json written")
open(os.path.join(os.path.dirname(d), "n"), "w").write(str(n))
PY
# finish the interrupted run (resume from its run dir) and compare with one uninterrupted run
"$L" train "${common[@]}" --max-steps 30 --run-id int2 --resume "$T/int" --quiet >/dev/null 2>"$T/err2" &
pid=$!
wait $pid || { echo "FAIL: resumed run failed"; cat "$T/err2"; exit 1; }
"$L" train "${common[@]}" --max-steps 30 --run-id ref --quiet --checkpoint-every 0 >/dev/null 2>&1 || { echo "FAIL: reference run"; exit 1; }
python3 - "$T/int2" "$T/ref" <<'PY' || fail=1
import csv, sys
a = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
b = list(csv.DictReader(open(sys.argv[2] + "/steps.csv")))
if len(a) != len(b):
    print(f"FAIL: resumed run has {len(a)} steps, reference {len(b)}"); sys.exit(1)
worst = max(abs(float(x["loss"]) - float(y["loss"])) for x, y in zip(a, b))
if worst > 1e-6:
    print(f"FAIL: loss curves differ by {worst}"); sys.exit(1)
print(f"ok: interrupted + resumed == uninterrupted over {len(a)} steps (max |dloss| {worst:g})")
PY
# NaN injection
"$L" train "${common[@]}" --max-steps 10 --run-id nan --inject-nan-step 4 --quiet >/dev/null 2>"$T/errn"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "NaN at step 4" "$T/errn"; then
  echo "FAIL: NaN loss: exit $rc, wanted 1 with 'NaN at step 4'"; cat "$T/errn"; fail=1
else
  python3 - "$T/nan" <<'PY' || fail=1
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
s = json.load(open(sys.argv[1] + "/summary.json"))
if len(rows) != 3 or "step 4" not in s.get("stop_reason", ""):
    print(f"FAIL: NaN run: {len(rows)} rows, stop_reason {s.get('stop_reason')}"); sys.exit(1)
print("ok: NaN at step 4 stops the run naming the step; the 3 steps before it are written")
PY
fi
# an absurd learning rate diverges to a non-finite loss or gradient and is caught the same way
"$L" train "${common[@]}" --max-steps 30 --run-id big --lr 1e30 --max-grad-norm 0 --quiet >/dev/null 2>"$T/errb"
rc=$?
if [ $rc -ne 1 ] || ! grep -Eq "(NaN|infinite|not finite).* at step [0-9]+" "$T/errb"; then
  echo "FAIL: lr 1e30: exit $rc"; cat "$T/errb"; fail=1
else
  echo "ok: lr 1e30: $(cat "$T/errb" | tail -1)"
fi
exit $fail
