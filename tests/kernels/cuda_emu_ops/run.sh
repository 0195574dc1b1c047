#!/usr/bin/env bash
# This backend's kernels (src/kernels/cuda/{elementwise,reduce,rows,adamw,dropout,nf4,bf16}.cu,
# and cuda_bf16.c's launchers over them) on
# the CPU emulator of tests/kernels/cuda_emu (cukern's), through test_cuda_ops.c and an
# emulated backend: how they were checked before any GPU ran them. The .cu files are copied
# with each `k<<<grid, block, smem, stream>>>(args)` rewritten as an emulator launch, built
# with g++ against BUILD_DIR's libraries (a build without CUDA: -DLP_CUDA=OFF), and run with
# CT_REPS=0 (no timing loops). LP_CUDA_EMU_REVERSE=1 in the environment runs each phase's
# threads backwards (a changed result is a race). About 5 minutes on one core.
# Usage: tests/kernels/cuda_emu_ops/run.sh [BUILD_DIR]   (exit 77 without the emulator)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-build-nocuda}" && pwd)
emu=$root/tests/kernels/cuda_emu
[ -f "$emu/cuda_emu.cpp" ] || { echo "skipped: no CPU emulator at $emu (cukern's branch)"; exit 77; }
[ -f "$build/src/kernels/liblp_kernels.a" ] || { echo "no $build/src/kernels/liblp_kernels.a (build first)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$root/src/kernels/cuda/philox.cuh" "$tmp/"
cp "$root/tests/kernels/cuda_emu_ops/cuda_kernels.h" "$tmp/"
python3 - "$root/src/kernels/cuda" "$tmp" <<'PY'
import re, sys
src, out = sys.argv[1], sys.argv[2]
def split_top(s):  # the launch configuration's arguments, commas inside parentheses kept
    parts, depth, cur = [], 0, ''
    for ch in s:
        depth += ch in '([{'
        depth -= ch in ')]}'
        if ch == ',' and depth == 0:
            parts.append(cur.strip()); cur = ''
        else:
            cur += ch
    return parts + [cur.strip()]
for name in ['elementwise', 'reduce', 'rows', 'adamw', 'dropout', 'nf4', 'bf16']:
    s, o, i = open(f'{src}/{name}.cu').read(), '', 0
    while (j := s.find('<<<', i)) >= 0:
        k = re.search(r'(\w+)$', s[i:j]).group(1)
        e = s.find('>>>', j)
        g, b, sm, _ = split_top(s[j + 3:e])
        o += s[i:j - len(k)] + f'lp_emu_launch({k}, dim3({g}), dim3({b}), (size_t)({sm}), '
        i = e + 4
    open(f'{out}/{name}.cpp', 'w').write(o + s[i:])
PY
inc="-I$tmp -I$emu -I$root/include -I$root/src/kernels -I$root/tests"
objs=()
# the bf16 entries' plain-C launchers, as C++ beside the stand-in cuda_kernels.h
cp "$root/src/kernels/cuda/cuda_bf16.c" "$tmp/cuda_bf16.cpp"
for f in "$tmp"/*.cpp "$emu/cuda_emu.cpp" "$root/tests/kernels/cuda_emu_ops/emu_backend.cpp"; do
  o="$tmp/$(basename "$f" .cpp).o"
  g++ -O2 -std=c++17 -fpermissive -w -DLP_CUDA_EMU $inc -c "$f" -o "$o"
  objs+=("$o")
done
gcc -O2 -std=gnu11 -DCT_REPS=0 $inc -c "$root/tests/kernels/test_cuda_ops.c" -o "$tmp/test.o"
g++ -o "$tmp/test_cuda_ops_emu" "$tmp/test.o" "${objs[@]}" "$build/src/kernels/liblp_kernels.a" \
  "$build/src/core/liblp_core.a" "$build/src/prof/liblp_prof.a" "$build/src/base/liblp_base.a" \
  -fopenmp -lopenblas -lm -lpthread
"$tmp/test_cuda_ops_emu"
