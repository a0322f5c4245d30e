// Parameter initialization, as torch.nn.init: every function fills a tensor in place
// (not recorded by autograd) from a seeded generator, by default this thread's
// zt::default_generator(), so two models built after the same manual_seed() are
// identical. Layers call these on a fresh tensor BEFORE registering it, so a
// partitioning scope sees the final initial value at registration.
#pragma once

#include <string>
#include <utility>

#include "core/ops.h"

namespace zt::nn::init {

/// (fan_in, fan_out) of a weight (O, I, *k): fan_in = I * prod(k), fan_out = O * prod(k).
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
/// The recommended gain for a nonlinearity: "linear", "conv*", "sigmoid" -> 1, "tanh" ->
/// 5/3, "relu" -> sqrt(2), "leaky_relu" -> sqrt(2 / (1 + param^2)), "selu" -> 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

/// U[lo, hi).
void uniform_(const Tensor& t, double lo = 0.0, double hi = 1.0,
              Generator& g = default_generator());
/// N(mean, std).
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0,
             Generator& g = default_generator());
/// Every element = value.
void constant_(const Tensor& t, double value);
/// Every element = 0.
void zeros_(const Tensor& t);
/// Every element = 1.
void ones_(const Tensor& t);

/// Kaiming (He) uniform: U(-b, b), b = gain * sqrt(3 / fan), fan per `mode` ("fan_in" or
/// "fan_out"), gain = calculate_gain(nonlinearity, a). PyTorch's Linear/Conv default is
/// kaiming_uniform_(w, sqrt(5)), i.e. b = 1 / sqrt(fan_in).
void kaiming_uniform_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                      const std::string& nonlinearity = "leaky_relu",
                      Generator& g = default_generator());
/// Kaiming (He) normal: N(0, gain / sqrt(fan)).
void kaiming_normal_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                     const std::string& nonlinearity = "leaky_relu",
                     Generator& g = default_generator());
/// Xavier (Glorot) uniform: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator& g = default_generator());
/// Xavier (Glorot) normal: N(0, gain * sqrt(2 / (fan_in + fan_out))).
void xavier_normal_(const Tensor& t, double gain = 1.0, Generator& g = default_generator());

/// PyTorch's default for Linear/Conv: weight kaiming_uniform_(a = sqrt(5)) and, if `bias`
/// is defined, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (weight first, then bias).
void default_linear_init_(const Tensor& weight, const Tensor& bias,
                          Generator& g = default_generator());

/// The bias half of default_linear_init_: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in
/// from `weight`'s shape (its data is not read, so the weight may already be partitioned).
void default_bias_init_(const Tensor& bias, const Tensor& weight,
                        Generator& g = default_generator());

}  // namespace zt::nn::init
