// Codebook lookup, nearest-code search and the VQ losses.
#include "apps/vqtok/model/vq_quantizer.h"

#include <algorithm>
#include <sstream>

namespace zt::vq {

// Rows of z per distance block: the (rows, K) distance matrix stays near 64 MB for the
// real codebook (K = 32768) instead of M * K doubles at once.
constexpr int64_t kDistanceElements = int64_t{1} << 23;

Tensor l2_normalize_last(const Tensor& x) {
  // In f32 for 16-bit x, as nn's norm layers: the floor 1e-12 is 0 in f16, and a short
  // row's squared length underflows it.
  const Tensor wide = is_16bit_float(x.dtype()) ? x.to(DType::f32) : x;
  const int64_t last = wide.dim() - 1;
  return (wide * rsqrt(clamp(sum(wide * wide, {last}, true), 1e-12, 1e30))).to(x.dtype());
}

Codebook::Codebook(int64_t codebook_size, int64_t embed_dim, bool l2_norm)
    : nn::Module("Codebook"), l2_norm_(l2_norm) {
  ZT_CHECK(codebook_size > 0 && embed_dim > 0, "Codebook: codebook_size and embed_dim must be ",
           "positive, got ", codebook_size, " and ", embed_dim);
  Tensor w = empty({codebook_size, embed_dim});
  double bound = 1.0 / static_cast<double>(codebook_size);
  nn::init::uniform_(w, -bound, bound);
  weight = register_parameter("weight", w);
}

std::string Codebook::extra_repr() const {
  std::ostringstream os;
  os << weight.size(0) << ", " << weight.size(1);
  if (l2_norm_) os << ", l2_norm";
  return os.str();
}

std::vector<Tensor> Codebook::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1, "Codebook takes one input (ids or latents), got ", inputs.size());
  const Tensor& x = inputs[0];
  if (x.dtype() == DType::i64 || x.dtype() == DType::i32) return {embedding(codes(), x)};
  ZT_CHECK(x.dim() == 2 && x.size(1) == weight.size(1), "Codebook: expected latents (M, ",
           weight.size(1), ") or integer ids, got ", shape_str(x.sizes()), " ",
           dtype_name(x.dtype()));
  Tensor e = codes();
  Tensor ids = nearest(x, e);
  return {ids, embedding(e, ids)};
}

Tensor Codebook::codes() const {
  return l2_norm_ ? l2_normalize_last(weight) : weight;
}

Tensor Codebook::nearest(const Tensor& z, const Tensor& codes) const {
  autograd::NoGradGuard ng;
  const int64_t m = z.size(0), k = codes.size(0);
  // In f64 whatever the latents' dtype or the TF32 policy: bf16 or TF32 products tie or
  // swap codes a few percent of the time (a K x E product per latent, E small).
  const DType dt = DType::f64;
  Tensor e = codes.detach().to(dt);
  Tensor e_sq = sum(e * e, {1});   // (K)
  Tensor e_t = e.transpose(0, 1);  // (E, K)
  const int64_t rows = std::max<int64_t>(1, kDistanceElements / k);
  std::vector<Tensor> ids;
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    Tensor zc = z.detach().narrow(0, r0, std::min(rows, m - r0)).to(dt);  // (rows, E)
    // |z - e|^2 less the row's constant |z|^2: the same order, rounded at the scale of z.e
    // rather than of |z|^2 (which would swamp the gaps between small codes).
    Tensor d = e_sq - 2.0 * matmul(zc, e_t);  // (rows, K)
    ids.push_back(argmin(d, 1));
  }
  return ids.size() == 1 ? ids[0] : cat(ids, 0);
}

Quantizer::Quantizer(int64_t codebook_size, int64_t embed_dim, double beta, bool l2_norm)
    : nn::Module("Quantizer"), beta_(beta), l2_norm_(l2_norm) {
  ZT_CHECK(beta >= 0, "Quantizer: beta must be non-negative, got ", beta);
  embedding =
      register_module("embedding", std::make_shared<Codebook>(codebook_size, embed_dim, l2_norm));
}

std::string Quantizer::extra_repr() const {
  std::ostringstream os;
  os << "beta=" << beta_;
  if (l2_norm_) os << ", l2_norm";
  return os.str();
}

Tensor Quantizer::lookup(const Tensor& codes) {
  ZT_CHECK(codes.dim() == 4 && (codes.dtype() == DType::i64 || codes.dtype() == DType::i32),
           "Quantizer::lookup: expected integer codes (B, T', h, w), got ",
           shape_str(codes.sizes()), " ", dtype_name(codes.dtype()));
  return (*embedding)(codes).permute({0, 1, 4, 2, 3});  // (B, T', h, w, E) -> (B, T', E, h, w)
}

std::vector<Tensor> Quantizer::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1, "Quantizer takes {z}, got ", inputs.size(), " inputs");
  const int64_t e_dim = embedding->weight.size(1);
  ZT_CHECK(inputs[0].dim() == 5 && inputs[0].size(2) == e_dim, "Quantizer: expected z (B, T', ",
           e_dim, ", h, w), got ", shape_str(inputs[0].sizes()));
  // With l2_norm the latents are unit vectors over E (normalized channels-last).
  const Tensor z =
      l2_norm_ ? l2_normalize_last(inputs[0].permute({0, 1, 3, 4, 2})).permute({0, 1, 4, 2, 3})
               : inputs[0];
  const int64_t b = z.size(0), t = z.size(1), h = z.size(3), w = z.size(4);
  Tensor z_last = z.permute({0, 1, 3, 4, 2});  // (B, T', h, w, E)
  // The search needs no gradient; z goes in detached so the call has no graph edge to it.
  auto found = embedding->call({z_last.reshape({-1, e_dim}).detach()});
  Tensor codes = found[0].reshape({b, t, h, w});
  Tensor zq = found[1].reshape({b, t, h, w, e_dim}).permute({0, 1, 4, 2, 3});  // (B,T',E,h,w)
  Tensor loss_commit = mse_loss(z, zq.detach());
  Tensor loss_codebook = mse_loss(zq, z.detach());
  Tensor loss_vq = add_scaled(loss_codebook, loss_commit, beta_);
  Tensor error = (zq - z).detach();
  Tensor zq_st = z + error;
  return {zq_st, codes, loss_vq, loss_commit, loss_codebook, error};
}

}  // namespace zt::vq
