#!/usr/bin/env bash
# The engine on the GPU (issue 19): loupe eval / train --device cuda against --device cpu on
# the bundled tiny BERT (models/default: 4 x 256, dropout 0.1) and a tiny DistilBERT drawn
# from a seed (2 x 128, dropout 0.1), then the decoders: the bundled tiny Llama (models/tiny-llama:
# causal LM, GQA 4 over 2 heads, rotary) and a Qwen2-shaped classifier drawn from a seed (q/k/v
# biases, 4 query heads over 1 kv head, tied embeddings), data/sst2-mini.
#
# Without a GPU (CI, or a CPU-only build) only the refusal is checked: --device cuda exits 1
# with "no CUDA GPU is present" (CUDA build) or "built without CUDA" (CPU-only build), writes
# no predictions file and no run directory; then the script exits 77 (skipped) with the reason.
#
# On a GPU: TF32 stays off (--tf32 not given), so both sides compute in f32 and differ only
# by summation order (cuBLASLt vs OpenBLAS GEMMs, the kernels' reductions, the embedding
# backward's atomics): a few ulps per op, grown through the layers to ~1e-6 relative. Hence:
#   - eval logits: |cuda - cpu| <= 1e-4 x the row's largest |logit| (a logit near 0 is a
#     cancellation: only its row's scale says what its error can be), accuracy equal;
#   - 20 training steps (full on the BERT, LoRA r 8 with --lora-dropout 0.1 on the DistilBERT,
#     and full with gradient checkpointing): the dropout masks are the CPU's (the CUDA dropout
#     draws the same Philox stream), so each step's loss is within 1e-4 relative of the CPU
#     run's, the final eval accuracy equal, and the saved weights / adapter within 1e-4 of each
#     tensor's largest |value| (AdamW's normalized steps carry the ~1e-6 gradient differences
#     into the weights at the same relative size);
#   - summary.json names the device and the device allocator's peaks per category;
#   - --tf32 runs, its logits within 1e-2 of f32's (10-bit mantissas: looser by design);
#   - decoders, the same bounds: a causal LM's per-row mean token loss (eval) and eval loss
#     within 1e-4 relative, the classifier's logits as above; 20 steps of full fine-tuning
#     (causal LM), LoRA on every Linear with dropout (the classifier) and LoRA with gradient
#     checkpointing (the Llama as a classifier), each step's loss within 1e-4 relative;
#   - QLoRA (NF4 base, the Llama as a classifier) and LoRA on an int8 base (the causal LM): the
#     device dequantizes the same codes to the same f32 values (bit for bit, test_cuda_ops) and
#     multiplies them in f32, the CPU runs its fused dequant-GEMM: summation order again, so
#     1e-4 relative per step; the bases count as quantized_weight in the device's memory.
#
# LP_FAKE_DEVICE=1 (ctest engine_fake_device) runs it all on loupe's stand-in device: host
# memory apart from the host's, the CPU's op table less the entries CUDA lacks (fused LoRA,
# eager attention: so LoRA takes its composed path); the device allocator's figures are then
# absent and not checked.
# LP_ENGINE_DEVICE=cpu runs the GPU branch with --device cpu on both sides (a dry run of this
# script's own checks on a machine without a GPU; the device-only checks are left out).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
GD=${LP_ENGINE_DEVICE:-cuda}
cd "${LP_SOURCE_DIR:-.}" || exit 1
T=$(mktemp -d /tmp/lp_engine_cuda.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
BERT=models/default
TRAIN=data/sst2-mini/train.tsv
DEV=data/sst2-mini/dev.tsv
DB=$T/distilbert
mkdir -p "$DB"
cp models/default/vocab.txt models/default/tokenizer_config.json "$DB/"
cat >"$DB/config.json" <<'JSON'
{"architectures": ["DistilBertForSequenceClassification"], "model_type": "distilbert", "vocab_size": 431,
 "dim": 128, "n_layers": 2, "n_heads": 4, "hidden_dim": 512, "max_position_embeddings": 128,
 "sinusoidal_pos_embds": false, "dropout": 0.1, "attention_dropout": 0.1, "seq_classif_dropout": 0.1,
 "activation": "gelu", "initializer_range": 0.02, "pad_token_id": 0,
 "id2label": {"0": "negative", "1": "positive"}, "label2id": {"negative": 0, "positive": 1}, "loupe_init_seed": 7}
JSON
QW=$T/qwen2
mkdir -p "$QW"
cp models/tiny-llama/tokenizer.json models/tiny-llama/tokenizer_config.json "$QW/"
cat >"$QW/config.json" <<'JSON'
{"architectures": ["Qwen2ForSequenceClassification"], "model_type": "qwen2", "vocab_size": 1000,
 "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 1, "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
 "rope_theta": 1000000.0, "attention_dropout": 0.0, "tie_word_embeddings": true, "initializer_range": 0.02,
 "pad_token_id": 0, "id2label": {"0": "negative", "1": "positive"}, "label2id": {"negative": 0, "positive": 1},
 "loupe_init_seed": 11}
JSON
LM=models/tiny-llama
bad() { echo "FAIL: $*"; fail=1; }

# ---- the probe: is there a GPU? ------------------------------------------------------------
"$L" eval --model "$BERT" --data "$DEV" --device "$GD" --save-predictions "$T/probe.jsonl" \
  >"$T/probe.out" 2>"$T/probe.err"
rc=$?
if [ $rc != 0 ]; then
  reason=$(head -n 1 "$T/probe.err")
  [ $rc = 1 ] || bad "eval --device cuda without a GPU: exit $rc, wanted 1"
  grep -qE "no CUDA GPU is present|built without CUDA" "$T/probe.err" || bad "eval --device cuda: message '$reason'"
  [ -e "$T/probe.jsonl" ] && bad "eval --device cuda left a predictions file"
  ls "$T" | grep -q '^probe.jsonl' && bad "eval --device cuda left a temporary predictions file: $(ls "$T")"
  "$L" train --model "$BERT" --train "$TRAIN" --eval none --max-steps 1 --device cuda --quiet \
    --output-dir "$T/out" --run-id r >/dev/null 2>"$T/train.err"
  rc=$?
  [ $rc = 1 ] || bad "train --device cuda without a GPU: exit $rc, wanted 1"
  grep -qE "no CUDA GPU is present|built without CUDA" "$T/train.err" || bad "train --device cuda: message '$(cat "$T/train.err")'"
  [ -e "$T/out/r" ] && bad "train --device cuda left a run directory"
  # options a GPU run refuses, before looking for one
  "$L" train --model "$BERT" --device cuda --exec eager --quiet --output-dir "$T/out" --run-id r2 >/dev/null 2>"$T/e.err"
  [ $? = 1 ] && grep -q "exec eager" "$T/e.err" || bad "train --device cuda --exec eager: $(cat "$T/e.err")"
  "$L" eval --model "$BERT" --data "$DEV" --tf32 >/dev/null 2>"$T/t.err"
  [ $? = 2 ] && grep -q "tf32 needs --device cuda" "$T/t.err" || bad "eval --tf32 without cuda: $(cat "$T/t.err")"
  "$L" eval --model "$BERT" --data "$DEV" --device gpu >/dev/null 2>"$T/d.err"
  [ $? = 2 ] && grep -q "cpu or cuda" "$T/d.err" || bad "eval --device gpu: $(cat "$T/d.err")"
  [ $fail = 0 ] || exit 1
  echo "ok: --device cuda refused cleanly without a GPU"
  echo "SKIP: no CUDA GPU here ($reason): the GPU comparisons did not run"
  exit 77
fi
echo "a CUDA GPU is present"

# ---- eval: logits on the GPU against the CPU -----------------------------------------------
cmp_logits() { # cpu.jsonl cuda.jsonl tol what
  python3 - "$@" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol, what = float(sys.argv[3]), sys.argv[4]
assert len(a) == len(b) and a, (len(a), len(b))
worst, flips = 0.0, 0
for x, y in zip(a, b):
    scale = max(max(abs(v) for v in x["logits"]), 1e-30)
    for u, v in zip(x["logits"], y["logits"]):
        worst = max(worst, abs(u - v) / scale)
    # a prediction may differ only where the CPU's two logits tie within the tolerance
    if x["pred"] != y["pred"]:
        gap = abs(x["logits"][x["pred"]] - x["logits"][y["pred"]])
        flips += gap > 2 * tol * scale
print(f"{what}: {len(a)} rows, worst |cuda - cpu| / row max = {worst:.3e} (tolerance {tol:g}), {flips} predictions differ beyond a tie")
sys.exit(0 if worst <= tol and flips == 0 else 1)
PY
}
for m in "$BERT" "$DB" "$QW"; do
  n=$(basename "$m")
  "$L" eval --model "$m" --data "$DEV" --batch-size 32 --save-predictions "$T/$n.cpu.jsonl" --json >"$T/$n.cpu.json" ||
    bad "eval $n on the cpu"
  "$L" eval --model "$m" --data "$DEV" --batch-size 32 --save-predictions "$T/$n.cuda.jsonl" --json --device "$GD" \
    >"$T/$n.cuda.json" 2>"$T/$n.cuda.err" || { bad "eval $n --device cuda: $(cat "$T/$n.cuda.err")"; continue; }
  cmp_logits "$T/$n.cpu.jsonl" "$T/$n.cuda.jsonl" 1e-4 "eval $n f32" || bad "eval $n: logits"
  [ "$GD" = cpu ] && continue
  grep -q '"device":.*[A-Za-z]' "$T/$n.cuda.json" || bad "eval $n --json names no device"
  "$L" eval --model "$m" --data "$DEV" --batch-size 32 --save-predictions "$T/$n.tf32.jsonl" --device cuda --tf32 \
    >/dev/null 2>"$T/$n.tf32.err" || { bad "eval $n --tf32: $(cat "$T/$n.tf32.err")"; continue; }
  python3 - "$T/$n.cpu.jsonl" "$T/$n.tf32.jsonl" <<'PY' || bad "eval $n --tf32: logits"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
w = max(abs(u - v) / max(max(abs(t) for t in x["logits"]), 1e-30) for x, y in zip(a, b) for u, v in zip(x["logits"], y["logits"]))
print(f"eval tf32: worst |tf32 - f32 cpu| / row max = {w:.3e} (tolerance 1e-2)")
sys.exit(0 if w <= 1e-2 else 1)
PY
done

# a causal LM's eval: each row's mean token loss, and the mean
"$L" eval --model "$LM" --data "$DEV" --batch-size 32 --save-predictions "$T/lm.cpu.jsonl" --json >"$T/lm.cpu.json" ||
  bad "eval $LM on the cpu"
if "$L" eval --model "$LM" --data "$DEV" --batch-size 32 --save-predictions "$T/lm.cuda.jsonl" --json --device "$GD" \
  >"$T/lm.cuda.json" 2>"$T/lm.cuda.err"; then
  python3 - "$T/lm.cpu.jsonl" "$T/lm.cuda.jsonl" "$T/lm.cpu.json" "$T/lm.cuda.json" <<'PY' || bad "eval $LM: losses"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) and a, (len(a), len(b))
w = max(abs(x["mean_loss"] - y["mean_loss"]) / abs(x["mean_loss"]) for x, y in zip(a, b))
la, lb = json.load(open(sys.argv[3]))["loss"], json.load(open(sys.argv[4]))["loss"]
same = all(x["predicted_tokens"] == y["predicted_tokens"] for x, y in zip(a, b))
print(f"eval causal LM: {len(a)} rows, worst relative |cuda - cpu| of a row's mean token loss {w:.3e}, "
      f"mean loss {la:.6f} / {lb:.6f} (tolerance 1e-4)")
sys.exit(0 if w <= 1e-4 and abs(la - lb) <= 1e-4 * abs(la) and same else 1)
PY
else
  bad "eval $LM --device cuda: $(cat "$T/lm.cuda.err")"
fi

# ---- training: 20 steps on each side -------------------------------------------------------
# run NAME DEVICE MODEL ARGS...: one run in $T/runs/NAME
run() {
  local name=$1 dev=$2 model=$3; shift 3
  "$L" train --model "$model" --train "$TRAIN" --eval "$DEV" --max-steps 20 --batch-size 16 --seed 42 \
    --device "$([ "$dev" = cuda ] && echo "$GD" || echo cpu)" --quiet --output-dir "$T/runs" --run-id "$name" "$@" >"$T/$name.out" 2>"$T/$name.err"
}
cmp_runs() { # name [loss tolerance [accuracy tolerance]]: $T/runs/name-cpu against name-cuda
  python3 - "$T/runs/$1-cpu" "$T/runs/$1-cuda" "$1" "$GD" "${2:-1e-4}" "${3:-0}" <<'PY'
import csv, json, os, struct, sys
cpu, gpu, what = sys.argv[1], sys.argv[2], sys.argv[3]
tol, acc_tol = float(sys.argv[5]), float(sys.argv[6])
ok = True
a = list(csv.DictReader(open(cpu + "/steps.csv")))
b = list(csv.DictReader(open(gpu + "/steps.csv")))
if len(a) != 20 or len(b) != 20:
    print(f"{what}: {len(a)} and {len(b)} steps, wanted 20"); sys.exit(1)
worst = max(abs(float(x["loss"]) - float(y["loss"])) / abs(float(x["loss"])) for x, y in zip(a, b))
gn = max(abs(float(x["grad_norm"]) - float(y["grad_norm"])) / abs(float(x["grad_norm"])) for x, y in zip(a, b))
print(f"{what}: per-step loss worst relative difference {worst:.3e} (tolerance {tol:g}); grad norm {gn:.3e} (reported only)")
print(f"  losses cpu {float(a[0]['loss']):.6f} .. {float(a[-1]['loss']):.6f}, cuda {float(b[0]['loss']):.6f} .. {float(b[-1]['loss']):.6f}")
ok &= worst <= tol
sa, sb = json.load(open(cpu + "/summary.json")), json.load(open(gpu + "/summary.json"))
if "accuracy" in sa["eval"]:
    acc_a, acc_b = sa["eval"]["accuracy"], sb["eval"]["accuracy"]
    print(f"  eval accuracy cpu {acc_a}, cuda {acc_b} (" + (f"within {acc_tol:g})" if acc_tol else "must be equal)"))
    ok &= abs(acc_a - acc_b) <= acc_tol + 1e-12
else:  # a causal LM: the eval loss, as each step's
    la, lb = sa["eval"]["loss"], sb["eval"]["loss"]
    print(f"  eval loss cpu {la:.6f}, cuda {lb:.6f} (tolerance {tol:g} relative)")
    ok &= abs(la - lb) <= tol * abs(la)
dm = sb.get("device_memory", {}).get("peak_allocated_by_category", {})
print(f"  summary: device {sb.get('device')} / {sb.get('device_name')}, device peak allocated {sb.get('device_memory', {}).get('peak_allocated_bytes')} B, by category {dm}")
if sys.argv[4] == "cpu":  # the dry run
    sys.exit(0 if ok else 1)
ok &= sb.get("device") == "cuda" and bool(sb.get("device_name")) and sa.get("device") == "cpu"
if os.environ.get("LP_FAKE_DEVICE") == "1":  # the stand-in: no device allocator
    sys.exit(0 if ok else 1)
ok &= dm.get("parameter", 0) > 0 and dm.get("activation", 0) > 0 and dm.get("optimizer_state", 0) > 0 and dm.get("gradient", 0) > 0
if what in ("nf4", "int8", "bf16lora", "bf16nf4"):  # the frozen bases live on the device, quantized
    ok &= dm.get("quantized_weight", 0) > 0
sys.exit(0 if ok else 1)
PY
}
# safetensors f32 tensors of two files within tol x each tensor's largest |value|. Except the
# attention's key bias (BERT key.bias, DistilBERT k_lin.bias): q.(k + b) adds the same q.b to
# every key of a query, which softmax cancels, so its exact gradient is 0 and what it gets is
# rounding noise, which AdamW normalises into steps of up to (1 - beta1) / sqrt(1 - beta2) =
# 3.16 lr each; two runs may then differ by up to 2 x steps x 3.16 lr (the 5th argument, RUN
# config.json: its lr; 20 steps), absolute, and that is what is checked there.
cmp_st() {
  python3 - "$@" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); d = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        s, e = v["data_offsets"]
        out[k] = struct.unpack(f"<{(e - s) // 4}f", d[s:e])
    return out
a, b, tol, what = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
assert a.keys() == b.keys() and a, (sorted(a)[:5], sorted(b)[:5])
worst, name = 0.0, ""
zero_grad = [k for k in a if k.endswith((".key.bias", ".k_lin.bias", ".k_proj.bias"))]
if len(sys.argv) > 5 and zero_grad:
    lr = json.load(open(sys.argv[5]))["training"]["lr"]
    budget = 2 * 20 * 3.16 * lr
    far = max((abs(u - v), k) for k in zero_grad for u, v in zip(a[k], b[k]))
    print(f"{what}: key biases (zero exact gradient): worst |cuda - cpu| = {far[0]:.3e} at {far[1]} "
          f"(AdamW bound {budget:.3e} = 2 x 20 steps x 3.16 x lr {lr:g})")
    if far[0] > budget:
        sys.exit(1)
    for k in zero_grad:
        del a[k]
for k in a:
    m = max(max(abs(v) for v in a[k]), 1e-30)
    w = max(abs(u - v) for u, v in zip(a[k], b[k])) / m
    if w > worst:
        worst, name = w, k
print(f"{what}: {len(a)} tensors, worst |cuda - cpu| / tensor max = {worst:.3e} at {name} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
PY
}
for dev in cpu cuda; do
  run "full-$dev" "$dev" "$BERT" --save-model "$T/full-$dev.model" || bad "train full --device $dev: $(tail -n 3 "$T/full-$dev.err")"
  run "lora-$dev" "$dev" "$DB" --method lora --rank 8 --lora-dropout 0.1 --save-adapter "$T/lora-$dev.adapter" ||
    bad "train lora --device $dev: $(tail -n 3 "$T/lora-$dev.err")"
  run "ckpt-$dev" "$dev" "$DB" --gradient-checkpointing || bad "train full --gradient-checkpointing --device $dev: $(tail -n 3 "$T/ckpt-$dev.err")"
  run "bf16-$dev" "$dev" "$BERT" --dtype bf16 || bad "train --dtype bf16 --device $dev: $(tail -n 3 "$T/bf16-$dev.err")"
  run "bf16lora-$dev" "$dev" "$DB" --dtype bf16 --method lora --rank 8 --lora-dropout 0.1 ||
    bad "train --dtype bf16 --method lora --device $dev: $(tail -n 3 "$T/bf16lora-$dev.err")"
  run "lm-$dev" "$dev" "$LM" --save-model "$T/lm-$dev.model" || bad "train causal LM --device $dev: $(tail -n 3 "$T/lm-$dev.err")"
  run "qwlora-$dev" "$dev" "$QW" --method lora --targets all --rank 8 --lora-dropout 0.1 --save-adapter "$T/qw-$dev.adapter" ||
    bad "train qwen2 lora --device $dev: $(tail -n 3 "$T/qwlora-$dev.err")"
  run "lmckpt-$dev" "$dev" "$LM" --task seq-cls --method lora --gradient-checkpointing ||
    bad "train llama seq-cls lora --gradient-checkpointing --device $dev: $(tail -n 3 "$T/lmckpt-$dev.err")"
  run "nf4-$dev" "$dev" "$LM" --task seq-cls --method qlora --targets all --rank 8 --save-adapter "$T/nf4-$dev.adapter" ||
    bad "train qlora --device $dev: $(tail -n 3 "$T/nf4-$dev.err")"
  run "int8-$dev" "$dev" "$LM" --method lora --base-dtype int8 --rank 8 ||
    bad "train lora --base-dtype int8 --device $dev: $(tail -n 3 "$T/int8-$dev.err")"
  run "bf16nf4-$dev" "$dev" "$LM" --task seq-cls --method qlora --targets all --rank 8 --dtype bf16 ||
    bad "train qlora --dtype bf16 --device $dev: $(tail -n 3 "$T/bf16nf4-$dev.err")"
done
for name in full lora ckpt lm qwlora lmckpt nf4 int8; do
  [ -f "$T/runs/$name-cpu/steps.csv" ] && [ -f "$T/runs/$name-cuda/steps.csv" ] || continue
  cmp_runs "$name" || bad "train $name: cuda against cpu"
done
# --dtype bf16 (full fine-tuning of the BERT): both sides multiply the same bf16-rounded
# operands with f32 accumulation, so they differ by summation order, except where an f32 value
# within ~1e-6 relative of a bf16 rounding boundary rounds the other way (about 1 element in
# 2000, off by 2^-8 relative): losses drift apart faster than f32's. Tolerance 3e-3 relative per
# step, an estimate until a GPU run measures it (the stand-in device runs the CPU's kernels and
# matches exactly); a dev prediction may flip (accuracy within 2 of 500 rows).
# The same for LoRA over a bf16 frozen base (the DistilBERT): the base's bf16 values are the
# CPU's (made from them exactly), the adapters f32; and for QLoRA under --dtype bf16 (the
# llama): each GEMM's bf16 copy of an NF4 base is made from the same dequantized values.
for name in bf16 bf16lora bf16nf4; do
  if [ -f "$T/runs/$name-cpu/steps.csv" ] && [ -f "$T/runs/$name-cuda/steps.csv" ]; then
    cmp_runs $name 3e-3 0.004 || bad "train $name: cuda against cpu"
    grep -q '"bf16_path"' "$T/runs/$name-cuda/summary.json" || bad "train $name on cuda: summary.json names no bf16_path"
  fi
done
[ -f "$T/full-cuda.model/model.safetensors" ] && cmp_st "$T/full-cpu.model/model.safetensors" \
  "$T/full-cuda.model/model.safetensors" 1e-4 "saved model (full)" "$T/runs/full-cpu/config.json" || bad "--save-model on cuda"
[ -f "$T/lm-cuda.model/model.safetensors" ] && cmp_st "$T/lm-cpu.model/model.safetensors" \
  "$T/lm-cuda.model/model.safetensors" 1e-4 "saved model (causal LM)" || bad "--save-model of a causal LM on cuda"
[ -f "$T/qw-cuda.adapter/adapter_model.safetensors" ] && cmp_st "$T/qw-cpu.adapter/adapter_model.safetensors" \
  "$T/qw-cuda.adapter/adapter_model.safetensors" 1e-4 "saved adapter (qwen2 lora)" || bad "--save-adapter of a decoder on cuda"
[ -f "$T/nf4-cuda.adapter/adapter_model.safetensors" ] && cmp_st "$T/nf4-cpu.adapter/adapter_model.safetensors" \
  "$T/nf4-cuda.adapter/adapter_model.safetensors" 1e-4 "saved adapter (qlora)" || bad "--save-adapter of QLoRA on cuda"
[ -f "$T/lora-cuda.adapter/adapter_model.safetensors" ] && cmp_st "$T/lora-cpu.adapter/adapter_model.safetensors" \
  "$T/lora-cuda.adapter/adapter_model.safetensors" 1e-4 "saved adapter (lora)" || bad "--save-adapter on cuda"
# the saved GPU model evaluates on the CPU as the GPU left it
if [ -f "$T/full-cuda.model/model.safetensors" ]; then
  "$L" eval --model "$T/full-cuda.model" --data "$DEV" --save-predictions "$T/fc.cpu.jsonl" >/dev/null 2>&1 &&
  "$L" eval --model "$T/full-cuda.model" --data "$DEV" --save-predictions "$T/fc.cuda.jsonl" --device "$GD" >/dev/null 2>&1 &&
  cmp_logits "$T/fc.cpu.jsonl" "$T/fc.cuda.jsonl" 1e-4 "eval of the GPU-trained model" || bad "eval of the GPU-trained model"
fi
[ $fail = 0 ] && echo "all engine_cuda checks passed" || echo "SOME engine_cuda CHECKS FAILED"
exit $fail
