# Seeds for fuzz/fuzz_gguf.c: small GGUF files written by the `gguf` package's own writer
# (every metadata value type, string and nested arrays, custom alignment, tensors of each
# type loupe dequantizes). Run: python3 tools/make_gguf_seeds.py fuzz/seeds/gguf
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)


def write(name, fill, alignment=None):
    w = gguf.GGUFWriter(os.path.join(out, name), "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def meta(w):
    w.add_uint8("u8", 7)
    w.add_int8("i8", -7)
    w.add_uint16("u16", 700)
    w.add_int16("i16", -700)
    w.add_uint32("u32", 70000)
    w.add_int32("i32", -70000)
    w.add_float32("f32", 0.5)
    w.add_uint64("u64", 1 << 40)
    w.add_int64("i64", -(1 << 40))
    w.add_float64("f64", 0.25)
    w.add_bool("b", True)
    w.add_string("s", "héllo")
    w.add_array("strs", ["a", "bb", ""])
    w.add_array("ints", [1, 2, 3])
    w.add_array("nested", [[1, 2], [3]])
    w.add_block_count(1)


def tensors(w):
    w.add_tensor("f32", rng.normal(size=(2, 8)).astype(np.float32))
    w.add_tensor("f16", rng.normal(size=(8,)).astype(np.float16))
    for t in [T.Q8_0, T.Q4_0, T.Q4_1, T.Q4_K, T.Q6_K, T.BF16, T.Q5_0, T.Q5_1, T.Q5_K]:
        if t in (T.Q4_K, T.Q5_K, T.Q6_K):  # the package has no K-quantizer: random blocks, sane f16 scales
            q = rng.integers(0, 256, size=(1, gguf.GGML_QUANT_SIZES[t][1]), dtype=np.uint8)
            off = 208 if t == T.Q6_K else 0
            q[0, off:off + 2] = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
        else:
            q = gguf.quants.quantize(rng.normal(size=(64,)).astype(np.float32), t)
        w.add_tensor(t.name.lower(), q, raw_dtype=t)


write("meta.gguf", meta)
write("tensors.gguf", tensors)
write("aligned64.gguf", lambda w: (meta(w), tensors(w)), alignment=64)


def model_meta(w):
    w.add_block_count(2)
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_feed_forward_length(160)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_string("llama.rope.scaling.type", "linear")
    w.add_float32("llama.rope.scaling.factor", 2.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(["a", "b", "ab", "\u0120", "<s>", "é", "<think>"])
    w.add_token_types([1, 1, 1, 1, 3, 1, 4])
    w.add_token_merges(["a b"])
    w.add_bos_token_id(4)
    w.add_eos_token_id(4)
    w.add_add_bos_token(True)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")


write("model_tokenizer.gguf", model_meta)
