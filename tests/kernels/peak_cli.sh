#!/usr/bin/env bash
# loupe peak: a short run prints the table, --json/--output give parseable positive
# figures, the OpenBLAS kernel-set choice follows LP_BLAS_CORETYPE, LP_ISA picks the kernels'
# ISA level (and a bad one is refused), and bad flags or an
# unwritable output fail cleanly (exit 2 / 1, no file left).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
"$L" peak --seconds 0.1 --size 128 --threads 1 >"$tmp/table.txt" || { echo "FAIL: table run"; fail=1; }
grep -q "f32 FMA peak" "$tmp/table.txt" && grep -q "STREAM triad" "$tmp/table.txt" || { echo "FAIL: table rows"; cat "$tmp/table.txt"; fail=1; }
"$L" peak --seconds 0.1 --size 128 --json --output "$tmp/peak.json" >"$tmp/stdout.json" || { echo "FAIL: json run"; fail=1; }
cmp -s "$tmp/peak.json" <(head -c "$(stat -c %s "$tmp/peak.json")" "$tmp/stdout.json") || { echo "FAIL: --output differs from stdout"; fail=1; }
for key in fma_gflops fma_gflops_1thread fma256_gflops sgemm_gflops triad_gbs; do
  v=$(sed -n "s/.*\"$key\":[[:space:]]*\([0-9.e+]*\).*/\1/p" "$tmp/peak.json")
  awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || { echo "FAIL: $key is '$v'"; fail=1; }
done
grep -q '"sgemm_n":[[:space:]]*128' "$tmp/peak.json" || { echo "FAIL: sgemm_n"; fail=1; }
grep -q '"blas_threading":[[:space:]]*"openmp"' "$tmp/peak.json" || { echo "FAIL: OpenBLAS is not the OpenMP build"; fail=1; }
# The OpenBLAS kernel set: loupe uses the one it picks for this CPU with nothing set (OpenBLAS's
# detection, or the ISA's set where OpenBLAS falls back to an older one for a CPU it does not
# know) even when OPENBLAS_CORETYPE names another; LP_BLAS_CORETYPE=env keeps OPENBLAS_CORETYPE's,
# =NAME forces.
core() { sed -n 's/.*"blas_core":[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }
probe() { env "$@" "$L" peak --seconds 0.1 --size 64 --threads 1 --json >"$tmp/core.json" && core "$tmp/core.json"; }
detected=$(probe -u OPENBLAS_CORETYPE -u LP_BLAS_CORETYPE)
default=$(probe -u LP_BLAS_CORETYPE OPENBLAS_CORETYPE=Haswell)
kept=$(probe OPENBLAS_CORETYPE=Haswell LP_BLAS_CORETYPE=env)
forced=$(probe -u OPENBLAS_CORETYPE LP_BLAS_CORETYPE=Haswell)
echo "OpenBLAS kernels: auto '$detected', default under OPENBLAS_CORETYPE=Haswell '$default', env kept '$kept', forced '$forced'"
[ -n "$detected" ] && [ "$default" = "$detected" ] || { echo "FAIL: default should be the set picked with nothing set"; fail=1; }
[ "$kept" = Haswell ] || { echo "FAIL: LP_BLAS_CORETYPE=env should keep OPENBLAS_CORETYPE"; fail=1; }
[ "$forced" = Haswell ] || { echo "FAIL: LP_BLAS_CORETYPE=Haswell should force it"; fail=1; }
rm -f "$tmp/core.json"
# ISA levels: the JSON names the level that ran; LP_ISA forces one (its vector width with
# it); an unknown level or one the CPU lacks is refused with exit 2, naming LP_ISA.
isa() { sed -n 's/.*"isa":[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }
bits() { sed -n 's/.*"vector_bits":[[:space:]]*\([0-9]*\).*/\1/p' "$1"; }
detected_isa=$(isa "$tmp/peak.json")
[ -n "$detected_isa" ] || { echo "FAIL: no isa in the JSON"; fail=1; }
for level in baseline avx2 avx512 avx512bf16; do
  LP_ISA=$level "$L" peak --seconds 0.1 --size 64 --threads 1 --json >"$tmp/isa.json" 2>"$tmp/err"
  rc=$?
  if [ $rc = 2 ]; then # a level this CPU lacks: refused, naming what is missing
    grep -q "LP_ISA=$level: this CPU lacks" "$tmp/err" || { echo "FAIL: LP_ISA=$level refusal: $(cat "$tmp/err")"; fail=1; }
    continue
  fi
  want_bits=$(case $level in baseline) echo 128 ;; avx2) echo 256 ;; *) echo 512 ;; esac)
  [ $rc = 0 ] && [ "$(isa "$tmp/isa.json")" = $level ] && [ "$(bits "$tmp/isa.json")" = "$want_bits" ] ||
    { echo "FAIL: LP_ISA=$level ran $(isa "$tmp/isa.json") at $(bits "$tmp/isa.json") bits (rc $rc)"; fail=1; }
  # OpenBLAS is held to the forced level too (a forced run is that level's machine): the set
  # it runs needs no more than the level (Cooperlake/SapphireRapids > SkylakeX > Haswell/Zen > older)
  rank() { case $1 in Cooperlake|SapphireRapids) echo 3 ;; SkylakeX) echo 2 ;; Haswell|Zen) echo 1 ;; *) echo 0 ;; esac; }
  lvl=$(case $level in baseline) echo 0 ;; avx2) echo 1 ;; avx512) echo 2 ;; *) echo 3 ;; esac)
  bc=$(core "$tmp/isa.json")
  [ "$(rank "$bc")" -le "$lvl" ] || { echo "FAIL: LP_ISA=$level left OpenBLAS on its $bc kernels"; fail=1; }
done
rm -f "$tmp/isa.json"
LP_ISA=avx3 "$L" peak --seconds 0.1 2>"$tmp/err" >/dev/null; [ $? = 2 ] || { echo "FAIL: LP_ISA=avx3 should exit 2"; fail=1; }
grep -q "LP_ISA: unknown ISA level 'avx3'" "$tmp/err" || { echo "FAIL: LP_ISA=avx3 message: $(cat "$tmp/err")"; fail=1; }
"$L" peak --size 5 2>/dev/null; [ $? = 2 ] || { echo "FAIL: bad --size should exit 2"; fail=1; }
"$L" peak --seconds abc 2>/dev/null; [ $? = 2 ] || { echo "FAIL: bad --seconds should exit 2"; fail=1; }
"$L" peak --seconds 0.1 --size 64 --output "$tmp/no/such/dir/p.json" >/dev/null 2>"$tmp/err"; [ $? = 1 ] || { echo "FAIL: unwritable output should exit 1"; fail=1; }
grep -q "no/such/dir" "$tmp/err" || { echo "FAIL: error does not name the file"; cat "$tmp/err"; fail=1; }
[ -z "$(ls "$tmp" | grep -v -e table.txt -e peak.json -e stdout.json -e err)" ] || { echo "FAIL: stray files"; ls "$tmp"; fail=1; }
exit $fail
