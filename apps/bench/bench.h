// zt-bench: benchmarks as subcommands ("zt-bench ops", "zt-bench comm", ...). Each
// bench_<name>.cpp registers itself with ZT_BENCH and prints one JSON object per line.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt::bench {

using BenchFn = int (*)(const std::vector<std::string>& args);

struct Registrar {
  Registrar(const char* name, const char* help, BenchFn fn);
};

/// Blocks until device work queued before it is done (copies one element of t to the
/// host); nothing for a CPU or undefined tensor.
void sync(const Tensor& t);

/// Seconds per call of fn: warm-up calls, then the median of `reps` timed runs.
double time_per_call(const std::function<void()>& fn, int warmup = 2, int reps = 5);

}  // namespace zt::bench

/// Defines and registers a benchmark: ZT_BENCH(ops, "op timings") { ...; return 0; }
#define ZT_BENCH(name, help)                                                       \
  static int zt_bench_##name(const std::vector<std::string>& args);                \
  static ::zt::bench::Registrar zt_bench_reg_##name(#name, help, zt_bench_##name); \
  static int zt_bench_##name(const std::vector<std::string>& args)
