// Loss modules: MSELoss, L1Loss, CrossEntropyLoss. Each is called with two inputs,
// loss(prediction, target), and returns a scalar (the mean; CrossEntropyLoss also takes
// class weights, label smoothing and the sum, or one loss per position).
#pragma once

#include "nn/module.h"

namespace zt::nn {

/// A module of two inputs (prediction, target) returning a scalar loss.
class LossModule : public Module {
 public:
  using Module::Module;
  using Module::operator();

 protected:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// mean((x - y)^2); x, y same shape.
class MSELoss : public LossModule {
 public:
  MSELoss() : LossModule("MSELoss") {}

 protected:
  Tensor forward(const Tensor& x, const Tensor& y) override;
};

/// mean(|x - y|); x, y same shape.
class L1Loss : public LossModule {
 public:
  L1Loss() : LossModule("L1Loss") {}

 protected:
  Tensor forward(const Tensor& x, const Tensor& y) override;
};

/// logits (N, C) or (N, C, *), target i64 or i32 (N) or (N, *): mean of -log softmax at
/// the target over targets != ignore_index, weighted by options.weight[target] when given
/// (PyTorch's `weight`: the mean then divides by the kept targets' summed weights).
class CrossEntropyLoss : public LossModule {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100)
      : CrossEntropyLoss(CrossEntropyOptions{.ignore_index = ignore_index}) {}
  /// With class weights, label smoothing or another reduction (kNone returns one loss per
  /// position).
  explicit CrossEntropyLoss(CrossEntropyOptions options)
      : LossModule("CrossEntropyLoss"), options_(options) {}
  std::string extra_repr() const override;

 protected:
  Tensor forward(const Tensor& logits, const Tensor& target) override;

 private:
  CrossEntropyOptions options_;
};

}  // namespace zt::nn
