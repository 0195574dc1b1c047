"""PyTorch's side of bench/gpu: the ops loupe's CUDA backend has, on the shapes of the two
training workloads of issue 19 (DistilBERT batch 32 x seq 128; a Qwen2.5-0.5B-shaped decoder
batch 8 x seq 512), timed with CUDA events on the same card. Prints one JSON object per line:
{"op", "shape", "ms", "impl"} with impl "eager" (and "compile" for the fused ones when
torch.compile works there). Run: python3 bench/gpu/torch_ops.py [--reps 20]."""
import argparse
import json
import math

import torch
import torch.nn.functional as F


def timed(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    out = []

    def emit(op, shape, ms, impl="eager", flops=None):
        r = {"op": op, "shape": shape, "ms": round(ms, 5), "impl": impl, "gpu": torch.cuda.get_device_name(),
             "torch": torch.__version__}
        if flops:
            r["tflops"] = round(flops / ms / 1e9, 2)
        out.append(r)
        print(json.dumps(r), flush=True)

    # GEMMs of the two workloads: (M, N, K) as x (M,K) @ w^T (N,K)
    gemms = [(4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072), (4096, 896, 896), (4096, 4864, 896),
             (4096, 896, 4864), (8192, 8192, 8192)]
    for (m, n, k) in gemms:
        for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            x = torch.randn(m, k, device=dev, dtype=dt)
            w = torch.randn(n, k, device=dev, dtype=dt)
            for tf32 in ((False, True) if dt == torch.float32 else (False,)):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                ms = timed(lambda: x @ w.t(), a.reps)
                emit("gemm_" + ("tf32" if tf32 else name), f"{m}x{n}x{k}", ms, flops=2.0 * m * n * k)
    torch.backends.cuda.matmul.allow_tf32 = False

    N, C = 4096, 768
    x = torch.randn(N, C, device=dev)
    ln = torch.nn.LayerNorm(C, device=dev)
    emit("layernorm_forward", f"{N}x{C}", timed(lambda: ln(x), a.reps))
    xr = x.clone().requires_grad_()
    y = ln(xr)
    g = torch.randn_like(y)
    emit("layernorm_backward", f"{N}x{C}", timed(lambda: torch.autograd.grad(y, (xr, ln.weight, ln.bias), g, retain_graph=True), a.reps))
    C2 = 896
    x2 = torch.randn(N, C2, device=dev)
    rms = torch.nn.RMSNorm(C2, eps=1e-6, device=dev)
    emit("rmsnorm_forward", f"{N}x{C2}", timed(lambda: rms(x2), a.reps))
    h = torch.randn(N, 3072, device=dev)
    emit("gelu_forward", f"{N}x3072", timed(lambda: F.gelu(h), a.reps))
    gt, up = torch.randn(N, 4864, device=dev), torch.randn(N, 4864, device=dev)
    emit("swiglu_forward", f"{N}x4864", timed(lambda: F.silu(gt) * up, a.reps))
    s = torch.randn(32 * 12 * 128, 128, device=dev)
    emit("softmax_forward", "49152x128", timed(lambda: torch.softmax(s, -1), a.reps))
    for V in (32000, 151936):
        lg = torch.randn(4096, V, device=dev)
        tg = torch.randint(0, V, (4096,), device=dev)
        emit("cross_entropy_forward", f"4096x{V}", timed(lambda: F.cross_entropy(lg, tg), a.reps))

    # attention fwd+bwd, f32 (loupe's kernels are f32 this session) and bf16 flash for reference
    for (B, T, H, Hkv, D, causal, tag) in ((32, 128, 12, 12, 64, False, "distilbert"), (8, 512, 14, 2, 64, True, "qwen0.5b")):
        for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            q = torch.randn(B, H, T, D, device=dev, dtype=dt, requires_grad=True)
            k = torch.randn(B, Hkv, T, D, device=dev, dtype=dt, requires_grad=True)
            v = torch.randn(B, Hkv, T, D, device=dev, dtype=dt, requires_grad=True)
            f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=Hkv != H)
            emit(f"attention_forward_{name}", tag, timed(f, a.reps))
            o = f()
            go = torch.randn_like(o)
            emit(f"attention_backward_{name}", tag, timed(lambda: torch.autograd.grad(o, (q, k, v), go, retain_graph=True), a.reps))
        # f32 inputs with TF32 allowed (beside loupe's attention as TF32 GEMMs, "tf32"): the
        # kernel SDPA picks for f32 then, as a training script with allow_tf32 gets it
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        q = torch.randn(B, H, T, D, device=dev, requires_grad=True)
        k = torch.randn(B, Hkv, T, D, device=dev, requires_grad=True)
        v = torch.randn(B, Hkv, T, D, device=dev, requires_grad=True)
        f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=Hkv != H)
        emit("attention_forward_tf32", tag, timed(f, a.reps))
        o = f()
        go = torch.randn_like(o)
        emit("attention_backward_tf32", tag, timed(lambda: torch.autograd.grad(o, (q, k, v), go, retain_graph=True), a.reps))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    # AdamW over DistilBERT's 66M parameters as 100 tensors (fused and foreach)
    ps = [torch.randn(660_000, device=dev, requires_grad=True) for _ in range(100)]
    for p in ps:
        p.grad = torch.randn_like(p)
    for impl in ("foreach", "fused"):
        opt = torch.optim.AdamW(ps, lr=1e-4, **{impl: True})
        emit("adamw_step", "66M", timed(opt.step, a.reps), impl=impl)


if __name__ == "__main__":
    main()
