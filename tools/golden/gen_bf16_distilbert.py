# Golden: PyTorch CPU autocast bf16 (torch.autocast("cpu", dtype=torch.bfloat16)) training of
# the tiny DistilBERT classifier of tests/golden/cls_distilbert (its model files and batch,
# not copied): the first forward's logits and loss, every parameter gradient, and three
# torch.optim.AdamW steps (f32 master weights and state, as autocast keeps them). The same
# run without autocast (f32) is recorded beside it, so the bf16 spread (autocast vs f32,
# per tensor) is known and tests/models/test_golden_bf16.c can base its tolerances on it.
# Usage: python3 tools/golden/gen_bf16_distilbert.py --out tests/golden/bf16_distilbert
import copy
import os

import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification

import golden_common as gc
import tiny_models as tm
from cls_golden import ADAMW, STEPS

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "cls_distilbert")


def run_steps(model, batch, bf16):
    kw = tm.forward_kwargs(batch)
    model.train()  # every dropout probability is 0 in the config
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"],
                            weight_decay=ADAMW["weight_decay"])
    res = {"losses": []}
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(**kw)
            # the loss in f32 as autocast runs cross_entropy (an fp32 op on its list)
            loss = torch.nn.functional.cross_entropy(out.logits.float(), batch["labels"])
        loss.backward()
        res["losses"].append(loss.detach().clone())
        if step == 0:
            res["logits"] = out.logits.detach().float().clone()
            res["grads"] = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        opt.step()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        res["loss_after"] = torch.nn.functional.cross_entropy(model(**kw).logits.float(), batch["labels"])
    res["losses"] = torch.stack(res["losses"])
    return res


def main():
    out = gc.parse_out("bf16_distilbert golden")
    gc.setup()
    os.makedirs(out, exist_ok=True)
    g = load_file(os.path.join(SRC, "golden.safetensors"))
    batch = {k: g[k] for k in ("input_ids", "attention_mask", "labels")}
    model = AutoModelForSequenceClassification.from_pretrained(SRC, attn_implementation="eager")
    m32 = copy.deepcopy(model)
    rb = run_steps(model, batch, True)
    rf = run_steps(m32, batch, False)
    t = dict(batch)
    t.update({"logits": rb["logits"], "losses": rb["losses"], "loss_after_step3": rb["loss_after"].reshape(1),
         "f32.losses": rf["losses"], "f32.loss_after_step3": rf["loss_after"].reshape(1)})
    for n, gr in rb["grads"].items():
        t["grad." + n] = gr
    spread = {"logits": gc.diff_stats(rb["logits"], rf["logits"]),
              "losses": gc.diff_stats(rb["losses"], rf["losses"]),
              "grad_all": gc.group_stats((rb["grads"][n], rf["grads"][n]) for n in rb["grads"]
                                         if not tm.analytically_zero_grad(n)),
              "grad": {n: gc.diff_stats(rb["grads"][n], rf["grads"][n]) for n in rb["grads"]}}
    meta = {
        "golden": "bf16_distilbert",
        "task": "PyTorch CPU autocast bf16 full fine-tuning of the cls_distilbert model on its batch",
        "versions": gc.versions(), "seed": gc.SEED,
        "model_files": "tests/golden/cls_distilbert (config.json, model.safetensors); batch from its "
                       "golden.safetensors (input_ids, attention_mask, labels)",
        "autocast": "torch.autocast('cpu', dtype=torch.bfloat16) around the forward and the loss: every "
                    "nn.Linear and the attention matmuls run on bf16 inputs (bf16 outputs), LayerNorm, "
                    "softmax and cross-entropy in f32; parameters, gradients and AdamW state f32",
        "optimizer": {"name": "torch.optim.AdamW", "lr": ADAMW["lr"], "betas": list(ADAMW["betas"]),
                      "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"], "steps": STEPS},
        "tensors": {"input_ids/attention_mask/labels": "cls_distilbert's batch (int64)",
                    "logits": "[B, labels] first forward under autocast (bf16, stored as f32)",
                    "losses": "[3] loss before AdamW step 1, 2, 3 (autocast)",
                    "loss_after_step3": "[1] loss after step 3 (autocast)",
                    "f32.losses / f32.loss_after_step3": "the same run without autocast (f32)",
                    "grad.<param>": "gradient after the first backward (autocast; f32 master grads)"},
        "bf16_vs_f32": spread,
        "bf16_vs_f32_how": "the autocast run's tensors against the f32 run's (diff_stats: max_rel is "
                           "max|a-b| / max|b| per tensor)",
    }
    gc.save_golden(out, t, meta)


if __name__ == "__main__":
    main()
