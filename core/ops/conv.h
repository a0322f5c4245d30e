// Convolutions. Legend: N batch, C channels, D/H/W depth (time)/height/width,
// O output channels, k kernel sizes. Padding is explicit per side so causal and
// asymmetric pads need no extra copy.
#pragma once

#include <array>

#include "core/tensor.h"

namespace zt {

struct Conv2dArgs {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 4> padding{0, 0, 0, 0};  // top, bottom, left, right
};
/// x (N, C, H, W), weight (O, C, kh, kw), bias (O) or undefined -> (N, O, H', W').
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dArgs& args = {});

struct Conv3dArgs {
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 6> padding{0, 0, 0, 0, 0, 0};  // front, back, top, bottom, left, right
};
/// x (N, C, D, H, W), weight (O, C, kd, kh, kw), bias (O) or undefined -> (N, O, D', H', W').
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv3dArgs& args = {});

}  // namespace zt
