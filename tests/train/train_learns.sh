#!/usr/bin/env bash
# The bundled default: `loupe train` with no model/data flags fine-tunes models/default on
# data/sst2-mini (2 epochs, batch 16, lr 5e-4) and must end well above chance on dev.tsv
# (>= 0.75; about 0.88 measured), with a decreasing loss curve in steps.csv and every
# run file consistent (check_run.py). About 2 minutes on 2 loaded cores: label slow.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_train_learns.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$L" train --threads 1 --output-dir "$T" --run-id default --no-progress --log-every 50 || { echo "FAIL: loupe train"; exit 1; }
python3 "$(dirname "$0")/check_run.py" "$T/default" --min-accuracy 0.75 --loss-decreases
