// The vector quantizer of the Emu3-style tokenizer (docs/EMU3_TOKENIZER.md): a codebook of K
// vectors, nearest-code lookup by squared L2 distance, the straight-through estimator
// and the VQ-VAE loss (codebook and commitment terms). Optionally (l2_norm) the codes and the
// latents are l2-normalized before the search, so the lookup is by cosine similarity (ViT-VQGAN):
// the code vectors the decoder sees then have unit length whatever the codebook's scale.
//
// Shape legend: B batch, T' latent frames, E embed_dim, h/w latent height/width,
// K codebook size, M flattened latent positions (B * T' * h * w).
#pragma once

#include <memory>

#include "nn/nn.h"

namespace zt::vq {

/// The codebook `embedding` with weight (K, E), initialized U(-1/K, 1/K) from
/// zt::default_generator(). One module serves both uses so that every read of the
/// weight goes through its call() (where the ZeRO engine gathers it):
///   {ids i64 (...)}   -> {(..., E)}                  lookup
///   {z f32 (M, E)}    -> {ids i64 (M), e (M, E)}     nearest codes and their vectors
/// The nearest search is not differentiable; e is differentiable w.r.t. the weight.
/// With l2_norm every row of the weight is used as weight_k / |weight_k|.
class Codebook : public nn::Module {
 public:
  Codebook(int64_t codebook_size, int64_t embed_dim, bool l2_norm = false);
  std::string extra_repr() const override;

  Tensor weight;  // (K, E)

 protected:
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  /// argmin_k |e_k|^2 - 2 z.e_k (= |z - e_k|^2 - |z|^2) for z (M, E) and the code vectors e (K, E),
  /// in row chunks to bound memory.
  Tensor nearest(const Tensor& z, const Tensor& e) const;
  /// The code vectors: the weight, row-normalized with l2_norm (differentiable).
  Tensor codes() const;

  bool l2_norm_;
};

/// x / |x| along the last dimension (differentiable; |x| is floored at 1e-6).
Tensor l2_normalize_last(const Tensor& x);

/// The `quantize` module. forward({z (B, T', E, h, w)}) returns, in order:
///   zq            (B, T', E, h, w)  straight-through: z + stopgrad(zq - z)
///   codes         (B, T', h, w) i64
///   loss_vq       ()  loss_codebook + beta * loss_commit
///   loss_commit   ()  mean((stopgrad(zq) - z)^2): pulls the encoder to its codes
///   loss_codebook ()  mean((zq - stopgrad(z))^2): pulls the codes to the encoder
///   error         (B, T', E, h, w)  zq - z, detached: the quantization error
/// With beta = 0.25 this is the VQ-VAE objective, loss_vq = mean((zq - sg(z))^2) +
/// 0.25 * mean((sg(zq) - z)^2), vqtok's training term at its default loss.commitment.
/// (MoVQGAN's recipe, from taming's legacy quantizer, swaps the two weights; the values
/// are equal, the gradients are not. vqtok trains it with loss.vq 0.25, commitment 4.)
/// With l2_norm, z is l2-normalized over E first (zq and both losses use the unit vectors).
class Quantizer : public nn::Module {
 public:
  /// beta weights loss_commit in loss_vq; l2_norm selects cosine codes.
  Quantizer(int64_t codebook_size, int64_t embed_dim, double beta = 0.25, bool l2_norm = false);
  std::string extra_repr() const override;

  /// Code vectors of codes (B, T', h, w) i64 as (B, T', E, h, w) (through embedding's call).
  Tensor lookup(const Tensor& codes);

  std::shared_ptr<Codebook> embedding;

 protected:
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  double beta_;
  bool l2_norm_;
};

}  // namespace zt::vq
