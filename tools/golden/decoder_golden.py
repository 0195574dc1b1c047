# Golden for full fine-tuning of a tiny decoder (Llama / Mistral / Qwen2 / SmolLM-shaped
# Llama), for sequence classification or causal LM: on a right-padded and a left-padded
# batch, the forward (logits, loss, hidden states) and every parameter gradient; for
# llama_cls and llama_lm also three torch.optim.AdamW steps. Run in float32 (stored) and in
# a float64 reference (decoder_f64) to measure the float32 noise floor.
import copy

import torch

import decoder_f64 as f64
import decoder_models as dm
import golden_common as gc
from cls_golden import ADAMW, STEPS

ADAMW_ARCHS = ("llama_cls", "llama_lm")
BATCHES = ("right", "left")


def lm_token_loss(logits, labels):
    """[B, T] cross-entropy of logits[b, t] against labels[b, t+1] (0 where ignored) and the
    number of counted positions: transformers' ForCausalLMLoss shift, written out."""
    B, T, V = logits.shape
    target = torch.nn.functional.pad(labels, (0, 1), value=-100)[:, 1:]
    tl = torch.nn.functional.cross_entropy(logits.reshape(-1, V), target.reshape(-1),
                                           ignore_index=-100, reduction="none").view(B, T)
    return tl, int((target != -100).sum())


def own_loss(head, logits, labels):
    if head == "cls":
        return torch.nn.functional.cross_entropy(logits, labels)
    tl, n = lm_token_loss(logits, labels)
    return tl.sum() / n


def forward(model, batch, head, ref64, layer_outs):
    """One forward; the f32 run uses transformers' own loss (checked against ours), the
    float64 reference ours (transformers' causal-LM loss casts logits to float32)."""
    kw = dm.forward_kwargs(batch)
    layer_outs.clear()
    if ref64:
        out = model(**kw, output_hidden_states=True)
        return out, own_loss(head, out.logits, batch["labels"])
    out = model(**kw, labels=batch["labels"], output_hidden_states=True)
    mine = own_loss(head, out.logits, batch["labels"])
    assert torch.allclose(out.loss, mine, rtol=1e-6, atol=0), (out.loss, mine)
    return out, out.loss


def _hook_layers(model):
    """Capture each decoder layer's output and the final norm's output."""
    outs = {}
    base = model.model
    for i, layer in enumerate(base.layers):
        layer.register_forward_hook(lambda m, a, o, i=i: outs.__setitem__(i, o[0] if isinstance(o, tuple) else o))
    base.norm.register_forward_hook(lambda m, a, o: outs.__setitem__("norm", o))
    return outs


def run_batch(model, batch, head, ref64, steps=0):
    """Forward+backward on the batch; with steps > 0, then that many AdamW steps on it (the
    model is modified)."""
    outs = _hook_layers(model)
    model.train()  # every dropout is 0, so train() == eval() numerically
    res = {"losses": []}
    opt = None
    if steps:
        opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"], betas=ADAMW["betas"],
                                eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    for step in range(max(steps, 1)):
        model.zero_grad(set_to_none=True)
        out, loss = forward(model, batch, head, ref64, outs)
        loss.backward()
        res["losses"].append(loss.detach().clone())
        if step == 0:
            res["logits"] = out.logits.detach().clone()
            res["loss"] = loss.detach().clone()
            L = len(model.model.layers)
            hs = out.hidden_states
            # transformers' tuple: embeddings, outputs of layers 0..L-2, final norm output.
            assert len(hs) == L + 1
            assert torch.equal(hs[L], outs["norm"])
            for i in range(1, L):
                assert torch.equal(hs[i], outs[i - 1])
            res["hidden"] = [hs[0].detach().clone()] + [outs[i].detach().clone() for i in range(L)]
            res["final_hidden"] = outs["norm"].detach().clone()
            res["grads"] = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            if head == "lm":
                res["token_loss"], res["n_loss_tokens"] = lm_token_loss(out.logits.detach(),
                                                                        batch["labels"])
            else:
                _check_pooling(model, batch, res)
        if opt is not None:
            opt.step()
    if steps:
        res["step3"] = {n: p.detach().clone() for n, p in model.named_parameters()}
        with torch.no_grad():
            _, la = forward(model, batch, head, ref64, outs)
        res["loss_after"] = la.detach().clone()
    res["losses"] = torch.stack(res["losses"])
    return res


def _check_pooling(model, batch, res):
    """The classification logits are the score head at the last non-pad token."""
    idx = dm.last_non_pad(batch["input_ids"]).long()
    h = res["final_hidden"][torch.arange(idx.numel()), idx]
    ref = h @ model.score.weight.detach().T
    assert torch.allclose(ref, res["logits"], rtol=1e-5, atol=1e-6), (ref, res["logits"])
    res["pool_index"] = idx


def run_all(model, head, arch, ref64):
    """Both batches from the same initial weights (the AdamW steps run on a copy)."""
    res = {}
    for b in BATCHES:
        batch = dm.make_batch(b, head)
        m = copy.deepcopy(model)
        steps = STEPS if (arch in ADAMW_ARCHS and b == "right") else 0
        if ref64:
            with f64.float64_internals():
                res[b] = run_batch(m, batch, head, True, steps)
        else:
            res[b] = run_batch(m, batch, head, False, steps)
        res[b]["batch"] = batch
    return res


def real_positions(batch):
    return batch["attention_mask"].bool()


def tolerance(r32, r64, head, init):
    tol = {}
    for b in BATCHES:
        a, z = r32[b], r64[b]
        t = {"loss": gc.diff_stats(a["loss"], z["loss"]),
             "hidden": gc.group_stats(zip(a["hidden"], z["hidden"])),
             "final_hidden": gc.diff_stats(a["final_hidden"], z["final_hidden"]),
             "grad_all": gc.group_stats((a["grads"][n], z["grads"][n]) for n in a["grads"]),
             "grad": {n: gc.diff_stats(a["grads"][n], z["grads"][n]) for n in a["grads"]}}
        if head == "lm":
            real = real_positions(a["batch"])
            t["logits_real_positions"] = gc.diff_stats(a["logits"][real], z["logits"][real])
            t["logits_all_positions"] = gc.diff_stats(a["logits"], z["logits"])
            t["token_loss"] = gc.diff_stats(a["token_loss"], z["token_loss"])
        else:
            t["logits"] = gc.diff_stats(a["logits"], z["logits"])
        if "step3" in a:
            t["losses"] = gc.diff_stats(a["losses"], z["losses"])
            t["step3_all"] = gc.group_stats((a["step3"][n], z["step3"][n]) for n in a["step3"])
            t["step3_update"] = {n: gc.diff_stats(a["step3"][n].double() - init[n],
                                                  z["step3"][n] - init[n]) for n in a["step3"]}
        tol[b] = t
    return tol


def golden_tensors(r32, head):
    t = {}
    for b in BATCHES:
        r = r32[b]
        for k, v in dm.batch_tensors(r["batch"]).items():
            t["%s.%s" % (b, k)] = v
        t[b + ".logits"] = r["logits"]
        t[b + ".loss"] = r["loss"]
        for i, h in enumerate(r["hidden"]):
            t["%s.hidden.%d" % (b, i)] = h
        t[b + ".final_hidden"] = r["final_hidden"]
        for n, g in r["grads"].items():
            t["%s.grad.%s" % (b, n)] = g
        if head == "lm":
            t[b + ".token_loss"] = r["token_loss"]
        else:
            t[b + ".pool_index"] = r["pool_index"]
        if "step3" in r:
            t[b + ".losses"] = r["losses"]
            t[b + ".loss_after_step3"] = r["loss_after"]
            for n, w in r["step3"].items():
                t["%s.step3.%s" % (b, n)] = w
    return t


def _check_reload(out, arch, model):
    """The saved directory reloads (default attention implementation) to the same logits."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    head = dm.ARCHS[arch]["head"]
    auto = AutoModelForSequenceClassification if head == "cls" else AutoModelForCausalLM
    m2 = auto.from_pretrained(out, attn_implementation="eager").eval()
    assert type(m2) is type(model)
    for b in BATCHES:
        batch = dm.make_batch(b, head)
        with torch.no_grad():
            a = model(**dm.forward_kwargs(batch)).logits
            c = m2(**dm.forward_kwargs(batch)).logits
        assert torch.equal(a, c), (a - c).abs().max()


def model_notes(arch, model):
    a = dm.ARCHS[arch]
    cfg = model.config
    notes = {
        "class": type(model).__name__,
        "layers": dm.LAYERS, "hidden": dm.HIDDEN, "intermediate": dm.FFN, "vocab": dm.VOCAB,
        "heads": a["heads"], "kv_heads": a["kv_heads"], "head_dim": dm.HEAD_DIM,
        "attention": "%s (%d query head(s) per k/v head; transformers' repeat_kv: query "
                     "head h uses k/v head h // %d)" % (
                         "MHA" if a["kv_heads"] == a["heads"] else
                         "MQA" if a["kv_heads"] == 1 else "GQA",
                         a["heads"] // a["kv_heads"], a["heads"] // a["kv_heads"]),
        "attention_scale": "1/sqrt(head_dim) = 0.25",
        "qkv_bias": a["family"] == "qwen2",
        "mlp": "down_proj(silu(gate_proj(x)) * up_proj(x)), no biases",
        "block": "h = x + o_proj(attn(rms1(x))); out = h + mlp(rms2(h)); final RMSNorm "
                 "(model.norm) after the last layer",
        "rms_norm": "weight * (x * rsqrt(mean(x^2) + eps)), eps %g, computed in float32" % dm.EPS,
        "rope": {"config_json": cfg.rope_parameters,
                 "how": "rotate_half: q' = q*cos + rotate_half(q)*sin, rotate_half(x) = "
                        "cat(-x[d/2:], x[:d/2]); cos/sin of position * inv_freq, the d/2 "
                        "frequencies repeated twice (cat(freqs, freqs)); inv_freq[i] = 1 / "
                        "rope_theta^(2i/d); positions * inv_freq computed in float32",
                 "inv_freq": "golden tensor rope.inv_freq (float32, as transformers computes "
                             "it)"},
        "tie_word_embeddings": a["tie"],
        "pad_token_id": dm.PAD,
    }
    if a.get("rope_scaling"):
        notes["rope"]["llama3"] = (
            "inv_freq scaled as transformers' _compute_llama3_parameters: wavelen = 2*pi/"
            "inv_freq; low_wl = original_max_position_embeddings/low_freq_factor = 32, "
            "high_wl = original_max/high_freq_factor = 8; wavelen > low_wl -> inv_freq/factor; "
            "wavelen < high_wl -> unchanged; otherwise (1-s)*inv_freq/factor + s*inv_freq with "
            "s = (original_max/wavelen - low_freq_factor)/(high_freq_factor - "
            "low_freq_factor). With head_dim 16 and theta 1e4: frequency 0 unchanged, 1 "
            "smoothed, 2..7 divided by 8. attention_factor 1 (cos/sin unscaled)")
        import transformers
        notes["rope"]["config_keys"] = (
            "transformers " + transformers.__version__ + " writes the RoPE settings as config.json 'rope_parameters' "
            "{rope_type, rope_theta, factor, ...}; Llama-3.x checkpoints on the hub carry the "
            "older 'rope_theta' + 'rope_scaling' {rope_type (or type) 'llama3', ...} keys, which "
            "transformers converts to rope_parameters on load: an engine should read both")
        inv = model.model.rotary_emb.inv_freq
        plain = 1.0 / (cfg.rope_parameters["rope_theta"] **
                       (torch.arange(0, dm.HEAD_DIM, 2, dtype=torch.float) / dm.HEAD_DIM))
        ratio = inv / plain
        # The note's claim about which frequencies fall in which regime.
        assert ratio[0] == 1 and 0.125 < ratio[1] < 1 and torch.allclose(ratio[2:], torch.tensor(0.125))
    if a["family"] == "mistral":
        notes["sliding_window"] = a["sliding_window"]
        notes["mask"] = dm.MASK_RULE["sliding"]
    else:
        notes["mask"] = dm.MASK_RULE["causal"]
    if a["family"] == "qwen2":
        notes["sliding_window"] = ("config.json has use_sliding_window false (sliding_window "
                                   "null): every layer is full causal attention (layer_types)")
    if a["tie"]:
        notes["tied"] = ("lm_head.weight IS model.embed_tokens.weight: model.safetensors holds "
                         "only model.embed_tokens.weight, named_parameters lists it once, and "
                         "its gradient grad.model.embed_tokens.weight is the SUM of the "
                         "embedding-lookup gradient (row pad_token_id 0 zeroed by padding_idx) "
                         "and the lm_head gradient (row 0 not zeroed)")
    return notes


def run(arch, out):
    gc.setup()
    gc.fresh_dir(out)
    a = dm.ARCHS[arch]
    head = a["head"]
    model = dm.build(arch)
    dm.save_model(model, out)
    _check_reload(out, arch, model)
    model64 = copy.deepcopy(model).double()
    f64.prepare(model64)
    init = {n: p.detach().clone().double() for n, p in model.named_parameters()}

    r32 = run_all(model, head, arch, ref64=False)
    r64 = run_all(model64, head, arch, ref64=True)

    t = golden_tensors(r32, head)
    t["rope.inv_freq"] = model.model.rotary_emb.inv_freq
    meta = meta_for(arch, model, r32, r64, init)
    meta["padding_consistency"] = check_unpadded(model, head)
    check_mask_rule(model, head)
    if head == "lm":
        check_pad_positions_inert(model)
    if a["family"] == "mistral":
        meta["sliding_window_binds"] = check_window_binds(model)
    gc.save_golden(out, t, meta)


def check_unpadded(model, head):
    """Each row of a padded batch gives the logits of that row run alone without padding
    (position ids arange): padding, the mask and the position ids are handled as claimed."""
    worst = {}
    for b in BATCHES:
        batch = dm.make_batch(b, head)
        with torch.no_grad():
            full = model(**dm.forward_kwargs(batch)).logits
            d = 0.0
            for r in range(batch["input_ids"].shape[0]):
                real = batch["attention_mask"][r].bool()
                alone = model(input_ids=batch["input_ids"][r][real][None]).logits[0]
                got = full[r] if head == "cls" else full[r][real]
                d = max(d, (got - alone).abs().max().item())
        assert d < 1e-4, (b, d)
        worst[b] = float("%.3e" % d)
    return {"max_abs_logits_diff": worst,
            "how": "max |logits of the padded batch (real positions) - logits of each row run "
                   "alone, unpadded, without attention_mask or position_ids| in float32: "
                   "padding changes only rounding"}


def visible(mask, window):
    """[B, T, T] bool: key j visible to query i (dm.MASK_RULE, written out)."""
    T = mask.shape[1]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    v = (j <= i) & mask.bool()[:, None, :]
    if window is not None:
        v &= j > i - window
    return v


def check_mask_rule(model, head):
    """The attention weights transformers computes follow dm.MASK_RULE exactly: non-zero on
    the visible keys only, and 1/T on every key for a query that sees none."""
    window = getattr(model.config, "sliding_window", None)
    for b in BATCHES:
        batch = dm.make_batch(b, head)
        T = batch["input_ids"].shape[1]
        vis = visible(batch["attention_mask"], window)
        with torch.no_grad():
            att = model(**dm.forward_kwargs(batch), output_attentions=True).attentions
        for a in att:
            none = ~vis.any(-1)  # [B, T] queries that see no key
            some = vis & ~none[..., None]
            assert bool((a > 0).eq(vis[:, None]).logical_or(~some[:, None]).all()), b
            w = a.permute(0, 2, 1, 3)[none]
            assert torch.equal(w, torch.full_like(w, 1.0 / T)), "fully masked row not uniform"
            if b == "left":
                assert none.any(), "the left batch has no fully masked query"


def check_pad_positions_inert(model):
    """The note that pad position ids do not matter: generate()'s convention (1 on pads)
    gives bit-identical logits to (cumsum - 1).clamp(0) (0 on pads)."""
    batch = dm.make_batch("left", "lm")
    other = batch["position_ids"].masked_fill(batch["attention_mask"] == 0, 1)
    with torch.no_grad():
        a = model(**dm.forward_kwargs(batch)).logits
        c = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  position_ids=other).logits
    assert torch.equal(a, c)


def check_window_binds(model):
    """The sliding window changes the result on these lengths (else the golden would not
    test it): the same weights with sliding_window None differ at the long rows' ends."""
    full = copy.deepcopy(model)
    full.config.sliding_window = None
    d = {}
    for b in BATCHES:
        batch = dm.make_batch(b, "lm")
        with torch.no_grad():
            x = model(**dm.forward_kwargs(batch)).logits
            y = full(**dm.forward_kwargs(batch)).logits
        real = batch["attention_mask"].bool()
        d[b] = float("%.3e" % (x - y)[real].abs().max().item())
        assert d[b] > 1e-2, d
    return {"max_abs_logits_change_without_window": d,
            "how": "the same model with config.sliding_window = None (plain causal mask)"}


def batch_notes(r32, head):
    notes = {}
    for b in BATCHES:
        bt = r32[b]["batch"]
        n = {"rows": 3, "seq": int(bt["input_ids"].shape[1]),
             "lengths": bt["attention_mask"].sum(1).tolist(), "padding": b,
             "position_ids_passed": bt["pass_position_ids"]}
        if head == "lm":
            n["n_loss_tokens"] = r32[b]["n_loss_tokens"]
        notes[b] = n
    return notes


def meta_for(arch, model, r32, r64, init):
    a = dm.ARCHS[arch]
    head = a["head"]
    cls = head == "cls"
    tensors = {
        "<b>.input_ids": "[3, T] int64, b in {right, left}; pad_token_id %d, real ids in "
                         "[1, %d)" % (dm.PAD, dm.VOCAB),
        "<b>.attention_mask": "[3, T] int64, 1 on real tokens",
        "<b>.position_ids": "[3, T] int64: the positions the forward used. right: not passed, "
                            "transformers uses arange(T) for every row. left: " +
                            ("not passed either (the classification path never derives "
                             "them): arange(T), so left pads shift the real tokens' positions; "
                             "RoPE scores depend only on position differences, so this changes "
                             "only rounding" if cls else
                             "passed as (cumsum(attention_mask, -1) - 1).clamp(min=0): real "
                             "tokens numbered from 0, pads 0 (as the training path does; "
                             "generate() would put 1 on pads: no effect, see notes)"),
        "<b>.labels": ("[3] int64 class ids" if cls else
                       "[3, T] int64 = input_ids with -100 at padded positions; the model "
                       "shifts: logits[b, t] predicts labels[b, t+1]"),
        "<b>.logits": ("[3, %d] score head at the pooled token (pool_index)" % dm.NUM_LABELS if cls
                       else "[3, T, %d] every position; only real positions are meaningful "
                            "(pad positions are computed and stored, see notes)" % dm.VOCAB),
        "<b>.loss": ("scalar mean cross-entropy over the 3 rows" if cls else
                     "scalar: sum of token_loss / n_loss_tokens (mean over every counted "
                     "position of the batch, not a mean of row means)"),
        "<b>.hidden.<i>": "[3, T, %d] hidden.0 = embed_tokens output, hidden.<i> = output of "
                          "decoder layer i-1 (i = 1..%d, before the final norm); padded "
                          "positions included" % (dm.HIDDEN, dm.LAYERS),
        "<b>.final_hidden": "[3, T, %d] model.norm(hidden.%d): what the head sees. transformers' "
                            "output_hidden_states tuple is (hidden.0, ..., hidden.%d, "
                            "final_hidden) in this version" % (dm.HIDDEN, dm.LAYERS, dm.LAYERS - 1),
        "<b>.grad.<param>": "d loss / d param after one forward/backward on batch b from the "
                            "initial weights (HF parameter names)",
        "rope.inv_freq": "[%d] float32 rotary inverse frequencies transformers uses" %
                         (dm.HEAD_DIM // 2),
    }
    if cls:
        tensors["<b>.pool_index"] = "[3] int64 index of the token whose score is the logits"
    else:
        tensors["<b>.token_loss"] = ("[3, T] cross-entropy of logits[b, t] against labels[b, t+1]"
                                     ", 0 where that label is -100 or t = T-1")
    if arch in ADAMW_ARCHS:
        tensors["right.losses"] = "[3] loss before AdamW step 1, 2, 3 on the right batch"
        tensors["right.loss_after_step3"] = "loss with the weights after step 3"
        tensors["right.step3.<param>"] = "parameter after three AdamW steps on the right batch"
    notes = [
        "every dropout is 0 (attention_dropout 0; these models have no other dropout); "
        "attention implementation 'eager'; torch on one thread, deterministic algorithms",
        "masking (transformers masking_utils, eager): " + dm.MASK_RULE["eager"],
        "fully masked rows: " + dm.MASK_RULE["fully_masked_rows"],
        dm.MASK_RULE["checked"],
    ]
    if cls:
        notes.append("classification token: " + dm.CLS_POOL_RULE)
        notes.append("left padding: real queries never see a pad key, so the pad positions' "
                     "(fully masked, see above) values never reach the logits or the gradients")
    else:
        notes.append(
            "LEFT PADDING AND THE LOSS: with labels = input_ids and -100 on pads, the last pad "
            "position of each left-padded row predicts the row's first real token and IS "
            "counted (labels[b, t+1] is real). That position is a fully masked query (uniform "
            "attention over the whole row, see above), so the left batch's loss and gradients "
            "depend on it; left.token_loss shows which positions count. Right padding has no "
            "such position (the last real token predicts a pad label -100)")
        notes.append("pad positions: their position_ids do not matter (a fully masked query "
                     "attends uniformly whatever q is; pad keys are invisible to every other "
                     "query), so (cumsum-1).clamp(0) and generate()'s masked_fill(pad, 1) give "
                     "bit-identical logits (the generator checks it)")
        notes.append("right-pad positions attend to the real tokens before them (ordinary "
                     "causal rows): their logits are computed but meaningless")
    notes.append("no parameter has an analytically zero gradient (unlike BERT's key bias, "
                 "cls_* goldens): every grad.* is a real signal, compare them all" +
                 ("; Qwen2's k_proj.bias is rotated by RoPE before the q.k product, so "
                  "softmax does not cancel it" if a["family"] == "qwen2" else ""))
    notes.append("embed_tokens row pad_token_id (0) gets zero gradient from the lookup "
                 "(nn.Embedding padding_idx)" + ("; the tied lm_head adds its own, non-zero, "
                                                 "gradient to that row" if a["tie"] else ""))
    meta = {
        "golden": arch,
        "task": "full fine-tuning of %s on a right- and a left-padded batch" % type(model).__name__,
        "versions": gc.versions(), "seed": gc.SEED, "init": dm.INIT_NOTE,
        "model_files": ["config.json", "model.safetensors"] + (
            [] if cls else ["generation_config.json (save_pretrained's, for generate(); "
                            "nothing the forward reads)"]),
        "model": model_notes(arch, model),
        "batch": batch_notes(r32, head),
        "tensors": tensors, "notes": notes,
        "f32_vs_f64": tolerance(r32, r64, head, init),
        "f32_vs_f64_how": (
            "the same weights cast to float64 and run through transformers with its four "
            "float32 pins lifted (RMSNorm upcast, eager softmax dtype, rotary positions*inv_freq "
            "with inv_freq recomputed in float64, causal-LM loss logits.float()), checked by a "
            "dispatch mode to produce no float32 tensor; stats of the float32 results against it"
            + (" (step3_update compares the parameter change step3 - initial)"
               if arch in ADAMW_ARCHS else "")),
    }
    if arch in ADAMW_ARCHS:
        meta["optimizer"] = {
            "name": "torch.optim.AdamW", "lr": ADAMW["lr"], "betas": list(ADAMW["betas"]),
            "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"], "steps": STEPS,
            "batch": "right", "amsgrad": False, "maximize": False,
            "param_groups": "one group with every parameter: weight decay applies to norms and "
                            "embeddings too (unlike HF Trainer)",
            "update": "p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; "
                      "p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)"}
    if cls:
        meta["classification_token"] = dm.CLS_POOL_RULE
        meta["loss_rule"] = ("problem_type single_label_classification (num_labels 3, int64 "
                             "labels): cross_entropy(pooled_logits, labels), mean over rows")
    else:
        meta["loss_rule"] = ("transformers ForCausalLMLoss: labels padded with one -100 on the "
                             "right and shifted left by one; cross_entropy(logits.float().view("
                             "-1, V), shift_labels.view(-1), ignore_index=-100), mean over the "
                             "counted positions of the whole batch")
    return meta
