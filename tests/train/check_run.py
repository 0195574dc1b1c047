"""Reads a loupe run directory back and checks every file for plausible values:
summary.json (every required field), steps.csv, epoch_results.csv, config.json and the
TensorBoard event file (TFRecord framing and CRC-32C verified here in pure Python).

Usage: check_run.py RUN_DIR [--profiled] [--min-accuracy X] [--loss-decreases]"""
import csv
import glob
import json
import math
import os
import struct
import sys

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return v, i


def parse_event(d):
    """Event{wall_time, step, file_version | summary{value{tag, simple_value}}}."""
    ev, i = {"step": 0}, 0
    while i < len(d):
        key, i = varint(d, i)
        f, wt = key >> 3, key & 7
        if wt == 1:
            ev[f] = struct.unpack_from("<d", d, i)[0]
            i += 8
        elif wt == 0:
            v, i = varint(d, i)
            ev["step" if f == 2 else f] = v
        elif wt == 2:
            n, i = varint(d, i)
            ev[f] = d[i:i + n]
            i += n
        elif wt == 5:
            ev[f] = struct.unpack_from("<f", d, i)[0]
            i += 4
    if 5 in ev:  # summary -> value -> tag, simple_value
        s = ev[5]
        _, j = varint(s, 0)
        n, j = varint(s, j)
        v = s[j:j + n]
        k = 0
        while k < len(v):
            key, k = varint(v, k)
            if key == 0x0A:
                m, k = varint(v, k)
                ev["tag"] = v[k:k + m].decode()
                k += m
            elif key == 0x15:
                ev["value"] = struct.unpack_from("<f", v, k)[0]
                k += 4
    return ev


def read_tfevents(path):
    b = open(path, "rb").read()
    i, out = 0, []
    while i < len(b):
        n = struct.unpack_from("<Q", b, i)[0]
        check(struct.unpack_from("<I", b, i + 8)[0] == masked(b[i:i + 8]), f"{path}: bad length CRC at {i}")
        d = b[i + 12:i + 12 + n]
        check(struct.unpack_from("<I", b, i + 12 + n)[0] == masked(d), f"{path}: bad data CRC at {i}")
        out.append(parse_event(d))
        i += 16 + n
    return out


def main():
    d = sys.argv[1]
    profiled = "--profiled" in sys.argv
    min_acc = None
    if "--min-accuracy" in sys.argv:
        min_acc = float(sys.argv[sys.argv.index("--min-accuracy") + 1])
    s = json.load(open(os.path.join(d, "summary.json")))
    cfg = json.load(open(os.path.join(d, "config.json")))
    rows = list(csv.DictReader(open(os.path.join(d, "steps.csv"))))
    epochs = list(csv.DictReader(open(os.path.join(d, "epoch_results.csv"))))
    n = len(rows)

    check(s["run_id"] == os.path.basename(d.rstrip("/")), f"run_id {s['run_id']}")
    method = s["method"]
    check(method in ("full", "lora", "qlora") and s["exec"] in ("eager", "fused"), "method/exec")
    m = s["model"]
    check(m["name"] and 1e5 < m["params_total"] < 1e10, f"model {m}")
    if method == "full":
        check(m["params_trainable"] == m["params_total"], "full fine-tuning trains every parameter")
    else:  # adapters and the head only
        check(0 < m["params_trainable"] < 0.05 * m["params_total"], f"{method} trains {m['params_trainable']} parameters")
    check(s["steps"] == n and n > 0, f"summary steps {s['steps']} vs {n} rows")
    # contention: every step of this process measured (a resumed run counts only its own);
    # the CPU share's value depends on the machine's load, so only its range is checked
    b = s["contention"]
    check(0 < b["steps"] <= n and 0 <= b["steps_flagged"] <= b["steps"], f"contention {b}")
    check(0 <= b["cpu_share"] <= 1.5 and b["threads"] >= 1 and b["wait_policy"], f"contention {b}")
    check(s["samples_per_s"] > 0 and s["tokens_per_s"] > s["samples_per_s"], "throughput")
    sm = s["step_ms"]
    check(0 < sm["min"] <= sm["median"] <= sm["p90"] <= sm["max"], f"step_ms order {sm}")
    check(sm["min"] <= sm["mean"] <= sm["max"], f"step_ms mean {sm}")
    mean_rows = sum(float(r["step_ms"]) for r in rows) / n
    check(abs(mean_rows - sm["mean"]) < 1e-3 * max(1, mean_rows), "step_ms mean equals steps.csv")
    mc = s["memory_by_category"]
    for k in ("parameter", "gradient", "optimizer_state", "activation", "temporary", "input"):
        check(k in mc and mc[k] >= 0, f"memory_by_category.{k}")
    P, Pt = m["params_total"] * 4, m["params_trainable"] * 4
    base = s.get("lora_base")
    check((method == "full") == (base is None), f"{method}: lora_base {base}")
    if method == "qlora":
        check(base == "nf4", f"qlora: lora_base {base}")
    if method == "lora":  # bf16 under --dtype bf16; packed f32 where that GEMM measured faster (AVX2)
        check(base in (("bf16",) if s.get("dtype") == "bf16" else ("f32", "f32_packed")), f"lora: lora_base {base}")
    if base not in (None, "f32"):
        # the encoder's Linear weights are NF4, bf16 or packed f32 (the base's only copy), counted apart
        check(mc.get("quantized_weight", 0) > 0, f"{method}: no quantized_weight memory")
        check(mc["parameter"] < P, f"qlora: parameter memory {mc['parameter']} holds f32 copies of the NF4 weights")
    else:
        check(mc["parameter"] >= P, f"parameter memory {mc['parameter']} < {P} bytes of f32 weights")
    # gradients and AdamW state exist for the trainable parameters only
    check(Pt <= mc["gradient"] <= Pt + 0.01 * P, f"gradient memory {mc['gradient']} vs {Pt} trainable bytes")
    check(abs(mc["optimizer_state"] - 2 * Pt) <= 0.01 * Pt + 4096, f"AdamW state {mc['optimizer_state']} != 2 x {Pt}")
    check(mc["activation"] > 0 and mc["input"] > 0, "activation and input memory")
    check(s["peak_memory_bytes"] >= mc["parameter"] + mc["gradient"] + mc["optimizer_state"], "peak below the sum of the persistent categories")
    check(isinstance(s["top_ops"], list), "top_ops")
    if profiled:
        check(len(s["top_ops"]) >= 3, "top_ops empty in a profiled run")
        names = [o["name"] for o in s["top_ops"]]
        check(any("mm" in x or "linear" in x or "gemm" in x or "matmul" in x for x in names), f"no matmul among top ops {names}")
        for o in s["top_ops"]:
            check(o["calls"] > 0 and 0 <= o["self_ms"] <= o["total_ms"] + 1e-9 and o["flops"] >= 0, f"top op {o}")
        check(s["mfu_flops_source"] == "profiler_ops", "MFU from the profiler's op records")
        check(os.path.isdir(os.path.join(d, "profiler")), "profiler/ missing")
    check(s["mfu"] is not None and 0 < s["mfu"] < 1.5, f"mfu {s['mfu']}")
    check(math.isfinite(s["final_loss"]) and abs(s["final_loss"] - float(rows[-1]["loss"])) < 1e-9, "final_loss")

    prev = 0
    for r in rows:
        st = int(r["step"])
        check(st == prev + 1, f"steps.csv step {st} after {prev}")
        prev = st
        check(math.isfinite(float(r["loss"])) and float(r["loss"]) > 0, f"loss at {st}")
        check(float(r["lr"]) >= 0 and int(r["tokens"]) >= int(r["samples"]) > 0, f"lr/tokens at {st}")
        parts = sum(float(r[k]) for k in ("data_ms", "forward_ms", "backward_ms", "optimizer_ms"))
        check(parts <= float(r["step_ms"]) * 1.001 + 0.01, f"step {st}: parts {parts} > step {r['step_ms']}")
        check(int(r["memory_bytes"]) > 0 and int(r["memory_peak_bytes"]) >= int(r["memory_bytes"]), f"memory at {st}")

    t = cfg["training"]
    for k in ("method", "epochs", "max_steps", "batch_size", "grad_accum", "lr", "lr_schedule", "warmup_steps",
              "weight_decay", "seed", "max_seq_len", "exec"):
        check(k in t, f"config.json training.{k} missing")
    check(cfg["machine"]["threads"] >= 1 and cfg["machine"]["cores"] >= 1, "machine threads/cores")
    # the kernels' ISA level that ran: LP_ISA's when forced, else the detected one, in both files
    want_isa = os.environ.get("LP_ISA") or cfg["machine"]["isa_detected"]
    check(cfg["machine"]["isa"] == want_isa and s["isa"] == want_isa,
          f"ISA level: config {cfg['machine'].get('isa')}, summary {s.get('isa')}, expected {want_isa}")
    check(cfg["loupe_version"].startswith("loupe "), "loupe_version")
    check(all(cfg["libraries"].get(k) for k in ("openblas", "cjson", "zlib")), "library versions")

    ev = s.get("eval", {})
    if epochs and cfg["training"]["eval"] and s["model"].get("task") == "causal-lm":
        # a causal LM: perplexity, and no accuracy or F1 anywhere (absent, not 0)
        last = epochs[-1]
        check("accuracy" not in ev and "macro_f1" not in ev, f"causal-LM eval with accuracy/F1: {ev}")
        check(last["eval_accuracy"] == "" and last["eval_macro_f1"] == "", "epoch_results.csv accuracy/F1 not empty")
        check(abs(float(last["eval_perplexity"]) - ev["perplexity"]) < 1e-9 * ev["perplexity"], "perplexity equals epoch_results.csv")
        check(math.isfinite(ev["loss"]) and abs(ev["perplexity"] - math.exp(ev["loss"])) < 1e-9 * ev["perplexity"], f"eval {ev}")
    elif epochs and cfg["training"]["eval"]:
        last = epochs[-1]
        check(abs(float(last["eval_accuracy"]) - ev["accuracy"]) < 1e-9, "eval accuracy equals epoch_results.csv")
        check(0 <= ev["accuracy"] <= 1 and math.isfinite(ev["loss"]), f"eval {ev}")
        if min_acc is not None:
            check(ev["accuracy"] >= min_acc, f"eval accuracy {ev['accuracy']:.4f} < {min_acc}")

    tb = glob.glob(os.path.join(d, "tensorboard", "events.out.tfevents.*"))
    check(len(tb) == 1, f"tensorboard files {tb}")
    if tb:
        evs = read_tfevents(tb[0])
        check(evs and evs[0].get(3) == b"brain.Event:2", "first event is not the file version")
        loss = {e["step"]: e["value"] for e in evs if e.get("tag") == "train/loss"}
        check(len(loss) == n, f"{len(loss)} train/loss scalars for {n} steps")
        for r in rows:
            v = loss.get(int(r["step"]))
            check(v is not None and abs(v - float(r["loss"])) <= 1e-6 * max(1, abs(v)), f"tb loss at step {r['step']}")

    if "--loss-decreases" in sys.argv:
        k = max(1, n // 5)
        first = sum(float(r["loss"]) for r in rows[:k]) / k
        last = sum(float(r["loss"]) for r in rows[-k:]) / k
        check(last < first * 0.8, f"loss did not decrease: first fifth {first:.4f}, last fifth {last:.4f}")
        print(f"loss: first fifth {first:.4f} -> last fifth {last:.4f}")

    if errors:
        for e in errors:
            print("FAIL: " + e)
        sys.exit(1)
    print(f"ok: {d}: {n} steps, summary/config/steps/epochs/tensorboard consistent; eval {ev}")


main()
