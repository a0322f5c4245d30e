// Convolutions. Legend: N batch, C channels, D/H/W depth (time)/height/width,
// O output channels, k kernel sizes. Padding is explicit per side so causal and
// asymmetric pads need no extra copy.
#pragma once

#include <array>

#include "core/tensor.h"

namespace zt {

struct Conv1dArgs {
  std::array<int64_t, 1> stride{1};
  std::array<int64_t, 2> padding{0, 0};  // left, right
  std::array<int64_t, 1> dilation{1};
  int64_t groups = 1;
};

/// x (N, C, L), weight (O, C/G, k), bias (O) or undefined -> (N, O, L'): conv2d's W axis
/// alone. The weight is used as given (no view of it is kept), so a ZeRO engine frees a
/// gathered weight after forward as it does a 2-D one's.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv1dArgs& args = {});

struct Conv2dArgs {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 4> padding{0, 0, 0, 0};  // top, bottom, left, right
  std::array<int64_t, 2> dilation{1, 1};       // spacing of the kernel's taps
  int64_t groups = 1;                          // see below
};
/// x (N, C, H, W), weight (O, C/G, kh, kw), bias (O) or undefined -> (N, O, H', W').
/// With G = groups > 1 (C and O divisible by G), output channels [i*O/G, (i+1)*O/G) see
/// only input channels [i*C/G, (i+1)*C/G) (G = C = O: a depthwise convolution).
/// H' = (H + top + bottom - dilation * (kh - 1) - 1) / stride + 1, as W'.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dArgs& args = {});

struct Conv3dArgs {
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 6> padding{0, 0, 0, 0, 0, 0};  // front, back, top, bottom, left, right
  std::array<int64_t, 3> dilation{1, 1, 1};
  int64_t groups = 1;
};
/// x (N, C, D, H, W), weight (O, C/G, kd, kh, kw), bias (O) or undefined -> (N, O, D', H',
/// W'); dilation and groups as conv2d's.
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv3dArgs& args = {});

struct ConvTranspose1dArgs {
  std::array<int64_t, 1> stride{1};
  std::array<int64_t, 1> padding{0};
  std::array<int64_t, 1> output_padding{0};
  std::array<int64_t, 1> dilation{1};
  int64_t groups = 1;
};

/// x (N, C, L), weight (C, O/G, k) -> (N, O, L'), as conv_transpose2d's W axis.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose1dArgs& args = {});

struct ConvTranspose2dArgs {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};         // removed from both sides of each axis
  std::array<int64_t, 2> output_padding{0, 0};  // at the bottom / right, < max(stride, dilation)
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};
/// The transposed convolution (the input gradient of conv2d, PyTorch's
/// conv_transpose2d): x (N, C, H, W), weight (C, O/G, kh, kw) (PyTorch's layout), bias (O)
/// or undefined -> (N, O, H', W') with
/// H' = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1, as W'.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose2dArgs& args = {});

struct ConvTranspose3dArgs {
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> padding{0, 0, 0};
  std::array<int64_t, 3> output_padding{0, 0, 0};
  std::array<int64_t, 3> dilation{1, 1, 1};
  int64_t groups = 1;
};
/// x (N, C, D, H, W), weight (C, O/G, kd, kh, kw) -> (N, O, D', H', W'), as conv_transpose2d.
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose3dArgs& args = {});

}  // namespace zt
