// Views and autograd: a view carries a gradient to the tensor it views only if it was made
// while that tensor required grad (it then has history). One made before has none, so
// once its tensor requires grad autograd refuses it in grad mode rather than lose the
// gradient through it in silence.
#include "core/autograd_test_util.h"

using namespace zt;
using zt::test::leaf;
using zt::test::throws_with;
using zt::test::values_are;

TEST(AutogradViews, AViewMadeBeforeItsTensorRequiredGradIsRefusedInGradMode) {
  // PyTorch keeps such a view out of its tensor's graph too (it becomes a leaf of its own,
  // so its tensor's .grad() misses what flows through it); zt says so where it is used.
  Tensor a = from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  Tensor b = a.view({6});
  Tensor t = b.view({3, 2}).transpose(0, 1);  // a view of that view
  Tensor row = a.select(0, 1);
  std::vector<Tensor> halves = split(a, 1, 0);
  a.set_requires_grad(true);
  EXPECT_FALSE(b.requires_grad());
  const char* stale = "a view of f64[2, 3] cpu made before that tensor required grad";
  EXPECT_TRUE(throws_with([&] { mul(b, 2.0); }, stale));  // one input
  EXPECT_TRUE(throws_with([&] { add(b, a.view({6})); }, stale));
  EXPECT_TRUE(throws_with([&] { sum(t); }, stale));
  EXPECT_TRUE(throws_with([&] { exp(row); }, stale));
  EXPECT_TRUE(throws_with([&] { mul(halves[1], a); }, stale));
  // Written in place, it would change a behind autograd's back (PyTorch refuses it too);
  // copied from, its gradient would be lost.
  EXPECT_TRUE(throws_with([&] { row.fill_(0.0); }, stale));
  EXPECT_TRUE(throws_with([&] { add_(b, ones({6}, DType::f64)); }, stale));
  EXPECT_TRUE(throws_with([&] { zeros({6}, DType::f64).copy_(b); }, stale));
  EXPECT_TRUE(values_are(a, {1, 2, 3, 4, 5, 6}));
  // Under a NoGradGuard it is a plain view; detach()ed, it says no gradient should flow.
  {
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(values_are(mul(b, 2.0), {2, 4, 6, 8, 10, 12}));
  }
  EXPECT_FALSE(mul(row.detach(), 2.0).requires_grad());
  // Made again after set_requires_grad, it carries the gradient.
  sum(mul(a.view({6}), repeat(a.select(0, 1), {2}))).backward();
  EXPECT_TRUE(values_are(a.grad(), {4, 5, 6, 9, 12, 15}));
  // Frozen again, its tensor no longer asks for a gradient, and the old view is usable.
  a.set_requires_grad(false);
  EXPECT_TRUE(values_are(mul(b, 2.0), {2, 4, 6, 8, 10, 12}));
}

TEST(AutogradViews, AsStridedOfATensorThatRequiresGradIsRefusedInGradMode) {
  // zt's as_strided records no history (it is for buffers and gradients); PyTorch's is
  // differentiable. Of a tensor that requires grad, in grad mode, the view would carry no
  // gradient to it, with no error: refused.
  Tensor x = leaf({1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(throws_with(
      [&] {
        (void)x.as_strided({2, 2}, {1, 2}, 1);
      },
      "as_strided: f64[6] cpu requires grad, while grad mode is on"));
  EXPECT_TRUE(throws_with([&] { (void)mul(x, 2.0).as_strided({2}, {1}, 0); }, "as_strided"));
  // Of a detach()ed tensor, or under a NoGradGuard, it says no gradient should flow.
  EXPECT_TRUE(values_are(x.detach().as_strided({2, 2}, {1, 2}, 1), {2, 4, 3, 5}));
  autograd::NoGradGuard no_grad;
  EXPECT_TRUE(values_are(x.as_strided({3}, {2}, 0), {1, 3, 5}));
}
