#!/usr/bin/env bash
# Inference weight formats from the command line: loupe eval --quantize q8_0|int8|q4_0|nf4|bf16
# on the bundled models/tiny-llama gives the mean token loss of the f32 run within 2 % (the
# weights themselves move: Q4_0 rounds each to 1 of 16 levels, int8 the activations to 255
# levels per token, yet over a random-weight model's ~6.9 nats the loss moves by 0.3-0.7 %;
# bf16 rounds weights and activations to 8 mantissa bits; a broken kernel moves it by whole
# nats); --dequantize is the f32 run exactly. Usage errors of eval --quantize and loupe
# quantize: exit 2, one line each; a missing model or a BERT directory: exit 1, one line.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_quantize_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
loss() { "$L" eval --model "$S/models/tiny-llama" --data "$S/data/sst2-mini/dev.tsv" --threads 1 --json "$@" |
  python3 -c "import json,sys; print(json.load(sys.stdin)['loss'])"; }
ref=$(loss) || { echo "FAIL: f32 eval"; exit 1; }
deq=$(loss --dequantize)
[ "$deq" = "$ref" ] && echo "ok: --dequantize = f32 ($ref)" || { echo "FAIL: --dequantize $deq vs $ref"; fail=1; }
for q in q8_0 int8 q4_0 nf4 bf16; do
  v=$(loss --quantize $q) || { echo "FAIL: eval --quantize $q"; fail=1; continue; }
  if python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b) <= 0.02*abs(b) else 1)" "$v" "$ref"; then
    echo "ok: --quantize $q loss $v (f32 $ref)"
  else
    echo "FAIL: --quantize $q loss $v vs f32 $ref"; fail=1
  fi
done
check_err() { # expected exit code, then the command
  want=$1; shift
  "$@" > "$T/out" 2> "$T/err"; rc=$?
  lines=$(wc -l < "$T/err")
  if [ $rc = "$want" ] && [ "$lines" -le 2 ]; then echo "ok: exit $rc: $(head -n1 "$T/err")"; else
    echo "FAIL: $* gave exit $rc, stderr:"; cat "$T/err"; fail=1; fi
}
check_err 2 "$L" eval --model "$S/models/tiny-llama" --data "$S/data/sst2-mini/dev.tsv" --quantize q5_k
check_err 2 "$L" quantize --model "$S/tests/golden/gguf_tiny/smollm_lm.gguf" --type q4_k --output "$T/x.gguf"
check_err 2 "$L" quantize --model "$S/tests/golden/gguf_tiny/smollm_lm.gguf"
check_err 1 "$L" quantize --model "$T/none.gguf" --type q8_0 --output "$T/x.gguf"
check_err 1 "$L" quantize --model "$S/models/default" --type q8_0 --output "$T/x.gguf" # a BERT directory
[ ! -e "$T/x.gguf" ] || { echo "FAIL: a failed quantize left $T/x.gguf"; fail=1; }
# a llama directory (config.json + tokenizer.json, random weights) written as GGUF, which
# loupe then runs (tests/models/test_gguf_export and tests/io/gguf_qwen2_llama.py check the
# file's contents, and llama.cpp on it)
for q in f32 q4_0; do
  if "$L" quantize --model "$S/models/tiny-llama" --type $q --output "$T/t-$q.gguf" 2> "$T/err" &&
     "$L" generate --model "$T/t-$q.gguf" --prompt "hello" --max-new-tokens 4 --threads 1 > /dev/null 2>> "$T/err"; then
    echo "ok: quantize models/tiny-llama --type $q, generate runs on it"
  else
    echo "FAIL: quantize / generate on models/tiny-llama $q:"; cat "$T/err"; fail=1
  fi
done
exit $fail
