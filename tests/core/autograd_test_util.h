// What the autograd tests share: small f64 leaves that require grad.
#pragma once

#include <vector>

#include "common/test_util.h"

namespace zt::test {

/// A 1-d f64 leaf holding `values`, requiring grad.
inline Tensor leaf(const std::vector<double>& values) {
  Tensor t = from_vector(values, {static_cast<int64_t>(values.size())}, DType::f64);
  t.set_requires_grad(true);
  return t;
}

}  // namespace zt::test
