// What autograd refuses, or leaves out of the graph, so that no gradient is lost or wrong
// in silence, and no error surfaces far from its cause.
#include "core/autograd_test_util.h"

using namespace zt;
using zt::test::leaf;
using zt::test::throws_with;
using zt::test::values_are;

TEST(AutogradGuards, AnInPlaceWriteFromASourceThatRequiresGradIsRefusedInGradMode) {
  // Autograd does not record in-place writes: a differentiable value written into a
  // plain buffer would lose its gradient in silence (PyTorch records the copy instead).
  // In grad mode that is an error; a detach()ed source, or a write under a NoGradGuard,
  // says no gradient should flow.
  Tensor x = leaf({1, 2, 3});
  Tensor buf = zeros({2, 3}, DType::f64);
  EXPECT_TRUE(throws_with([&] { buf.select(0, 0).copy_(mul(x, 2.0)); },
                          "copy_: the source f64[3] cpu requires grad, while grad mode is on"));
  EXPECT_TRUE(throws_with([&] { add_(buf.select(0, 1), x); }, "add_: the source f64[3] cpu"));
  EXPECT_TRUE(throws_with([&] { mul_(buf, x); }, "mul_: the source f64[3] cpu"));  // broadcast
  EXPECT_TRUE(throws_with([&] { multi_add_({buf.select(0, 0)}, {x}); }, "multi_add_: the source"));
  EXPECT_TRUE(values_are(buf, {0, 0, 0, 0, 0, 0}));
  buf.select(0, 0).copy_(mul(x, 2.0).detach());
  {
    autograd::NoGradGuard no_grad;
    add_(buf.select(0, 1), x);
  }
  EXPECT_TRUE(values_are(buf, {2, 4, 6, 1, 2, 3}));
  EXPECT_FALSE(buf.requires_grad());
  // A conversion copies internally and records its own node: the gradient flows.
  Tensor f = x.to(DType::f32);
  EXPECT_TRUE(f.requires_grad());
  sum(mul(f, 2.0)).backward();
  EXPECT_TRUE(values_are(x.grad(), {2, 2, 2}));
}
