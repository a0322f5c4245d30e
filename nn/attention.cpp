// Multi-head self-attention: Linear children for the projections and the fused
// scaled_dot_product_attention op (batched GEMMs, softmax with the causal mask applied
// in place) over all batch entries and heads at once.
#include "nn/attention.h"

namespace zt::nn {

MultiheadSelfAttention::MultiheadSelfAttention(const MultiheadSelfAttentionOptions& opts)
    : UnaryModule("MultiheadSelfAttention"), options(opts) {
  const int64_t e = opts.embed_dim(), h = opts.num_heads();
  ZT_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadSelfAttention: embed_dim (", e,
           ") must be a positive multiple of num_heads (", h, ")");
  auto lin = [&](int64_t out) {
    return std::make_shared<Linear>(LinearOptions(e, out).bias(opts.bias()));
  };
  if (opts.fused_qkv()) {
    qkv_proj = register_module("qkv_proj", lin(3 * e));
  } else {
    q_proj = register_module("q_proj", lin(e));
    k_proj = register_module("k_proj", lin(e));
    v_proj = register_module("v_proj", lin(e));
  }
  out_proj = register_module("out_proj", lin(e));
}

std::string MultiheadSelfAttention::extra_repr() const {
  return "embed_dim=" + std::to_string(options.embed_dim()) +
         ", num_heads=" + std::to_string(options.num_heads()) +
         ", causal=" + (options.causal() ? "true" : "false") +
         (options.fused_qkv() ? ", fused_qkv=true" : "");
}

Tensor MultiheadSelfAttention::forward(const Tensor& x) {
  return attend(x, Tensor(), Tensor())[0];
}

std::vector<Tensor> MultiheadSelfAttention::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  ZT_CHECK(inputs.size() == 3, "MultiheadSelfAttention: takes {x} or {x, k_past, v_past}, got ",
           inputs.size(), " inputs");
  return attend(inputs[0], inputs[1], inputs[2]);
}

std::vector<Tensor> MultiheadSelfAttention::attend(const Tensor& x, const Tensor& k_past,
                                                   const Tensor& v_past) {
  const int64_t e = options.embed_dim(), h = options.num_heads(), dh = e / h;
  ZT_CHECK(x.dim() == 3 && x.size(2) == e, "MultiheadSelfAttention: input ", shape_str(x.sizes()),
           " must be (B, T, ", e, ")");
  const int64_t b = x.size(0), t = x.size(1);
  const int64_t past = k_past.defined() ? k_past.size(2) : 0;
  if (k_past.defined() || v_past.defined()) {
    ZT_CHECK(options.causal(), "MultiheadSelfAttention: a KV cache needs causal attention");
    const Shape want{b, h, past, dh};
    ZT_CHECK(
        k_past.defined() && v_past.defined() && k_past.sizes() == want && v_past.sizes() == want,
        "MultiheadSelfAttention: the cache's keys ",
        k_past.defined() ? shape_str(k_past.sizes()) : "(none)", " and values ",
        v_past.defined() ? shape_str(v_past.sizes()) : "(none)", " must both be (", b, ", ", h,
        ", Tp, ", dh, ")");
    ZT_CHECK(t == 1 || past == 0, "MultiheadSelfAttention: after the first call a KV cache takes ",
             "one token a call, got ", t, " after ", past);
  }
  auto heads = [&](const Tensor& y) {  // (B, T, E) -> (B, H, T, Dh)
    return y.reshape({b, t, h, dh}).permute({0, 2, 1, 3});
  };
  Tensor q, k, v;
  if (qkv_proj) {  // one (B, T, 3E) product, split into views
    const std::vector<Tensor> qkv = split((*qkv_proj)(x), e, 2);
    q = heads(qkv[0]);
    k = heads(qkv[1]);
    v = heads(qkv[2]);
  } else {
    q = heads((*q_proj)(x));
    k = heads((*k_proj)(x));
    v = heads((*v_proj)(x));
  }
  if (past > 0) {
    k = cat({k_past, k}, 2);
    v = cat({v_past, v}, 2);
  }
  // One new token sees every key (none is in its future); otherwise the square mask.
  const bool mask = options.causal() && past == 0;
  Tensor attn = scaled_dot_product_attention(q, k, v, mask);   // (B, H, T, Dh)
  Tensor out = attn.permute({0, 2, 1, 3}).reshape({b, t, e});  // (B, T, E)
  return {(*out_proj)(out), k, v};
}

}  // namespace zt::nn
