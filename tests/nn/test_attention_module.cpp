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
