#!/usr/bin/env bash
# The demo's first start on this GPU and its next one, as a user meets them: make demo's diffuse
# command, whole process wall time, first with an empty cubin cache (every module compiled by
# NVRTC), then with the cache that run filled. Appends demo_start_cold_s and demo_start_warm_s to
# the bench file given, and shows lwo's progress lines of the cold run.
#   bash tests/gpu/time_demo_start.sh BUILD_DIR BENCH_FILE
set -u
B=${1:?build folder}
out=${2:?bench file}
cache=$B/demo-start-cache
rm -rf "$cache"
for k in cold warm; do
  t0=$(date +%s.%N)
  if ! LWO_CACHE_DIR=$cache "$B/diffuse" --out "$B/diffuse-start.png" > "$B/demo-start-$k.log" 2>&1; then
    echo "time_demo_start: the $k run failed:"; tail -20 "$B/demo-start-$k.log"; exit 1
  fi
  t1=$(date +%s.%N)
  s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  echo "demo start $k: $s s"
  [ "$k" = cold ] && grep '^lwo: ' "$B/demo-start-$k.log" | sed 's/^/  /'
  echo "demo_start_${k}_s $s" >> "$out"
done
exit 0
