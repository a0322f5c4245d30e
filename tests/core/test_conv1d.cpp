// conv1d / conv_transpose1d: the 2-D ops' W axis alone, so each equals its 2-D op on
// inputs and weights with a unit H axis, values and gradients alike, over stride,
// asymmetric padding, dilation and groups (the 2-D ops are checked against a direct
// reference in test_conv*.cpp); the weight is the autograd input itself (no view), and
// argument errors speak of L and k.
#include <functional>

#include "common/test_util.h"

using namespace zt;
using zt::test::throws_with;

namespace {

struct Case {
  Shape x, w;  // x (N, C, L); conv: w (O, C/G, k), transpose: w (C, O/G, k)
  int64_t stride, pad0, pad1, dilation, groups;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{2, 3, 9}, {4, 3, 3}, 1, 1, 1, 1, 1},  {{2, 4, 10}, {6, 2, 4}, 2, 2, 1, 1, 2},
      {{1, 2, 12}, {2, 2, 3}, 3, 0, 2, 2, 1}, {{3, 6, 7}, {6, 1, 5}, 1, 2, 2, 1, 6},
      {{2, 1, 5}, {3, 1, 1}, 1, 0, 0, 1, 1},
  };
  return c;
}

// Runs `one_d(x, w, b)` and `two_d(x4, w4, b)` on the same f64 leaves and checks that
// the results and every gradient agree.
void expect_same_as_2d(const Tensor& x, const Tensor& w, const Tensor& b,
                       const std::function<Tensor(const Tensor&, const Tensor&)>& one_d,
                       const std::function<Tensor(const Tensor&, const Tensor&)>& two_d) {
  Tensor y1 = one_d(x, w);
  Tensor y2 = two_d(x.unsqueeze(2), w.unsqueeze(2)).squeeze(2);
  ASSERT_EQ(y1.sizes(), y2.sizes());
  EXPECT_CLOSE(y1, y2, 1e-12, 1e-12);
  Generator gen(5);
  const Tensor weights = randn(y1.sizes(), gen, DType::f64);
  auto grads_of = [&](const Tensor& y) {
    sum(y * weights).backward();
    std::vector<Tensor> g{x.grad(), w.grad(), b.grad()};
    for (const Tensor& t : {x, w, b}) t.set_grad(Tensor());
    return g;
  };
  const std::vector<Tensor> g1 = grads_of(y1), g2 = grads_of(y2);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    ASSERT_EQ(g1[i].sizes(), g2[i].sizes());
    EXPECT_CLOSE(g1[i], g2[i], 1e-12, 1e-12);
  }
}

}  // namespace

TEST(Conv1d, EqualsConv2dOverAUnitHeight) {
  uint64_t seed = 11;
  for (const Case& c : cases()) {
    SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w));
    Tensor x = test::rand_leaf(c.x, seed++), w = test::rand_leaf(c.w, seed++);
    Tensor b = test::rand_leaf({c.w[0]}, seed++);
    Conv1dArgs a1;
    a1.stride = {c.stride};
    a1.padding = {c.pad0, c.pad1};
    a1.dilation = {c.dilation};
    a1.groups = c.groups;
    Conv2dArgs a2;
    a2.stride = {1, c.stride};
    a2.padding = {0, 0, c.pad0, c.pad1};
    a2.dilation = {1, c.dilation};
    a2.groups = c.groups;
    expect_same_as_2d(
        x, w, b, [&](const Tensor& xi, const Tensor& wi) { return conv1d(xi, wi, b, a1); },
        [&](const Tensor& xi, const Tensor& wi) { return conv2d(xi, wi, b, a2); });
  }
}

TEST(ConvTranspose1d, EqualsConvTranspose2dOverAUnitHeight) {
  uint64_t seed = 31;
  for (const Case& c : cases()) {
    SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w));
    // The transpose's weight is (C, O/G, k): C = x's channels.
    const Shape ws{c.x[1], c.w[0] / c.groups, c.w[2]};
    Tensor x = test::rand_leaf(c.x, seed++), w = test::rand_leaf(ws, seed++);
    Tensor b = test::rand_leaf({ws[1] * c.groups}, seed++);
    const int64_t out_pad = c.stride > 1 ? 1 : 0;
    ConvTranspose1dArgs a1;
    a1.stride = {c.stride};
    a1.padding = {c.pad0};
    a1.output_padding = {out_pad};
    a1.dilation = {c.dilation};
    a1.groups = c.groups;
    ConvTranspose2dArgs a2;
    a2.stride = {1, c.stride};
    a2.padding = {0, c.pad0};
    a2.output_padding = {0, out_pad};
    a2.dilation = {1, c.dilation};
    a2.groups = c.groups;
    expect_same_as_2d(
        x, w, b,
        [&](const Tensor& xi, const Tensor& wi) { return conv_transpose1d(xi, wi, b, a1); },
        [&](const Tensor& xi, const Tensor& wi) { return conv_transpose2d(xi, wi, b, a2); });
  }
}

TEST(Conv1d, GradientsMatchFiniteDifferences) {
  Conv1dArgs a;
  a.stride = {2};
  a.padding = {1, 2};
  a.dilation = {2};
  EXPECT_GRAD_OK(
      [&](const std::vector<Tensor>& in) { return conv1d(in[0], in[1], in[2], a); },
      {test::rand_leaf({2, 2, 7}, 1), test::rand_leaf({3, 2, 2}, 2), test::rand_leaf({3}, 3)});
}

TEST(Conv1d, ErrorsSpeakOfLengthAndKernel) {
  Tensor x = randn({2, 3, 4}), w = randn({4, 3, 3});
  EXPECT_TRUE(throws_with([&] { conv1d(x.unsqueeze(2), w, Tensor()); },
                          "conv1d: input must be 3-D (N, C, L), got [2, 3, 1, 4]"));
  EXPECT_TRUE(throws_with([&] { conv1d(x, w.unsqueeze(2), Tensor()); },
                          "conv1d: weight must be 3-D (O, C, k)"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv1d(x, randn({4, 3, 6}), Tensor());
      },
      "conv1d: padded input L (4 + 0 + 0) is smaller than the kernel (6)"));
  ConvTranspose1dArgs t;
  t.stride = {2};
  t.output_padding = {2};
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose1d(x, randn({3, 2, 3}), Tensor(), t);
      },
      "conv_transpose1d: output_padding along L (2) must be >= 0 and "
      "smaller than the stride (2) or the dilation (1)"));
  EXPECT_TRUE(throws_with([&] { conv_transpose1d(x, w.unsqueeze(2), Tensor()); },
                          "(N, C, L) and (C, O/groups, k)"));
}
