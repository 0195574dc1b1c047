# Golden for PEFT LoRA on the tiny decoders: lora_llama_cls (q_proj/v_proj, SEQ_CLS, PEFT's
# modules_to_save head) and lora_qwen2_lm ("all-linear", CAUSAL_LM). On the right- and the
# left-padded batch: logits, loss and the gradient of every trainable parameter under the
# name PEFT saves it; three AdamW steps on the right batch; the adapter directory exactly as
# PEFT's save_pretrained writes it (model card dropped). float64 reference as decoder_golden.
import copy
import json
import os

import torch

import decoder_f64 as f64
import decoder_golden as dg
import decoder_models as dm
import golden_common as gc
import lora_golden as lg
from cls_golden import ADAMW, STEPS

R, ALPHA = lg.R, lg.ALPHA
LORAS = {
    "lora_llama_cls": {"base": "llama_cls", "targets": ["q_proj", "v_proj"], "task": "SEQ_CLS"},
    "lora_qwen2_lm": {"base": "qwen2_lm", "targets": "all-linear", "task": "CAUSAL_LM"},
}


def make_peft(base, name):
    """PEFT model with seeded lora_A (PEFT's kaiming-uniform) and non-zero lora_B."""
    from peft import LoraConfig, TaskType, get_peft_model
    spec = LORAS[name]
    cfg = LoraConfig(task_type=getattr(TaskType, spec["task"]), r=R, lora_alpha=ALPHA,
                     target_modules=spec["targets"], lora_dropout=0.0)
    torch.manual_seed(gc.SEED + 2)
    pm = get_peft_model(base, cfg)
    g = torch.Generator().manual_seed(gc.SEED + 3)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if ".lora_B." in n:
                p.copy_(lg.B_STD * torch.randn(p.shape, generator=g))
    return pm


def run_batch(pm, batch, head, ref64, steps):
    pm.train()  # every dropout is 0
    params = [p for p in pm.parameters() if p.requires_grad]
    opt = None
    if steps:
        opt = torch.optim.AdamW(params, lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"],
                                weight_decay=ADAMW["weight_decay"])
    res = {"losses": []}
    for step in range(max(steps, 1)):
        pm.zero_grad(set_to_none=True)
        kw = dm.forward_kwargs(batch)
        if ref64:
            out = pm(**kw)
            loss = dg.own_loss(head, out.logits, batch["labels"])
        else:
            out = pm(**kw, labels=batch["labels"])
            loss = out.loss
            mine = dg.own_loss(head, out.logits, batch["labels"])
            assert torch.allclose(loss, mine, rtol=1e-6, atol=0), (loss, mine)
        loss.backward()
        res["losses"].append(loss.detach().clone())
        if step == 0:
            res["logits"] = out.logits.detach().clone()
            res["loss"] = loss.detach().clone()
            res["grads"] = {lg.saved_name(n): p.grad.detach().clone()
                            for n, p in pm.named_parameters() if p.requires_grad}
            frozen = [n for n, p in pm.named_parameters()
                      if not p.requires_grad and p.grad is not None]
            assert not frozen, frozen
        if opt is not None:
            opt.step()
    if steps:
        res["step3"] = {lg.saved_name(n): p.detach().clone()
                        for n, p in pm.named_parameters() if p.requires_grad}
    res["losses"] = torch.stack(res["losses"])
    return res


def run_all(pm, head, ref64):
    res = {}
    for b in dg.BATCHES:
        batch = dm.make_batch(b, head)
        m = copy.deepcopy(pm)
        steps = STEPS if b == "right" else 0
        if ref64:
            with f64.float64_internals():
                res[b] = run_batch(m, batch, head, True, steps)
        else:
            res[b] = run_batch(m, batch, head, False, steps)
        res[b]["batch"] = batch
    return res


def _reload_and_merge(out, adir, head, r32, pm_init):
    """The adapter as written reloads onto the saved base to the same logits; merging
    (W + scaling * B @ A) changes them only by rounding."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    auto = AutoModelForSequenceClassification if head == "cls" else AutoModelForCausalLM
    base2 = auto.from_pretrained(out, attn_implementation="eager")
    loaded = PeftModel.from_pretrained(base2, adir).eval()
    merged = copy.deepcopy(pm_init).merge_and_unload().eval()
    stats = {}
    for b in dg.BATCHES:
        batch = r32[b]["batch"]
        with torch.no_grad():
            la = loaded(**dm.forward_kwargs(batch)).logits
            lm = merged(**dm.forward_kwargs(batch)).logits
        assert torch.equal(la, r32[b]["logits"]), (la - r32[b]["logits"]).abs().max()
        stats[b] = gc.diff_stats(lm, r32[b]["logits"])
    return stats


def run(name, out):
    gc.setup()
    gc.fresh_dir(out)
    spec = LORAS[name]
    head = dm.ARCHS[spec["base"]]["head"]
    base = dm.build(spec["base"])
    dm.save_model(base, out)
    pm = make_peft(base, name)
    pm_init = copy.deepcopy(pm)
    pm64 = copy.deepcopy(pm).double()
    f64.prepare(pm64)

    adir = os.path.join(out, "peft_adapter")
    lg.save_adapter(pm, adir)
    from peft import get_peft_model_state_dict
    sd = get_peft_model_state_dict(pm)

    r32 = run_all(pm, head, ref64=False)
    r64 = run_all(pm64, head, ref64=True)
    for b in dg.BATCHES:
        assert set(r32[b]["grads"]) == set(sd), (sorted(r32[b]["grads"]), sorted(sd))
    merged = _reload_and_merge(out, adir, head, r32, pm_init)

    t = {}
    for b in dg.BATCHES:
        r = r32[b]
        for k, v in dm.batch_tensors(r["batch"]).items():
            t["%s.%s" % (b, k)] = v
        t[b + ".logits"] = r["logits"]
        t[b + ".loss"] = r["loss"]
        for n, g in r["grads"].items():
            t["%s.grad.%s" % (b, n)] = g
        if "step3" in r:
            t[b + ".losses"] = r["losses"]
            for n, w in r["step3"].items():
                t["%s.step3.%s" % (b, n)] = w
    gc.save_golden(out, t, meta_for(name, pm, sd, adir, r32, r64, merged))


def meta_for(name, pm, sd, adir, r32, r64, merged):
    spec = LORAS[name]
    head = dm.ARCHS[spec["base"]]["head"]
    with open(os.path.join(adir, "adapter_config.json")) as f:
        acfg = json.load(f)
    resolved = pm.peft_config["default"].target_modules
    lora_modules = sorted({n.split(".lora_")[0] for n in sd if ".lora_" in n})
    some = pm.get_submodule(lora_modules[0])
    tol = {}
    for b in dg.BATCHES:
        a, z = r32[b], r64[b]
        t = {"loss": gc.diff_stats(a["loss"], z["loss"]),
             "grad_all": gc.group_stats((a["grads"][n], z["grads"][n]) for n in a["grads"]),
             "grad": {n: gc.diff_stats(a["grads"][n], z["grads"][n]) for n in a["grads"]}}
        if head == "lm":
            real = dg.real_positions(a["batch"])
            t["logits_real_positions"] = gc.diff_stats(a["logits"][real], z["logits"][real])
            t["logits_all_positions"] = gc.diff_stats(a["logits"], z["logits"])
        else:
            t["logits"] = gc.diff_stats(a["logits"], z["logits"])
        if "step3" in a:
            t["losses"] = gc.diff_stats(a["losses"], z["losses"])
            t["step3_all"] = gc.group_stats((a["step3"][n], z["step3"][n]) for n in a["step3"])
        tol[b] = t
    return {
        "golden": name, "versions": gc.versions(), "seed": gc.SEED,
        "base_model": "this directory (config.json + model.safetensors): the same tiny weights "
                      "as tests/golden/%s (same generator and seed); %s" % (spec["base"],
                                                                            dm.INIT_NOTE),
        "model": dg.model_notes(spec["base"], pm.base_model.model),
        "lora": {"r": R, "lora_alpha": ALPHA, "lora_dropout": 0.0, "use_rslora": False,
                 "bias": "none", "task_type": spec["task"],
                 "target_modules_requested": spec["targets"],
                 "target_modules_resolved": sorted(resolved),
                 "target_modules_in_adapter_config": acfg["target_modules"],
                 "lora_modules": lora_modules,
                 "scaling": some.scaling["default"], "scaling_rule": "lora_alpha/r",
                 "modules_to_save": acfg["modules_to_save"],
                 "modules_to_save_matched": sorted({n.rsplit(".", 1)[0] for n in sd
                                                    if ".lora_" not in n}),
                 "init": "lora_A: PEFT default kaiming_uniform(a=sqrt(5)) under "
                         "torch.manual_seed(SEED+2); lora_B: NOT zero (PEFT's default) but "
                         "N(0, %g^2) from torch.Generator(SEED+3), drawn in named_parameters "
                         "order, so grad of lora_A is non-zero and the adapter changes the "
                         "logits" % lg.B_STD,
                 "forward": "y = x W^T (+ b) + scaling * (x A^T) B^T"},
        "optimizer": {"name": "torch.optim.AdamW over the trainable parameters only",
                      "lr": ADAMW["lr"], "betas": list(ADAMW["betas"]), "eps": ADAMW["eps"],
                      "weight_decay": ADAMW["weight_decay"], "steps": STEPS, "batch": "right"},
        "adapter_dir": "peft_adapter/ = PeftModel.save_pretrained output, unmodified "
                       "(adapter_config.json, adapter_model.safetensors; PEFT's model-card "
                       "README.md dropped); it holds the initial adapter (before the AdamW "
                       "steps); keys: %s" % sorted(sd),
        "batch": {b: {"lengths": r32[b]["batch"]["attention_mask"].sum(1).tolist(),
                      "seq": int(r32[b]["batch"]["input_ids"].shape[1]),
                      "position_ids_passed": r32[b]["batch"]["pass_position_ids"]}
                  for b in dg.BATCHES},
        "tensors": {
            "<b>.input_ids/attention_mask/position_ids/labels": "the batches of tests/golden/%s "
                                                                "(int64), b in {right, left}"
                                                                % spec["base"],
            "<b>.logits": ("[3, 3] pooled classification logits" if head == "cls" else
                           "[3, T, V] every position (only real positions meaningful)"),
            "<b>.loss": "as in tests/golden/%s" % spec["base"],
            "<b>.grad.<adapter key>": "gradient of each trainable parameter after one forward/"
                                      "backward on batch b, named by its key in "
                                      "adapter_model.safetensors",
            "right.losses": "[3] loss before AdamW step 1, 2, 3 on the right batch",
            "right.step3.<adapter key>": "trainable parameter after 3 AdamW steps"},
        "notes": ["the padding, masking, position-id and loss rules are those of tests/golden/"
                  "%s/golden.json (same code path, PEFT only wraps the linears)" % spec["base"]]
                 + (["PEFT's SEQ_CLS task type adds modules_to_save %s; in this model only "
                     "'score' exists, so the score head is trained in full and saved in the "
                     "adapter as base_model.model.score.weight" % acfg["modules_to_save"]]
                    if head == "cls" else
                    ["'all-linear' resolves to every nn.Linear of the decoder layers except "
                     "the output layer (lm_head); adapter_config.json stores the resolved list"]),
        "merged_vs_unmerged_logits": merged,
        "f32_vs_f64": tol,
        "f32_vs_f64_how": "as in tests/golden/%s: the PEFT model cast to float64 with "
                          "transformers' float32 pins lifted" % spec["base"],
    }
