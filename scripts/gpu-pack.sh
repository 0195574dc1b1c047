#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine: build/loupe and every CUDA test
# binary (build/tests/**/test_cuda*, not the CPU emulator's *_emu) into OUT/bin, and the
# shared libraries they load from this machine into OUT/lib -- all but the C and C++
# runtimes and zlib (the GPU machine has its own, newer), the GPU driver's, and cuBLASLt
# (half a gigabyte: the GPU machine's CUDA toolkit or pip's nvidia-cublas has it;
# gpu-check.sh finds it). About 55 MB, most of
# it OpenBLAS; OUT_DIR.tar.gz beside it (about 19 MB) is what to send.
# Usage: scripts/gpu-pack.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build}
out=${2:-gpu-pack}
[ -x "$build/loupe" ] || { echo "gpu-pack: no $build/loupe (build first)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$build/loupe")
while IFS= read -r f; do bins+=("$f"); done < <(find "$build/tests" -type f -name 'test_cuda*' ! -name '*_emu' -perm -u+x | sort)
cp "${bins[@]}" "$out/bin/"
skip='^(libc|libm|libdl|librt|libpthread|ld-linux.*|libstdc\+\+|libgcc_s|libz|libcuda|libnvidia.*|libcublasLt|libcublas)\.so'
for b in "${bins[@]}"; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while IFS= read -r lib; do
  name=$(basename "$lib")
  [[ $name =~ $skip ]] || cp -L "$lib" "$out/lib/$name"
done
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
echo "gpu-pack: $(ls "$out/bin" | wc -l) binaries, $(ls "$out/lib" | wc -l) libraries, $(du -sh "$out" | cut -f1) in $out;" \
  "$(du -sh "$out.tar.gz" | cut -f1) in $out.tar.gz"
