// Activation modules (shape-preserving): ReLU, SiLU (swish), GELU, Sigmoid, Tanh,
// LeakyReLU, ELU, Softplus, Mish, Hardswish, Hardsigmoid, and Softmax / LogSoftmax over
// one dim. Each calls its core op (core/ops/elementwise.h, core/ops/activation.h).
#pragma once

#include "nn/module.h"
#include "nn/options.h"

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

/// Options for LeakyReLU: LeakyReLUOptions().negative_slope(0.2).
struct LeakyReLUOptions {
  ZT_ARG(double, negative_slope) = 0.01;
};

/// x for x > 0, negative_slope * x otherwise.
class LeakyReLU : public UnaryModule {
 public:
  explicit LeakyReLU(const LeakyReLUOptions& options = {})
      : UnaryModule("LeakyReLU"), options(options) {}
  std::string extra_repr() const override;

  LeakyReLUOptions options;

 protected:
  Tensor forward(const Tensor& x) override { return leaky_relu(x, options.negative_slope()); }
};

/// Options for ELU: ELUOptions().alpha(1.0).
struct ELUOptions {
  ZT_ARG(double, alpha) = 1.0;
};

/// x for x > 0, alpha (e^x - 1) otherwise.
class ELU : public UnaryModule {
 public:
  explicit ELU(const ELUOptions& options = {}) : UnaryModule("ELU"), options(options) {}
  std::string extra_repr() const override;

  ELUOptions options;

 protected:
  Tensor forward(const Tensor& x) override { return elu(x, options.alpha()); }
};

/// Options for Softplus: SoftplusOptions().beta(1.0).threshold(20.0).
struct SoftplusOptions {
  ZT_ARG(double, beta) = 1.0;
  /// Above it (beta x > threshold) the output is x itself.
  ZT_ARG(double, threshold) = 20.0;
};

/// log(1 + e^(beta x)) / beta (x where beta x > threshold); beta non-zero.
class Softplus : public UnaryModule {
 public:
  explicit Softplus(const SoftplusOptions& options = {});
  std::string extra_repr() const override;

  SoftplusOptions options;

 protected:
  Tensor forward(const Tensor& x) override {
    return softplus(x, options.beta(), options.threshold());
  }
};

/// x tanh(softplus(x)).
class Mish : public UnaryModule {
 public:
  Mish() : UnaryModule("Mish") {}

 protected:
  Tensor forward(const Tensor& x) override { return mish(x); }
};

/// x relu6(x + 3) / 6.
class Hardswish : public UnaryModule {
 public:
  Hardswish() : UnaryModule("Hardswish") {}

 protected:
  Tensor forward(const Tensor& x) override { return hardswish(x); }
};

/// relu6(x + 3) / 6.
class Hardsigmoid : public UnaryModule {
 public:
  Hardsigmoid() : UnaryModule("Hardsigmoid") {}

 protected:
  Tensor forward(const Tensor& x) override { return hardsigmoid(x); }
};

/// Options for Softmax and LogSoftmax: SoftmaxOptions(dim); a negative dim counts from
/// the last.
struct SoftmaxOptions {
  /* implicit */ SoftmaxOptions(int64_t dim) : dim_(dim) {}
  ZT_ARG(int64_t, dim);
};

/// softmax along options.dim(): x's shape, each slice along dim sums to 1.
class Softmax : public UnaryModule {
 public:
  explicit Softmax(const SoftmaxOptions& options) : UnaryModule("Softmax"), options(options) {}
  std::string extra_repr() const override;

  SoftmaxOptions options;

 protected:
  Tensor forward(const Tensor& x) override { return softmax(x, options.dim()); }
};

/// log(softmax(x)) along options.dim(), computed stably.
class LogSoftmax : public UnaryModule {
 public:
  explicit LogSoftmax(const SoftmaxOptions& options)
      : UnaryModule("LogSoftmax"), options(options) {}
  std::string extra_repr() const override;

  SoftmaxOptions options;

 protected:
  Tensor forward(const Tensor& x) override { return log_softmax(x, options.dim()); }
};

}  // namespace zt::nn
