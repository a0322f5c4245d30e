// Initializers. Bounds follow torch.nn.init exactly so a model initialized here has the
// same distribution as its PyTorch twin (not the same numbers: the generators differ).
#include "nn/init.h"

#include <cmath>

namespace zt::nn::init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  ZT_CHECK(t.dim() >= 2, "fan in/out needs a tensor with at least 2 dims, got ",
           shape_str(t.sizes()), " (use uniform_/normal_ for 1-D tensors)");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "sigmoid" || nl.rfind("conv", 0) == 0) return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nl == "selu") return 0.75;
  ZT_FAIL("calculate_gain: unknown nonlinearity '", nl,
          "' (use linear, conv2d, sigmoid, tanh, relu, leaky_relu or selu)");
}

void uniform_(const Tensor& t, double lo, double hi, Generator& g) {
  ZT_CHECK(lo <= hi, "init::uniform_: lo (", lo, ") must not exceed hi (", hi, ")");
  zt::uniform_(t, lo, hi, g);
}

void normal_(const Tensor& t, double mean, double std, Generator& g) {
  ZT_CHECK(std >= 0, "init::normal_: std must be >= 0, got ", std);
  zt::normal_(t, mean, std, g);
}

// Not recorded by autograd, like the random initializers: a parameter that requires grad
// is filled in grad mode too.
void constant_(const Tensor& t, double value) {
  autograd::NoGradGuard no_grad;
  t.fill_(value);
}
void zeros_(const Tensor& t) {
  constant_(t, 0.0);
}
void ones_(const Tensor& t) {
  constant_(t, 1.0);
}

static double fan_for(const Tensor& t, const std::string& mode) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  ZT_CHECK(mode == "fan_in" || mode == "fan_out",
           "kaiming init: mode must be fan_in or fan_out, got '", mode, "'");
  int64_t fan = mode == "fan_in" ? fan_in : fan_out;
  ZT_CHECK(fan > 0, "kaiming init on a tensor with zero ", mode, ": ", shape_str(t.sizes()));
  return static_cast<double>(fan);
}

void kaiming_uniform_(const Tensor& t, double a, const std::string& mode,
                      const std::string& nonlinearity, Generator& g) {
  double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan_for(t, mode));
  zt::uniform_(t, -bound, bound, g);
}

void kaiming_normal_(const Tensor& t, double a, const std::string& mode,
                     const std::string& nonlinearity, Generator& g) {
  double std = calculate_gain(nonlinearity, a) / std::sqrt(fan_for(t, mode));
  zt::normal_(t, 0.0, std, g);
}

void xavier_uniform_(const Tensor& t, double gain, Generator& g) {
  auto [fi, fo] = fan_in_and_fan_out(t);
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fi + fo));
  zt::uniform_(t, -bound, bound, g);
}

void xavier_normal_(const Tensor& t, double gain, Generator& g) {
  auto [fi, fo] = fan_in_and_fan_out(t);
  zt::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fi + fo)), g);
}

void default_linear_init_(const Tensor& weight, const Tensor& bias, Generator& g) {
  kaiming_uniform_(weight, std::sqrt(5.0), "fan_in", "leaky_relu", g);
  if (bias.defined()) default_bias_init_(bias, weight, g);
}

void default_bias_init_(const Tensor& bias, const Tensor& weight, Generator& g) {
  int64_t fan_in = fan_in_and_fan_out(weight).first;
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  zt::uniform_(bias, -bound, bound, g);
}

}  // namespace zt::nn::init
