#!/usr/bin/env python3
"""Writes tests/text/chat_templates/expected.jsonl: every conversation of
tests/text/chat_templates/conversations.jsonl rendered through each committed chat template
(qwen2.5, smollm2, llama3.2, mistral-v0.1) by transformers' apply_chat_template, with and
without the generation prompt. A render that raises (Mistral refuses system messages and
tool turns through raise_exception) is recorded with its message, so the C test checks
that loupe refuses the same conversations with the same text.

Usage: python3 tools/make_chat_template_expected.py   (needs transformers, tokenizers)
"""
import json
import os
import sys

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "text", "chat_templates")
# Special tokens as each model's tokenizer_config.json sets them (Qwen2.5 has no bos_token).
MODELS = {
    "qwen2.5": (None, "<|im_end|>"),
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral-v0.1": ("<s>", "</s>"),
}
# Llama 3.2 puts today's date in the system header through strftime_now; a fixed
# date_string (a variable the template reads first) keeps the expected text stable.
EXTRA = {"date_string": "26 Jul 2024"}


def tokenizer(template, bos, eos):
    tok = Tokenizer(WordLevel(vocab={"<unk>": 0}, unk_token="<unk>"))
    kw = {"eos_token": eos}
    if bos is not None:
        kw["bos_token"] = bos
    return PreTrainedTokenizerFast(tokenizer_object=tok, chat_template=template, **kw)


def main():
    convs = [json.loads(l) for l in open(os.path.join(HERE, "conversations.jsonl"), encoding="utf-8") if l.strip()]
    out = []
    for name, (bos, eos) in MODELS.items():
        template = open(os.path.join(HERE, name + ".jinja"), encoding="utf-8").read()
        tok = tokenizer(template, bos, eos)
        for i, conv in enumerate(convs):
            for gen in (False, True):
                rec = {"template": name, "conversation": i, "add_generation_prompt": gen, "bos_token": bos, "eos_token": eos}
                try:
                    rec["text"] = tok.apply_chat_template(conv["messages"], tools=conv.get("tools"), tokenize=False,
                                                          add_generation_prompt=gen, **EXTRA)
                except Exception as e:  # the template's raise_exception
                    rec["error"] = str(e)
                out.append(rec)
    with open(os.path.join(HERE, "expected.jsonl"), "w", encoding="utf-8") as f:
        for r in out:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(out)} renders ({sum('error' in r for r in out)} refused) to expected.jsonl", file=sys.stderr)


if __name__ == "__main__":
    main()
