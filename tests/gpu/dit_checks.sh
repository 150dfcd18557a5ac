#!/usr/bin/env bash
# GPU checks of the diffusion demo (examples/diffuse.c), run by `GPU_CHECK_PARTS=dit make gpu-check` on
# the GPU machine (PyTorch installed, Fashion-MNIST in .data/fashion-mnist):
#   selftest   build/test_dit_selftest per storage: every kernel against the CPU reference,
#              a whole step against the CPU model, graph == eager, streamed == resident
#   parity     bf16 storage, all resident, against tools/train_tiny_dit.py --sample-ref (float32
#              PyTorch) from identical noise: relative L2 <= 2e-2
#   quality    classifier accuracy of each storage's samples >= 80%, fp8 / int8 within 3 points of bf16
#   streaming  a budget holding under half the weights: samples bit-identical (cmp) to all-resident
# Each check prints PASS or FAIL with its numbers; a failure does not stop the others. The table
# comes last; the exit status is 1 when any check failed. Logs and samples go to $OUT (or build/out).
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-build/out}; mkdir -p "$O" build
PY=${PY:-python3}
T=tools/train_tiny_dit.py
MODEL=examples/tiny_dit.safetensors
CLS=build/fmnist_classifier.pt
DATA=${DIT_DATA:-.data/fashion-mnist}
STORAGES=${DIT_STORAGES:-bf16 fp8 int8 fp8-upcast}
npass=0; nfail=0; TABLE=""
row() {  # name PASS|FAIL|INFO detail
  printf '%-4s %-30s %s\n' "$2" "$1" "$3"
  TABLE="$TABLE$(printf '%-30s %-4s  %s' "$1" "$2" "$3")"$'\n'
  case $2 in PASS) npass=$((npass+1));; FAIL) nfail=$((nfail+1));; esac
}
# a float comparison in awk: le A B -> exit 0 when A <= B
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 <= b + 0) }'; }
stat_of() { sed -n "s/.*[ :]$2=\([0-9]*\).*/\1/p" "$1" | tail -n 1; }

make -s build/diffuse build/test_dit_selftest >"$O/dit_build.log" 2>&1 || { cat "$O/dit_build.log"; row build FAIL "make build/diffuse build/test_dit_selftest failed"; }

echo "== test_dit_selftest"
for s in bf16 int8 fp8; do
  timeout 300 build/test_dit_selftest --storage $s >"$O/dit_selftest_$s.log" 2>&1; rc=$?
  grep -E '^(PASS|FAIL)' "$O/dit_selftest_$s.log" | sed "s/^/  [$s] /"
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$O/dit_selftest_$s.log" | tail -n 1)
  if [ $rc -eq 0 ] && [ -n "$line" ]; then row "selftest $s" PASS "$line"; else row "selftest $s" FAIL "exit $rc: ${line:-$(tail -n 3 "$O/dit_selftest_$s.log" | tr '\n' ' ')}"; fi
done

echo "== bench_dit --quick (the benchmark's program on a small model)"
make -s build/bench_dit >>"$O/dit_build.log" 2>&1
timeout 240 build/bench_dit --quick --steps 2 >"$O/dit_bench_quick.log" 2>&1; rc=$?
tr '\r' '\n' <"$O/dit_bench_quick.log" | grep -v ' steps/s$' | tail -n 8
[ $rc -eq 0 ] && row "bench_dit --quick" PASS "runs (see $O/dit_bench_quick.log)" || row "bench_dit --quick" FAIL "exit $rc (see $O/dit_bench_quick.log)"

echo "== classifier"
if [ ! -f "$CLS" ]; then
  timeout 400 $PY $T --train-classifier --data "$DATA" --classifier-out "$CLS" >"$O/dit_classifier.log" 2>&1
  tail -n 2 "$O/dit_classifier.log"
fi
if [ -f "$CLS" ]; then row classifier INFO "$CLS $(grep -o 'test accuracy [0-9.]*%' "$O/dit_classifier.log" 2>/dev/null | tail -n 1)"
else row classifier FAIL "no $CLS (see $O/dit_classifier.log)"; fi

echo "== PyTorch reference (float32, --sample-ref)"
timeout 300 $PY $T --sample-ref --out $MODEL --ref-out build/dit_ref.f32 --classifier "$CLS" >"$O/dit_ref.log" 2>&1
tail -n 3 "$O/dit_ref.log"
ref_acc=$(sed -n 's/.*class accuracy of reference samples: \([0-9.]*\)%.*/\1/p' "$O/dit_ref.log" | tail -n 1)
[ -f build/dit_ref.f32 ] && row "reference (PyTorch f32)" INFO "accuracy ${ref_acc:-?}%" || row "reference (PyTorch f32)" FAIL "no build/dit_ref.f32 (see $O/dit_ref.log)"

declare -A ACC
for s in $STORAGES; do
  for v in all auto; do
    echo "== diffuse --storage $s --vram $v"
    timeout 300 build/diffuse --storage $s --vram $v --raw build/dit_${s}_$v.f32 --out build/dit_${s}_$v.png >"$O/dit_${s}_$v.log" 2>"$O/dit_${s}_$v.err"
    echo "exit $?"; grep -E '^(lwo |sampled|peak|streamed)' "$O/dit_${s}_$v.log"; tail -n 2 "$O/dit_${s}_$v.err" | tr '\r' '\n' | tail -n 2
  done
  cp build/dit_${s}_all.png "$O/" 2>/dev/null
  # quality
  if [ -f build/dit_${s}_all.f32 ] && [ -f "$CLS" ]; then
    timeout 120 $PY $T --score build/dit_${s}_all.f32 --classifier "$CLS" >"$O/dit_score_$s.log" 2>&1
    a=$(sed -n 's/.*samples, \([0-9.]*\)% classified.*/\1/p' "$O/dit_score_$s.log" | tail -n 1)
    ACC[$s]=$a
  fi
  # streaming
  l="$O/dit_${s}_auto.log"
  wb=$(stat_of "$l" weight_bytes); rb=$(stat_of "$l" resident_bytes); sb=$(stat_of "$l" bytes_streamed)
  if [ -f build/dit_${s}_all.f32 ] && [ -f build/dit_${s}_auto.f32 ] && [ -n "$wb" ] && [ -n "$rb" ] && [ -n "$sb" ]; then
    same=$(cmp -s build/dit_${s}_all.f32 build/dit_${s}_auto.f32 && echo yes || echo no)
    d="resident $(awk -v r=$rb -v w=$wb 'BEGIN{printf "%.2f of %.2f MiB (%.0f%%)", r/1048576, w/1048576, 100*r/w}'), streamed $(awk -v b=$sb 'BEGIN{printf "%.1f MiB", b/1048576}'), samples bit-identical: $same"
    if [ $same = yes ] && [ $((2 * rb)) -lt $wb ] && [ $sb -gt 0 ]; then row "streaming $s" PASS "$d"; else row "streaming $s" FAIL "$d"; fi
  else row "streaming $s" FAIL "a run failed (see $O/dit_${s}_all.* and $O/dit_${s}_auto.*)"; fi
done

echo "== parity"
if [ -f build/dit_bf16_all.f32 ] && [ -f build/dit_ref.f32 ]; then
  $PY $T --compare build/dit_bf16_all.f32 build/dit_ref.f32 >"$O/dit_parity.log" 2>&1; cat "$O/dit_parity.log"
  rel=$(sed -n 's/.*||A-B||\/||B|| = \([0-9.e+-]*\).*/\1/p' "$O/dit_parity.log")
  if le "$rel" 2e-2; then row "parity bf16 vs PyTorch" PASS "relative L2 $rel (<= 2e-2)"; else row "parity bf16 vs PyTorch" FAIL "relative L2 ${rel:-?} (<= 2e-2)"; fi
  for s in $STORAGES; do
    [ $s = bf16 ] || [ ! -f build/dit_${s}_all.f32 ] && continue
    r=$($PY $T --compare build/dit_${s}_all.f32 build/dit_ref.f32 2>&1 | sed -n 's/.*||A-B||\/||B|| = \([0-9.e+-]*\).*/\1/p')
    row "distance $s vs PyTorch" INFO "relative L2 ${r:-?}"
  done
else row "parity bf16 vs PyTorch" FAIL "missing build/dit_bf16_all.f32 or build/dit_ref.f32"; fi

echo "== quality"
b=${ACC[bf16]:-}
for s in $STORAGES; do
  a=${ACC[$s]:-}
  if [ -z "$a" ]; then row "quality $s" FAIL "no score (see $O/dit_score_$s.log)"; continue; fi
  if [ $s = bf16 ] || [ -z "$b" ]; then
    if le 80 "$a"; then row "quality $s" PASS "$a% (>= 80)"; else row "quality $s" FAIL "$a% (>= 80)"; fi
  else
    dd=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%+.1f", a-b}')
    if le 80 "$a" && le "$b" "$(awk -v a="$a" 'BEGIN{print a+3}')"; then row "quality $s" PASS "$a% (>= 80; $dd vs bf16, within 3)"
    else row "quality $s" FAIL "$a% (>= 80; $dd vs bf16, within 3)"; fi
  fi
done

echo
echo "==== dit checks ===="
printf '%s' "$TABLE"
echo "$npass passed, $nfail failed"
[ $nfail -eq 0 ]
