// Layer options PyTorch refuses are refused when the layer is built, naming the layer and
// the option, rather than building a layer no input can pass or failing with another
// problem's message.
#include "common/test_util.h"
#include "nn/nn.h"

using namespace zt;

// A normalized_shape with a negative size: [-1] was refused as "empty", and [-2, -3]
// without affine parameters was built (numel 6) and failed every forward instead.
TEST(ModuleOptions, NormalizedShapeSizesMustBePositive) {
  for (const Shape& bad : {Shape{-1}, Shape{-2, -3}, Shape{4, 0}}) {
    const std::string shape = shape_str(bad);
    for (bool affine : {true, false}) {
      EXPECT_TRUE(test::throws_with(
          [&] { nn::LayerNorm(nn::LayerNormOptions(bad).elementwise_affine(affine)); },
          "LayerNorm: normalized_shape must be non-empty with positive sizes, got " + shape));
      EXPECT_TRUE(test::throws_with(
          [&] { nn::RMSNorm(nn::RMSNormOptions(bad).elementwise_affine(affine)); },
          "RMSNorm: normalized_shape must be non-empty with positive sizes, got " + shape));
    }
  }
  EXPECT_TRUE(test::throws_with([] { nn::LayerNorm(nn::LayerNormOptions(Shape{})); },
                                "normalized_shape must be non-empty with positive sizes, got []"));
}

// A parameter replaced by a computed tensor (a non-leaf, as PyTorch refuses to assign)
// would never get a gradient of its own: the backward went through it into the tensors it
// was computed from, and an optimizer left it as it was; one that does not require grad
// froze it. Both are refused; a leaf that requires grad as the parameter does (another
// parameter, or a detached copy) still ties or loads.
TEST(ModuleOptions, AParameterIsReplacedByALeafOnly) {
  nn::Linear a(2, 2), b(2, 2);
  EXPECT_TRUE(test::throws_with([&] { b.replace_tensor("weight", mul(a.weight, 2.0)); },
                                "Linear: replace_tensor('weight'): a parameter's replacement must "
                                "be a leaf tensor"));
  EXPECT_FALSE(b.named_parameters()[0].second.same(a.weight));
  b.replace_tensor("weight", a.weight);  // a tie
  EXPECT_TRUE(b.named_parameters()[0].second.same(a.weight));
  nn::Linear c(2, 2);
  EXPECT_TRUE(test::throws_with(
      [&] {
        c.replace_tensor("weight", ones({2, 2}));
      },
      "requires grad as the parameter does (true); this one does not"));
  const Tensor copy = mul(a.weight, 2.0).detach().set_requires_grad(true);
  c.replace_tensor("weight", copy);
  c.weight = copy;  // forward() computes from the member
  sum(c(ones({1, 2}))).backward();
  EXPECT_TRUE(c.named_parameters()[0].second.grad().defined());
}
