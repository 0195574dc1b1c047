#!/usr/bin/env bash
# One binary for every x86-64 CPU: outside the per-ISA kernel copies, no instruction may
# touch a ymm or zmm register (AVX / AVX-512), or the binary faults on a CPU without them
# before the dispatch ever chooses. The copies' functions all carry their level's suffix
# (src/kernels/isa_suffix.cmake), so this disassembles the loupe binary and every layer
# library and lists each function with such an instruction whose name lacks one.
#   scripts/check_isa.sh [BUILD_DIR]     (default: build; exit 77 when built with LP_NATIVE)
set -euo pipefail
build=${1:-${LP_BUILD_DIR:-build}}
if grep -q '^LP_NATIVE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "skipped: $build is an LP_NATIVE build (everything may use this machine's instructions)"
  exit 77
fi
files=("$build/loupe")
while IFS= read -r f; do files+=("$f"); done < <(find "$build/src" -name 'liblp_*.a' | sort)
bad=0 copies=0
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "FAIL: $f missing (build first)"; exit 1; }
  out=$(objdump -d --no-show-raw-insn "$f" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; next }
    /%[yz]mm[0-9]/ { if (fn ~ /_(avx2|avx512|avx512bf16)>:$/) ok++; else bad[fn]++ }
    END { for (f in bad) printf "  %s %d instructions\n", f, bad[f]; printf "ok %d\n", ok + 0 }')
  copies=$((copies + $(sed -n 's/^ok //p' <<<"$out")))
  if grep -q '^  ' <<<"$out"; then
    echo "FAIL: $f: wide-register instructions outside the per-ISA copies:"
    grep '^  ' <<<"$out" | head -20
    bad=1
  fi
done
# the copies must be there: an empty count means the check looked at the wrong thing
[ "$copies" -gt 1000 ] || { echo "FAIL: only $copies ymm/zmm instructions in the per-ISA copies"; bad=1; }
[ $bad = 0 ] && echo "ok: ${#files[@]} files; $copies ymm/zmm instructions, all inside the per-ISA kernel copies"
exit $bad
