#!/usr/bin/env python3
"""Tokenizer throughput, one thread: loupe (bench_tokenizer) beside Hugging Face tokenizers
(encode_batch with RAYON_NUM_THREADS=1, and a plain encode loop) on the same lines, for
MiniLM (WordPiece), Qwen and SmolLM2 (byte-level BPE). Prints MB/s, lines/s and the ratio
loupe / HF. Corpora: the differential-test corpus (adversarial: many scripts, emoji, long
words, invalid bytes) and 20,000 lines of English-like prose from the same generator.

usage: python3 bench/tokenizer/run.py [--build build] [--rounds 3]
Needs: the vocabulary packages (tools/tokenizer_vocabs.py) and `tokenizers`."""
import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "tools"))
import make_tokenizer_corpus  # noqa: E402
import tokenizer_vocabs  # noqa: E402


def hf_times(tok, lines, rounds):
    tok.no_truncation()
    tok.no_padding()
    batch = loop = 1e30
    for _ in range(rounds):
        t0 = time.perf_counter()
        tok.encode_batch(lines)
        batch = min(batch, time.perf_counter() - t0)
    for _ in range(max(1, rounds - 1)):
        t0 = time.perf_counter()
        for s in lines:
            tok.encode(s)
        loop = min(loop, time.perf_counter() - t0)
    return batch, loop


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from tokenizers import Tokenizer
    vdir = os.path.join(a.build, "tokenizer-vocabs")
    sys.argv = ["tokenizer_vocabs.py", vdir]
    if tokenizer_vocabs.main():
        return 1
    exe = os.path.join(a.build, "bench", "tokenizer", "bench_tokenizer")
    tmp = tempfile.mkdtemp()
    r = random.Random(7)
    prose = [make_tokenizer_corpus.english(r, r.randrange(5, 40)).encode() for _ in range(20000)]
    prose_gz = os.path.join(tmp, "prose.txt.gz")
    with gzip.GzipFile(prose_gz, "wb", mtime=0) as f:
        f.write(b"\n".join(prose) + b"\n")
    corpora = [("test corpus", os.path.join(root, "tests/text/data/tokenizer_corpus.txt.gz")), ("prose", prose_gz)]
    print(f"{'vocab':8} {'corpus':12} {'loupe MB/s':>10} {'lines/s':>9} {'HF batch MB/s':>13} {'HF loop MB/s':>12}"
          f" {'x batch':>8} {'x loop':>7}")
    for cname, path in corpora:
        data = gzip.open(path, "rb").read()
        lines = [x.decode("utf-8", "replace") for x in data.split(b"\n")[:-1]]
        for v in tokenizer_vocabs_names():
            out = subprocess.run([exe, os.path.join(vdir, v), path, str(a.rounds + 2)], check=True,
                                 stdout=subprocess.PIPE).stdout
            lp = json.loads(out)
            batch, loop = hf_times(Tokenizer.from_file(os.path.join(vdir, v, "tokenizer.json")), lines, a.rounds)
            mb = len(data) / 1e6
            print(f"{v:8} {cname:12} {lp['mb_per_s']:10.2f} {lp['lines_per_s']:9.0f} {mb / batch:13.2f} "
                  f"{mb / loop:12.2f} {batch / lp['seconds']:7.1f}x {loop / lp['seconds']:6.1f}x", flush=True)
    return 0


def tokenizer_vocabs_names():
    return ["minilm", "qwen", "smollm2"]


if __name__ == "__main__":
    sys.exit(main())
