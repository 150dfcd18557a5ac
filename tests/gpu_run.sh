#!/usr/bin/env bash
# Everything for one call of the GPU machine, in sections (default: all but dit):
#   tests     build, make test-gpu, compute-sanitizer memcheck / racecheck / synccheck
#   demo      make demo
#   bench     make bench (and the GEMM / streaming benchmarks where built)
#   dit       the diffusion demo's checks (tests/dit_checks.sh): selftest (build/test_dit_selftest), parity with PyTorch,
#             classifier quality per storage format, streamed == resident; a table at the end
#   bench-dit make bench-dit: a Flux-sized transformer streamed under 8 / 16 GiB and resident, per format
#   dit-train train the demo's tiny DiT (tools/train_tiny_dit.py) from .data/fashion-mnist
# Logs go under $OUT when set; the short tables come last.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-build/out}; mkdir -p "$O" build
S=${*:-tests demo bench}
has() { case " $S " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
make -s gpu-build >"$O/build.log" 2>&1 || { cat "$O/build.log"; exit 1; }
if has dit-train; then
  echo "== train the tiny DiT"
  timeout 420 python3 tools/train_tiny_dit.py --data .data/fashion-mnist --out build/tiny_dit.safetensors 2>&1 | tee "$O/dit.log" | tail -n 25
  if [ -f build/tiny_dit.safetensors ]; then split -b 15m -d build/tiny_dit.safetensors "$O/tiny_dit.part"; fi
  cp build/ref_samples.f32 build/ref_samples.png build/fmnist_classifier.pt "$O/" 2>/dev/null; ls -la "$O"
fi
if has tests; then
  timeout 400 make -s test-gpu 2>&1 | tee "$O/test-gpu.log" | grep -vE '^\s*$' | tail -n 60
  echo "== compute-sanitizer memcheck (quick sizes)"
  LWO_TEST_QUICK=1 timeout 240 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no build/test_gpu >"$O/memcheck.log" 2>&1; echo "memcheck exit $?"
  grep -E "ERROR SUMMARY|passed, " "$O/memcheck.log" | tail -n 3
  for t in $(ls build/test_gpu_* 2>/dev/null | grep -v '\.'); do
    for tool in racecheck synccheck; do
      echo "== compute-sanitizer $tool: $t (quick)"
      LWO_TEST_QUICK=1 timeout 300 compute-sanitizer --tool $tool --report-api-errors no "$t" >"$O/$tool-$(basename $t).log" 2>&1; echo "$tool exit $?"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, " "$O/$tool-$(basename $t).log" | tail -n 3
    done
  done
fi
if has demo; then echo "== demo"; timeout 240 make -s demo 2>&1 | tr '\r' '\n' | tail -n 14; cp build/diffuse.png "$O/" 2>/dev/null; fi
if has dit; then echo "== dit"; timeout 560 bash tests/dit_checks.sh 2>&1 | tee "$O/dit-checks.log" | tr '\r' '\n' | grep -v ' steps/s$' | tail -n 80; fi
if has bench-dit; then echo "== bench-dit"; timeout 580 make -s bench-dit 2>&1 | tee "$O/bench-dit.log" | tr '\r' '\n' | grep -v ' steps/s$' | tail -n 40; fi
if has bench; then echo "== bench"; timeout 400 make -s bench 2>&1 | tee "$O/bench.log" | tail -n 12; fi
if has gemm; then echo "== bench-gemm"; timeout 400 make -s bench-gemm 2>&1 | tee "$O/bench-gemm.log" | tail -n 80; fi
if has stream; then echo "== bench-stream"; timeout 500 make -s bench-stream 2>&1 | tee "$O/bench-stream.log" | tail -n 30; fi
