#!/usr/bin/env python3
"""Writes tests/cli/golden/tiny_llama_eval.json: what transformers computes for the bundled
models/tiny-llama on the first rows of data/sst2-mini/dev.tsv, for `loupe eval
--save-predictions` to be compared with row by row (tests/cli/eval_golden.sh).

models/tiny-llama is config-only: loupe draws its weights from "loupe_init_seed". To get those
exact weights into transformers, loupe itself writes them: `loupe train --lr 0 --max-steps 1
--save-model` (AdamW at learning rate 0 moves no weight, weight decay included), once as the
causal LM and once with --task seq-cls (the classification head drawn from the same seed).
Then, per row, unpadded (batch of one):
  - LlamaForCausalLM: the mean token loss transformers returns for labels = input_ids (it
    shifts inside: token t predicts t+1);
  - LlamaForSequenceClassification: the logits (the score head on the last token) and argmax.
The ids transformers' tokenizer gives are stored too, so a tokenizer mismatch shows as such.

usage: python3 tools/make_tiny_llama_eval_golden.py build/loupe [N_ROWS]
Needs torch and transformers (the global python3 has them).
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import AutoTokenizer, LlamaForCausalLM, LlamaForSequenceClassification

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "tiny-llama")
DATA = os.path.join(ROOT, "data", "sst2-mini", "dev.tsv")
OUT = os.path.join(ROOT, "tests", "cli", "golden", "tiny_llama_eval.json")


def loupe_weights(loupe, tmp, task):
    out = os.path.join(tmp, task)
    cmd = [loupe, "train", "--model", MODEL, "--task", task, "--train", DATA, "--eval", "none", "--lr", "0",
           "--max-steps", "1", "--batch-size", "2", "--threads", "1", "--quiet", "--peak-gflops", "1",
           "--output-dir", os.path.join(tmp, "runs"), "--run-id", task, "--save-model", out]
    subprocess.run(cmd, check=True)
    return out


def main():
    loupe = sys.argv[1]
    n_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rows = []
    with open(DATA, encoding="utf-8") as f:
        f.readline()
        for line in f:
            text, label = line.rstrip("\n").split("\t")
            rows.append((text, int(label)))
            if len(rows) == n_rows:
                break
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        lm_dir, cls_dir = loupe_weights(loupe, tmp, "causal-lm"), loupe_weights(loupe, tmp, "seq-cls")
        tok = AutoTokenizer.from_pretrained(lm_dir)
        lm = LlamaForCausalLM.from_pretrained(lm_dir, torch_dtype=torch.float64, attn_implementation="eager").eval()
        cls = LlamaForSequenceClassification.from_pretrained(cls_dir, torch_dtype=torch.float64,
                                                             attn_implementation="eager").eval()
        out_rows = []
        with torch.no_grad():
            for i, (text, label) in enumerate(rows):
                ids = tok(text, return_tensors="pt").input_ids
                loss = lm(input_ids=ids, labels=ids).loss.item()
                logits = cls(input_ids=ids).logits[0]
                out_rows.append({"row": i, "text": text, "label": label, "ids": ids[0].tolist(),
                                 "mean_loss": loss, "logits": logits.tolist(), "pred": int(logits.argmax())})
    doc = {"what": "transformers on models/tiny-llama (weights drawn by loupe from loupe_init_seed), "
                   "float64, one unpadded row at a time; see tools/make_tiny_llama_eval_golden.py",
           "data": "data/sst2-mini/dev.tsv", "rows": out_rows,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{OUT}: {len(out_rows)} rows")


if __name__ == "__main__":
    main()
