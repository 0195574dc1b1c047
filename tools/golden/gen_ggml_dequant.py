# Golden for loupe's GGML block dequantizers (src/kernels/cpu/ggml_dequant.c): for each
# type, blocks of raw bytes and what the `gguf` package's dequantize() makes of them.
# Blocks are random bytes with their f16 scale fields set to chosen finite values (so no
# NaN arises from random bits) plus adversarial ones: scales 0, the largest finite f16
# (+-65504), the smallest subnormal, and all-equal quant bytes (0x00, 0xff, 0x88).
# Run: python3 tools/golden/gen_ggml_dequant.py --out tests/golden/ggml_dequant
import argparse
import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from safetensors.numpy import save_file

# byte offsets of the f16 scale fields in each block
SCALES = {T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q4_K: [0, 2], T.Q6_K: [208],
          T.Q5_0: [0], T.Q5_1: [0, 2], T.Q5_K: [0, 2]}
SPECIAL = [0.0, 65504.0, -65504.0, 2.0 ** -24, -(2.0 ** -14), 1.0]


def blocks_for(t, rng, n_random=24):
    bsz, tsz = gguf.GGML_QUANT_SIZES[t]
    out = []
    for i in range(n_random + len(SPECIAL) * 3):
        b = rng.integers(0, 256, size=tsz, dtype=np.uint8)
        if i >= n_random:
            k = i - n_random
            special = SPECIAL[k % len(SPECIAL)]
            fill = [None, 0x00, 0xFF, 0x88][k // len(SPECIAL)] if k // len(SPECIAL) < 4 else None
            scale_vals = [special] * len(SCALES[t])
        else:
            fill = None
            scale_vals = list(rng.normal(0, 0.05, size=len(SCALES[t])))
        if fill is not None:
            b[:] = fill
        for off, v in zip(SCALES[t], scale_vals):
            b[off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
        out.append(b)
    return np.concatenate(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(1234)
    tensors = {}
    for t in [T.Q8_0, T.Q4_0, T.Q4_1, T.Q4_K, T.Q6_K]:
        raw = blocks_for(t, rng)
        tensors[f"{t.name}.blocks"] = raw
        tensors[f"{t.name}.values"] = gguf.quants.dequantize(raw, t).astype(np.float32).reshape(-1)
    # element types: random finite values, subnormals, zeros, infinities
    f = np.concatenate([rng.normal(0, 3, 200), [0.0, -0.0, 6e-8, -6e-8, 65504.0, np.inf, -np.inf, 1e-5]])
    h = f.astype(np.float16)
    tensors["F16.blocks"] = np.frombuffer(h.tobytes(), dtype=np.uint8).copy()
    tensors["F16.values"] = gguf.quants.dequantize(np.frombuffer(h.tobytes(), dtype=np.uint8), T.F16).astype(np.float32).reshape(-1)
    bf = (np.concatenate([rng.normal(0, 1e3, 200), [0.0, -0.0, 1e-40, 3e38, np.inf, -np.inf]]).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    tensors["BF16.blocks"] = np.frombuffer(bf.tobytes(), dtype=np.uint8).copy()
    tensors["BF16.values"] = gguf.quants.dequantize(np.frombuffer(bf.tobytes(), dtype=np.uint8), T.BF16).astype(np.float32).reshape(-1)
    f32 = rng.normal(0, 1, 64).astype(np.float32)
    tensors["F32.blocks"] = np.frombuffer(f32.tobytes(), dtype=np.uint8).copy()
    tensors["F32.values"] = f32
    # the 5-bit formats last, so the blocks above stay what earlier versions of this file drew
    for t in [T.Q5_0, T.Q5_1, T.Q5_K]:
        raw = blocks_for(t, rng)
        tensors[f"{t.name}.blocks"] = raw
        tensors[f"{t.name}.values"] = gguf.quants.dequantize(raw, t).astype(np.float32).reshape(-1)
    os.makedirs(a.out, exist_ok=True)
    save_file(tensors, os.path.join(a.out, "golden.safetensors"))
    with open(os.path.join(a.out, "golden.json"), "w") as fh:
        json.dump({"generator": "tools/golden/gen_ggml_dequant.py", "gguf": gguf.__version__ if hasattr(gguf, "__version__") else "see pip",
                   "numpy": np.__version__, "seed": 1234,
                   "what": "<TYPE>.blocks: raw bytes (u8); <TYPE>.values: gguf.quants.dequantize of them (f32)"}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
