// Activation modules: option checks and their printed form (as PyTorch prints them).
#include "nn/activation.h"

#include <sstream>

namespace zt::nn {

namespace {
// "name=value" pairs joined by ", ", values printed as a stream prints a double.
std::string options_str(std::initializer_list<std::pair<const char*, double>> kv) {
  std::ostringstream os;
  const char* sep = "";
  for (const auto& [k, v] : kv) {
    os << sep << k << "=" << v;
    sep = ", ";
  }
  return os.str();
}
}  // namespace

std::string LeakyReLU::extra_repr() const {
  return options_str({{"negative_slope", options.negative_slope()}});
}

std::string ELU::extra_repr() const {
  return options_str({{"alpha", options.alpha()}});
}

Softplus::Softplus(const SoftplusOptions& options) : UnaryModule("Softplus"), options(options) {
  ZT_CHECK(options.beta() != 0, "Softplus: beta must be non-zero");
}

std::string Softplus::extra_repr() const {
  return options_str({{"beta", options.beta()}, {"threshold", options.threshold()}});
}

std::string Softmax::extra_repr() const {
  return "dim=" + std::to_string(options.dim());
}

std::string LogSoftmax::extra_repr() const {
  return "dim=" + std::to_string(options.dim());
}

}  // namespace zt::nn
