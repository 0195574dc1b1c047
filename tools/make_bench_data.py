#!/usr/bin/env python3
"""Generates data/bench-intents: the small labelled many-class set `loupe bench` runs on
when --data is absent. Shopping-intent classification like the seed's Amazon set (text,
labels, label_id; 16 product categories), in CSV, with a WordPiece vocab.txt covering it
and label_mappings.json. Pure Python, fixed seed: running it again gives the same bytes.

Each review names things of its category among filler, and a few borrow words of another
category, so a model has something to learn and cannot reach 100 %; 4 % of labels are
flipped. Lengths spread as real reviews do: a third are one sentence, a few run to twenty
(about 8 to 300 tokens).

usage: python3 tools/make_bench_data.py [--out data/bench-intents] [--seed 20261125] [--rows 960]
"""
import argparse
import csv
import json
import os
import random
import string

CATEGORIES = {
    "arts_crafts": ["paint set", "brushes", "canvas", "yarn", "knitting needles", "glue gun", "sketchbook",
                    "watercolors", "beads", "embroidery kit"],
    "automotive": ["car charger", "floor mats", "wiper blades", "tire gauge", "seat covers", "dash cam",
                   "jump starter", "motor oil", "air freshener", "steering wheel cover"],
    "baby": ["stroller", "diapers", "baby monitor", "pacifier", "car seat", "bottle warmer", "crib sheets",
             "teething ring", "baby wipes", "high chair"],
    "beauty": ["lipstick", "moisturizer", "shampoo", "mascara", "face serum", "nail polish", "hair dryer",
               "sunscreen", "perfume", "eyeliner"],
    "books": ["novel", "paperback", "hardcover", "cookbook", "biography", "audiobook", "textbook",
              "poetry collection", "graphic novel", "travel guide"],
    "clothing": ["jacket", "jeans", "sneakers", "dress", "sweater", "socks", "hoodie", "boots", "t-shirt",
                 "raincoat"],
    "electronics": ["headphones", "laptop", "phone case", "charger", "bluetooth speaker", "monitor", "keyboard",
                    "webcam", "smartwatch", "usb cable"],
    "garden": ["garden hose", "seeds", "planter", "lawn mower", "pruning shears", "fertilizer", "bird feeder",
               "watering can", "rake", "patio lights"],
    "grocery": ["coffee beans", "olive oil", "snack bars", "tea", "pasta", "spices", "cereal", "chocolate",
                "honey", "almonds"],
    "health": ["vitamins", "thermometer", "first aid kit", "protein powder", "blood pressure monitor",
               "heating pad", "face masks", "knee brace", "fish oil", "hand sanitizer"],
    "home_kitchen": ["blender", "frying pan", "knife set", "coffee maker", "bed sheets", "towels", "vacuum",
                     "toaster", "storage bins", "pillow"],
    "musical_instruments": ["guitar strings", "keyboard stand", "drum sticks", "ukulele", "microphone",
                            "guitar tuner", "violin bow", "amplifier", "capo", "piano bench"],
    "office": ["printer paper", "stapler", "desk chair", "pens", "notebooks", "label maker", "file folders",
               "whiteboard", "desk lamp", "paper shredder"],
    "pet_supplies": ["dog food", "cat litter", "leash", "chew toy", "fish tank", "bird cage", "pet bed",
                     "flea collar", "scratching post", "dog treats"],
    "sports_outdoors": ["yoga mat", "tent", "dumbbells", "water bottle", "bike helmet", "fishing rod",
                        "sleeping bag", "running shoes", "tennis racket", "hiking backpack"],
    "video_games": ["controller", "game console", "gaming headset", "video game", "gaming mouse",
                    "memory card", "charging dock", "racing wheel", "gift card for games", "vr headset"],
}

OPENERS = ["i bought the {x}", "ordered this {x}", "the {x} arrived", "my {x} came today",
           "got the {x} as a gift", "we tried the {x}", "this {x}", "returned the {x}",
           "looking for a better {x}", "second time buying the {x}"]
VERDICTS = ["works great", "broke after a week", "is exactly as described", "feels cheap",
            "was worth the price", "is smaller than expected", "exceeded my expectations",
            "arrived damaged", "does the job", "is a bit overpriced", "looks nice", "stopped working"]
FILLER = ["shipping was fast", "the box was dented", "customer service answered quickly",
          "i would recommend it to friends", "the instructions were unclear", "it took two weeks to arrive",
          "my wife loves it", "price went down a day later", "the color is a little off",
          "packaging could be better", "we use it every day", "it fits well in the apartment",
          "five stars overall", "not sure i would buy again", "the seller included a thank you note"]
LINKS = ["and", "but", "although", "because", "so", "also", "honestly", "overall"]


def sentence(rng, cat, other):
    items = CATEGORIES[cat]
    x = rng.choice(items if rng.random() > 0.12 else CATEGORIES[other])  # borrowed words blur classes
    parts = [rng.choice(OPENERS).format(x=x), rng.choice(VERDICTS)]
    if rng.random() < 0.5:
        parts += [rng.choice(LINKS), rng.choice(FILLER)]
    if rng.random() < 0.3:
        parts += [",", "the", rng.choice(items), rng.choice(VERDICTS)]
    return " ".join(parts) + rng.choice([" .", " !", " .", " ..."])


def n_sentences(rng):
    u = rng.random()
    if u < 0.33:
        return 1
    if u < 0.73:
        return rng.randint(2, 3)
    if u < 0.95:
        return rng.randint(4, 8)
    return rng.randint(10, 20)


def basic_tokens(text):
    """BERT's basic tokenizer on lowercase ASCII: whitespace splits, punctuation stands alone."""
    out, cur = [], ""
    for ch in text:
        if ch.isspace() or ch in string.punctuation:
            if cur:
                out.append(cur)
            cur = ""
            if ch in string.punctuation:
                out.append(ch)
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def write_atomic(path, text):
    with open(path + ".tmp", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="data/bench-intents")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--rows", type=int, default=960)
    ap.add_argument("--noise", type=float, default=0.04)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    names = sorted(CATEGORIES)
    rows = []
    for i in range(a.rows):
        cat = names[i % len(names)]
        other = rng.choice([n for n in names if n != cat])
        text = " ".join(sentence(rng, cat, other) for _ in range(n_sentences(rng)))
        label = rng.choice(names) if rng.random() < a.noise else cat
        rows.append((text, label, names.index(label)))
    rng.shuffle(rows)
    os.makedirs(a.out, exist_ok=True)

    class Buf:
        def __init__(self):
            self.parts = []

        def write(self, s):
            self.parts.append(s)

    buf = Buf()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["text", "labels", "label_id"])
    w.writerows(rows)
    write_atomic(os.path.join(a.out, "val.csv"), "".join(buf.parts))
    mapping = {"label2id": {n: i for i, n in enumerate(names)},
               "id2label": {str(i): n for i, n in enumerate(names)}, "num_labels": len(names)}
    write_atomic(os.path.join(a.out, "label_mappings.json"), json.dumps(mapping, indent=2) + "\n")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [chr(c) for c in range(33, 127) if not chr(c).isupper()]
    pieces = ["##" + c for c in string.ascii_lowercase + string.digits]
    words = sorted({t for r in rows for t in basic_tokens(r[0])})
    vocab, seen = [], set()
    for tok in specials + chars + pieces + words:
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)
    write_atomic(os.path.join(a.out, "vocab.txt"), "\n".join(vocab) + "\n")
    lens = sorted(len(basic_tokens(r[0])) + 2 for r in rows)
    print(f"{a.out}: {len(rows)} rows, {len(names)} classes, vocab {len(vocab)}, "
          f"words+2 per row min {lens[0]} median {lens[len(lens) // 2]} max {lens[-1]}")


if __name__ == "__main__":
    main()
