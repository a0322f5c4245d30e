// The process's cuDNN and cuBLASLt algorithm policies (core/algo_policy.h).
#include "core/algo_policy.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace zt {

namespace {
// An environment switch: unset, empty or "0" is off, "1" on, anything else an error.
bool flag_from_env(const char* name) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0' || std::string(e) == "0") return false;
  ZT_CHECK(std::string(e) == "1", "environment variable ", name, "='", e, "' must be 0 or 1");
  return true;
}
std::atomic<bool>& conv_benchmark() {
  static std::atomic<bool> on{flag_from_env("ZT_CUDNN_BENCHMARK")};
  return on;
}
std::atomic<bool>& gemm_benchmark_flag() {
  static std::atomic<bool> on{flag_from_env("ZT_GEMM_BENCHMARK")};
  return on;
}
std::atomic<bool> g_conv_deterministic{true};
}  // namespace

void set_conv_algo_policy(ConvAlgoPolicy policy) {
  conv_benchmark().store(policy.benchmark);
  g_conv_deterministic.store(policy.deterministic);
}

ConvAlgoPolicy conv_algo_policy() {
  return {conv_benchmark().load(), g_conv_deterministic.load()};
}

void set_gemm_benchmark(bool on) {
  gemm_benchmark_flag().store(on);
}

bool gemm_benchmark() {
  return gemm_benchmark_flag().load();
}

}  // namespace zt
