// Conv1d/2d/3d and ConvTranspose1d/2d/3d modules over core's conv2d/conv3d and
// conv_transpose2d/3d (the 1-D ones run as 2-D ones of height 1). Legend: N batch,
// C_in/C_out channels, L length, D/H/W depth (time)/height/width, k kernel sizes.
// A convolution's padding is symmetric per spatial dim (`padding(1)`, `padding({1, 0})`) or
// explicit per side (`explicit_padding({top, bottom, left, right})`), which covers the tokenizer's
// right/bottom Downsample pad and the causal time pad of CausalConv3d with no extra copy.
#pragma once

#include <array>
#include <initializer_list>
#include <optional>

#include "nn/module.h"
#include "nn/options.h"

namespace zt::nn {

/// N integers, given as one (repeated) or as a list of N: stride(2) == stride({2, 2}).
template <size_t N>
struct ExpandingArray {
  ExpandingArray(int64_t v) { values.fill(v); }  // NOLINT: implicit by design
  ExpandingArray(std::initializer_list<int64_t> list) {
    ZT_CHECK(list.size() == N, "expected ", N, " values, got ", list.size());
    std::copy(list.begin(), list.end(), values.begin());
  }
  ExpandingArray(const std::array<int64_t, N>& a) : values(a) {}  // NOLINT
  int64_t operator[](size_t i) const { return values[i]; }
  std::array<int64_t, N> values{};
};

/// Options for a D-dimensional convolution (D = 1, 2, 3): ConvOptions<2>(in, out, 3).stride(2).
template <size_t D>
struct ConvOptions {
  ConvOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  ZT_ARG(int64_t, in_channels);
  ZT_ARG(int64_t, out_channels);
  ZT_ARG(ExpandingArray<D>, kernel_size);
  ZT_ARG(ExpandingArray<D>, stride) = 1;
  /// Symmetric zero padding per spatial dim.
  ZT_ARG(ExpandingArray<D>, padding) = 0;
  ZT_ARG(bool, bias) = true;
  /// Spacing of the kernel's taps per spatial dim (1: adjacent).
  ZT_ARG(ExpandingArray<D>, dilation) = 1;
  /// Channel groups G dividing both channel counts: each group of C_out/G outputs sees
  /// only its group of C_in/G inputs (G = C_in = C_out: depthwise). Weight (C_out, C_in/G, *k).
  ZT_ARG(int64_t, groups) = 1;

 public:
  /// Explicit zero padding, (before, after) for each spatial dim in order: 1-D {left,
  /// right}; 2-D {top, bottom, left, right}; 3-D {front, back, top, bottom, left, right}.
  /// Overrides padding().
  ConvOptions& explicit_padding(const std::array<int64_t, 2 * D>& pads) {
    explicit_padding_ = pads;
    return *this;
  }
  const std::optional<std::array<int64_t, 2 * D>>& explicit_padding() const {
    return explicit_padding_;
  }
  /// The per-side padding actually applied (explicit, or padding() on both sides).
  std::array<int64_t, 2 * D> padding_per_side() const;

 private:
  std::optional<std::array<int64_t, 2 * D>> explicit_padding_;
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;
using Conv3dOptions = ConvOptions<3>;

/// Shared state of Conv1d/2d/3d: weight (C_out, C_in/groups, *k), bias (C_out) with PyTorch's
/// default init (kaiming_uniform(a = sqrt(5)), bias U(+-1/sqrt(fan_in))).
template <size_t D>
class ConvNd : public UnaryModule {
 public:
  ConvNd(const ConvOptions<D>& options, const char* type_name);
  /// Re-draws weight and bias in place from the default generator.
  void reset_parameters();
  std::string extra_repr() const override;

  ConvOptions<D> options;
  Tensor weight;  // (C_out, C_in/groups, *k)
  Tensor bias;    // (C_out) or undefined

 protected:
  void check_input(const Tensor& x) const;
};

/// x (N, C_in, L) -> (N, C_out, L'); weight (C_out, C_in/groups, k).
class Conv1d : public ConvNd<1> {
 public:
  explicit Conv1d(const Conv1dOptions& options) : ConvNd<1>(options, "Conv1d") {}
  Conv1d(int64_t in, int64_t out, int64_t k) : Conv1d(Conv1dOptions(in, out, k)) {}

 protected:
  Tensor forward(const Tensor& x) override;
};

/// x (N, C_in, H, W) -> (N, C_out, H', W').
class Conv2d : public ConvNd<2> {
 public:
  explicit Conv2d(const Conv2dOptions& options) : ConvNd<2>(options, "Conv2d") {}
  Conv2d(int64_t in, int64_t out, int64_t k) : Conv2d(Conv2dOptions(in, out, k)) {}

 protected:
  Tensor forward(const Tensor& x) override;
};

/// x (N, C_in, D, H, W) -> (N, C_out, D', H', W').
class Conv3d : public ConvNd<3> {
 public:
  explicit Conv3d(const Conv3dOptions& options) : ConvNd<3>(options, "Conv3d") {}
  Conv3d(int64_t in, int64_t out, int64_t k) : Conv3d(Conv3dOptions(in, out, k)) {}

 protected:
  Tensor forward(const Tensor& x) override;
};

/// Options for a D-dimensional transposed convolution (D = 1, 2, 3), PyTorch's
/// ConvTranspose{1,2,3}d: ConvTransposeOptions<2>(in, out, 4).stride(2).padding(1)
/// doubles H and W.
template <size_t D>
struct ConvTransposeOptions {
  ConvTransposeOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  ZT_ARG(int64_t, in_channels);
  ZT_ARG(int64_t, out_channels);
  ZT_ARG(ExpandingArray<D>, kernel_size);
  ZT_ARG(ExpandingArray<D>, stride) = 1;
  /// Removed from both sides of each spatial dim of the output.
  ZT_ARG(ExpandingArray<D>, padding) = 0;
  /// Added at the end of each spatial dim of the output; smaller than the stride or the
  /// dilation (PyTorch's bound).
  ZT_ARG(ExpandingArray<D>, output_padding) = 0;
  ZT_ARG(int64_t, groups) = 1;
  ZT_ARG(bool, bias) = true;
  ZT_ARG(ExpandingArray<D>, dilation) = 1;
};
using ConvTranspose1dOptions = ConvTransposeOptions<1>;
using ConvTranspose2dOptions = ConvTransposeOptions<2>;
using ConvTranspose3dOptions = ConvTransposeOptions<3>;

/// Shared state of ConvTranspose1d/2d/3d: weight (C_in, C_out/groups, *k) and bias (C_out),
/// PyTorch's layout and default init (fan_in = C_out/groups * prod(k)). Output size per
/// spatial dim: (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
template <size_t D>
class ConvTransposeNd : public UnaryModule {
 public:
  ConvTransposeNd(const ConvTransposeOptions<D>& options, const char* type_name);
  /// Re-draws weight and bias in place from the default generator.
  void reset_parameters();
  std::string extra_repr() const override;

  ConvTransposeOptions<D> options;
  Tensor weight;  // (C_in, C_out/groups, *k)
  Tensor bias;    // (C_out) or undefined

 protected:
  Tensor forward(const Tensor& x) override;
};

/// x (N, C_in, L) -> (N, C_out, L').
class ConvTranspose1d : public ConvTransposeNd<1> {
 public:
  explicit ConvTranspose1d(const ConvTranspose1dOptions& options)
      : ConvTransposeNd<1>(options, "ConvTranspose1d") {}
};

/// x (N, C_in, H, W) -> (N, C_out, H', W').
class ConvTranspose2d : public ConvTransposeNd<2> {
 public:
  explicit ConvTranspose2d(const ConvTranspose2dOptions& options)
      : ConvTransposeNd<2>(options, "ConvTranspose2d") {}
};

/// x (N, C_in, D, H, W) -> (N, C_out, D', H', W').
class ConvTranspose3d : public ConvTransposeNd<3> {
 public:
  explicit ConvTranspose3d(const ConvTranspose3dOptions& options)
      : ConvTransposeNd<3>(options, "ConvTranspose3d") {}
};

}  // namespace zt::nn
