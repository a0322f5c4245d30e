// Linear, Identity and Flatten.
#include "nn/linear.h"

#include <tuple>

#include "nn/init.h"
#include "nn/layer_params.h"

namespace zt::nn {

Linear::Linear(const LinearOptions& opts) : UnaryModule("Linear"), options(opts) {
  ZT_CHECK(opts.in_features() > 0 && opts.out_features() > 0,
           "Linear: in_features and out_features must be positive, got ", opts.in_features(),
           " and ", opts.out_features());
  std::tie(weight, bias) =
      register_weight_and_bias(*this, {opts.out_features(), opts.in_features()}, opts.bias());
}

void Linear::reset_parameters() {
  autograd::NoGradGuard ng;
  init::default_linear_init_(weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(options.in_features()) +
         ", out_features=" + std::to_string(options.out_features()) +
         ", bias=" + (options.bias() ? "true" : "false") +
         (options.gelu_tanh() ? ", gelu_tanh=true" : "");
}

Tensor Linear::forward(const Tensor& x) {
  ZT_CHECK(x.dim() >= 1 && x.size(-1) == options.in_features(), "Linear(", options.in_features(),
           " -> ", options.out_features(), "): input ", shape_str(x.sizes()), " must end in ",
           options.in_features(), " features");
  return options.gelu_tanh() ? linear_gelu(x, weight, bias) : linear(x, weight, bias);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim_) + ", end_dim=" + std::to_string(end_dim_);
}

}  // namespace zt::nn
