#!/usr/bin/env bash
# The Windows build (build/win/*.exe: mingw-w64, C and C++) run under Wine, headless, in a private
# prefix under build/: the CPU tests, the safetensors corpus replay, the link test, and hello,
# which must fail cleanly naming nvcuda.dll (Wine has no CUDA driver). test_platform.exe also
# builds a module through the cubin cache with NVRTC's Windows DLL when tests/windows/fetch_win_nvrtc.sh
# could fetch it. Ends with "N passed, N failed". Skipped (counted neither way, and said so) where
# tests/windows/windows_tools.sh had no package manager to install the tools; a failed install fails.
set -u
W=build/win
status=$(cat "$W/status" 2>/dev/null || echo "skip: the Windows build did not run (make win-build)")
case "$status" in
  ready) ;;
  skip:*) echo "notice: Windows part skipped (${status#skip: })"; echo "0 passed, 0 failed"; exit 0 ;;
  *) echo "FAIL Windows part: ${status#fail: }"; echo "0 passed, 1 failed"; exit 1 ;;
esac
export WINEPREFIX="$PWD/build/wine" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
unset DISPLAY WAYLAND_DISPLAY   # console programs need no display; without one Wine loads no X driver
p=0; f=0
fail() { f=$((f+1)); echo "FAIL $*"; }
t0=$(date +%s)
# The prefix is made on first use (15-30 s). Its server is started first and kept up for the whole
# run (-p), so that the services wineboot starts belong to it and stay, writing to wineboot.log: a
# server that exits between programs is raced by the next one ("wine client error"), and services
# a program starts hold its output open. The server needs the prefix folder: on a clean clone,
# before it was made here, the server never started, the race came in 2 of 4 runs, and the restart
# after it left services holding a program's output pipe under a server that never exits (a CI
# run that never ended). Every wineserver call is bounded; a server that will not stop is killed.
# (-k exits 1 where no server runs; only a timeout, 124, calls for the kill)
server_stop() { timeout 30 wineserver -k >/dev/null 2>&1; [ $? -ne 124 ] || { pkill -9 -u "$(id -u)" -x wineserver; sleep 1; }; }
server_start() {
  mkdir -p "$WINEPREFIX" && server_stop
  timeout 30 wineserver -p </dev/null >"$W/wineserver.log" 2>&1 &&
    timeout 300 wine wineboot -u </dev/null >"$W/wineboot.log" 2>&1
}
if ! server_start; then
  fail "Wine would not start (see $W/wineserver.log and $W/wineboot.log)"; echo "$p passed, $f failed"; exit 1
fi
echo "$(wine --version 2>/dev/null) prefix ready in $(( $(date +%s) - t0 )) s"

# run [VAR=value...] EXE ARGS...: one program under Wine; sets out (Unix line ends) and rc. When
# Wine itself fails ("wine client error": its server dropped the connection, seen once in CI while
# the program printed nothing), the server is restarted and the program run once more: that is
# Wine's failure, not the program's.
run() {
  local envs=() try
  while [[ $1 == *=* ]]; do envs+=("$1"); shift; done
  echo "== wine $*"
  for try in 1 2; do
    # into a file, not a pipe: no process Wine leaves behind can keep this waiting
    timeout 600 env "${envs[@]}" wine "$@" </dev/null >"$W/run.log" 2>&1; rc=$?
    out=$(tr -d '\r' <"$W/run.log")
    printf '%s' "$out" | grep -q '^wine client error' || break
    [ $try -eq 1 ] && { echo "notice: Wine's server failed ($(printf '%s\n' "$out" | grep -m1 '^wine client error')); restarting it and running again"
                        server_start; }
  done
  printf '%s\n' "$out"
}
# a program that ends with "N passed, N failed", counted as tests/tools/run.sh counts
counted() {
  local line tp tf
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$line" ]; then fail "$1: no summary line (exit $rc)"; return; fi
  tp=${line%% *}; tf=$(echo "$line" | cut -d' ' -f3)
  p=$((p+tp)); f=$((f+tf))
  if [ "$rc" -ne 0 ] && [ "$tf" -eq 0 ]; then fail "$1: exit $rc"; fi
}

# test_platform's module build through the cache: NVRTC 13's Windows DLLs for the C build, 12's
# for the C++ one (tests/windows/fetch_win_nvrtc.sh), each found through %VIRTUAL_ENV%
venv() {
  if [ -d "$W/nvrtc/$1/venv" ]; then echo "VIRTUAL_ENV=$(winepath -w "$W/nvrtc/$1/venv" 2>/dev/null || echo "$W/nvrtc/$1/venv")"
  else echo "LWO_NO_NVRTC_WHEEL=1"; echo "notice: no Windows NVRTC $1 in $W/nvrtc (PyPI unreachable?)" >&2; fi
}
for t in test_cpu test_plan test_gemm test_safetensors test_platform link-test; do
  for v in "" -cxx; do
    exe=$W/$t$v.exe
    if [ "$t$v" = test_platform ]; then run "$(venv cu13)" "$exe"
    elif [ "$t$v" = test_platform-cxx ]; then run "$(venv cu12)" "$exe"
    else run "$exe"; fi
    counted "$exe"
  done
done

# the fuzz target's corpus, replayed by its plain main (no sanitizers in this build)
run "$W/fuzz_safetensors-main.exe" tests/fuzz/corpus/safetensors/*
if [ "$rc" -eq 0 ] && printf '%s' "$out" | grep -q '^replayed [0-9]* inputs'; then p=$((p+1)); else fail "corpus replay (exit $rc)"; fi

# no driver under Wine: hello stops with LWO_ERROR_NO_DRIVER and a message naming nvcuda.dll
for v in "" -cxx; do
  run "$W/hello$v.exe"
  if [ "$rc" -eq 1 ]; then p=$((p+1)); else fail "hello$v.exe exited $rc (want 1)"; fi
  if printf '%s' "$out" | grep -q 'LWO_ERROR_NO_DRIVER' && printf '%s' "$out" | grep -q "'nvcuda.dll'"; then p=$((p+1)); else fail "hello$v.exe: message"; fi
done

# every process of this prefix, and its server, end here rather than linger past the run
server_stop
echo "Windows part: $(( $(date +%s) - t0 )) s under Wine"
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
