#!/usr/bin/env bash
# Data-parallel training on 2 MPI ranks against one process with the same global batch
# (--batch-size is global: each rank takes half of every batch):
#  - per-step loss within 1e-5 absolute over 20 steps, for full fine-tuning (with --grad-accum 2:
#    no all-reduce on the accumulation step; 0.25 MiB buckets: ~50 all-reduces started from
#    backward's hook), LoRA (0.01 MiB buckets: one per few adapters) and QLoRA (one 25 MiB
#    bucket) on models/default, and full fine-tuning of the causal LM models/tiny-llama
#    (shards weighed by predicted tokens; 0.01 MiB buckets).
#    1e-5: the shards' GEMMs sum in another order and the gradients are summed across ranks,
#    f32 rounding (~1e-7 relative per op) that AdamW carries over 20 steps. Dropout is on:
#    models/default as bundled (0.1 on embeddings, attention probabilities, hidden states and
#    classifier) and LoRA's adapter dropout; each rank pads its shard as the global batch and
#    draws its rows of the global batch's masks (lp_model_set_batch_slice), so the masks are
#    the 1-process run's, row for row; the same samples and tokens per step;
#    A training set of 9 rows with batch 8 makes every other batch a single row, which rank 0
#    sits out: the equality holds through it (the ranks' dropout streams are resynchronized);
#  - rank 0 alone writes the run: the 2-rank run directory holds the same files as the 1-process
#    one (and distributed.json) and nothing else appears in the output folder;
#  - --zero 1: the same curve, each rank holding about half of AdamW's state (distributed.json),
#    and its checkpoint resumes in one process on the 1-process curve;
#  - profiled, each rank writes its own trace (rank in the file name, distributedInfo
#    {backend mpi, rank, world_size 2}, mpi:all_reduce events with their float count, most of
#    them starting inside backward) and loupe analyze loads the folder as 2 ranks, each with
#    communication time > 0;
#  - a global batch that does not divide by the ranks is refused, naming --batch-size.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
. "$(dirname "$0")/mpi_env.sh"
T=$(mktemp -d /tmp/lp_mpi_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
# the bundled BERT as it is: dropout 0.1 (see above)
mkdir -p "$T/model"
cp "$S"/models/default/* "$T/model/"
rc=0
fail() { echo "FAIL: $*"; rc=1; }
common=(--max-steps 20 --eval none --threads 1 --quiet --peak-gflops 100 --lr 1e-3)
# run NAME NP ARGS...: one training run, NP=1 plain, NP=2 under mpirun
run() {
  local name=$1 np=$2; shift 2
  if [ "$np" = 1 ]; then
    "$L" train "${common[@]}" --output-dir "$T/one" --run-id "$name" "$@" >"$T/$name-1.out" 2>&1
  else
    lp_mpirun 2 "$L" train "${common[@]}" --output-dir "$T/two" --run-id "$name" "$@" >"$T/$name-2.out" 2>&1
  fi
}
# the first 2-rank run tells whether this loupe has MPI at all
run probe 2 --model "$T/model" --max-steps 1 --batch-size 4
if grep -q "built without MPI" "$T/probe-2.out"; then
  echo "SKIP: this loupe was built without MPI (LP_MPI=OFF)"; cat "$T/probe-2.out"; exit 77
fi
[ -f "$T/two/probe/steps.csv" ] || { echo "FAIL: 2-rank probe run"; cat "$T/probe-2.out"; exit 1; }
rm -rf "$T/two/probe"

# same NAME ARGS...: the 1-process and the 2-rank run of ARGS give the same curve
same() {
  local name=$1; shift
  run "$name" 1 "$@" || { fail "$name: 1-process run"; cat "$T/$name-1.out"; return; }
  run "$name" 2 "$@" || { fail "$name: 2-rank run"; cat "$T/$name-2.out"; return; }
  python3 - "$T/one/$name" "$T/two/$name" <<'PY' || rc=1
import csv, os, sys
a = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
b = list(csv.DictReader(open(sys.argv[2] + "/steps.csv")))
name = os.path.basename(sys.argv[1])
if len(a) != 20 or len(b) != 20:
    print(f"FAIL: {name}: {len(a)} and {len(b)} steps, wanted 20"); sys.exit(1)
worst = 0.0
for x, y in zip(a, b):
    d = abs(float(x["loss"]) - float(y["loss"]))
    worst = max(worst, d)
    if d > 1e-5:
        print(f"FAIL: {name}: step {x['step']} loss {x['loss']} (1 process) vs {y['loss']} (2 ranks)"); sys.exit(1)
    if x["samples"] != y["samples"] or x["tokens"] != y["tokens"]:
        print(f"FAIL: {name}: step {x['step']}: samples/tokens {x['samples']}/{x['tokens']} vs {y['samples']}/{y['tokens']}")
        sys.exit(1)
    if abs(float(x["grad_norm"]) - float(y["grad_norm"])) > 1e-4 * max(1.0, float(x["grad_norm"])):
        print(f"FAIL: {name}: step {x['step']} grad norm {x['grad_norm']} vs {y['grad_norm']}"); sys.exit(1)
# TensorBoard names its file after the time and the process: the same file, another name
tb = lambda f: "tensorboard/events.out.tfevents.*" if ".tfevents." in f else f
files = lambda d: sorted(tb(os.path.relpath(os.path.join(r, f), d)) for r, _, fs in os.walk(d) for f in fs)
fa, fb = files(sys.argv[1]), files(sys.argv[2])
if "distributed.json" not in fb:
    print(f"FAIL: {name}: no distributed.json in the 2-rank run"); sys.exit(1)
fb.remove("distributed.json")  # the job's layout: ranks, buckets, optimizer bytes per rank
if fa != fb:
    print(f"FAIL: {name}: the 2-rank run wrote {sorted(set(fb) ^ set(fa))} unlike the 1-process run"); sys.exit(1)
import json
nb = json.load(open(sys.argv[2] + "/distributed.json"))["buckets"]
print(f"ok: {name}: 20 steps, 2 ranks == 1 process (largest loss difference {worst:.2e}, {nb} buckets), same {len(fb)} files")
PY
}
same full --model "$T/model" --batch-size 8 --grad-accum 2 --bucket-mb 0.25
same lora --model "$T/model" --batch-size 8 --method lora --lora-dropout 0.1 --bucket-mb 0.01
same qlora --model "$T/model" --batch-size 8 --method qlora --lora-dropout 0.1
# 9 rows, batch 8: every other step is one row, which rank 0 sits out (an empty shard): the
# ranks' dropout streams are brought back in step (lp_dp_sync_dropout)
head -n 10 "$S/data/sst2-mini/train.tsv" > "$T/train9.tsv"
same tail --model "$T/model" --train "$T/train9.tsv" --batch-size 8
head -n 401 "$S/data/sst2-mini/train.tsv" > "$T/train400.tsv"
same llama --model "$S/models/tiny-llama" --train "$T/train400.tsv" --batch-size 8 --lr 3e-3 --bucket-mb 0.01
# ZeRO-1: the same curve, AdamW's state split between the ranks (measured by each rank: the
# bytes it allocated), and its checkpoint (rank 0 gathers the state) resumes in one process
# on the uninterrupted 1-process curve
same zero --model "$T/model" --batch-size 8 --zero 1 --checkpoint-every 10 --keep-checkpoints 0
python3 - "$T/two/zero/distributed.json" <<'PY' || rc=1
import json, sys
d = json.load(open(sys.argv[1]))
per, full = d["optimizer_state_bytes_per_rank"], d["optimizer_state_bytes_unsharded"]
if d["zero"] != 1 or len(per) != 2 or sum(per) != full or max(per) > 0.6 * full:
    print(f"FAIL: zero: optimizer state per rank {per} of {full} unsharded"); sys.exit(1)
print(f"ok: zero: AdamW state per rank {per[0]/2**20:.2f} and {per[1]/2**20:.2f} MiB of {full/2**20:.2f} MiB unsharded")
PY
"$L" train "${common[@]}" --model "$T/model" --batch-size 8 --output-dir "$T/one" --run-id zero-resumed \
  --resume "$T/two/zero/checkpoints/step-10" >"$T/zr.out" 2>&1 || { fail "resume of the ZeRO checkpoint"; cat "$T/zr.out"; }
python3 - "$T/one/zero" "$T/one/zero-resumed" <<'PY' || rc=1
import csv, sys
a = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
b = list(csv.DictReader(open(sys.argv[2] + "/steps.csv")))
for x, y in zip(a[10:], b[10:]):
    if abs(float(x["loss"]) - float(y["loss"])) > 1e-5:
        print(f"FAIL: zero resumed: step {x['step']} loss {x['loss']} vs {y['loss']}"); sys.exit(1)
if len(b) != 20:
    print(f"FAIL: zero resumed: {len(b)} steps"); sys.exit(1)
print("ok: zero: the 2-rank step-10 checkpoint resumes in 1 process on the same curve (steps 11-20)")
PY
n=$(ls "$T/two" | wc -l)
[ "$n" = 6 ] || fail "the 2-rank runs left $n entries in the output folder: $(ls "$T/two")"

# ---- profiled: a trace per rank, loaded by loupe analyze as a 2-rank job
lp_mpirun 2 "$L" profile --model "$T/model" --threads 1 --batch-size 8 --output-dir "$T/two" --run-id prof \
  --profile-wait 1 --profile-warmup 1 --profile-active 2 --max-steps 4 --eval none --quiet --peak-gflops 100 --record-shapes --bucket-mb 0.25 \
  >"$T/prof.out" 2>&1 || { fail "2-rank loupe profile"; cat "$T/prof.out"; }
python3 - "$T/two/prof/profiler" <<'PY' || rc=1
import glob, gzip, json, os, sys
d = sys.argv[1]
tr = sorted(glob.glob(d + "/*.pt.trace.json.gz"))
names = [os.path.basename(t) for t in tr]
if len(tr) != 2 or not names[0].startswith("rank0.") or not names[1].startswith("rank1."):
    print(f"FAIL: traces {names}, wanted rank0.* and rank1.*"); sys.exit(1)
started = []
for r, t in enumerate(tr):
    j = json.load(gzip.open(t, "rt"))
    di = j.get("distributedInfo", {})
    if di.get("backend") != "mpi" or di.get("rank") != r or di.get("world_size") != 2:
        print(f"FAIL: {names[r]}: distributedInfo {di}"); sys.exit(1)
    ar = [e for e in j["traceEvents"] if e.get("name") == "mpi:all_reduce"]
    if not ar or not all(e["args"]["Input Dims"][0][0] * 4 == e["args"]["Bytes Moved"] > 0 for e in ar):
        print(f"FAIL: {names[r]}: {len(ar)} mpi:all_reduce events, or without their float count"); sys.exit(1)
    # with 0.25 MiB buckets most all-reduces start inside the model's backward range (the hook)
    bw = [e for e in j["traceEvents"] if e.get("ph") == "X" and e["name"].endswith(".backward")]
    inside = sum(any(b["ts"] <= e["ts"] <= b["ts"] + b["dur"] for b in bw) for e in ar)
    if not bw or inside * 2 < len(ar):
        print(f"FAIL: {names[r]}: {inside} of {len(ar)} all-reduces start during backward"); sys.exit(1)
    started.append(f"{inside}/{len(ar)}")
for f in ("key_averages.txt", "summary.json"):  # rank 0's tables only
    if not os.path.exists(os.path.join(d, f)):
        print(f"FAIL: profiler/{f} missing"); sys.exit(1)
print(f"ok: profiled: {names[0]}, {names[1]} with distributedInfo mpi 0/2, 1/2; all-reduces started during backward: {', '.join(started)}")
PY
"$L" analyze "$T/two/prof/profiler" --csv "$T/an" >"$T/an.out" 2>&1 || { fail "loupe analyze of the 2-rank folder"; cat "$T/an.out"; }
python3 - "$T/an/ranks.csv" <<'PY' || rc=1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
if [int(r["rank"]) for r in rows] != [0, 1]:
    print(f"FAIL: ranks.csv ranks {[r['rank'] for r in rows]}"); sys.exit(1)
for r in rows:
    if int(r["comm_ns"]) <= 0:
        print(f"FAIL: rank {r['rank']}: no communication time in loupe analyze ({r})"); sys.exit(1)
share = [100.0 * int(r["comm_ns"]) / max(1, int(r["span_ns"])) for r in rows]
print(f"ok: loupe analyze: 2 ranks, communication {share[0]:.1f}% and {share[1]:.1f}% of their spans")
PY

# ---- a global batch the ranks cannot share equally
lp_mpirun 2 "$L" train "${common[@]}" --model "$T/model" --batch-size 7 --output-dir "$T/bad" --run-id bad \
  >"$T/bad.out" 2>&1
r=$?
if [ $r -eq 0 ] || ! grep -q -- "--batch-size 7 is the global batch and must divide by the 2 ranks" "$T/bad.out"; then
  fail "--batch-size 7 on 2 ranks should be refused (exit $r)"; cat "$T/bad.out"
elif [ -e "$T/bad" ]; then
  fail "the refused run created its output folder"
else
  echo "ok: --batch-size 7 on 2 ranks is refused"
fi
exit $rc
