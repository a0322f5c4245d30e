// The causal 3-D (time) layers of the Emu3-style VQ tokenizer (docs/EMU3_TOKENIZER.md):
// CausalConv3d, TemporalResBlock (`time_res_stack.i`), TemporalDownsample and
// TemporalUpsample (`time_conv.i`). They act on latents laid out as videos.
//
// Shape legend: B batch, C channels, T frames, H/W height/width.
#pragma once

#include <array>
#include <memory>

#include "nn/nn.h"

namespace zt::vq {

/// A Conv3d that only looks back in time: zeros padded 2 frames in front and none behind
/// (for every kernel), and spatially p = k - s split (ceil(p/2), floor(p/2)) per dim. The
/// inner Conv3d (with bias) is the child `conv`, which applies the padding itself.
class CausalConv3d : public nn::UnaryModule {
 public:
  /// kernel and stride as (time, height, width).
  CausalConv3d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 3> kernel,
               std::array<int64_t, 3> stride = {1, 1, 1});

  std::shared_ptr<nn::Conv3d> conv;

 protected:
  /// x (B, C_in, T, H, W) -> (B, C_out, (T + 2 - kt) / st + 1, H / sh, W / sw).
  Tensor forward(const Tensor& x) override;
};

/// out = x + conv2(dropout(act(norm2(conv1(act(norm1(x))))))), conv1/conv2 causal 3x3x3;
/// norm1/norm2 are BatchNorm3d (eps 1e-5, momentum 0.1, tracked running statistics).
class TemporalResBlock : public nn::UnaryModule {
 public:
  TemporalResBlock(int64_t channels, double dropout);

  std::shared_ptr<nn::BatchNorm3d> norm1, norm2;
  std::shared_ptr<CausalConv3d> conv1, conv2;

 protected:
  /// x (B, C, T, H, W) -> (B, C, T, H, W).
  Tensor forward(const Tensor& x) override;

 private:
  double dropout_;
};

/// Halves T: CausalConv3d kernel (4, 3, 3), stride (2, 1, 1).
class TemporalDownsample : public nn::UnaryModule {
 public:
  TemporalDownsample(int64_t in_channels, int64_t out_channels);

  std::shared_ptr<CausalConv3d> conv;

 protected:
  /// x (B, C, T, H, W), T even -> (B, C, T/2, H, W).
  Tensor forward(const Tensor& x) override;
};

/// Doubles T: every frame repeated twice (f0, f0, f1, f1, ...), then CausalConv3d 3x3x3.
class TemporalUpsample : public nn::UnaryModule {
 public:
  TemporalUpsample(int64_t in_channels, int64_t out_channels);

  std::shared_ptr<CausalConv3d> conv;

 protected:
  /// x (B, C, T, H, W) -> (B, C, 2T, H, W).
  Tensor forward(const Tensor& x) override;
};

}  // namespace zt::vq
