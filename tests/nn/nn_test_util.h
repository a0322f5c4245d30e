// Helpers shared by the nn tests that compare against embedded reference values.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace zt::nn_test {

/// sin(a i + b) for i = 0, 1, ... in row-major order: inputs both sides can rebuild.
inline Tensor seq(const Shape& sizes, double a, double b, DType dt = DType::f64) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(a * i + b);
  return from_vector(v, sizes, dt);
}

/// The names of `named`, in order.
inline std::vector<std::string> keys(const NamedTensors& named) {
  std::vector<std::string> k;
  for (const auto& [name, t] : named) k.push_back(name);
  return k;
}

}  // namespace zt::nn_test
