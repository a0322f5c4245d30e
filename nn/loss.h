// Loss modules, each called with two inputs, loss(input, target), over core's loss ops
// (core/ops/loss.h): MSELoss, L1Loss, SmoothL1Loss, HuberLoss, CrossEntropyLoss, NLLLoss,
// BCELoss, BCEWithLogitsLoss, KLDivLoss. A Reduction picks a scalar (mean, sum) or one
// loss per position (none). Class and element weights are buffers named as PyTorch's
// state dict names them ("weight", "pos_weight"); CrossEntropyLoss keeps its in options.
#pragma once

#include "nn/module.h"
#include "nn/options.h"

namespace zt::nn {

/// A module of two inputs (prediction, target) returning a loss.
class LossModule : public Module {
 public:
  using Module::Module;
  using Module::operator();

 protected:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// (x - y)^2 per element, reduced; x, y same shape.
class MSELoss : public LossModule {
 public:
  explicit MSELoss(Reduction reduction = Reduction::kMean)
      : LossModule("MSELoss"), reduction_(reduction) {}
  std::string extra_repr() const override;

 protected:
  Tensor forward(const Tensor& x, const Tensor& y) override;

 private:
  Reduction reduction_;
};

/// |x - y| per element, reduced; x, y same shape.
class L1Loss : public LossModule {
 public:
  explicit L1Loss(Reduction reduction = Reduction::kMean)
      : LossModule("L1Loss"), reduction_(reduction) {}
  std::string extra_repr() const override;

 protected:
  Tensor forward(const Tensor& x, const Tensor& y) override;

 private:
  Reduction reduction_;
};

/// Options for SmoothL1Loss: SmoothL1LossOptions().beta(0.5).reduction(Reduction::kSum).
struct SmoothL1LossOptions {
  ZT_ARG(Reduction, reduction) = Reduction::kMean;
  /// Where the quadratic part ends (>= 0; 0 is L1Loss).
  ZT_ARG(double, beta) = 1.0;
};

/// 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = x - y), reduced.
class SmoothL1Loss : public LossModule {
 public:
  explicit SmoothL1Loss(const SmoothL1LossOptions& options = {});
  std::string extra_repr() const override;

  SmoothL1LossOptions options;

 protected:
  Tensor forward(const Tensor& x, const Tensor& y) override;
};

/// Options for HuberLoss: HuberLossOptions().delta(2.0).reduction(Reduction::kSum).
struct HuberLossOptions {
  ZT_ARG(Reduction, reduction) = Reduction::kMean;
  /// Where the quadratic part ends (> 0).
  ZT_ARG(double, delta) = 1.0;
};

/// 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere (d = x - y), reduced.
class HuberLoss : public LossModule {
 public:
  explicit HuberLoss(const HuberLossOptions& options = {});
  std::string extra_repr() const override;

  HuberLossOptions options;

 protected:
  Tensor forward(const Tensor& x, const Tensor& y) override;
};

/// logits (N, C) or (N, C, *), target i64 or i32 (N) or (N, *): mean of -log softmax at
/// the target over targets != ignore_index, weighted by options.weight[target] when given
/// (PyTorch's `weight`: the mean then divides by the kept targets' summed weights).
/// Buffer "weight" (C) when options.weight is given.
class CrossEntropyLoss : public LossModule {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100)
      : CrossEntropyLoss(CrossEntropyOptions{.ignore_index = ignore_index}) {}
  /// With class weights, label smoothing or another reduction (kNone returns one loss per
  /// position).
  explicit CrossEntropyLoss(CrossEntropyOptions options);
  std::string extra_repr() const override;

 protected:
  Tensor forward(const Tensor& logits, const Tensor& target) override;

 private:
  CrossEntropyOptions options_;
};

/// logp (N, C) or (N, C, *) log-probabilities, target i64 or i32 (N) or (N, *):
/// nll_loss. Buffer "weight" (C) when options.weight is given.
class NLLLoss : public LossModule {
 public:
  explicit NLLLoss(const NLLLossOptions& options = {});
  std::string extra_repr() const override;

  NLLLossOptions options;

 protected:
  Tensor forward(const Tensor& logp, const Tensor& target) override;
};

/// Probabilities p and targets of one shape: binary_cross_entropy. Buffer "weight" when
/// options.weight is given.
class BCELoss : public LossModule {
 public:
  explicit BCELoss(const BCELossOptions& options = {});
  std::string extra_repr() const override;

  BCELossOptions options;

 protected:
  Tensor forward(const Tensor& p, const Tensor& target) override;
};

/// Logits and targets of one shape: binary_cross_entropy_with_logits. Buffers "weight"
/// and "pos_weight" when given.
class BCEWithLogitsLoss : public LossModule {
 public:
  explicit BCEWithLogitsLoss(const BCEWithLogitsLossOptions& options = {});
  std::string extra_repr() const override;

  BCEWithLogitsLossOptions options;

 protected:
  Tensor forward(const Tensor& logits, const Tensor& target) override;
};

/// Log-probabilities and target (log-)probabilities of one shape: kl_div.
class KLDivLoss : public LossModule {
 public:
  explicit KLDivLoss(const KLDivLossOptions& options = {})
      : LossModule("KLDivLoss"), options(options) {}
  std::string extra_repr() const override;

  KLDivLossOptions options;

 protected:
  Tensor forward(const Tensor& logp, const Tensor& target) override;
};

}  // namespace zt::nn
