// What a leaf's requires_grad decides, as PyTorch's: whether a gradient is accumulated
// into it, and whether it may retain one.
#include "core/autograd_test_util.h"

using namespace zt;
using zt::test::leaf;
using zt::test::throws_with;
using zt::test::values_are;

TEST(AutogradLeaves, ALeafFrozenAfterTheForwardAccumulatesNoGradient) {
  // A graph made while x required grad reaches x's accumulator; a backward after x was
  // frozen leaves x.grad() alone (an optimizer would otherwise update the frozen x) and
  // runs no post-accumulate hook, as nothing was accumulated. Its tensor hooks still see
  // the gradient, as PyTorch's do.
  Tensor x = leaf({1, 2, 3});
  Tensor w = leaf({4, 5, 6});
  Tensor y = sum(mul(x, w));
  int seen = 0, accumulated = 0;
  x.register_hook([&](const Tensor&) {
    ++seen;
    return Tensor();
  });
  x.register_post_accumulate_grad_hook([&](const Tensor&) { ++accumulated; });
  x.set_requires_grad(false);
  y.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(accumulated, 0);
  EXPECT_TRUE(values_are(w.grad(), {1, 2, 3}));
  // Unfrozen again before the next backward, the same graph accumulates into it.
  x.set_requires_grad(true);
  y.backward();
  EXPECT_TRUE(values_are(x.grad(), {4, 5, 6}));
  EXPECT_EQ(accumulated, 1);
  EXPECT_TRUE(values_are(w.grad(), {2, 4, 6}));
}

TEST(AutogradLeaves, RetainGradOnATensorThatDoesNotRequireGradIsAnError) {
  // It would never get a gradient: .grad() stays undefined and fails later, far from the
  // cause (PyTorch refuses it here).
  Tensor plain = ones({3}, DType::f64);
  EXPECT_TRUE(throws_with([&] { plain.retain_grad(); },
                          "retain_grad on f64[3] cpu, which does not require grad"));
  Tensor x = leaf({1, 2});
  Tensor made;
  {
    autograd::NoGradGuard no_grad;
    made = mul(x, 2.0);
  }
  EXPECT_TRUE(throws_with([&] { made.retain_grad(); }, "which does not require grad"));
  x.retain_grad();  // a leaf that requires grad keeps its gradient anyway: nothing to do
  Tensor y = mul(x, 3.0);
  y.retain_grad();
  sum(y).backward();
  EXPECT_TRUE(values_are(x.grad(), {3, 3}));
  EXPECT_TRUE(values_are(y.grad(), {1, 1}));
}
