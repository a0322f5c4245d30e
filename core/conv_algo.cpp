// The process's cuDNN algorithm policy (core/conv_algo.h).
#include "core/conv_algo.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace zt {

namespace {
bool benchmark_from_env() {
  const char* e = std::getenv("ZT_CUDNN_BENCHMARK");
  if (e == nullptr || *e == '\0' || std::string(e) == "0") return false;
  ZT_CHECK(std::string(e) == "1", "environment variable ZT_CUDNN_BENCHMARK='", e,
           "' must be 0 or 1");
  return true;
}
std::atomic<bool>& conv_benchmark() {
  static std::atomic<bool> on{benchmark_from_env()};
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

}  // namespace zt
