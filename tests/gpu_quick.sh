#!/usr/bin/env bash
# A short GPU call while iterating on one part: build, then the named steps, each under a timeout.
# Steps: gemm (test_gpu_gemm), graphs (test_gpu_graphs), st (test_gpu_safetensors), gpu (test_gpu), stream (test_gpu_stream),
# bench-gemm, bench-stream, bench-dit, dit (tests/dit_checks.sh), selftest (test_dit_selftest: the demo, bf16, int8 and fp8),
# bench-dit-bf16 (the Flux-sized benchmark, bf16 at 8 GiB and resident, 2 steps), race-gemm (racecheck + synccheck of test_gpu_gemm, quick;
# SAN_GEMM_PASSES its passes, SAN_GEMM_TOOLS other tools),
# san (memcheck, racecheck, synccheck of test_gpu_safetensors and test_gpu_stream, quick; SAN_TESTS picks others).
# The cubin cache lives in build/lwo-cache and is copied to $OUT so a later call can carry it.
set -u
O=${OUT:-build/out}; mkdir -p "$O" build/lwo-cache
export LWO_CACHE_DIR=$PWD/build/lwo-cache PYTHONUNBUFFERED=1
make -s -j16 gpu-build >"$O/build.log" 2>&1 || { tail -n 40 "$O/build.log"; exit 1; }
summary=""
for step in "$@"; do
  t0=$(date +%s)
  case $step in
    gemm)   timeout ${T_GEMM:-380} build/test_gpu_gemm >"$O/gemm.log" 2>&1; rc=$?; grep -E "GEMMs|4608|FAIL|split their" "$O/gemm.log" | head -n 60; tail -n 1 "$O/gemm.log" ;;
    graphs) timeout 200 build/test_gpu_graphs >"$O/graphs.log" 2>&1; rc=$?; grep -E "FAIL|per call" "$O/graphs.log" | head -n 20; tail -n 1 "$O/graphs.log" ;;
    st)     timeout 150 build/test_gpu_safetensors >"$O/st.log" 2>&1; rc=$?; grep -E "FAIL" "$O/st.log" | head -n 20; tail -n 1 "$O/st.log" ;;
    gpu)    timeout 200 build/test_gpu >"$O/gpu.log" 2>&1; rc=$?; grep -E "FAIL" "$O/gpu.log" | head -n 20; tail -n 1 "$O/gpu.log" ;;
    stream) timeout 200 build/test_gpu_stream >"$O/stream.log" 2>&1; rc=$?; grep -E "FAIL" "$O/stream.log" | head -n 20; tail -n 1 "$O/stream.log" ;;
    bench-gemm) timeout 200 make -s bench-gemm >"$O/bench-gemm.log" 2>&1; rc=$?; tail -n 90 "$O/bench-gemm.log" ;;
    dit)    timeout 400 bash tests/dit_checks.sh >"$O/dit.log" 2>&1; rc=$?; tr '\r' '\n' <"$O/dit.log" | grep -v ' steps/s$' | grep -E "PASS|FAIL|passed|^\|" | tail -n 60 ;;
    race-gemm) for tool in ${SAN_GEMM_TOOLS:-racecheck synccheck}; do LWO_TEST_QUICK=1 LWO_TEST_WGMMA_ONLY=1 LWO_TEST_GEMM_PASSES=${SAN_GEMM_PASSES:-04} timeout ${T_RACE:-110} compute-sanitizer --tool $tool --report-api-errors no build/test_gpu_gemm >"$O/$tool-gemm.log" 2>&1; rc=$?; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, " "$O/$tool-gemm.log" | tail -n 3; done ;;
    bench-stream) LWO_BENCH_QUICK=1 timeout ${T_STREAM:-330} make -s bench-stream >"$O/bench-stream.log" 2>&1; rc=$?; tail -n 30 "$O/bench-stream.log" ;;
    selftest) timeout 240 build/test_dit_selftest >"$O/selftest.log" 2>&1; rc=$?; echo "test_dit_selftest exit $rc: $(grep -E '^FAIL' "$O/selftest.log" | head -n 5) $(tail -n 1 "$O/selftest.log")" ;;
    bench-dit-bf16) timeout 300 build/bench_dit --formats bf16 --budgets 8192,all --steps 2 >"$O/bench-dit-bf16.log" 2>&1; rc=$?; tr '\r' '\n' <"$O/bench-dit-bf16.log" | grep -v ' steps/s$' | tail -n 14 ;;
    bench-dit) timeout ${T_DIT:-330} make -s bench-dit >"$O/bench-dit.log" 2>&1; rc=$?; tr '\r' '\n' <"$O/bench-dit.log" | grep -v ' steps/s$' | tail -n 30 ;;
    san)    for t in ${SAN_TESTS:-test_gpu_safetensors test_gpu_stream}; do
              for tool in memcheck racecheck synccheck; do
                LWO_TEST_QUICK=1 timeout 100 compute-sanitizer --tool $tool --report-api-errors no build/$t >"$O/$tool-$t.log" 2>&1; rc=$?
                echo "$tool $t exit $rc: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$O/$tool-$t.log" | tail -n 1) / $(tail -n 1 "$O/$tool-$t.log")"
              done
            done ;;
    *) echo "unknown step $step"; rc=2 ;;
  esac
  summary="$summary\n$step rc=$rc $(( $(date +%s) - t0 ))s"
done
tar czf "$O/lwo-cache.tgz" -C build lwo-cache 2>/dev/null  # one file: calls return few files
printf "== steps$summary\n"
