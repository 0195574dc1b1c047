#!/usr/bin/env python3
"""Golden for `loupe bench`'s accuracy: a tiny BertForSequenceClassification (16 labels,
the bundled data/bench-intents set's classes and vocabulary) trained briefly with torch so
its predictions mean something, then evaluated by transformers on the whole set exactly as
the bench's full pass does (model.eval(), no_grad, truncation at 128 tokens, dynamic
padding). golden.json holds every row's prediction, the top-1 minus top-2 logit margin
(rows with a tiny margin may flip on float32 noise) and the accuracy.

usage: python3 tools/golden/gen_bench_cls.py --out tests/golden/bench_cls
"""
import csv
import json
import os

import golden_common as gc

gc.setup()

import torch  # noqa: E402  (after setup fixed threads and seeds)
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer  # noqa: E402

DATA = "data/bench-intents"
MAX_LEN = 128
EVAL_BATCH = 16


def main():
    out = gc.parse_out(__doc__.split("\n")[0])
    gc.fresh_dir(out)
    with open(os.path.join(DATA, "val.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    texts = [r["text"] for r in rows]
    names = sorted({r["labels"] for r in rows})  # loupe's label map from data: names by bytes
    labels = torch.tensor([names.index(r["labels"]) for r in rows])
    with open(os.path.join(DATA, "vocab.txt"), encoding="utf-8") as f:
        vocab = f.read().split("\n")[:-1]
    # transformers 5 ignores vocab_file= here: hand it the vocabulary itself
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    assert tok("the")["input_ids"][1] == vocab.index("the")
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=MAX_LEN, num_labels=len(names),
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     id2label={i: n for i, n in enumerate(names)}, label2id={n: i for i, n in enumerate(names)})
    model = BertForSequenceClassification(cfg)
    enc = tok(texts, truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(gc.SEED)
    model.train()
    for epoch in range(10):
        perm = torch.randperm(len(texts), generator=g)
        for s in range(0, len(texts), 32):
            idx = perm[s:s + 32]
            loss = model(input_ids=enc["input_ids"][idx], attention_mask=enc["attention_mask"][idx],
                         token_type_ids=enc["token_type_ids"][idx], labels=labels[idx]).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    preds, margins = [], []
    with torch.no_grad():
        for s in range(0, len(texts), EVAL_BATCH):
            b = tok(texts[s:s + EVAL_BATCH], truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt")
            logits = model(**b).logits
            top = torch.topk(logits, 2, dim=1).values
            preds += logits.argmax(1).tolist()
            margins += (top[:, 0] - top[:, 1]).tolist()
    acc = sum(int(p == y) for p, y in zip(preds, labels.tolist())) / len(preds)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(line for line in open(os.path.join(DATA, "vocab.txt"), encoding="utf-8")))
    meta = {"what": "tiny BERT classifier trained on data/bench-intents; transformers' predictions on every row",
            "versions": gc.versions(), "seed": gc.SEED, "data": os.path.join(DATA, "val.csv"),
            "data_sha256": gc.sha256_file(os.path.join(DATA, "val.csv")), "max_length": MAX_LEN,
            "eval_batch_size": EVAL_BATCH, "labels": names, "accuracy": acc, "predictions": preds,
            "margins": [round(m, 6) for m in margins], "min_margin": min(margins)}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"{out}: accuracy {acc:.4f} on {len(preds)} rows, smallest top-2 margin {min(margins):.2e}")


if __name__ == "__main__":
    main()
