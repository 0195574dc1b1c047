#!/usr/bin/env python3
"""Runs Hugging Face `tokenizers` over the tokenizer corpus for each vocabulary and mode and
writes tests/text/data/expected_<vocab>.txt.gz: per mode a header '@mode NAME', then one
line per input with the blake2b-64 hash of the space-separated ids (mode allchars: one
hash per block of 4096 lines joined by newlines), plus '=INDEX:ids' lines
with the full ids of the first 300 inputs (for diagnostics).

Bytes are decoded with errors="replace" before HF sees them: loupe replaces invalid UTF-8
by U+FFFD the same way (maximal subparts). Pairs split at the first tab byte.

usage: make_tokenizer_expected.py VOCAB_DIR     (VOCAB_DIR from tools/tokenizer_vocabs.py)
"""
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_diffcommon as common  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

FULL = 300


def main():
    vdir = sys.argv[1]
    only = sys.argv[2:]  # optional: regenerate only these vocabularies
    lines = common.read_corpus()
    for vocab in common.VOCABS:
        if only and vocab not in only:
            continue
        tok = Tokenizer.from_file(os.path.join(vdir, vocab, "tokenizer.json"))
        tok.no_padding()
        out = []
        for name, _flags, inputs, pair, special, max_len in common.modes(lines, vocab not in common.NO_ALLCHARS):
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
        with gzip.GzipFile(common.expected_path(vocab), "wb", mtime=0) as f:
            f.write(("\n".join(out) + "\n").encode("ascii"))
        print(f"{vocab}: {len(lines)} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
