# Golden: bitsandbytes NF4 (blocksize 64) quantization of several matrices, with and without
# double quantization (compress_statistics=True), plus a numpy re-derivation of every rule
# that golden.json documents (packing, rounding, double-quant), asserted bit for bit.
# Usage: python3 tools/golden/gen_nf4.py --out tests/golden/nf4
import json

import numpy as np
import torch

import golden_common as gc

BLOCK = 64
NESTED_BLOCK = 256


def matrices():
    g = torch.Generator().manual_seed(gc.SEED + 10)
    m = {}
    m["normal_64x64"] = 0.05 * torch.randn(64, 64, generator=g)
    m["uniform_100x70"] = 0.6 * torch.rand(100, 70, generator=g) - 0.3     # n % 64 = 24
    w = 0.02 * torch.randn(128, 256, generator=g)                          # n = 2*64*256
    idx = torch.randperm(w.numel(), generator=g)[:160]
    w.view(-1)[idx] *= 100.0                                               # outliers
    m["outliers_128x256"] = w
    m["normal_150x130"] = torch.randn(150, 130, generator=g)              # 305 blocks: 2 nested, last partial
    m["odd_33x17"] = 0.1 * torch.randn(33, 17, generator=g)               # n odd: padded nibble
    z = 0.01 * torch.randn(16, 64, generator=g)
    z[0] = 0.0                                   # all-zero block (absmax 0)
    z[1] = 0.0
    z[1, 5] = -3e-3                              # one non-zero value in a block
    z[2] = 1e-30 * torch.randn(64, generator=g)  # tiny magnitudes
    z[3] = 1e6 * torch.randn(64, generator=g)    # huge magnitudes
    m["edge_16x64"] = z
    m["ties_2x64"] = ties()
    m["single_1x3"] = torch.tensor([[0.5, -0.25, 0.125]])
    return m


def nf4_code():
    import bitsandbytes.functional as F
    return F.get_4bit_type("nf4", device="cpu").float()


def ties():
    """Blocks with absmax 1.0 whose other values sit exactly on the NF4 decision thresholds
    (float32 midpoints of neighbouring codes) and on the codes themselves."""
    c = nf4_code()
    mids = (c[:-1] + c[1:]) / 2
    row0 = torch.cat([torch.tensor([1.0]), mids, c, -mids, torch.zeros(64 - 1 - 15 - 16 - 15)])
    row1 = torch.cat([torch.tensor([-1.0]), mids * 0.5, c * 0.5, torch.full((64 - 32,), -0.5)])
    return torch.stack([row0, row1]).float()


# ---------------- numpy re-derivation (documents the rules; asserted equal) ----------------

def np_quantize_nf4(x, code):
    f = x.reshape(-1).astype(np.float32)
    n = f.size
    nb = -(-n // BLOCK)
    absmax = np.zeros(nb, np.float32)
    scaled = np.zeros(n, np.float32)
    for b in range(nb):
        blk = f[b * BLOCK:(b + 1) * BLOCK]
        am = np.float32(np.abs(blk).max())
        absmax[b] = am
        # torch: x * (1/max(absmax, 1e-38)) for full blocks, x / max(absmax, 1e-38) for the tail
        den = np.float32(max(am, np.float32(1e-38)))
        if (b + 1) * BLOCK <= n:
            s = blk * (np.float32(1.0) / den)
        else:
            s = blk / den
        scaled[b * BLOCK:b * BLOCK + blk.size] = np.clip(s, -1, 1)
    if n % 2:
        scaled = np.append(scaled, np.float32(0))
    mids = ((code[:-1] + code[1:]) / np.float32(2)).astype(np.float32)
    q = np.searchsorted(mids, scaled, side="left").astype(np.uint8)  # == torch.bucketize(right=False)
    packed = ((q[0::2] << 4) | q[1::2]).astype(np.uint8).reshape(-1, 1)
    return packed, absmax


def np_dequant_nf4(packed, absmax, code, n):
    p = packed.reshape(-1)
    q = np.empty(p.size * 2, np.int64)
    q[0::2] = p >> 4
    q[1::2] = p & 0xF
    v = code[q[:n]]
    blk = np.arange(n) // BLOCK
    return (v * absmax[blk]).astype(np.float32)


def np_lut_quantize_8bit(x, code2):
    """bitsandbytes' native CPU 8-bit blockwise quantizer (used for the nested absmax):
    a 65536-entry table indexed by trunc(((v+1)*0.5)*65535 + 0.5) in float32, each entry the
    nearest code to that grid point. Derived empirically from the installed .so (its C++
    source is not shipped) and checked here on every value."""
    grid = (np.arange(65536, dtype=np.float32) / np.float32(65535)) * np.float32(2) - np.float32(1)
    lut = np.abs(grid[:, None] - code2[None, :]).argmin(1).astype(np.uint8)
    f = x.astype(np.float32)
    nb = -(-f.size // NESTED_BLOCK)
    am = np.array([np.abs(f[b * NESTED_BLOCK:(b + 1) * NESTED_BLOCK]).max() for b in range(nb)],
                  np.float32)
    v = f / am[np.arange(f.size) // NESTED_BLOCK]
    v = np.clip(v, np.float32(-1), np.float32(1)).astype(np.float32)
    i = (((v + np.float32(1)) * np.float32(0.5)) * np.float32(65535) + np.float32(0.5)).astype(np.uint32)
    return lut[i], am, v


def np_nearest_8bit(v, code2):
    """Exact nearest code (midpoint thresholds, ties to the lower code): bitsandbytes'
    pure-PyTorch 'default' backend rule."""
    mids = ((code2[:-1] + code2[1:]) / np.float32(2)).astype(np.float32)
    return np.searchsorted(mids, v, side="left").astype(np.uint8)


def main():
    out = gc.parse_out("NF4 golden")
    gc.setup()
    gc.fresh_dir(out)
    import bitsandbytes as bnb
    import bitsandbytes.functional as F

    code = nf4_code()
    code_np = code.numpy()
    t = {"code.nf4": code}
    info = {}
    probe_lut_mismatch = 0
    for name, w in matrices().items():
        w = w.float().contiguous()
        n = w.numel()
        q0, s0 = F.quantize_4bit(w, blocksize=BLOCK, quant_type="nf4", compress_statistics=False)
        q1, s1 = F.quantize_4bit(w, blocksize=BLOCK, quant_type="nf4", compress_statistics=True)
        assert torch.equal(q0, q1), "double quant must not change the 4-bit codes"
        d0 = F.dequantize_4bit(q0, s0)
        d1 = F.dequantize_4bit(q1, s1)
        if "code.dynamic" not in t:
            t["code.dynamic"] = s1.state2.code.float()
        code2 = s1.state2.code.float().numpy()

        # numpy re-derivation, bit for bit
        pk, am = np_quantize_nf4(w.numpy(), code_np)
        assert np.array_equal(pk, q0.numpy()), name
        assert np.array_equal(am, s0.absmax.numpy()), name
        assert np.array_equal(np_dequant_nf4(pk, am, code_np, n), d0.reshape(-1).numpy()), name
        offset = s1.offset.float()
        assert offset.item() == s0.absmax.mean().item()
        lutq, nested, v = np_lut_quantize_8bit((s0.absmax - offset).numpy(), code2)
        assert np.array_equal(nested, s1.state2.absmax.numpy()), name
        probe_lut_mismatch += int((lutq != s1.absmax.numpy()).sum())
        nearest = np_nearest_8bit(v, code2)
        am_rec = (code2[s1.absmax.numpy().astype(np.int64)] *
                  nested[np.arange(am.size) // NESTED_BLOCK]).astype(np.float32)
        am_rec = (am_rec + offset.numpy()).astype(np.float32)   # two roundings, no FMA
        assert np.array_equal(np_dequant_nf4(pk, am_rec, code_np, n), d1.reshape(-1).numpy()), name

        t[name + ".input"] = w
        t[name + ".packed"] = q0
        t[name + ".absmax"] = s0.absmax
        t[name + ".dequant"] = d0
        t[name + ".dq.absmax_q"] = s1.absmax
        t[name + ".dq.absmax_q_nearest"] = torch.from_numpy(nearest)
        t[name + ".dq.nested_absmax"] = s1.state2.absmax
        t[name + ".dq.offset"] = offset.reshape(())
        t[name + ".dq.absmax_dequant"] = torch.from_numpy(am_rec)
        t[name + ".dq.dequant"] = d1
        mean_np = np.float32(np.sum(s0.absmax.numpy().astype(np.float64)) / am.size)
        info[name] = {"shape": list(w.shape), "n": n, "blocks": am.size,
                      "nested_blocks": int(nested.size), "last_block_len": n - (am.size - 1) * BLOCK,
                      "offset": offset.item(),
                      "offset_equals_f64_mean_rounded": bool(mean_np == offset.numpy()),
                      "absmax_q_lut_vs_nearest_differ": int((nearest != s1.absmax.numpy()).sum()),
                      "max_abs_err_nodq": (d0 - w).abs().max().item(),
                      "max_abs_err_dq": (d1 - w).abs().max().item()}
    assert probe_lut_mismatch == 0, probe_lut_mismatch

    # Large probe of the 8-bit CPU rule on random data (not stored).
    g = torch.Generator().manual_seed(gc.SEED + 11)
    probe = torch.randn(NESTED_BLOCK * 2000, generator=g) * torch.rand(NESTED_BLOCK * 2000, generator=g)
    pq, pa = torch.ops.bitsandbytes.quantize_blockwise.default(probe, t["code.dynamic"], NESTED_BLOCK)
    lq, la, lv = np_lut_quantize_8bit(probe.numpy(), t["code.dynamic"].numpy())
    assert np.array_equal(lq, pq.numpy()) and np.array_equal(la, pa.numpy())
    probe_nearest_diff = int((np_nearest_8bit(lv, t["code.dynamic"].numpy()) != pq.numpy()).sum())

    # Serialized Linear4bit form (QuantState.as_dict(packed=True)) of one matrix.
    q, s = F.quantize_4bit(t["outliers_128x256.input"], blocksize=BLOCK, quant_type="nf4",
                           compress_statistics=True)
    ser = {"serialized.weight": q}
    for k, v in s.as_dict(packed=True).items():
        ser["serialized.weight." + k] = v
    qs_json = bytes(ser["serialized.weight.quant_state.bitsandbytes__nf4"].tolist()).decode()
    t.update(ser)

    meta = {
        "golden": "nf4", "versions": gc.versions(), "seed": gc.SEED,
        "backend": "bitsandbytes CPU backend (torch CPU tensors). quantize_4bit runs the pure "
                   "PyTorch 'default' kernel (bitsandbytes/backends/default/ops.py); the nested "
                   "8-bit quantize_blockwise and dequantize_blockwise run the native "
                   "libbitsandbytes_cpu.so; dequantize_4bit runs the native CPU kernel when the "
                   "last dim is even, else the default PyTorch kernel (same formula)",
        "call": "bitsandbytes.functional.quantize_4bit(W, blocksize=64, quant_type='nf4', "
                "compress_statistics=True|False) then dequantize_4bit(packed, state)",
        "blocksize": BLOCK, "nested_blocksize": NESTED_BLOCK,
        "nf4_quantize": {
            "blocks": "W flattened row-major ([out, in] as stored) to n values; block b = "
                      "elements [64b, 64b+64); the last block may be shorter (n % 64)",
            "absmax": "absmax[b] = max |x| over the block, float32 (0 for an all-zero block)",
            "scale": "s = clamp(x * (1/max(absmax[b], 1e-38)), -1, 1) for full blocks; the "
                     "partial last block uses x / max(absmax, 1e-38) (float32; both as in "
                     "backends/default/ops.py)",
            "rounding": "code index = number of thresholds t_k < s (torch.bucketize, right=False) "
                        "with t_k = (code[k]+code[k+1])/2 in float32: nearest code, a value "
                        "exactly on a threshold goes to the LOWER code (see ties_2x64)",
            "packing": "byte j = (q[2j] << 4) | q[2j+1]: the EVEN (first) element in the HIGH "
                       "nibble, the odd (second) element in the LOW nibble; n odd -> one padding "
                       "element with scaled value 0, i.e. code 7 (0.0), in the low nibble of the "
                       "last byte; packed shape [(n+1)//2, 1] uint8",
            "dequantize": "w[i] = code[q[i]] * absmax[i // 64] (one float32 multiply)"},
        "double_quant": {
            "formula": "offset = mean(absmax) (float32 torch.mean over all blocks of the "
                       "matrix); (absmax_q, state2) = quantize_blockwise(absmax - offset, "
                       "code=dynamic map, blocksize=256): nested_absmax[c] = max |absmax[b] - "
                       "offset| over b in [256c, 256c+256); absmax_q[b] = 8-bit code of "
                       "(absmax[b]-offset)/nested_absmax[b//256]",
            "reconstruct": "absmax'[b] = float32(float32(dynamic[absmax_q[b]] * "
                           "nested_absmax[b // 256]) + offset)  -- two float32 roundings (native "
                           "dequantize_blockwise then torch '+='); do not fuse into an FMA "
                           "(-ffp-contract=off); then w = code[q] * absmax'[i // 64]",
            "dynamic_map": "create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): "
                           "256 sorted float32 values, code.dynamic; code.dynamic[0] = %r (not "
                           "-1), code.dynamic[255] = 1.0" % t["code.dynamic"][0].item(),
            "rounding_cpu": "the native CPU 8-bit quantizer is NOT exact nearest: v = x / "
                            "nested_absmax (float32, clamped to [-1,1]); j = (uint32)(((v + 1) * "
                            "0.5) * 65535 + 0.5) in float32; absmax_q = LUT[j] where LUT[j] = "
                            "index of the code nearest to grid value (j/65535)*2-1 (first minimum). "
                            "This rule was derived by experiment (the C++ source is not in the "
                            "wheel) and is asserted by this script on all %d stored values and on "
                            "%d random probe values with zero mismatches" % (
                                sum(v["blocks"] for v in info.values()), probe.numel()),
            "rounding_nearest": "exact nearest (midpoint thresholds, ties low) -- the pure "
                                "PyTorch default backend rule -- differs from the CPU LUT for "
                                "values within ~1/65535 of a threshold: %d of %d probe values; "
                                "stored as <m>.dq.absmax_q_nearest for comparison" % (
                                    probe_nearest_diff, probe.numel()),
            "advice": "a C implementation can be bit-exact with either rule; to match bitsandbytes "
                      "on CPU use the LUT rule; the offset is a float32 torch.mean, so compare "
                      "with the stored <m>.dq.offset (a different summation order can move it by "
                      "an ulp)",
            "zero_nested_absmax": "if every absmax of a nested block equals the offset (e.g. a "
                                  "matrix with one block, or all blocks with the same absmax: "
                                  "single_1x3, ties_2x64), nested_absmax = 0 and v = 0/0 = NaN; "
                                  "bitsandbytes CPU then stores code 0 (the nearest rule would "
                                  "give 255); either way absmax' = code*0 + offset = offset",
            "bits_per_param": "no DQ: 32/64 = 0.5 bits of scale; DQ: 8/64 + 32/(64*256) ~ 0.127"},
        "serialized": {"what": "QuantState.as_dict(packed=True) of outliers_128x256 with DQ, "
                               "the tensors a saved Linear4bit holds under '<module>.weight.*'",
                       "quant_state_json": json.loads(qs_json)},
        "matrices": info,
        "tensors": {
            "code.nf4": "[16] NF4 code table (bitsandbytes get_4bit_type('nf4'))",
            "code.dynamic": "[256] dynamic 8-bit map used for the nested absmax",
            "<m>.input": "the float32 matrix",
            "<m>.packed": "[(n+1)//2, 1] uint8 packed NF4 codes (identical with and without DQ)",
            "<m>.absmax": "[blocks] float32 absmax, no double quant",
            "<m>.dequant": "dequantize_4bit without double quant (shape of input)",
            "<m>.dq.absmax_q": "[blocks] uint8 codes of absmax - offset (native CPU rule)",
            "<m>.dq.absmax_q_nearest": "[blocks] uint8 exact-nearest codes (for comparison)",
            "<m>.dq.nested_absmax": "[ceil(blocks/256)] float32",
            "<m>.dq.offset": "[] float32 mean of absmax",
            "<m>.dq.absmax_dequant": "[blocks] float32 reconstructed absmax",
            "<m>.dq.dequant": "dequantize_4bit with double quant",
            "serialized.weight*": "Linear4bit state-dict tensors (see serialized)"},
        "f32_vs_f64": "not applicable: quantization is defined on float32 and is compared bit "
                      "for bit (codes, absmax, dequantized values are exact float32 results)",
    }
    gc.save_golden(out, t, meta)


if __name__ == "__main__":
    main()
