// The autograd engine: explicit output gradients, accumulation into leaves, no-grad
// mode, retain_grad, tensor and post-accumulate hooks, custom functions, callbacks at
// the end of backward, version counters on saved tensors, and the errors for misuse.
#include "core/autograd_test_util.h"

using namespace zt;
using zt::test::leaf;
using zt::test::values_are;

TEST(Autograd, BackwardWithExplicitGradient) {
  // y = 3 x (non-scalar); dy = [1, 2] -> dx = [3, 6].
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 3.0);
  y.backward(from_vector({1, 2}, {2}, DType::f64));
  EXPECT_TRUE(values_are(x.grad(), {3, 6}));
}

TEST(Autograd, AccumulatesOverTwoBackwards) {
  // d/dx sum(x^2) = 2x, twice -> 4x.
  Tensor x = leaf({1, -2});
  sum(mul(x, x)).backward();
  EXPECT_TRUE(values_are(x.grad(), {2, -4}));
  sum(mul(x, x)).backward();
  EXPECT_TRUE(values_are(x.grad(), {4, -8}));
  // A variable used twice in one graph gets both contributions: d/dx (x * x + x) = 2x + 1.
  Tensor z = leaf({3});
  add(mul(z, z), z).backward();
  EXPECT_TRUE(values_are(z.grad(), {7}));
}

TEST(Autograd, NoGradGuard) {
  Tensor x = leaf({1});
  {
    autograd::NoGradGuard ng;
    EXPECT_FALSE(autograd::grad_mode_enabled());
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    {
      autograd::EnableGradGuard eg;
      EXPECT_TRUE(mul(x, 2.0).requires_grad());
    }
    // Leaving the EnableGradGuard restores the mode it found: no grad.
    EXPECT_FALSE(autograd::grad_mode_enabled());
    EXPECT_FALSE(mul(x, 2.0).requires_grad());
  }
  EXPECT_TRUE(autograd::grad_mode_enabled());
  EXPECT_TRUE(mul(x, 2.0).requires_grad());
  // detach() cuts the graph but shares storage.
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), x.data_ptr());
}

TEST(Autograd, NoOpRecordsUnderANoGradGuard) {
  // Under a NoGradGuard no op records, whichever way it asks: reductions, shape copies,
  // softmax, a loss, and cat and stack (which ask for a list of inputs) of tensors that
  // require grad give results that do not, so no graph and no saved tensor is kept.
  const Tensor x = from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).set_requires_grad(true);
  const Tensor target = from_vector({0, 2}, {2}, DType::i64);
  autograd::NoGradGuard ng;
  const std::vector<std::pair<const char*, Tensor>> results = {
      {"sum", sum(x)},
      {"pad", pad(x, {1, 1})},
      {"softmax", softmax(x, 1)},
      {"cross_entropy", cross_entropy(x, target)},
      {"cat", cat({x, x}, 0)},
      {"stack", stack({x, x}, 0)}};
  for (const auto& [op, y] : results) {
    EXPECT_FALSE(y.requires_grad()) << op;
    EXPECT_EQ(y.grad_fn(), nullptr) << op;
  }
}

TEST(Autograd, RetainGrad) {
  // h = 2x, y = sum(h^2): dy/dh = 2h = 4x.
  Tensor x = leaf({1, 3});
  Tensor h = mul(x, 2.0);
  h.retain_grad();
  Tensor h2 = mul(x, 2.0);  // not retained
  sum(add(mul(h, h), h2)).backward();
  EXPECT_TRUE(values_are(h.grad(), {4, 12}));
  EXPECT_FALSE(h2.grad().defined());
  EXPECT_TRUE(values_are(x.grad(), {2 * 4 + 2, 2 * 12 + 2}));
}

TEST(Autograd, RetainedGradIsTheGradientAfterEveryHook) {
  // As PyTorch's: retain_grad() called before a hook that triples the gradient still
  // keeps the tripled one, the gradient that flows on.
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 1.0);
  h.retain_grad();
  h.register_hook([](const Tensor& g) { return mul(g, 3.0); });
  sum(h).backward();
  EXPECT_TRUE(values_are(h.grad(), {3, 3}));
  EXPECT_TRUE(values_are(x.grad(), {3, 3}));
}

TEST(Autograd, TensorHookReplacesGrad) {
  // Hook on an intermediate doubles its gradient; hook on the leaf adds 1 before
  // accumulation. y = sum(3 h), h = x * 1: dh = 3 -> hooked 6 -> dx = 6 -> leaf hook 7.
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 1.0);
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.to_vector();
    return mul(g, 2.0);
  });
  x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  sum(mul(h, 3.0)).backward();
  EXPECT_EQ(seen, (std::vector<double>{3, 3}));
  EXPECT_TRUE(values_are(x.grad(), {7, 7}));
  // A hook returning an undefined tensor keeps the gradient.
  Tensor z = leaf({1});
  Tensor hz = mul(z, 5.0);
  hz.register_hook([](const Tensor&) { return Tensor(); });
  sum(hz).backward();
  EXPECT_TRUE(values_are(z.grad(), {5}));
}

TEST(Autograd, PostAccumulateGradHook) {
  Tensor x = leaf({1, 2});
  int calls = 0;
  std::vector<double> at_call;
  x.register_post_accumulate_grad_hook([&](const Tensor& p) {
    ++calls;
    at_call = p.grad().to_vector();  // the hook sees the accumulated gradient
  });
  sum(mul(x, 4.0)).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(at_call, (std::vector<double>{4, 4}));
  sum(x).backward();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(at_call, (std::vector<double>{5, 5}));
  EXPECT_THROW(mul(x, 2.0).register_post_accumulate_grad_hook([](const Tensor&) {}), Error);
}

TEST(Autograd, PostAccumulateGradHookRemovedById) {
  Tensor x = leaf({1, 2});
  std::string order;
  int a = x.register_post_accumulate_grad_hook([&](const Tensor&) { order += "a"; });
  int b = x.register_post_accumulate_grad_hook([&](const Tensor&) { order += "b"; });
  x.register_post_accumulate_grad_hook([&](const Tensor&) { order += "c"; });
  EXPECT_NE(a, b);
  // Removing by id takes exactly that hook, whatever was added or removed around it.
  x.remove_post_accumulate_grad_hook(a);
  sum(x).backward();
  EXPECT_EQ(order, "bc");
  x.remove_post_accumulate_grad_hook(a);  // already gone: no-op
  x.remove_post_accumulate_grad_hook(b);
  sum(x).backward();
  EXPECT_EQ(order, "bcc");
}

TEST(Autograd, CustomFunction) {
  // f(a, b) = a * b computed outside the graph, with a hand-written backward
  // that scales the true gradient by 10 so we can tell it ran.
  Tensor a = leaf({2, 3}), b = leaf({5, 7});
  int backward_calls = 0;
  std::vector<Tensor> out = autograd::apply_function(
      "scaled_mul", {a, b},
      [](const std::vector<Tensor>& in) {
        EXPECT_FALSE(autograd::grad_mode_enabled());
        return std::vector<Tensor>{mul(in[0], in[1])};
      },
      [&](const std::vector<Tensor>& g) {
        ++backward_calls;
        return std::vector<Tensor>{mul(mul(g[0], b.detach()), 10.0),
                                   mul(mul(g[0], a.detach()), 10.0)};
      });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(values_are(out[0], {10, 21}));
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[0].is_leaf());
  sum(out[0]).backward();
  EXPECT_EQ(backward_calls, 1);
  EXPECT_TRUE(values_are(a.grad(), {50, 70}));
  EXPECT_TRUE(values_are(b.grad(), {20, 30}));
  // An identity function gets a fresh output handle that carries the graph.
  Tensor c = leaf({1});
  std::vector<Tensor> id = autograd::apply_function(
      "identity", {c}, [](const std::vector<Tensor>& in) { return in; },
      [](const std::vector<Tensor>& g) { return std::vector<Tensor>{mul(g[0], 3.0)}; });
  EXPECT_FALSE(id[0].same(c));
  sum(id[0]).backward();
  EXPECT_TRUE(values_are(c.grad(), {3}));
}

TEST(Autograd, QueueCallbackRunsAtEnd) {
  Tensor x = leaf({1});
  std::vector<std::string> order;
  bool grad_ready_in_callback = false;
  x.register_hook([&](const Tensor& g) {
    order.push_back("hook");
    EXPECT_TRUE(autograd::in_backward());
    autograd::queue_callback([&] {
      order.push_back("callback");
      grad_ready_in_callback = x.grad().defined();
    });
    return Tensor();
  });
  sum(mul(x, 2.0)).backward();
  EXPECT_EQ(order, (std::vector<std::string>{"hook", "callback"}));
  EXPECT_TRUE(grad_ready_in_callback);
  EXPECT_FALSE(autograd::in_backward());
  EXPECT_THROW(autograd::queue_callback([] {}), Error);
}

TEST(Autograd, NonScalarNeedsGradient) {
  Tensor y = mul(leaf({1, 2}), 2.0);
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only for scalar outputs"), std::string::npos);
  }
  EXPECT_THROW(y.backward(ones({3}, DType::f64)), Error);
  EXPECT_THROW(zeros({1}).backward(), Error);  // nothing requires grad
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({2});
  Tensor y = sum(mul(x, x));
  y.backward();
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos);
  }
  // With retain_graph the graph survives: 4 + 4 + 4 after three passes.
  Tensor z = leaf({2});
  Tensor w = sum(mul(z, z));
  w.backward(Tensor(), true);
  w.backward(Tensor(), true);
  w.backward();
  EXPECT_TRUE(values_are(z.grad(), {12}));
}

TEST(Autograd, MultipleRootsAndNoGradInputs) {
  // backward over two roots sums their contributions; constants get no gradient.
  Tensor x = leaf({1, 2});
  Tensor c = from_vector({10, 20}, {2}, DType::f64);
  Tensor y1 = sum(mul(x, c)), y2 = sum(mul(x, 2.0));
  autograd::backward({y1, y2}, {Tensor(), Tensor()});
  EXPECT_TRUE(values_are(x.grad(), {12, 22}));
  EXPECT_FALSE(c.grad().defined());
  EXPECT_THROW(mul(x, 2.0).set_requires_grad(false), Error);  // not a leaf
}

// An error raised while a node's gradients are computed names the node on its last line
// (the op, or a custom function's name); once backward has ended, errors carry no such
// line.
TEST(Autograd, GradientsAreFittedToTheirInputsOrRefused) {
  // As PyTorch's engine: a backward function's gradient for an input is summed back over
  // the dims the input was broadcast along and converted to the input's dtype; a shape
  // the input cannot broadcast to is the function's bug, named at once instead of being
  // broadcast into the next node or stored as a .grad() of the wrong shape.
  auto custom = [](const Tensor& x, Tensor grad) {
    return autograd::apply_function(
        "custom", {x}, [](const std::vector<Tensor>& in) { return in; },
        [grad](const std::vector<Tensor>&) { return std::vector<Tensor>{grad}; })[0];
  };
  Tensor x = ones({3}).set_requires_grad(true);
  sum(custom(x, ones({2, 3}, DType::f64))).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_TRUE(values_are(x.grad(), {2, 2, 2}));
  Tensor y = ones({3}).set_requires_grad(true);
  EXPECT_TRUE(test::throws_with([&] { sum(custom(y, ones({1}))).backward(); },
                                "backward of custom returned a gradient of shape [1] for its "
                                "input 0, whose shape is [3]"));
  // A seed gradient takes the output's dtype.
  Tensor z = ones({2}).set_requires_grad(true);
  autograd::backward({mul(z, 3.0)}, {ones({2}, DType::f64)});
  EXPECT_EQ(z.grad().dtype(), DType::f32);
  EXPECT_TRUE(values_are(z.grad(), {3, 3}));
}

TEST(Autograd, ErrorsInBackwardNameTheNode) {
  Tensor x = leaf({1, 2, 3});
  auto out = autograd::apply_function(
      "my_scale", {x},
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(in[0], 2.0)}; },
      [](const std::vector<Tensor>&) -> std::vector<Tensor> { ZT_FAIL("a bad gradient"); });
  const std::string custom = test::error_of([&] { sum(out[0]).backward(); });
  EXPECT_NE(custom.find("a bad gradient\n  in backward of my_scale"), std::string::npos) << custom;

  // An op's backward raising (its saved tensors freed by the first backward).
  Tensor a = leaf({1, 2, 3, 4, 5, 6}).reshape({2, 3}), b = leaf({1, 2, 3}).reshape({3, 1});
  Tensor y = matmul(a, b);  // (2, 1)
  const std::string op = test::error_of([&] {
    autograd::backward({y}, {ones({2, 1}, DType::f64)});
    autograd::backward({y}, {ones({2, 1}, DType::f64)});  // the graph was freed
  });
  EXPECT_NE(op.find("saved tensors were freed"), std::string::npos) << op;
  EXPECT_NE(op.find("\n  in backward of mm"), std::string::npos) << op;
  const std::string outside = test::error_of([] { matmul(ones({2, 3}), ones({2, 3})); });
  EXPECT_EQ(outside.find("in backward of"), std::string::npos) << outside;
}

TEST(Autograd, AWriteInPlaceToATensorSavedForBackwardIsAnErrorThere) {
  // As PyTorch's version counter: y = x * w saves both; w changed before backward would
  // give dx = the new w, a silently wrong gradient.
  Tensor x = leaf({1, 2}), w = leaf({3, 4});
  Tensor y = mul(x, w);
  {
    autograd::NoGradGuard no_grad;  // as an optimizer step would
    add_(w, ones({2}, DType::f64));
  }
  const std::string e = test::error_of([&] { sum(y).backward(); });
  EXPECT_NE(e.find("backward of mul: a tensor it saved for its gradient, f64[2] cpu, was "
                   "written in place since the forward"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(" then, "), std::string::npos) << e;  // the versions, as PyTorch shows them

  // An op that saves nothing it reads (add) does not mind, as in PyTorch; nor does a node
  // whose saved tensor was written after its backward ran.
  Tensor a = leaf({1, 2});
  Tensor s = add(a, w);
  w.detach().fill_(0.0);
  sum(s).backward();
  EXPECT_TRUE(values_are(a.grad(), {1, 1}));

  // Views share the count: exp saves its output, and a write through a narrowed view of
  // it is seen; so is a random fill, an optimizer update or a checkpoint's saved input.
  Tensor z = leaf({0, 1});
  Tensor ez = exp(z);
  ez.detach().narrow(0, 1, 1).fill_(7.0);
  EXPECT_NE(test::error_of([&] { sum(ez).backward(); }).find("backward of exp"), std::string::npos);
  Tensor p = leaf({1, 1});
  Tensor q = mul(p, p);
  {
    autograd::NoGradGuard no_grad;
    sgd_update({p}, {ones({2}, DType::f64)}, {}, {}, 0.1, 0.0, 0.0, 0.0, false, true);
  }
  EXPECT_NE(test::error_of([&] { sum(q).backward(); }).find("backward of mul"), std::string::npos);
  Tensor u = leaf({1, 2});
  Tensor h = mul(u, 1.0);
  Tensor c = autograd::checkpoint("square", {h}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(in[0], in[0])};
  })[0];
  uniform_(h.detach(), 0.0, 1.0);
  EXPECT_NE(test::error_of([&] { sum(c).backward(); }).find("backward of square"),
            std::string::npos);
  // The writers with many destinations, and the products into an output, count too.
  for (int writer = 0; writer < 3; ++writer) {
    Tensor v = leaf({1, 2});
    Tensor r = mul(v, v);
    {
      autograd::NoGradGuard no_grad;
      Tensor vd = v.detach();
      if (writer == 0) multi_copy_({vd}, {full({2}, 100.0, DType::f64)});
      if (writer == 1) multi_add_({vd}, {ones({2}, DType::f64)});
      if (writer == 2)
        gemm(false, false, 1, 2, 1, 1.0, ones({1, 1}, DType::f64), 1, ones({1, 2}, DType::f64), 2,
             0.0, vd.view({1, 2}), 2);
    }
    EXPECT_NE(test::error_of([&] { sum(r).backward(); }).find("backward of mul"), std::string::npos)
        << "writer " << writer;
  }
}

TEST(Autograd, AnInPlaceWriteToATensorThatRequiresGradIsRefusedInGradMode) {
  // Autograd does not record in-place writes: in grad mode one to a leaf that requires
  // grad (PyTorch refuses it too) or to a result in the graph (PyTorch would record it)
  // would be missing from the gradient. Under a NoGradGuard it is an edit.
  Tensor w = leaf({1, 2});
  EXPECT_TRUE(test::throws_with([&] { w.fill_(0.0); },
                                "fill_: an in-place write to f64[2] cpu, which requires grad, "
                                "while grad mode is on"));
  Tensor h = mul(w, 2.0);
  EXPECT_TRUE(test::throws_with([&] { mul_(h, 2.0); }, "mul_: an in-place write"));
  EXPECT_TRUE(test::throws_with([&] { h.copy_(ones({2}, DType::f64)); }, "copy_: an in-place"));
  EXPECT_TRUE(values_are(w, {1, 2}));
  {
    autograd::NoGradGuard no_grad;
    add_(w, ones({2}, DType::f64));
  }
  EXPECT_TRUE(values_are(w, {2, 3}));
  // Initializers fill parameters in any mode, as nn.init's do.
  normal_(w, 0.0, 1.0);
  EXPECT_TRUE(w.requires_grad());
}

TEST(Autograd, ALeafGradientIsAccumulatedAsSoonAsItIsReady) {
  // As PyTorch's: a leaf's accumulation runs before any other ready node, even when an
  // older graph that something still holds made it (it would otherwise rank last, and a
  // ZeRO engine's reduce-scatter, run from the post-accumulate hook, would wait for the
  // whole backward). y = sum((x2 * u) @ w): w's gradient is ready first.
  const Tensor u = from_vector({1, 2}, {1, 2}, DType::f64).set_requires_grad(true);
  const Tensor w = from_vector({3, 4}, {2, 1}, DType::f64).set_requires_grad(true);
  // Held, with its graph: w's accumulator is made first (the oldest), then u's.
  const Tensor kept_w = sum(w);
  const Tensor kept = add(kept_w, sum(u));
  std::vector<std::string> order;
  u.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("u"); });
  w.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w"); });
  const Tensor y = sum(matmul(mul(full({1, 2}, 2.0, DType::f64), u), w));
  y.backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w", "u"}));
}

TEST(Autograd, ReadyNodesRunALeafsAccumulationFirstThenTheNewestNode) {
  // The order autograd.h promises, which a ZeRO engine's hooks rely on: of the nodes
  // ready at once, a leaf's AccumulateGrad runs first, then the node created last. The
  // hooks log when each node runs. Made in this order: a = 2x, b = a * w, c = 3x,
  // sb = sum(b), sc = sum(c), y = sb + sc.
  const Tensor x = leaf({1, 2}), w = leaf({3, 4});
  std::vector<std::string> order;
  auto log = [&](const Tensor& t, const char* name) {
    t.register_hook([&order, name](const Tensor&) {
      order.push_back(name);
      return Tensor();
    });
  };
  const Tensor a = mul(x, 2.0);
  const Tensor b = mul(a, w);
  const Tensor c = mul(x, 3.0);
  const Tensor sb = sum(b);
  const Tensor sc = sum(c);
  const std::vector<std::pair<Tensor, const char*>> logged = {
      {a, "a"}, {b, "b"}, {c, "c"}, {sb, "sb"}, {sc, "sc"}};
  for (const auto& [t, name] : logged) log(t, name);
  x.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("x"); });
  w.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w"); });
  add(sb, sc).backward();
  // sc before sb and c before b (newest first); w's accumulation, ready with a's node
  // once b's ran, before it; x's last, once both a's and c's nodes ran.
  EXPECT_EQ(order, (std::vector<std::string>{"sc", "sb", "c", "b", "w", "a", "x"}));
  EXPECT_TRUE(values_are(x.grad(), {2 * 3 + 3, 2 * 4 + 3}));
}

TEST(Autograd, ARetainedGradientAccumulatesOverBackwards) {
  // As a leaf's .grad() and PyTorch's retain_grad(): a second backward through the kept
  // graph adds its gradient to the retained one rather than replacing it.
  const Tensor x = leaf({1, 2});
  const Tensor h = mul(x, 2.0);
  h.retain_grad();
  const Tensor y = sum(mul(h, 3.0));
  y.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_TRUE(values_are(h.grad(), {3, 3}));
  y.backward();
  EXPECT_TRUE(values_are(h.grad(), {6, 6}));
  EXPECT_TRUE(values_are(x.grad(), {12, 12}));
}

// set_data swaps what a handle holds, as PyTorch's `t.data = src`: another holder of the
// same handle (a module's member, its registration) sees the new shape, dtype and values,
// and the leaf keeps requiring grad, so a gradient flows into the new data.
TEST(Autograd, SetDataChangesWhatEveryHolderOfTheHandleSees) {
  Tensor t = leaf({1, 2});
  const Tensor member = t;  // the same handle
  t.set_data(from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32));
  EXPECT_EQ(member.sizes(), (Shape{2, 3}));
  EXPECT_EQ(member.dtype(), DType::f32);
  EXPECT_TRUE(member.requires_grad());
  EXPECT_TRUE(member.is_leaf());
  sum(mul(member, member)).backward();
  EXPECT_TRUE(values_are(t.grad(), {2, 4, 6, 8, 10, 12}));
  EXPECT_THROW(t.set_data(Tensor()), Error);
}

TEST(Autograd, ASavedTensorWhoseStorageWasSwappedIsNotWrittenInPlace) {
  // A ZeRO-3 parameter is released and gathered again between the forward and the
  // backward: its handle then holds another storage (set_data), whose version counts
  // that storage's writes, not those of the one saved. That is no in-place write.
  const Tensor w = leaf({1, 2});
  {
    autograd::NoGradGuard ng;
    w.fill_(3.0);  // the saved storage's version is now 1
  }
  const Tensor x = leaf({5, 7});
  const Tensor y = sum(mul(x, w));                   // saves w for x's gradient
  w.set_data(from_vector({3, 3}, {2}, DType::f64));  // gathered again: a fresh storage
  y.backward();
  EXPECT_TRUE(values_are(x.grad(), {3, 3}));
  EXPECT_TRUE(values_are(w.grad(), {5, 7}));
}

// A function with two outputs of which the loss uses one passes no gradient to what lies
// behind the other (here a transpose and a multiply, whose backward would assume one):
// they are not called.
TEST(Autograd, ABranchNoGradientReachesIsNotCalled) {
  Tensor x = test::rand_leaf({2, 3}, 1);
  const auto both = autograd::apply_function(
      "pair", {mul(x, 2.0), mul(x, 5.0).transpose(0, 1)},
      [](const std::vector<Tensor>& in) { return in; },
      [](const std::vector<Tensor>& g) { return g; });
  sum(both[0]).backward();
  EXPECT_TRUE(test::values_are(x.grad(), {2, 2, 2, 2, 2, 2}));
}

// A gradient hook may change a gradient's values, not its shape or dtype: on a leaf, and
// on a tensor whose node would otherwise pass a gradient broadcast to (2, 3) on to an input
// of shape (3), summed back without a word.
TEST(Autograd, AHookThatChangesAGradientsShapeOrDtypeIsAnError) {
  Tensor x = test::rand_leaf({3}, 1);
  x.register_hook([](const Tensor&) { return ones({2, 3}, DType::f64); });
  EXPECT_TRUE(
      test::throws_with([&] { sum(mul(x, 2.0)).backward(); }, "not its shape, dtype or device"));
  Tensor w = test::rand_leaf({3}, 4);
  Tensor hw = mul(w, 2.0);
  hw.register_hook([](const Tensor& g) { return g.expand({2, 3}).contiguous(); });
  EXPECT_TRUE(
      test::throws_with([&] { sum(mul(hw, 3.0)).backward(); }, "not its shape, dtype or device"));
  Tensor y = test::rand_leaf({3}, 2);
  Tensor h = mul(y, 2.0);
  h.register_hook([](const Tensor& g) { return g.to(DType::f32); });
  try {
    sum(mul(h, 3.0)).backward();
    ADD_FAILURE() << "a hook's f32 gradient for an f64 tensor was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not its shape, dtype or device"), std::string::npos)
        << e.what();
  }
}

// A leaf's first gradient is adopted only when nothing else holds it: a hook that keeps
// the tensor it returns keeps it unchanged by later accumulation.
TEST(Autograd, AGradientAHookKeptIsNotAccumulatedInto) {
  Tensor p = test::rand_leaf({2}, 3);
  std::vector<Tensor> seen;
  p.register_hook([&](const Tensor& g) {
    Tensor r = mul(g, 1.0);
    seen.push_back(r);
    return r;
  });
  sum(mul(p, 2.0)).backward();
  sum(mul(p, 3.0)).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(test::values_are(seen[0], {2, 2}));
  EXPECT_TRUE(test::values_are(p.grad(), {5, 5}));
}
