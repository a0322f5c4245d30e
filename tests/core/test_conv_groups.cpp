// Grouped and dilated convolutions: hand-computed values, agreement with the direct
// reference (core/conv_reference.h) over grouped, depthwise, dilated and strided shapes in
// 2-D and 3-D, f64 gradient checks, the per-group Winograd path against the same function
// built from ungrouped convolutions on channel slices, the direct depthwise kernel's bits
// at two thread counts, and argument errors.
#include "common/test_util.h"
#include "core/conv_reference.h"
#include "core/cpu/conv_depthwise.h"
#include "core/cpu/winograd.h"

using namespace zt;
using zt::test::reference_conv3d;
using zt::test::throws_with;
using zt::test::values_are;

namespace {

// conv2d through the 3-D reference: x (N, C, H, W), w (O, C/G, kh, kw).
Tensor reference_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& a,
                        const Tensor& y) {
  return reference_conv3d(x.unsqueeze(2), w.unsqueeze(2), b, {1, a.stride[0], a.stride[1]},
                          {0, a.padding[0], a.padding[2]}, {1, y.size(2), y.size(3)},
                          {1, a.dilation[0], a.dilation[1]}, a.groups)
      .squeeze(2);
}

}  // namespace

TEST(Conv2dDilation, HandComputedSpacedTaps) {
  // x = 0..24 as 5x5, w = ones(2x2) dilated by 2: out[i][j] = x[i][j] + x[i][j+2] +
  // x[i+2][j] + x[i+2][j+2] = 4 x[i][j] + 24, a 3x3 output.
  Tensor x = arange(0, 25).reshape({1, 1, 5, 5});
  Conv2dArgs a;
  a.dilation = {2, 2};
  EXPECT_TRUE(
      values_are(conv2d(x, ones({1, 1, 2, 2}), Tensor(), a), {24, 28, 32, 44, 48, 52, 64, 68, 72}));
}

TEST(Conv2dGroups, HandComputedDepthwiseScalesEachChannel) {
  // groups = C = O = 2, 1x1 kernels 3 and -1: channel 0 times 3, channel 1 negated, and
  // no mixing between the channels.
  Tensor x = from_vector({1, 2, 3, 4, 10, 20, 30, 40}, {1, 2, 2, 2});
  Conv2dArgs a;
  a.groups = 2;
  Tensor y = conv2d(x, from_vector({3, -1}, {2, 1, 1, 1}), from_vector({0, 1}, {2}), a);
  EXPECT_TRUE(values_are(y, {3, 6, 9, 12, -9, -19, -29, -39}));
}

TEST(Conv2dGroups, MatchesReferenceAcrossShapes) {
  struct Case {
    Shape x, w;
    std::array<int64_t, 2> stride, dilation;
    std::array<int64_t, 4> pad;
    int64_t groups;
  };
  // Groups of several channels, depthwise (with and without a channel multiplier),
  // dilation alone (symmetric, per axis, with stride and asymmetric pads), both at once,
  // pointwise groups, and a batch that runs as chunks of samples.
  const std::vector<Case> cases = {
      {{2, 4, 7, 6}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 2},
      {{2, 3, 6, 6}, {3, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 3},
      {{1, 3, 8, 7}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 1}, 3},
      {{2, 3, 9, 9}, {4, 3, 3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, 1},
      {{2, 2, 9, 11}, {3, 2, 3, 2}, {2, 1}, {3, 2}, {1, 2, 0, 3}, 1},
      {{2, 6, 10, 8}, {4, 3, 3, 3}, {2, 1}, {2, 3}, {2, 1, 3, 3}, 2},
      {{3, 4, 5, 5}, {8, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 4},
      {{7, 4, 6, 6}, {4, 2, 3, 3}, {1, 1}, {1, 2}, {1, 1, 2, 2}, 2},
  };
  Generator gen(71);
  for (const Case& c : cases) {
    Tensor x = randn(c.x, gen), w = randn(c.w, gen), b = randn({c.w[0]}, gen);
    Conv2dArgs a;
    a.stride = c.stride;
    a.padding = c.pad;
    a.dilation = c.dilation;
    a.groups = c.groups;
    Tensor y = conv2d(x, w, b, a);
    EXPECT_CLOSE(y.to(DType::f64), reference_conv2d(x, w, b, a, y), 1e-4, 1e-4)
        << "x " << shape_str(c.x) << " w " << shape_str(c.w) << " groups " << c.groups;
  }
}

TEST(Conv3dGroups, GroupedDilatedMatchesReference) {
  // Causal time padding with a time dilation of 2, and 2 groups.
  Generator gen(72);
  Tensor x = randn({2, 4, 6, 5, 5}, gen), w = randn({6, 2, 2, 3, 3}, gen), b = randn({6}, gen);
  Conv3dArgs a;
  a.padding = {2, 0, 1, 1, 1, 1};
  a.dilation = {2, 1, 1};
  a.groups = 2;
  Tensor y = conv3d(x, w, b, a);
  EXPECT_EQ(y.sizes(), (Shape{2, 6, 6, 5, 5}));
  Tensor ref = reference_conv3d(x, w, b, {1, 1, 1}, {2, 1, 1}, {6, 5, 5}, {2, 1, 1}, 2);
  EXPECT_CLOSE(y.to(DType::f64), ref, 1e-4, 1e-4);
}

TEST(Conv2dGroups, GradCheckGroupedDilatedStrided) {
  Tensor x = test::rand_leaf({2, 4, 7, 6}, 1), w = test::rand_leaf({6, 2, 2, 3}, 2),
         b = test::rand_leaf({6}, 3);
  Conv2dArgs a;
  a.stride = {2, 1};
  a.padding = {1, 2, 0, 1};
  a.dilation = {2, 2};
  a.groups = 2;
  EXPECT_GRAD_OK([a](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], a); },
                 {x, w, b});
}

TEST(Conv3dGroups, GradCheckDepthwiseDilated) {
  Tensor x = test::rand_leaf({2, 3, 4, 4, 5}, 4), w = test::rand_leaf({3, 1, 2, 2, 2}, 5);
  Conv3dArgs a;
  a.padding = {1, 0, 1, 1, 2, 2};
  a.dilation = {1, 2, 2};
  a.groups = 3;
  EXPECT_GRAD_OK([a](const std::vector<Tensor>& in) { return conv3d(in[0], in[1], Tensor(), a); },
                 {x, w});
}

TEST(Conv2dGroups, WinogradPerGroupMatchesSlicedUngroupedConvs) {
  // Two groups of 16 channels: each group is a "same" 3x3 convolution wide enough for
  // Winograd. The comparison is the same function written with ungrouped convolutions on
  // narrow()ed channel slices and cat(), forward and all three gradients.
  ConvGeometry one;
  one.c = one.o = 16;
  one.h = one.oh = 6;
  one.w = one.ow = 7;
  one.kh = one.kw = 3;
  one.pad_h = one.pad_w = 1;
  ASSERT_TRUE(cpu::winograd_applies(one));
  Generator gen(73);
  Tensor x0 = randn({2, 32, 6, 7}, gen), w0 = randn({32, 16, 3, 3}, gen), b0 = randn({32}, gen);
  Tensor gy = randn({2, 32, 6, 7}, gen);
  // Leaves (x, w, b) for each side; fn builds the output from them.
  auto run = [&](const auto& fn) {
    std::vector<Tensor> in = {x0.clone().set_requires_grad(true),
                              w0.clone().set_requires_grad(true),
                              b0.clone().set_requires_grad(true)};
    Tensor y = fn(in[0], in[1], in[2]);
    y.backward(gy);
    return std::vector<Tensor>{y.detach(), in[0].grad(), in[1].grad(), in[2].grad()};
  };
  Conv2dArgs a;
  a.padding = {1, 1, 1, 1};
  Conv2dArgs grouped = a;
  grouped.groups = 2;
  auto got = run(
      [&](const Tensor& x, const Tensor& w, const Tensor& b) { return conv2d(x, w, b, grouped); });
  auto want = run([&](const Tensor& x, const Tensor& w, const Tensor& b) {
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < 2; ++i)
      parts.push_back(
          conv2d(x.narrow(1, 16 * i, 16), w.narrow(0, 16 * i, 16), b.narrow(0, 16 * i, 16), a));
    return cat(parts, 1);
  });
  const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
  for (int i = 0; i < 4; ++i) EXPECT_CLOSE(got[i], want[i], 1e-4, 1e-4) << names[i];
  // Each group took the Winograd path: its slices of the output and of the input and
  // weight gradients are the Winograd kernels' bits on that group's slices.
  for (int64_t i = 0; i < 2; ++i) {
    const std::vector<Tensor> kernels =
        test::winograd_kernels(one, x0.narrow(1, 16 * i, 16), w0.narrow(0, 16 * i, 16),
                               b0.narrow(0, 16 * i, 16), {2, 16, 6, 7}, gy.narrow(1, 16 * i, 16));
    const Tensor slices[] = {got[0].narrow(1, 16 * i, 16), got[1].narrow(1, 16 * i, 16),
                             got[2].narrow(0, 16 * i, 16)};
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(test::all_close(slices[k], kernels[k], 0.0, 0.0))
          << "group " << i << ", " << names[k] << ": not the Winograd path's bits";
  }
}

TEST(Conv2dGroups, ErrorsNameTheGroupsAndTheDilation) {
  Tensor x = zeros({1, 4, 6, 6});
  Conv2dArgs three;
  three.groups = 3;
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({3, 1, 3, 3}), Tensor(), three);
      },
      "groups=3 must divide the input channels (4)"));
  Conv2dArgs two;
  two.groups = 2;
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({4, 4, 3, 3}), Tensor(), two);
      },
      "input has 4 channels but weight expects 8 (its channels per group"));
  Conv2dArgs none;
  none.groups = 0;
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({4, 4, 3, 3}), Tensor(), none);
      },
      "groups must be >= 1, got 0"));
  Conv2dArgs wide;
  wide.dilation = {3, 1};
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({4, 4, 3, 3}), Tensor(), wide);
      },
      "padded input H (6 + 0 + 0) is smaller than the kernel (7 with its "
      "dilation)"));
  Conv2dArgs flat;
  flat.dilation = {1, 0};
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({4, 4, 3, 3}), Tensor(), flat);
      },
      "dilation along W must be >= 1, got 0"));
}

TEST(Conv2dGroups, DepthwiseGivesTheSameBitsOnTwoThreads) {
  // The direct depthwise kernel splits planes over the threads and sums each channel's
  // weight gradient on one thread in a fixed order: the bits do not depend on the count.
  // Large enough that all three loops split over two threads (more items than the grain
  // of 32768 multiply-adds per thread allows on one), once with stride 2 (the row path),
  // once with stride 1 (padded planes).
  Generator gen(74);
  Tensor x = randn({8, 32, 40, 40}, gen), w = randn({64, 1, 5, 5}, gen), b = randn({64}, gen);
  for (int64_t stride : {2, 1}) {
    const int64_t out = stride == 2 ? 20 : 40;
    Tensor go = randn({8, 64, out, out}, gen);
    Conv2dArgs a;
    a.stride = {stride, stride};
    a.padding = {2, 2, 2, 2};
    a.groups = 32;
    const std::vector<Tensor> serial = test::conv2d_on_threads(1, x, w, b, go, a),
                              threaded = test::conv2d_on_threads(2, x, w, b, go, a);
    for (size_t i = 0; i < serial.size(); ++i)
      EXPECT_EQ(threaded[i].to_vector(), serial[i].to_vector()) << "stride " << stride << ": " << i;
    // Those are the depthwise kernel's bits (the grouped path rounds otherwise).
    ConvGeometry g;
    g.n = 8;
    g.c = 32;
    g.o = 64;
    g.h = g.w = 40;
    g.oh = g.ow = out;
    g.kh = g.kw = 5;
    g.sh = g.sw = stride;
    g.pad_h = g.pad_w = 2;
    g.groups = 32;
    ASSERT_TRUE(cpu::depthwise_applies(g));
    Tensor y = Tensor::empty(go.sizes()), gx = Tensor::empty(x.sizes()),
           gw = Tensor::empty(w.sizes());
    cpu::depthwise_forward<float>(g, x.data<float>(), w.data<float>(), b.data<float>(),
                                  y.data<float>());
    cpu::depthwise_backward<float>(g, go.data<float>(), x.data<float>(), w.data<float>(),
                                   gx.data<float>(), gw.data<float>());
    const Tensor kernel[] = {y, gx, gw};
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(serial[i].to_vector(), kernel[i].to_vector())
          << "stride " << stride << ": " << i << " is not the depthwise kernel's";
  }
}
