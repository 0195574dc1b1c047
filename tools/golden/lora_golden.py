# Golden for PEFT LoRA on the tiny classifiers: logits, loss, gradients of every trainable
# parameter (lora_A, lora_B, the modules_to_save head), three AdamW steps, the adapter
# directory exactly as PEFT's save_pretrained writes it, and the merged weights.
import copy
import json
import os

import torch

import golden_common as gc
import tiny_models as tm
from cls_golden import ADAMW, STEPS

TARGETS = {"distilbert": ["q_lin", "v_lin"], "bert": ["query", "value"]}
R, ALPHA = 4, 8
B_STD = 0.1


def saved_name(n):
    """In-memory PEFT parameter name -> the key PEFT writes in adapter_model.safetensors."""
    return n.replace(".lora_A.default.", ".lora_A.").replace(".lora_B.default.", ".lora_B.") \
            .replace(".modules_to_save.default.", ".")


def save_adapter(pm, adir):
    """PeftModel.save_pretrained, minus the model-card README.md it writes beside the
    adapter: PEFT's template prose, which neither side reads."""
    pm.save_pretrained(adir)
    card = os.path.join(adir, "README.md")
    if os.path.exists(card):
        os.remove(card)


def make_peft(base, arch, rslora):
    from peft import LoraConfig, TaskType, get_peft_model
    cfg = LoraConfig(task_type=TaskType.SEQ_CLS, r=R, lora_alpha=ALPHA,
                     target_modules=TARGETS[arch], lora_dropout=0.0, use_rslora=rslora)
    torch.manual_seed(gc.SEED + 2)  # lora_A: PEFT's kaiming-uniform init, seeded
    pm = get_peft_model(base, cfg)
    g = torch.Generator().manual_seed(gc.SEED + 3)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if ".lora_B." in n:
                p.copy_(B_STD * torch.randn(p.shape, generator=g))
    return pm


def run_reference(pm, batch):
    kw = tm.forward_kwargs(batch)
    pm.train()
    params = [p for p in pm.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"],
                            weight_decay=ADAMW["weight_decay"])
    res = {"losses": []}
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = pm(**kw, labels=batch["labels"])
        out.loss.backward()
        res["losses"].append(out.loss.detach().clone())
        if step == 0:
            res["logits"] = out.logits.detach().clone()
            res["loss"] = out.loss.detach().clone()
            res["grads"] = {saved_name(n): p.grad.detach().clone()
                            for n, p in pm.named_parameters() if p.requires_grad}
            frozen = [n for n, p in pm.named_parameters() if not p.requires_grad and p.grad is not None]
            assert not frozen, frozen
        opt.step()
    res["step3"] = {saved_name(n): p.detach().clone()
                    for n, p in pm.named_parameters() if p.requires_grad}
    res["losses"] = torch.stack(res["losses"])
    return res


def run(arch, out, rslora=False):
    gc.setup()
    gc.fresh_dir(out)
    from peft import PeftModel, get_peft_model_state_dict
    from transformers import AutoModelForSequenceClassification

    tok = tm.make_tokenizer(out)
    batch = tm.make_batch(tok, pairs=(arch == "bert"))
    base = tm.build(arch)
    tm.save_model(base, out)
    pm = make_peft(base, arch, rslora)
    # Keep a pristine copy: the f64 run, saving and merging all start from these weights.
    pm_init = copy.deepcopy(pm)
    pm64 = copy.deepcopy(pm).double()

    adir = os.path.join(out, "peft_adapter")
    save_adapter(pm, adir)
    sd = get_peft_model_state_dict(pm)
    scaling = pm.base_model.model.get_submodule(
        {"distilbert": "distilbert.transformer.layer.0.attention.q_lin",
         "bert": "bert.encoder.layer.0.attention.self.query"}[arch]).scaling["default"]

    r32 = run_reference(pm, batch)
    r64 = run_reference(pm64, batch)
    assert set(r32["grads"]) == set(sd), (sorted(r32["grads"]), sorted(sd))

    # The adapter as written reloads onto the saved base to the same logits.
    base2 = AutoModelForSequenceClassification.from_pretrained(out)
    base2.config._attn_implementation = "eager"
    loaded = PeftModel.from_pretrained(base2, adir).eval()
    kw = tm.forward_kwargs(batch)
    with torch.no_grad():
        adapter_logits = loaded(**kw).logits
        merged = copy.deepcopy(pm_init).merge_and_unload().eval()
        merged_logits = merged(**kw).logits
    assert torch.allclose(adapter_logits, r32["logits"], atol=1e-6), \
        (adapter_logits - r32["logits"]).abs().max()
    merged_sd = merged.state_dict()
    targets = [n for n in merged_sd if n.endswith(".weight") and
               n.split(".")[-2] in TARGETS[arch]]

    t = dict(batch)
    t.update({"logits": r32["logits"], "loss": r32["loss"], "losses": r32["losses"],
              "adapter_logits": adapter_logits, "merged_logits": merged_logits})
    for n, g in r32["grads"].items():
        t["grad." + n] = g
    for n, w in r32["step3"].items():
        t["step3." + n] = w
    for n in targets:
        t["merged." + n] = merged_sd[n]

    with open(os.path.join(adir, "adapter_config.json")) as f:
        acfg = json.load(f)
    name = "lora_%s%s" % (arch, "_rslora" if rslora else "")
    meta = {
        "golden": name, "versions": gc.versions(), "seed": gc.SEED,
        "base_model": "this directory (config.json + model.safetensors): the same tiny weights "
                      "as tests/golden/cls_%s (same generator and seed); %s" % (arch, tm.INIT_NOTE),
        "lora": {"r": R, "lora_alpha": ALPHA, "target_modules": TARGETS[arch], "lora_dropout": 0.0,
                 "use_rslora": rslora, "scaling": scaling,
                 "scaling_rule": "lora_alpha/sqrt(r)" if rslora else "lora_alpha/r",
                 "task_type": "SEQ_CLS", "bias": "none",
                 "modules_to_save": acfg["modules_to_save"],
                 "modules_to_save_matched": sorted({n.rsplit(".", 1)[0] for n in sd
                                                    if ".lora_" not in n}),
                 "init": "lora_A: PEFT default kaiming_uniform(a=sqrt(5)) under "
                         "torch.manual_seed(SEED+2); lora_B: NOT zero (PEFT's default) but "
                         "N(0, %g^2) from torch.Generator(SEED+3), so grad of lora_A is non-zero "
                         "and the adapter changes the logits" % B_STD,
                 "forward": "y = x W^T + b + scaling * (x A^T) B^T"},
        "optimizer": {"name": "torch.optim.AdamW over the trainable parameters only",
                      "lr": ADAMW["lr"], "betas": list(ADAMW["betas"]), "eps": ADAMW["eps"],
                      "weight_decay": ADAMW["weight_decay"], "steps": STEPS},
        "adapter_dir": "peft_adapter/ = PeftModel.save_pretrained output, unmodified "
                       "(adapter_config.json, adapter_model.safetensors; PEFT's model-card "
                       "README.md dropped); it holds "
                       "the initial adapter (before the AdamW steps); keys: %s" % sorted(sd),
        "tensors": {
            "input_ids/attention_mask/token_type_ids/labels": "the batch (int64), as in cls_*",
            "logits": "[B, 2] PEFT model forward with the initial adapter",
            "loss": "mean cross-entropy", "losses": "[3] loss before AdamW step 1, 2, 3",
            "adapter_logits": "logits after reloading base + peft_adapter/ with "
                              "PeftModel.from_pretrained (equal to logits)",
            "merged_logits": "logits of merge_and_unload() (W + scaling*B@A folded in)",
            "merged.<base param>": "merged weights of the target modules",
            "grad.<adapter key>": "gradient of each trainable parameter, named by its key in "
                                  "adapter_model.safetensors (lora_A/lora_B/modules_to_save head)",
            "step3.<adapter key>": "trainable parameter after 3 AdamW steps on the batch"},
        "f32_vs_f64": {"logits": gc.diff_stats(r32["logits"], r64["logits"]),
                       "loss": gc.diff_stats(r32["loss"], r64["loss"]),
                       "losses": gc.diff_stats(r32["losses"], r64["losses"]),
                       "grad_all": gc.group_stats((r32["grads"][n], r64["grads"][n])
                                                  for n in r32["grads"]),
                       "step3_all": gc.group_stats((r32["step3"][n], r64["step3"][n])
                                                   for n in r32["step3"]),
                       "grad": {n: gc.diff_stats(r32["grads"][n], r64["grads"][n])
                                for n in r32["grads"]}},
        "merged_vs_unmerged_logits": gc.diff_stats(merged_logits, r32["logits"]),
    }
    gc.save_golden(out, t, meta)
