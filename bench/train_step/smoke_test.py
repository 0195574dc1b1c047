#!/usr/bin/env python3
"""Smoke test of bench_step (ctest bench_step_smoke): a tiny BERT (2 layers, hidden 64) at
batch 2, seq 16, one run per configuration. Parses the JSON and checks that the figures
hold together (FLOP count from the shape, samples/s from the median, MFU from the peak,
memory categories against the total and the RSS, what LoRA and QLoRA must not allocate),
the --ops table (which kernels each exec mode runs, and how often), and that bad flags are
refused. Speed is never checked.

usage: smoke_test.py path/to/bench_step"""
import json
import math
import subprocess
import sys

L, H, NH, F, V, B, T = 2, 64, 4, 128, 1000, 2, 16
TINY = ["--shape", "minilm", "--layers", str(L), "--hidden", str(H), "--heads", str(NH), "--ffn", str(F),
        "--vocab", str(V), "--batch", str(B), "--seq", str(T), "--warmup", "1", "--runs", "2",
        "--peak-gflops", "50", "--threads", "1"]
CATS = ["parameter", "gradient", "optimizer_state", "activation", "temporary", "input", "quantized_weight"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(exe, *extra):
    p = subprocess.run([exe, *TINY, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(p.stderr)
        raise SystemExit(f"bench_step {' '.join(extra)} exited {p.returncode}")
    return json.loads(p.stdout)


def forward_flops():
    """Matmul FLOPs of one forward (as torch_ref.py counts them): encoder + BERT pooler/head."""
    per_layer = 2 * B * T * (4 * H * H + 2 * H * F) + 2 * 2 * B * T * T * H
    return L * per_layer + 2 * B * (H * H + 2 * H)


def common(r, label, mult):
    for k in ["step_ms_median", "step_ms_min", "samples_per_s", "tokens_per_s", "gflop_per_step", "gflops", "mfu",
              "peak_rss_bytes", "mem_total_peak_bytes"]:
        check(isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0, f"{label}: {k} = {r[k]}")
    check(len(r["runs_ms"]) == 2 and min(r["runs_ms"]) == r["step_ms_min"], f"{label}: runs_ms vs min")
    check(r["step_ms_min"] <= r["step_ms_median"] <= max(r["runs_ms"]), f"{label}: median outside the runs")
    check(math.isclose(r["samples_per_s"], B / (r["step_ms_median"] * 1e-3), rel_tol=1e-3), f"{label}: samples/s")
    check(math.isclose(r["tokens_per_s"], B * T * r["samples_per_s"] / B, rel_tol=1e-3), f"{label}: tokens/s")
    flops = mult * forward_flops()
    check(math.isclose(r["gflop_per_step"] * 1e9, flops, rel_tol=2e-2),
          f"{label}: {r['gflop_per_step']} GFLOP/step, expected {flops / 1e9:.5f} ({mult}x forward)")
    check(math.isclose(r["mfu"], r["gflops"] / 50.0, rel_tol=1e-3), f"{label}: mfu vs gflops / peak")
    check(r["threads"] == 1 and r["blas_core"] not in ("", "unknown"), f"{label}: threads / blas_core")
    check((r["layers"], r["hidden"], r["heads"], r["ffn"], r["vocab"]) == (L, H, NH, F, V), f"{label}: shape")
    mem = r["mem_peak_bytes"]
    total = r["mem_total_peak_bytes"]
    for c in CATS:
        check(0 <= mem[c] <= total, f"{label}: {c} peak {mem[c]} outside [0, total peak {total}]")
    # peaks of different moments: their sum bounds the total peak from above
    check(sum(mem.values()) >= total, f"{label}: category peaks sum below the total peak")
    check(total <= r["peak_rss_bytes"], f"{label}: allocator peak {total} above the peak RSS {r['peak_rss_bytes']}")
    check(mem["parameter"] >= 4 * (r["n_params"] - r["quantized_params"]), f"{label}: parameter bytes")


def main():
    exe = sys.argv[1]
    n_params = V * H + 512 * H + 2 * H + 2 * H + L * (4 * H * H + 4 * H + 2 * H * F + F + H + 4 * H) + \
        (H * H + H) + (2 * H + 2)
    adapters = L * 2 * 8 * (H + H)  # rank 8 on q and v: A (8,H) + B (H,8)
    head = 2 * H + 2                # classifier (the pooler stays frozen, as PEFT's SEQ_CLS)

    full = run(exe, "--method", "full", "--exec", "fused")
    common(full, "full", 3)
    check(full["n_params"] == n_params and full["n_trainable"] == n_params,
          f"full: {full['n_params']} params / {full['n_trainable']} trainable, expected {n_params}")
    check(full["mem_peak_bytes"]["gradient"] >= 4 * n_params, "full: gradient bytes below 4 per parameter")
    check(full["mem_peak_bytes"]["optimizer_state"] >= 8 * n_params, "full: AdamW state below 8 bytes per parameter")
    check(full["mem_peak_bytes"]["quantized_weight"] == 0, "full: quantized weights")

    lora = run(exe, "--method", "lora", "--exec", "eager")
    common(lora, "lora", 2)
    check(lora["adapter_params"] == adapters and lora["n_trainable"] == adapters + head,
          f"lora: {lora['adapter_params']} adapter / {lora['n_trainable']} trainable params")
    g = lora["mem_peak_bytes"]["gradient"]
    # no gradient for the frozen base: the gradient block holds the adapters and head only
    check(4 * lora["n_trainable"] <= g < 4 * lora["n_trainable"] + 64 * 64, f"lora: gradient peak {g} bytes")
    check(lora["mem_peak_bytes"]["optimizer_state"] < 8 * lora["n_trainable"] + 64 * 128, "lora: optimizer state")
    check(lora["base_bytes_per_param_all"] == 4.0, "lora: f32 base")

    ql = run(exe, "--method", "qlora", "--exec", "fused")
    common(ql, "qlora", 2)
    lin = L * (4 * H * H + 2 * H * F)
    check(ql["quantized_params"] == lin, f"qlora: {ql['quantized_params']} quantized, expected {lin}")
    check(0.5 < ql["qlora_base_bytes_per_param"] < 0.6, f"qlora: {ql['qlora_base_bytes_per_param']} bytes/param")
    check(ql["mem_peak_bytes"]["quantized_weight"] >= ql["quantized_bytes"], "qlora: quantized_weight category")
    check(ql["mem_peak_bytes"]["parameter"] < lora["mem_peak_bytes"]["parameter"] - 3 * lin,
          "qlora: the f32 copies of the quantized weights are still allocated")
    check(ql["mem_peak_bytes"]["gradient"] == g, "qlora: gradient block differs from LoRA's")

    # --ops: the profiled op table; QLoRA's eager dequantization shows there and not in fused,
    # which runs its NF4 GEMMs (4 Linears a layer) and fused LoRA Linears (q, v) instead
    qe = run(exe, "--method", "qlora", "--exec", "eager", "--ops", "2")
    qf = run(exe, "--method", "qlora", "--exec", "fused", "--ops", "2")
    check("ops" not in ql, "qlora: an op table without --ops")
    ops_e = {o["name"]: o for o in qe.get("ops", [])}
    ops_f = {o["name"]: o for o in qf.get("ops", [])}
    check(qe.get("ops_steps") == 2 and qf.get("ops_steps") == 2, "--ops 2: ops_steps")
    # every quantized Linear dequantizes its whole weight in the forward and again for its
    # input gradient, except the first layer's q, k and v: nothing needs their input's
    # gradient, as the embeddings are frozen
    check(ops_e.get("lp::nf4_dequantize", {}).get("calls_per_step") == 2 * L * 6 - 3,
          f"qlora eager: nf4_dequantize calls {ops_e.get('lp::nf4_dequantize')}")
    check("lp::nf4_dequantize" not in ops_f and "lp::mul" not in ops_f, "qlora fused: eager-only ops ran")
    check(ops_f.get("lp::nf4_matmul_forward", {}).get("calls_per_step") == L * 4,
          f"qlora fused: nf4_matmul_forward calls {ops_f.get('lp::nf4_matmul_forward')}")
    check(ops_f.get("lp::lora_linear_forward", {}).get("calls_per_step") == L * 2,
          f"qlora fused: lora_linear_forward calls {ops_f.get('lp::lora_linear_forward')}")
    for r, label in ((qe, "eager"), (qf, "fused")):
        t = sum(o["self_ms_per_step"] for o in r.get("ops", []))
        check(all(o["self_ms_per_step"] > 0 and o["name"].startswith("lp::") for o in r.get("ops", [])) and t > 0,
              f"qlora {label}: op table rows")

    inf = run(exe, "--mode", "infer", "--method", "full", "--exec", "eager")
    common(inf, "infer", 1)
    check(inf["mem_peak_bytes"]["gradient"] == 0 and inf["mem_peak_bytes"]["optimizer_state"] == 0,
          "infer: gradient or optimizer memory allocated")

    # a decoder (SmolLM2 shape, scaled down): causal LM, tied embeddings, GQA 6/3 heads
    dec = subprocess.run([exe, "--shape", "smollm2-135m", "--layers", "2", "--hidden", "48", "--heads", "6",
                          "--ffn", "96", "--vocab", "300", "--batch", "2", "--seq", "16", "--warmup", "0",
                          "--runs", "1", "--peak-gflops", "50", "--threads", "1", "--method", "lora"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(dec.returncode == 0, f"decoder: exit {dec.returncode} {dec.stderr[-300:]}")
    if dec.returncode == 0:
        d = json.loads(dec.stdout)
        hd, kv = 48 // 6, 3
        per_layer = 48 * 48 * 2 + 2 * 48 * kv * hd + 3 * 48 * 96 + 2 * 48  # q, o, k, v, MLP, 2 norms
        want = 300 * 48 + 2 * per_layer + 48  # tied lm_head: no extra matrix
        adapters = 2 * 8 * ((48 + 48) + (48 + kv * hd))  # r 8 on q_proj (48->48) and v_proj (48->24)
        check(d["n_params"] == want + adapters, f"decoder: {d['n_params']} params, expected {want + adapters}")
        check(d["n_trainable"] == adapters, f"decoder: {d['n_trainable']} trainable, expected {adapters}")
        # logits (B*T, V) and their log-sum-exp are activations; dlogits the backward's scratch
        check(d["mem_peak_bytes"]["activation"] >= 4 * 2 * 16 * 300, "decoder: logits not in the activations")

    for bad in (["--method", "dora"], ["--batch", "0"], ["--frobnicate", "1"], ["--runs"]):
        p = subprocess.run([exe, *bad], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(p.returncode == 2 and p.stdout == "" and "bench_step" in p.stderr, f"bad flags {bad}: rc {p.returncode}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("bench_step smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
