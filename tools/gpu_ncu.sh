#!/usr/bin/env bash
# Nsight Compute on the GPU kernels being tuned, for a GPU session with device time left
# after tools/gpu_check.sh: three ncu runs of at most 2 minutes each, so up to 6 minutes
# (plus 5 s each for a run that ignores SIGTERM). Run it like the check, from the
# unpacked build:  bash .gpu/run 'bash $ZT_REPO/tools/gpu_ncu.sh'
# It profiles, with ncu's basic set (duration, SM and memory throughput, occupancy):
#   - the fused attention kernels in a GPT-2 small step, split backward and atomic: one
#     forward, then the last layer's backward (flash_kernel<..., Pass N>: 0 forward, 1 dq,
#     2 dk / dv, 3 prepare, 4 dk / dv with dq's shares, 5 dq_finish; the mangled names end
#     ...4PassE<N>E...);
#   - the GEMM epilogue's backward (bias and GELU gradients) in one GPT step.
# Each run's whole output goes to $OUT/ncu_<name>.txt (a temporary folder without $OUT);
# the lines printed are its kernels' metrics and ncu's errors and warnings, then its exit
# status. Exits 1 if any run failed; prints SKIPPED (exit 0) where the machine has no ncu.
set -u -o pipefail
if ! command -v ncu > /dev/null; then
  echo "SKIPPED: no ncu on this machine"
  exit 0
fi
unset OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_RANK
out=${OUT:-$(mktemp -d)}
failed=()
run_ncu() { # name, kernel regex, matching launches to skip, launches to profile, the command
  local name=$1 kernels=$2 skip=$3 count=$4
  shift 4
  local raw=$out/ncu_$name.txt
  echo "=== $name: ncu -k $kernels -s $skip -c $count: $* (output: $raw)"
  timeout -k 5 120 ncu --clock-control none --set basic --kernel-name-base mangled \
    -k "regex:$kernels" -s "$skip" -c "$count" "$@" > "$raw" 2>&1
  local rc=$?
  grep -a -E '^  [A-Za-z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Size|Grid Size|==ERROR==|==WARNING==|error' \
    "$raw" | cut -c1-160
  echo "=== $name: rc=$rc"
  [ "$rc" -eq 0 ] || failed+=("$name (rc=$rc)")
}
for way in split atomic; do
  # The 12 layers' forwards, of which the last is profiled, then the last layer's backward:
  # 2 (split) or 3 (atomic) launches.
  run_ncu "flash_$way" flash_kernel 11 4 \
    bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 1 --flash-backward "$way"
done
run_ncu epilogue_backward epilogue_backward_kernel 0 8 \
  bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 1
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_ncu: ${#failed[@]} run(s) FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu_ncu: all runs passed"
