// Elementwise ops: every op's forward value worked out by hand, broadcasting, in-place
// updates, and a central-difference gradient check for every differentiable op,
// including broadcast and non-contiguous (transposed) operands.
#include <cmath>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "core/work_counts.h"

using namespace zt;
using zt::test::values_are;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// An f64 leaf with values in [0.5, 2.5): safe for log, sqrt, rsqrt and fractional pow.
Tensor pos_leaf(const Shape& s, uint64_t seed) {
  Generator g(seed);
  Tensor t = add(mul(rand(s, g, DType::f64), 2.0), 0.5);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Elementwise, BinaryBroadcastValues) {
  // a (2, 1) = [[1], [2]], b (3) = [10, 20, 30] broadcast to (2, 3).
  Tensor a = from_vector({1, 2}, {2, 1});
  Tensor b = from_vector({10, 20, 30}, {3});
  EXPECT_TRUE(values_are(add(a, b), {11, 21, 31, 12, 22, 32}));
  EXPECT_TRUE(values_are(sub(a, b), {-9, -19, -29, -8, -18, -28}));
  EXPECT_TRUE(values_are(mul(a, b), {10, 20, 30, 20, 40, 60}));
  EXPECT_TRUE(values_are(div(b, a), {10, 20, 30, 5, 10, 15}));
  EXPECT_EQ(add(a, b).sizes(), (Shape{2, 3}));
  // a + 2 * b = [[21, 41, 61], [22, 42, 62]].
  EXPECT_TRUE(values_are(add_scaled(a, b, 2.0), {21, 41, 61, 22, 42, 62}));
  EXPECT_TRUE(values_are(a + 0.5, {1.5, 2.5}));
  EXPECT_TRUE(values_are(a * 3.0, {3, 6}));
  EXPECT_TRUE(values_are(a / 4.0, {0.25, 0.5}));
  EXPECT_TRUE(values_are(a - 1.0, {0, 1}));
  EXPECT_TRUE(values_are(-a, {-1, -2}));
  EXPECT_EQ(broadcast_shapes({4, 1, 3}, {2, 1}), (Shape{4, 2, 3}));
}

TEST(Elementwise, UnaryValues) {
  Tensor x = from_vector({-1, 0.5, 2}, {3});
  EXPECT_TRUE(values_are(neg(x), {1, -0.5, -2}));
  EXPECT_TRUE(values_are(abs(x), {1, 0.5, 2}));
  EXPECT_TRUE(values_are(relu(x), {0, 0.5, 2}));
  EXPECT_TRUE(values_are(clamp(x, 0, 1), {0, 0.5, 1}));
  // exp([0, 1, 2]) = [1, e, e^2]; log([1, e, 4]) = [0, 1, 2 ln 2].
  EXPECT_TRUE(values_are(exp(from_vector({0, 1, 2}, {3})), {1, 2.718282, 7.389056}));
  EXPECT_TRUE(values_are(log(from_vector({1, std::exp(1.0), 4}, {3})), {0, 1, 1.386294}));
  EXPECT_TRUE(values_are(sqrt(from_vector({4, 9, 2}, {3})), {2, 3, 1.414214}));
  EXPECT_TRUE(values_are(rsqrt(from_vector({4, 0.25}, {2})), {0.5, 2}));
  EXPECT_TRUE(values_are(pow(from_vector({2, 3}, {2}), 3.0), {8, 27}));
  EXPECT_TRUE(values_are(pow(from_vector({4, 9}, {2}), 0.5), {2, 3}));
  // sigmoid(ln 3) = 1 / (1 + 1/3) = 0.75; silu(ln 3) = ln 3 * 0.75 = 0.823959.
  Tensor l3 = from_vector({0, std::log(3.0)}, {2});
  EXPECT_TRUE(values_are(sigmoid(l3), {0.5, 0.75}));
  EXPECT_TRUE(values_are(silu(l3), {0, 0.823959}));
  // tanh(ln 2) = (2 - 1/2) / (2 + 1/2) = 0.6.
  EXPECT_TRUE(values_are(tanh(from_vector({0, std::log(2.0)}, {2})), {0, 0.6}));
  // gelu(x) = x Phi(x): Phi(1) = 0.841345 -> [0.841345, -0.158655, 0];
  // tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> [0.841192, -0.158808, 0].
  Tensor g = from_vector({1, -1, 0}, {3});
  EXPECT_TRUE(values_are(gelu(g), {0.841345, -0.158655, 0}));
  EXPECT_TRUE(values_are(gelu(g, true), {0.841192, -0.158808, 0}));
  // A NaN goes through relu (as PyTorch's), so a check for non-finite values still sees it.
  EXPECT_TRUE(std::isnan(relu(from_vector({NAN}, {1})).item()));
  Tensor xn = from_vector({NAN, -1, 1}, {3}, DType::f64).set_requires_grad(true);
  sum(relu(xn)).backward();
  EXPECT_TRUE(values_are(xn.grad(), {1, 0, 1}))
      << "the gradient passes at a NaN, as PyTorch's threshold_backward";
}

TEST(Elementwise, InPlaceWritesRefuseOverlappingMemory) {
  // As PyTorch's: an expand()ed destination has one memory location for several elements
  // (mul_ would scale the one element 3 times), and a source overlapping the destination in
  // part would be read after it was written.
  const Tensor one = ones({1});
  EXPECT_TRUE(
      test::throws_with([&] { mul_(one.expand({3}), 2.0); }, "mul_: the tensor written to"));
  EXPECT_TRUE(test::throws_with([&] { add_(one.expand({4}), ones({4}), 1.0); }, "stride 0"));
  EXPECT_TRUE(test::throws_with([&] { one.expand({2}).fill_(1.0); }, "fill_: "));
  EXPECT_TRUE(values_are(one, {1}));
  const Tensor x = from_vector({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  EXPECT_TRUE(test::throws_with([&] { x.narrow(0, 1, 7).copy_(x.narrow(0, 0, 7)); },
                                "copy_: the source f32[7] cpu and the tensor written to, f32[7] "
                                "cpu, overlap in part in one storage"));
  // A view laid out differently over the same elements: x += x.t() would read elements it
  // has written (in an order the threads choose), so it is refused as PyTorch refuses it.
  const Tensor m = from_vector({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(test::throws_with([&] { add_(m, m.transpose(0, 1), 1.0); }, "add_: the source"));
  EXPECT_TRUE(test::throws_with([&] { m.copy_(m.transpose(0, 1)); }, "overlap in part"));
  EXPECT_TRUE(test::throws_with([&] { mul_(m, m.transpose(0, 1)); }, "overlap in part"));
  EXPECT_TRUE(
      test::throws_with([&] { multi_copy_({m}, {m.transpose(0, 1)}); }, "multi_copy_: the source"));
  EXPECT_TRUE(values_are(m, {1, 2, 3, 4}));
  // The same elements in the same order, seen through other size-1 dims, are no overlap.
  const Tensor row = from_vector({1, 2, 3, 4}, {1, 4});
  row.transpose(0, 1).copy_(row.reshape({4, 1}));
  EXPECT_TRUE(values_are(row, {1, 2, 3, 4}));
  EXPECT_TRUE(test::throws_with(
      [&] {
        add_(ones({3}), ones({2, 3}), 1.0);
      },
      "add_: the source [2, 3] does not broadcast to the destination's "
      "shape [3]"));
  // Disjoint parts of one storage, interleaved views that share no element, and an element
  // onto itself are fine.
  x.narrow(0, 4, 4).copy_(x.narrow(0, 0, 4));
  x.slice(0, 1, 8, 2).copy_(x.slice(0, 0, 8, 2));
  EXPECT_TRUE(values_are(x, {0, 0, 2, 2, 0, 0, 2, 2}));
  mul_(x, x);
  EXPECT_TRUE(values_are(x, {0, 0, 4, 4, 0, 0, 4, 4}));
}

TEST(Elementwise, InPlaceWritesReadASourceThatSharesMemoryWithGapsBeforeWriting) {
  // A strided or broadcast source that reaches into the destination's elements without
  // being them in the same layout (no dense pair, so not refused above) gives the values
  // it had before the write, as if copied first: x[::2] = x[:3] must not read x[2] after
  // writing it.
  const Tensor x = arange(0, 6, 1, DType::f64);
  x.slice(0, 0, 6, 2).copy_(x.narrow(0, 0, 3));
  EXPECT_TRUE(values_are(x, {0, 1, 1, 3, 2, 5}));
  const Tensor y = arange(0, 6, 1, DType::f64);
  add_(y.slice(0, 0, 6, 2), y.narrow(0, 0, 3));
  EXPECT_TRUE(values_are(y, {0, 1, 3, 3, 6, 5}));
  const Tensor z = arange(1, 7, 1, DType::f64);
  mul_(z.slice(0, 0, 6, 2), z.narrow(0, 0, 3));
  EXPECT_TRUE(values_are(z, {1, 2, 6, 4, 15, 6}));
  // A column broadcast along the rows of its own matrix: m = [[1, 3], [1, 3]].
  const Tensor m = from_vector({1, 2, 3, 4}, {2, 2});
  m.copy_(m.select(1, 0).unsqueeze(0).expand({2, 2}));
  EXPECT_TRUE(values_are(m, {1, 3, 1, 3}));
}

TEST(Elementwise, PowerZeroHasAZeroGradientEverywhere) {
  // x^0 = 1: its gradient is 0 also at x = 0, where 0 * x^-1 would be NaN.
  Tensor x = from_vector({0, 2}, {2}, DType::f64).set_requires_grad(true);
  sum(pow(x, 0.0)).backward();
  EXPECT_TRUE(values_are(x.grad(), {0, 0}));
}

// rsqrt's gradient -1/2 x^-3/2 at x = 1/4096 is -131072 g: for g = 1/1024 it is -128, finite
// in f16, though x^-3/2 (262144) is not. The same holds for pow's x^(e-1). A zero upstream
// gradient gives a zero, not 0 * inf.
TEST(Elementwise, SixteenBitGradientsOfNegativePowersDoNotOverflowOnTheWay) {
  for (DType dt : {DType::f16, DType::bf16}) {
    const Tensor weights = from_vector({0, 1.0 / 1024, 1}, {3}).to(dt);
    Tensor x = from_vector({1.0 / 4096, 1.0 / 4096, 1}, {3}).to(dt).set_requires_grad(true);
    sum(mul(rsqrt(x), weights)).backward();
    EXPECT_TRUE(values_are(x.grad(), {0, -128, -0.5})) << dtype_name(dt);
    Tensor y = from_vector({1.0 / 4096, 1.0 / 4096, 1}, {3}).to(dt).set_requires_grad(true);
    sum(mul(pow(y, -0.5), weights)).backward();
    EXPECT_TRUE(values_are(y.grad(), {0, -128, -0.5})) << dtype_name(dt);
  }
}

TEST(Elementwise, WhereAndComparisons) {
  Tensor a = from_vector({1, 2, 3}, {3}), b = from_vector({3, 2, 1}, {3});
  EXPECT_TRUE(values_are(eq(a, b), {0, 1, 0}));
  EXPECT_TRUE(values_are(ne(a, b), {1, 0, 1}));
  EXPECT_TRUE(values_are(lt(a, b), {1, 0, 0}));
  EXPECT_TRUE(values_are(le(a, b), {1, 1, 0}));
  EXPECT_TRUE(values_are(gt(a, b), {0, 0, 1}));
  EXPECT_TRUE(values_are(ge(a, b), {0, 1, 1}));
  EXPECT_TRUE(values_are(gt(a, 1.5), {0, 1, 1}));
  EXPECT_TRUE(values_are(lt(a, 1.5), {1, 0, 0}));
  // An integer tensor meets the scalar as given, not truncated: 0 < 0.5 and 0 > -0.5.
  const Tensor ints = from_vector({0, 1}, {2}, DType::i64);
  EXPECT_TRUE(values_are(lt(ints, 0.5), {1, 0}));
  EXPECT_TRUE(values_are(gt(ints, -0.5), {1, 1}));
  EXPECT_TRUE(values_are(gt(ints, 0.5), {0, 1}));
  EXPECT_EQ(eq(a, b).dtype(), DType::b8);
  // where(a > b, a, b) = elementwise max = [3, 2, 3].
  EXPECT_TRUE(values_are(where(gt(a, b), a, b), {3, 2, 3}));
}

TEST(Elementwise, InPlaceAndSumTo) {
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2});
  add_(a, from_vector({10, 20}, {2}), 0.5);  // a += 0.5 * [10, 20] per row
  EXPECT_TRUE(values_are(a, {6, 12, 8, 14}));
  mul_(a, 0.5);
  EXPECT_TRUE(values_are(a, {3, 6, 4, 7}));
  // sum_to (2, 2) -> (1, 2): column sums; -> (2): same values, leading dim dropped.
  EXPECT_TRUE(values_are(sum_to(a, {1, 2}), {7, 13}));
  EXPECT_TRUE(values_are(sum_to(a, {2}), {7, 13}));
  EXPECT_TRUE(values_are(sum_to(a, {2, 1}), {9, 11}));
}

TEST(Elementwise, SumToRefusesAShapeThatDoesNotBroadcastToTheTensors) {
  // sum_to inverts expand: the target must expand to t's shape. (4, 1) -> (2, 2) and
  // (2, 3) -> (3, 2) have the elements' count but are no such shape (summing would have
  // been a reshape), nor is one with more dims or another size.
  const Tensor a = from_vector({1, 2, 3, 4}, {4, 1}), b = zeros({2, 3});
  EXPECT_TRUE(test::throws_with(
      [&] {
        sum_to(a, {2, 2});
      },
      "sum_to: shape [2, 2] does not broadcast to the tensor's [4, 1]"));
  EXPECT_TRUE(test::throws_with([&] { sum_to(b, {3, 2}); }, "sum_to: shape [3, 2]"));
  EXPECT_TRUE(test::throws_with([&] { sum_to(b, {1, 2, 3}); }, "sum_to: shape [1, 2, 3]"));
  EXPECT_TRUE(test::throws_with([&] { sum_to(b, {6}); }, "sum_to: shape [6]"));
  EXPECT_TRUE(values_are(sum_to(b, {}), {0}));
  EXPECT_TRUE(values_are(sum_to(a, {1, 1}), {10}));
}

TEST(Elementwise, UnaryGradients) {
  Tensor x = test::rand_leaf({2, 3}, 1);
  Tensor p = pos_leaf({2, 3}, 2);
  std::vector<std::pair<const char*, Fn>> any = {
      {"neg", [](auto& in) { return neg(in[0]); }},
      {"exp", [](auto& in) { return exp(in[0]); }},
      {"abs", [](auto& in) { return abs(in[0]); }},
      {"relu", [](auto& in) { return relu(in[0]); }},
      {"silu", [](auto& in) { return silu(in[0]); }},
      {"sigmoid", [](auto& in) { return sigmoid(in[0]); }},
      {"tanh", [](auto& in) { return tanh(in[0]); }},
      {"gelu", [](auto& in) { return gelu(in[0]); }},
      {"gelu_tanh", [](auto& in) { return gelu(in[0], true); }},
      {"clamp", [](auto& in) { return clamp(in[0], -0.5, 0.7); }},
      {"pow2", [](auto& in) { return pow(in[0], 2.0); }},
      {"pow3", [](auto& in) { return pow(in[0], 3.0); }},
      {"add_scalar", [](auto& in) { return add(in[0], 1.5); }},
      {"mul_scalar", [](auto& in) { return mul(in[0], -2.5); }},
  };
  for (auto& [name, fn] : any) {
    SCOPED_TRACE(name);
    EXPECT_GRAD_OK(fn, {x});
  }
  std::vector<std::pair<const char*, Fn>> positive = {
      {"log", [](auto& in) { return log(in[0]); }},
      {"sqrt", [](auto& in) { return sqrt(in[0]); }},
      {"rsqrt", [](auto& in) { return rsqrt(in[0]); }},
      {"pow_frac", [](auto& in) { return pow(in[0], 1.7); }},
  };
  for (auto& [name, fn] : positive) {
    SCOPED_TRACE(name);
    EXPECT_GRAD_OK(fn, {p});
  }
}

TEST(Elementwise, BinaryGradientsWithBroadcasting) {
  Tensor a = test::rand_leaf({2, 3}, 3);
  Tensor b = test::rand_leaf({3}, 4);
  Tensor c = test::rand_leaf({2, 1}, 5);
  Tensor d = pos_leaf({1, 3}, 6);
  std::vector<std::pair<const char*, Fn>> fns = {
      {"add", [](auto& in) { return add(in[0], in[1]); }},
      {"sub", [](auto& in) { return sub(in[0], in[1]); }},
      {"mul", [](auto& in) { return mul(in[0], in[1]); }},
      {"add_scaled", [](auto& in) { return add_scaled(in[0], in[1], -0.3); }},
  };
  for (auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    EXPECT_GRAD_OK(fn, {a, b});  // (2, 3) with (3)
    EXPECT_GRAD_OK(fn, {c, b});  // (2, 1) with (3) -> (2, 3): both broadcast
  }
  EXPECT_GRAD_OK([](auto& in) { return div(in[0], in[1]); }, {a, d});
  EXPECT_GRAD_OK([](auto& in) { return div(in[0], in[1]); }, {c, d});
}

TEST(Elementwise, NonContiguousGradients) {
  // Transposed and sliced operands go through the strided kernel paths.
  Tensor a = test::rand_leaf({3, 2}, 7);
  Tensor b = test::rand_leaf({2, 3}, 8);
  EXPECT_GRAD_OK([](auto& in) { return mul(in[0].transpose(0, 1), in[1]); }, {a, b});
  EXPECT_GRAD_OK([](auto& in) { return sigmoid(in[0].transpose(0, 1)); }, {a});
  EXPECT_GRAD_OK([](auto& in) { return sub(in[0].slice(1, 0, 3, 2), in[1].narrow(0, 1, 2)); },
                 {b, a});
}

TEST(Elementwise, WhereGradient) {
  Tensor a = test::rand_leaf({2, 3}, 9), b = test::rand_leaf({3}, 10);
  Tensor cond = from_vector({1, 0, 1, 0, 0, 1}, {2, 3}).to(DType::b8);
  EXPECT_GRAD_OK([&](auto& in) { return where(cond, in[0], in[1]); }, {a, b});
}

// addcmul(a, b, c, v) = a + v * b * c in one pass: by hand, the bits of a mul then an add
// (v = 1; f32, strided and broadcast operands), every gradient, and its errors.
TEST(Elementwise, AddcmulIsAMulAndAnAddInOnePass) {
  const Tensor a = from_vector({1, 2, 3}, {3}), b = from_vector({2, -1}, {2, 1});
  const Tensor c = from_vector({0.5, 4, -2}, {3});
  EXPECT_TRUE(values_are(addcmul(a, b, c), {2, 10, -1, 0.5, -2, 5}));
  EXPECT_TRUE(values_are(addcmul(a, b, c, -0.5), {0.5, -2, 5, 1.25, 4, 2}));
  Generator g(3);
  const Tensor x = randn({4, 6}, g), y = randn({6, 4}, g).transpose(0, 1), z = randn({6}, g);
  const int64_t before = work_counts().dispatches;
  const Tensor fused = addcmul(z, x, y);
  EXPECT_EQ(work_counts().dispatches - before, 1);
  EXPECT_TRUE(test::all_close(fused, add(mul(x, y), z), 0, 0)) << "f32, bit for bit";
  Tensor l = test::rand_leaf({2, 3}, 31), m = test::rand_leaf({3}, 32);
  Tensor r = test::rand_leaf({2, 1}, 33);
  EXPECT_GRAD_OK([](auto& in) { return addcmul(in[0], in[1], in[2], 1.5); }, {l, m, r});
  EXPECT_GRAD_OK([](auto& in) { return addcmul(in[1], in[2], in[0]); }, {l, m, r});
  EXPECT_TRUE(test::throws_with([&] { addcmul(a, b, zeros({4})); }, "addcmul"));
  EXPECT_TRUE(test::throws_with([&] { addcmul(a, a, a.to(DType::f64)); }, "addcmul"));
  const Tensor i = zeros({3}, DType::i64);
  EXPECT_TRUE(
      test::throws_with([&] { addcmul(i, i, i); }, "addcmul: expected floating tensors, got i64"));
}

// A copy onto the very same elements (a one-rank shard written from its own full value) is
// no kernel call; a copy from other elements of the storage, or from another storage, runs.
TEST(Elementwise, CopyOntoTheSameElementsRunsNoKernel) {
  Tensor t = from_vector({1, 2, 3, 4, 5, 6}, {6});
  const WorkCounts before = work_counts();
  t.copy_(t);
  t.narrow(0, 1, 3).copy_(t.narrow(0, 1, 3));
  t.reshape({2, 3}).copy_(t.view({2, 3}));
  EXPECT_EQ((work_counts() - before).dispatches, 0);
  EXPECT_TRUE(values_are(t, {1, 2, 3, 4, 5, 6}));
  t.narrow(0, 0, 3).copy_(t.narrow(0, 3, 3));  // other elements of the storage: one call
  t.narrow(0, 3, 3).copy_(t.narrow(0, 3, 3).to(DType::f64));  // a cast, then a copy back
  EXPECT_EQ((work_counts() - before).dispatches, 3);
  EXPECT_TRUE(values_are(t, {4, 5, 6, 4, 5, 6}));
}

// log1p over the whole finite range against std::log1p: tiny values (where 1 + x rounds to
// 1 or nearly), moderate ones, and the largest floats, whose log1p is only about 88 (f32) or
// 709 (f64); no step may overflow on the way. Its gradient stays 1 / (1 + x).
TEST(Elementwise, Log1pIsAccurateFromTinyToTheLargestFloats) {
  const std::vector<double> xs = {
      1e-30, 1e-10, -1e-10, 3e-8, -0.75, -0.25, 0.4,   3.0,   1e3,
      1e10,  3e36,  1e37,   1e38, 3e38,  1e300, 1e306, 1e308, std::numeric_limits<double>::max()};
  for (DType dt : {DType::f64, DType::f32}) {
    // f32 inputs are the floats nearest to xs (up to FLT_MAX); the reference is exact enough
    // in double. Both tolerances are about two ulps of the result.
    const bool f32 = dt == DType::f32;
    const double tol = f32 ? 2.4e-7 : 4.5e-16;
    for (double v : xs) {
      if (f32 && v > std::numeric_limits<float>::max()) continue;
      const double x = f32 ? static_cast<double>(static_cast<float>(v)) : v;
      const double want = std::log1p(x);
      const double got = log1p(from_vector({x}, {1}, dt)).item();
      EXPECT_NEAR(got, want, tol * std::abs(want)) << dtype_name(dt) << " log1p(" << x << ")";
    }
  }
  // bf16 and f16 run in f32: a bf16 near 1e37 is finite too.
  const double b = log1p(from_vector({1e37}, {1}, DType::bf16)).item();
  EXPECT_NEAR(b, 85.1956, 0.5);
  // The gradient 1 / (1 + x), at both ends.
  Tensor leaf = from_vector({-1e-10, 0.4, 1e306}, {3}, DType::f64).set_requires_grad(true);
  sum(log1p(leaf)).backward();
  const std::vector<double> g = leaf.grad().to_vector();
  EXPECT_NEAR(g[0], 1.0 / (1.0 - 1e-10), 1e-16);
  EXPECT_NEAR(g[1], 1.0 / 1.4, 1e-16);
  EXPECT_NEAR(g[2] / (1.0 / 1e306), 1.0, 1e-15);
}

TEST(Elementwise, ScalingKeepsTheSignOfZero) {
  // As in PyTorch: -(+0) is -0, and -0 * 1 stays -0 (an added +0 would turn both into +0).
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor z = from_vector({0.0, -0.0}, {2}).to(dt);
    std::vector<double> n = neg(z).to(DType::f64).to_vector();
    std::vector<double> m = mul(z, 1.0).to(DType::f64).to_vector();
    EXPECT_TRUE(std::signbit(n[0]));
    EXPECT_FALSE(std::signbit(n[1]));
    EXPECT_FALSE(std::signbit(m[0]));
    EXPECT_TRUE(std::signbit(m[1]));
    Tensor w = z.clone();
    mul_(w, -1.0);
    std::vector<double> i = w.to(DType::f64).to_vector();
    EXPECT_TRUE(std::signbit(i[0]));
    EXPECT_FALSE(std::signbit(i[1]));
  }
}
