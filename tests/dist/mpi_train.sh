#!/usr/bin/env bash
# Data-parallel training on 2 MPI ranks against one process with the same global batch
# (--batch-size is global: each rank takes half of every batch):
#  - per-step loss within 1e-5 absolute over 50 steps, for full fine-tuning with all-reduces
#    (--zero 0; with --grad-accum 2: no all-reduce on the accumulation step; 0.25 MiB buckets:
#    ~50 all-reduces started from backward's hook), LoRA (0.01 MiB buckets: one per few adapters) and QLoRA (one 25 MiB
#    bucket) on models/default, and full fine-tuning of the causal LM models/tiny-llama
#    (shards weighed by predicted tokens; 0.01 MiB buckets).
#    1e-5: the shards' GEMMs sum in another order and the gradients are summed across ranks,
#    f32 rounding (~1e-7 relative per op) that AdamW carries over 50 steps. The runs without
#    --zero take the default: ZeRO-1 for full fine-tuning (tail, llama), all-reduce for LoRA. Dropout is on:
#    models/default as bundled (0.1 on embeddings, attention probabilities, hidden states and
#    classifier) and LoRA's adapter dropout; each rank pads its shard as the global batch and
#    draws its rows of the global batch's masks (lp_model_set_batch_slice), so the masks are
#    the 1-process run's, row for row; the same samples and tokens per step;
#    A training set of 9 rows with batch 8 makes every other batch a single row, which rank 0
#    sits out: the equality holds through it (the ranks' dropout streams are resynchronized);
#  - rank 0 alone writes the run: the 2-rank run directory holds the same files as the 1-process
#    one (and distributed.json) and nothing else appears in the output folder;
#  - --zero 1 (ZeRO-1: each bucket reduce-scattered, AdamW on the rank's shard, the clip norm
#    summed over the shards, the parameters all-gathered): the same curve within 1e-5 (two ranks
#    add a + b as the all-reduce does; the norm's double sum in another order), for full
#    fine-tuning in 0.25 MiB buckets (shards cut tensors) with --grad-accum 2 and for LoRA (the
#    adapters are not laid out as their gradients: gathered through the gradient block); each
#    rank holds about half of AdamW's state (distributed.json: the per-rank figures add up to the
#    unsharded one exactly); its checkpoint (rank 0 gathers the shards) resumes in one process
#    and on 2 ranks with --zero 1 (each rank loads its shard) on the uninterrupted 1-process
#    curve; profiled, the transfers are mpi:reduce_scatter and mpi:all_gather ranges with their
#    float counts on the progress thread;
#  - profiled, each rank writes its own trace (rank in the file name, distributedInfo
#    {backend mpi, rank, world_size 2}, mpi:all_reduce events with their float count) and
#    loupe analyze loads the folder as 2 ranks, each with communication time > 0;
#  - overlap (the reducer's progress thread): the all-reduces are on a thread of their own,
#    the first of each step starts inside the model's backward range (the hook released it),
#    and at least one completes before that backward range ends, on some rank and step (the
#    lagging rank's buckets complete as soon as it releases them: its peer released them
#    first). loupe analyze's overlap is > 0 and within 1 % of the communication time of the
#    same figure recomputed here from the events (HTA's overlap over host threads); the
#    same run with LP_DIST_PROGRESS=layer overlaps nothing (all-reduces on the main thread);
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
steps=50
common=(--max-steps $steps --eval none --threads 1 --quiet --peak-gflops 100 --lr 1e-3)
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
  python3 - "$T/one/$name" "$T/two/$name" "$steps" <<'PY' || rc=1
import csv, os, sys
a = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
b = list(csv.DictReader(open(sys.argv[2] + "/steps.csv")))
name, steps = os.path.basename(sys.argv[1]), int(sys.argv[3])
if len(a) != steps or len(b) != steps:
    print(f"FAIL: {name}: {len(a)} and {len(b)} steps, wanted {steps}"); sys.exit(1)
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
print(f"ok: {name}: {steps} steps, 2 ranks == 1 process (largest loss difference {worst:.2e}, {nb} buckets), same {len(fb)} files")
PY
}
same full --model "$T/model" --batch-size 8 --grad-accum 2 --bucket-mb 0.25 --zero 0
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
same zero --model "$T/model" --batch-size 8 --grad-accum 2 --bucket-mb 0.25 --zero 1 --checkpoint-every 10 \
  --keep-checkpoints 0
same zlora --model "$T/model" --batch-size 8 --method lora --lora-dropout 0.1 --bucket-mb 0.01 --zero 1
python3 - "$T/two/zero/distributed.json" <<'PY' || rc=1
import json, sys
d = json.load(open(sys.argv[1]))
per, full = d["optimizer_state_bytes_per_rank"], d["optimizer_state_bytes_unsharded"]
if d["zero"] != 1 or len(per) != 2 or sum(per) != full or max(per) > 0.6 * full:
    print(f"FAIL: zero: optimizer state per rank {per} of {full} unsharded"); sys.exit(1)
print(f"ok: zero: AdamW state per rank {per[0]/2**20:.2f} and {per[1]/2**20:.2f} MiB of {full/2**20:.2f} MiB unsharded")
PY
zargs=(--model "$T/model" --batch-size 8 --grad-accum 2 --bucket-mb 0.25 --resume "$T/two/zero/checkpoints/step-10")
"$L" train "${common[@]}" "${zargs[@]}" --output-dir "$T/one" --run-id zero-resumed >"$T/zr.out" 2>&1 ||
  { fail "resume of the ZeRO checkpoint in 1 process"; cat "$T/zr.out"; }
lp_mpirun 2 "$L" train "${common[@]}" "${zargs[@]}" --zero 1 --output-dir "$T/two" --run-id zero-resumed \
  >"$T/zr2.out" 2>&1 || { fail "resume of the ZeRO checkpoint on 2 ranks"; cat "$T/zr2.out"; }
for where in one two; do
  python3 - "$T/one/zero" "$T/$where/zero-resumed" "$steps" "$where" <<'PY' || rc=1
import csv, sys
a = list(csv.DictReader(open(sys.argv[1] + "/steps.csv")))
b = list(csv.DictReader(open(sys.argv[2] + "/steps.csv")))
how = "in 1 process" if sys.argv[4] == "one" else "on 2 ranks with --zero 1"
for x, y in zip(a[10:], b[10:]):
    if abs(float(x["loss"]) - float(y["loss"])) > 1e-5:
        print(f"FAIL: zero resumed {how}: step {x['step']} loss {x['loss']} vs {y['loss']}"); sys.exit(1)
if len(b) != int(sys.argv[3]):
    print(f"FAIL: zero resumed {how}: {len(b)} steps"); sys.exit(1)
print(f"ok: zero: the 2-rank step-10 checkpoint resumes {how} on the same curve (steps 11-{len(b)})")
PY
done
# profiled: the ZeRO-1 transfers in each rank's trace, on the progress thread
lp_mpirun 2 "$L" profile --model "$T/model" --threads 1 --batch-size 8 --zero 1 --bucket-mb 0.25 \
  --output-dir "$T/two" --run-id zprof --profile-wait 1 --profile-warmup 1 --profile-active 2 --max-steps 4 \
  --eval none --quiet --peak-gflops 100 --record-shapes >"$T/zprof.out" 2>&1 || { fail "2-rank ZeRO-1 profile"; cat "$T/zprof.out"; }
python3 - "$T/two/zprof/profiler" <<'PY' || rc=1
import glob, gzip, json, sys
tr = sorted(glob.glob(sys.argv[1] + "/*.pt.trace.json.gz"))
if len(tr) != 2:
    print(f"FAIL: zero profile: {len(tr)} traces"); sys.exit(1)
for t in tr:
    j = json.load(gzip.open(t, "rt"))
    ev = [e for e in j["traceEvents"] if e.get("ph") == "X"]
    tname = {e["tid"]: e["args"]["name"] for e in j["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    for op in ("mpi:reduce_scatter", "mpi:all_gather"):
        es = [e for e in ev if e["name"] == op]
        if not es or not all(e["args"]["Input Dims"][0][0] * 4 == e["args"]["Bytes Moved"] > 0 for e in es) or \
                not all("mpi progress" in tname.get(e["tid"], "") for e in es):
            print(f"FAIL: zero profile: {t}: {len(es)} {op} ranges, or without float counts or off the progress thread")
            sys.exit(1)
    ar = [e for e in ev if e["name"] == "mpi:all_reduce"]  # the clip norm's, one double
    if len(ar) != 2 or any(e["args"]["Input Dims"] != [[1]] or "mpi progress" in tname.get(e["tid"], "") for e in ar):
        print(f"FAIL: zero profile: {t}: all-reduces {[e['args'].get('Input Dims') for e in ar]}, wanted the norm's"
              " [[1]] once a step on the main thread"); sys.exit(1)
print("ok: zero: profiled, mpi:reduce_scatter and mpi:all_gather ranges on each rank's progress thread, the clip "
      "norm's 1-element all-reduce on the main thread")
PY
n=$(ls "$T/two" | wc -l)
[ "$n" = 9 ] || fail "the 2-rank runs left $n entries in the output folder: $(ls "$T/two")"

# ---- profiled: a trace per rank, loaded by loupe analyze as a 2-rank job
# profiled NAME MODE: a 2-rank profile (LP_DIST_PROGRESS=MODE), its traces' checks, loupe analyze
profiled() {
  local name=$1 mode=$2
  LP_DIST_PROGRESS=$mode lp_mpirun 2 -x LP_DIST_PROGRESS "$L" profile --model "$T/model" --threads 1 --batch-size 8 --zero 0 \
    --output-dir "$T/two" --run-id "$name" --profile-wait 1 --profile-warmup 1 --profile-active 2 --max-steps 4 \
    --eval none --quiet --peak-gflops 100 --record-shapes --bucket-mb 0.25 \
    >"$T/$name.out" 2>&1 || { fail "2-rank loupe profile ($mode)"; cat "$T/$name.out"; return; }
  "$L" analyze "$T/two/$name/profiler" --csv "$T/an-$name" >"$T/an-$name.out" 2>&1 ||
    { fail "loupe analyze of the 2-rank folder ($mode)"; cat "$T/an-$name.out"; return; }
  python3 - "$T/two/$name/profiler" "$T/an-$name/ranks.csv" "$mode" <<'PY' || rc=1
import csv, glob, gzip, json, os, sys
d, mode = sys.argv[1], sys.argv[3]
tr = sorted(glob.glob(d + "/*.pt.trace.json.gz"))
names = [os.path.basename(t) for t in tr]
if len(tr) != 2 or not names[0].startswith("rank0.") or not names[1].startswith("rank1."):
    print(f"FAIL: {mode}: traces {names}, wanted rank0.* and rank1.*"); sys.exit(1)
for f in ("key_averages.txt", "summary.json"):  # rank 0's tables only
    if not os.path.exists(os.path.join(d, f)):
        print(f"FAIL: {mode}: profiler/{f} missing"); sys.exit(1)

def host_overlap(evs):
    """HTA's communication/computation overlap over host threads (as loupe analyze, for a
    CPU-only trace): a thread communicates while an mpi:* range is open on it and computes
    while only other ranges are (ProfilerStep and the data loader aside); the overlap is the
    time some thread communicates while another computes. (comm, overlap) in us."""
    th = {}
    for e in evs:
        n = e["name"]
        if e.get("cat") not in ("cpu_op", "user_annotation") or n.startswith(("ProfilerStep#", "enumerate(DataLoader)")):
            continue
        th.setdefault(e["tid"], ([], []))[0 if n.startswith("mpi:") else 1].append((e["ts"], e["ts"] + e["dur"]))
    pts = sorted({x for c, o in th.values() for iv in c + o for x in iv})
    on = lambda ivs, x: any(a <= x < b for a, b in ivs)
    comm = ov = 0.0
    for x0, x1 in zip(pts, pts[1:]):
        m = (x0 + x1) / 2
        c = [on(cv, m) for cv, _ in th.values()]
        if any(c):
            comm += x1 - x0
            if any(not ci and on(o, m) for ci, (_, o) in zip(c, th.values())):
                ov += x1 - x0
    return comm, ov

rows = {int(r["rank"]): r for r in csv.DictReader(open(sys.argv[2]))}
if sorted(rows) != [0, 1]:
    print(f"FAIL: {mode}: ranks.csv ranks {sorted(rows)}"); sys.exit(1)
early, first_in, figs = 0, [0, 0], []
for r, t in enumerate(tr):
    j = json.load(gzip.open(t, "rt"))
    di = j.get("distributedInfo", {})
    if di.get("backend") != "mpi" or di.get("rank") != r or di.get("world_size") != 2:
        print(f"FAIL: {names[r]}: distributedInfo {di}"); sys.exit(1)
    ev = [e for e in j["traceEvents"] if e.get("ph") == "X"]
    tname = {e["tid"]: e["args"]["name"] for e in j["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    ar = sorted((e for e in ev if e["name"] == "mpi:all_reduce"), key=lambda e: e["ts"])
    if not ar or not all(e["args"]["Input Dims"][0][0] * 4 == e["args"]["Bytes Moved"] > 0 for e in ar):
        print(f"FAIL: {names[r]}: {len(ar)} mpi:all_reduce events, or without their float count"); sys.exit(1)
    bw = [e for e in ev if e["name"].endswith(".backward") and e["name"].count(".") == 1]  # the model's
    steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
    if not bw or len(steps) != 2:
        print(f"FAIL: {names[r]}: {len(bw)} model backward ranges, {len(steps)} steps"); sys.exit(1)
    own = all("mpi progress" in tname.get(e["tid"], "") for e in ar)
    if own != (mode == "thread") or (own and any(e["tid"] == bw[0]["tid"] for e in ar)):
        print(f"FAIL: {names[r]}: all-reduces on {sorted({tname.get(e['tid']) for e in ar})} in {mode} mode"); sys.exit(1)
    for s in steps:
        b = [x for x in bw if s["ts"] <= x["ts"] <= s["ts"] + s["dur"]]
        a = [e for e in ar if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
        if len(b) != 1 or not a:
            print(f"FAIL: {names[r]}: {s['name']}: {len(b)} backward ranges, {len(a)} all-reduces"); sys.exit(1)
        b_end = b[0]["ts"] + b[0]["dur"]
        first_in[r] += b[0]["ts"] <= a[0]["ts"] <= b_end
        early += sum(e["ts"] + e["dur"] < b_end for e in a if e["tid"] != b[0]["tid"])
    comm, ov = host_overlap(ev)
    got_comm, got_ov = int(rows[r]["comm_ns"]) / 1e3, int(rows[r]["overlap_ns"]) / 1e3
    if got_comm <= 0 or abs(got_comm - comm) > 0.01 * comm + 1 or abs(got_ov - ov) > 0.01 * comm + 1:
        print(f"FAIL: {names[r]}: loupe analyze says communication {got_comm:.1f} us, overlap {got_ov:.1f} us; "
              f"the events say {comm:.1f} and {ov:.1f} us"); sys.exit(1)
    figs.append(f"rank {r}: communication {comm / 1e3:.1f} ms, {100 * ov / comm:.0f} % overlapped")
if mode == "thread":
    # the hook releases the head's bucket inside backward; a bucket completes while it computes
    if not all(first_in) or early == 0 or sum(int(x["overlap_ns"]) for x in rows.values()) <= 0:
        print(f"FAIL: thread: first all-reduce inside backward in {first_in} steps per rank, {early} completed "
              f"before backward ended, overlap {[x['overlap_ns'] for x in rows.values()]} ns"); sys.exit(1)
elif any(int(x["overlap_ns"]) != 0 for x in rows.values()):
    print(f"FAIL: layer: overlap {[x['overlap_ns'] for x in rows.values()]} ns with every all-reduce on the main thread")
    sys.exit(1)
print(f"ok: profiled ({mode}): {names[0]}, {names[1]}, distributedInfo mpi 0/2, 1/2; "
      f"{early} all-reduces completed before their rank's backward ended; " + "; ".join(figs) +
      " (loupe analyze within 1 % of these)")
PY
}
profiled prof thread
profiled prof-layer layer

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
