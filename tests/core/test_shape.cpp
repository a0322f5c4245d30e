// Shape ops: pad, interpolate_nearest, repeat_interleave, repeat, cat, stack, split and
// chunk. Hand-computed values, f64 gradient checks (incl. non-contiguous inputs and
// uneven sizes), views that share storage, and argument errors.
#include <cmath>
#include <string>

#include "common/test_util.h"

using namespace zt;
using zt::test::throws_with;
using zt::test::values_are;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

}  // namespace

TEST(Pad, AsymmetricConstant) {
  // x = [[1,2],[3,4]]; pads {left 1, right 0, top 0, bottom 2}, value -1:
  //  -1  1  2
  //  -1  3  4
  //  -1 -1 -1
  //  -1 -1 -1
  Tensor x = from_vector({1, 2, 3, 4}, {2, 2});
  Tensor y = pad(x, {1, 0, 0, 2}, -1.0);
  EXPECT_EQ(y.sizes(), (Shape{4, 3}));
  EXPECT_TRUE(values_are(y, {-1, 1, 2, -1, 3, 4, -1, -1, -1, -1, -1, -1}));
  // Only the last dim of a 3-D tensor: right and bottom by 1 as in Downsample.
  Tensor z = pad(arange(1, 5).reshape({1, 2, 2}), {0, 1, 0, 1});
  EXPECT_TRUE(values_are(z, {1, 2, 0, 3, 4, 0, 0, 0, 0}));
}

TEST(Pad, NegativePadsCrop) {
  // [1,2,3] with {-1, 1}: drop the first element, append one 7.
  EXPECT_TRUE(values_are(pad(from_vector({1, 2, 3}, {3}), {-1, 1}, 7.0), {2, 3, 7}));
  // Crops that take all of x leave only padding: [1, 2] with {3, -3} is two 7s, and its
  // gradient is zero (an empty x gives an empty one).
  Tensor x = from_vector({1, 2}, {2}).set_requires_grad(true);
  Tensor y = pad(x, {3, -3}, 7.0);
  EXPECT_TRUE(values_are(y, {7, 7}));
  sum(y).backward();
  EXPECT_TRUE(values_are(x.grad(), {0, 0}));
  // The same from the front: {-3, 3} crops past x's end, and appends two 7s.
  Tensor z = from_vector({1, 2}, {2}).set_requires_grad(true);
  Tensor w = pad(z, {-3, 3}, 7.0);
  EXPECT_TRUE(values_are(w, {7, 7}));
  sum(w).backward();
  EXPECT_TRUE(values_are(z.grad(), {0, 0}));
  EXPECT_TRUE(values_are(pad(from_vector({1, 2, 3}, {3}), {-4, 2}, 7.0), {7}));
  Tensor e = zeros({0}).set_requires_grad(true);
  Tensor f = pad(e, {2, -1}, 0.5);
  EXPECT_TRUE(values_are(f, {0.5}));
  sum(f).backward();
  EXPECT_EQ(e.grad().numel(), 0);
}

TEST(Pad, GradCheck) {
  Tensor x = test::rand_leaf({2, 3, 4}, 1);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return pad(in[0], {1, 2, 0, 1}, 0.5);
                 }),
                 {x});
  // Cropping on one side, padding on the other, input a transposed view.
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return pad(in[0].transpose(0, 2), {-1, 2, 1, -2, 0, 1});
                 }),
                 {x});
}

TEST(Pad, Errors) {
  Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_with([&] { pad(x, {1, 2, 3}); }, "(before, after) pairs"));
  EXPECT_TRUE(throws_with([&] { pad(x, {1, 1, 1, 1, 1, 1}); }, "at most one pair per dim"));
  EXPECT_TRUE(throws_with([&] { pad(x, {-2, -2}); }, "give a negative size"));
}

TEST(Interpolate, NearestIndexRule) {
  // 1-D 3 -> 5: scale 0.6, sources floor(0, .6, 1.2, 1.8, 2.4) = 0, 0, 1, 1, 2.
  Tensor x = from_vector({10, 20, 30}, {1, 1, 3});
  EXPECT_TRUE(values_are(interpolate_nearest(x, {5}), {10, 10, 20, 20, 30}));
  // 2-D x2: every pixel becomes a 2x2 block.
  Tensor y = interpolate_nearest(from_vector({1, 2, 3, 4}, {1, 1, 2, 2}), {4, 4});
  EXPECT_TRUE(values_are(y, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // Downsample 4 -> 2 picks sources 0 and 2.
  EXPECT_TRUE(values_are(interpolate_nearest(arange(0, 4).reshape({1, 1, 4}), {2}), {0, 2}));
  // 3-D, time only: (2, 1, 2) -> (4, 1, 2) repeats frames f0 f0 f1 f1.
  Tensor t = interpolate_nearest(arange(0, 4).reshape({1, 1, 2, 1, 2}), {4, 1, 2});
  EXPECT_TRUE(values_are(t, {0, 1, 0, 1, 2, 3, 2, 3}));
}

TEST(Interpolate, GradCheck) {
  // Uneven 2-D resize (3x2 -> 5x3) from a transposed view, and a 3-D x2 upsample.
  Tensor x = test::rand_leaf({2, 2, 3, 2}, 2);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return interpolate_nearest(in[0].transpose(0, 1), {5, 3});
                 }),
                 {x});
  Tensor v = test::rand_leaf({1, 2, 2, 2, 3}, 3);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return interpolate_nearest(in[0], {4, 4, 6});
                 }),
                 {v});
  Tensor s = test::rand_leaf({1, 1, 7}, 4);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) { return interpolate_nearest(in[0], {3}); }),
                 {s});
}

// A 16-bit input's gradient sums its output pixels' gradients in f32 and rounds once, as
// PyTorch's: 1 + 3 x 2^-8 = 1.01171875 rounds (a tie, to even) to bf16 1.015625; rounded
// after every add, each 2^-8 was lost (1.0), an error that grows with the upsampling factor.
TEST(Interpolate, A16BitGradientIsSummedInF32AndRoundedOnce) {
  Tensor x = ones({1, 1, 1, 1}, DType::bf16);
  x.set_requires_grad(true);
  Tensor g = from_vector({1, 1.0 / 256, 1.0 / 256, 1.0 / 256}, {1, 1, 2, 2}).to(DType::bf16);
  sum(mul(interpolate_nearest(x, {2, 2}), g)).backward();
  EXPECT_TRUE(values_are(x.grad(), {1.015625}, 0));
}

TEST(Interpolate, Errors) {
  EXPECT_TRUE(throws_with(
      [] {
        interpolate_nearest(zeros({1, 2, 3}), {4, 4});
      },
      "must be (N, C, *spatial) with 2 spatial dims"));
  EXPECT_TRUE(throws_with([] { interpolate_nearest(zeros({1, 2, 3}), {0}); }, ">= 1"));
}

TEST(Repeat, InterleaveValues) {
  Tensor x = from_vector({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(values_are(repeat_interleave(x, 2, 0), {1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(values_are(repeat_interleave(x, 2, -1), {1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(repeat_interleave(x, 3, 1).sizes(), (Shape{2, 6}));
}

// An output size past 64 bits is an error naming the op, not a wrapped (empty) shape.
TEST(Repeat, SizesPast64BitsAreErrors) {
  const Tensor x = zeros({4});
  EXPECT_TRUE(throws_with([&] { repeat_interleave(x, int64_t{1} << 62, 0); },
                          "repeat_interleave: 4611686018427387904 repeats of dim 0"));
  EXPECT_TRUE(throws_with([&] { repeat(x, {int64_t{1} << 62}); }, "repeat: repeat counts"));
  EXPECT_TRUE(throws_with(
      [&] {
        pad(zeros({2}), {INT64_MAX, INT64_MAX});
      },
      "give a size past 64 bits"));
}

TEST(Repeat, TileValues) {
  // [1, 2] tiled (2, 2) gains a leading dim: [[1,2,1,2],[1,2,1,2]].
  EXPECT_TRUE(values_are(repeat(from_vector({1, 2}, {2}), {2, 2}), {1, 2, 1, 2, 1, 2, 1, 2}));
  Tensor x = from_vector({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(values_are(repeat(x, {1, 2}), {1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(values_are(repeat(x, {2, 1}), {1, 2, 3, 4, 1, 2, 3, 4}));
}

TEST(Repeat, GradCheck) {
  Tensor x = test::rand_leaf({2, 3}, 5);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return repeat_interleave(in[0].transpose(0, 1), 2, 1);
                 }),
                 {x});
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return repeat(in[0].transpose(0, 1), {2, 1, 3});
                 }),
                 {x});
  EXPECT_TRUE(throws_with([&] { repeat(x, {2}); }, "give at least one per dim"));
}

TEST(Cat, ValuesAndGrad) {
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2}), b = from_vector({5, 6}, {2, 1});
  EXPECT_TRUE(values_are(cat({a, b}, 1), {1, 2, 5, 3, 4, 6}));
  EXPECT_TRUE(values_are(cat({a, b.transpose(0, 1)}, 0), {1, 2, 3, 4, 5, 6}));
  Tensor x = test::rand_leaf({2, 3}, 6), y = test::rand_leaf({3, 1}, 7),
         z = test::rand_leaf({2, 2}, 8);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return cat({in[0], in[1].transpose(0, 1).expand({2, 3}), in[2]}, -1);
                 }),
                 {x, y, z});
}

TEST(Cat, ShapeMismatch) {
  EXPECT_TRUE(throws_with(
      [] {
        cat({zeros({2, 3}), zeros({3, 3})}, 1);
      },
      "sizes must match except in dimension 1, but tensor 1 has shape [3, 3]"));
  EXPECT_TRUE(throws_with([] { cat({zeros({2, 3}), zeros({2, 3, 1})}, 0); }, "tensor 1"));
  EXPECT_TRUE(throws_with([] { cat({zeros({2}), zeros({2}, DType::f64)}, 0); }, "dtype"));
}

TEST(Stack, ValuesAndGrad) {
  Tensor a = from_vector({1, 2}, {2}), b = from_vector({3, 4}, {2});
  EXPECT_TRUE(values_are(stack({a, b}, 0), {1, 2, 3, 4}));
  EXPECT_TRUE(values_are(stack({a, b}, 1), {1, 3, 2, 4}));
  Tensor x = test::rand_leaf({2, 3}, 9), y = test::rand_leaf({3, 2}, 10);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   return stack({in[0], in[1].transpose(0, 1)}, 1);
                 }),
                 {x, y});
  EXPECT_TRUE(throws_with([] { stack({zeros({2}), zeros({3})}, 0); }, "tensor 1 has shape [3]"));
}

TEST(Split, ViewsAndSizes) {
  Tensor x = arange(0, 10).reshape({5, 2});
  std::vector<Tensor> parts = split(x, 2, 0);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].sizes(), (Shape{1, 2}));
  EXPECT_TRUE(values_are(parts[1], {4, 5, 6, 7}));
  parts[2].fill_(-1);  // a view: writes through to x
  EXPECT_TRUE(values_are(x.narrow(0, 4, 1), {-1, -1}));
  // torch.chunk rule: pieces of ceil(n / chunks), so 6 into 4 gives 3 pieces of 2.
  EXPECT_EQ(chunk(arange(0, 6), 4, 0).size(), 3u);
  std::vector<Tensor> c = chunk(arange(0, 5), 2, 0);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(values_are(c[1], {3, 4}));
  EXPECT_TRUE(throws_with([&] { split(x, 0, 0); }, "piece size must be >= 1"));
}

// As torch.chunk: an empty dim still comes in `chunks` (empty) pieces, so code that
// unpacks a fixed number of chunks (q, k, v of a packed projection) finds them all.
TEST(Split, ChunkOfAnEmptyDimGivesTheChunksAskedFor) {
  const Tensor x = zeros({2, 0}).set_requires_grad(true);
  const std::vector<Tensor> c = chunk(x, 3, 1);
  ASSERT_EQ(c.size(), 3u);
  for (const Tensor& piece : c) EXPECT_EQ(piece.sizes(), (Shape{2, 0}));
  (sum(c[0]) + sum(c[2])).backward();
  EXPECT_EQ(x.grad().sizes(), (Shape{2, 0}));
  EXPECT_EQ(split(x, 2, 1).size(), 1u);  // split by size: one empty piece, as torch.split
}

TEST(Split, GradCheck) {
  Tensor x = test::rand_leaf({5, 3}, 11);
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   std::vector<Tensor> p = split(in[0], 2, 0);
                   return add(mul(p[0], 2.0), cat({p[2], p[2]}, 0));
                 }),
                 {x});
  EXPECT_GRAD_OK(Fn([](const std::vector<Tensor>& in) {
                   std::vector<Tensor> p = chunk(in[0].transpose(0, 1), 2, 1);
                   return mul(p[0], p[0].narrow(1, 0, 3));
                 }),
                 {x});
}

// split() is one autograd node: the pieces' gradients go into one input gradient (zeros
// for a piece that got none), and when an op hands the pieces gradients that are the
// narrows of one tensor laid out as the input (the fused attention's dq, dk, dv of a
// packed projection), that tensor is the input's gradient as it is, not a copy.
TEST(Split, GradientsOfThePiecesJoinIntoOneWithoutACopy) {
  const Tensor x = zeros({2, 3, 6}).set_requires_grad(true);
  std::vector<Tensor> p = split(x, 2, 2);
  (sum(p[0]) + sum(mul(p[2], 3.0))).backward();
  EXPECT_TRUE(values_are(x.grad().select(0, 1).select(0, 2), {1, 1, 0, 0, 3, 3}));

  // The gradient split() passes on, seen by the op before it (a spy: identity forward).
  const Tensor y = zeros({2, 3, 6}).set_requires_grad(true);
  const Tensor buffer = arange(0, 36).reshape({2, 3, 6});
  Tensor seen;
  auto run = [&](bool adjacent) {
    const std::vector<Tensor> spied = autograd::apply_function(
        "spy", {y}, [](const std::vector<Tensor>& in) { return in; },
        [&seen](const std::vector<Tensor>& g) {
          seen = g[0];
          return g;
        });
    const std::vector<Tensor> out = autograd::apply_function(
        "joint", split(spied[0], 2, 2), [](const std::vector<Tensor>& in) { return in; },
        [&buffer, adjacent](const std::vector<Tensor>&) {
          std::vector<Tensor> g = split(buffer, 2, 2);
          if (!adjacent) std::swap(g[0], g[1]);  // not laid out as the input: copied
          return g;
        });
    (sum(out[0]) + sum(out[1]) + sum(out[2])).backward();
  };
  run(true);
  EXPECT_TRUE(test::all_close(seen, buffer, 0, 0));
  EXPECT_EQ(seen.data_ptr(), buffer.data_ptr()) << "the buffer itself, not a copy";
  run(false);
  EXPECT_NE(seen.data_ptr(), buffer.data_ptr());
  EXPECT_TRUE(values_are(seen.select(0, 0).select(0, 0), {2, 3, 0, 1, 4, 5}));
}

TEST(Shape, AsStridedViewsTheStorageWithinItsBounds) {
  const Tensor x = arange(0, 12);
  EXPECT_TRUE(values_are(x.as_strided({2, 3}, {4, 1}, 2), {2, 3, 4, 6, 7, 8}));
  EXPECT_TRUE(values_are(x.narrow(0, 6, 2).as_strided({3}, {2}, 1), {1, 3, 5}))
      << "the offset counts from the storage's start, as offset() does";
  EXPECT_TRUE(throws_with(
      [&] {
        (void)x.as_strided({2, 3}, {6, 1}, 4);
      },
      "reach past the storage's 12 elements"));
  EXPECT_TRUE(throws_with([&] { (void)x.as_strided({2}, {1, 1}, 0); }, "1 sizes but 2 strides"));
  // A stride whose reach overflows 64 bits does not wrap back into range.
  EXPECT_TRUE(throws_with([&] { (void)x.as_strided({3}, {int64_t{1} << 62}, 0); },
                          "reach past the storage's 12 elements"));
  // An empty view may start at the end of the storage, not past it.
  EXPECT_EQ(x.as_strided({0}, {1}, 12).numel(), 0);
  EXPECT_TRUE(throws_with([&] { (void)x.as_strided({0}, {1}, 13); }, "from element 13"));
}

// A tensor with a dimension of size 0 has no element to lay out: it is contiguous whatever
// its strides, so views, reshapes and the ops built on them work (as in PyTorch).
TEST(Shape, TensorsWithAZeroSizeDimensionWorkInEveryPosition) {
  const Tensor e = zeros({3, 0});
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_EQ(e.view({3, 0}).sizes(), (Shape{3, 0}));
  EXPECT_EQ(e.reshape({-1}).sizes(), (Shape{0}));
  EXPECT_EQ(e.unsqueeze(0).sizes(), (Shape{1, 3, 0}));
  EXPECT_EQ(zeros({3, 0, 1}).squeeze(2).sizes(), (Shape{3, 0}));
  EXPECT_EQ(matmul(zeros({4, 2, 0}), zeros({0, 3})).sizes(), (Shape{4, 2, 3}));
  EXPECT_TRUE(values_are(matmul(ones({2, 0}), ones({0, 3})), {0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(bmm(zeros({2, 2, 3}), zeros({2, 3, 0})).sizes(), (Shape{2, 2, 0}));
  EXPECT_EQ(linear(ones({3, 5}), ones({0, 5}), Tensor()).sizes(), (Shape{3, 0}));
  // No input features: the output is the bias.
  EXPECT_TRUE(
      values_are(linear(ones({2, 0}), ones({2, 0}), from_vector({1, 2}, {2})), {1, 2, 1, 2}));
  EXPECT_TRUE(test::throws_with(
      [] {
        matmul(ones({2, 3, 4}), ones({3, 4, 5}));
      },
      "matmul of [2, 3, 4] and [3, 4, 5]: shapes [2] and [3] cannot be "
      "broadcast together"));
}

// Arguments that would overflow a size, or describe an impossible view, are refused.
TEST(Shape, OverflowingAndInvertedArgumentsAreRefused) {
  EXPECT_TRUE(test::throws_with([] { zeros({int64_t{1} << 62}); }, "has more bytes than an int64"));
  EXPECT_TRUE(test::throws_with(
      [] {
        Tensor::empty({int64_t{1} << 32, int64_t{1} << 32});
      },
      "has more elements than an int64"));
  const Tensor x = zeros({2, 3, 5});
  EXPECT_TRUE(test::throws_with([&] { x.flatten(2, 1); }, "flatten: start_dim 2 comes after"));
  EXPECT_TRUE(test::throws_with([&] { x.narrow(0, 1, INT64_MAX); }, "narrow: "));
  EXPECT_EQ(x.slice(2, 0, 5, INT64_MAX).sizes(), (Shape{2, 3, 1}));
  EXPECT_TRUE(test::throws_with([] { ones({1}).expand({-2}); }, "expand: negative size -2"));
  // Values an integer dtype cannot hold, and ranges with no finite length.
  EXPECT_TRUE(test::throws_with([] { full({2}, 3e9, DType::i32); },
                                "fill_: 3e+09 cannot be converted to i32 without overflow"));
  EXPECT_TRUE(test::throws_with([] { full({2}, NAN, DType::i64); }, "cannot be converted to i64"));
  EXPECT_TRUE(values_are(full({2}, -2147483648.0, DType::i32), {-2147483648.0, -2147483648.0}));
  EXPECT_TRUE(test::throws_with([] { arange(0, 1e30); }, "arange: the range [0, 1e+30)"));
  EXPECT_TRUE(test::throws_with([] { arange(0, NAN); }, "arange: "));
}
