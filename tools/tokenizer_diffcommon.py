"""Shared by tools/make_tokenizer_expected.py (runs Hugging Face tokenizers) and
tests/text/tokenizer_diff.py (runs loupe): the corpus, the test modes and their inputs,
and the per-line hash, so both sides build byte-identical inputs."""
import gzip
import hashlib

VOCABS = ["minilm", "qwen", "smollm2", "qwen_tpl"]
NO_ALLCHARS = {"qwen_tpl"}  # same normalizer and regex as qwen: the exhaustive pass adds nothing
CORPUS = "tests/text/data/tokenizer_corpus.txt.gz"
PAIRS = 5000


def read_corpus(path=CORPUS):
    with gzip.open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def pair_lines(lines):
    """'A<TAB>B' inputs from consecutive corpus lines (tabs in A become spaces)."""
    return [lines[2 * i].replace(b"\t", b" ") + b"\t" + lines[2 * i + 1] for i in range(PAIRS)]


BLOCK = 4096  # allchars: one hash per block of this many lines


def allchar_lines():
    """Every code point (but surrogates and newline) in a few contexts: catches Unicode
    table differences (categories, case, normal forms, regex classes) exhaustively."""
    return [f"a{chr(c)}b {chr(c)}{chr(c)}1 A{chr(c)}".encode("utf-8")
            for c in range(0x110000) if not 0xD800 <= c < 0xE000 and c != 10]


def block_hashes(texts):
    return [line_hash("\n".join(texts[i:i + BLOCK])) for i in range(0, len(texts), BLOCK)]


def modes(lines, allchars=True):
    """(name, loupe flags, input lines, pair, add_special, max_length) for every mode;
    mode "allchars" is compared per block of BLOCK lines (block_hashes)."""
    pairs = pair_lines(lines)
    extra = [("allchars", [], allchar_lines(), False, True, None)] if allchars else []
    return extra + [
        ("single", [], lines, False, True, None),
        ("pair", ["--pair"], pairs, True, True, None),
        ("max16", ["--max-length", "16"], lines[:5000], False, True, 16),
        ("pairmax24", ["--pair", "--max-length", "24"], pairs, True, True, 24),
        ("nospecial", ["--no-special"], lines[:3000], False, False, None),
    ]


def line_hash(ids_text):
    return hashlib.blake2b(ids_text.encode(), digest_size=8).hexdigest()


def expected_path(vocab):
    return f"tests/text/data/expected_{vocab}.txt.gz"


def read_expected(path):
    """{mode: [hash, ...]} and {mode: {index: ids_text}} (full ids kept for a few lines)."""
    hashes, full = {}, {}
    cur = None
    with gzip.open(path, "rt", encoding="ascii") as f:
        for ln in f:
            ln = ln.rstrip("\n")
            if ln.startswith("@mode "):
                cur = ln.split()[1]
                hashes[cur] = []
                full[cur] = {}
            elif ln.startswith("="):
                idx, ids = ln[1:].split(":", 1)
                full[cur][int(idx)] = ids
            else:
                hashes[cur].append(ln)
    return hashes, full
