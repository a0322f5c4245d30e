// Multi-head self-attention. Legend: B batch, T sequence length, E embedding dim,
// H heads, Dh = E / H head dim.
#pragma once

#include "nn/linear.h"
#include "nn/module.h"
#include "nn/options.h"

namespace zt::nn {

/// Options: MultiheadSelfAttentionOptions(E, H).causal(true).bias(true).
struct MultiheadSelfAttentionOptions {
  MultiheadSelfAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  ZT_ARG(int64_t, embed_dim);
  ZT_ARG(int64_t, num_heads);
  /// Position t attends to positions <= t only.
  ZT_ARG(bool, causal) = false;
  ZT_ARG(bool, bias) = true;
};

/// x (B, T, E) -> (B, T, E): out_proj(concat_h softmax(q_h k_h^T / sqrt(Dh) [causal]) v_h)
/// with q/k/v = q_proj/k_proj/v_proj(x); children q_proj, k_proj, v_proj, out_proj.
class MultiheadSelfAttention : public UnaryModule {
 public:
  explicit MultiheadSelfAttention(const MultiheadSelfAttentionOptions& options);
  MultiheadSelfAttention(int64_t embed_dim, int64_t num_heads, bool causal = false)
      : MultiheadSelfAttention(MultiheadSelfAttentionOptions(embed_dim, num_heads).causal(causal)) {
  }
  std::string extra_repr() const override;

  MultiheadSelfAttentionOptions options;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;

 protected:
  Tensor forward(const Tensor& x) override;
};

}  // namespace zt::nn
