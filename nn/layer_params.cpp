// register_weight_and_bias: a layer's weight and optional bias, initialized and
// registered in the order a partitioning scope needs.
#include "nn/layer_params.h"

#include "nn/init.h"

namespace zt::nn {

std::pair<Tensor, Tensor> register_weight_and_bias(Module& m, const Shape& weight_shape, bool bias,
                                                   int64_t bias_size) {
  Tensor w = empty(weight_shape);
  init::default_linear_init_(w, Tensor());
  const Tensor weight = m.register_parameter("weight", w);
  if (!bias) return {weight, Tensor()};
  Tensor b = empty({bias_size >= 0 ? bias_size : weight_shape[0]});
  init::default_bias_init_(b, weight);
  return {weight, m.register_parameter("bias", b)};
}

}  // namespace zt::nn
