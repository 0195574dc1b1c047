"""Ecosystem check (run by hand; CI has no torch): a model that `loupe train --save-model`
wrote loads in transformers (AutoModelForSequenceClassification + AutoTokenizer) and gives
the same evaluation on data/sst2-mini/dev.tsv as loupe reported in summary.json: equal
accuracy and eval loss within 1e-4.

Usage: python3 tools/check_saved_model_transformers.py [LOUPE_BINARY] [--max-steps N]"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
loupe = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else os.path.join(root, "build", "loupe")
steps = sys.argv[sys.argv.index("--max-steps") + 1] if "--max-steps" in sys.argv else "60"
work = tempfile.mkdtemp(prefix="lp_hf_check_")
model_dir = os.path.join(work, "model")
subprocess.run([loupe, "train", "--max-steps", steps, "--threads", "1", "--quiet", "--output-dir", work,
                "--run-id", "r", "--save-model", model_dir], check=True, cwd=root)
summary = json.load(open(os.path.join(work, "r", "summary.json")))

tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(root, "data/sst2-mini/dev.tsv"))][1:]
loss_sum, correct = 0.0, 0
with torch.no_grad():
    for i in range(0, len(rows), 16):  # loupe evaluates in batches of --batch-size (16)
        b = rows[i:i + 16]
        enc = tok([r[0] for r in b], padding=True, truncation=True, max_length=128, return_tensors="pt")
        labels = torch.tensor([int(r[1]) for r in b])
        out = model(**enc, labels=labels)
        loss_sum += out.loss.item() * len(b)
        correct += (out.logits.argmax(-1) == labels).sum().item()
acc, loss = correct / len(rows), loss_sum / len(rows)
print(f"transformers: {type(model).__name__}, id2label {model.config.id2label}")
print(f"transformers eval: loss {loss:.6f}, accuracy {acc:.4f}")
print(f"loupe eval:        loss {summary['eval']['loss']:.6f}, accuracy {summary['eval']['accuracy']:.4f}")
ok = abs(acc - summary["eval"]["accuracy"]) < 1e-9 and abs(loss - summary["eval"]["loss"]) < 1e-4
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
