#!/usr/bin/env bash
# Ecosystem: TensorBoard's own EventAccumulator reads the scalars of a loupe train run
# back (train/loss equal to steps.csv, the eval scalars present). Skips (77) without the
# tensorboard package.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
S=${LP_SOURCE_DIR:-.}
T=$(mktemp -d /tmp/lp_eco_tb.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$L" train --threads 1 --batch-size 8 --max-steps 5 --output-dir "$T" --run-id t --quiet \
  --eval data/sst2-mini/dev.tsv >/dev/null || { echo "FAIL: loupe train"; exit 1; }
sh "$S/tests/ecosystem/run_py.sh" - "$T/t" <<'PY'
import csv, sys
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"SKIP: tensorboard is not installed ({e})"); sys.exit(77)
d = sys.argv[1]
acc = EventAccumulator(d + "/tensorboard")
acc.Reload()
tags = acc.Tags()["scalars"]
for t in ("train/loss", "train/lr", "train/grad_norm", "eval/loss", "eval/accuracy"):
    if t not in tags:
        print(f"FAIL: tag {t} missing from {tags}"); sys.exit(1)
rows = list(csv.DictReader(open(d + "/steps.csv")))
got = {e.step: e.value for e in acc.Scalars("train/loss")}
if sorted(got) != [int(r["step"]) for r in rows]:
    print(f"FAIL: steps {sorted(got)}"); sys.exit(1)
for r in rows:
    if abs(got[int(r["step"])] - float(r["loss"])) > 1e-6:
        print(f"FAIL: step {r['step']}: {got[int(r['step'])]} vs {r['loss']}"); sys.exit(1)
print(f"PASS: EventAccumulator reads {len(tags)} scalar tags; train/loss equals steps.csv over {len(rows)} steps")
PY
