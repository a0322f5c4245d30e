// zt-bench: benchmarks as subcommands ("zt-bench ops", "zt-bench comm", ...). Each
// bench_<name>.cpp registers itself with ZT_BENCH, parses its options with bench::Cli
// (so `zt-bench <name> --help` prints them, with defaults, and runs nothing) and prints
// one JSON object per line.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt::bench {

using BenchFn = int (*)(const std::vector<std::string>& args);

struct Registrar {
  Registrar(const char* name, const char* help, BenchFn fn);
};

/// A benchmark's command line: "zt-bench <name>" with the registered one-line help as its
/// description, and every option's default shown in --help.
class Cli : public CLI::App {
 public:
  explicit Cli(const std::string& name);
  /// Parses the benchmark's arguments. False when the benchmark must not run: after
  /// --help (*exit_code 0, usage printed) or a bad argument (*exit_code nonzero, the
  /// error printed).
  bool parse_args(const std::vector<std::string>& args, int* exit_code);
  /// Adds the GPU math options as the apps' train keys spell them: --tf32 conv|all|none
  /// (default conv, as the apps'), --cudnn-benchmark, --cudnn-nondeterministic and
  /// --gemm-benchmark; parse_args applies them (set_tf32, set_conv_algo_policy,
  /// set_gemm_benchmark).
  void add_gpu_math_options();

 private:
  std::string tf32_;
  bool cudnn_benchmark_ = false, cudnn_nondeterministic_ = false, gemm_benchmark_ = false;
};

/// The GPU math policies in force as JSON fields (no braces): "tf32" as train.tf32 spells
/// it, "cudnn_benchmark", "cudnn_deterministic" and "gemm_benchmark"; and "blas", the
/// OpenBLAS kernels the CPU runs (cpu::use_cpu_blas_kernels: "SkylakeX", "Zen", ...).
std::string gpu_math_json();

/// Blocks until device work queued before it is done (copies one element of t to the
/// host); nothing for a CPU or undefined tensor. On every device t must hold its data (a
/// released ZeRO parameter throws).
void sync(const Tensor& t);

/// The median of v (the mean of the middle two of an even count, as the PyTorch twins'
/// statistics.median); 0 when empty.
double median(std::vector<double> v);

/// The work of one call of fn (core/work_counts.h: kernel-table dispatches; on CUDA
/// kernel launches, host synchronizations, copies and library calls) as JSON fields, e.g.
/// `"dispatches_per_step":812,"syncs_per_step":0,...`. fn runs once, and its own
/// synchronizations count: call it on a step without phase clocks.
std::string work_per_call_json(const std::function<void()>& fn);

/// Runs fn (one step) `steps` times under an ApiProfile (core/api_profile.h) and returns one
/// JSON line per library call site, most host time first (the first `shown`), each opening
/// with `fields` (e.g. `"bench":"vqtok-step","update":"zero3"`):
/// {<fields>,"api":"cudaEventRecord","at":"stream.cpp:40","calls_per_step":12.0,
///  "host_ms_per_step":0.031,"host_us_per_call":2.58}
/// then one line {<fields>,"api":"all","sites":..,"calls_per_step":..,"host_ms_per_step":..,
/// "wall_ms_per_step":..}: how much of a step's wall time the host spends inside the GPU
/// libraries, and in which calls (kernel launches themselves are KernelProfile's host time).
/// fn should end by waiting for its GPU work (sync), or the wall time is the host's alone.
std::string api_profile_json(const std::string& fields, int steps, const std::function<void()>& fn,
                             size_t shown = 25);

/// Runs fn (one step) `steps` times under a KernelProfile (core/kernel_profile.h) and
/// returns one JSON line per kernel, most time first:
/// {"bench":"<bench>","kernel":"gemm","calls_per_step":42.0,"ms_per_step":1.234,"share":0.41,
///  "host_ms_per_step":0.3,"host_us_per_call":7.1}
/// (share: of the time of all kernels; host: the host's time issuing them), then one line
/// {"bench":"<bench>","kernels":"all","ms_per_step":..,"host_ms_per_step":..,
///  "wall_ms_per_step":..} (until the GPU has run the last step's kernels). Call it after
/// the timed steps: profiling adds host time to every dispatch.
std::string kernel_profile_json(const char* bench, int steps, const std::function<void()>& fn);

/// Seconds per call of fn: warm-up calls, then the median of `reps` timed runs.
double time_per_call(const std::function<void()>& fn, int warmup = 2, int reps = 5);

}  // namespace zt::bench

/// Defines and registers a benchmark: ZT_BENCH(ops, "op timings") { ...; return 0; }
#define ZT_BENCH(name, help)                                                       \
  static int zt_bench_##name(const std::vector<std::string>& args);                \
  static ::zt::bench::Registrar zt_bench_reg_##name(#name, help, zt_bench_##name); \
  static int zt_bench_##name(const std::vector<std::string>& args)
