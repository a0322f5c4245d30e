// MultiheadSelfAttention (fused scaled_dot_product_attention over all batch entries and
// heads) against the same projections composed with the reference attention (matmul,
// an additive -inf mask tensor, softmax): outputs and parameter gradients.
#include <cmath>

#include "common/attention_cases.h"
#include "common/test_util.h"
#include "nn/attention.h"

using namespace zt;

TEST(AttentionModule, EqualsComposedHeads) {
  for (bool causal : {false, true}) {
    manual_seed(7);
    nn::MultiheadSelfAttention att(nn::MultiheadSelfAttentionOptions(8, 2).causal(causal));
    Tensor x = randn({2, 5, 8});
    auto heads = [](const Tensor& y) { return y.reshape({2, 5, 2, 4}).permute({0, 2, 1, 3}); };
    auto grads = [&] {
      std::vector<Tensor> g;
      for (const Tensor& p : att.parameters()) g.push_back(p.grad().clone());
      att.zero_grad();
      return g;
    };
    Tensor fused = att(x);
    sum(mul(fused, fused)).backward();
    std::vector<Tensor> g_fused = grads();
    Tensor a = test::reference_attention(heads((*att.q_proj)(x)), heads((*att.k_proj)(x)),
                                         heads((*att.v_proj)(x)), causal, 0.5);
    Tensor ref = (*att.out_proj)(a.permute({0, 2, 1, 3}).reshape({2, 5, 8}));
    sum(mul(ref, ref)).backward();
    std::vector<Tensor> g_ref = grads();
    EXPECT_CLOSE(fused, ref, 1e-5, 1e-6);
    for (size_t i = 0; i < g_ref.size(); ++i)
      EXPECT_CLOSE(g_fused[i], g_ref[i], 1e-4, 1e-5) << "parameter " << i << " causal=" << causal;
  }
}

// fused_qkv: one projection (qkv_proj, E -> 3E) whose weight is q_proj's, k_proj's and
// v_proj's stacked gives the separate projections' outputs, input gradient and (stacked)
// weight gradients, with and without a KV cache.
TEST(AttentionModule, FusedQkvIsTheSeparateProjectionsStacked) {
  for (bool bias : {false, true}) {
    manual_seed(7);
    nn::MultiheadSelfAttention sep(nn::MultiheadSelfAttentionOptions(8, 2).causal(true).bias(bias));
    nn::MultiheadSelfAttention fused(
        nn::MultiheadSelfAttentionOptions(8, 2).causal(true).bias(bias).fused_qkv(true));
    EXPECT_EQ(fused.q_proj, nullptr);
    EXPECT_EQ(fused.qkv_proj->weight.sizes(), (Shape{24, 8}));
    {
      autograd::NoGradGuard ng;
      fused.qkv_proj->weight.copy_(
          cat({sep.q_proj->weight, sep.k_proj->weight, sep.v_proj->weight}, 0));
      if (bias)
        fused.qkv_proj->bias.copy_(cat({sep.q_proj->bias, sep.k_proj->bias, sep.v_proj->bias}, 0));
      fused.out_proj->weight.copy_(sep.out_proj->weight);
      if (bias) fused.out_proj->bias.copy_(sep.out_proj->bias);
    }
    const Tensor x0 = randn({2, 5, 8});
    const Tensor xs = x0.clone().set_requires_grad(true), xf = x0.clone().set_requires_grad(true);
    const Tensor ys = sep(xs), yf = fused(xf);
    EXPECT_CLOSE(yf, ys, 1e-5, 1e-6);
    sum(mul(ys, ys)).backward();
    sum(mul(yf, yf)).backward();
    EXPECT_CLOSE(xf.grad(), xs.grad(), 1e-4, 1e-6);
    EXPECT_CLOSE(
        fused.qkv_proj->weight.grad(),
        cat({sep.q_proj->weight.grad(), sep.k_proj->weight.grad(), sep.v_proj->weight.grad()}, 0),
        1e-4, 1e-6);
    EXPECT_EQ(fused.named_parameters().size(), sep.named_parameters().size() - (bias ? 4 : 2));
    autograd::NoGradGuard ng;
    std::vector<Tensor> a = sep.call({x0.narrow(1, 0, 4).contiguous(), Tensor(), Tensor()});
    std::vector<Tensor> b = fused.call({x0.narrow(1, 0, 4).contiguous(), Tensor(), Tensor()});
    a = sep.call({x0.narrow(1, 4, 1).contiguous(), a[1], a[2]});
    b = fused.call({x0.narrow(1, 4, 1).contiguous(), b[1], b[2]});
    for (size_t i = 0; i < 3; ++i) EXPECT_CLOSE(b[i], a[i], 1e-5, 1e-6) << "cache output " << i;
  }
}

// A KV cache: a prompt of 4 tokens in one call, then 3 calls of one token, give the rows
// of one call on all 7 (in f64, to rounding), and the cache holds every key and value.
TEST(AttentionModule, KvCacheGivesTheRowsOfTheWholeSequence) {
  manual_seed(7);
  nn::MultiheadSelfAttention att(nn::MultiheadSelfAttentionOptions(8, 2).causal(true));
  att.to(DType::f64);
  autograd::NoGradGuard ng;
  Tensor x = randn({2, 7, 8}, DType::f64);
  const Tensor whole = att(x);
  std::vector<Tensor> out = att.call({x.narrow(1, 0, 4).contiguous(), Tensor(), Tensor()});
  EXPECT_CLOSE(out[0], whole.narrow(1, 0, 4), 1e-12, 1e-14);
  for (int64_t t = 4; t < 7; ++t) {
    out = att.call({x.narrow(1, t, 1).contiguous(), out[1], out[2]});
    EXPECT_CLOSE(out[0], whole.narrow(1, t, 1), 1e-12, 1e-14) << "token " << t;
  }
  EXPECT_EQ(out[1].sizes(), (Shape{2, 2, 7, 4}));
  EXPECT_EQ(out[2].sizes(), (Shape{2, 2, 7, 4}));

  // Two tokens after a prompt would need a shifted mask; a cache on bidirectional
  // attention has no meaning.
  EXPECT_TRUE(test::throws_with(
      [&] {
        att.call({x.narrow(1, 0, 2).contiguous(), out[1], out[2]});
      },
      "after the first call a KV cache takes one token a call, got 2 after 7"));
  nn::MultiheadSelfAttention both(8, 2, /*causal=*/false);
  both.to(DType::f64);
  EXPECT_TRUE(test::throws_with(
      [&] {
        both.call({x.narrow(1, 0, 1).contiguous(), out[1], out[2]});
      },
      "a KV cache needs causal attention"));
}
