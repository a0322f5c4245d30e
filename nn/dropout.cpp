// Dropout module over core's dropout op.
#include "nn/dropout.h"

namespace zt::nn {

Dropout::Dropout(double p) : UnaryModule("Dropout"), p_(p) {
  ZT_CHECK(p >= 0.0 && p <= 1.0, "Dropout: p must be in [0, 1], got ", p);
}

std::string Dropout::extra_repr() const {
  return "p=" + std::to_string(p_);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  return dropout(x, p_, true);
}

}  // namespace zt::nn
