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
  // The GEMMs that write into a given output refuse such operands too.
  Tensor w = leaf({1, 2, 3, 4, 5, 6}).view({3, 2});
  Tensor c = zeros({2, 2}, DType::f64), a = ones({2, 3}, DType::f64);
  EXPECT_TRUE(throws_with([&] { gemm(false, false, 2, 2, 3, 1.0, a, 3, w, 2, 0.0, c, 2); },
                          "gemm: the source f64[3, 2] cpu"));
  EXPECT_TRUE(throws_with([&] { bmm_into(c.unsqueeze(0), a.unsqueeze(0), w.unsqueeze(0)); },
                          "bmm_into: the source"));
  EXPECT_TRUE(values_are(c, {0, 0, 0, 0}));
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

TEST(AutogradGuards, AViewMadeInNoGradModeOfATensorThatRequiresGradIsNotWrittenInGradMode) {
  // As PyTorch: the view has no history, so a write to it in grad mode would change the
  // leaf behind autograd's back.
  Tensor x = leaf({1, 2, 3});
  Tensor v;
  {
    autograd::NoGradGuard no_grad;
    v = x.narrow(0, 0, 2);
  }
  EXPECT_FALSE(v.requires_grad());
  EXPECT_TRUE(throws_with([&] { add_(v, ones({2}, DType::f64)); },
                          "add_: an in-place write to f64[2] cpu, a view made under a NoGradGuard "
                          "of a tensor that requires grad, while grad mode is on"));
  Tensor vv = v.view({2, 1});  // a view of that view, made in grad mode, is one too
  EXPECT_TRUE(
      throws_with([&] { vv.fill_(0.0); }, "fill_: an in-place write to f64[2, 1] cpu, a view"));
  EXPECT_TRUE(throws_with([&] { v.copy_(zeros({2}, DType::f64)); }, "copy_: an in-place write"));
  EXPECT_TRUE(values_are(x, {1, 2, 3}));
  {
    autograd::NoGradGuard no_grad;  // an edit, as an optimizer's
    add_(v, ones({2}, DType::f64));
  }
  EXPECT_TRUE(values_are(x, {2, 3, 3}));
  // detach() says the write is meant (PyTorch allows it too).
  Tensor d;
  {
    autograd::NoGradGuard no_grad;
    d = x.narrow(0, 2, 1).detach();
  }
  d.fill_(7.0);
  EXPECT_TRUE(values_are(x, {2, 3, 7}));
  // A no-grad view of a tensor that does not require grad is a plain view.
  Tensor b = zeros({3}, DType::f64);
  Tensor bv;
  {
    autograd::NoGradGuard no_grad;
    bv = b.narrow(0, 1, 1);
  }
  bv.fill_(1.0);
  EXPECT_TRUE(values_are(b, {0, 1, 0}));
}

// split and chunk make their pieces as views of x: made under a NoGradGuard, of an x that
// requires grad, they are refused a write in grad mode as narrow()'s view is. (Else a
// write to a piece of a non-leaf whose node saved nothing would change the loss behind
// autograd's back and give a wrong gradient, with no error.)
TEST(AutogradGuards, SplitAndChunkPiecesMadeInNoGradModeAreNoGradViews) {
  Tensor a = leaf({1, 2, 3, 4});
  Tensor x = mul(a, 2.0);  // a non-leaf; mul by a scalar saves nothing
  std::vector<Tensor> split_parts, chunk_parts;
  {
    autograd::NoGradGuard no_grad;
    split_parts = split(x, 2, 0);
    chunk_parts = chunk(x, 2, 0);
  }
  EXPECT_TRUE(
      throws_with([&] { split_parts[0].fill_(7.0); },
                  "fill_: an in-place write to f64[2] cpu, a view made under a NoGradGuard"));
  EXPECT_TRUE(throws_with([&] { chunk_parts[1].fill_(7.0); }, "a view made under a NoGradGuard"));
  EXPECT_TRUE(values_are(x, {2, 4, 6, 8}));
  // Made in grad mode, the pieces have history (a node records them).
  std::vector<Tensor> recorded = split(x, 2, 0);
  EXPECT_TRUE(recorded[0].requires_grad());
}

TEST(AutogradGuards, IntegerOutputsOfACustomFunctionDoNotRequireGrad) {
  // As PyTorch: an integer or bool output (an index, a count, a mask) is not
  // differentiable, so it is a plain tensor; its gradient slot stays undefined.
  Tensor x = leaf({1, 5, 3});
  bool count_grad_defined = true;
  std::vector<Tensor> out = autograd::apply_function(
      "doubled_with_count", {x},
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{mul(in[0], 2.0), full({}, 3.0, DType::i64),
                                   ones({3}, DType::b8)};
      },
      [&](const std::vector<Tensor>& g) {
        count_grad_defined = g[1].defined() || g[2].defined();
        return std::vector<Tensor>{mul(g[0], 2.0)};
      });
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].requires_grad());
  for (size_t i : {1u, 2u}) {
    EXPECT_FALSE(out[i].requires_grad()) << "output " << i;
    EXPECT_TRUE(out[i].is_leaf()) << "output " << i;
  }
  EXPECT_TRUE(values_are(out[1], {3}));
  out[1].fill_(4.0);  // an in-place write in grad mode is an edit
  EXPECT_TRUE(values_are(out[1], {4}));
  out[1].set_requires_grad(false);
  EXPECT_TRUE(throws_with([&] { out[1].backward(); }, "does not require grad"));
  sum(out[0]).backward();
  EXPECT_TRUE(values_are(x.grad(), {2, 2, 2}));
  EXPECT_FALSE(count_grad_defined);
}

// A custom function that returns one tensor as two outputs: each output is a handle of its
// own, so each gets its own gradient slot (the second does not take over the first's).
TEST(AutogradGuards, OneTensorReturnedAsTwoOutputsGetsAGradientSlotForEach) {
  Tensor x = leaf({1, 2});
  std::vector<Tensor> seen;
  std::vector<Tensor> out = autograd::apply_function(
      "twice", {x},
      [](const std::vector<Tensor>& in) {
        const Tensor y = mul(in[0], 3.0);
        return std::vector<Tensor>{y, y};
      },
      [&](const std::vector<Tensor>& g) {
        seen = g;
        return std::vector<Tensor>{mul(add(g[0], g[1]), 3.0)};
      });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[0].same(out[1]));
  (sum(out[0]) + sum(mul(out[1], 2.0))).backward();
  ASSERT_EQ(seen.size(), 2u);
  ASSERT_TRUE(seen[0].defined() && seen[1].defined());
  EXPECT_TRUE(values_are(seen[0], {1, 1}));
  EXPECT_TRUE(values_are(seen[1], {2, 2}));
  EXPECT_TRUE(values_are(x.grad(), {9, 9}));
}

TEST(AutogradGuards, SetGradRefusesAGradientBackwardCouldNotAccumulateInto) {
  // Backward adds into .grad() in place: a gradient of another dtype, or with several
  // elements in one memory location, would fail there, far from the set_grad that caused
  // it (PyTorch refuses such a gradient when it is assigned).
  Tensor p = leaf({1, 2, 3});
  EXPECT_TRUE(throws_with([&] { p.set_grad(zeros({3}, DType::f32)); },
                          "set_grad: a gradient of dtype f32 for f64[3] cpu"));
  EXPECT_TRUE(throws_with([&] { p.set_grad(zeros({4}, DType::f64)); },
                          "set_grad: gradient shape [4] does not match tensor shape [3]"));
  EXPECT_TRUE(throws_with([&] { p.set_grad(zeros({1}, DType::f64).expand({3})); },
                          "set_grad: the gradient f64[3] cpu has elements that share memory"));
  Tensor overlapping = zeros({3}, DType::f64).as_strided({2, 2}, {1, 1}, 0);
  EXPECT_TRUE(throws_with(
      [&] {
        zeros({2, 2}, DType::f64).set_grad(overlapping);
      },
      "set_grad: the gradient f64[2, 2] cpu has elements that share memory"));
  EXPECT_FALSE(p.grad().defined());
  // A strided gradient with no shared element is accumulated into in place.
  Tensor strided = from_vector({1, 9, 1, 9, 1, 9}, {6}, DType::f64).slice(0, 0, 6, 2);
  p.set_grad(strided);
  sum(mul(p, 2.0)).backward();
  EXPECT_TRUE(values_are(p.grad(), {3, 3, 3}));
  p.set_grad(Tensor());  // clearing is always allowed
  EXPECT_FALSE(p.grad().defined());
}

TEST(AutogradGuards, ADoubleBackwardIsRefusedNamingTheMissingGraph) {
  // Gradients are computed with no graph (there is no create_graph): a gradient penalty
  // built from .grad() has nothing to differentiate, and the error says so rather than
  // only suspecting a NoGradGuard.
  const Tensor x = from_vector({1, 2}, {2}, DType::f64).set_requires_grad(true);
  sum(mul(x, x)).backward();
  const Tensor penalty = sum(mul(x.grad(), x.grad()));
  EXPECT_TRUE(throws_with([&] { penalty.backward(); }, "no higher-order gradients"));
}

TEST(AutogradGuards, AnInPlaceWriteRefusedByItsChecksLeavesSavedTensorsUsable) {
  // A write refused for its arguments (an integer destination, a source that does not
  // broadcast, a later pair of a multi-copy, a GEMM output inside an operand) changed nothing, so
  // it must not count as a write: backward would then refuse a graph that saved the tensor.
  const Tensor w = leaf({1, 2, 3});
  const Tensor a = from_vector({4, 5, 6}, {3}, DType::f64);
  const Tensor y = sum(mul(w, a));  // saves a
  const Tensor ints = zeros({3}, DType::i64);
  const Tensor z = sum(index_select(w, 0, ints));  // saves ints
  EXPECT_TRUE(throws_with([&] { a.copy_(zeros({2}, DType::f64)); },
                          "copy_: shapes [3] and [2] cannot be broadcast"));
  EXPECT_TRUE(throws_with([&] { add_(a, zeros({2}, DType::f64)); }, "add_"));
  EXPECT_TRUE(throws_with([&] { mul_(a, zeros({2}, DType::f64)); }, "mul_"));
  EXPECT_TRUE(throws_with([&] { add_(ints, ones({3}, DType::i64)); }, "add_"));
  EXPECT_TRUE(throws_with([&] { mul_(ints, 2.0); }, "mul_"));
  const Tensor fine = zeros({3}, DType::f64);
  EXPECT_TRUE(throws_with(
      [&] {
        multi_copy_({a, fine}, {ones({3}, DType::f64), mul(w, 2.0)});
      },
      "multi_copy_"));
  // The very elements of operand A as the output: no partial overlap, refused as a GEMM's.
  EXPECT_TRUE(throws_with(
      [&] {
        bmm_into(a.view({1, 1, 3}), a.view({1, 1, 3}), ones({1, 3, 3}, DType::f64));
      },
      "shares memory with operand A"));
  EXPECT_TRUE(values_are(a, {4, 5, 6}));
  y.backward();
  EXPECT_TRUE(values_are(w.grad(), {4, 5, 6}));
  z.backward();
}
