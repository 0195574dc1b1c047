#!/usr/bin/env python3
"""Writes a small instruction set a 135M model can visibly learn: two-digit arithmetic, unit
conversions and date reformatting, as {"prompt", "response"} JSONL rows. Deterministic from
--seed; the eval split holds questions that never occur in train (held out by their exact
prompt), so exact match on it measures what was learned, not what was memorised.

    python3 tools/make_instruct_set.py --out data/instruct-mini --seed 12
    loupe train --model $(tools/smollm2_gguf.sh) --data data/instruct-mini --method lora
"""
import argparse
import json
import os
import random

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
DAYS_IN = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def arithmetic(r):
    a, b = r.randint(10, 99), r.randint(10, 99)
    op = r.choice("+-*")
    if op == "-" and b > a:
        a, b = b, a
    if op == "*":
        b = r.randint(2, 9)
    val = a + b if op == "+" else a - b if op == "-" else a * b
    return f"What is {a} {op} {b}? Answer with the number only.", str(val)


UNITS = [  # (from, to, factor): answers are whole numbers
    ("km", "m", 1000), ("m", "cm", 100), ("kg", "g", 1000), ("hours", "minutes", 60), ("minutes", "seconds", 60),
    ("L", "mL", 1000), ("days", "hours", 24), ("weeks", "days", 7),
]


def conversion(r):
    f, t, k = r.choice(UNITS)
    x = r.randint(2, 60)  # 8 units x 59 values: room for 600 rows without repeats
    return f"Convert {x} {f} to {t}. Answer with the number only.", str(x * k)


def date_format(r):
    y, m = r.randint(1990, 2030), r.randint(1, 12)
    d = r.randint(1, DAYS_IN[m - 1])
    if r.random() < 0.5:
        return f"Write {MONTHS[m - 1]} {d}, {y} as YYYY-MM-DD.", f"{y:04d}-{m:02d}-{d:02d}"
    return f"Write {y:04d}-{m:02d}-{d:02d} as Month D, YYYY.", f"{MONTHS[m - 1]} {d}, {y}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/instruct-mini")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--train", type=int, default=600, help="training rows (a third of each kind)")
    ap.add_argument("--eval", type=int, default=60, help="held-out rows")
    a = ap.parse_args()
    r = random.Random(a.seed)
    kinds = [arithmetic, conversion, date_format]
    seen, ev, tr = set(), [], []
    while len(ev) < a.eval:  # the held-out questions first, so train can avoid them
        p, s = kinds[len(ev) % 3](r)
        if p not in seen:
            seen.add(p)
            ev.append((p, s))
    while len(tr) < a.train:
        p, s = kinds[len(tr) % 3](r)
        if p not in seen:
            seen.add(p)
            tr.append((p, s))
    os.makedirs(a.out, exist_ok=True)
    for name, rows in (("train.jsonl", tr), ("eval.jsonl", ev)):
        with open(os.path.join(a.out, name), "w", encoding="utf-8") as f:
            for p, s in rows:
                f.write(json.dumps({"prompt": p, "response": s}, ensure_ascii=False) + "\n")
    print(f"{a.out}: {len(tr)} train, {len(ev)} eval rows (seed {a.seed})")


if __name__ == "__main__":
    main()
