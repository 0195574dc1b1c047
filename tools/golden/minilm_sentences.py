# The 200 sentences of the all-MiniLM-L6-v2 golden: short and long, punctuation, numbers,
# accents, non-Latin scripts, emoji, control/odd whitespace, empty-ish lines and texts
# longer than the model's 256-token limit (truncation). Deterministic: fixed lists only.

HANDWRITTEN = [
    "",
    " ",
    "   \t  ",
    ".",
    "?!",
    "a",
    "I",
    "Hello",
    "hello world",
    "Hello, World!",
    "HELLO WORLD!!!",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "This movie was absolutely fantastic; I'd watch it again tomorrow.",
    "Worst purchase ever. Broke after 2 days :(",
    "The package arrived on 2024-03-15 at 09:42 AM.",
    "Call me at +1 (555) 012-3456 or e-mail jane.doe@example.com.",
    "Visit https://example.org/path?query=1&lang=en#section for details.",
    "Price: $1,299.99 (excl. 19% VAT) -- limited offer!",
    "3.14159 26535 89793 23846 26433 83279",
    "The answer is 42.",
    "0",
    "1234567890",
    "e = mc^2, a^2 + b^2 = c^2, and 1/3 ~ 0.333...",
    "It's a dog's life, isn't it? They're here; we'll see.",
    "\"Quoted text,\" she said, 'with nested quotes.'",
    "Parentheses (like these), brackets [like these] and braces {like these}.",
    "snake_case_identifier and camelCaseIdentifier and kebab-case-identifier",
    "C++ vs. C# vs. F#: which one?",
    "#hashtag @mention $TICKER %percent &ampersand *star",
    "...",
    "--- *** ___ ===",
    "Mr. Smith went to Washington D.C. on Jan. 5th.",
    "U.S.A., U.K., E.U. and the U.N. met in N.Y.C.",
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e na\u00efve r\u00e9sum\u00e9 fa\u00e7ade",
    "El ni\u00f1o comi\u00f3 pi\u00f1a en Espa\u00f1a.",
    "Stra\u00dfe, \u00dcbergr\u00f6\u00dfentr\u00e4ger und M\u00e4dchen.",
    "Je pense, donc je suis.",
    "Der schnelle braune Fuchs springt \u00fcber den faulen Hund.",
    "La vida es sue\u00f1o, y los sue\u00f1os, sue\u00f1os son.",
    "Il gatto \u00e8 sul tavolo.",
    "O rato roeu a roupa do rei de Roma.",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u041c\u043e\u0441\u043a\u0432\u0430 \u2014 \u0441\u0442\u043e\u043b\u0438\u0446\u0430 \u0420\u043e\u0441\u0441\u0438\u0438.",
    "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5",
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002",
    "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8",
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
    "\ud55c\uad6d\uc5b4\ub294 \uc544\ub984\ub2f5\ub2e4.",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    "Xin ch\u00e0o th\u1ebf gi\u1edbi",
    "T\u00fcrk\u00e7e \u00e7ok g\u00fczel bir dil.",
    "Cze\u015b\u0107, jak si\u0119 masz? \u017b\u00f3\u0142w.",
    "I love pizza \U0001F355\U0001F355\U0001F355",
    "\U0001F600\U0001F603\U0001F604\U0001F601",
    "\U0001F44D",
    "Family: \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 and flags \U0001F1EB\U0001F1F7 \U0001F1EF\U0001F1F5",
    "Skin tones \U0001F44B\U0001F3FB \U0001F44B\U0001F3FF and hearts \u2764\ufe0f\U0001F499",
    "Math symbols: \u2200x \u2208 \u211d, \u2203y \u2264 \u221e, \u2211 \u220f \u222b \u221a2 \u2248 1.414",
    "Currency: \u20ac100, \u00a350, \u00a51000, \u20b9500, \u20bf0.01",
    "Arrows \u2190 \u2192 \u2191 \u2193 \u21d2 and boxes \u2500\u2502\u250c\u2510",
    "Full\uff0dwidth \uff21\uff22\uff23 \uff11\uff12\uff13 letters",
    "Ligature \ufb01 and \ufb02 and \u2126 ohm and \u212b angstrom",
    "Combining: e\u0301 a\u0300 o\u0308 n\u0303 (decomposed accents)",
    "Zero\u200bwidth\u200bspace and soft\u00adhyphen",
    "Tabs\tbetween\twords",
    "Line one\nLine two\nLine three",
    "Windows line\r\nending",
    "Non\u00a0breaking\u00a0spaces",
    "trailing spaces   ",
    "   leading spaces",
    "multiple     internal     spaces",
    "ALL CAPS SENTENCE ABOUT NOTHING IN PARTICULAR",
    "MiXeD cAsE tExT iS hArD tO rEaD",
    "unbelievably uncharacteristically antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "Supercalifragilisticexpialidocious!",
    "xyzzy plugh qwertyuiop asdfghjkl zxcvbnm",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "The the the the the the the the the the.",
    "def main(): return 0 if x > 1 else -1",
    "SELECT * FROM users WHERE id = 7;",
    "<html><body><p>Hi</p></body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "git commit -m 'fix: off-by-one in tokenizer'",
    "/usr/local/bin/python3 --version",
    "C:\\Program Files\\App\\app.exe",
    "The meeting is at 10:30-11:45 (UTC+02:00).",
    "Temperatures ranged from -40\u00b0C to +45\u00b0C.",
    "She scored 98.6% on the test, up from 87.2%.",
    "Room 101, Floor 3B, Building #7",
    "ISBN 978-3-16-148410-0",
    "v1.2.3-rc.4+build.567",
    "1st, 2nd, 3rd, 4th, 21st, 101st",
    "It cost 3x more than the 2x version.",
    "Deep learning models require large amounts of data.",
    "Transformers use self-attention to model relationships between tokens.",
    "The stock market crashed yesterday.",
    "Investors are worried about inflation.",
    "The cat sat on the mat.",
    "A cat is sitting on a mat.",
    "The dog chased the ball across the park.",
    "How do I reset my password?",
    "I forgot my password, how can I change it?",
    "What is the capital of France?",
    "Paris is the capital of France.",
    "Berlin is the capital of Germany.",
    "Can you recommend a good book?",
    "Thank you so much for your help!",
    "No.",
    "Yes!",
    "Maybe...",
    "Why?",
    "OK",
]

_SUBJECTS = ["The engineer", "A small child", "My neighbour", "The committee", "An old fisherman",
             "The robot", "Our teacher", "A tourist", "The orchestra", "The startup"]
_VERBS = ["repaired", "painted", "discussed", "ignored", "celebrated", "measured", "sold",
          "photographed", "rebuilt", "described"]
_OBJECTS = ["the broken bridge", "a red bicycle", "the quarterly budget", "an ancient map",
            "the noisy generator", "three wooden chairs", "the final report",
            "a mysterious letter", "the garden fence", "the new website"]
_TAILS = ["yesterday.", "in 1987.", "for 2 hours!", "without any help?", "(again).",
          "at 7:15 pm.", "- surprisingly.", "on the 3rd of May;", "with 100% effort.", "..."]


def _generated(count):
    out = []
    for i in range(count):
        s = "%s %s %s %s" % (_SUBJECTS[i % 10], _VERBS[(i * 3 + 1) % 10],
                             _OBJECTS[(i * 7 + 2) % 10], _TAILS[(i * 9 + 5) % 10])
        out.append(s)
    return out


def _long_texts():
    para = ("Fine-tuning a pre-trained transformer on a downstream task usually requires far "
            "less data than training from scratch, because the model has already learned "
            "useful representations of syntax and semantics during pre-training. ")
    # ~40 tokens per copy: 3 copies fit, 9 copies exceed the 256-token limit (truncated).
    return [para * 3, para * 9, " ".join(str(i) for i in range(400)),
            "\U0001F600 " * 300]


def sentences():
    long_ = _long_texts()
    n_gen = 200 - len(HANDWRITTEN) - len(long_)
    s = HANDWRITTEN + _generated(n_gen) + long_
    assert len(s) == 200, len(s)
    return s
