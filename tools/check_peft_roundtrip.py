#!/usr/bin/env python3
"""Checks that an adapter saved by loupe loads in PEFT and gives loupe's logits.

Runs `loupe train --method lora` for a few steps on a model directory (so lora_B and the head
are no longer their initial values), saving the adapter (--save-adapter) and the merged model
(--merge); then in Python (torch + transformers + peft, global python3): base model +
PeftModel.from_pretrained(adapter) and the merged model give the same logits on a batch, and
those equal the logits loupe computes for that batch when it reloads the adapter (loupe train
--adapter DIR --max-steps 1 --lr 0 would change nothing but is not an eval API, so loupe's
logits come from the merged model, which a separate C test holds equal to the unmerged one).

usage: python3 tools/check_peft_roundtrip.py [--loupe build/loupe] [--model DIR with model.safetensors]
"""
import argparse, json, os, subprocess, sys, tempfile

import torch
from peft import PeftModel, get_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loupe", default="build/loupe")
    ap.add_argument("--model", default="tests/golden/lora_distilbert")
    ap.add_argument("--targets", default="q,v,ffn_out,o")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lp_peft_rt_")
    ad, merged = os.path.join(tmp, "adapter"), os.path.join(tmp, "merged")
    cmd = [args.loupe, "train", "--model", args.model, "--method", "lora", "--rank", "4", "--alpha", "8",
           "--targets", args.targets, "--max-steps", "5", "--batch-size", "8", "--lr", "5e-3", "--eval", "none",
           "--output-dir", tmp, "--run-id", "rt", "--save-adapter", ad, "--merge", merged, "--quiet"]
    subprocess.run(cmd, check=True)
    cfg = json.load(open(os.path.join(ad, "adapter_config.json")))
    keys = sorted(load_file(os.path.join(ad, "adapter_model.safetensors")).keys())
    print("adapter_config target_modules:", cfg["target_modules"], "r", cfg["r"], "alpha", cfg["lora_alpha"])
    print("adapter keys (%d):" % len(keys), keys[:4], "...")

    tok = AutoTokenizer.from_pretrained(args.model)
    batch = tok(["a gripping, funny film", "dull and far too long", "not bad at all", "the worst"],
                padding=True, return_tensors="pt")
    base = AutoModelForSequenceClassification.from_pretrained(args.model, dtype=torch.float32).eval()
    peft_model = PeftModel.from_pretrained(base, ad).eval()
    # every loupe tensor was loaded: PEFT's state has the same adapter and head values
    sd = load_file(os.path.join(ad, "adapter_model.safetensors"))
    mine = get_peft_model_state_dict(peft_model)
    assert sorted(mine.keys()) == sorted(sd.keys()), "PEFT's key set differs from loupe's"
    for k, v in sd.items():
        assert torch.equal(mine[k], v), "value of %s differs after loading" % k
    with torch.no_grad():
        lp = peft_model(**batch).logits
        lm = AutoModelForSequenceClassification.from_pretrained(merged, dtype=torch.float32).eval()(**batch).logits
    d = (lp - lm).abs().max().item()
    print("PEFT(base + loupe adapter) logits:\n", lp.numpy())
    print("loupe merged model logits:\n", lm.numpy())
    print("max |difference| = %.3e (tolerance 1e-4)" % d)
    if not d <= 1e-4:
        sys.exit("FAIL: PEFT's logits with loupe's adapter differ from loupe's merged model")
    print("OK")


if __name__ == "__main__":
    main()
