// Loss modules over core's loss ops, with shape checks that name both shapes.
#include "nn/loss.h"

namespace zt::nn {

std::vector<Tensor> LossModule::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 2, type_name(), " takes (input, target), got ", inputs.size(),
           " inputs");
  return {forward(inputs[0], inputs[1])};
}

Tensor MSELoss::forward(const Tensor& x, const Tensor& y) {
  ZT_CHECK(x.sizes() == y.sizes(), "MSELoss: input ", shape_str(x.sizes()), " and target ",
           shape_str(y.sizes()), " must have the same shape");
  return mse_loss(x, y);
}

Tensor L1Loss::forward(const Tensor& x, const Tensor& y) {
  ZT_CHECK(x.sizes() == y.sizes(), "L1Loss: input ", shape_str(x.sizes()), " and target ",
           shape_str(y.sizes()), " must have the same shape");
  return l1_loss(x, y);
}

std::string CrossEntropyLoss::extra_repr() const {
  static const char* const reductions[] = {"mean", "sum", "none"};
  std::string s = "ignore_index=" + std::to_string(options_.ignore_index);
  if (options_.label_smoothing != 0)
    s += ", label_smoothing=" + std::to_string(options_.label_smoothing);
  if (options_.reduction != Reduction::kMean)
    s += std::string(", reduction=") + reductions[static_cast<int>(options_.reduction)];
  if (options_.weight.defined()) s += ", weight=" + options_.weight.str();
  return s;
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& target) {
  ZT_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32,
           "CrossEntropyLoss: target must hold class indices (i64 or i32), got ",
           dtype_name(target.dtype()));
  bool ok =
      logits.dim() >= 2 && target.dim() == logits.dim() - 1 && target.size(0) == logits.size(0);
  for (int64_t d = 2; ok && d < logits.dim(); ++d) ok = target.size(d - 1) == logits.size(d);
  ZT_CHECK(ok, "CrossEntropyLoss: logits ", shape_str(logits.sizes()), " (N, C, *) and target ",
           shape_str(target.sizes()), " (N, *) do not match");
  return cross_entropy(logits, target, options_);
}

}  // namespace zt::nn
