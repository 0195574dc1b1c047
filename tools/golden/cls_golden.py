# Golden for full fine-tuning of a tiny *ForSequenceClassification: forward (logits, loss,
# hidden states), every parameter gradient, and three torch.optim.AdamW steps on one padded
# batch; run in float32 (stored) and float64 (to measure the f32 noise floor).
import copy

import torch

import golden_common as gc
import tiny_models as tm

ADAMW = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
STEPS = 3


def run_reference(model, batch):
    """Forward+backward, then STEPS AdamW steps on the same batch (model is modified)."""
    kw = tm.forward_kwargs(batch)
    model.train()  # dropout is 0 everywhere, so train() == eval() numerically
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"], betas=ADAMW["betas"],
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    res = {"losses": []}
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = model(**kw, labels=batch["labels"], output_hidden_states=True)
        out.loss.backward()
        res["losses"].append(out.loss.detach().clone())
        if step == 0:
            res["logits"] = out.logits.detach().clone()
            res["loss"] = out.loss.detach().clone()
            res["hidden"] = [h.detach().clone() for h in out.hidden_states]
            res["grads"] = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            # The loss is the plain mean cross-entropy over the batch.
            ce = torch.nn.functional.cross_entropy(out.logits, batch["labels"])
            assert torch.allclose(ce, out.loss)
        opt.step()
    res["step3"] = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        res["loss_after"] = model(**kw, labels=batch["labels"]).loss.detach().clone()
    res["losses"] = torch.stack(res["losses"])
    return res


def run(arch, out, act=None):
    gc.setup()
    gc.fresh_dir(out)
    tok = tm.make_tokenizer(out)
    batch = tm.make_batch(tok, pairs=(arch == "bert"))
    model = tm.build(arch, act)
    tm.save_model(model, out)
    model64 = copy.deepcopy(model).double()
    init = {n: p.detach().clone().double() for n, p in model64.named_parameters()}

    _check_reload(out, model, batch)
    r32 = run_reference(model, batch)
    r64 = run_reference(model64, batch)

    t = dict(batch)
    t["logits"] = r32["logits"]
    t["loss"] = r32["loss"]
    t["losses"] = r32["losses"]
    t["loss_after_step3"] = r32["loss_after"]
    for i, h in enumerate(r32["hidden"]):
        t["hidden.%d" % i] = h
    for n, g in r32["grads"].items():
        t["grad." + n] = g
    for n, w in r32["step3"].items():
        t["step3." + n] = w

    tol = {"logits": gc.diff_stats(r32["logits"], r64["logits"]),
           "loss": gc.diff_stats(r32["loss"], r64["loss"]),
           "losses": gc.diff_stats(r32["losses"], r64["losses"]),
           "hidden": gc.group_stats(zip(r32["hidden"], r64["hidden"])),
           "grad_all": gc.group_stats((r32["grads"][n], r64["grads"][n]) for n in r32["grads"]
                                      if not tm.analytically_zero_grad(n)),
           "step3_all": gc.group_stats((r32["step3"][n], r64["step3"][n]) for n in r32["step3"]
                                       if not tm.analytically_zero_grad(n)),
           "grad_all_and_step3_all_exclude": sorted(n for n in r32["grads"]
                                                    if tm.analytically_zero_grad(n)),
           "grad": {n: gc.diff_stats(r32["grads"][n], r64["grads"][n]) for n in r32["grads"]},
           "step3_update": {n: gc.diff_stats(r32["step3"][n].double() - init[n],
                                             r64["step3"][n] - init[n]) for n in r32["step3"]}}

    pad_rows = sorted(set(batch["input_ids"][batch["attention_mask"] == 0].tolist()))
    meta = {
        "golden": "cls_" + arch + ("_" + act if act else ""),
        "task": "full fine-tuning of %sForSequenceClassification on one padded batch" %
                ("DistilBert" if arch == "distilbert" else "Bert"),
        "versions": gc.versions(), "seed": gc.SEED, "init": tm.INIT_NOTE,
        "model_files": ["config.json", "model.safetensors", "vocab.txt", "tokenizer.json",
                        "tokenizer_config.json"],
        "config_notes": "every dropout probability is 0 in config.json (dropout/attention_dropout/"
                        "seq_classif_dropout for DistilBERT; hidden_dropout_prob/"
                        "attention_probs_dropout_prob/classifier_dropout for BERT); attention "
                        "implementation 'eager' (additive finfo.min mask on padded keys); "
                        "LayerNorm eps 1e-12; activation %s" % (act or "gelu (erf)"),
        "batch": {"rows": int(batch["input_ids"].shape[0]), "seq": int(batch["input_ids"].shape[1]),
                  "lengths": batch["attention_mask"].sum(1).tolist(), "pad_token_id": 0,
                  "padding": "right", "sentences_a": tm.SENTS_A,
                  "sentences_b": tm.SENTS_B if arch == "bert" else None},
        "optimizer": {"name": "torch.optim.AdamW", "lr": ADAMW["lr"], "betas": list(ADAMW["betas"]),
                      "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"], "steps": STEPS,
                      "amsgrad": False, "maximize": False,
                      "param_groups": "one group with every parameter: weight decay applies to "
                                      "biases, LayerNorm and embeddings too (unlike HF Trainer)",
                      "update": "p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; "
                                "p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)"},
        "tensors": {
            "input_ids/attention_mask/token_type_ids/labels": "the batch (int64)",
            "logits": "[B, num_labels] from the initial weights (first forward)",
            "loss": "scalar mean cross-entropy of the first forward",
            "losses": "[3] loss of the forward before AdamW step 1, 2, 3 (losses[0] == loss)",
            "loss_after_step3": "loss of a forward with the weights after step 3",
            "hidden.<i>": "[B, T, H] hidden.0 = embeddings output (after LayerNorm), hidden.<i> = "
                          "output of layer i-1; padded positions included (they are computed "
                          "but never attended to)",
            "grad.<param>": "d loss / d param after the first forward (HF parameter names)",
            "step3.<param>": "parameter value after three AdamW steps on the same batch",
        },
        "notes": ["attention key biases (%s) have an analytically zero gradient (softmax is "
                  "invariant to q.b_k); their grad.* is float rounding noise (~1e-9) and AdamW, "
                  "which divides by sqrt(v)+eps, turns that noise into updates of up to ~lr*|g|/"
                  "(|g|+eps): compare their grad.* with an absolute tolerance (~1e-6) and do not "
                  "compare their step3.* (or use atol ~ lr*STEPS)" % ", ".join(
                      n for n in r32["grads"] if tm.analytically_zero_grad(n)),
                  "word_embeddings row of pad id 0 gets zero gradient (nn.Embedding padding_idx) "
                  "but is still changed by weight decay",
                  "padded token ids present in the batch: %s" % pad_rows,
                  "position_embeddings rows >= seq get zero gradient; AdamW still decays them"],
        "f32_vs_f64": tol,
        "f32_vs_f64_how": "the same weights cast to float64 and run through the same code; "
                          "stats of the float32 results against the float64 ones "
                          "(step3_update compares the parameter change step3 - initial)",
    }
    gc.save_golden(out, t, meta)



def _check_reload(out, model, batch):
    """The saved directory reloads (default attention implementation) to the same logits."""
    from transformers import AutoModelForSequenceClassification
    m2 = AutoModelForSequenceClassification.from_pretrained(out).eval()
    with torch.no_grad():
        a = model(**tm.forward_kwargs(batch)).logits
        b = m2(**tm.forward_kwargs(batch)).logits
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), (a - b).abs().max()
