// SGD with momentum, dampening, Nesterov and (L2) weight decay, as torch.optim.SGD:
//   g = grad + wd * p
//   buf = g (first step) | momentum * buf + (1 - dampening) * g
//   g = g + momentum * buf (nesterov) | buf
//   p -= lr * g
#pragma once

#include "optim/optimizer.h"

namespace zt::optim {

/// Options: SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-4).
struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  SGDOptions& momentum(double v) {
    momentum_ = v;
    return *this;
  }
  SGDOptions& dampening(double v) {
    dampening_ = v;
    return *this;
  }
  SGDOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  SGDOptions& nesterov(bool v) {
    nesterov_ = v;
    return *this;
  }
  double lr() const { return lr_; }
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  double weight_decay() const { return weight_decay_; }
  bool nesterov() const { return nesterov_; }

 private:
  double lr_;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;
};

/// Stochastic gradient descent; state slot "momentum_buffer" (when momentum != 0).
class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, const SGDOptions& options);
  const SGDOptions& options() const { return options_; }
  std::string kind() const override { return "SGD"; }
  std::map<std::string, double> hyper_parameters() const override;

 protected:
  void update(const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_many(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<ParamState*>& states,
                   const std::vector<Tensor>& copies) override;

 private:
  // core's ops, for tensors the fused kernel does not take; buf undefined without momentum;
  // `s`: p's own learning-rate scale and weight decay.
  void update_generic(const Tensor& p, const Tensor& g, const Tensor& buf, bool first,
                      const ParamSettings& s);

  SGDOptions options_;
};

}  // namespace zt::optim
