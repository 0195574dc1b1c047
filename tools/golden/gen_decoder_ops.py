# Golden: the decoder ops other than attention, computed by transformers' own modules --
# LlamaRMSNorm, ACT2FN["silu"] gating, LlamaRotaryEmbedding (its rope initializers from
# modeling_rope_utils.py, one case per rope_scaling type) and apply_rotary_pos_emb -- forward
# and backward (autograd), each also run in float64 for the f32_vs_f64 noise floor.
# Usage: python3 tools/golden/gen_decoder_ops.py --out tests/golden/decoder_ops
import math

import torch

import golden_common as gc

RMS_CASES = {  # name: (N, C, eps)
    "rms_96": (7, 96, 1e-6),
    "rms_896": (3, 896, 1e-6),   # Qwen2-0.5B's hidden size
    "rms_7": (5, 7, 1e-5),
}

SWIGLU = (6, 40)  # N, F

# name: (rope_parameters, head_dim, H, Hkv); max_position_embeddings = factor * original for
# yarn (transformers warns when they disagree)
ROPE_CASES = {
    "rope_default": ({"rope_type": "default", "rope_theta": 10000.0}, 64, 3, 1),
    "rope_default_d8": ({"rope_type": "default", "rope_theta": 10000.0}, 8, 2, 2),
    "rope_qwen2": ({"rope_type": "default", "rope_theta": 1000000.0}, 128, 2, 1),
    "rope_linear": ({"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}, 64, 2, 1),
    "rope_llama3": ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, 128, 2, 1),
    "rope_yarn": ({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                   "original_max_position_embeddings": 2048}, 64, 2, 1),
    "rope_yarn_mscale": ({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
                          "original_max_position_embeddings": 4096, "beta_fast": 16.0, "beta_slow": 2.0,
                          "mscale": 1.0, "mscale_all_dim": 0.5, "truncate": False}, 64, 2, 2),
    "rope_yarn_attn": ({"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                        "original_max_position_embeddings": 32768, "attention_factor": 1.5}, 128, 1, 1),
}

# positions (B=2, T=9): a plain row, and one with repeats (left padding) and large positions
POSITIONS = [[0, 1, 2, 3, 4, 5, 6, 7, 8], [1, 1, 1, 0, 1, 2, 4095, 16383, 32767]]


def rmsnorm_case(name, N, C, eps, g, t, stats, info):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    x = torch.randn(N, C, generator=g)
    x = x * torch.tensor([10.0 ** (k % 5 - 2) for k in range(N)]).unsqueeze(1)  # rows 1e-2 .. 1e2
    w = 1.0 + 0.3 * torch.randn(C, generator=g)
    dout = torch.randn(N, C, generator=g)
    res = {}
    for dt in (torch.float64, torch.float32):
        xi = x.to(dt).clone().requires_grad_(True)
        if dt == torch.float32:
            m = LlamaRMSNorm(C, eps=eps)
            with torch.no_grad():
                m.weight.copy_(w)
            y = m(xi)
            wg = m.weight
        else:  # LlamaRMSNorm computes in float32 whatever its input: its formula in float64
            wg = w.double().requires_grad_(True)
            y = wg * (xi * torch.rsqrt(xi.pow(2).mean(-1, keepdim=True) + eps))
        y.backward(dout.to(dt))
        rstd = torch.rsqrt(xi.detach().pow(2).mean(-1) + eps)
        res[dt] = (y.detach(), xi.grad, wg.grad, rstd)
    y, dx, dw, rstd = res[torch.float32]
    for k, v in {"x": x, "weight": w, "dout": dout, "out": y, "rstd": rstd, "dinp": dx, "dweight": dw}.items():
        t[name + "." + k] = v
    stats[name] = {k: gc.diff_stats(a, b) for k, a, b in zip(("out", "dinp", "dweight", "rstd"),
                                                            res[torch.float32], res[torch.float64])}
    info[name] = {"N": N, "C": C, "eps": eps}


def swiglu_case(g, t, stats):
    from transformers.activations import ACT2FN
    N, F = SWIGLU
    gu = 4.0 * torch.randn(N, 2 * F, generator=g)
    extremes = [1e30, -1e30, 1e13, -1e13, 88.5, -88.5, 90.0, -90.0, 100.0, -100.0, 0.0, -1.278, 20.0, -20.0]
    gu[0, :len(extremes)] = torch.tensor(extremes)
    dout = torch.randn(N, F, generator=g)
    res = {}
    act = ACT2FN["silu"]
    for dt in (torch.float64, torch.float32):
        gi = gu.to(dt).clone().requires_grad_(True)
        gate, up = gi[:, :F], gi[:, F:]
        y = act(gate) * up
        y.backward(dout.to(dt))
        res[dt] = (y.detach(), gi.grad[:, :F], gi.grad[:, F:])
    y, dgate, dup = res[torch.float32]
    assert torch.isfinite(y).all() and torch.isfinite(dgate).all() and torch.isfinite(dup).all()
    t.update({"swiglu.gate_up": gu, "swiglu.dout": dout, "swiglu.out": y, "swiglu.dgate": dgate,
              "swiglu.dup": dup})
    stats["swiglu"] = {k: gc.diff_stats(a, b) for k, a, b in zip(("out", "dgate", "dup"), res[torch.float32],
                                                                 res[torch.float64])}


def rope_case(name, params, D, H, Hkv, g, t, stats, info):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    params = dict(params)
    maxpos = int(params.get("factor", 1.0) * params.get("original_max_position_embeddings", 4096))
    cfg = LlamaConfig(hidden_size=H * D, num_attention_heads=H, num_key_value_heads=Hkv, head_dim=D,
                      max_position_embeddings=maxpos, rope_parameters=params)
    rot = LlamaRotaryEmbedding(cfg)
    pos = torch.tensor(POSITIONS, dtype=torch.int64)
    B, T = pos.shape
    q = torch.randn(B, T, H, D, generator=g)  # token-major, as loupe lays out q and k
    k = torch.randn(B, T, Hkv, D, generator=g)
    dq_out = torch.randn(B, T, H, D, generator=g)
    dk_out = torch.randn(B, T, Hkv, D, generator=g)
    x = torch.zeros(B, T, H * D)
    cos, sin = rot(x, pos)  # (B, T, D) float32, attention scaling included
    half = D // 2
    assert torch.equal(cos[..., :half], cos[..., half:]) and torch.equal(sin[..., :half], sin[..., half:])
    res = {}
    for dt in (torch.float64, torch.float32):
        if dt == torch.float64:  # the same formulas in float64 from the float64 inv_freq
            ang = pos.double()[..., None] * inv_freq_f64(D, params)
            emb = torch.cat((ang, ang), -1)
            c, s = emb.cos() * rot.attention_scaling, emb.sin() * rot.attention_scaling
        else:
            c, s = cos, sin
        qi = q.to(dt).clone().requires_grad_(True)
        ki = k.to(dt).clone().requires_grad_(True)
        # apply_rotary_pos_emb broadcasts cos (B,T,D) over heads with unsqueeze_dim=2 here
        qe, ke = apply_rotary_pos_emb(qi, ki, c, s, unsqueeze_dim=2)
        (qe * dq_out.to(dt)).sum().add((ke * dk_out.to(dt)).sum()).backward()
        res[dt] = (qe.detach(), ke.detach(), qi.grad, ki.grad, c[..., :half], s[..., :half])
    qe, ke, dq, dk, c, s = res[torch.float32]
    for kname, v in {"inv_freq": rot.inv_freq, "attn_factor": torch.tensor(float(rot.attention_scaling)),
                     "pos": pos.to(torch.int32), "cos": c, "sin": s, "q": q, "k": k, "q_embed": qe, "k_embed": ke,
                     "dq_embed": dq_out, "dk_embed": dk_out, "dq": dq, "dk": dk}.items():
        t[name + "." + kname] = v
    stats[name] = {kn: gc.diff_stats(a, b) for kn, a, b in zip(("q_embed", "k_embed", "dq", "dk", "cos", "sin"),
                                                               res[torch.float32], res[torch.float64])}
    info[name] = {"rope_parameters": params, "head_dim": D, "H": H, "Hkv": Hkv, "max_position_embeddings": maxpos,
                  "attention_factor": float(rot.attention_scaling)}


def inv_freq_f64(D, params):
    """The rope initializers' formulas redone in float64 (for the noise floor only)."""
    base = params["rope_theta"]
    pf = base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    inv = 1.0 / pf
    rt = params["rope_type"]
    if rt == "linear":
        inv = inv / params["factor"]
    elif rt == "llama3":
        f, lo, hi, old = (params["factor"], params["low_freq_factor"], params["high_freq_factor"],
                          params["original_max_position_embeddings"])
        wl = 2 * math.pi / inv
        il = torch.where(wl > old / lo, inv / f, inv)
        sm = (old / wl - lo) / (hi - lo)
        smoothed = (1 - sm) * il / f + sm * il
        med = ~(wl < old / hi) * ~(wl > old / lo)
        inv = torch.where(med, smoothed, il)
    elif rt == "yarn":
        f, old = params["factor"], params["original_max_position_embeddings"]
        bf, bs = params.get("beta_fast") or 32, params.get("beta_slow") or 1

        def cdim(nrot):
            return (D * math.log(old / (nrot * 2 * math.pi))) / (2 * math.log(base))
        lo, hi = cdim(bf), cdim(bs)
        if params.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, D - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(D // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
        ef = 1 - ramp
        inv = (1.0 / (f * pf)) * (1 - ef) + (1.0 / pf) * ef
    return inv


def main():
    out = gc.parse_out("decoder ops golden")
    gc.setup()
    gc.fresh_dir(out)
    g = torch.Generator().manual_seed(gc.SEED + 20)
    t, stats, info = {}, {}, {}
    for name, (N, C, eps) in RMS_CASES.items():
        rmsnorm_case(name, N, C, eps, g, t, stats, info)
    swiglu_case(g, t, stats)
    for name, (params, D, H, Hkv) in ROPE_CASES.items():
        rope_case(name, params, D, H, Hkv, g, t, stats, info)
    meta = {
        "golden": "decoder_ops", "versions": gc.versions(), "seed": gc.SEED + 20,
        "what": "transformers' LlamaRMSNorm, ACT2FN['silu'](gate) * up, LlamaRotaryEmbedding + "
                "apply_rotary_pos_emb; forward in float32 and gradients by autograd",
        "rmsnorm": {k: v for k, v in info.items() if k.startswith("rms")} | {"call": "LlamaRMSNorm(C, eps); weight = <r>.weight; y = m(x); y.backward(<r>.dout)",
                           "rstd": "torch.rsqrt(mean(x^2) + eps) per row (float32), what loupe saves"},
        "swiglu": {"N": SWIGLU[0], "F": SWIGLU[1],
                   "call": "gate, up = gate_up[:, :F], gate_up[:, F:]; out = ACT2FN['silu'](gate) * up; "
                           "out.backward(dout); dgate, dup = the two halves of gate_up.grad",
                   "extremes": "row 0 starts with gate = +-1e30, +-1e13, +-88.5, +-90, +-100, 0, -1.278 (the zero "
                               "of silu'), +-20: every output and gradient is finite"},
        "rope": {"positions": POSITIONS, "cases": {k: v for k, v in info.items() if k.startswith("rope")},
                 "call": "cfg = LlamaConfig(head_dim=D, rope_parameters=...); rot = LlamaRotaryEmbedding(cfg); "
                         "cos, sin = rot(x, pos); q_embed, k_embed = apply_rotary_pos_emb(q, k, cos, sin, "
                         "unsqueeze_dim=2); backward of sum(q_embed * dq_embed) + sum(k_embed * dk_embed)",
                 "layout": "q (B,T,H,D), k (B,T,Hkv,D) token-major; cos, sin stored as (B,T,D/2): the first half "
                           "of transformers' (B,T,D) (the halves are equal); inv_freq (D/2) is the module's float32 "
                           "buffer, attn_factor its attention_scaling (a Python float)",
                 "f64": "cos/sin and the rotation redone in float64 from a float64 inv_freq (yarn: same ramp); "
                        "the cos/sin noise grows with the angle (positions up to 32767: the float32 angle itself "
                        "is off by up to half an ulp of 32767, ~2e-3)"},
        "tensors": {"<rms>.x/weight/dout": "inputs", "<rms>.out/rstd/dinp/dweight": "float32 results",
                    "swiglu.gate_up (N,2F), swiglu.dout (N,F)": "inputs",
                    "swiglu.out (N,F), swiglu.dgate, swiglu.dup (N,F)": "float32 results",
                    "<rope>.inv_freq (D/2), attn_factor (), pos (2,9) i32": "module state and positions",
                    "<rope>.cos/sin (2,9,D/2)": "float32 cache", "<rope>.q/k, dq_embed/dk_embed": "inputs",
                    "<rope>.q_embed/k_embed/dq/dk": "float32 results"},
        "f32_vs_f64": stats,
    }
    gc.save_golden(out, t, meta)


if __name__ == "__main__":
    main()
