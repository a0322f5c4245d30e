#!/usr/bin/env bash
# Packs what tools/gpu_check.sh and tools/gpu_ncu.sh run for the GPU machine, which has the
# CUDA toolkit and NVIDIA's libraries (in its Python wheels) but none of the Debian
# libraries zt links, no Open MPI, and installs nothing:
#   bash tools/gpu_pack.sh [BUILD_DIR=build] [OUT_DIR=.gpu]      (from the repository root)
# then, with the device tool (carry [".gpu"]):
#   bash .gpu/run 'ZT_GPU_CHECK_SECONDS=420 bash $ZT_REPO/tools/gpu_check.sh'
# BUILD_DIR must be a CUDA build (ZT_CUDA=ON). Only the six executables the checks run go
# into the pack (all of them would come near the 64 MiB a call can carry), through the
# packing tool ../shared/tools/gpu-pack (or $GPU_PACK), which adds the shared libraries
# they need and configs/. Beside the pack, OUT_DIR/openmpi.tar.xz holds Open MPI's
# plugins and help files: the NCCL tests make their communicator through MPI_Init, which
# the packed libmpi cannot complete without them (gpu_check.sh unpacks it).
set -euo pipefail
build=${1:-build}
out=${2:-.gpu}
pack=${GPU_PACK:-../shared/tools/gpu-pack}
[ -x "$pack" ] || { echo "gpu_pack: no packing tool at $pack (set GPU_PACK)" >&2; exit 2; }
grep -q "ZT_CUDA:BOOL=ON" "$build/CMakeCache.txt" 2> /dev/null ||
  { echo "gpu_pack: $build is not a CUDA build (ZT_CUDA=ON)" >&2; exit 2; }
slim=$(mktemp -d)
trap 'rm -rf "$slim"' EXIT
mkdir -p "$slim/tests" "$slim/apps"
cp "$build/CMakeCache.txt" "$slim/"
for f in tests/zt_test_cuda tests/zt_test_comm_nccl tests/zt_test_apps apps/zt-bench apps/vqtok \
  apps/vqgpt; do
  cp "$build/$f" "$slim/$f"
done
rm -rf "$out"
"$pack" "$slim" "$out"
mpi=$(dirname "$(find /usr/lib -path '*/openmpi/lib/openmpi3' -type d | head -n 1)")
if [ -d "$mpi/openmpi3" ] && [ -d /usr/share/openmpi ]; then
  stage=$slim/openmpi
  mkdir -p "$stage/lib/x86_64-linux-gnu/openmpi/lib" "$stage/share"
  cp -r "$mpi/openmpi3" "$stage/lib/x86_64-linux-gnu/openmpi/lib/"
  # The plugins' own libraries, under the names they load them by (here the .so files are
  # links to ../../libmca_common_X.so.N, which a copy of the link would leave dangling).
  for l in "$mpi"/libmca_common_*.so; do
    cp -L "$l" "$stage/lib/x86_64-linux-gnu/openmpi/lib/$(basename "$(readlink "$l")")"
  done
  cp -r /usr/share/openmpi "$stage/share/"
  tar -C "$slim" -cJf "$out/openmpi.tar.xz" openmpi
else
  echo "gpu_pack: no Open MPI plugins found here: the NCCL tests will abort in MPI_Init there" >&2
fi
du -ch "$out"/* | tail -n 1
