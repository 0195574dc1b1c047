#!/usr/bin/env bash
# A run directory belongs to one run (issue 16): a second run with the same --run-id is
# refused (exit 1, naming the directory and the flags that allow it) and leaves the first
# run's files byte for byte; --overwrite replaces them (old checkpoints gone); --resume keeps
# them; a live run's lock refuses even --overwrite, naming its PID; a lock left by a dead
# process is taken over, naming that PID. A run without --run-id never collides.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_run_lock.XXXXXX)
bgpid=
trap '[ -n "$bgpid" ] && kill $bgpid 2>/dev/null; rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
base=(--train data/sst2-mini/train.tsv --eval none --threads 1 --quiet --batch-size 8 --output-dir "$T/out")

"$L" train "${base[@]}" --max-steps 2 --checkpoint-every 1 --keep-checkpoints 0 --run-id r 2>"$T/err" ||
  { bad "first run"; cat "$T/err"; exit 1; }
[ -e "$T/out/r/.lock" ] && bad "the lock outlived its run"
before=$(cd "$T/out/r" && find . -type f | sort | xargs sha256sum)

# same id again: refused as a usage error (exit 2: other flags fix it), nothing touched
"$L" train "${base[@]}" --max-steps 1 --seed 7 --run-id r 2>"$T/err"; rc=$?
if [ $rc != 2 ] || ! grep -qF "$T/out/r already holds a run: --resume $T/out/r continues it, --overwrite replaces it" "$T/err"; then
  bad "same --run-id: exit $rc"; cat "$T/err"
else
  echo "ok: same --run-id refused"
fi
after=$(cd "$T/out/r" && find . -type f | sort | xargs sha256sum)
[ "$before" == "$after" ] || bad "the refused run changed the first run's files"

# --overwrite: a one-step run replaces it; the first run's step-2 checkpoint is gone
"$L" train "${base[@]}" --max-steps 1 --seed 7 --run-id r --overwrite 2>"$T/err" || { bad "--overwrite"; cat "$T/err"; }
if [ -d "$T/out/r/checkpoints/step-2" ] || [ ! -d "$T/out/r/checkpoints/step-1" ] ||
   ! grep -qP '"seed":\s*7,' "$T/out/r/config.json"; then
  bad "--overwrite did not replace the run"; ls -R "$T/out/r"
else
  echo "ok: --overwrite replaces the run"
fi
"$L" train "${base[@]}" --max-steps 1 --run-id r --overwrite --resume "$T/out/r" 2>"$T/err"; rc=$?
[ $rc == 2 ] && grep -q "exclude each other" "$T/err" && echo "ok: --overwrite with --resume is a usage error" ||
  bad "--overwrite --resume: exit $rc"

# --resume into the same id keeps the files and continues
"$L" train "${base[@]}" --max-steps 3 --seed 7 --run-id r --resume "$T/out/r" 2>"$T/err" || { bad "--resume"; cat "$T/err"; }
[ -d "$T/out/r/checkpoints/step-3" ] && echo "ok: --resume continues in the same directory" || bad "--resume"

# a directory that is not a run's is never cleared by --overwrite
mkdir -p "$T/out/mine" && echo precious > "$T/out/mine/notes.txt"
"$L" train "${base[@]}" --max-steps 1 --run-id mine --overwrite 2>"$T/err"; rc=$?
[ $rc == 2 ] && grep -q "not a loupe run's" "$T/err" && [ -f "$T/out/mine/notes.txt" ] &&
  echo "ok: --overwrite leaves a foreign directory alone" || { bad "foreign dir: exit $rc"; cat "$T/err"; }

# a live run: refused even with --overwrite, naming its PID
"$L" train "${base[@]}" --max-steps 100000 --run-id live --no-progress >/dev/null 2>"$T/live.err" &
bgpid=$!
for i in $(seq 600); do [ -s "$T/out/live/.lock" ] && break; sleep 0.1; done
"$L" train "${base[@]}" --max-steps 1 --run-id live --overwrite 2>"$T/err"; rc=$?
if [ $rc != 1 ] || ! grep -qF "$T/out/live: in use by another run (pid $bgpid holds" "$T/err"; then
  bad "live lock: exit $rc"; cat "$T/err"
else
  echo "ok: a live run's directory is refused, naming pid $bgpid"
fi
kill -INT $bgpid; wait $bgpid; bgpid=

# a stale lock (its PID no longer runs, no flock held): taken over with --resume, named
sh -c 'echo $$' > "$T/out/live/.lock"
dead=$(cat "$T/out/live/.lock")
"$L" train "${base[@]}" --max-steps 1 --run-id live --resume "$T/out/live" --quiet 2>"$T/err"; rc=$?
# --quiet hides the note: run again without it on a fresh stale lock
echo "$dead" > "$T/out/live/.lock"
"$L" train --train data/sst2-mini/train.tsv --eval none --threads 1 --no-progress --batch-size 8 \
  --output-dir "$T/out" --max-steps 2 --run-id live --resume "$T/out/live" >/dev/null 2>"$T/err"; rc2=$?
if [ $rc != 0 ] || [ $rc2 != 0 ] || ! grep -qF "stale lock of pid $dead (no longer running) taken over" "$T/err"; then
  bad "stale lock: exit $rc/$rc2"; cat "$T/err"
else
  echo "ok: a stale lock (pid $dead) is taken over"
fi

# no --run-id: two runs in the same second get two directories
"$L" train "${base[@]}" --max-steps 1 --output-dir "$T/auto" 2>/dev/null &
"$L" train "${base[@]}" --max-steps 1 --output-dir "$T/auto" 2>/dev/null; rc=$?
wait $!; rc2=$?
n=$(ls "$T/auto" | wc -l)
[ $rc == 0 ] && [ $rc2 == 0 ] && [ "$n" == 2 ] && echo "ok: timestamp ids never collide" || bad "auto ids: $rc $rc2, $n dirs"
exit $fail
