// The 2-D building blocks of the Emu3-style VQ tokenizer (docs/EMU3_TOKENIZER.md): frames are
// processed as a batch of images. SpatialNorm, ResnetBlock, AttnBlock, Downsample and
// Upsample, plus the factories that give every convolution the released model's
// initialization. Child names are the checkpoint's state-dict key names.
//
// Shape legend: N images (batch x frames), C channels, H/W height/width, E zq channels
// (embed_dim), h/w zq's height/width (any; zq is resized to H, W).
#pragma once

#include <memory>

#include "nn/nn.h"

namespace zt::vq {

/// GroupNorm groups and eps of every 2-D norm of the tokenizer.
constexpr int64_t kNormGroups = 32;
constexpr double kNormEps = 1e-6;

/// A Conv2d/Conv3d initialized as the released model: weight kaiming normal (mode fan_out,
/// relu gain), bias PyTorch's default U(+-1/sqrt(fan_in)); both from
/// zt::default_generator() and final before they are registered (a partitioning scope
/// sees the initial value). init_gain multiplies the initial weight (ModelConfig::
/// out_init_scale for the convs that end a residual branch or the decoder).
std::shared_ptr<nn::Conv2d> make_conv2d(const nn::Conv2dOptions& options, double init_gain = 1.0);
std::shared_ptr<nn::Conv3d> make_conv3d(const nn::Conv3dOptions& options);
/// GroupNorm(32, channels, eps 1e-6, affine), with the SiLU after it fused in if `silu`;
/// error if channels is not a multiple of 32.
std::shared_ptr<nn::GroupNorm> make_group_norm(int64_t channels, const char* where,
                                               bool silu = false);

/// zq (N, E, h, w) resized (nearest) to x's H, W; zq itself when they match.
Tensor resized_like(const Tensor& zq, const Tensor& x);

/// Calls m through its call() entry point as m(x) when zq is undefined (encoder: GroupNorm
/// norms) or as m(x, zq) (decoder: SpatialNorm norms and the blocks holding them).
Tensor call_conditioned(nn::Module& m, const Tensor& x, const Tensor& zq);

/// zq-conditioned GroupNorm of the decoder: GN(x) * conv_y(zq') + conv_b(zq'), where zq'
/// is zq resized (nearest) to x's H, W; with `silu`, the SiLU after it too. The product,
/// sum and SiLU run in the GroupNorm's kernels (its epilogue). Keys: norm_layer, conv_y,
/// conv_b.
class SpatialNorm : public nn::Module {
 public:
  SpatialNorm(int64_t channels, int64_t zq_channels, bool silu = false);
  std::string extra_repr() const override;

  std::shared_ptr<nn::GroupNorm> norm_layer;   // GroupNorm(32, C)
  std::shared_ptr<nn::Conv2d> conv_y, conv_b;  // 1x1, E -> C

 protected:
  /// {x (N, C, H, W), zq (N, E, h, w)} -> {(N, C, H, W)}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// h = conv1(act(norm1(x))); h = conv2(dropout(act(norm2(h)))); out = shortcut(x) + h;
/// act (SiLU) runs inside the norms.
/// norm1/norm2 are GroupNorm when zq_channels == 0 (encoder), else SpatialNorm (decoder);
/// nin_shortcut (1x1) exists only when in != out channels. conv2's initial weight is
/// scaled by out_init (1: the released init; 0: the block starts as its shortcut).
class ResnetBlock : public nn::Module {
 public:
  ResnetBlock(int64_t in_channels, int64_t out_channels, double dropout, int64_t zq_channels = 0,
              double out_init = 1.0);
  std::string extra_repr() const override;

  std::shared_ptr<nn::Module> norm1, norm2;  // GroupNorm or SpatialNorm
  std::shared_ptr<nn::Conv2d> conv1, conv2;  // 3x3 pad 1
  std::shared_ptr<nn::Conv2d> nin_shortcut;  // 1x1, or null

 protected:
  /// {x (N, C_in, H, W)} or {x, zq (N, E, h, w)} -> {(N, C_out, H, W)}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  int64_t in_channels_, out_channels_;
  double dropout_;
  bool conditioned_;  // SpatialNorm norms: takes {x, zq}
};

/// Single-head self-attention within each frame: softmax(q^T k / sqrt(C)) over the H*W
/// positions, output projected by proj_out and added to x. q, k, v, proj_out are 1x1
/// convs; norm is GroupNorm (zq_channels == 0) or SpatialNorm. proj_out's initial weight
/// is scaled by out_init.
class AttnBlock : public nn::Module {
 public:
  explicit AttnBlock(int64_t channels, int64_t zq_channels = 0, double out_init = 1.0);
  std::string extra_repr() const override;

  std::shared_ptr<nn::Module> norm;
  std::shared_ptr<nn::Conv2d> q, k, v, proj_out;

 protected:
  /// {x (N, C, H, W)} or {x, zq (N, E, h, w)} -> {(N, C, H, W)}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  int64_t channels_;
  bool conditioned_;  // SpatialNorm norm: takes {x, zq}
};

/// Zero pad right and bottom by 1, then a 3x3 stride-2 conv (no padding): H, W halve.
class Downsample : public nn::UnaryModule {
 public:
  explicit Downsample(int64_t channels);

  std::shared_ptr<nn::Conv2d> conv;

 protected:
  /// x (N, C, H, W), H and W even -> (N, C, H/2, W/2).
  Tensor forward(const Tensor& x) override;
};

/// Nearest x2, then a 3x3 conv (pad 1).
class Upsample : public nn::UnaryModule {
 public:
  explicit Upsample(int64_t channels);

  std::shared_ptr<nn::Conv2d> conv;

 protected:
  /// x (N, C, H, W) -> (N, C, 2H, 2W).
  Tensor forward(const Tensor& x) override;
};

}  // namespace zt::vq
