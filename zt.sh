#!/usr/bin/env bash
# zt.sh run | test — set up a fresh Debian machine (apt-get, as root or via sudo),
# build zt (Release, Ninja) and run the main job or the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"

mode=${1:-}
case "$mode" in run | test) ;; *) echo "usage: bash zt.sh run | test" >&2; exit 2 ;; esac
shift

packages=(build-essential cmake ninja-build pkg-config libopenblas-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev nlohmann-json3-dev libstb-dev libcli11-dev openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  # Installed, not merely known to dpkg (removed packages keep their config files).
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "== installing: ${missing[*]}"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

build=${ZT_BUILD_DIR:-build}
jobs=${ZT_JOBS:-$(nproc)}
echo "== configuring $build (Release, Ninja)"
# shellcheck disable=SC2086 # ZT_CMAKE_ARGS may hold several arguments
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${ZT_CMAKE_ARGS:-} >/dev/null
if grep -q '^ZT_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "== CUDA: enabled (ZT_CUDA=ON; ZT_CMAKE_ARGS=-DZT_CUDA=OFF builds without it)"
else
  echo "== CUDA: not enabled (ZT_CUDA=OFF: no nvcc found, or turned off)"
fi
echo "== building with $jobs jobs"
cmake --build "$build" -j "$jobs"

if [ "$mode" = test ]; then
  echo "== running the test suite"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
else
  echo "== main job: train the tiny vision tokenizer on 2 thread ranks"
  "$build/apps/vqtok" train --config configs/vqtok_tiny.yaml --ranks 2 "$@"
fi
