#!/usr/bin/env bash
# Runs each test program given, prints its output, and ends with the sum: "N passed, N failed".
set -u
p=0; f=0
for t in "$@"; do
  echo "== $t"
  out=$("$t" 2>&1); rc=$?
  echo "$out"
  line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$line" ]; then echo "FAIL $t: no summary line (exit $rc)"; f=$((f+1)); continue; fi
  tp=$(echo "$line" | cut -d' ' -f1); tf=$(echo "$line" | cut -d' ' -f3)
  p=$((p+tp)); f=$((f+tf))
  if [ "$rc" -ne 0 ] && [ "$tf" -eq 0 ]; then echo "FAIL $t: exit $rc"; f=$((f+1)); fi
done
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
