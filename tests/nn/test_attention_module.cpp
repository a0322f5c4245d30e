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
