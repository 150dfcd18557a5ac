#!/usr/bin/env bash
# make gpu-check: the whole GPU truth in one run, ending with one table (each part, pass/fail, its
# seconds and headline figures) and, when every part passed, the stamp tests/gpu-verified.txt
# (tests/tools/gpu_stamp.py). Exits non-zero when any part failed. Parts:
#   build       every GPU program (make gpu-build)
#   test_gpu*   the GPU test programs, each against its CPU references; test_dit_selftest, the
#               diffusion demo's GPU path against its CPU reference (bf16, int8, fp8 storage)
#   sanitizer   compute-sanitizer memcheck and racecheck of the quick streaming test
#   demo        make demo: hello, then the diffusion demo under its default budget; the PNG written
#               and every class of its images classified as that class by >= 80% (tests/gpu/score_demo.sh)
#   bench-dit   the Flux-sized step, every storage format under 8 GiB and resident (2 steps each)
#   bench       make bench: the memory-bound kernels against the copy ceiling; cold and warm starts
#   bench-gemm  make bench-gemm: lwo's GEMMs beside PyTorch's (and Triton's) in one run
#   bench-stream  make bench-stream, quick: the streamed stack beside PyTorch's prefetch
# Parts outside the whole check, for a first look or one area while iterating:
#   quick       every GPU test program with LWO_TEST_QUICK=1 (small sizes): a first look in ~1 min
#   test_gpu_gemm (or any one GPU test program's name)  that program alone, its full sizes; its
#               environment passes through (LWO_TEST_GEMM_PASSES=0g, LWO_TEST_WGMMA_ONLY=1, ...)
#   san-all     compute-sanitizer memcheck, racecheck and synccheck of every GPU test program, quick
#               (SAN_TESTS: some programs; SAN_TOOLS: some tools): for changes to async code
#   dit         the diffusion demo's checks (tests/gpu/dit_checks.sh): PyTorch parity, per-format
#               quality, streamed == resident
# GPU_CHECK_PARTS picks some (space separated): `GPU_CHECK_PARTS="build quick" make gpu-check`. A run
# of all of the whole check's parts writes the stamp; a run of some writes a partial stamp,
# gpu-check-part.txt in $OUT, and `python3 tests/tools/gpu_stamp.py merge A B` makes the stamp from
# partial runs of this same tree that passed every part between them.
# The cubin cache is build/lwo-cache (make warm-cache fills it on a
# machine without the GPU, so a cold GPU machine need not compile).
set -u
export PYTHONUNBUFFERED=1
# logs in build/gpu-check; at the end one archive of them, the table, the PNG and the stamp go to
# $OUT (a GPU call returns few files)
O=build/gpu-check; rm -rf "$O"; mkdir -p "$O"
R=${OUT:-}
export LWO_CACHE_DIR=${LWO_CACHE_DIR:-$PWD/build/lwo-cache}
ALL="build tests sanitizer demo bench-dit bench bench-gemm bench-stream"
PARTS=${GPU_CHECK_PARTS:-$ALL}
T0=$(date +%s)
TABLE="| part | result | seconds | headline |"$'\n'"| --- | --- | --- | --- |"$'\n'
nfail=0
has() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }
row() {  # part PASS|FAIL seconds headline
  TABLE+="| $1 | $2 | $3 | $4 |"$'\n'
  printf '%-14s %-4s %5ss  %s\n' "$1" "$2" "$3" "$4"
  [ "$2" = PASS ] || nfail=$((nfail + 1))
  checkpoint
}
# after every row, what passed so far goes to $OUT: a device call cut off by its time limit still
# returns the table and, while nothing failed, a partial stamp of the parts done (gpu_stamp.py merge
# joins it with a later run of the rest)
checkpoint() {
  [ -n "$R" ] || return 0
  printf '%s' "$TABLE" >"$R/gpu-check-table.md"
  [ $nfail -eq 0 ] && python3 tests/tools/gpu_stamp.py part "$R/gpu-check-table.md" "${gpu:-unknown}" "$R/gpu-check-part.txt" >/dev/null 2>&1
  return 0
}
# run NAME TIMEOUT LOG CMD...: the command under a timeout, its output in LOG; sets rc and secs
run() {
  local name=$1 t=$2 log=$3; shift 3
  local s=$(date +%s)
  echo "== $name"
  timeout "$t" "$@" >"$log" 2>&1; rc=$?
  secs=$(( $(date +%s) - s ))
  [ $rc -eq 124 ] && echo "  timed out after ${t}s" >>"$log"
}
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
echo "gpu: ${gpu:-none}; parts: $PARTS"

if has build; then
  run build 300 "$O/build.log" make -s -j16 gpu-build build/warm_cache
  [ $rc -eq 0 ] && row build PASS $secs "$(ls build/test_gpu* | grep -vc '\.') GPU test programs and the benches" \
                || { row build FAIL $secs "$(tail -n 3 "$O/build.log" | tr '\n|' ' /')"; }
fi
TESTS="test_gpu test_gpu_gemm test_gpu_graphs test_gpu_stream test_gpu_safetensors test_gpu_plan test_gpu_lora test_dit_selftest"
# the summary row of one test program's log (sets line)
summary() { line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1); }
if has quick; then
  for t in $TESTS; do
    run "quick:$t" 120 "$O/quick-$t.log" env LWO_TEST_QUICK=1 build/$t
    summary "$O/quick-$t.log"
    if [ $rc -eq 0 ] && [ -n "$line" ]; then row "quick:$t" PASS $secs "$line"
    else row "quick:$t" FAIL $secs "exit $rc: ${line:-no summary} $(grep -m 2 '^FAIL' "$O/quick-$t.log" | cut -c1-160 | tr '\n|' ' /')"; fi
  done
fi
for t in $TESTS; do
  has tests || has $t || continue
  run $t 240 "$O/$t.log" build/$t
  summary "$O/$t.log"
  if [ $rc -eq 0 ] && [ -n "$line" ]; then row $t PASS $secs "$line"
  else row $t FAIL $secs "exit $rc: ${line:-no summary} $(grep -m 2 '^FAIL' "$O/$t.log" | cut -c1-160 | tr '\n|' ' /')"; fi
done
if has sanitizer; then
  for tool in memcheck racecheck; do
    run "$tool" 240 "$O/$tool.log" env LWO_TEST_QUICK=1 compute-sanitizer --tool $tool --report-api-errors no build/test_gpu_stream
    summ=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$O/$tool.log" | tail -n 1 | sed 's/^========= //')
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$O/$tool.log" | tail -n 1)
    if [ $rc -eq 0 ] && echo "$summ" | grep -qE ": 0 (errors|hazards)" && echo "$line" | grep -q ' 0 failed'; then
      row "$tool" PASS $secs "test_gpu_stream (quick): $summ; $line"
    else row "$tool" FAIL $secs "exit $rc: ${summ:-no summary}; ${line:-no test summary}"; fi
  done
fi
if has san-all; then
  for t in ${SAN_TESTS:-$TESTS}; do
    for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
      run "$tool:$t" 300 "$O/$tool-$t.log" env LWO_TEST_QUICK=1 compute-sanitizer --tool $tool --report-api-errors no build/$t
      summ=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$O/$tool-$t.log" | tail -n 1 | sed 's/^========= //')
      summary "$O/$tool-$t.log"
      if [ $rc -eq 0 ] && echo "$summ" | grep -qE ": 0 (errors|hazards)" && echo "$line" | grep -q ' 0 failed'; then row "$tool:$t" PASS $secs "$summ; $line"
      else row "$tool:$t" FAIL $secs "exit $rc: ${summ:-no summary}; ${line:-no test summary}"; fi
    done
  done
fi
if has dit; then
  run dit 560 "$O/dit.log" bash tests/gpu/dit_checks.sh
  d=$(tr '\r' '\n' <"$O/dit.log" | grep -E '^(PASS|FAIL)' | tr '\n|' '; ' | cut -c1-300)
  if [ $rc -eq 0 ]; then row dit PASS $secs "${d:-see log}"; else row dit FAIL $secs "exit $rc: ${d:-see log}"; fi
fi
if has demo; then
  rm -f build/diffuse.png build/diffuse.f32 build/diffuse-lora.png build/diffuse-lora.f32
  run demo 240 "$O/demo.log" make -s demo
  demo_rc=$rc; demo_secs=$secs
  cp build/diffuse.png "$O/" 2>/dev/null; [ -n "$R" ] && cp build/diffuse.png build/diffuse-lora.png "$R/" 2>/dev/null
  # the LoRA's class changes and the others stay (tests/gpu/score_lora.py)
  lscore=$(python3 tests/gpu/score_lora.py build/diffuse.f32 build/diffuse-lora.f32 examples/tiny_dit_lora.safetensors 2>&1); lsrc=$?
  echo "$lscore" >"$O/demo_lora_score.log"
  lline=$(echo "$lscore" | grep -m 1 '^lora class' | cut -c1-120)
  cls=examples/tiny_dit_classifier.pt
  if [ ! -f "$cls" ] && [ -f build/tiny_dit_classifier.pt ]; then cls=build/tiny_dit_classifier.pt; fi
  if [ ! -f "$cls" ]; then   # once, until one is committed: trained on the reference sampler's own samples
    timeout 150 python3 tools/train_tiny_dit.py --train-classifier-synthetic --classifier-out build/tiny_dit_classifier.pt >"$O/classifier.log" 2>&1
    [ -f build/tiny_dit_classifier.pt ] && cls=build/tiny_dit_classifier.pt && [ -n "$R" ] && cp "$cls" "$R/"
  fi
  score=$(bash tests/gpu/score_demo.sh build/diffuse.f32 "$cls" 2>&1); src=$?
  echo "$score" >"$O/demo_score.log"
  per=$(echo "$score" | grep -m 1 'per-class' | sed 's/per-class accuracy: //')
  sampled=$(grep -m 1 -E '^sampled' "$O/demo.log" | cut -c1-90)
  if [ $demo_rc -eq 0 ] && [ -s "$O/diffuse.png" ] && [ $src -eq 0 ] && [ $lsrc -eq 0 ]; then row demo PASS $demo_secs "png written; per class: $per; $sampled; $lline"
  else row demo FAIL $demo_secs "exit $demo_rc, png $([ -s "$O/diffuse.png" ] && echo yes || echo no), score exit $src: $(echo "$score" | tail -n 1 | cut -c1-160); lora score exit $lsrc: ${lline:-$(echo "$lscore" | tail -n 1 | cut -c1-120)} $(grep -m 2 -iE 'failed|error' "$O/demo.log" | cut -c1-200 | tr '\n|' ' /')"; fi
fi
if has bench-dit; then
  run bench-dit 300 "$O/bench-dit.log" build/bench_dit --formats bf16,fp8,int8,fp8-upcast --budgets 8192,all --steps 2 --lora-ranks 32,128 --lora-formats int8
  rows=$(tr '\r' '\n' <"$O/bench-dit.log" | grep -E '^(bf16|fp8-w8a8|fp8-upcast|int8) +(8192 MiB|all) ')
  n=$(echo "$rows" | grep -v failed | grep -c .)
  # format, budget, s/step and its ratio to max(compute, transfer bound)
  head=$(echo "$rows" | awk '$0 !~ /failed/ { if ($2 == "all") printf "%s all %s s; ", $1, $3; else printf "%s 8G %s s (%s of bound); ", $1, $4, $10 }')
  lo=$(grep -E '^lora ' "$O/bench-dit.log" | sed -E 's/^lora ([a-z0-9-]+) rank ([0-9]+) under ([0-9]+ MiB|all): ([0-9.]+) s\/step, ([0-9.]+x) the step without LoRAs.*, ([0-9.]+x) max.*/\1 + rank \2 LoRAs \4 s (\5 without, \6 of bound)/' | tr '\n' ';')
  nl=$(grep -c '^lora ' "$O/bench-dit.log")
  head="${head% ; }; $lo"
  if [ $rc -eq 0 ] && [ "$n" -ge 8 ] && [ "$nl" -ge 2 ]; then row bench-dit PASS $secs "${head% ; }"
  else row bench-dit FAIL $secs "exit $rc, $n of 8 rows: ${head} $(grep -m 2 'failed' "$O/bench-dit.log" | cut -c1-200 | tr '\n|' ' /')"; fi
fi
if has bench; then
  run bench 240 "$O/bench.log" make -s bench
  up=$(grep -m 1 '^| upcast' "$O/bench.log" | cut -d'|' -f3,5,6 | tr -s ' ' | sed 's/|/ TB\/s, vs torch /; s/|/, of copy ceiling /')
  q=$(grep -m 1 '^| per-token int8' "$O/bench.log" | cut -d'|' -f3,5 | tr -s ' ' | sed 's/|/ TB\/s, vs torch /')
  cold=$(grep -m 1 'startup cold' "$O/bench.log" | sed 's/.*create+first kernel \([0-9.]* ms\).*/\1/')
  warm=$(grep -m 1 'startup warm' "$O/bench.log" | sed 's/.*create+first kernel \([0-9.]* ms\).*/\1/')
  dcold=$(grep -m 1 '^demo start cold' "$O/bench.log" | sed 's/.*: //'); dwarm=$(grep -m 1 '^demo start warm' "$O/bench.log" | sed 's/.*: //')
  if [ $rc -eq 0 ]; then row bench PASS $secs "upcast${up}; int8 quantize${q}; start cold $cold, warm $warm; the demo's whole run with an empty cache $dcold, cached $dwarm"
  else row bench FAIL $secs "exit $rc: $(grep -m 2 -E 'bench:|failed' "$O/bench.log" | cut -c1-200 | tr '\n|' ' /')"; fi
fi
if has bench-gemm; then
  run bench-gemm 300 "$O/bench-gemm.log" make -s bench-gemm
  g=$(grep -E '^\| 8192x8192x8192 ' "$O/bench-gemm.log" | head -n 1 | cut -d'|' -f3-6 | tr -s ' ')
  u=$(grep -E '^\| 8192x8192x8192 ' "$O/bench-gemm.log" | sed -n 2p | cut -d'|' -f3-6 | tr -s ' ')
  if [ $rc -eq 0 ] && [ -n "$g" ]; then row bench-gemm PASS $secs "8192^3 ms: int8 / _int_mm; TOP/s; fp8 / _scaled_mm; W8A8 e2e int8 / fp8 / F.linear bf16: ${g//|/;}; fp8 upcast weight read as stored / through a copy / lwo bf16 / F.linear; ratios; register A (vs copy); default e2e (vs F.linear): ${u//|/;}"
  else row bench-gemm FAIL $secs "exit $rc: $(grep -m 2 -E 'bench_gemm:|failed|Error' "$O/bench-gemm.log" | cut -c1-200 | tr '\n|' ' /')"; fi
fi
if has bench-stream; then
  run bench-stream 300 "$O/bench-stream.log" env LWO_BENCH_QUICK=1 make -s bench-stream
  s=$(grep -E 'fully streamed vs PyTorch|all resident: lwo' "$O/bench-stream.log" | tr '\n' ';' | tr -s ' ')
  if [ $rc -eq 0 ]; then row bench-stream PASS $secs "${s:-see log}"
  else row bench-stream FAIL $secs "exit $rc: $(grep -m 2 -E 'bench_stream:|failed|Error' "$O/bench-stream.log" | cut -c1-200 | tr '\n|' ' /')"; fi
fi

total=$(( $(date +%s) - T0 ))
printf '%s' "$TABLE" >"$O/gpu-check-table.md"
echo
echo "==== make gpu-check: $((nfail)) failed, ${total}s on ${gpu:-no GPU} ===="
printf '%s' "$TABLE"
if [ "$PARTS" = "$ALL" ] && [ $nfail -eq 0 ]; then
  python3 tests/tools/gpu_stamp.py write "$O/gpu-check-table.md" "${gpu:-unknown}" && [ -n "$R" ] && cp tests/gpu-verified.txt "$R/"
elif [ $nfail -eq 0 ]; then
  python3 tests/tools/gpu_stamp.py part "$O/gpu-check-table.md" "${gpu:-unknown}" "$O/gpu-check-part.txt" && [ -n "$R" ] && cp "$O/gpu-check-part.txt" "$R/"
fi
if [ -n "$R" ]; then cp "$O/gpu-check-table.md" "$R/"; tar czf "$R/gpu-check-logs.tgz" -C build gpu-check; fi
[ $nfail -eq 0 ]
