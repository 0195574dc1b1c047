# Golden for loupe's GGML quantizers (src/kernels/cpu/ggml_quant.c): f32 rows and the
# bytes the `gguf` package's quantize() writes for them as Q8_0 and Q4_0 (what llama.cpp's
# converter writes). Rows are random normals at several scales plus adversarial blocks:
# all zero, all equal, one spike, a negative extreme, values on the rounding boundaries
# (k + 0.5 steps of the block scale), a scale too small for f16 and the f16 range's edge.
# (A block of f32 subnormals is left out: 1 / d overflows and numpy casts inf to int.)
# Run: python3 tools/golden/gen_ggml_quant.py --out tests/golden/ggml_quant
import argparse
import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from safetensors.numpy import save_file


def blocks(rng):
    out = [rng.normal(0, s, 32) for s in (1e-3, 0.02, 1.0, 30.0) for _ in range(6)]
    out.append(np.zeros(32))
    out.append(np.full(32, 0.75))
    out.append(np.full(32, -2.5))
    spike = np.zeros(32); spike[7] = 3.0; out.append(spike)
    neg = rng.normal(0, 1, 32); neg[3] = -9.0; out.append(neg)
    half = (np.arange(32) - 16 + 0.5) / 16.0 * 8.0; out.append(half)   # Q4_0 midpoints
    out.append((np.arange(32) - 16 + 0.5) * (127.0 / 16.0) / 127.0)     # Q8_0 midpoints
    out.append(np.full(32, 1e-30))                                      # scale below f16: d = 0
    out.append(rng.uniform(-60000, 60000, 32))                          # near the f16 edge
    return np.concatenate(out).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    x = blocks(np.random.default_rng(4321))
    tensors = {"input": x}
    for t in (T.Q8_0, T.Q4_0):
        tensors[t.name] = gguf.quants.quantize(x.reshape(1, -1), t).reshape(-1)
    os.makedirs(a.out, exist_ok=True)
    save_file(tensors, os.path.join(a.out, "golden.safetensors"))
    with open(os.path.join(a.out, "golden.json"), "w") as fh:
        json.dump({"generator": "tools/golden/gen_ggml_quant.py", "numpy": np.__version__, "seed": 4321,
                   "what": "input: f32 (n); Q8_0, Q4_0: gguf.quants.quantize(input) bytes (u8)"}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
