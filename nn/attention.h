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
  /// One projection, qkv_proj (E -> 3E, GPT-2's c_attn), for q, k and v in this order:
  /// one GEMM where there were three, and in the backward one input gradient where three
  /// were added up (the fused attention writes dq, dk and dv into one buffer, which the
  /// projection takes whole). Its weight is q_proj's, k_proj's and v_proj's stacked.
  ZT_ARG(bool, fused_qkv) = false;
};

/// x (B, T, E) -> (B, T, E): out_proj(concat_h softmax(q_h k_h^T / sqrt(Dh) [causal]) v_h)
/// with q/k/v = q_proj/k_proj/v_proj(x); children q_proj, k_proj, v_proj, out_proj (or,
/// with fused_qkv, qkv_proj and out_proj).
///
/// Incremental decoding (a KV cache) for causal attention: call({x, k_past, v_past}) ->
/// {y, k, v}, where x (B, Tn, E) holds the tokens after the Tp the cache holds, k_past and
/// v_past (B, H, Tp, Dh) are the keys and values of those (undefined when Tp = 0), and k, v
/// (B, H, Tp + Tn, Dh) those of all. y equals the rows Tp .. Tp + Tn - 1 of a call on the
/// whole sequence. Tn is free on the first call (the prompt); after it, one token a call.
class MultiheadSelfAttention : public UnaryModule {
 public:
  explicit MultiheadSelfAttention(const MultiheadSelfAttentionOptions& options);
  MultiheadSelfAttention(int64_t embed_dim, int64_t num_heads, bool causal = false)
      : MultiheadSelfAttention(MultiheadSelfAttentionOptions(embed_dim, num_heads).causal(causal)) {
  }
  std::string extra_repr() const override;

  MultiheadSelfAttentionOptions options;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
  std::shared_ptr<Linear> qkv_proj;  ///< with fused_qkv (then q_proj, k_proj, v_proj are null)

 protected:
  Tensor forward(const Tensor& x) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  /// {y, k, v} for x after a cache of k_past, v_past (both undefined: no cache).
  std::vector<Tensor> attend(const Tensor& x, const Tensor& k_past, const Tensor& v_past);
};

}  // namespace zt::nn
