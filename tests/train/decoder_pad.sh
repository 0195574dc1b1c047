#!/usr/bin/env bash
# Padding a decoder whose tokenizer has no pad token: loupe pads with the config's
# pad_token_id, else EOS, and says so. The id must not matter: the attention mask keeps
# padded keys from every query and padded positions carry no label, so the same run padded
# with <pad> (0), with EOS (2) and with a config pad_token_id (5) has the same loss curve and
# eval (within 1e-6; measured identical), for the causal LM and for --task seq-cls (whose
# score reads the last real token by the mask, not by searching for a pad id).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_decoder_pad.XXXXXX)
trap 'rm -rf "$T"' EXIT
head -n 101 "$S/data/sst2-mini/dev.tsv" > "$T/dev100.tsv"
# the same model with "<pad>" renamed, so the tokenizer has no pad token
mkdir -p "$T/nopad-eos" "$T/nopad-cfg"
python3 - "$S/models/tiny-llama" "$T" <<'PY'
import json, sys
src, t = sys.argv[1], sys.argv[2]
tok = open(src + "/tokenizer.json").read().replace('"<pad>"', '"<unused0>"')
cfg = json.load(open(src + "/config.json"))
for d, pad in (("nopad-eos", None), ("nopad-cfg", 5)):
    open(f"{t}/{d}/tokenizer.json", "w").write(tok)
    c = dict(cfg)
    c.pop("pad_token_id")
    if pad is not None:
        c["pad_token_id"] = pad
    json.dump(c, open(f"{t}/{d}/config.json", "w"))
PY
rc=0
for task in causal-lm seq-cls; do
  for m in "$S/models/tiny-llama" "$T/nopad-eos" "$T/nopad-cfg"; do
    name=$task-$(basename "$m")
    "$L" train --model "$m" --task $task --max-steps 6 --batch-size 16 --lr 3e-3 --eval "$T/dev100.tsv" \
      --threads 1 --no-progress --log-every 1000 --peak-gflops 100 --output-dir "$T" --run-id "$name" \
      > /dev/null 2> "$T/$name.err" || { echo "FAIL: $name"; cat "$T/$name.err"; rc=1; }
  done
  grep -q "has no pad token: padding with the EOS token (2)" "$T/$task-nopad-eos.err" ||
    { echo "FAIL: $task: no note about padding with EOS"; cat "$T/$task-nopad-eos.err"; rc=1; }
  grep -q "has no pad token: padding with pad_token_id (5)" "$T/$task-nopad-cfg.err" ||
    { echo "FAIL: $task: no note about padding with pad_token_id"; cat "$T/$task-nopad-cfg.err"; rc=1; }
  python3 - "$T/$task-tiny-llama" "$T/$task-nopad-eos" "$T/$task-nopad-cfg" <<'PY' || rc=1
import csv, json, sys
runs = sys.argv[1:]
loss = [[float(r["loss"]) for r in csv.DictReader(open(d + "/steps.csv"))] for d in runs]
ev = [json.load(open(d + "/summary.json"))["eval"]["loss"] for d in runs]
ok = all(len(l) == 6 and max(abs(a - b) for a, b in zip(l, loss[0])) <= 1e-6 for l in loss) and \
     max(abs(e - ev[0]) for e in ev) <= 1e-6
print(("ok: " if ok else "FAIL: ") + runs[0].rsplit("/", 1)[1].split("-tiny")[0] +
      f": padded with <pad>, EOS and pad_token_id 5: final losses {[l[-1] for l in loss]}, eval {ev}")
sys.exit(0 if ok else 1)
PY
done
exit $rc
