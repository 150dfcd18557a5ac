#!/usr/bin/env bash
# Scores the diffusion demo's samples per class with the classifier shipped in the repo (trained
# without Fashion-MNIST: tools/train_tiny_dit.py --train-classifier-synthetic):
#   bash tests/gpu/score_demo.sh build/diffuse.f32 [classifier.pt]
# The samples: the demo's --raw file (float32 [N,28,28], class-major: sample i has class i/(N/10))
# or its --out PNG grid (a row per class). Prints the per-class line and the overall line, then
# PASS / FAIL. Exit 0: every class >= MIN_CLASS_ACC percent (default 80, the threshold of
# tests/gpu/dit_checks.sh); 1: a class below it; 2: could not score (no samples, no classifier, no
# PyTorch for $PY, or the scorer failed).
set -u
here=$(cd "$(dirname "$0")" && pwd)
T=$here/../../tools/train_tiny_dit.py
PY=${PY:-python3}
MIN=${MIN_CLASS_ACC:-80}
S=${1:-}
CLS=${2:-$here/../../examples/tiny_dit_classifier.pt}
if [ -z "$S" ] || [ "$S" = -h ] || [ "$S" = --help ]; then
  echo "usage: bash tests/gpu/score_demo.sh SAMPLES.f32|SAMPLES.png [CLASSIFIER.pt]   (exit 0 pass, 1 fail, 2 cannot score)"; exit 2
fi
[ -f "$S" ] || { echo "score_demo: CANNOT SCORE: no samples file $S"; exit 2; }
[ -f "$CLS" ] || { echo "score_demo: CANNOT SCORE: no classifier $CLS (make it on a GPU machine: python3 tools/train_tiny_dit.py --train-classifier-synthetic)"; exit 2; }
"$PY" -c 'import torch' >/dev/null 2>&1 || { echo "score_demo: CANNOT SCORE: $PY has no PyTorch (set PY=/path/to/python with torch)"; exit 2; }
out=$("$PY" "$T" --score "$S" --classifier "$CLS" 2>&1); rc=$?
line=$(printf '%s\n' "$out" | grep '^per-class accuracy: ' | tail -n 1)
if [ $rc -ne 0 ] || [ -z "$line" ]; then
  printf '%s\n' "$out" | tail -n 5
  echo "score_demo: CANNOT SCORE: the scorer exited $rc without a per-class line"; exit 2
fi
echo "$line"
printf '%s\n' "$out" | grep 'samples, .*% classified' | tail -n 1
low=$(printf '%s\n' "$line" | awk -v m="$MIN" '{ for (i = 3; i <= NF; i++) if ($i ~ /^[0-9]+:/) { split($i, a, ":"); if (!(a[2] + 0 >= m + 0)) printf " %s:%s", a[1], a[2] } }')
n=$(printf '%s\n' "$line" | awk '{ c = 0; for (i = 3; i <= NF; i++) if ($i ~ /^[0-9]+:/) c++; print c }')
if [ "$n" != 10 ]; then echo "score_demo: CANNOT SCORE: $n classes in the per-class line, want 10"; exit 2; fi
if [ -z "$low" ]; then echo "score_demo: PASS: every class >= $MIN% ($CLS)"; exit 0; fi
echo "score_demo: FAIL: classes below $MIN%:$low ($CLS)"; exit 1
