#!/usr/bin/env bash
# Model loading checks what would fail later (issue 16), each refusal naming the file: a
# vocab_size below the tokenizer's ids (was an "embedding" error at step 1), positions that
# cannot hold one token beside the specials (was blamed on the data file, exit 2), and NaN or
# Inf weights in model.safetensors (was "loss is NaN"), named by tensor with a count. Run on
# every HF-written model under tests/golden and on models/default, with the boundary values
# accepted so each refusal is the edit's doing.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_model_checks.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
train() { "$L" train --model "$1" --train data/sst2-mini/train.tsv --eval none --max-steps 1 --threads 1 --quiet \
            --batch-size 4 --max-seq-len 16 --output-dir "$T/out" >/dev/null 2>"$T/err"; }
# expect RC PATTERN WHAT MODEL
expect() {
  train "$4"; local rc=$?
  if [ $rc != "$1" ] || { [ -n "$2" ] && ! grep -qF -- "$2" "$T/err"; }; then bad "$3: exit $rc"; cat "$T/err"; else echo "ok: $3"; fi
}
# a config-only copy of model dir $1 into $2 with config.json edited by Python expression $3
edit() {
  rm -rf "$2"; mkdir -p "$2"
  cp "$1"/config.json "$1"/vocab.txt "$2"/ 2>/dev/null; cp "$1"/tokenizer*.json "$2"/ 2>/dev/null
  python3 - "$2/config.json" "$3" <<'PY'
import json, sys
p, expr = sys.argv[1], sys.argv[2]
c = json.load(open(p))
exec(expr)
json.dump(c, open(p, "w"))
PY
}
ids() { # the tokenizer's id count: 1 + the largest id (vocab.txt: its lines)
  wc -l < "$1/vocab.txt"
}
dirs=(models/default tests/golden/cls_bert tests/golden/cls_distilbert tests/golden/lora_bert tests/golden/qlora_distilbert)
for d in "${dirs[@]}"; do
  name=$(basename "$d"); n=$(ids "$d")
  edit "$d" "$T/v_$name" "c['vocab_size'] = $((n - 1))"
  expect 1 "$T/v_$name/config.json: vocab_size $((n - 1)) is smaller than the tokenizer's vocabulary ($n ids in" \
    "$name: vocab_size one below the tokenizer" "$T/v_$name"
  edit "$d" "$T/v_$name" "c['vocab_size'] = $n"
  expect 0 "" "$name: vocab_size equal to the tokenizer" "$T/v_$name"
  edit "$d" "$T/p_$name" "c['max_position_embeddings'] = 2"
  expect 1 "$T/p_$name/config.json: max_position_embeddings 2 cannot hold one token besides the 2 special tokens" \
    "$name: 2 positions" "$T/p_$name"
  edit "$d" "$T/p_$name" "c['max_position_embeddings'] = 3"
  expect 0 "" "$name: 3 positions" "$T/p_$name"
done

# non-finite weights: 3 NaN and 2 Inf written into one tensor of each HF-written checkpoint
for d in tests/golden/cls_bert tests/golden/cls_distilbert tests/golden/lora_distilbert; do
  name=$(basename "$d"); rm -rf "$T/n_$name"; cp -r "$d" "$T/n_$name"
  tensor=$(python3 - "$T/n_$name/model.safetensors" <<'PY'
import json, math, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
name = next(k for k in sorted(h) if k != "__metadata__" and "layer.1" in k and k.endswith("weight")
            and h[k]["dtype"] == "F32" and len(h[k]["shape"]) == 2)
s, e = h[name]["data_offsets"]
for i, v in zip((0, 5, 9, 11, 17), (math.nan, math.nan, math.inf, -math.inf, math.nan)):
    struct.pack_into("<f", b, 8 + n + s + 4 * i, v)
open(p, "wb").write(b)
print(name)
PY
)
  expect 1 "$T/n_$name/model.safetensors: tensor '$tensor' holds 5 non-finite values (NaN or Inf; the first at flat index 0); 1 tensor affected" \
    "$name: NaN/Inf weights named" "$T/n_$name"
done

# --detect-anomaly on a run that diverges (lr 1e30): it names where the first NaN/Inf appears,
# at a step no later than the plain run's "not finite" stop
common=(--train data/sst2-mini/train.tsv --eval none --threads 1 --quiet --batch-size 8 --max-steps 30 --lr 1e30
        --max-grad-norm 0 --output-dir "$T/out")
"$L" train "${common[@]}" >/dev/null 2>"$T/plain"; rc1=$?
"$L" train "${common[@]}" --detect-anomaly >/dev/null 2>"$T/anom"; rc2=$?
s1=$(grep -oE "at step [0-9]+" "$T/plain" | grep -oE "[0-9]+"); s2=$(grep -oE "step [0-9]+: --detect-anomaly: (forward|backward)" "$T/anom" | grep -oE "^step [0-9]+" | grep -oE "[0-9]+")
if [ $rc1 != 1 ] || [ $rc2 != 1 ] || [ -z "$s1" ] || [ -z "$s2" ] || [ "$s2" -gt "$s1" ]; then
  bad "--detect-anomaly: exits $rc1/$rc2, steps '$s1'/'$s2'"; cat "$T/plain" "$T/anom"
else
  echo "ok: --detect-anomaly: $(tail -1 "$T/anom" | cut -c1-120) (plain run stopped at step $s1)"
fi
exit $fail
