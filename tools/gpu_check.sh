#!/usr/bin/env bash
# The GPU check: every GPU test and GPU benchmark in one call, within 8 minutes on one
# H200 (each step has its own time limit; they add up to under 8 minutes). Build here with
# CUDA on, pack the build, and run the pack on the GPU machine from the repository root:
#   ../shared/tools/gpu-pack build .gpu
#   bash .gpu/run 'bash $ZT_REPO/tools/gpu_check.sh'          (device tool, carry [".gpu"])
# Runs inside the unpacked build (bin/, configs/). Prints each step's command, its output
# and seconds; exits 1 if any step failed or ran out of time. After the zt benchmarks,
# PyTorch eager runs the same models (tools/bench_*_torch.py) for side-by-side numbers,
# where this machine's python3 has a PyTorch with CUDA; otherwise those steps say SKIPPED.
# The --offload runs show what optimizer offload costs a step, beside the same runs without.
# The whole log goes to $OUT/gpu_check.log when $OUT is set (the device tool returns
# only the output's tail); the tail ends with a summary: each step's exit code and
# seconds, then every benchmark's result line (shortened; per-kernel, per-module and
# per-call-site lines stay in the log).
set -u
# Every step is a single process: a launcher's variables, if this machine's environment
# happened to carry them, would make the apps start as one rank of an MPI job.
unset OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_RANK
repo=${ZT_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
log=${OUT:+$OUT/gpu_check.log}
log=${log:-$(mktemp)}
exec > >(tee "$log") 2>&1
tee_pid=$!
failed=()
summary=()
step() {
  local limit=$1
  shift
  echo "=== $* (limit ${limit}s)"
  local t0=$SECONDS
  timeout -k 5 "$limit" bash -c "$*"  # -k: a step that ignores SIGTERM is killed 5 s later
  local rc=$?
  echo "=== rc=$rc after $((SECONDS - t0))s"
  summary+=("rc=$rc $((SECONDS - t0))s/${limit}s  $*")
  [ "$rc" -eq 0 ] || failed+=("$*")
}
# PyTorch loads its own CUDA libraries: the pack's LD_LIBRARY_PATH is for zt's executables.
py="env -u LD_LIBRARY_PATH python3"
has_torch_cuda=no   # the check's 20 s count in the 8 minutes (a cold import is slow)
if torch_why=$(timeout 20 $py -c 'import torch
assert torch.cuda.is_available(), "torch " + torch.__version__ + " sees no GPU"' 2>&1); then
  has_torch_cuda=yes
elif [ $? -eq 124 ]; then
  torch_why="importing torch took over 20 s"
fi
torch_step() {  # like step, for a PyTorch twin: skipped (not failed) without PyTorch+CUDA
  if [ "$has_torch_cuda" = yes ]; then
    step "$@"
  else
    shift
    echo "=== $*"
    echo "SKIPPED: no PyTorch with CUDA on this machine ($(echo "$torch_why" | tail -n 1))"
  fi
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
step 25 "bin/zt_test_cuda"                  # the cuda-labelled tests (they skip without a GPU)
step 8 "bin/zt_test_comm_nccl"             # NcclComm on one GPU, the tokenizer over NCCL
step 15 "bin/zt_test_apps --gtest_filter='*Cuda*:*Gpu*'"  # vqgpt (f32, bf16 curve), a bf16 GPT block, cuda_graph
step 8 "bin/zt-bench ops --device cuda"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 30"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20"
# The same step alternating with one through a one-rank ZeRO-3 engine, in one process: the
# engine's cost (separate processes differ by more than it on the host-bound batch 8); then
# (--api) each one's host time per step inside every GPU library call site: where the
# engine's extra host time goes.
step 14 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 20 --paired --api"
step 12 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20 --paired"
# cuDNN algorithms timed once per shape (train.cudnn_benchmark), then also among those that
# sum with atomics (train.cudnn_deterministic: false): the PyTorch twins' settings below.
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 30 --cudnn-benchmark"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20 --cudnn-benchmark"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 30 --cudnn-benchmark \
  --cudnn-nondeterministic"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20 --cudnn-benchmark \
  --cudnn-nondeterministic"
# The same with per-module forward times and GPU time per kernel (both add host waits); at
# batch 8, where the eager step is host bound, --kernels also says where the host's time goes
# (host_ms_per_step per kernel, and inside dispatches vs the whole step).
step 8 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 3 --modules --kernels"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 3 --kernels"
# The pair on all 16 host cores: offload's AdamW runs on the host's threads.
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 3 --threads 16 --zero"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 3 --threads 16 --zero --offload"
# The step captured once as a CUDA graph and replayed (train.cuda_graph).
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 20 --cuda-graph"
# Both sides under one TF32 policy: TF32 convolutions, exact matmuls (zt's default, PyTorch's);
# PyTorch with cudnn.benchmark on and cudnn.deterministic off.
torch_step 40 "$py $repo/tools/bench_vqtok_torch.py --device cuda --tf32 conv --batch 8 --steps 30"
torch_step 34 "$py $repo/tools/bench_vqtok_torch.py --device cuda --tf32 conv --batch 64 --steps 20"
step 8 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --kernels"  # GPT-2 small, MFU
# The same with q, k and v projected apart (three GEMMs a block, their gradients summed):
# what the fused projection saves.
step 8 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 3 --qkv separate"
step 8 "ZT_CUBLAS_WORKSPACE=0 bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 3"  # cuBLAS's own pool
# cuBLASLt's candidates timed once per GEMM problem (train.gemm_benchmark), every GEMM through
# cuBLASLt: the kernel lines beside the first run's say what it gains per GEMM kind.
step 10 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --gemm-benchmark --kernels"
# Replayed from a CUDA graph: the GPU's time alone, no host launch overhead.
step 12 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --cuda-graph"
torch_step 22 "$py $repo/tools/bench_gpt_torch.py --device cuda --dtype bf16 --batch 8 --steps 5"
# The fused attention kernels at every tile shape, their backward split and atomic (GPT-2
# small's attention, then head dim 128), and the GPT step with the atomic backward (one
# pass, dq by f32 atomics): which to make the default.
step 12 "bin/zt-bench attention --device cuda"
torch_step 20 "$py $repo/tools/bench_attention_torch.py --device cuda"  # PyTorch's SDPA, same count
step 10 "bin/zt-bench attention --device cuda --heads 6 --dim 128"
step 10 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --flash-backward atomic"
step 15 "bin/vqtok train --config configs/vqtok_tiny.yaml --device cuda --set train.steps=100 \
  --set output_dir=/tmp/zt_gpu_check/f32 --overwrite"
# bf16: its first step has taken 15-19 s on a fresh machine (the same with the fused attention
# or the GEMM path; 0.065 s/step after), the limit leaves room for that. ZT_API_PROFILE prints
# the run's host time per GPU library call site at exit: which calls that first step waits in.
step 32 "ZT_API_PROFILE=1 bin/vqtok train --config configs/vqtok_tiny.yaml --device cuda --set train.dtype=bf16 \
  --set train.steps=50 --set output_dir=/tmp/zt_gpu_check/bf16 --overwrite"
step 12 "bin/vqgpt train --config configs/vqgpt_tiny.yaml --device cuda --set train.steps=100 \
  --tokenizer /tmp/zt_gpu_check/f32/checkpoints --set output_dir=/tmp/zt_gpu_check/gpt \
  --overwrite"                               # the tokenizer's share of the step is printed
step 10 "bin/zt-bench vqgpt --device cuda --steps 5"
echo "=== summary (full log: $log)"
printf '%s\n' "${summary[@]}" | cut -c1-160
grep -a '^{"bench"' "$log" | grep -v -e '"kernel":' -e '"module":' -e '"at":' | cut -c1-400
rc=0
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_check: ${#failed[@]} step(s) FAILED (rc other than 0 above)"
  rc=1
else
  echo "gpu_check: all steps passed"
fi
exec >&- 2>&-
wait "$tee_pid"  # the log is complete before the call returns
exit $rc
