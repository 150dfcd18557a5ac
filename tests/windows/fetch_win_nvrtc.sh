#!/usr/bin/env bash
# NVRTC's Windows DLLs for the Wine run, from PyPI's win_amd64 wheels (pip fetches them on any
# platform): CUDA 12's nvidia-cuda-nvrtc-cu12 and CUDA 13's nvidia-cuda-nvrtc, each unpacked where
# a Windows venv holds it, $2/cu12/venv/Lib/site-packages/nvidia/cuda_nvrtc/bin and
# $2/cu13/venv/Lib/site-packages/nvidia/cu13/bin/x86_64, so test_platform.exe finds them through
# %VIRTUAL_ENV% as a user's program would. Without PyPI the Wine run says its module build was
# skipped; nothing fails here.
set -u
py=${1:?python}; dir=${2:?folder}
fetch() {   # fetch NAME PACKAGE PATH-IN-WHEEL
  local name=$1 pkg=$2 sub=$3 bin
  bin=$dir/$name/venv/Lib/site-packages/$sub
  rm -rf "$dir/$name" && mkdir -p "$dir/$name/wheel" "$bin"
  if ! "$py" -m pip download -q --disable-pip-version-check --no-deps --platform win_amd64 --only-binary=:all: \
         -d "$dir/$name/wheel" "$pkg" >"$dir/$name/pip.log" 2>&1; then
    echo "notice: could not download $pkg for win_amd64 (see $dir/$name/pip.log): the Wine run goes without it"
    rm -rf "$dir/$name/venv"
    return
  fi
  "$py" - "$dir/$name/wheel" "$sub" "$bin" <<'PY'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        b = os.path.basename(n)
        if n.startswith(sys.argv[2] + "/") and b.endswith(".dll") and ".alt." not in b:
            with z.open(n) as src, open(os.path.join(sys.argv[3], b), "wb") as dst:
                dst.write(src.read())
PY
  rm -rf "$dir/$name/wheel"
  echo "$pkg: $(ls "$bin" | tr '\n' ' ')"
}
fetch cu12 nvidia-cuda-nvrtc-cu12==12.9.86 nvidia/cuda_nvrtc/bin
fetch cu13 nvidia-cuda-nvrtc==13.5.37 nvidia/cu13/bin/x86_64
