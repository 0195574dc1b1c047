# Re-runs every golden generator into a temporary directory and compares the result with
# the committed tests/golden/<name>: the generators must be deterministic. Integer tensors
# and non-tensor files must match exactly; float tensors are reported as bit-exact or by
# their largest difference (fail above atol 1e-6 + rtol 1e-5, which only a different CPU or
# library build could cause). --update regenerates in place instead.
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

GOLDENS = {
    "cls_distilbert": "gen_cls_distilbert.py",
    "bf16_distilbert": "gen_bf16_distilbert.py",  # autocast on cls_distilbert's model (after it)
    "decoder_ops": "gen_decoder_ops.py",  # the decoder kernels alone (RMSNorm, SwiGLU, RoPE)
    "cls_bert": "gen_cls_bert.py",
    "cls_bert_gelu_new": "gen_cls_bert_gelu_new.py",
    "minilm": "gen_minilm.py",
    "lora_distilbert": "gen_lora_distilbert.py",
    "lora_bert": "gen_lora_bert.py",
    "lora_distilbert_rslora": "gen_lora_distilbert_rslora.py",
    "lora_bert_rslora": "gen_lora_bert_rslora.py",
    "nf4": "gen_nf4.py",
    "qlora_distilbert": "gen_qlora_distilbert.py",
    # Decoder goldens: one script, the golden picked by --arch.
    "llama_cls": ["gen_decoder.py", "--arch", "llama_cls"],
    "llama_lm": ["gen_decoder.py", "--arch", "llama_lm"],
    "mistral_lm": ["gen_decoder.py", "--arch", "mistral_lm"],
    "qwen2_cls": ["gen_decoder.py", "--arch", "qwen2_cls"],
    "qwen2_lm": ["gen_decoder.py", "--arch", "qwen2_lm"],
    "smollm_lm": ["gen_decoder.py", "--arch", "smollm_lm"],
    "lora_llama_cls": ["gen_decoder.py", "--arch", "lora_llama_cls"],
    "lora_qwen2_lm": ["gen_decoder.py", "--arch", "lora_qwen2_lm"],
    "qlora_llama_lm": "gen_qlora_llama_lm.py",
    "qlora_bf16_llama_lm": "gen_qlora_bf16_llama_lm.py",  # bnb compute bf16 + autocast on qlora_llama_lm's files
    "bench_cls": "gen_bench_cls.py",
    # GGUF input: ggml block dequantizers, tiny GGUF copies, the real SmolLM2 GGUF
    "ggml_dequant": "gen_ggml_dequant.py",
    "ggml_quant": "gen_ggml_quant.py",
    "gguf_tiny": "gen_gguf_tiny.py",
    "gguf_smollm2": "gen_gguf_smollm2.py",
}


def files_under(d):
    out = []
    for root, _, names in os.walk(d):
        for n in names:
            out.append(os.path.relpath(os.path.join(root, n), d))
    return sorted(out)


def compare_safetensors(a, b):
    """Returns (problems, notes) comparing two safetensors files tensor by tensor."""
    import torch
    from safetensors.torch import load_file
    ta, tb = load_file(a), load_file(b)
    problems, inexact = [], []
    if set(ta) != set(tb):
        problems.append("tensor names differ: only committed %s, only new %s" %
                        (sorted(set(ta) - set(tb))[:5], sorted(set(tb) - set(ta))[:5]))
    for k in sorted(set(ta) & set(tb)):
        x, y = ta[k], tb[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            problems.append("%s: %s%s vs %s%s" % (k, x.dtype, list(x.shape), y.dtype, list(y.shape)))
            continue
        if torch.equal(x, y) or (x.is_floating_point() and
                                 torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))):
            continue
        if not x.is_floating_point():
            problems.append("%s: integer values differ" % k)
            continue
        d = (x.double() - y.double()).abs()
        inexact.append("%s max|diff| %.3g" % (k, d.max().item()))
        if not torch.allclose(x.double(), y.double(), atol=1e-6, rtol=1e-5):
            problems.append("%s: max|diff| %.3g beyond tolerance" % (k, d.max().item()))
    return problems, inexact


def compare_dirs(committed, new):
    problems, inexact = [], []
    fa, fb = files_under(committed), files_under(new)
    if fa != fb:
        problems.append("file lists differ: only committed %s, only new %s" %
                        (sorted(set(fa) - set(fb)), sorted(set(fb) - set(fa))))
    for rel in sorted(set(fa) & set(fb)):
        a, b = os.path.join(committed, rel), os.path.join(new, rel)
        if rel.endswith(".safetensors"):
            p, i = compare_safetensors(a, b)
            problems += ["%s: %s" % (rel, x) for x in p]
            inexact += ["%s: %s" % (rel, x) for x in i]
        elif rel.endswith(".json"):
            with open(a) as f1, open(b) as f2:
                ja, jb = json.load(f1), json.load(f2)
            if ja != jb:
                problems.append("%s: JSON content differs" % rel)
        else:
            with open(a, "rb") as f1, open(b, "rb") as f2:
                if f1.read() != f2.read():
                    problems.append("%s: bytes differ" % rel)
    return problems, inexact


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--golden-dir", default=os.path.join(ROOT, "tests", "golden"))
    ap.add_argument("--update", action="store_true", help="regenerate in place")
    ap.add_argument("names", nargs="*", help="subset of goldens (default: all)")
    args = ap.parse_args()
    names = args.names or list(GOLDENS)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="loupe-golden-") as tmp:
        for name in names:
            if name not in GOLDENS:
                print("unknown golden %s (known: %s)" % (name, ", ".join(GOLDENS)))
                return 2
            committed = os.path.join(args.golden_dir, name)
            dest = committed if args.update else os.path.join(tmp, name)
            gen = GOLDENS[name] if isinstance(GOLDENS[name], list) else [GOLDENS[name]]
            cmd = [sys.executable, os.path.join(HERE, gen[0])] + gen[1:] + ["--out", dest]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                print("FAIL %s: generator exited %d\n%s" % (name, r.returncode, r.stdout[-3000:]))
                failed += 1
                continue
            if args.update:
                print("updated %s" % name)
                continue
            if not os.path.isdir(committed):
                print("FAIL %s: no committed golden at %s" % (name, committed))
                failed += 1
                continue
            problems, inexact = compare_dirs(committed, dest)
            if problems:
                failed += 1
                print("FAIL %s:\n  %s" % (name, "\n  ".join(problems[:20])))
            elif inexact:
                print("ok   %s (within tolerance, not bit-exact: %s)" % (name, "; ".join(inexact[:5])))
            else:
                print("ok   %s (bit-exact, %d files)" % (name, len(files_under(committed))))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
