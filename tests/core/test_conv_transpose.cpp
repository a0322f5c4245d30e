// conv_transpose2d / conv_transpose3d: hand-computed values, PyTorch's output sizes, the
// defining identity <conv_transpose(x, w), y> = <x, conv(y, w)> over strides, padding,
// output padding, dilation and groups (conv itself is checked against a direct reference
// in test_conv*.cpp), f64 gradient checks, and argument errors.
#include "common/test_util.h"

using namespace zt;
using zt::test::throws_with;
using zt::test::values_are;

namespace {

double dot(const Tensor& a, const Tensor& b) {
  return sum(a.to(DType::f64) * b.to(DType::f64)).item();
}

}  // namespace

TEST(ConvTranspose2d, HandComputedStrideScattersEachPixel) {
  // Stride 2 with a 2x2 kernel of ones: each input pixel fills its own 2x2 block.
  Tensor x = from_vector({1, 2, 3, 4}, {1, 1, 2, 2});
  ConvTranspose2dArgs a;
  a.stride = {2, 2};
  Tensor y = conv_transpose2d(x, ones({1, 1, 2, 2}), from_vector({0.5}, {1}), a);
  EXPECT_TRUE(values_are(y, {1.5, 1.5, 2.5, 2.5, 1.5, 1.5, 2.5, 2.5,  //
                             3.5, 3.5, 4.5, 4.5, 3.5, 3.5, 4.5, 4.5}));
  // Stride 1, kernel [[1, 10]]: overlapping taps add, y[i][j] = x[i][j] + 10 x[i][j - 1].
  Tensor z = conv_transpose2d(x, from_vector({1, 10}, {1, 1, 1, 2}), Tensor());
  EXPECT_TRUE(values_are(z, {1, 12, 20, 3, 34, 40}));
}

TEST(ConvTranspose2d, IsTheAdjointOfConv2dAcrossShapes) {
  struct Case {
    Shape x, w;  // x (N, C, H, W); w (C, O/G, kh, kw)
    std::array<int64_t, 2> stride, padding, output_padding, dilation;
    int64_t groups;
    Shape out;  // PyTorch's output size
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, {2, 2, 6, 7}},
      {{2, 4, 3, 3}, {4, 3, 4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1, {2, 3, 6, 6}},
      {{1, 2, 4, 3}, {2, 2, 3, 3}, {2, 3}, {1, 0}, {1, 2}, {1, 1}, 1, {1, 2, 8, 11}},
      {{2, 4, 3, 4}, {4, 1, 3, 2}, {2, 1}, {1, 1}, {1, 0}, {2, 2}, 2, {2, 2, 8, 4}},
      {{2, 6, 5, 5}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 6, {2, 6, 5, 5}},
      {{1, 16, 6, 7}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, {1, 16, 6, 7}},
      {{3, 2, 5, 5}, {2, 3, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, {3, 3, 5, 5}},
      // output_padding at the stride or above, below the dilation (the largest PyTorch
      // allows): within the padding along H, past it along W (zero columns).
      {{1, 2, 4, 3}, {2, 3, 3, 2}, {1, 2}, {2, 0}, {2, 2}, {3, 3}, 1, {1, 3, 8, 10}},
      {{2, 4, 3, 3}, {4, 1, 2, 3}, {2, 1}, {1, 0}, {3, 1}, {4, 2}, 2, {2, 2, 10, 8}},
  };
  Generator gen(81);
  for (const Case& c : cases) {
    SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w));
    Tensor x = randn(c.x, gen, DType::f64), w = randn(c.w, gen, DType::f64);
    ConvTranspose2dArgs t;
    t.stride = c.stride;
    t.padding = c.padding;
    t.output_padding = c.output_padding;
    t.dilation = c.dilation;
    t.groups = c.groups;
    Tensor y = conv_transpose2d(x, w, Tensor(), t);
    ASSERT_EQ(y.sizes(), c.out);
    // The convolution it is the adjoint of pads padding - output_padding at the bottom /
    // right; where that is negative, the last rows are read by no window: they are
    // cropped from r, and y must be zero there (no bias).
    Tensor r = randn(c.out, gen, DType::f64);
    Tensor y_read = y;
    Conv2dArgs a;
    a.stride = c.stride;
    a.dilation = c.dilation;
    a.groups = c.groups;
    for (int i = 0; i < 2; ++i) {
      const int64_t back = c.padding[i] - c.output_padding[i];
      a.padding[2 * i] = c.padding[i];
      a.padding[2 * i + 1] = std::max<int64_t>(back, 0);
      if (back >= 0) continue;
      const int64_t kept = c.out[2 + i] + back;
      EXPECT_EQ(max(abs(y.narrow(2 + i, kept, -back))).item(), 0.0);
      r = r.narrow(2 + i, 0, kept);
      y_read = y_read.narrow(2 + i, 0, kept);
    }
    EXPECT_NEAR(dot(y_read, r), dot(x, conv2d(r, w, Tensor(), a)), 1e-9);
  }
}

TEST(ConvTranspose3d, IsTheAdjointOfConv3d) {
  // Time stride 2 with output padding 1, 2 groups, a spatial dilation of 2.
  Generator gen(82);
  Tensor x = randn({2, 4, 3, 4, 4}, gen, DType::f64), w = randn({4, 3, 2, 3, 3}, gen, DType::f64);
  ConvTranspose3dArgs t;
  t.stride = {2, 1, 1};
  t.padding = {1, 2, 2};
  t.output_padding = {1, 0, 0};
  t.dilation = {1, 2, 2};
  t.groups = 2;
  Tensor y = conv_transpose3d(x, w, Tensor(), t);
  ASSERT_EQ(y.sizes(), (Shape{2, 6, 5, 4, 4}));
  Tensor r = randn(y.sizes(), gen, DType::f64);
  Conv3dArgs a;
  a.stride = t.stride;
  a.padding = {1, 0, 2, 2, 2, 2};
  a.dilation = t.dilation;
  a.groups = 2;
  EXPECT_NEAR(dot(y, r), dot(x, conv3d(r, w, Tensor(), a)), 1e-9);
}

TEST(ConvTranspose1d, OutputPaddingBelowTheDilationButNotTheStride) {
  // Stride 1, kernel [1, 10] dilated 3: the uncropped result of x = [1, 2] is
  // [1, 2, 0, 10, 20]. output_padding 2 (< dilation 3) extends it by two positions, which
  // padding p then shifts in: [p, 7 - p) of [1, 2, 0, 10, 20, 0, 0], plus the bias.
  Tensor x = from_vector({1, 2}, {1, 1, 2}), w = from_vector({1, 10}, {1, 1, 2});
  ConvTranspose1dArgs a;
  a.dilation = {3};
  a.output_padding = {2};
  EXPECT_TRUE(values_are(conv_transpose1d(x, w, Tensor(), a), {1, 2, 0, 10, 20, 0, 0}));
  a.padding = {1};
  EXPECT_TRUE(values_are(conv_transpose1d(x, w, Tensor(), a), {2, 0, 10, 20, 0}));
  a.padding = {2};
  EXPECT_TRUE(values_are(conv_transpose1d(x, w, from_vector({0.5}, {1}), a), {0.5, 10.5, 20.5}));
}

TEST(ConvTranspose3d, OutputPaddingBelowTheDilationGradCheck) {
  Tensor x = test::rand_leaf({1, 2, 2, 3, 2}, 6), w = test::rand_leaf({2, 1, 2, 2, 2}, 7),
         b = test::rand_leaf({1}, 8);
  ConvTranspose3dArgs a;
  a.stride = {1, 2, 1};
  a.padding = {1, 0, 2};
  a.output_padding = {1, 2, 1};
  a.dilation = {2, 3, 2};
  EXPECT_GRAD_OK(
      [a](const std::vector<Tensor>& in) { return conv_transpose3d(in[0], in[1], in[2], a); },
      {x, w, b});
}

TEST(ConvTranspose2d, GradCheckStridedPaddedGroupedDilated) {
  Tensor x = test::rand_leaf({2, 4, 3, 3}, 1), w = test::rand_leaf({4, 1, 3, 2}, 2),
         b = test::rand_leaf({2}, 3);
  ConvTranspose2dArgs a;
  a.stride = {2, 3};
  a.padding = {1, 0};
  a.output_padding = {1, 2};
  a.dilation = {1, 2};
  a.groups = 2;
  EXPECT_GRAD_OK(
      [a](const std::vector<Tensor>& in) { return conv_transpose2d(in[0], in[1], in[2], a); },
      {x, w, b});
}

TEST(ConvTranspose3d, GradCheckWithoutBias) {
  Tensor x = test::rand_leaf({1, 2, 2, 3, 2}, 4), w = test::rand_leaf({2, 2, 2, 2, 3}, 5);
  ConvTranspose3dArgs a;
  a.stride = {1, 2, 2};
  a.padding = {0, 1, 1};
  EXPECT_GRAD_OK(
      [a](const std::vector<Tensor>& in) { return conv_transpose3d(in[0], in[1], Tensor(), a); },
      {x, w});
}

// An empty input makes no transposed convolution, though its kernel alone would span a
// result ((0 - 1) * stride + kernel rows): PyTorch refuses it, as zt, unless the batch is
// empty (an empty result).
TEST(ConvTranspose2d, AnEmptySpatialAxisIsRefusedUnlessTheBatchIsEmpty) {
  const Tensor w = ones({4, 2, 3, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(zeros({1, 4, 0, 3}), w, Tensor());
      },
      "conv_transpose2d: input [1, 4, 0, 3] is empty along H; only an "
      "empty batch"));
  ConvTranspose2dArgs big;  // output_padding at the stride: the cropped route
  big.stride = {2, 2};
  big.output_padding = {2, 2};
  big.dilation = {3, 3};
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(zeros({1, 4, 3, 0}), w, ones({2}), big);
      },
      "is empty along W"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose1d(zeros({1, 4, 0}), ones({4, 2, 3}), Tensor());
      },
      "conv_transpose1d: input [1, 4, 0] is empty along L"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose3d(zeros({2, 4, 1, 0, 1}), ones({4, 2, 1, 1, 1}), Tensor());
      },
      "conv_transpose3d: input [2, 4, 1, 0, 1] is empty along H"));
  const Tensor y = conv_transpose2d(zeros({0, 4, 0, 3}), w, ones({2}));
  EXPECT_EQ(y.sizes(), (Shape{0, 2, 2, 5}));
}

TEST(ConvTranspose2d, ErrorsNameTheArgument) {
  Tensor x = zeros({1, 4, 3, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(x, zeros({3, 2, 3, 3}), Tensor());
      },
      "conv_transpose2d: input has 4 channels but weight expects 3"));
  ConvTranspose2dArgs big;
  big.stride = {2, 2};
  big.output_padding = {2, 0};
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(x, zeros({4, 2, 3, 3}), Tensor(), big);
      },
      "conv_transpose2d: output_padding along H (2) must be >= 0 and smaller than the stride "
      "(2) or the dilation (1)"));
  big.stride = {1, 2};
  big.output_padding = {0, 3};
  big.dilation = {1, 3};
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(x, zeros({4, 2, 3, 3}), Tensor(), big);
      },
      "conv_transpose2d: output_padding along W (3) must be >= 0 and smaller than the stride "
      "(2) or the dilation (3)"));
  ConvTranspose2dArgs thin;
  thin.padding = {0, 3};
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(x, zeros({4, 2, 3, 3}), Tensor(), thin);
      },
      "the output W would be -1"));
  ConvTranspose2dArgs three;
  three.groups = 3;
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(x, zeros({4, 2, 3, 3}), Tensor(), three);
      },
      "groups=3 must be >= 1 and divide the input channels (4)"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv_transpose2d(x, zeros({4, 2, 3, 3}), zeros({3}));
      },
      "bias [3] must be (2)"));
}
