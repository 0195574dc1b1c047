#!/usr/bin/env python3
"""Writes tests/text/data/expected_smollm2_gguf.txt.gz: the ids transformers' own GGUF loader
gives (AutoTokenizer.from_pretrained(dir, gguf_file=...): the tokenizer it builds from the
file's metadata) on the tokenizer corpus in every mode of tools/tokenizer_diffcommon.py, in
the format tests/text/tokenizer_diff.py reads (per-line blake2b-64 hashes, full ids of the
first 300 lines). tests/text/gguf_tokenizer_diff.py holds `loupe tokenize --tokenizer FILE.gguf`
to it.

usage: make_gguf_tokenizer_expected.py PATH/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_diffcommon as common  # noqa: E402

FULL = 300
NAME = "smollm2_gguf"


def main():
    from transformers import AutoTokenizer
    d, f = os.path.split(os.path.abspath(sys.argv[1]))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f).backend_tokenizer
    tok.no_padding()
    lines = common.read_corpus()
    out = []
    for name, _flags, inputs, pair, special, max_len in common.modes(lines):
        if max_len:
            tok.enable_truncation(max_length=max_len)
        else:
            tok.no_truncation()
        if pair:
            parts = [x.split(b"\t", 1) for x in inputs]
            batch = [(a.decode("utf-8", "replace"), b.decode("utf-8", "replace")) for a, b in parts]
        else:
            batch = [x.decode("utf-8", "replace") for x in inputs]
        encs = tok.encode_batch(batch, add_special_tokens=special)
        out.append(f"@mode {name}")
        texts = [" ".join(map(str, e.ids)) for e in encs]
        if name == "allchars":
            out.extend(common.block_hashes(texts))
            continue
        out.extend(common.line_hash(t) for t in texts)
        out.extend(f"={i}:{t}" for i, t in enumerate(texts[:FULL]))
    with gzip.GzipFile(common.expected_path(NAME), "wb", mtime=0) as fh:
        fh.write(("\n".join(out) + "\n").encode("ascii"))
    print(f"{NAME}: {len(lines)} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
