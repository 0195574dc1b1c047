#!/usr/bin/env bash
# --adapter DIR on damaged PEFT adapters: each is refused with exit 1 and a message naming
# the adapter file and what is wrong with it, before any run directory exists. The
# undamaged adapter (saved by loupe a moment earlier) loads and trains, so every refusal
# below is caused by the one thing each case breaks.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_adapter_errors.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
base=(--train data/sst2-mini/train.tsv --eval none --max-steps 1 --threads 1 --quiet --method lora)

"$L" train "${base[@]}" --output-dir "$T/out" --run-id saved --save-adapter "$T/good" >/dev/null 2>"$T/err" ||
  { echo "FAIL: saving the adapter"; cat "$T/err"; exit 1; }

# expect PATTERN... -- DESCRIPTION ADAPTER_DIR: exit 1, stderr has every pattern, no run dir
expect() {
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  local what=$2 dir=$3
  rm -rf "$T/out/r"
  "$L" train "${base[@]}" --output-dir "$T/out" --run-id r --adapter "$dir" >"$T/stdout" 2>"$T/stderr"
  local rc=$?
  if [ "$rc" != 1 ]; then
    echo "FAIL: $what: exit $rc, wanted 1"; cat "$T/stderr"; fail=1; return
  fi
  for p in "${pats[@]}"; do
    if ! grep -qF -- "$p" "$T/stderr"; then
      echo "FAIL: $what: stderr does not mention '$p':"; cat "$T/stderr"; fail=1; return
    fi
  done
  if [ -e "$T/out/r" ]; then
    echo "FAIL: $what: a run directory was left behind"; fail=1; return
  fi
  echo "ok: $what"
}
# damaged copies of the good adapter; edit FILE PYTHON applies a JSON edit to adapter_config.json
copy() { rm -rf "$T/$1"; cp -r "$T/good" "$T/$1"; }
edit() {
  python3 - "$T/$1/adapter_config.json" "$2" <<'PY'
import json, sys
path, code = sys.argv[1], sys.argv[2]
c = json.load(open(path))
exec(code)
json.dump(c, open(path, "w"))
PY
}

copy ok
if "$L" train "${base[@]}" --output-dir "$T/out" --run-id ok --adapter "$T/ok" >/dev/null 2>"$T/err"; then
  echo "ok: the undamaged adapter loads"
else
  echo "FAIL: the undamaged adapter is refused"; cat "$T/err"; fail=1
fi

copy trunc
head -c 100 "$T/good/adapter_model.safetensors" >"$T/trunc/adapter_model.safetensors"
expect "trunc/adapter_model.safetensors" "runs past the end" -- "truncated adapter weights" "$T/trunc"

copy rank
edit rank 'c["r"] = 4'
expect "rank/adapter_model.safetensors" "should have shape [4, " -- "config rank differs from the tensors'" "$T/rank"

copy nocfg
rm "$T/nocfg/adapter_config.json"
expect "nocfg/adapter_config.json" -- "missing adapter_config.json" "$T/nocfg"

copy badjson
printf '{"r": 8,' >"$T/badjson/adapter_config.json"
expect "badjson/adapter_config.json" "not valid JSON" -- "adapter_config.json cut short" "$T/badjson"

copy targets
edit targets 'c["target_modules"] = ["q_proj", "v_proj"]'
expect "$T/targets" "match no Linear module" -- "targets the model does not have" "$T/targets"

copy notlora
edit notlora 'c["peft_type"] = "IA3"'
expect "notlora/adapter_config.json" "IA3" -- "an adapter of another PEFT type" "$T/notlora"

copy missing
python3 - "$T/missing/adapter_model.safetensors" <<'PY'
# drop every tensor of layer 1 from the file (a valid safetensors file, one layer short)
import json, struct, sys
p = sys.argv[1]
raw = open(p, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
data = raw[8 + n:]
keep = {k: v for k, v in hdr.items() if k == "__metadata__" or ".layer.1." not in k}
out, off = {}, 0
blobs = []
for k, v in keep.items():
    if k == "__metadata__":
        out[k] = v
        continue
    b, e = v["data_offsets"]
    blobs.append(data[b:e])
    out[k] = dict(v, data_offsets=[off, off + e - b])
    off += e - b
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
open(p, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
expect "missing/adapter_model.safetensors" "layer.1." -- "adapter weights one layer short" "$T/missing"

exit $fail
