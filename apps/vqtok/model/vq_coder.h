// The Encoder and Decoder of the Emu3-style VQ tokenizer (docs/EMU3_TOKENIZER.md) and the
// level modules they are made of. Child names are the checkpoint's key names:
// encoder.down.{i}.block.{j}, encoder.mid.attn_1, decoder.up.{i}.upsample, ...
//
// Shape legend: B batch, T frames, T' = T / temporal_downsample_factor latent frames,
// C channels, H/W pixels, h/w = H/s, W/s latent size (s = spatial factor), Z z_channels,
// E embed_dim (== Z).
#pragma once

#include <memory>

#include "apps/vqtok/model/vq_blocks.h"
#include "apps/vqtok/model/vq_temporal.h"
#include "configs/app_config.h"

namespace zt::vq {

/// Checks a model config for what the architecture needs (ch a multiple of 32, embed_dim ==
/// z_channels, a power-of-two temporal factor, attention levels in range, ...).
void validate(const config::ModelConfig& cfg);

/// One resolution level: `block` (ResnetBlocks), `attn` (AttnBlocks after each block, or
/// empty), and `downsample` (encoder) or `upsample` (decoder) unless it is the last level.
/// Encoder levels take {x}; decoder levels take {x, zq} (SpatialNorm).
class Level : public nn::Module {
 public:
  /// blocks ResnetBlocks in -> out (then out -> out); zq_channels 0 for the encoder.
  /// resample: "downsample", "upsample" or "" (none).
  /// out_init scales the initial weight of each residual branch's last conv.
  Level(int64_t in_channels, int64_t out_channels, int64_t blocks, bool attention,
        const std::string& resample, double dropout, int64_t zq_channels, double out_init = 1.0);

  std::shared_ptr<nn::ModuleList> block, attn;
  std::shared_ptr<nn::Module> resample;  // Downsample, Upsample or null

 protected:
  /// {x (N, C_in, H, W)} or {x, zq (N, E, h, w)} -> {(N, C_out, H', W')}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// The middle: block_1, attn_1, block_2 at constant width.
class MidBlock : public nn::Module {
 public:
  MidBlock(int64_t channels, double dropout, int64_t zq_channels, double out_init = 1.0);

  std::shared_ptr<ResnetBlock> block_1, block_2;
  std::shared_ptr<AttnBlock> attn_1;

 protected:
  /// {x (N, C, H, W)} or {x, zq (N, E, h, w)} -> {(N, C, H, W)}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// Frames -> latents: 2-D conv_in, down levels, mid, norm_out, act, conv_out per frame;
/// then time_conv (TemporalDownsample, each followed by act) and time_res_stack.
class Encoder : public nn::UnaryModule {
 public:
  explicit Encoder(const config::ModelConfig& cfg);

  std::shared_ptr<nn::Conv2d> conv_in, conv_out;
  std::shared_ptr<nn::ModuleList> down;
  std::shared_ptr<MidBlock> mid;
  std::shared_ptr<nn::GroupNorm> norm_out;
  std::shared_ptr<nn::ModuleList> time_conv;
  std::shared_ptr<nn::Sequential> time_res_stack;

 protected:
  /// x (B, T, C_in, H, W) -> (B, T', Z, h, w).
  Tensor forward(const Tensor& x) override;

 private:
  config::ModelConfig cfg_;
};

/// Latents -> frames. z and quant are stacked along the batch, go through
/// time_res_stack then time_conv (TemporalUpsample, each followed by act), and split into
/// h and zq; zq conditions every SpatialNorm of conv_in, mid, up levels 3..0, norm_out;
/// then act and conv_out.
class Decoder : public nn::Module {
 public:
  explicit Decoder(const config::ModelConfig& cfg);

  std::shared_ptr<nn::Sequential> time_res_stack;
  std::shared_ptr<nn::ModuleList> time_conv;
  std::shared_ptr<nn::Conv2d> conv_in, conv_out;
  std::shared_ptr<MidBlock> mid;
  std::shared_ptr<nn::ModuleList> up;  // up.{i}: level i; up.{last} is the widest
  std::shared_ptr<SpatialNorm> norm_out;

 protected:
  /// {z (B, T', Z, h, w), quant (B, T', E, h, w)} -> {(B, T, C_out, H, W)}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  config::ModelConfig cfg_;
};

}  // namespace zt::vq
