#!/usr/bin/env python3
"""lp_model_save_hf output opens in transformers: for the tiny DistilBERT and BERT goldens
(after one AdamW step, so the weights are loupe's own) and for the real all-MiniLM-L6-v2
given a fresh 3-label head (CLS pooling = BertForSequenceClassification), the saved
directory loads with AutoModelForSequenceClassification with no missing or unexpected keys,
its tokenizer loads, and transformers' logits on the batch equal loupe's (1e-4 relative).
Needs torch + transformers (the global python3 of the dev machine); exit 77 without them."""
import json, os, shutil, subprocess, sys, tempfile

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"save_hf_check: skipped, needs torch/transformers/safetensors: {e}", file=sys.stderr)
    sys.exit(77)

tool = sys.argv[1]
root = os.environ.get("LP_SOURCE_DIR", ".")
fails = 0


def check(cond, msg):
    global fails
    print(("ok   " if cond else "FAIL ") + msg)
    fails += 0 if cond else 1


def run_case(name, src, batch, extra):
    out = os.path.join(tmp, name)
    p = subprocess.run([tool, src, out, batch] + extra, capture_output=True, text=True)
    check(p.returncode == 0, f"{name}: save_tool exits 0 ({p.stderr.strip()[-300:]})")
    if p.returncode:
        return
    c = json.loads(p.stdout)
    ours = np.array(c["logits"], dtype=np.float32).reshape(-1, c["num_labels"])
    check(os.path.isfile(os.path.join(out, "config.json")) and not any(".tmp." in f for f in os.listdir(tmp)),
          f"{name}: directory complete, no temporary left")
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(out, output_loading_info=True)
    model.eval()
    miss = [k for k in info["missing_keys"]]
    check(not miss and not info["unexpected_keys"] and not info["mismatched_keys"],
          f"{name}: transformers loads {type(model).__name__} with no missing/unexpected keys ({miss} {info['unexpected_keys']})")
    b = load_file(batch)
    kw = {k: torch.from_numpy(b[k].astype(np.int64)) for k in ("input_ids", "attention_mask", "token_type_ids") if k in b}
    with torch.no_grad():
        ref = model(**kw).logits.numpy()
    rel = float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-6))
    check(ours.shape == ref.shape and rel <= 1e-4, f"{name}: logits equal transformers' (rel {rel:.2e})")
    tok = transformers.AutoTokenizer.from_pretrained(out)
    check(len(tok("hello world")["input_ids"]) >= 3, f"{name}: tokenizer loads from the saved directory")


tmp = tempfile.mkdtemp(prefix="loupe_save_hf_")
try:
    for g in ("cls_distilbert", "cls_bert"):
        src = os.path.join(root, "tests", "golden", g)
        gb = load_file(os.path.join(src, "golden.safetensors"))
        batch = os.path.join(tmp, g + "_batch.safetensors")
        save_file({k: gb[k].astype(np.int32) for k in ("input_ids", "attention_mask", "token_type_ids", "labels") if k in gb},
                  batch)
        run_case(g, src, batch, ["--step"])
    p = subprocess.run(["bash", os.path.join(root, "tools", "minilm_dir.sh")], capture_output=True, text=True)
    if p.returncode == 0:
        mdir = p.stdout.strip()
        gm = load_file(os.path.join(root, "tests", "golden", "minilm", "golden.safetensors"))
        rows = [4, 11, 21, 69]
        T = int(gm["lengths"][rows].max())
        ids = gm["input_ids"][rows, :T].astype(np.int32)
        mask = (np.arange(T)[None, :] < gm["lengths"][rows][:, None]).astype(np.int32)
        batch = os.path.join(tmp, "minilm_batch.safetensors")
        save_file({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids),
                   "labels": np.array([0, 1, 2, 1], dtype=np.int32)}, batch)
        run_case("minilm_head", mdir, batch, ["--labels", "3", "--step"])
    else:
        print("minilm: skipped (" + p.stderr.strip() + ")")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if fails else 0)
