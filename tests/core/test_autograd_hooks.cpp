// Hooks and end-of-backward callbacks that are removed, registered or queued after the
// fact: a tensor hook removed by the id register_hook returned, and changes made from
// inside a hook or callback while backward runs it, with PyTorch's rules for both.
#include "core/autograd_test_util.h"

using namespace zt;
using zt::test::leaf;
using zt::test::values_are;

TEST(AutogradHooks, ATensorHookIsRemovedByTheIdRegisterHookReturned) {
  // On a leaf: the removed hook no longer doubles the gradient, the other still adds 1.
  Tensor x = leaf({1, 2});
  const int twice = x.register_hook([](const Tensor& g) { return mul(g, 2.0); });
  const int plus_one = x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  EXPECT_NE(twice, plus_one);
  sum(x).backward();
  EXPECT_TRUE(values_are(x.grad(), {3, 3}));  // (1 * 2) + 1
  x.remove_hook(twice);
  x.remove_hook(twice);  // already gone: no-op
  x.set_grad(Tensor());
  sum(x).backward();
  EXPECT_TRUE(values_are(x.grad(), {2, 2}));

  // On two outputs of one node, whose ids count per tensor (both start at 0): removing a
  // hook from one output leaves the other output's hook with the same id in place.
  Tensor y = leaf({1, 2, 3, 4});
  std::vector<Tensor> parts = split(mul(y, 1.0), 2, 0);
  std::string ran;
  const int id0 = parts[0].register_hook([&](const Tensor&) {
    ran += "0";
    return Tensor();
  });
  const int id1 = parts[1].register_hook([&](const Tensor&) {
    ran += "1";
    return Tensor();
  });
  EXPECT_EQ(id0, id1);
  parts[1].remove_hook(id1);
  sum(add(parts[0], parts[1])).backward();
  EXPECT_EQ(ran, "0");
}

TEST(AutogradHooks, RemovingAHookThatCapturesItsOwnTensorFreesTheTensorAndItsGraph) {
  // The hook holds y, y holds its grad_fn, the grad_fn holds the hook: a cycle, which
  // removing the hook breaks.
  std::weak_ptr<TensorImpl> weak_y;
  std::weak_ptr<autograd::Node> weak_node;
  {
    Tensor x = leaf({1, 2});
    Tensor y = mul(x, 3.0);
    weak_y = y.impl_ptr();
    weak_node = y.grad_fn();
    const int id = y.register_hook([y](const Tensor& g) { return mul(g, y.detach()); });
    sum(y).backward();
    EXPECT_TRUE(values_are(x.grad(), {9, 18}));  // 3 * y
    y.remove_hook(id);
  }
  EXPECT_TRUE(weak_y.expired()) << "the tensor outlived its scope";
  EXPECT_TRUE(weak_node.expired()) << "its node outlived its scope";
}
