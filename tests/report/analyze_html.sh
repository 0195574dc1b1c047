#!/usr/bin/env bash
# loupe analyze --html: the page for a GPU trace (linked kernels, NCCL, [memory] events),
# a CPU-only PyTorch trace and a two-rank job holds the six views and the numbers the text
# output prints; headless Chromium loads each with no console error, every chart drawn and
# non-blank (tests/report/html_check.py). 77 (skip) when Chromium is missing.
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
T=$(mktemp -d /tmp/lp_analyze_html.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

gpu=fuzz/seeds/kineto_trace/gpu_linked.json
"$L" analyze --html "$T/gpu.html" "$gpu" > "$T/gpu.txt" || bad "analyze --html on $gpu"
for tab in Overview Operator Kernel Memory Distributed Trace; do
  grep -q ">$tab<" "$T/gpu.html" || bad "gpu page lacks the $tab view"
done
# aten::to: 35.125 us of device time (its kernel and the memcpy linked by correlation), as the text says
grep -q '35.125us' "$T/gpu.txt" || bad "text lacks aten::to's 35.125 us"
grep -q '>35.125<' "$T/gpu.html" || bad "page lacks aten::to's 35.125 us"
grep -q 'AllReduce' "$T/gpu.html" || bad "page lacks the AllReduce collective"
grep -q 'ui.perfetto.dev' "$T/gpu.html" || bad "page lacks the Perfetto instructions"
grep -q 'threshold' "$T/gpu.html" || bad "page lacks recommendations with thresholds"
grep -q 'http' "$T/gpu.html" | grep -v perfetto && bad "page loads something from the network"

"$L" analyze --html "$T/cpu.html" tests/fixtures/torch_trace/worker0.pt.trace.json.gz > /dev/null || bad "cpu page"
grep -q '>aten::addmm<' "$T/cpu.html" || bad "cpu page lacks aten::addmm"

mkdir -p "$T/job"
for r in 0 1; do
  printf '{"distributedInfo": {"rank": %d, "world_size": 2}, "traceEvents": [{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":0,"dur":%d},{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float","pid":0,"tid":8,"ts":%d,"dur":%d}]}' \
    "$r" "$((100 + 200 * r))" "$((100 + 200 * r))" "$((250 - 200 * r))" > "$T/job/rank$r.json"
done
"$L" analyze --html "$T/job.html" "$T/job" > /dev/null || bad "job page"
grep -q 'Slowest rank: 1' "$T/job.html" || bad "job page does not name rank 1 the slowest"

python3 tests/report/html_check.py "$T/gpu.html" --charts 3; rc=$?
[ $rc = 77 ] && { echo "skip: no chromium"; exit $([ $fail = 0 ] && echo 77 || echo 1); }
[ $rc = 0 ] || bad "gpu page in Chromium"
python3 tests/report/html_check.py "$T/cpu.html" --charts 1 || bad "cpu page in Chromium"
python3 tests/report/html_check.py "$T/job.html" --charts 3 || bad "job page in Chromium"
exit $fail
