// Activations composed from elementwise ops (so every device that runs those runs these):
// leaky ReLU, ELU, softplus, log-sigmoid, Mish, hard swish and hard sigmoid, each with
// torch.nn.functional's value and its gradient at the kinks. Shape- and dtype-preserving,
// on floating tensors; 16-bit inputs are computed in f32 and rounded once.
#pragma once

#include "core/tensor.h"

namespace zt {

/// x for x > 0, negative_slope * x otherwise; the gradient at 0 is negative_slope.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// x for x > 0, alpha (e^x - 1) otherwise; the gradient at 0 is alpha.
Tensor elu(const Tensor& x, double alpha = 1.0);
/// log(1 + e^(beta x)) / beta, and x itself where beta x > threshold; the gradient is
/// sigmoid(beta x) (1 above the threshold). beta must be non-zero.
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// log(sigmoid(x)) without overflow: -log(1 + e^-x), finite for every finite x.
Tensor log_sigmoid(const Tensor& x);
/// x tanh(log(1 + e^x)).
Tensor mish(const Tensor& x);
/// x min(max(x + 3, 0), 6) / 6; the gradient is 0 for x <= -3, x / 3 + 1/2 between, 1
/// for x >= 3.
Tensor hardswish(const Tensor& x);
/// min(max(x + 3, 0), 6) / 6; the gradient is 1/6 for -3 < x < 3 and 0 elsewhere (also
/// at -3 and 3).
Tensor hardsigmoid(const Tensor& x);

}  // namespace zt
