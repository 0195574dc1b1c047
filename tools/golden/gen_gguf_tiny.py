# Tiny GGUF files for loupe's GGUF loader test (tests/models/test_gguf_tiny.c): the tiny
# decoder goldens smollm_lm (llama arch: MHA, tied embeddings) and qwen2_lm (GQA 4/1, q/k/v
# biases) rewritten as llama.cpp's converter writes them: GGUF names, ggml dimension order,
# and for llama-arch files the rows of attn_q/attn_k permuted into llama.cpp's rotary layout
# (convert_hf_to_gguf.py's permute). All tensors F32, so loupe loading the GGUF must give the
# logits it gives from the Hugging Face directory.
# Run: python3 tools/golden/gen_gguf_tiny.py --out tests/golden/gguf_tiny
import argparse
import json
import os

import numpy as np
import gguf
from safetensors.numpy import load_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def permute(w, n_head, n_head_kv):
    # llama.cpp: reshape(n_head, 2, rows/n_head/2, ...).swapaxes(1, 2)
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}


def gguf_name(hf):
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if hf in top:
        return top[hf]
    parts = hf.split(".")  # model.layers.N.<module...>.weight|bias
    mod = ".".join(parts[3:-1])
    return f"blk.{parts[2]}.{NAMES[mod]}.{parts[-1]}"


def convert(src, dst, arch):
    cfg = json.load(open(os.path.join(src, "config.json")))
    w = load_file(os.path.join(src, "model.safetensors"))
    rope = cfg.get("rope_parameters") or {}
    theta = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    g = gguf.GGUFWriter(dst, arch)
    g.add_name(os.path.basename(src))
    g.add_block_count(cfg["num_hidden_layers"])
    g.add_context_length(cfg["max_position_embeddings"])
    g.add_embedding_length(cfg["hidden_size"])
    g.add_feed_forward_length(cfg["intermediate_size"])
    g.add_head_count(nh)
    g.add_head_count_kv(nkv)
    g.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    g.add_rope_freq_base(theta)
    g.add_rope_dimension_count(cfg.get("head_dim", cfg["hidden_size"] // nh))
    g.add_vocab_size(cfg["vocab_size"])
    for name in sorted(w):
        t = w[name].astype(np.float32)
        if arch == "llama" and (".q_proj." in name or ".k_proj." in name):
            t = permute(t, nh, nh if ".q_proj." in name else nkv)
        g.add_tensor(gguf_name(name), np.ascontiguousarray(t))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for model, arch in [("smollm_lm", "llama"), ("qwen2_lm", "qwen2")]:
        convert(os.path.join(ROOT, "tests", "golden", model), os.path.join(a.out, model + ".gguf"), arch)
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write("Tiny GGUF copies of tests/golden/smollm_lm (llama arch, q/k rows permuted as llama.cpp does)\n"
                "and tests/golden/qwen2_lm (qwen2 arch), all F32; written by tools/golden/gen_gguf_tiny.py.\n")


if __name__ == "__main__":
    main()
