#!/usr/bin/env bash
# The safetensors fuzz target (tests/fuzz/fuzz_safetensors.c) under ASan+UBSan:
#  1. replays tests/fuzz/corpus/safetensors with the plain-main build, which fails on an input over
#     1 s of CPU (LWO_FUZZ_MAX_MS), a peak RSS over 256 MiB (LWO_FUZZ_MAX_RSS_MB), or lwo holding
#     more host memory than its budget (16 bytes per input byte + 64 KiB, checked inside the target);
#  2. when build/fuzz_safetensors exists (clang's libFuzzer runtime), fuzzes for $LWO_FUZZ_TIME
#     seconds (default 30) with limits low enough that an amplification is a crash:
#     -rss_limit_mb=256, -malloc_limit_mb=16 (no single allocation may reach 16 MiB for an input of
#     at most 4 KiB), -timeout=1 (seconds per input). ASan's quarantine is cut to 16 MiB so that
#     the freed memory it holds back does not read as RSS.
# Ends with "N passed, N failed".
set -u
p=0; f=0
if build/fuzz_safetensors-main tests/fuzz/corpus/safetensors/*; then p=$((p+1)); else echo "FAIL corpus replay"; f=$((f+1)); fi
if [ -x build/fuzz_safetensors ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
  mkdir -p build/fuzz-work/safetensors build/fuzz-work/artifacts
  if build/fuzz_safetensors -max_total_time="${LWO_FUZZ_TIME:-30}" -max_len=4096 -rss_limit_mb=256 -malloc_limit_mb=16 \
       -timeout=1 -print_final_stats=1 -artifact_prefix=build/fuzz-work/artifacts/ \
       build/fuzz-work/safetensors tests/fuzz/corpus/safetensors > build/fuzz_safetensors.out 2>&1; then
    p=$((p+1)); grep -E '^stat::(number_of_executed_units|slowest_unit_time_sec|peak_rss_mb)' build/fuzz_safetensors.out
  else
    echo "FAIL libFuzzer found a crash:"; tail -n 40 build/fuzz_safetensors.out; f=$((f+1))
  fi
else
  echo "notice: build/fuzz_safetensors missing (clang's libFuzzer runtime, libclang-rt-14-dev); timed fuzz skipped"
fi
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
