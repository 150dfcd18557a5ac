#!/usr/bin/env bash
# NVRTC's Windows DLLs for the Wine run: PyPI's nvidia-cuda-nvrtc-cu12 wheel for win_amd64,
# downloaded by pip (any platform can fetch it) and unpacked as a Windows venv would hold it,
# $2/venv/Lib/site-packages/nvidia/cuda_nvrtc/bin, so test_platform.exe finds it through
# %VIRTUAL_ENV% like a user's program would. Without PyPI the module-cache test under Wine says
# it was skipped; nothing fails here.
set -u
py=${1:?python}; dir=${2:?folder}
pkg=nvidia-cuda-nvrtc-cu12==12.9.86
bin=$dir/venv/Lib/site-packages/nvidia/cuda_nvrtc/bin
rm -rf "$dir/wheel" && mkdir -p "$dir/wheel" "$bin"
if ! "$py" -m pip download -q --disable-pip-version-check --no-deps --platform win_amd64 --only-binary=:all: \
       -d "$dir/wheel" "$pkg" >"$dir/pip.log" 2>&1; then
  echo "notice: could not download $pkg for win_amd64 (see $dir/pip.log): the Wine run has no NVRTC"
  exit 0
fi
"$py" - "$dir/wheel" "$bin" <<'PY'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        b = os.path.basename(n)
        if n.startswith("nvidia/cuda_nvrtc/bin/") and b.endswith(".dll") and ".alt." not in b:
            with z.open(n) as src, open(os.path.join(sys.argv[2], b), "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$dir/wheel"
ls "$bin"
