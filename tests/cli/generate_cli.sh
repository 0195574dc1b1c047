#!/usr/bin/env bash
# loupe generate end to end on the bundled tiny llama (random weights from its seed, its
# tokenizer): a prompts file (plain lines and JSONL) written as JSON lines; batching must not
# change greedy tokens (left padding, positions from the mask); a seed reproduces a sampled
# run; and every refusal is one "loupe generate:" line naming the file/line or flag, with a
# non-zero exit and no --output file left behind.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/lp_generate_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
M="$S/models/tiny-llama"
fail=0
expect() {
  local want=$1 piece=$2; shift 3
  "$@" > "$T/out" 2> "$T/err"; local rc=$?
  if [ "$rc" != "$want" ] || ! grep -F -- "$piece" "$T/err" | grep -q '^loupe '; then
    echo "FAIL: $* -> exit $rc (want $want), stderr:"; cat "$T/err"; echo "(wanted a line with: $piece)"; fail=1
  else
    echo "ok: exit $rc: $(grep -F -- "$piece" "$T/err" | head -1)"
  fi
}
printf 'the cat sat\n{"prompt": "a much longer prompt about dogs and cats"}\n\nhello\n' > "$T/prompts.txt"
g=(generate --model "$M" --threads 1 --max-new-tokens 6 --prompts "$T/prompts.txt")

# batch of 1 vs batch of 3: the same greedy ids, prompt by prompt
"$L" "${g[@]}" --batch-size 1 --output "$T/b1.jsonl" > /dev/null 2> "$T/err" || { echo "FAIL: batch 1"; cat "$T/err"; fail=1; }
"$L" "${g[@]}" --batch-size 3 --output "$T/b3.jsonl" > /dev/null 2> "$T/err" || { echo "FAIL: batch 3"; cat "$T/err"; fail=1; }
python3 - "$T/b1.jsonl" "$T/b3.jsonl" <<'PY' || fail=1
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == 3 and len(b) == 3, (len(a), len(b))
for x, y in zip(a, b):
    for k in ("prompt", "text", "token_ids", "prompt_tokens", "generated_tokens", "prefill_ms", "decode_ms", "tokens_per_s"):
        assert k in x, k
    assert x["generated_tokens"] == len(x["token_ids"]) <= 6, x
    assert x["token_ids"] == y["token_ids"], (x["prompt"], x["token_ids"], y["token_ids"])
assert a[1]["prompt"] == "a much longer prompt about dogs and cats"
print("ok: 3 JSON lines; batch 1 and batch 3 give the same greedy ids")
PY

# a seed reproduces a sampled run
s=(generate --model "$M" --threads 1 --max-new-tokens 8 --prompt "once upon" --temperature 1.0 --top-k 20 --top-p 0.9)
"$L" "${s[@]}" --seed 5 > "$T/s1" 2> /dev/null
"$L" "${s[@]}" --seed 5 > "$T/s2" 2> /dev/null
if cmp -s "$T/s1" "$T/s2"; then echo "ok: seed 5 twice gives the same text"; else echo "FAIL: seeded runs differ"; fail=1; fi

# refusals
printf 'short\nshort too\n%s\n' "$(printf 'word %.0s' $(seq 1 400))" > "$T/long.txt"
expect 1 "long.txt line 3: the prompt has" -- "$L" generate --model "$M" --prompts "$T/long.txt" --output "$T/never.jsonl"
[ -e "$T/never.jsonl" ] && { echo "FAIL: --output left behind after a refusal"; fail=1; }
printf 'fine\n{"nope": 1}\n' > "$T/bad.txt"
expect 1 "bad.txt line 2: needs \"prompt\"" -- "$L" generate --model "$M" --prompts "$T/bad.txt" --output "$T/never.jsonl"
printf 'fine\n{"prompt": \n' > "$T/badjson.txt"
expect 1 "badjson.txt line 2: not a JSON object" -- "$L" generate --model "$M" --prompts "$T/badjson.txt"
expect 2 "unknown option" -- "$L" generate --model "$M" --prompt hi --bogus
expect 2 "--kv-cache: 'f8' is not f32 or f16" -- "$L" generate --model "$M" --prompt hi --kv-cache f8
expect 2 "give one of --prompt or --prompts" -- "$L" generate --model "$M"
expect 2 "--merge-adapter needs --adapter" -- "$L" generate --model "$M" --prompt hi --merge-adapter
expect 1 "peft_adapter/adapter_model.safetensors" -- "$L" generate --model "$M" --prompt hi --adapter "$S/tests/golden/lora_qwen2_lm/peft_adapter"
expect 1 "no chat template" -- "$L" generate --model "$M" --prompt hi --chat
[ -e "$T/never.jsonl" ] && { echo "FAIL: --output left behind after a refusal"; fail=1; }
expect 2 "-t: 'x' is not a list" -- "$L" bench-gen -m "$M" -t x
exit $fail
