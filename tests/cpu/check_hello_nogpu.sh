#!/usr/bin/env bash
# On a machine without a GPU, hello exits non-zero with lwo's clear message, not a crash.
# Skipped (counted as passed nothing) where a GPU driver is present.
set -u
if [ -e /dev/nvidiactl ] || ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then echo "a GPU driver is present: skipped"; echo "0 passed, 0 failed"; exit 0; fi
out=$(build/hello 2>&1); rc=$?
p=0; f=0
if [ $rc -eq 1 ]; then p=$((p+1)); else f=$((f+1)); echo "FAIL: hello exited $rc (want 1)"; fi
if echo "$out" | grep -qE 'LWO_ERROR_(NO_DRIVER|STUB_DRIVER|NO_DEVICE)' && echo "$out" | grep -q 'libcuda'; then p=$((p+1)); else f=$((f+1)); echo "FAIL: message: $out"; fi
echo "$out"
echo "$p passed, $f failed"
[ $f -eq 0 ]
