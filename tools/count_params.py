#!/usr/bin/env python3
"""Counts a Hugging Face model's parameters with transformers, as loupe inspect must.

usage: python3 tools/count_params.py MODEL_DIR [--task base|seq-cls]

Loads the model the way its config.json says (AutoModel for a base architecture,
AutoModelForSequenceClassification for seq-cls) and prints sum(p.numel()) over
model.parameters(), which counts tied weights once, plus the split loupe prints.
Used to obtain the expected count committed in tests/io/test_minilm.c; needs torch
and transformers (the global python3 on the development machine has them).
"""
import argparse
import json

import torch  # noqa: F401  (transformers needs it; imported first for a clear error)
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--task", default="base", choices=["base", "seq-cls"])
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.model_dir)
    cls = AutoModel if a.task == "base" else AutoModelForSequenceClassification
    model = cls.from_pretrained(a.model_dir, config=cfg)
    total = sum(p.numel() for p in model.parameters())
    emb = sum(p.numel() for n, p in model.named_parameters() if ".embeddings." in "." + n or "embed_tokens" in n)
    layers = sum(p.numel() for n, p in model.named_parameters() if ".layer." in n or ".layers." in n)
    print(json.dumps({"architecture": cfg.architectures[0] if cfg.architectures else cfg.model_type,
                      "class": type(model).__name__, "total": total, "embeddings": emb, "layers": layers,
                      "other": total - emb - layers}))


if __name__ == "__main__":
    main()
