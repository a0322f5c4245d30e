#!/usr/bin/env bash
# The GPU check: every GPU test and GPU benchmark in one call, within 7 minutes on one
# H100 or H200 (ZT_GPU_CHECK_SECONDS, default 420: each step's limit is cut to what is left
# of it, and once nothing is left the remaining steps say SKIPPED; give the device tool's
# call about 60 s more). Build here with CUDA on, pack what it runs, and run the pack on
# the GPU machine from the repository root:
#   bash tools/gpu_pack.sh build .gpu
#   bash .gpu/run 'bash $ZT_REPO/tools/gpu_check.sh'     (device tool: carry [".gpu"], timeout 480)
# Runs inside the unpacked build (bin/, configs/). Prints each step's command, its output
# and seconds; exits 1 if any step failed, was skipped for want of time or was
# interrupted. The steps run most important first, so that a check cut short still has
# them: the GPU tests (with ZT_REQUIRE_GPU=1: a test that finds no GPU fails rather than
# skips; the NCCL tests start MPI from the Open MPI files tools/gpu_pack.sh carries), then
# what the open issues measure: the tokenizer step at batch 8 and 64, eager and from a
# CUDA graph, the bf16 GPT step, attention's tile shapes, vqgpt, the one-rank ZeRO-3
# engine's cost, cuDNN's timed algorithms, each beside PyTorch eager's same step
# (tools/bench_*_torch.py) where this machine's python3 has a PyTorch with CUDA (otherwise
# those steps say SKIPPED); then three short training runs and the diagnostics
# (per-kernel, per-module and per-call-site times, offload, GPT and attention variants).
# On SIGTERM or SIGINT the check stops the running step and still prints its summary. The
# whole log goes to $OUT/gpu_check.log when $OUT is set (the device tool returns only the
# output's tail); the tail ends with every benchmark's result line (shortened; per-kernel,
# per-module and per-call-site lines stay in the log), then each step's exit code and
# seconds (or SKIPPED and why), then the verdict.
set -u
# Every step is a single process: a launcher's variables, if this machine's environment
# happened to carry them, would make the apps start as one rank of an MPI job.
unset OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_RANK
repo=${ZT_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
export ZT_REPO=$repo # the apps' GPU tests read configs/ there
budget=${ZT_GPU_CHECK_SECONDS:-420}
start=$SECONDS
deadline=$((start + budget))
log=${OUT:+$OUT/gpu_check.log}
log=${log:-$(mktemp)}
# tee ignores TERM and INT (a signal to the whole process group would end it before the
# summary is written) and ends when the script closes its output.
exec > >(
  trap '' TERM INT
  exec tee "$log"
) 2>&1
tee_pid=$!
failed=()
late=()      # steps skipped for want of time
no_twins=()  # PyTorch twins skipped for want of PyTorch with CUDA
summary=()
current=""
step_pid=""
step_t0=0
step() {
  local limit=$1
  shift
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 3 ]; then
    echo "=== $*"
    echo "SKIPPED: the check's ${budget}s are spent"
    summary+=("SKIPPED (out of time)  $*")
    late+=("$*")
    return
  fi
  local cut=0 # the limit cut to what is left of the budget
  [ "$limit" -le "$left" ] || {
    limit=$left
    cut=1
  }
  echo "=== $* (limit ${limit}s)"
  current="$*"
  step_t0=$SECONDS
  # In the background, so that a signal to the check is handled at once (bash runs a trap
  # only between foreground commands). -k: a step that ignores SIGTERM is killed 5 s later.
  timeout -k 5 "$limit" bash -c "$*" &
  step_pid=$!
  wait "$step_pid"
  local rc=$?
  step_pid=""
  current=""
  echo "=== rc=$rc after $((SECONDS - step_t0))s"
  if [ "$cut" -eq 1 ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
    summary+=("OUT OF TIME (cut to the budget's ${limit}s)  $*")
    late+=("$*")
    return
  fi
  summary+=("rc=$rc $((SECONDS - step_t0))s/${limit}s  $*")
  [ "$rc" -eq 0 ] || failed+=("$*")
}
finish() {
  trap '' TERM INT
  # A copy: the summary's own lines go to the log as they are printed.
  local snap mark="=== results (whole lines in $log)"
  echo "$mark"
  # tee writes in order: once the mark is in the log, every earlier line is.
  for _ in $(seq 50); do
    grep -qF -- "$mark" "$log" && break
    sleep 0.1
  done
  snap=$(mktemp)
  cp "$log" "$snap"
  # Without the memory report and the attention sweep's other tile shapes, a result line
  # keeps its measurements (a gpt line's start some 500 characters in).
  grep -a '^{"bench"' "$snap" | grep -v -e '"kernel":' -e '"module":' -e '"at":' \
    -e '"default":false' | sed -E 's/,"memory":\{.*$/}/' | cut -c1-800
  rm -f "$snap"
  echo "=== summary"
  printf '%s\n' "${summary[@]}" | tr -s ' ' | cut -c1-160
  local rc=0
  [ ${#no_twins[@]} -eq 0 ] || echo "gpu_check: ${#no_twins[@]} PyTorch twin(s) SKIPPED:" \
    "no PyTorch with CUDA on this machine ($(echo "$torch_why" | tail -n 1))"
  if [ ${#late[@]} -gt 0 ]; then
    echo "gpu_check: ${#late[@]} step(s) SKIPPED or cut short: the check's ${budget}s were spent" \
      "(ZT_GPU_CHECK_SECONDS)"
    rc=1
  fi
  if [ ${#failed[@]} -gt 0 ]; then
    echo "gpu_check: ${#failed[@]} step(s) FAILED (rc other than 0 above)"
    rc=1
  elif [ $rc -eq 0 ] && [ ${#no_twins[@]} -eq 0 ]; then
    echo "gpu_check: every step ran and passed"
  elif [ $rc -eq 0 ]; then # skipped twins leave the exit status 0, but not this line
    echo "gpu_check: every zt step ran and passed; the PyTorch twins did not run"
  else
    echo "gpu_check: every step that ran passed, but not every step ran"
  fi
  exec >&- 2>&-
  wait "$tee_pid" # the log is complete before the call returns
  exit $rc
}
# shellcheck disable=SC2317 # run by the traps below
on_signal() {
  trap '' TERM INT
  echo
  echo "=== gpu_check: SIG$1 after $((SECONDS - start))s"
  if [ -n "$step_pid" ]; then
    kill -TERM "$step_pid" 2> /dev/null # timeout passes it on to the step
    summary+=("rc=SIG$1 $((SECONDS - step_t0))s  $current")
    failed+=("$current (interrupted)")
  fi
  finish
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
# PyTorch loads its own CUDA libraries: the pack's LD_LIBRARY_PATH is for zt's executables.
py="env -u LD_LIBRARY_PATH python3"
has_torch_cuda=""
probe_torch() { # once, before the first twin: up to 30 s (a cold import is slow)
  local limit=$((deadline - SECONDS))
  [ "$limit" -le 30 ] || limit=30
  has_torch_cuda=no
  # It also loads cuDNN and cuBLAS once, so that the first twin's time limit is not spent
  # on the libraries' start.
  # shellcheck disable=SC2086 # $py is a command and its arguments
  if torch_why=$(timeout "$limit" $py -c 'import torch
assert torch.cuda.is_available(), "torch " + torch.__version__ + " sees no GPU"
x = torch.ones(1, 8, 8, 8, device="cuda")
torch.nn.functional.conv2d(x, torch.ones(8, 8, 3, 3, device="cuda")).sum().item()
(x[0, 0] @ x[0, 0]).sum().item()' 2>&1); then
    has_torch_cuda=yes
  elif [ $? -eq 124 ]; then
    torch_why="importing torch took over ${limit} s"
  fi
}
torch_step() { # like step, for a PyTorch twin: skipped (not failed) without PyTorch+CUDA
  # Out of time: the step says so (a probe now would blame PyTorch).
  if [ $((deadline - SECONDS)) -lt 3 ]; then
    step "$@"
    return
  fi
  [ -n "$has_torch_cuda" ] || probe_torch
  if [ "$has_torch_cuda" = yes ]; then
    step "$@"
  else
    shift
    echo "=== $*"
    echo "SKIPPED: no PyTorch with CUDA on this machine ($(echo "$torch_why" | tail -n 1))"
    summary+=("SKIPPED (no PyTorch with CUDA)  $*")
    no_twins+=("$*")
  fi
}
timeout 10 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
# The NCCL tests make their NcclComm through MPI (outside mpirun: MPI_Init as a one-process
# singleton). Open MPI needs its plugins and help files for that, and an orted unless the
# singleton is isolated; the GPU machine has no Open MPI, so tools/gpu_pack.sh carries them.
export OMPI_MCA_ess_singleton_isolated=1
if [ -f "${ZT_PACK:-/nonexistent}/../openmpi.tar.xz" ]; then
  mkdir -p /tmp/zt_openmpi && tar -C /tmp/zt_openmpi -xJf "$ZT_PACK/../openmpi.tar.xz" &&
    export OPAL_PREFIX=/tmp/zt_openmpi/openmpi OMPI_MCA_mca_base_component_show_load_errors=0 \
      LD_LIBRARY_PATH=/tmp/zt_openmpi/openmpi/lib/x86_64-linux-gnu/openmpi/lib:${LD_LIBRARY_PATH:-}
else
  echo "gpu_check: no \$ZT_PACK/../openmpi.tar.xz (tools/gpu_pack.sh): the NCCL tests abort in" \
    "MPI_Init where Open MPI is absent"
fi

# --- The tests: a test that needs a GPU fails here where it finds none.
# The cuda-labelled tests; CudaLargeTensors' take about 20 GiB of GPU memory for tensors of
# 2^31 elements, and a shape cuDNN has not seen before may compile kernels at first use.
step 40 "ZT_REQUIRE_GPU=1 bin/zt_test_cuda"
step 10 "ZT_REQUIRE_GPU=1 bin/zt_test_comm_nccl" # NcclComm on one GPU, the tokenizer over NCCL
# vqgpt (f32, bf16 curve), a bf16 GPT block, cuda_graph, the device rule and plan on a GPU
step 25 "ZT_REQUIRE_GPU=1 bin/zt_test_apps --gtest_filter='*Cuda*:*Gpu*'"

# --- What the open issues measure. The tokenizer step with cuDNN's heuristic ranking (zt's
# default), eager and captured once as a CUDA graph and replayed (train.cuda_graph).
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 30"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 20 --cuda-graph"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20 --cuda-graph"
# GPT-2 small in bf16: MFU and GPU time per kernel.
step 8 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --kernels"
# The fused attention kernels at every tile shape, their backward split and atomic.
step 10 "bin/zt-bench attention --device cuda"
step 8 "bin/zt-bench vqgpt --device cuda --steps 5"
# The same step alternating with one through a one-rank ZeRO-3 engine, in one process:
# the engine's cost (separate processes differ by more than it on the host-bound batch 8);
# then (--api) each one's host time per step inside every GPU library call site: where
# the engine's extra host time goes.
step 14 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 20 --paired --api"
step 12 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20 --paired"
# cuDNN's algorithms timed once per shape, those that sum with atomics included
# (train.cudnn_benchmark, train.cudnn_deterministic: false): the PyTorch twin's settings,
# each beside its twin. Both sides under one TF32 policy: TF32 convolutions, exact matmuls
# (zt's default, PyTorch's).
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 30 --cudnn-benchmark \
  --cudnn-nondeterministic"
torch_step 45 "$py $repo/tools/bench_vqtok_torch.py --device cuda --tf32 conv --batch 8 --steps 30"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20 --cudnn-benchmark \
  --cudnn-nondeterministic"
torch_step 34 "$py $repo/tools/bench_vqtok_torch.py --device cuda --tf32 conv --batch 64 --steps 20"
# PyTorch AMP's GPT step (autocast, fp32 weights) and SDPA's attention, same counts.
torch_step 22 "$py $repo/tools/bench_gpt_torch.py --device cuda --dtype bf16 --batch 8 --steps 5"
torch_step 15 "$py $repo/tools/bench_attention_torch.py --device cuda"

# --- As time allows. The GPT step replayed from a CUDA graph (the GPU's time alone, no host
# launch overhead).
step 12 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --cuda-graph"
# Short training runs.
step 15 "bin/vqtok train --config configs/vqtok_tiny.yaml --device cuda --set train.steps=100 \
  --set output_dir=/tmp/zt_gpu_check/f32 --overwrite"
# bf16: its first step has taken 15-19 s on a fresh machine (the same with the fused attention
# or the GEMM path; 0.065 s/step after), the limit leaves room for that. ZT_API_PROFILE prints
# the run's host time per GPU library call site at exit: which calls that first step waits in.
step 32 "ZT_API_PROFILE=1 bin/vqtok train --config configs/vqtok_tiny.yaml --device cuda --set train.dtype=bf16 \
  --set train.steps=50 --set output_dir=/tmp/zt_gpu_check/bf16 --overwrite"
step 12 "bin/vqgpt train --config configs/vqgpt_tiny.yaml --device cuda --set train.steps=100 \
  --tokenizer /tmp/zt_gpu_check/f32/checkpoints --set output_dir=/tmp/zt_gpu_check/gpt \
  --overwrite" # the tokenizer's share of the step is printed

# --- Diagnostics. Per-module forward times and GPU time per kernel (both add host waits);
# at batch 8, where the eager step is host bound, --kernels also says where the host's time
# goes (host_ms_per_step per kernel, and inside dispatches vs the whole step).
step 8 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 3 --modules --kernels"
step 8 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 3 --kernels"
# The engine on all 16 host cores, then with optimizer offload (its AdamW runs on the
# host's threads): what offload costs a step.
step 8 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 3 --threads 16 --zero"
step 8 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 3 --threads 16 --zero --offload"
# cuDNN's algorithms timed, deterministic ones only.
step 10 "bin/zt-bench vqtok-step --device cuda --batch 8 --steps 30 --cudnn-benchmark"
step 10 "bin/zt-bench vqtok-step --device cuda --batch 64 --steps 20 --cudnn-benchmark"
step 8 "bin/zt-bench ops --device cuda"
# q, k and v projected apart (three GEMMs a block, their gradients summed): what the fused
# projection saves; cuBLAS's own workspace pool.
step 8 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 3 --qkv separate"
step 8 "ZT_CUBLAS_WORKSPACE=0 bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 3"
# cuBLASLt's candidates timed once per GEMM problem (train.gemm_benchmark), every GEMM through
# cuBLASLt: the kernel lines beside the first GPT run's say what it gains per GEMM kind.
step 10 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --gemm-benchmark --kernels"
# Head dim 128 and the GPT step with the atomic backward (one pass, dq by f32 atomics):
# which to make the default.
step 8 "bin/zt-bench attention --device cuda --heads 6 --dim 128"
torch_step 12 "$py $repo/tools/bench_attention_torch.py --device cuda --heads 6 --dim 128"
step 8 "bin/zt-bench gpt --device cuda --dtype bf16 --batch 8 --steps 5 --flash-backward atomic"
# A bound for the GPT twin above, which is PyTorch AMP (fp32 weights, residual stream,
# LayerNorm and logits for the loss): the same step with bf16 weights throughout.
torch_step 20 "$py $repo/tools/bench_gpt_torch.py --device cuda --dtype bf16-pure --batch 8 --steps 5"
finish
