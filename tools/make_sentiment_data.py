#!/usr/bin/env python3
"""Generates data/sst2-mini: a small synthetic sentiment dataset in GLUE SST-2's TSV form
(train.tsv, dev.tsv: "sentence<TAB>label", 0 = negative, 1 = positive) and a WordPiece
vocab.txt covering it. Pure Python, fixed seed: running it again gives the same bytes.

The sentences are templated but varied: polar words with intensifiers, negation ("not
good", "never boring"), contrast ("X but Y": the label follows the clause after "but"),
concessions ("although X , Y"), neutral filler, and 3 % label noise, so a model has
something real to learn and a bag-of-words model cannot reach 100 %.

usage: python3 tools/make_sentiment_data.py [--out data/sst2-mini] [--seed 20261122]
"""
import argparse
import os
import random
import string

MOVIE_SUBJECTS = [
    "the movie", "this film", "the plot", "the acting", "the soundtrack", "the ending",
    "the cast", "the script", "the cinematography", "the dialogue", "the pacing",
    "the story", "the lead actor", "the director's latest", "the sequel", "the documentary",
    "the special effects", "the score", "the first half", "the final act", "the villain",
    "this comedy", "this thriller", "the animation", "the screenplay", "the performances",
]
PRODUCT_SUBJECTS = [
    "this phone", "the battery", "the headphones", "the blender", "the laptop", "the screen",
    "the customer service", "the packaging", "the keyboard", "this vacuum", "the charger",
    "the camera", "the speaker", "this backpack", "the coffee maker", "the mattress",
    "the app", "the printer", "this jacket", "the delivery", "the sound quality",
    "the build quality", "the instructions", "the remote", "this kettle", "the tablet",
]
SUBJECTS = MOVIE_SUBJECTS + PRODUCT_SUBJECTS

POSITIVE = [
    "good", "great", "superb", "excellent", "wonderful", "delightful", "brilliant", "charming",
    "gripping", "solid", "reliable", "impressive", "fantastic", "moving", "enjoyable", "fun",
    "sturdy", "beautiful", "clever", "fresh", "smooth", "responsive", "comfortable", "memorable",
    "stunning", "heartfelt", "polished", "satisfying", "amazing", "lovely", "terrific",
    "outstanding", "engaging", "thoughtful", "elegant", "funny", "powerful", "flawless",
]
NEGATIVE = [
    "bad", "terrible", "awful", "dull", "boring", "disappointing", "flimsy", "clumsy", "tedious",
    "mediocre", "weak", "poor", "sloppy", "bland", "confusing", "annoying", "broken", "cheap",
    "predictable", "forgettable", "painful", "slow", "noisy", "unreliable", "overpriced",
    "lifeless", "shallow", "messy", "frustrating", "useless", "horrible", "dreadful", "clunky",
    "pointless", "tiresome", "uneven", "awkward", "stale",
]
INTENSIFIERS = [
    "very", "really", "extremely", "incredibly", "truly", "remarkably", "quite", "so",
    "absolutely", "surprisingly", "rather", "somewhat", "genuinely", "utterly", "pretty",
]
BE = ["was", "is", "felt", "seemed", "turned out to be", "looked"]
NEGATORS = ["not", "never", "hardly", "not at all", "far from", "anything but", "by no means"]
POS_VERBS = ["loved", "enjoyed", "adored", "liked", "admired", "appreciated", "treasured"]
NEG_VERBS = ["hated", "disliked", "regretted buying", "could not stand", "was annoyed by",
             "got tired of", "returned"]
POS_PHRASES = [
    "worth every penny", "a must see", "highly recommended", "i would buy it again",
    "two thumbs up", "a real gem", "exceeded my expectations", "a pleasant surprise",
    "i would watch it again", "five stars from me", "a joy from start to finish",
]
NEG_PHRASES = [
    "a waste of money", "a waste of time", "avoid it", "i want my money back",
    "a complete letdown", "i would not recommend it", "one star from me",
    "a total mess", "it fell apart after a week", "i walked out halfway", "never again",
]
FILLER = [
    "i watched it on a sunday afternoon", "we bought it last month", "it arrived on tuesday",
    "my brother recommended it", "the running time is about two hours", "it comes in blue and black",
    "i saw it with friends", "i ordered it online", "it was on sale", "i read the reviews first",
    "we used it for a few weeks", "the box was the usual size", "it opened in most theaters in may",
    "the price was about average", "i tried it at home", "my kids watched it too",
    "it was my first purchase from this brand", "i went in with no expectations",
]
NOUNS = ["film", "movie", "product", "purchase", "experience", "story", "device", "gadget", "show"]


def polar(p):
    return random.choice(POSITIVE if p else NEGATIVE)


def maybe_intens(prob=0.4):
    return random.choice(INTENSIFIERS) + " " if random.random() < prob else ""


def clause(p):
    """A clause whose sentiment is p (1 positive, 0 negative)."""
    r = random.random()
    subj = random.choice(SUBJECTS)
    if r < 0.50:
        return f"{subj} {random.choice(BE)} {maybe_intens()}{polar(p)}"
    if r < 0.64:  # negation flips the adjective
        neg = random.choice(NEGATORS)
        return f"{subj} {random.choice(BE)} {neg} {maybe_intens(0.2)}{polar(1 - p)}"
    if r < 0.76:
        verb = random.choice(POS_VERBS if p else NEG_VERBS)
        adv = random.choice(["really ", "truly ", "genuinely ", "absolutely ", "", "", ""])
        return f"i {adv}{verb} {subj}"
    if r < 0.86:
        return f"a {maybe_intens(0.5)}{polar(p)} {random.choice(NOUNS)}"
    if r < 0.94:
        return random.choice(POS_PHRASES if p else NEG_PHRASES)
    if r < 0.97:  # "i did not enjoy" is negative, "i did not hate" mildly positive
        verb = random.choice(["enjoy", "like", "love"]) if not p else random.choice(["hate", "mind", "regret"])
        return f"i did not {verb} {subj}"
    return f"there is nothing {polar(1 - p)} about {subj}"


def sentence(p):
    r = random.random()
    if r < 0.42:
        s = clause(p)
    elif r < 0.56:
        s = f"{clause(p)} and {clause(p)}"
    elif r < 0.72:  # contrast: the label follows the clause after "but"
        s = f"{clause(1 - p)} , but {clause(p)}" if random.random() < 0.5 else f"{clause(1 - p)} but {clause(p)}"
    elif r < 0.78:
        s = f"although {clause(1 - p)} , {clause(p)}"
    elif r < 0.82:
        s = f"{clause(1 - p)} , yet {clause(p)}"
    elif r < 0.93:
        s = f"{random.choice(FILLER)} and {clause(p)}" if random.random() < 0.5 else f"{clause(p)} ; {random.choice(FILLER)}"
    else:
        s = f"{random.choice(FILLER)} , {clause(p)} , {random.choice(['honestly', 'overall', 'in the end', 'to be fair'])}"
    s = s + random.choice([" .", " .", " !", ""])
    return " ".join(s.split())


def generate(n, seen, noise):
    rows = []
    wanted = [i % 2 for i in range(n)]  # balanced true labels, in random order
    random.shuffle(wanted)
    while len(rows) < n:
        p = wanted[len(rows)]
        s = sentence(p)
        if s in seen:
            continue
        seen.add(s)
        label = 1 - p if random.random() < noise else p
        rows.append((s, label))
    return rows


def write_tsv(path, rows):
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        f.write("sentence\tlabel\n")
        for s, label in rows:
            assert "\t" not in s and "\n" not in s
            f.write(f"{s} \t{label}\n")  # SST-2 sentences end in a space before the tab
    os.replace(path + ".tmp", path)


def basic_tokens(text):
    """BERT's basic tokenizer on lowercase ASCII: split on spaces, punctuation alone."""
    out, cur = [], ""
    for ch in text:
        if ch.isspace():
            if cur:
                out.append(cur)
            cur = ""
        elif ch in string.punctuation:
            if cur:
                out.append(cur)
            out.append(ch)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def write_vocab(path, sentences):
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [chr(c) for c in range(33, 127) if not chr(c).isupper()]
    pieces = ["##" + c for c in string.ascii_lowercase + string.digits]
    suffixes = ["##s", "##es", "##ed", "##ing", "##ly", "##er", "##est", "##ness", "##able",
                "##ful", "##less", "##ment", "##tion", "##ity", "##y", "##al", "##ive", "##ous"]
    words = sorted({t for s in sentences for t in basic_tokens(s.lower())})
    vocab, seen = [], set()
    for tok in specials + chars + pieces + suffixes + words:
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(vocab) + "\n")
    os.replace(path + ".tmp", path)
    return len(vocab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="data/sst2-mini")
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--train", type=int, default=4000)
    ap.add_argument("--dev", type=int, default=500)
    ap.add_argument("--noise", type=float, default=0.03)
    a = ap.parse_args()
    random.seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    seen = set()
    train = generate(a.train, seen, a.noise)
    dev = generate(a.dev, seen, a.noise)  # `seen` keeps dev sentences out of train
    assert not {s for s, _ in train} & {s for s, _ in dev}
    write_tsv(os.path.join(a.out, "train.tsv"), train)
    write_tsv(os.path.join(a.out, "dev.tsv"), dev)
    nv = write_vocab(os.path.join(a.out, "vocab.txt"), [s for s, _ in train + dev])
    pos_tr = sum(l for _, l in train)
    pos_dev = sum(l for _, l in dev)
    print(f"train {len(train)} ({pos_tr} positive), dev {len(dev)} ({pos_dev} positive), vocab {nv}")


if __name__ == "__main__":
    main()
