#!/usr/bin/env bash
# `loupe train --dtype bf16` (autocast: bf16 GEMM operands, f32 accumulation, f32 master
# weights and AdamW state) against the same run in f32 on the bundled model: same seed,
# data order and dropout masks, so the per-step losses differ only by bf16 rounding. Each
# step's loss must stay within 2e-2 relative of f32's over 60 steps (the rounding of the
# operands, |rel| <= 2^-8 each, moves a step's loss by ~1e-3; the trajectories drift apart
# slowly after that), the run must learn (the last 10 steps' mean loss below the first
# 10's by 20 %, and dev accuracy >= 0.7 after 60 steps, as f32 does), and summary.json /
# config.json must say dtype bf16 and which GEMM path ran. LoRA likewise (base kept in
# bf16 only: parameter memory below the f32 run's). With LP_ISA=avx512 (when the CPU has
# AVX-512) the path is the converted one and the losses stay within the same bound. The
# refusals: an unknown dtype, and bf16 with qlora.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
here=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/lp_bf16_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
common=(--threads 1 --max-steps 60 --batch-size 16 --lr 5e-4 --max-seq-len 64 --output-dir "$T" --quiet
        --log-every 100 --peak-gflops 1)
run() { # id [flags...]
  local id=$1
  shift
  "$@" >"$T/$id.log" 2>&1 || { echo "FAIL: loupe train $id"; cat "$T/$id.log"; fail=1; return 1; }
}
run f32 "$L" train "${common[@]}" --run-id f32
run bf16 "$L" train "${common[@]}" --run-id bf16 --dtype bf16
run lora32 "$L" train "${common[@]}" --run-id lora32 --method lora --max-steps 30 --lr 2e-3
run lorabf "$L" train "${common[@]}" --run-id lorabf --method lora --max-steps 30 --lr 2e-3 --dtype bf16
if grep -q avx512f /proc/cpuinfo; then
  LP_ISA=avx512 run conv "$L" train "${common[@]}" --run-id conv --dtype bf16 --max-steps 20
  conv=conv
else
  conv=
fi
[ $fail = 0 ] || exit 1
python3 "$here/check_run.py" "$T/bf16" || fail=1
python3 "$here/check_run.py" "$T/lorabf" || fail=1
python3 - "$T" "$conv" <<'PY' || fail=1
import csv, json, os, sys
T, conv = sys.argv[1], sys.argv[2]
def losses(r):
    return [float(x["loss"]) for x in csv.DictReader(open(os.path.join(T, r, "steps.csv")))]
def summ(r):
    return json.load(open(os.path.join(T, r, "summary.json")))
bad = []
def curve(ref, got, tol, label):
    a, b = losses(ref), losses(got)
    n = min(len(a), len(b))
    if n < 20 or (got != "conv" and len(a) != len(b)):
        bad.append(f"{label}: {len(a)} vs {len(b)} steps")
        return
    rel = [abs(b[i] - a[i]) / abs(a[i]) for i in range(n)]
    i = max(range(n), key=lambda k: rel[k])
    print(f"{label}: {n} steps, max |bf16 - f32| {max(abs(b[k] - a[k]) for k in range(n)):.2e}, "
          f"max rel {rel[i]:.2e} at step {i + 1} (bound {tol:.0e}); first {b[0]:.4f} vs {a[0]:.4f}")
    if rel[i] > tol:
        bad.append(f"{label}: step {i + 1} loss {b[i]:.5f} vs f32 {a[i]:.5f} (rel {rel[i]:.2e} > {tol:.0e})")
    if rel[0] == 0.0 and got != "conv":
        bad.append(f"{label}: step 1 loss bit-equal to f32's: bf16 did not run")
    head, tail = sum(b[:10]) / 10, sum(b[-10:]) / 10
    if not tail < 0.8 * head:
        bad.append(f"{label}: does not learn (first 10 mean {head:.4f}, last 10 {tail:.4f})")
curve("f32", "bf16", 2e-2, "full")
curve("lora32", "lorabf", 2e-2, "lora")
if conv:
    curve("f32", "conv", 2e-2, "full, LP_ISA=avx512 (converted)")
for r in ("bf16", "lorabf") + ((conv,) if conv else ()):
    s = summ(r)
    c = json.load(open(os.path.join(T, r, "config.json")))
    want = "converted" if r == "conv" or s["isa"] != "avx512bf16" else "native"
    if s.get("dtype") != "bf16" or not s.get("bf16_path", "").startswith(want) or c["training"].get("dtype") != "bf16":
        bad.append(f"{r}: summary dtype {s.get('dtype')} path {s.get('bf16_path')}, config {c['training'].get('dtype')}")
for r in ("f32", "lora32"):
    if summ(r).get("dtype") != "f32" or "bf16_path" in summ(r):
        bad.append(f"{r}: summary dtype {summ(r).get('dtype')}")
acc32, acc16 = summ("f32").get("eval", {}).get("accuracy"), summ("bf16").get("eval", {}).get("accuracy")
print(f"dev accuracy after 60 steps: f32 {acc32}, bf16 {acc16}")
if acc16 is None or acc16 < 0.7 or (acc32 is not None and acc16 < acc32 - 0.05):
    bad.append(f"bf16 dev accuracy {acc16} (f32 {acc32})")
m32, m16 = summ("lora32")["memory_by_category"], summ("lorabf")["memory_by_category"]
if not m16["parameter"] < m32["parameter"] or not m16.get("quantized_weight", 0) > 0:
    bad.append(f"lora bf16 keeps the f32 base: parameter {m16['parameter']} vs {m32['parameter']}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# refusals: exit 2 with the flag named
"$L" train --dtype fp8 --max-steps 1 --output-dir "$T" >"$T/u1.log" 2>&1
rc=$?; [ $rc = 2 ] && grep -q "dtype" "$T/u1.log" || { echo "FAIL: --dtype fp8 rc $rc"; cat "$T/u1.log"; fail=1; }
"$L" train --dtype bf16 --method qlora --max-steps 1 --output-dir "$T" >"$T/u2.log" 2>&1
rc=$?; [ $rc = 2 ] && grep -q "qlora" "$T/u2.log" || { echo "FAIL: --dtype bf16 --method qlora rc $rc"; cat "$T/u2.log"; fail=1; }
exit $fail
