# A float64 reference for the decoder goldens. transformers' decoders pin parts of the
# computation to float32 whatever the model dtype (RMSNorm upcasts to float32, eager
# attention's softmax takes dtype=float32, the rotary embedding multiplies positions by
# inv_freq in float32, the causal-LM loss calls logits.float()), so model.double() alone
# would measure a float32 noise floor against a partly-float32 reference. Inside
# float64_internals() those four places compute in the input dtype instead, the rotary
# inv_freq is recomputed in float64 from the config, and a dispatch mode checks that no
# float32 tensor is produced at all.
import contextlib
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def inv_freq_f64(cfg):
    """The rotary inverse frequencies of transformers' default and llama3 RoPE, in float64."""
    rp = cfg.rope_parameters
    dim = cfg.head_dim
    inv = 1.0 / (rp["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if rp["rope_type"] == "default":
        return inv
    assert rp["rope_type"] == "llama3", rp
    factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    old = rp["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
    return torch.where(medium, smoothed, scaled)


def _rms_forward(self, x):
    var = x.pow(2).mean(-1, keepdim=True)
    return self.weight * (x * torch.rsqrt(var + self.variance_epsilon))


def _rotary_forward(self, x, position_ids):
    freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(torch.float64)
    emb = torch.cat((freqs, freqs), dim=-1)
    return ((emb.cos() * self.attention_scaling).to(x.dtype),
            (emb.sin() * self.attention_scaling).to(x.dtype))


def _make_eager(repeat_kv):
    def eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        k = repeat_kv(key, module.num_key_value_groups)
        v = repeat_kv(value, module.num_key_value_groups)
        w = torch.matmul(query, k.transpose(2, 3)) * scaling
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1, dtype=query.dtype)
        assert dropout == 0.0
        return torch.matmul(w, v).transpose(1, 2).contiguous(), w
    return eager


class _NoFloat32(TorchDispatchMode):
    """Records every aten op that produced a float32 tensor."""

    def __init__(self):
        super().__init__()
        self.bad = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                self.bad.add(str(func))
        return out


def _modules():
    from transformers.models.llama import modeling_llama as L
    from transformers.models.mistral import modeling_mistral as M
    from transformers.models.qwen2 import modeling_qwen2 as Q
    return [(L, L.LlamaRMSNorm, L.LlamaRotaryEmbedding),
            (M, M.MistralRMSNorm, M.MistralRotaryEmbedding),
            (Q, Q.Qwen2RMSNorm, Q.Qwen2RotaryEmbedding)]


def prepare(model64):
    """Replace the (float32-computed, then cast) rotary inv_freq buffers by float64 ones."""
    for m in model64.modules():
        if type(m).__name__.endswith("RotaryEmbedding"):
            f64 = inv_freq_f64(m.config)
            # The float32 buffer transformers computed must be the same frequencies.
            assert torch.allclose(m.inv_freq.double(), f64, rtol=1e-6, atol=0), (m.inv_freq, f64)
            m.inv_freq = f64


@contextlib.contextmanager
def float64_internals():
    saved = []
    for mod, rms, rot in _modules():
        saved += [(rms, "forward", rms.forward), (rot, "forward", rot.forward),
                  (mod, "eager_attention_forward", mod.eager_attention_forward)]
        rms.forward = _rms_forward
        rot.forward = _rotary_forward
        mod.eager_attention_forward = _make_eager(mod.repeat_kv)
    guard = _NoFloat32()
    # AdamW keeps its step counter as a tensor of the default dtype.
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with guard:
            yield
    finally:
        torch.set_default_dtype(default)
        for obj, name, val in saved:
            setattr(obj, name, val)
    assert not guard.bad, "float32 ops in the float64 reference: %s" % sorted(guard.bad)
