// Causal temporal layers. The causal pad is folded into the inner Conv3d's explicit
// per-side padding, so no padded copy of the latent is made.
#include "apps/vqtok/model/vq_temporal.h"

#include <sstream>

#include "apps/vqtok/model/vq_blocks.h"

namespace zt::vq {

// Frames padded in front of every causal conv, whatever its kernel (as the original).
constexpr int64_t kCausalFrontPad = 2;

static void check_video(const Tensor& x, int64_t channels, const char* who) {
  ZT_CHECK(x.dim() == 5 && x.size(1) == channels, who, ": expected x (B, ", channels,
           ", T, H, W), got ", shape_str(x.sizes()));
}

CausalConv3d::CausalConv3d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 3> kernel,
                           std::array<int64_t, 3> stride)
    : nn::UnaryModule("CausalConv3d") {
  std::array<int64_t, 6> pads{kCausalFrontPad, 0, 0, 0, 0, 0};  // front, back, top, ...
  for (size_t d = 1; d < 3; ++d) {
    int64_t p = kernel[d] - stride[d];
    ZT_CHECK(p >= 0, "CausalConv3d: kernel ", kernel[d], " smaller than stride ", stride[d]);
    pads[2 * d] = (p + 1) / 2;  // ceil
    pads[2 * d + 1] = p / 2;    // floor
  }
  conv = register_module("conv", make_conv3d(nn::Conv3dOptions(in_channels, out_channels,
                                                               {kernel[0], kernel[1], kernel[2]})
                                                 .stride({stride[0], stride[1], stride[2]})
                                                 .explicit_padding(pads)));
}

Tensor CausalConv3d::forward(const Tensor& x) {
  check_video(x, conv->options.in_channels(), "CausalConv3d");
  ZT_CHECK(x.size(2) + kCausalFrontPad >= conv->options.kernel_size()[0],
           "CausalConv3d: ", x.size(2), " frames are too few for a temporal kernel of ",
           conv->options.kernel_size()[0]);
  return (*conv)(x);
}

TemporalResBlock::TemporalResBlock(int64_t channels, double dropout)
    : nn::UnaryModule("TemporalResBlock"), dropout_(dropout) {
  ZT_CHECK(dropout >= 0 && dropout < 1, "TemporalResBlock: dropout must be in [0, 1), got ",
           dropout);
  auto bn = [channels] {
    return std::make_shared<nn::BatchNorm3d>(
        nn::BatchNormOptions(channels).eps(1e-5).momentum(0.1));
  };
  norm1 = register_module("norm1", bn());
  conv1 = register_module(
      "conv1", std::make_shared<CausalConv3d>(channels, channels, std::array<int64_t, 3>{3, 3, 3}));
  norm2 = register_module("norm2", bn());
  conv2 = register_module(
      "conv2", std::make_shared<CausalConv3d>(channels, channels, std::array<int64_t, 3>{3, 3, 3}));
}

Tensor TemporalResBlock::forward(const Tensor& x) {
  check_video(x, norm1->options.num_features(), "TemporalResBlock");
  Tensor h = (*conv1)(silu((*norm1)(x)));
  h = silu((*norm2)(h));
  if (dropout_ > 0) h = dropout(h, dropout_, is_training());
  return x + (*conv2)(h);
}

TemporalDownsample::TemporalDownsample(int64_t in_channels, int64_t out_channels)
    : nn::UnaryModule("TemporalDownsample") {
  conv = register_module("conv", std::make_shared<CausalConv3d>(in_channels, out_channels,
                                                                std::array<int64_t, 3>{4, 3, 3},
                                                                std::array<int64_t, 3>{2, 1, 1}));
}

Tensor TemporalDownsample::forward(const Tensor& x) {
  check_video(x, conv->conv->options.in_channels(), "TemporalDownsample");
  ZT_CHECK(x.size(2) % 2 == 0, "TemporalDownsample: T must be even, got ", shape_str(x.sizes()),
           " (clip lengths must be multiples of temporal_downsample_factor)");
  return (*conv)(x);
}

TemporalUpsample::TemporalUpsample(int64_t in_channels, int64_t out_channels)
    : nn::UnaryModule("TemporalUpsample") {
  conv = register_module("conv", std::make_shared<CausalConv3d>(in_channels, out_channels,
                                                                std::array<int64_t, 3>{3, 3, 3}));
}

Tensor TemporalUpsample::forward(const Tensor& x) {
  check_video(x, conv->conv->options.in_channels(), "TemporalUpsample");
  return (*conv)(repeat_interleave(x, 2, 2));
}

}  // namespace zt::vq
