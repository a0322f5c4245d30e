// Parameter creation shared by the layers with a weight and an optional bias (Linear,
// the convolutions): PyTorch's default initialization, and the registration order that a
// partitioning scope relies on.
#pragma once

#include <utility>

#include "nn/module.h"

namespace zt::nn {

/// Creates, initializes and registers on `m` a "weight" of `weight_shape` (out, in, *k)
/// and, with `bias`, a "bias" of `bias_size` elements (default: out), as
/// init::default_linear_init_ does: each tensor is filled before it is registered, and the
/// weight is registered before the bias is created, so inside a partitioning scope (which
/// shards at registration) at most one full parameter exists at a time. Returns the
/// registered (weight, bias); the bias is undefined without one. (A transposed
/// convolution's weight is (in, out/groups, *k), its bias (out).)
std::pair<Tensor, Tensor> register_weight_and_bias(Module& m, const Shape& weight_shape, bool bias,
                                                   int64_t bias_size = -1);

}  // namespace zt::nn
