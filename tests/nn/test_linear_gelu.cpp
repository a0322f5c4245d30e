// Linear with the gelu_tanh option: the fused linear_gelu op, equal to a plain Linear
// with the same parameters followed by the tanh-approximation GELU, with the same
// parameter names, and correct gradients (f64 central differences).
#include "common/test_util.h"
#include "nn/nn.h"

using namespace zt;

TEST(LinearGelu, EqualsLinearThenGelu) {
  nn::Linear fused(nn::LinearOptions(6, 5).gelu_tanh(true));
  nn::Linear plain(6, 5);
  {
    autograd::NoGradGuard ng;
    plain.weight.copy_(fused.weight);
    plain.bias.copy_(fused.bias);
  }
  Generator g(21);
  Tensor x = randn({2, 3, 6}, g);
  EXPECT_TRUE(test::all_close(fused(x), gelu(plain(x), /*tanh_approx=*/true), 1e-6, 1e-6));
  std::vector<std::string> names;
  for (auto& [n, p] : fused.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_NE(fused.extra_repr().find("gelu_tanh=true"), std::string::npos);
  EXPECT_EQ(plain.extra_repr().find("gelu"), std::string::npos);
}

TEST(LinearGelu, GradCheck) {
  nn::Linear lin(nn::LinearOptions(4, 3).gelu_tanh(true));
  lin.to(DType::f64);
  std::vector<Tensor> in{test::rand_leaf({2, 4}, 22), lin.weight, lin.bias};
  EXPECT_GRAD_OK([&](const std::vector<Tensor>& v) { return lin.call({v[0]})[0]; }, in);
}
