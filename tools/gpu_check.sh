#!/usr/bin/env bash
# The GPU check: every GPU test and GPU benchmark in one call, within 8 minutes on one
# H200 (each step has its own time limit; they add up to under 8 minutes). Build here with
# CUDA on, pack the build, and run the pack on the GPU machine from the repository root:
#   ../shared/tools/gpu-pack build .gpu
#   bash .gpu/run 'bash $ZT_REPO/tools/gpu_check.sh'          (device tool, carry [".gpu"])
# Runs inside the unpacked build (bin/, configs/). Prints each step's command, its output
# and seconds; exits 1 if any step failed or ran out of time.
set -u
failed=()
step() {
  local limit=$1
  shift
  echo "=== $* (limit ${limit}s)"
  local t0=$SECONDS
  timeout "$limit" bash -c "$*"
  local rc=$?
  echo "=== rc=$rc after $((SECONDS - t0))s"
  [ "$rc" -eq 0 ] || failed+=("$*")
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
step 80 "bin/zt_test_cuda"                  # the cuda-labelled tests (they skip without a GPU)
step 25 "bin/zt_test_comm_nccl"             # NcclComm on one GPU
step 30 "bin/zt_test_apps --gtest_filter='*Cuda*:*Gpu*'"  # vqgpt and a bf16 GPT block vs the CPU
step 35 "bin/zt-bench ops --device cuda"
step 40 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 5 --modules"
step 50 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 5"
step 55 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5"   # GPT-2 small, MFU
step 60 "bin/vqtok train --config configs/vqtok_tiny.yaml --device cuda --set train.steps=100 \
  --set output_dir=/tmp/zt_gpu_check/f32 --overwrite"
step 40 "bin/vqtok train --config configs/vqtok_tiny.yaml --device cuda --set train.dtype=bf16 \
  --set train.steps=50 --set output_dir=/tmp/zt_gpu_check/bf16 --overwrite"
step 40 "bin/vqgpt train --config configs/vqgpt_tiny.yaml --device cuda --set train.steps=100 \
  --tokenizer /tmp/zt_gpu_check/f32/checkpoints --set output_dir=/tmp/zt_gpu_check/gpt \
  --overwrite"                               # the tokenizer's share of the step is printed
step 20 "bin/zt-bench vqgpt --device cuda --steps 5"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'gpu_check: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "gpu_check: all steps passed"
