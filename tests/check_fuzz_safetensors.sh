#!/usr/bin/env bash
# Replays tests/corpus/safetensors with the plain-main ASan+UBSan build, then runs libFuzzer for
# $LWO_FUZZ_TIME seconds (default 30) when build/fuzz_safetensors exists. Ends with "N passed, N failed".
set -u
p=0; f=0
if build/fuzz_safetensors-main tests/corpus/safetensors/*; then p=$((p+1)); else echo "FAIL corpus replay"; f=$((f+1)); fi
if [ -x build/fuzz_safetensors ]; then
  mkdir -p build/fuzz-work/safetensors
  if build/fuzz_safetensors -max_total_time="${LWO_FUZZ_TIME:-30}" -max_len=4096 -print_final_stats=0 \
       build/fuzz-work/safetensors tests/corpus/safetensors > build/fuzz_safetensors.out 2>&1; then
    p=$((p+1)); tail -n 2 build/fuzz_safetensors.out
  else
    echo "FAIL libFuzzer found a crash:"; tail -n 40 build/fuzz_safetensors.out; f=$((f+1))
  fi
else
  echo "notice: build/fuzz_safetensors missing (clang's libFuzzer runtime, libclang-rt-14-dev); timed fuzz skipped"
fi
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
