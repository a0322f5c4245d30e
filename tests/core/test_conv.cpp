// conv2d / conv3d: hand-computed values, agreement with a direct (7-loop) reference on
// shapes that exercise padding, stride, odd sizes and sample chunking, f64 gradient
// checks (incl. non-contiguous inputs), backward reading the weight at backward time,
// the Winograd path of "same" 3x3 convolutions (forward and both gradients), and
// argument errors.
#include <string>
#include <tuple>

#include "common/test_util.h"
#include "core/conv_reference.h"
#include "core/cpu/winograd.h"

using namespace zt;
using zt::test::reference_conv3d;
using zt::test::throws_with;
using zt::test::values_are;
using zt::test::winograd_kernels;

TEST(Conv2d, HandComputedWindowSums) {
  // x = [[1,2,3],[4,5,6],[7,8,9]], w = ones(2x2): each output sums a 2x2 window.
  Tensor x = arange(1, 10).reshape({1, 1, 3, 3});
  Tensor w = ones({1, 1, 2, 2});
  EXPECT_TRUE(values_are(conv2d(x, w, Tensor()), {12, 16, 24, 28}));
  // Pad top 1 and right 1, stride 2: padded rows are [0 0 0 0], [1 2 3 0], [4 5 6 0],
  // [7 8 9 0]; windows at (0,0) (0,2) (2,0) (2,2) sum to 3, 3, 24, 15; bias adds 0.5.
  Conv2dArgs a;
  a.stride = {2, 2};
  a.padding = {1, 0, 0, 1};
  Tensor y = conv2d(x, w, full({1}, 0.5), a);
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(values_are(y, {3.5, 3.5, 24.5, 15.5}));
}

TEST(Conv2d, HandComputedPointwiseMixesChannels) {
  // 1x1 conv: out[o] = sum_c w[o][c] x[c] + b[o]. Two samples (the second is 10x the
  // first) so the batch runs as one chunk. w = [[1, 1], [2, -1]], b = [0, 1].
  Tensor x =
      from_vector({1, 2, 3, 4, 10, 20, 30, 40, 10, 20, 30, 40, 100, 200, 300, 400}, {2, 2, 2, 2});
  Tensor w = from_vector({1, 1, 2, -1}, {2, 2, 1, 1});
  Tensor y = conv2d(x, w, from_vector({0, 1}, {2}));
  EXPECT_TRUE(values_are(
      y, {11, 22, 33, 44, -7, -15, -23, -31, 110, 220, 330, 440, -79, -159, -239, -319}));
}

TEST(Conv2d, PointwiseFewInputsHasTheBitsOfTheScalarSum) {
  // A 1x1 convolution of at most 8 input channels sums each output in registers: the bias,
  // then the products in input order, as the scalar loop below (built without fused
  // multiply-adds) does, in every lane and in a row's tail. 5x7 maps leave tails of 3 past
  // the 8- and 4-lane blocks; with and without a bias; 1, 4 and 8 inputs.
  Generator gen(21);
  for (int64_t k : {1, 4, 8}) {
    for (bool with_bias : {true, false}) {
      const int64_t n = 2, o = 5, l = 35;
      Tensor x = randn({n, k, 5, 7}, gen), w = randn({o, k, 1, 1}, gen);
      Tensor b = with_bias ? randn({o}, gen) : Tensor();
      const std::vector<double> y = conv2d(x, w, b).to_vector();
      const std::vector<double> xv = x.to_vector(), wv = w.to_vector();
      const std::vector<double> bv = with_bias ? b.to_vector() : std::vector<double>(o, 0.0);
      int64_t mismatches = 0;
      for (int64_t s = 0; s < n; ++s)
        for (int64_t oc = 0; oc < o; ++oc)
          for (int64_t i = 0; i < l; ++i) {
            auto acc = static_cast<float>(bv[oc]);
            for (int64_t c = 0; c < k; ++c) {
              const float p =
                  static_cast<float>(wv[oc * k + c]) * static_cast<float>(xv[(s * k + c) * l + i]);
              acc = acc + p;
            }
            mismatches += static_cast<double>(acc) != y[(s * o + oc) * l + i];
          }
      EXPECT_EQ(mismatches, 0) << k << " inputs, bias " << with_bias;
    }
  }
}

TEST(Conv3d, HandComputedCausalTime) {
  // x (1,1,2,2,2) = 1..8, kernel along time [1, -1], one frame of front padding:
  // out0 = 1*0 - x[t0] = -(1,2,3,4); out1 = x[t0] - x[t1] = -4 everywhere.
  Tensor x = arange(1, 9).reshape({1, 1, 2, 2, 2});
  Tensor w = from_vector({1, -1}, {1, 1, 2, 1, 1});
  Conv3dArgs a;
  a.padding = {1, 0, 0, 0, 0, 0};
  Tensor y = conv3d(x, w, Tensor(), a);
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 2, 2, 2}));
  EXPECT_TRUE(values_are(y, {-1, -2, -3, -4, -4, -4, -4, -4}));
}

TEST(Conv2d, MatchesReferenceAcrossShapes) {
  struct Case {
    Shape x, w;
    std::array<int64_t, 2> stride;
    std::array<int64_t, 4> pad;
  };
  // Odd sizes with stride 2, asymmetric pads, 1x1 (direct GEMM), 1x1 with stride, and
  // batches that split into several chunks with a remainder (L = 100 -> 3 per chunk).
  const std::vector<Case> cases = {
      {{2, 3, 7, 5}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}},
      {{3, 2, 6, 6}, {5, 2, 3, 3}, {2, 2}, {0, 1, 0, 1}},
      {{2, 3, 4, 5}, {2, 3, 2, 3}, {1, 2}, {2, 0, 1, 3}},
      {{3, 4, 3, 3}, {6, 4, 1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{1, 4, 20, 20}, {3, 4, 1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{2, 4, 5, 5}, {3, 4, 1, 1}, {2, 2}, {0, 0, 0, 0}},
      {{7, 2, 10, 10}, {3, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}},
  };
  Generator gen(7);
  for (const Case& c : cases) {
    Tensor x = randn(c.x, gen), w = randn(c.w, gen), b = randn({c.w[0]}, gen);
    Conv2dArgs a;
    a.stride = c.stride;
    a.padding = c.pad;
    Tensor y = conv2d(x, w, b, a);
    Tensor ref = reference_conv3d(x.unsqueeze(2), w.unsqueeze(2), b, {1, c.stride[0], c.stride[1]},
                                  {0, c.pad[0], c.pad[2]}, {1, y.size(2), y.size(3)})
                     .squeeze(2);
    EXPECT_CLOSE(y.to(DType::f64), ref, 1e-4, 1e-4)
        << "x " << shape_str(c.x) << " w " << shape_str(c.w);
  }
}

TEST(Conv3d, MatchesReferenceTokenizerShapes) {
  // The tokenizer's causal convs: k (3,3,3) s 1 and k (4,3,3) s (2,1,1), time padded
  // (k - s, 0), space (1, 1); plus the time-only (3,1,1).
  struct Case {
    Shape w;
    std::array<int64_t, 3> stride;
    std::array<int64_t, 6> pad;
  };
  const std::vector<Case> cases = {{{4, 4, 3, 3, 3}, {1, 1, 1}, {2, 0, 1, 1, 1, 1}},
                                   {{4, 4, 4, 3, 3}, {2, 1, 1}, {2, 0, 1, 1, 1, 1}},
                                   {{3, 4, 3, 1, 1}, {1, 1, 1}, {2, 0, 0, 0, 0, 0}}};
  Generator gen(8);
  Tensor x = randn({2, 4, 4, 4, 4}, gen);
  for (const Case& c : cases) {
    Tensor w = randn(c.w, gen), b = randn({c.w[0]}, gen);
    Conv3dArgs a;
    a.stride = c.stride;
    a.padding = c.pad;
    Tensor y = conv3d(x, w, b, a);
    Tensor ref = reference_conv3d(x, w, b, c.stride, {c.pad[0], c.pad[2], c.pad[4]},
                                  {y.size(2), y.size(3), y.size(4)});
    EXPECT_CLOSE(y.to(DType::f64), ref, 1e-4, 1e-4) << "w " << shape_str(c.w);
  }
}

// The geometry of a "same" 3x3 convolution (3-D with a depth-1 kernel when d > 1), for
// checking which path the tests below take: the choice is made silently.
namespace {
ConvGeometry same_3x3(int64_t c, int64_t o, int64_t d, int64_t h, int64_t w) {
  ConvGeometry g;
  g.c = c;
  g.o = o;
  g.d = g.od = d;
  g.h = g.oh = h;
  g.w = g.ow = w;
  g.kh = g.kw = 3;
  g.pad_h = g.pad_w = 1;
  return g;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && test::all_close(a, b, 0.0, 0.0);
}
}  // namespace

// "Same" 3x3 convolutions with >= 16 channels on both sides take the Winograd F(2x2, 3x3)
// path (core/cpu/winograd.h). Sizes cover full 8-tile vector groups plus scalar tails
// (tiles per row 16 + 2), odd H and W (partial edge tiles), 1x1 images and depth slices,
// and widths of 16 and 32 (rows of 8 and 16 tiles, which f32 with AVX2 reads in place).
TEST(Conv2d, WinogradMatchesReference) {
  // The last case's 25 rows of 32 tiles a sample are more than a chunk holds: each sample is
  // cut into pieces of 6 and 7 rows.
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{2, 16, 7, 9}, 24},  {{1, 16, 20, 36}, 16}, {{3, 32, 1, 1}, 16},  {{2, 16, 4, 4}, 17},
      {{2, 16, 5, 16}, 16}, {{1, 16, 6, 32}, 20},  {{2, 16, 50, 64}, 16}};
  Generator gen(31);
  for (const auto& [xs, o] : cases) {
    ASSERT_TRUE(cpu::winograd_applies(same_3x3(xs[1], o, 1, xs[2], xs[3]))) << shape_str(xs);
    Tensor x = randn(xs, gen), w = randn({o, xs[1], 3, 3}, gen), b = randn({o}, gen);
    Conv2dArgs a;
    a.padding = {1, 1, 1, 1};
    Tensor y = conv2d(x, w, b, a);
    Tensor ref =
        reference_conv3d(x.unsqueeze(2), w.unsqueeze(2), b, {1, 1, 1}, {0, 1, 1}, {1, xs[2], xs[3]})
            .squeeze(2);
    EXPECT_CLOSE(y.to(DType::f64), ref, 1e-4, 1e-4) << "x " << shape_str(xs) << " O " << o;
    EXPECT_TRUE(
        same_bits(y, winograd_kernels(same_3x3(xs[1], o, 1, xs[2], xs[3]), x, w, b, y.sizes())[0]))
        << "x " << shape_str(xs) << " O " << o << ": conv2d did not take the Winograd path";
  }
}

TEST(Conv3d, WinogradDepthSlicesMatchReference) {
  ASSERT_TRUE(cpu::winograd_applies(same_3x3(16, 16, 3, 6, 5)));
  Generator gen(32);
  Tensor x = randn({2, 16, 3, 6, 5}, gen), w = randn({16, 16, 1, 3, 3}, gen);
  Conv3dArgs a;
  a.padding = {0, 0, 1, 1, 1, 1};
  Tensor y = conv3d(x, w, Tensor(), a);
  Tensor ref = reference_conv3d(x, w, Tensor(), {1, 1, 1}, {0, 1, 1}, {3, 6, 5});
  EXPECT_CLOSE(y.to(DType::f64), ref, 1e-4, 1e-4);
  EXPECT_TRUE(
      same_bits(y, winograd_kernels(same_3x3(16, 16, 3, 6, 5), x, w, Tensor(), y.sizes())[0]))
      << "conv3d did not take the Winograd path";
}

TEST(Conv2d, WinogradGradientsMatchDirectPath) {
  // The reference splits the input channels into groups of 8, each conv too thin for
  // Winograd, and sums them: the same function through the direct path. f64 and f32, and
  // f32 at widths 12 (rows of 4 + 2 tiles), 32 (input rows read in place) and 4x4 images
  // (whole images at a time).
  const std::vector<std::tuple<DType, int64_t, int64_t>> cases = {{DType::f64, 9, 18},
                                                                  {DType::f32, 9, 18},
                                                                  {DType::f32, 6, 12},
                                                                  {DType::f32, 5, 32},
                                                                  {DType::f32, 4, 4}};
  for (const auto& [dt, height, width] : cases) {
    ASSERT_TRUE(cpu::winograd_applies(same_3x3(16, 24, 1, height, width)));
    ASSERT_FALSE(cpu::winograd_applies(same_3x3(8, 24, 1, height, width)));
    Generator gen(33);
    Tensor x = randn({2, 16, height, width}, gen, dt), w = randn({24, 16, 3, 3}, gen, dt);
    Tensor b = randn({24}, gen, dt), go = randn({2, 24, height, width}, gen, dt);
    Conv2dArgs a;
    a.padding = {1, 1, 1, 1};
    auto grads = [&](bool split) {
      Tensor xl = x.clone().set_requires_grad(true), wl = w.clone().set_requires_grad(true);
      Tensor bl = b.clone().set_requires_grad(true);
      Tensor y = split ? add(conv2d(xl.slice(1, 0, 8), wl.slice(1, 0, 8), bl, a),
                             conv2d(xl.slice(1, 8, 16), wl.slice(1, 8, 16), Tensor(), a))
                       : conv2d(xl, wl, bl, a);
      y.backward(go);
      return std::vector<Tensor>{y, xl.grad(), wl.grad(), bl.grad()};
    };
    const std::vector<Tensor> wino = grads(false), direct = grads(true);
    const double tol = dt == DType::f64 ? 1e-10 : 1e-4;
    for (size_t i = 0; i < wino.size(); ++i)
      EXPECT_CLOSE(wino[i].to(DType::f64), direct[i].to(DType::f64), tol, tol)
          << dtype_name(dt) << " output " << i;
    // The comparison above is of two paths: the whole conv's output and gradients are the
    // Winograd kernels' (the bias gradient is the same sum on every path).
    const std::vector<Tensor> kernels =
        winograd_kernels(same_3x3(16, 24, 1, height, width), x, w, b, wino[0].sizes(), go);
    for (size_t i = 0; i < kernels.size(); ++i)
      EXPECT_TRUE(same_bits(wino[i], kernels[i]))
          << dtype_name(dt) << " output " << i << ": conv2d did not take the Winograd path";
  }
}

TEST(Conv2d, GradCheckStridedAsymmetric) {
  // Odd H/W with stride 2 and asymmetric padding; x, weight and bias.
  Tensor x = test::rand_leaf({2, 2, 5, 4}, 1), w = test::rand_leaf({3, 2, 3, 2}, 2),
         b = test::rand_leaf({3}, 3);
  Conv2dArgs a;
  a.stride = {2, 2};
  a.padding = {1, 0, 2, 1};
  EXPECT_GRAD_OK([a](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], a); },
                 {x, w, b});
}

TEST(Conv2d, TapsWhollyInThePaddingReadZeros) {
  // Strided (the column path) over a one-pixel input whose padding is most of the kernel's
  // reach: some taps see no input pixel at any output position. Front padding 3 with kernel
  // 3 puts a tap's first input past the single output (its span would start after its
  // end); back padding 2 with stride 2 puts taps 1 and 2 past the input's last pixel (tap
  // 1's last in-range output would be -1 / 2, which truncates to 0, not -1). Forward
  // against the direct reference, and all three gradients by central differences.
  struct Case {
    Shape x;
    std::array<int64_t, 4> pad;
  };
  for (const Case& c : {Case{{2, 2, 1, 5}, {3, 0, 0, 2}}, Case{{2, 2, 1, 1}, {0, 2, 0, 2}},
                        Case{{2, 2, 2, 1}, {2, 2, 3, 0}}}) {
    SCOPED_TRACE(shape_str(c.x));
    Tensor x = test::rand_leaf(c.x, 11), w = test::rand_leaf({3, 2, 3, 3}, 12),
           b = test::rand_leaf({3}, 13);
    Conv2dArgs a;
    a.stride = {2, 2};
    a.padding = c.pad;
    const Tensor y = conv2d(x, w, b, a);
    const Tensor ref = reference_conv3d(x.unsqueeze(2), w.unsqueeze(2), b, {1, 2, 2},
                                        {0, c.pad[0], c.pad[2]}, {1, y.size(2), y.size(3)})
                           .squeeze(2);
    EXPECT_CLOSE(y, ref, 1e-12, 1e-12);
    EXPECT_GRAD_OK([a](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], a); },
                   {x, w, b});
  }
}

TEST(Conv2d, GradCheckNonContiguousInputs) {
  // x arrives as a transposed view (N, H, C, W) -> (N, C, H, W), weight as (C, O, kh, kw)
  // transposed to (O, C, kh, kw); no bias.
  Tensor x = test::rand_leaf({2, 4, 3, 4}, 4), w = test::rand_leaf({3, 2, 3, 3}, 5);
  Conv2dArgs a;
  a.padding = {1, 1, 1, 1};
  EXPECT_GRAD_OK(
      [a](const std::vector<Tensor>& in) {
        return conv2d(in[0].transpose(1, 2), in[1].transpose(0, 1), Tensor(), a);
      },
      {x, w});
}

TEST(Conv2d, GradCheckChunkedBatchAndPointwise) {
  // 4 samples of 10x10 run as a chunk of 3 plus a remainder of 1.
  Tensor x = test::rand_leaf({4, 1, 10, 10}, 6), w = test::rand_leaf({2, 1, 3, 3}, 7),
         b = test::rand_leaf({2}, 8);
  Conv2dArgs a;
  a.padding = {1, 1, 1, 1};
  EXPECT_GRAD_OK([a](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], a); },
                 {x, w, b});
  // 1x1: a batched chunk (small maps) and the in-place per-sample path (large map).
  Tensor xs = test::rand_leaf({3, 3, 2, 3}, 9), ws = test::rand_leaf({2, 3, 1, 1}, 10);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2]); },
                 {xs, ws, test::rand_leaf({2}, 11)});
  Tensor xl = test::rand_leaf({1, 2, 16, 17}, 12), wl = test::rand_leaf({2, 2, 1, 1}, 13);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], Tensor()); },
                 {xl, wl});
}

TEST(Conv3d, GradCheckCausalStrided) {
  // Temporal downsample shape: k (4,3,3), stride (2,1,1), pads (2,0,1,1,1,1); odd W.
  Tensor x = test::rand_leaf({2, 2, 4, 3, 3}, 14), w = test::rand_leaf({2, 2, 4, 3, 3}, 15),
         b = test::rand_leaf({2}, 16);
  Conv3dArgs a;
  a.stride = {2, 1, 1};
  a.padding = {2, 0, 1, 1, 1, 1};
  EXPECT_GRAD_OK([a](const std::vector<Tensor>& in) { return conv3d(in[0], in[1], in[2], a); },
                 {x, w, b});
}

TEST(Conv3d, GradCheckOnlyWeightNeedsGrad) {
  // x does not require grad (a frozen input); only weight and bias get gradients.
  Tensor x = test::rand_leaf({1, 2, 3, 3, 2}, 17).detach();
  Tensor w = test::rand_leaf({2, 2, 2, 2, 2}, 18), b = test::rand_leaf({2}, 19);
  Conv3dArgs a;
  a.stride = {1, 2, 1};
  a.padding = {1, 0, 0, 1, 1, 0};
  EXPECT_GRAD_OK([x, a](const std::vector<Tensor>& in) { return conv3d(x, in[0], in[1], a); },
                 {w, b});
  EXPECT_FALSE(x.grad().defined());
}

TEST(Conv2d, BackwardReadsWeightAtBackwardTime) {
  // A ZeRO engine releases the weight's storage after the forward and gathers it again,
  // into new storage, before backward; dx must use the values present then (and a new
  // storage is not an in-place write). With a 1x1 conv and w = 2 then, dx = 2 * upstream.
  Tensor x = test::rand_leaf({1, 1, 2, 2}, 20);
  Tensor w = full({1, 1, 1, 1}, 5.0, DType::f64).set_requires_grad(true);
  Tensor y = conv2d(x, w, Tensor());
  w.impl()->storage = full({1, 1, 1, 1}, 2.0, DType::f64).storage();
  sum(y).backward();
  EXPECT_TRUE(values_are(x.grad(), {2, 2, 2, 2}));
}

TEST(Conv2d, F32MatchesF64) {
  Generator gen(21);
  Tensor x = randn({3, 8, 9, 9}, gen, DType::f64), w = randn({16, 8, 3, 3}, gen, DType::f64);
  Conv2dArgs a;
  a.padding = {1, 1, 1, 1};
  Tensor x32 = x.to(DType::f32).set_requires_grad(true);
  Tensor w32 = w.to(DType::f32).set_requires_grad(true);
  Tensor x64 = x.clone().set_requires_grad(true), w64 = w.clone().set_requires_grad(true);
  sum(mul(conv2d(x32, w32, Tensor(), a), conv2d(x32, w32, Tensor(), a).detach())).backward();
  sum(mul(conv2d(x64, w64, Tensor(), a), conv2d(x64, w64, Tensor(), a).detach())).backward();
  EXPECT_CLOSE(x32.grad().to(DType::f64), x64.grad(), 1e-4, 1e-3);
  EXPECT_CLOSE(w32.grad().to(DType::f64), w64.grad(), 1e-4, 1e-3);
}

TEST(Conv2d, ErrorsNameShapes) {
  Tensor x = zeros({1, 3, 4, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({2, 4, 3, 3}), Tensor());
      },
      "input has 3 channels but weight expects 4"));
  Conv2dArgs neg;
  neg.padding = {0, -1, 0, 0};
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({2, 3, 3, 3}), Tensor(), neg);
      },
      "padding along H must be >= 0"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({2, 3, 5, 3}), Tensor());
      },
      "is smaller than the kernel"));
  Conv2dArgs zero_stride;
  zero_stride.stride = {1, 0};
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({2, 3, 3, 3}), Tensor(), zero_stride);
      },
      "stride along W must be >= 1"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(x, zeros({2, 3, 3, 3}), zeros({3}));
      },
      "bias [3] must be (2)"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(zeros({3, 4, 4}), zeros({2, 3, 3, 3}), Tensor());
      },
      "input must be 4-D"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv3d(x, zeros({2, 3, 1, 3, 3}), Tensor());
      },
      "input must be 5-D"));
}

// PyTorch runs a convolution of an empty batch (an empty result of the padded size) but
// refuses any other empty input ("Only zero batch or zero channel inputs are supported"),
// though padding would make a result of the bias alone from it; so does zt, before the
// padding of either device's path.
TEST(Conv2d, AnEmptySpatialAxisIsRefusedUnlessTheBatchIsEmpty) {
  Conv2dArgs pad2;
  pad2.padding = {2, 2, 2, 2};
  const Tensor w = ones({2, 3, 3, 3}), b = ones({2});
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(zeros({1, 3, 0, 5}), w, b, pad2);
      },
      "conv2d: input [1, 3, 0, 5] is empty along H; only an empty batch"));
  EXPECT_TRUE(throws_with(
      [&] {
        conv2d(zeros({1, 3, 4, 0}), w, b, pad2);
      },
      "conv2d: input [1, 3, 4, 0] is empty along W"));
  Conv2dArgs uneven;  // padding only after: the CUDA path pads the input first
  uneven.padding = {0, 3, 0, 3};
  EXPECT_TRUE(throws_with([&] { conv2d(zeros({1, 3, 0, 0}), w, b, uneven); }, "empty along H"));
  Conv1dArgs pad1;
  pad1.padding = {1, 1};
  EXPECT_TRUE(throws_with(
      [&] {
        conv1d(zeros({2, 3, 0}), ones({2, 3, 1}), b, pad1);
      },
      "conv1d: input [2, 3, 0] is empty along L"));
  Conv3dArgs pad3;
  pad3.padding = {1, 1, 1, 1, 1, 1};
  EXPECT_TRUE(throws_with(
      [&] {
        conv3d(zeros({1, 3, 0, 2, 2}), ones({2, 3, 1, 1, 1}), b, pad3);
      },
      "conv3d: input [1, 3, 0, 2, 2] is empty along D"));
  const Tensor y = conv2d(zeros({0, 3, 0, 5}), w, b, pad2);
  EXPECT_EQ(y.sizes(), (Shape{0, 2, 2, 7}));
}

TEST(Conv2d, ThreadedMatchesSerial) {
  // Large enough that two or three threads split the batch into groups. A weight
  // gradient is summed in slices of the batch fixed by the work, not the threads, and
  // a sample's output does not depend on the chunk it is computed in: every result has
  // the serial bits. Cases: Winograd 3x3 (4 maps of 16x16: one slice; 64: several), a
  // pointwise one over chunks of several samples (10 maps of 8x8; two threads leave a
  // chunk of one at each group's end), one of 8 inputs (direct, not a GEMM), a strided
  // one with bias whose column rows (576) span several of BLAS's blocks of the summed
  // dimension: the serial run's last chunk holds one sample, three threads' first (a chunk
  // of one adds the bias after the product's whole sum, as a chunk of several), and
  // Winograd on 4x4 maps of 128 channels, whose chunks take several samples and whose
  // GEMMs are small enough for OpenBLAS's small-matrix kernels, whose sums depend on the
  // product's size: the threads take whole chunks.
  struct Case {
    Shape x, w;
    Conv2dArgs args;
  };
  Conv2dArgs same, none, down;
  same.padding = {1, 1, 1, 1};
  down.stride = {2, 2};
  down.padding = {0, 1, 0, 1};
  const Case cases[] = {
      {{4, 16, 16, 16}, {32, 16, 3, 3}, same},   {{64, 16, 16, 16}, {32, 16, 3, 3}, same},
      {{10, 128, 8, 8}, {192, 128, 1, 1}, none}, {{42, 8, 8, 8}, {256, 8, 1, 1}, none},
      {{5, 64, 16, 16}, {64, 64, 3, 3}, down},   {{8, 128, 4, 4}, {128, 128, 3, 3}, same}};
  Generator gen(22);
  for (const Case& c : cases) {
    Tensor x = randn(c.x, gen), w = randn(c.w, gen), b = randn({c.w[0]}, gen);
    Tensor go = randn(conv2d(x, w, b, c.args).sizes(), gen);
    const std::vector<Tensor> serial = test::conv2d_on_threads(1, x, w, b, go, c.args);
    for (const int threads : {2, 3}) {
      const std::vector<Tensor> threaded = test::conv2d_on_threads(threads, x, w, b, go, c.args);
      for (size_t i = 0; i < serial.size(); ++i)
        EXPECT_CLOSE(threaded[i], serial[i], 0, 0) << shape_str(c.x) << " * " << shape_str(c.w)
                                                   << ", threads " << threads << ", result " << i;
    }
  }
}

TEST(Conv2d, BiasGradientHasTheSerialBitsOnTwoThreads) {
  // 16 channels of 4 x 64 x 64 output gradients: enough that two threads take a block
  // of channels each; every channel is summed in the serial order.
  Generator gen(23);
  Tensor x = randn({4, 4, 64, 64}, gen), w = randn({16, 4, 1, 1}, gen), b = randn({16}, gen);
  Tensor go = randn({4, 16, 64, 64}, gen);
  auto bias_grad = [&](int threads) {
    test::ThreadCount count(threads);
    Tensor bl = b.clone().set_requires_grad(true);
    conv2d(x, w, bl, Conv2dArgs{}).backward(go);
    return bl.grad();
  };
  const Tensor serial = bias_grad(1), threaded = bias_grad(2);
  EXPECT_CLOSE(threaded, serial, 0, 0);
  EXPECT_CLOSE(serial, sum(go.to(DType::f64), {0, 2, 3}).to(DType::f32), 1e-5, 1e-5);
}

TEST(Conv2d, AWeightGradientSummedInSlicesIsTheSumOfEverySamplesOwn) {
  // A backward with enough work splits the batch into slices whose weight gradients are
  // added afterwards (ThreadedMatchesSerial checks that the threads do not change them, but
  // the slices are the same on any thread count). Eight samples of 16 channels at 16 x 16
  // output positions make two slices on every path: strided (columns), "same" 3x3
  // (Winograd) and 5x5 (padded planes). The batch's weight gradient is the sum of each
  // sample's own, in f64.
  struct Case {
    int64_t k, stride, pad, size;
  };
  for (const Case& c : {Case{3, 2, 1, 32}, Case{3, 1, 1, 16}, Case{5, 1, 2, 16}}) {
    SCOPED_TRACE("k=" + std::to_string(c.k) + " stride=" + std::to_string(c.stride));
    Generator gen(31);
    const Tensor x = randn({8, 16, c.size, c.size}, gen, DType::f64),
                 w = randn({16, 16, c.k, c.k}, gen, DType::f64);
    Conv2dArgs a;
    a.stride = {c.stride, c.stride};
    a.padding = {c.pad, c.pad, c.pad, c.pad};
    const Tensor go = randn({8, 16, 16, 16}, gen, DType::f64);
    auto weight_grad = [&](const Tensor& xs, const Tensor& gos) {
      Tensor wl = w.clone().set_requires_grad(true);
      conv2d(xs, wl, Tensor(), a).backward(gos);
      return wl.grad();
    };
    Tensor summed = zeros(w.sizes(), DType::f64);
    for (int64_t i = 0; i < 8; ++i)
      summed = add(summed, weight_grad(x.narrow(0, i, 1), go.narrow(0, i, 1)));
    EXPECT_CLOSE(weight_grad(x, go), summed, 1e-10, 1e-10);
  }
}
