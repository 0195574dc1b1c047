#!/usr/bin/env bash
# Damaged checkpoints (issue 16): one byte flipped inside a tensor of the newest checkpoint's
# state.safetensors is named by `loupe checkpoint verify` (exit 1: the file and the tensor)
# and by --resume, which falls back to the previous good checkpoint, names it, and continues
# to exactly the loss curve of a run resumed from that checkpoint by hand (steps.csv rows
# equal as text: the trainer is deterministic at one thread). With every checkpoint damaged
# the resume refuses (exit 1). A damaged trainer_state.json or a truncated state file is
# caught too. Before checksums, each of these resumed with exit 0.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_ckpt_verify.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
base=(--train data/sst2-mini/train.tsv --eval none --threads 1 --quiet --batch-size 8 --output-dir "$T/out"
      --keep-checkpoints 0)

"$L" train "${base[@]}" --max-steps 4 --checkpoint-every 2 --run-id a >/dev/null 2>"$T/err" ||
  { bad "training run"; cat "$T/err"; exit 1; }
C=$T/out/a/checkpoints
"$L" checkpoint verify "$T/out/a" >"$T/v" 2>&1 && grep -q "step-4: ok" "$T/v" && grep -q "step-2: ok" "$T/v" &&
  echo "ok: fresh checkpoints verify" || { bad "fresh checkpoints"; cat "$T/v"; }
cp -r "$T/out/a" "$T/pristine"

# flip one byte in the middle of tensor TENSOR's data: flip FILE TENSOR
flip() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
path, name = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
s, e = hdr[name]["data_offsets"]
i = 8 + n + (s + e) // 2
b[i] ^= 0x40
open(path, "wb").write(b)
PY
}
# a tensor name that exists in the checkpoint (the first layer's query weight)
tensor=$(python3 - "$C/step-4/state.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
print(next(k for k in json.loads(b[8:8 + n]) if k.endswith("layer.0.attention.self.query.weight")))
PY
)
flip "$C/step-4/state.safetensors" "$tensor"
"$L" checkpoint verify "$C/step-4" >"$T/v" 2>&1; rc=$?
[ $rc == 1 ] && grep -qF "$C/step-4/state.safetensors: damaged: tensor '$tensor' fails its crc32 (1 of" "$T/v" &&
  echo "ok: verify names the damaged tensor" || { bad "verify step-4: exit $rc"; cat "$T/v"; }
"$L" checkpoint verify "$T/out/a" >"$T/v" 2>&1; rc=$?
[ $rc == 1 ] && grep -q "step-2: ok" "$T/v" && echo "ok: verify of the run: one damaged, one ok" || bad "verify run: $rc"

# resume from the run: falls back to step-2, named; same curve as resuming step-2 by hand
"$L" train "${base[@]}" --max-steps 6 --run-id b --resume "$T/out/a" --no-progress >/dev/null 2>"$T/err"; rc=$?
"$L" train "${base[@]}" --max-steps 6 --run-id ref --resume "$T/pristine/checkpoints/step-2" >/dev/null 2>&1
if [ $rc != 0 ] || ! grep -qF "resuming from the previous good checkpoint $C/step-2" "$T/err" ||
   ! grep -qF "tensor '$tensor' fails its crc32" "$T/err"; then
  bad "fallback: exit $rc"; cat "$T/err"
elif ! cmp -s <(cut -d, -f1-5 "$T/out/b/steps.csv") <(cut -d, -f1-5 "$T/out/ref/steps.csv"); then
  bad "the fallback's loss curve differs from a resume of step-2"; paste -d'|' "$T/out/b/steps.csv" "$T/out/ref/steps.csv"
else
  echo "ok: resume falls back to step-2 and continues its loss curve"
fi
# an explicit damaged checkpoint is refused, not replaced
"$L" train "${base[@]}" --max-steps 6 --run-id c --resume "$C/step-4" 2>"$T/err"; rc=$?
[ $rc == 1 ] && grep -q "the checkpoint cannot be resumed" "$T/err" && [ ! -e "$T/out/c" ] &&
  echo "ok: an explicitly named damaged checkpoint is refused" || { bad "explicit: exit $rc"; cat "$T/err"; }

# every checkpoint damaged: trainer_state.json of step-2 (the step number changed)
sed -i 's/"step":\s*2,/"step": 3,/' "$C/step-2/trainer_state.json"
"$L" train "${base[@]}" --max-steps 6 --run-id d --resume "$T/out/a" 2>"$T/err"; rc=$?
[ $rc == 1 ] && grep -q "no older checkpoint verifies" "$T/err" && [ ! -e "$T/out/d" ] &&
  echo "ok: no good checkpoint: refused" || { bad "none good: exit $rc"; cat "$T/err"; }
"$L" checkpoint verify "$C/step-2" >"$T/v" 2>&1; rc=$?
[ $rc == 1 ] && grep -qF "$C/step-2/trainer_state.json: damaged" "$T/v" &&
  echo "ok: a damaged trainer_state.json is named" || { bad "trainer_state: exit $rc"; cat "$T/v"; }

# a truncated state file (a partial sync)
cp -r "$T/pristine" "$T/trunc"
f=$T/trunc/checkpoints/step-4/state.safetensors
truncate -s $(( $(stat -c %s "$f") - 1000 )) "$f"
"$L" checkpoint verify "$T/trunc/checkpoints/step-4" >"$T/v" 2>&1; rc=$?
[ $rc == 1 ] && grep -qF "$f: damaged" "$T/v" && echo "ok: a truncated state file is named" ||
  { bad "truncated: exit $rc"; cat "$T/v"; }
"$L" checkpoint verify "$T/nope" >/dev/null 2>&1; rc=$?
[ $rc == 1 ] || bad "verify of a missing directory: exit $rc"
"$L" checkpoint frob x >/dev/null 2>&1; rc=$?
[ $rc == 2 ] || bad "checkpoint frob: exit $rc"
exit $fail
