#!/usr/bin/env python3
"""Differential test: 300 random conversations per chat template (Qwen2.5, SmolLM2,
Llama 3.2, Mistral v0.1) rendered by `loupe template` and by transformers'
apply_chat_template must agree byte for byte, refusals included (a conversation the
template rejects with raise_exception must fail in loupe too). Contents mix ASCII and
Unicode text, Unicode and ASCII padding, quotes, Jinja-looking braces, newlines and tabs.
Exits 77 (skip) without transformers."""
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import make_chat_template_expected as gen  # noqa: E402
except ImportError:
    sys.exit(77)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_templates")
LOUPE = os.environ.get("LOUPE", "build/loupe")
PIECES = ["hello", "Ünïcödé", "日本語", "🙂", " ", "\n", "\t", "\u00a0", "\u3000", "'", '"', "{{ x }}", "{% if %}",
          "<|im_end|>", "2+2=4", "\\n", "  ", "é", "[INST]", "</s>"]


def text(rng):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))


def conversation(rng):
    msgs = []
    if rng.random() < 0.4:
        msgs.append({"role": "system", "content": text(rng)})
    turns = rng.randint(1, 5)
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        if rng.random() < 0.05:  # a broken alternation now and then (Mistral refuses)
            role = "assistant" if role == "user" else "user"
        msgs.append({"role": role, "content": text(rng)})
    return {"messages": msgs}


def main():
    rng = random.Random(1234)
    convs = [conversation(rng) for _ in range(300)]
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        for name, (bos, eos) in gen.MODELS.items():
            src = open(os.path.join(HERE, name + ".jinja"), encoding="utf-8").read()
            tok = gen.tokenizer(src, bos, eos)
            for g in (False, True):
                want = []
                for c in convs:
                    try:
                        want.append(tok.apply_chat_template(c["messages"], tokenize=False, add_generation_prompt=g, **gen.EXTRA))
                    except Exception:
                        want.append(None)
                # loupe stops at the first refusal, so render one conversation per call
                # only where transformers refused; the rest go through one file
                ok = [c for c, w in zip(convs, want) if w is not None]
                path = os.path.join(d, "c.jsonl")
                with open(path, "w", encoding="utf-8") as f:
                    for c in ok:
                        f.write(json.dumps(c, ensure_ascii=False) + "\n")
                cmd = [LOUPE, "template", "--template", os.path.join(HERE, name + ".jinja"), "--messages", path,
                       "--vars", json.dumps(gen.EXTRA), "--eos", eos] + (["--bos", bos] if bos else []) + \
                      (["--add-generation-prompt"] if g else [])
                got = subprocess.run(cmd, capture_output=True)
                expect = "".join(w + "\n" for w in want if w is not None).encode()
                if got.returncode != 0 or got.stdout != expect:
                    print(f"{name} gen={g}: loupe differs from transformers (rc {got.returncode}): {got.stderr.decode()[:300]}")
                    fails += 1
                refused = [c for c, w in zip(convs, want) if w is None]
                for c in refused:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(json.dumps(c, ensure_ascii=False) + "\n")
                    r = subprocess.run(cmd, capture_output=True)
                    if r.returncode != 1 or b"raise_exception" not in r.stderr:
                        print(f"{name}: transformers refused {c} but loupe gave rc {r.returncode}")
                        fails += 1
                print(f"{name} gen={g}: {len(ok)} rendered, {len(refused)} refused by transformers")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
