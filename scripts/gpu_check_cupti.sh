#!/usr/bin/env bash
# The CUPTI collector on real hardware, for a GPU machine (H100 / H200, sm_90): builds
# tests/prof/cupti_record straight from the sources with nvcc and cc (no CMake, no loupe
# dependencies beyond zlib; the CUDA runtime static, CUPTI loaded at run time), runs it, and leaves in the out dir
#   records.jsonl        raw CUPTI activity records: commit as tests/fixtures/cupti/<gpu>_record.jsonl
#   trace.pt.trace.json  the Kineto trace loupe wrote from them (loupe analyze reads it)
#   cupti_record.log     the summary (records by kind, correlation matches, device time per op, NVML)
# Usage, from the repository root: bash scripts/gpu_check_cupti.sh [out_dir]   (default $OUT)
set -euo pipefail
out=${1:-${OUT:-/tmp/cupti_check}}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
cupti_so=$(find -L "$cuda/" -name 'libcupti.so*' 2>/dev/null | head -1)
[ -n "$cupti_so" ] || { echo "no libcupti under $cuda"; exit 1; }
cupti_lib=$(dirname "$cupti_so")
b=$(mktemp -d)
nvcc -O2 -arch=sm_90 -c tests/prof/cupti_record_kernels.cu -o "$b/k.o"
cc -O2 -std=gnu11 -Wall -Wextra -DLP_HAVE_CUPTI -DLP_HAVE_NVTX -DLP_CUPTI_LIBDIR="\"$cupti_lib\"" \
  -Iinclude -Isrc/prof -I"$cuda/include" src/prof/*.c src/base/*.c tests/prof/cupti_record.c "$b/k.o" \
  -L"$cuda/lib64" -lcudart_static -lrt -lz -lm -lpthread -ldl -lstdc++ -o "$b/cupti_record"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader || true
"$b/cupti_record" "$out" 2>&1 | tee "$out/cupti_record.log"
