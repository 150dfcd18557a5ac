#!/usr/bin/env bash
# The Windows part of make test needs mingw-w64 (C and C++) and Wine. Installs what is missing
# from Debian's packages where it can (root and apt-get). Writes the outcome into $1, the status
# file tests/windows/check_windows.sh reads: "ready", "skip: why" (no package manager to install with), or
# "fail: why" (the install was possible and did not work). Exit 0 only when ready.
set -u
status=${1:?status file}
mkdir -p "$(dirname "$status")"
need=()
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
command -v x86_64-w64-mingw32-g++ >/dev/null 2>&1 || need+=(g++-mingw-w64-x86-64)
command -v wine >/dev/null 2>&1 || need+=(wine wine64)
if [ ${#need[@]} -eq 0 ]; then echo ready > "$status"; exit 0; fi
if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
  echo "skip: ${need[*]} missing and no apt-get as root to install them" > "$status"
  echo "notice: the Windows build and its Wine run are skipped: install ${need[*]} (Debian's packages)"
  exit 1
fi
echo "installing ${need[*]} from Debian's packages for the Windows build (about a minute)"
log=$(dirname "$status")/apt.log
# --no-install-recommends: console programs under Wine need none of its fonts, Mono or Gecko
if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$log" 2>&1 &&
   command -v x86_64-w64-mingw32-gcc >/dev/null && command -v x86_64-w64-mingw32-g++ >/dev/null && command -v wine >/dev/null; then
  echo ready > "$status"; exit 0
fi
echo "fail: apt-get could not install ${need[*]} (see $log)" > "$status"
tail -n 5 "$log"
exit 1
