// Linear: y = x W^T + b. Legend: F_in input features, F_out output features.
#pragma once

#include "nn/module.h"
#include "nn/options.h"

namespace zt::nn {

/// Options for Linear: LinearOptions(in, out).bias(false); .gelu_tanh(true) applies the
/// tanh-approximation GELU to the output in the same op (linear_gelu: fused into the
/// GEMM's epilogue).
struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  ZT_ARG(int64_t, in_features);
  ZT_ARG(int64_t, out_features);
  ZT_ARG(bool, bias) = true;
  ZT_ARG(bool, gelu_tanh) = false;
};

/// x (..., F_in) -> (..., F_out). weight (F_out, F_in), bias (F_out); PyTorch's default
/// init (kaiming_uniform(a = sqrt(5)), bias U(+-1/sqrt(F_in))).
class Linear : public UnaryModule {
 public:
  explicit Linear(const LinearOptions& options);
  Linear(int64_t in_features, int64_t out_features)
      : Linear(LinearOptions(in_features, out_features)) {}
  /// Re-draws weight and bias in place from the default generator.
  void reset_parameters();
  std::string extra_repr() const override;

  LinearOptions options;
  Tensor weight;  // (F_out, F_in)
  Tensor bias;    // (F_out) or undefined

 protected:
  Tensor forward(const Tensor& x) override;
};

/// Returns its input unchanged.
class Identity : public UnaryModule {
 public:
  Identity() : UnaryModule("Identity") {}

 protected:
  Tensor forward(const Tensor& x) override { return x; }
};

/// Flattens dims [start_dim, end_dim] into one: (N, C, H, W) -> (N, C*H*W) by default.
class Flatten : public UnaryModule {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : UnaryModule("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  std::string extra_repr() const override;

 protected:
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim_, end_dim_); }

 private:
  int64_t start_dim_, end_dim_;
};

}  // namespace zt::nn
