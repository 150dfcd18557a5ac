#!/usr/bin/env bash
# Everything for one call of the GPU machine: build, GPU tests, the sanitizer pass, the demo and
# the benchmark; logs under $OUT (when set), the short tables last.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-build/out}; mkdir -p "$O" build
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
make -s gpu-build >"$O/build.log" 2>&1 || { cat "$O/build.log"; exit 1; }
timeout 300 make -s test-gpu 2>&1 | tee "$O/test-gpu.log" | grep -vE '^\s*$' | tail -n 60
echo "== compute-sanitizer memcheck (quick sizes)"
LWO_TEST_QUICK=1 timeout 240 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no build/test_gpu >"$O/memcheck.log" 2>&1; echo "memcheck exit $?"
grep -E "ERROR SUMMARY|passed, " "$O/memcheck.log" | tail -n 3
for tool in racecheck synccheck; do
  echo "== compute-sanitizer $tool: the streaming engine (quick)"
  LWO_TEST_QUICK=1 timeout 300 compute-sanitizer --tool $tool --report-api-errors no build/test_gpu_stream >"$O/$tool.log" 2>&1; echo "$tool exit $?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, " "$O/$tool.log" | tail -n 3
done
echo "== demo"; timeout 60 make -s demo 2>&1 | tail -n 6
echo "== bench"; timeout 300 make -s bench 2>&1 | tee "$O/bench.log" | tail -n 30
