#!/usr/bin/env python3
"""Generates the tokenizer differential-test corpus: >= 20,000 varied lines (fixed seed),
written as raw bytes, one line per '\\n', gzip-compressed.

Lines mix English prose, many scripts (CJK, kana, Hangul, Arabic, Hebrew, Cyrillic, Greek,
Devanagari, Thai), emoji (skin tones, ZWJ sequences, flags, keycaps), combining accents
(NFD and NFC forms), digits and numbers, whitespace runs (tabs, \\r, NBSP, ideographic
space, U+2028), code, URLs, very long words, control characters, special-token strings
([CLS], <|endoftext|>) and invalid UTF-8 (stray continuation bytes, truncated and overlong
sequences, surrogates, bytes F5..FF). Lines never contain '\\n'.

usage: make_tokenizer_corpus.py OUT.txt.gz [N_LINES]
"""
import gzip
import random
import sys

WORDS = ("the of and to in is was for that with as on by at from his her it an were are which this be or "
         "has had not but have they you one all their there been its who new after more first would also "
         "people time year about state world school city between house government during many system "
         "tokenizer transformer attention gradient embedding profiler memory kernel batch latency "
         "unbelievable internationalization antidisestablishmentarianism Pneumonoultramicroscopic "
         "don't can't won't it's we're they've I'm you'll he'd She'S WE'RE O'Neill rock'n'roll").split()
SCRIPTS = {
    "zh": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明",
    "ja": "こんにちは世界ありがとうございますカタカナひらがな漢字東京大阪ですます。、「」ー",
    "ko": "안녕하세요세계한국어문장입니다감사합니다",
    "ar": "مرحبا بالعالم هذه جملة عربية للاختبار",
    "he": "שלום עולם זה משפט בעברית",
    "ru": "Привет мир это предложение на русском языке Ёлка",
    "el": "Γειά σου κόσμε αυτή είναι μια πρόταση ΣΊΣΥΦΟΣ",
    "hi": "नमस्ते दुनिया यह हिंदी वाक्य है क्षत्रिय",
    "th": "สวัสดีชาวโลกนี่คือประโยคภาษาไทย",
    "latin": "café naïve résumé Ångström Straße İstanbul ıi ſ K Œuvre façade jalapeño Dvořák Łódź",
}
EMOJI = ["🙂", "😀", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "1️⃣", "❤️", "🫠", "🫨", "🧑🏿‍🚀", "✌🏻",
         "🐈‍⬛", "😶‍🌫️", "🔥", "💯", "©", "™"]
COMBINING = ["\u0301", "\u0300", "\u0308", "\u0327", "\u030a", "\u0303", "\u20dd", "\u0345", "\u05b4", "\u093c"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\r", " \r", "\u00a0", "\u3000", "\u2028", "\u2009", "\u200b", "\u0085",
          "\x0b", "\x0c", "\u1680", "\u202f", "          "]
CONTROLS = ["\x00", "\x01", "\x07", "\x1b", "\x1f", "\x7f", "\u00ad", "\u200d", "\u200e", "\ufeff", "\ufffd",
            "\ue000", "\U000f0000", "\u0378", "\U000e0001"]
SPECIALS = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "[cls]", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
            "<|endoftext|", "<|extra_3|>", "<repo_name>", "<file_sep>", "<s>", "</s>"]
CODE = ["def f(x):\treturn x**2 + 1", "int main(void) { return 0; }", "for (i = 0; i < n; i++) a[i] += b[i];",
        "if x != None and y >= 3: print(f\"{x!r}\")", "SELECT * FROM t WHERE id = 42;", "{\"key\": [1, 2.5, null]}",
        "#include <stdio.h>", "x = np.zeros((3, 4), dtype=np.float32)", "git commit -m 'fix: off-by-one'",
        "console.log(`${a} => ${b}`);", "<div class=\"x\">&amp;</div>", "$ ./run.sh --flag=1 2>&1 | tee log"]
URLS = ["https://huggingface.co/docs/tokenizers/index", "http://example.com/a/b?c=1&d=%20e#frag",
        "ftp://files.example.org/pub/file-1.2.3.tar.gz", "user.name+tag@example.co.uk", "/usr/local/lib/libpcre2.so.0",
        "C:\\Users\\me\\Documents\\report_v2.docx", "www.test.io:8080/path_with_underscores"]
INVALID = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xf5\x80\x80\x80",
           b"\xff", b"\xfe\xff", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xc2\xc2\xa9", b"\xf0\x90\x80"]


def number(r):
    k = r.randrange(8)
    if k == 0:
        return str(r.randrange(10))
    if k == 1:
        return str(r.randrange(10 ** r.randrange(2, 12)))
    if k == 2:
        return f"{r.uniform(-1000, 1000):.{r.randrange(1, 6)}f}"
    if k == 3:
        return f"{r.randrange(1, 10**7):,}"
    if k == 4:
        return f"{r.randrange(1900, 2100)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}"
    if k == 5:
        return "".join(r.choice("٠١٢٣٤٥٦٧٨٩") for _ in range(r.randrange(1, 5)))  # Arabic-Indic digits
    if k == 6:
        return f"{r.randrange(100)}%" if r.random() < 0.5 else f"${r.randrange(10**5)}.{r.randrange(100):02d}"
    return "".join(r.choice("0123456789") for _ in range(r.randrange(20, 60)))


def english(r, n):
    out = []
    for i in range(n):
        w = r.choice(WORDS)
        if r.random() < 0.1:
            w = w.capitalize()
        elif r.random() < 0.03:
            w = w.upper()
        out.append(w)
        if r.random() < 0.12:
            out[-1] += r.choice(",.;:!?\"')")
        if r.random() < 0.05:
            out.append(number(r))
    return " ".join(out)


def script_text(r):
    name = r.choice(list(SCRIPTS))
    s = SCRIPTS[name]
    if name in ("zh", "ja", "th", "ko"):
        return "".join(r.choice(s) for _ in range(r.randrange(1, 30)))
    words = s.split()
    return " ".join(r.choice(words) for _ in range(r.randrange(1, 10)))


def random_unicode(r, n):
    ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x6ff),
              (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f), (0x2190, 0x22ff), (0x3000, 0x30ff),
              (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xf900, 0xfaff), (0xff00, 0xffef), (0x1d400, 0x1d7ff),
              (0x1f300, 0x1faff), (0x20000, 0x2a6df), (0x2f800, 0x2fa1f)]
    out = []
    for _ in range(n):
        lo, hi = r.choice(ranges)
        out.append(chr(r.randrange(lo, hi + 1)))
    return "".join(out)


def piece(r):
    k = r.randrange(100)
    if k < 30:
        return english(r, r.randrange(1, 25))
    if k < 45:
        return script_text(r)
    if k < 52:
        return "".join(r.choice(EMOJI) for _ in range(r.randrange(1, 5)))
    if k < 58:
        base = r.choice("aeiouAEIOUnc")
        return "".join(base + r.choice(COMBINING) * r.randrange(1, 3) for _ in range(r.randrange(1, 4)))
    if k < 64:
        return number(r)
    if k < 70:
        return r.choice(CODE)
    if k < 74:
        return r.choice(URLS)
    if k < 78:
        c = r.choice("abcxyzé日0-_.")
        return c * r.randrange(50, 300) if r.random() < 0.5 else "".join(
            r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randrange(90, 250)))
    if k < 83:
        return random_unicode(r, r.randrange(1, 20))
    if k < 88:
        return r.choice(SPECIALS)
    if k < 93:
        return "".join(r.choice(CONTROLS) for _ in range(r.randrange(1, 4)))
    return r.choice(SPACES) * r.randrange(1, 4)


def line(r):
    k = r.random()
    if k < 0.01:
        return b""
    if k < 0.02:
        return r.choice(SPACES).encode() * r.randrange(1, 6)
    parts = []
    for _ in range(r.randrange(1, 6)):
        parts.append(piece(r))
        parts.append(r.choice(SPACES) if r.random() < 0.3 else " ")
    if r.random() < 0.5:
        parts.pop()
    b = "".join(parts).replace("\n", " ").encode("utf-8")
    if r.random() < 0.06:  # splice invalid UTF-8 at a random byte position
        for _ in range(r.randrange(1, 3)):
            at = r.randrange(len(b) + 1)
            b = b[:at] + r.choice(INVALID) + b[at:]
    return b


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    r = random.Random(20261122)
    lines = [line(r) for _ in range(n)]
    with gzip.GzipFile(sys.argv[1], "wb", mtime=0) as f:
        f.write(b"\n".join(lines) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
