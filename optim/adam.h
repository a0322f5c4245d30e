// Adam and AdamW, as torch.optim.Adam / AdamW (amsgrad off):
//   Adam:  g = grad + wd * p           (L2 penalty folded into the gradient)
//   AdamW: p *= 1 - lr * wd            (decoupled weight decay)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// t counts this parameter's updates; eps is added after the bias-corrected sqrt, as
// PyTorch does.
#pragma once

#include "optim/optimizer.h"

namespace zt::optim {

/// Options: AdamOptions(1e-3).betas(0.9, 0.999).eps(1e-8).weight_decay(0).
struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  AdamOptions& betas(double b1, double b2) {
    beta1_ = b1;
    beta2_ = b2;
    return *this;
  }
  AdamOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  AdamOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  double lr() const { return lr_; }
  double beta1() const { return beta1_; }
  double beta2() const { return beta2_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }

 private:
  double lr_;
  double beta1_ = 0.9, beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_ = 0.0;
};

/// AdamW's defaults: the same fields with weight_decay 0.01 (PyTorch's); chained setters
/// return AdamOptions, which AdamW accepts.
struct AdamWOptions : AdamOptions {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay(0.01); }
};

/// Adam; state slots "exp_avg", "exp_avg_sq".
class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, const AdamOptions& options) : Adam(std::move(params), options, false) {}
  const AdamOptions& options() const { return options_; }
  std::string kind() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::map<std::string, double> hyper_parameters() const override;

 protected:
  Adam(NamedTensors params, const AdamOptions& options, bool decoupled_weight_decay);
  bool slots_required() const override { return true; }
  void update(const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_many(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<ParamState*>& states,
                   const std::vector<Tensor>& copies) override;

 private:
  AdamOptions options_;
  bool decoupled_;
};

/// AdamW: Adam with decoupled weight decay. Pass AdamWOptions(lr) for PyTorch's defaults.
class AdamW : public Adam {
 public:
  AdamW(NamedTensors params, const AdamOptions& options) : Adam(std::move(params), options, true) {}
};

}  // namespace zt::optim
