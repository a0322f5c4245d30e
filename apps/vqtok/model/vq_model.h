// VqModel: the Emu3-style VQ video tokenizer (docs/EMU3_TOKENIZER.md) as one zt module, with the
// real checkpoint's state-dict key names (encoder.*, decoder.*, quantize.embedding.weight,
// quant_conv.conv.*, post_quant_conv.conv.*). Clips of T frames become T/f x H/s x W/s
// codes; single images are repeated to f frames and give H/s x W/s codes (f = 4 and s = 8
// for the released Emu3 model).
//
// Shape legend: B batch, T frames (a multiple of f = temporal_downsample_factor), C = 3
// channels, H/W pixels (multiples of s = 2^(len(ch_mult)-1), the spatial factor),
// T' = T/f, h/w = H/s, W/s,
// E embed_dim, K codebook_size. Pixels are in [-1, 1].
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/vqtok/model/vq_coder.h"
#include "apps/vqtok/model/vq_quantizer.h"
#include "apps/vqtok/model/vq_temporal.h"

namespace zt::vq {

/// What encode() returns.
struct EncodeResult {
  Tensor codes;          ///< (B, T', h, w) i64; (B, h, w) for an image input
  Tensor z;              ///< (B, T', E, h, w) latents before quantization
  Tensor zq;             ///< (B, T', E, h, w) quantized, straight-through (gradient to z)
  Tensor loss_vq;        ///< () loss_codebook + 0.25 * loss_commit
  Tensor loss_commit;    ///< () mean((stopgrad(zq) - z)^2), gradient to the encoder
  Tensor loss_codebook;  ///< () mean((zq - stopgrad(z))^2), gradient to the codebook
  Tensor error;          ///< (B, T', E, h, w) zq - z, detached (the quantization error)
};

/// What forward_train() returns.
struct ForwardResult {
  Tensor recon;                                ///< (B, T, C, H, W); (B, C, H, W) for an image input
  Tensor codes;                                ///< as EncodeResult::codes
  Tensor loss_vq, loss_commit, loss_codebook;  ///< as in EncodeResult
};

/// The module types train.activation_checkpointing recomputes in backward: the residual
/// and attention blocks of the encoder and decoder, and the temporal residual blocks.
std::vector<std::string> recomputed_block_types();

/// The tokenizer. Calling the module (call({x})) is forward_train: outputs {recon, codes,
/// loss_vq, loss_commit, loss_codebook}, and under a NoGradGuard (evaluation) also
/// item_errors: (B) f64, each item's mean((zq - z)^2), so that a score summed item by item
/// does not depend on how the items were batched. Every submodule is invoked through call().
class VqModel : public nn::Module {
 public:
  /// Builds the model initialized as the released one (see make_conv2d); validates cfg.
  explicit VqModel(const config::ModelConfig& cfg);

  /// video (B, T, C, H, W) or image (B, C, H, W) -> codes and latents. An image, or a
  /// one-frame clip (T = 1), is encoded as a clip of f identical frames: codes (B, h, w), or
  /// (B, 1, h, w) for the clip.
  EncodeResult encode(const Tensor& video);
  /// image (B, C, H, W), repeated to f frames -> codes (B, h, w).
  EncodeResult encode_image(const Tensor& image);
  /// Quantized latents (B, T', E, h, w) -> video (B, f * T', C, s * h, s * w).
  Tensor decode_latents(const Tensor& zq);
  /// codes (B, T', h, w) -> video (B, f * T', C, s * h, s * w); codes (B, h, w) -> frame 0,
  /// (B, C, s * h, s * w).
  Tensor decode_codes(const Tensor& codes);
  /// codes (B, h, w) -> image (B, C, s * h, s * w).
  Tensor decode_image(const Tensor& codes);
  /// encode then decode_latents(zq): reconstruction with gradients to every parameter.
  ForwardResult forward_train(const Tensor& video);

  /// Parameter elements of the model cfg describes, counted without building it.
  static int64_t count_parameters(const config::ModelConfig& cfg);
  /// The state dict's keys and shapes (parameters and BatchNorm buffers) in state-dict
  /// order, without building the model.
  static std::vector<std::pair<std::string, Shape>> expected_keys(const config::ModelConfig& cfg);

  const config::ModelConfig& config() const { return cfg_; }

  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<Quantizer> quantize;
  std::shared_ptr<CausalConv3d> quant_conv;       // k (3, 1, 1), Z -> E
  std::shared_ptr<CausalConv3d> post_quant_conv;  // k (3, 1, 1), E -> Z

 protected:
  /// {video (B, T, C, H, W) or image (B, C, H, W)} -> {recon, codes, loss_vq, loss_commit,
  /// loss_codebook}, and item_errors without gradient recording.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  config::ModelConfig cfg_;
};

}  // namespace zt::vq
