// Activation modules (elementwise, shape-preserving): ReLU, SiLU (swish), GELU,
// Sigmoid, Tanh.
#pragma once

#include "nn/module.h"

namespace zt::nn {

/// max(x, 0).
class ReLU : public UnaryModule {
 public:
  ReLU() : UnaryModule("ReLU") {}

 protected:
  Tensor forward(const Tensor& x) override { return relu(x); }
};

/// x * sigmoid(x), a.k.a. swish.
class SiLU : public UnaryModule {
 public:
  SiLU() : UnaryModule("SiLU") {}

 protected:
  Tensor forward(const Tensor& x) override { return silu(x); }
};

/// x * Phi(x) (erf form), or the tanh approximation when `tanh_approx`.
class GELU : public UnaryModule {
 public:
  explicit GELU(bool tanh_approx = false) : UnaryModule("GELU"), tanh_approx_(tanh_approx) {}
  std::string extra_repr() const override { return tanh_approx_ ? "approximate=tanh" : ""; }

 protected:
  Tensor forward(const Tensor& x) override { return gelu(x, tanh_approx_); }

 private:
  bool tanh_approx_;
};

/// 1 / (1 + exp(-x)).
class Sigmoid : public UnaryModule {
 public:
  Sigmoid() : UnaryModule("Sigmoid") {}

 protected:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};

/// tanh(x).
class Tanh : public UnaryModule {
 public:
  Tanh() : UnaryModule("Tanh") {}

 protected:
  Tensor forward(const Tensor& x) override { return tanh(x); }
};

}  // namespace zt::nn
