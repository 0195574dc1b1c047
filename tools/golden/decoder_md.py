# Writes tests/golden/DECODER.md: the tensor names, dtypes and shapes of every decoder
# golden, read from their golden.json, with the rules a C test needs, so the C test writer
# does not have to read the Python generators. Rerun after regenerating a decoder golden.
# Usage: python3 tools/golden/decoder_md.py [--golden-dir tests/golden]
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDENS = ["llama_cls", "llama_lm", "mistral_lm", "qwen2_cls", "qwen2_lm", "smollm_lm",
           "lora_llama_cls", "lora_qwen2_lm", "qlora_llama_lm"]
DT = {"float32": "f32", "int64": "i64", "uint8": "u8", "int32": "i32"}

INTRO = """# Decoder goldens (Llama family)

Written by `tools/golden/decoder_md.py` from each golden's `golden.json` (do not edit by
hand; regenerate). Each `tests/golden/<name>/golden.safetensors` holds the tensors below
(f32 little-endian unless marked; ids i64); `golden.json` says the same in prose, plus the
float32-vs-float64 noise (`f32_vs_f64`) to set tolerances from.

## Rules every decoder golden follows

- Tiny random models: vocab 128, hidden 64, 2 layers, intermediate 160, head_dim 16,
  max_position_embeddings 128, rms_norm_eps 1e-6, SiLU MLP `down(silu(gate(x)) * up(x))`,
  pad_token_id 0 (real ids are in [1, 128)), eager attention, no dropout. Model files:
  `config.json` + `model.safetensors` as `save_pretrained` wrote them (causal LMs also
  `generation_config.json`). RoPE settings are in config.json `rope_parameters`
  (transformers 5 format); hub Llama-3 checkpoints use `rope_theta` + `rope_scaling`.
- Two batches per golden, `right.*` and `left.*`: 3 rows, T = 14, real lengths
  right [14, 6, 11], left [9, 14, 4].
- Attention mask: key j visible to query i iff j <= i and attention_mask[b, j] = 1
  (Mistral, sliding window W = 5: also j > i - W). Indices are row indices, not positions.
- A query that sees no key (a left-pad position) attends uniformly (1/T) to all T keys of
  its row: transformers adds finfo.min to every score and the softmax of equal values is
  uniform. Real queries never see pads.
- Positions: right batch and every classification batch: arange(T) (position_ids not
  passed). Causal-LM left batch: position_ids = (cumsum(mask) - 1).clamp(min=0), passed.
  `<b>.position_ids` stores what was used.
- Classification: logits = score(final_hidden) at the last token whose id is not
  pad_token_id (`pool_index`; transformers looks at input_ids, not the mask); loss = mean
  cross-entropy over rows.
- Causal LM: logits[b, t] predicts labels[b, t+1]; labels = input_ids with -100 on pads;
  loss = sum of token_loss / number of counted positions over the whole batch (right 28,
  left 26). In the LEFT batch the last pad of each padded row predicts the first real token
  and counts: the loss and gradients depend on that fully masked (uniform) position.
  Logits at other pad positions are stored but meaningless.
- `hidden.0` = embedding output, `hidden.i` = output of layer i-1 (before the final norm),
  `final_hidden` = final RMSNorm output (what the head sees).
- Tied `smollm_lm`: lm_head is embed_tokens; one tensor, one gradient (the sum of both uses).
- Tolerances: `f32_vs_f64` (per golden, per batch, per tensor in golden.json) is how far
  torch's float32 is from float64; a C float32 result cannot be expected closer to the
  stored values than a few times that (here ~1e-5 abs on logits, ~1e-5 normwise rel on
  gradients; elementwise rel on tiny gradient entries is far larger).
- `grad.<p>` has the shape of parameter p; `step3.<p>` is p after 3 AdamW steps (lr 1e-3,
  betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every parameter) on the right batch.
"""


def tensor_table(ti):
    """Rows (name, dtype, shape) with right/left pairs folded into <b>, and per-parameter
    families (grad/step3/dequant) folded into one row each."""
    rows, fam = {}, {}
    for k, v in sorted(ti.items()):
        d, s = DT.get(v["dtype"], v["dtype"]), v["shape"]
        b, rest = (k.split(".", 1) if k.split(".", 1)[0] in ("right", "left") else (None, k))
        for f in ("grad.", "step3.", "dequant."):
            if rest.startswith(f):
                fam.setdefault((b, f[:-1]), []).append((rest[len(f):], d, str(s)))
                break
        else:
            rows.setdefault((rest, d, str(s)), set()).add(b)
    out = []
    for (rest, d, s), bs in sorted(rows.items()):
        name = rest if bs == {None} else ("<b>." + rest if bs == {"right", "left"}
                                          else "%s.%s" % (sorted(bs)[0], rest))
        out.append((name, d, s))
    families = {}
    for (b, f), params in fam.items():
        families.setdefault((f, tuple(params)), set()).add(b)
    return out, families


def fold_layers(params):
    """Parameters of every layer listed once, as layers.{i} (i = 0 .. LAYERS-1)."""
    out = []
    for p, d, sh in params:
        q = re.sub(r"\.layers\.\d+\.", ".layers.{i}.", p)
        if (q, d, sh) not in out:
            out.append((q, d, sh))
    return out


def fmt_families(families):
    """One table per distinct parameter list, naming every family that uses it."""
    by_params = {}
    for (f, params), bs in sorted(families.items(), key=lambda x: x[0][0]):
        where = ("<b>." if bs == {"right", "left"} else
                 "" if bs == {None} else "%s." % sorted(x for x in bs if x)[0])
        by_params.setdefault(params, []).append("`%s%s.<p>`" % (where, f))
    lines = []
    for params, names in by_params.items():
        folded = fold_layers(params)
        lines.append("%s for these %d p (%s; layers.{i}: i = 0, 1):\n" % (
            " and ".join(names), len(params), params[0][1]))
        lines.append("| p | shape |\n|---|---|")
        for p, _, sh in folded:
            lines.append("| `%s` | %s |" % (p, sh))
        lines.append("")
    return lines


def tol_line(meta):
    tol = meta.get("f32_vs_f64", {})
    parts = []
    for b in ("right", "left"):
        t = tol.get(b, {})
        lg = t.get("logits") or t.get("logits_real_positions")
        if lg:
            parts.append("%s: logits max_abs %.1e (rel %.1e), loss %.1e, grads max_rel %.1e" % (
                b, lg["max_abs"], lg["max_rel"], t["loss"]["max_abs"], t["grad_all"]["max_rel"]))
    return "; ".join(parts)


def section(name, meta):
    lines = ["## `%s`" % name, ""]
    m = meta.get("model", {})
    if name.startswith("qlora"):
        q, lo = meta["quantization"], meta["lora"]
        lines.append("llama_lm with its %d decoder linears in NF4 (bitsandbytes, blocksize %d, "
                     "double quant, float32 compute; embeddings, norms and lm_head stay "
                     "float32) + PEFT LoRA r=%d, alpha=%d on all of them. Base: the float32 "
                     "llama_lm (`config.json` + `model.safetensors`); `quantized_model/` is "
                     "the 4-bit save_pretrained, `peft_adapter/` the LoRA; `dequant.*` the "
                     "weights the forward really uses (QLoRA == LoRA on them, bit for bit)." %
                     (len(q["quantized_modules"]), q["blocksize"], lo["r"], lo["lora_alpha"]))
    else:
        lines.append("%s: %s, kv heads: %d, rope %s, tied %s%s%s." % (
            m.get("class"), m.get("attention", "").split(" ")[0], m.get("kv_heads", 0),
            json.dumps(m.get("rope", {}).get("config_json")), m.get("tie_word_embeddings"),
            ", q/k/v biases" if m.get("qkv_bias") else "",
            ", sliding_window %s" % m["sliding_window"] if isinstance(m.get("sliding_window"), int)
            else ""))
    if "lora" in meta and not name.startswith("qlora"):
        lo = meta["lora"]
        lines.append("")
        lines.append("PEFT LoRA r=%d, alpha=%d (scaling %g), task %s, targets %s -> %d modules; "
                     "modules_to_save %s (matched: %s). `peft_adapter/` = the adapter as PEFT "
                     "saved it." % (lo["r"], lo["lora_alpha"], lo["scaling"], lo["task_type"],
                                    json.dumps(lo["target_modules_requested"]),
                                    len(lo["lora_modules"]), json.dumps(lo["modules_to_save"]),
                                    ", ".join(lo["modules_to_save_matched"]) or "none"))
    lines += ["", "f32 vs f64 noise: " + tol_line(meta), "",
              "| tensor | dtype | shape |", "|---|---|---|"]
    rows, fams = tensor_table(meta["tensor_index"])
    lines += ["| `%s` | %s | %s |" % r for r in rows]
    lines.append("")
    lines += fmt_families(fams)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--golden-dir", default=os.path.join(ROOT, "tests", "golden"))
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if DECODER.md differs from what would be written")
    args = ap.parse_args()
    lines = [INTRO]
    for g in GOLDENS:
        with open(os.path.join(args.golden_dir, g, "golden.json")) as f:
            lines += section(g, json.load(f))
    text = "\n".join(lines).rstrip() + "\n"
    path = os.path.join(args.golden_dir, "DECODER.md")
    if args.check:
        with open(path) as f:
            if f.read() != text:
                print("%s is stale: run python3 tools/golden/decoder_md.py" % path)
                return 1
        print("ok   DECODER.md")
        return 0
    with open(path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
