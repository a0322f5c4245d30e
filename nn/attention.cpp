// Multi-head self-attention composed from Linear children, matmul and softmax; the
// causal mask is an additive (T, T) tensor of 0 / -inf broadcast over (B, H).
#include "nn/attention.h"

#include <cmath>
#include <limits>

namespace zt::nn {

MultiheadSelfAttention::MultiheadSelfAttention(const MultiheadSelfAttentionOptions& opts)
    : UnaryModule("MultiheadSelfAttention"), options(opts) {
  const int64_t e = opts.embed_dim(), h = opts.num_heads();
  ZT_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadSelfAttention: embed_dim (", e,
           ") must be a positive multiple of num_heads (", h, ")");
  auto lin = [&] { return std::make_shared<Linear>(LinearOptions(e, e).bias(opts.bias())); };
  q_proj = register_module("q_proj", lin());
  k_proj = register_module("k_proj", lin());
  v_proj = register_module("v_proj", lin());
  out_proj = register_module("out_proj", lin());
}

std::string MultiheadSelfAttention::extra_repr() const {
  return "embed_dim=" + std::to_string(options.embed_dim()) +
         ", num_heads=" + std::to_string(options.num_heads()) +
         ", causal=" + (options.causal() ? "true" : "false");
}

Tensor MultiheadSelfAttention::forward(const Tensor& x) {
  const int64_t e = options.embed_dim(), h = options.num_heads(), dh = e / h;
  ZT_CHECK(x.dim() == 3 && x.size(2) == e, "MultiheadSelfAttention: input ", shape_str(x.sizes()),
           " must be (B, T, ", e, ")");
  const int64_t b = x.size(0), t = x.size(1);
  auto heads = [&](const Tensor& y) {  // (B, T, E) -> (B, H, T, Dh)
    return y.reshape({b, t, h, dh}).permute({0, 2, 1, 3});
  };
  Tensor q = heads((*q_proj)(x)), k = heads((*k_proj)(x)), v = heads((*v_proj)(x));
  Tensor scores = mul(matmul(q, k.transpose(-2, -1)), 1.0 / std::sqrt(static_cast<double>(dh)));
  if (options.causal()) {
    std::vector<double> mask(static_cast<size_t>(t * t), 0.0);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = i + 1; j < t; ++j)
        mask[static_cast<size_t>(i * t + j)] = -std::numeric_limits<double>::infinity();
    scores = add(scores, from_vector(mask, {t, t}, scores.dtype(), scores.device()));
  }
  Tensor attn = softmax(scores, -1);                                      // (B, H, T, T)
  Tensor out = matmul(attn, v).permute({0, 2, 1, 3}).reshape({b, t, e});  // (B, T, E)
  return (*out_proj)(out);
}

}  // namespace zt::nn
