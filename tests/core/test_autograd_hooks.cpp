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

TEST(AutogradHooks, AHookRemovedDuringBackwardDoesNotRunAndOneAddedRunsNextTime) {
  // A one-shot post-accumulate hook removes itself while it runs; the hook registered
  // after it still runs, once per backward.
  Tensor p = leaf({1, 2});
  std::string order;
  int one_shot = -1;
  one_shot = p.register_post_accumulate_grad_hook([&, label = std::string("once")](const Tensor&) {
    p.remove_post_accumulate_grad_hook(one_shot);
    order += label;  // the capture is still alive after the removal
    order += ",";
  });
  p.register_post_accumulate_grad_hook([&](const Tensor&) { order += "after,"; });
  sum(p).backward();
  sum(p).backward();
  EXPECT_EQ(order, "once,after,after,");

  // A hook that removes a later one: that one does not run in this backward.
  Tensor q = leaf({1});
  int later = -1;
  std::string ran;
  q.register_post_accumulate_grad_hook([&](const Tensor&) {
    ran += "first,";
    q.remove_post_accumulate_grad_hook(later);
  });
  later = q.register_post_accumulate_grad_hook([&](const Tensor&) { ran += "later,"; });
  sum(q).backward();
  EXPECT_EQ(ran, "first,");

  // Tensor hooks on a leaf and on a non-leaf that register many hooks on their own tensor
  // (the list grows, and moves, under the running hook): as in PyTorch, the new hooks run
  // from the next backward on, not in the one that added them.
  for (bool on_leaf : {true, false}) {
    Tensor x = leaf({1, 2});
    Tensor h = on_leaf ? x : mul(x, 1.0);
    Tensor loss = sum(mul(h, 2.0));
    int new_ran = 0;
    h.register_hook([&](const Tensor&) {
      for (int i = 0; i < 16; ++i)
        h.register_hook([&](const Tensor&) {
          ++new_ran;
          return Tensor();
        });
      return Tensor();
    });
    loss.backward(Tensor(), true);
    EXPECT_EQ(new_ran, 0) << "on_leaf " << on_leaf;
    loss.backward(Tensor(), true);
    EXPECT_EQ(new_ran, 16) << "on_leaf " << on_leaf;
    EXPECT_TRUE(values_are(x.grad(), {4, 4})) << "on_leaf " << on_leaf;
  }
  // A tensor hook that removes itself and the hook after it: neither runs again.
  for (bool on_leaf : {true, false}) {
    Tensor x = leaf({1, 2});
    Tensor h = on_leaf ? x : mul(x, 1.0);
    Tensor loss = sum(mul(h, 2.0));
    int self_id = -1, later_id = -1, self_ran = 0, later_ran = 0;
    self_id = h.register_hook([&](const Tensor& g) {
      ++self_ran;
      h.remove_hook(self_id);
      h.remove_hook(later_id);
      return mul(g, 10.0);
    });
    later_id = h.register_hook([&](const Tensor&) {
      ++later_ran;
      return Tensor();
    });
    loss.backward(Tensor(), true);
    loss.backward(Tensor(), true);
    EXPECT_EQ(self_ran, 1) << "on_leaf " << on_leaf;
    EXPECT_EQ(later_ran, 0) << "on_leaf " << on_leaf;
    EXPECT_TRUE(values_are(x.grad(), {22, 22})) << "on_leaf " << on_leaf;  // 20, then 2
  }
}

TEST(AutogradHooks, ACallbackMayQueueMoreCallbacks) {
  // As PyTorch's engine: callbacks run until none is left, those queued by a callback
  // included, in the order they were queued.
  Tensor x = leaf({1});
  std::vector<std::string> order;
  x.register_hook([&](const Tensor&) {
    autograd::queue_callback([&] {
      order.push_back("first");
      autograd::queue_callback([&] {
        order.push_back("queued by first");
        autograd::queue_callback([&] { order.push_back("queued by that"); });
      });
    });
    autograd::queue_callback([&] { order.push_back("second"); });
    return Tensor();
  });
  sum(x).backward();
  EXPECT_EQ(order,
            (std::vector<std::string>{"first", "second", "queued by first", "queued by that"}));
  EXPECT_FALSE(autograd::in_backward());
}

TEST(AutogradHooks, ASqueezeThatRemovesNoDimIsATensorOfItsOwn) {
  // As PyTorch's: squeeze(0) of a (2, 3) tensor, or a 0-d tensor's transpose(0, 0), is a
  // new view. A hook or retain_grad() on it sees the gradient through that view alone,
  // not the whole gradient of the tensor it views.
  Tensor x = leaf({1, 2, 3, 4, 5, 6});
  Tensor m = x.view({2, 3});
  Tensor same = m.squeeze(0);
  EXPECT_FALSE(same.same(m));
  EXPECT_EQ(same.sizes(), m.sizes());
  same.register_hook([](const Tensor& g) { return mul(g, 0.0); });  // blocks that path only
  add(sum(same), sum(mul(m, 2.0))).backward();
  EXPECT_TRUE(values_are(x.grad(), {2, 2, 2, 2, 2, 2}));

  Tensor h = mul(leaf({1, 2}), 1.0);
  Tensor s = h.squeeze(0);
  s.retain_grad();
  h.retain_grad();
  add(sum(s), sum(mul(h, 2.0))).backward();
  EXPECT_TRUE(values_are(s.grad(), {1, 1}));
  EXPECT_TRUE(values_are(h.grad(), {3, 3}));

  Tensor l = leaf({2});
  Tensor a = mul(l.view({}), 1.0);
  Tensor t = a.transpose(0, 0);
  EXPECT_FALSE(t.same(a));
  t.register_hook([](const Tensor& g) { return mul(g, 0.0); });
  add(t, mul(a, 3.0)).backward();
  EXPECT_TRUE(values_are(l.grad(), {3}));
  EXPECT_FALSE(a.squeeze(0).same(a));
}
