// Reductions (sum, mean, var, max/min, argmax/argmin, norm) and matrix products
// (matmul, bmm, linear, gemm): values worked out by hand and central-difference
// gradient checks.
#include <cmath>

#include "common/test_util.h"

using namespace zt;
using zt::test::values_are;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
// x = [[1, 2, 3], [4, 5, 6]].
Tensor x23() {
  return from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
}
}  // namespace

TEST(Reduce, SumMeanValues) {
  Tensor x = x23();
  EXPECT_TRUE(values_are(sum(x), {21}));
  EXPECT_EQ(sum(x).dim(), 0);
  EXPECT_TRUE(values_are(sum(x, {0}), {5, 7, 9}));
  EXPECT_TRUE(values_are(sum(x, {-1}), {6, 15}));
  EXPECT_EQ(sum(x, {1}, true).sizes(), (Shape{2, 1}));
  EXPECT_TRUE(values_are(mean(x, {1}), {2, 5}));
  EXPECT_TRUE(values_are(mean(x), {3.5}));
  // Reducing a transposed view: column sums of x^T = row sums of x.
  EXPECT_TRUE(values_are(sum(x.transpose(0, 1), {0}), {6, 15}));
}

TEST(Reduce, VarValues) {
  Tensor x = x23();
  // Rows [1, 2, 3] and [4, 5, 6]: squared deviations 1 + 0 + 1 = 2 ->
  // unbiased 2 / 2 = 1, biased 2 / 3.
  EXPECT_TRUE(values_are(var(x, {1}), {1, 1}));
  EXPECT_TRUE(values_are(var(x, {1}, false), {2.0 / 3, 2.0 / 3}));
  // All: mean 3.5, squared deviations 6.25 + 2.25 + 0.25 (twice) = 17.5, / 5 = 3.5.
  EXPECT_TRUE(values_are(var(x), {3.5}));
}

TEST(Reduce, ExtremaValues) {
  Tensor x = from_vector({1, 6, 3, 4, 5, 2}, {2, 3});
  EXPECT_TRUE(values_are(max(x, 1), {6, 5}));
  EXPECT_TRUE(values_are(min(x, 0), {1, 5, 2}));
  EXPECT_TRUE(values_are(max(x), {6}));
  EXPECT_TRUE(values_are(min(x), {1}));
  EXPECT_TRUE(values_are(argmax(x, 1), {1, 1}));
  EXPECT_TRUE(values_are(argmin(x, 0), {0, 1, 1}));
  EXPECT_EQ(argmax(x, 1).dtype(), DType::i64);
  EXPECT_EQ(max(x, 1, true).sizes(), (Shape{2, 1}));
}

TEST(Reduce, NormValues) {
  Tensor x = x23();
  // L2: sqrt(1 + 4 + 9 + 16 + 25 + 36) = sqrt(91); L1: 21; L3: 441^(1/3).
  EXPECT_TRUE(values_are(norm(x), {9.539392}));
  EXPECT_TRUE(values_are(norm(x, 1.0), {21}));
  EXPECT_TRUE(values_are(norm(x, 3.0), {7.611663}));
  // Per row L2: sqrt(14), sqrt(77).
  EXPECT_TRUE(values_are(norm(x, 2.0, {1}), {3.741657, 8.774964}));
}

// The norm is in range where the squares of its elements are not: it sums in f64 and
// rounds once, and so does its gradient (x / |x| = 1/2 for four equal elements).
TEST(Reduce, NormsOfHugeAndTinyElementsAreInRange) {
  for (const DType dt : {DType::f32, DType::bf16}) {
    for (const double v : {1e20, 1e-25}) {
      Tensor x = full({4}, v, dt).set_requires_grad(true);
      const Tensor n = norm(x);
      EXPECT_EQ(n.dtype(), dt);
      const double stored = full({1}, v, dt).item();  // v as dt holds it
      EXPECT_EQ(n.item(), 2 * stored) << dtype_name(dt) << " " << v;
      n.backward();
      EXPECT_TRUE(values_are(x.grad(), {0.5, 0.5, 0.5, 0.5})) << dtype_name(dt) << " " << v;
    }
  }
}

TEST(Reduce, ANaNIsTheMaxAndTheMin) {
  // As PyTorch's: the first NaN wins wherever it is, so max() shows a NaN.
  const Tensor x = from_vector({1, NAN, 3, NAN}, {4});
  EXPECT_TRUE(std::isnan(max(x, 0).item()));
  EXPECT_TRUE(std::isnan(min(x).item()));
  EXPECT_TRUE(values_are(argmax(x, 0), {1}));
  EXPECT_TRUE(values_are(argmin(x, 0), {1}));
}

TEST(Reduce, AScalarReducesOverItsOneElementAndHasNoDimensionToIndex) {
  // As PyTorch's: a 0-d tensor reduces, transposes and squeezes over dim 0 or -1 (itself);
  // size, narrow and the like name a dimension it does not have.
  const Tensor s = scalar_tensor(3);
  EXPECT_TRUE(values_are(sum(s, {0}), {3}));
  EXPECT_EQ(mean(s, {-1}).dim(), 0);
  EXPECT_TRUE(values_are(max(s, 0), {3}));
  EXPECT_EQ(max(s, 0, true).dim(), 0);
  EXPECT_TRUE(values_are(argmax(s, -1), {0}));
  EXPECT_EQ(argmin(s, 0).dim(), 0);
  EXPECT_EQ(s.transpose(0, -1).dim(), 0);
  EXPECT_EQ(s.squeeze(0).dim(), 0);
  EXPECT_EQ(s.flatten(0, -1).sizes(), Shape({1}));
  EXPECT_TRUE(
      test::throws_with([&] { s.flatten(1); }, "flatten: dimension 1 out of range [-1, 0]"));
  EXPECT_TRUE(
      test::throws_with([&] { s.flatten(0, 3); }, "flatten: dimension 3 out of range [-1, 0]"));
  EXPECT_TRUE(test::throws_with([&] { s.size(0); }, "size: dimension 0 given for a 0-d tensor"));
  EXPECT_TRUE(test::throws_with([&] { s.narrow(0, 0, 1); }, "narrow: dimension 0 given"));
  // The range a scalar's dimension lies in, as PyTorch states it (not "a tensor with 1
  // dims": it has none).
  EXPECT_TRUE(test::throws_with([&] { sum(s, {1}); }, "sum: dimension 1 out of range [-1, 0]"));
  EXPECT_TRUE(
      test::throws_with([&] { argmax(s, -2); }, "argmax: dimension -2 out of range [-1, 0]"));
  EXPECT_TRUE(
      test::throws_with([&] { softmax(s, 1); }, "softmax: dimension 1 out of range [-1, 0]"));
  EXPECT_TRUE(
      test::throws_with([&] { s.transpose(0, 1); }, "transpose: dimension 1 out of range [-1, 0]"));
  // A dimension named twice is a mistake, not a double reduction.
  EXPECT_TRUE(test::throws_with([] { sum(x23(), {1, -1}); }, "sum: dimension 1 appears more"));
}

TEST(Reduce, F32VarianceSquaresDeviationsInF64) {
  // One deviation of 3e19 among 100 values: its square, 9e38, is past the f32 range, but
  // the variance, about 9e36, is not (PyTorch's CPU var accumulates f32 in double).
  std::vector<double> v(100, 0.0);
  v[0] = 3e19;
  Tensor x = from_vector(v, {100});
  const double want = 9e38 * (1 - 1.0 / 100) / 99;
  const double got = var(x).to(DType::f64).to_vector()[0];
  EXPECT_NEAR(got / want, 1.0, 1e-6);
  EXPECT_EQ(var(x).dtype(), DType::f32);
  EXPECT_NEAR(var(x.reshape({1, 100}), {1}, false).to(DType::f64).to_vector()[0] / (want * 0.99),
              1.0, 1e-6);
}

TEST(Reduce, SixteenBitMeanAndVarianceAreComputedInF32) {
  // bf16 keeps 8 bits: 1000 and 1004 are exact, but a mean rounded to bf16 before the
  // subtraction would be most of their spread. Variance: unbiased 8, biased 4.
  const Tensor x = from_vector({1000, 1004}, {2}, DType::bf16);
  EXPECT_TRUE(values_are(var(x), {8}));
  EXPECT_TRUE(values_are(var(x, {}, false), {4}));
  EXPECT_EQ(var(x).dtype(), DType::bf16);
  // Mean of 250, 4, 7 = 87: a sum rounded to bf16 (261 -> 260) would give 86.5.
  EXPECT_TRUE(values_are(mean(from_vector({250, 4, 7}, {3}, DType::bf16)), {87}));
}

TEST(Reduce, NormGradientIsZeroWhereTheNormOrTheElementIs) {
  // As PyTorch's: where sqrt'(0) * 0 would be NaN, the gradient is 0.
  Tensor z = zeros({3}, DType::f64).set_requires_grad(true);
  norm(z).backward();
  EXPECT_TRUE(values_are(z.grad(), {0, 0, 0}));
  // p = 3 at [0, 2, 0]: x |x| / |x|_3^2 = [0, 4, 0] / 4.
  Tensor x = from_vector({0, 2, 0}, {3}, DType::f64).set_requires_grad(true);
  norm(x, 3.0).backward();
  EXPECT_TRUE(values_are(x.grad(), {0, 1, 0}));
  EXPECT_TRUE(test::throws_with([&] { norm(x, INFINITY); }, "p must be positive and finite"));
  EXPECT_TRUE(test::throws_with([] { norm(ones({2}, DType::i64)); }, "expects a floating tensor"));
}

TEST(Reduce, MaxGradientGoesToFirstExtremumAlongADimAndToEveryTieOverAll) {
  // max([1, 3, 3], 0) = 3 at index 1: the gradient flows to the first 3 only, as the
  // index says. Over all elements PyTorch spreads it evenly over the ties instead.
  Tensor x = from_vector({1, 3, 3}, {3}, DType::f64).set_requires_grad(true);
  max(x, 0).backward();
  EXPECT_TRUE(values_are(x.grad(), {0, 1, 0}));
  x.set_grad(Tensor());
  mul(max(x), 4.0).backward();
  EXPECT_TRUE(values_are(x.grad(), {0, 2, 2}));
  Tensor y = from_vector({2, -1, 5, -1}, {2, 2}, DType::f64).set_requires_grad(true);
  min(y).backward();
  EXPECT_TRUE(values_are(y.grad(), {0, 0.5, 0, 0.5}));
  // A NaN result: its gradient goes to the NaNs.
  Tensor z = from_vector({NAN, 1, NAN}, {3}, DType::f64).set_requires_grad(true);
  max(z).backward();
  EXPECT_TRUE(values_are(z.grad(), {0.5, 0, 0.5}));
}

TEST(Reduce, Gradients) {
  Tensor x = test::rand_leaf({2, 3, 4}, 1);
  std::vector<std::pair<const char*, Fn>> fns = {
      {"sum_all", [](auto& in) { return sum(in[0]); }},
      {"sum_dims",
       [](auto& in) {
         return sum(in[0], {0, 2});
       }},
      {"sum_keepdim", [](auto& in) { return sum(in[0], {1}, true); }},
      {"mean", [](auto& in) { return mean(in[0], {2}); }},
      {"mean_all", [](auto& in) { return mean(in[0]); }},
      {"var_unbiased", [](auto& in) { return var(in[0], {1}); }},
      {"var_biased",
       [](auto& in) {
         return var(in[0], {0, 2}, false, true);
       }},
      {"max_dim", [](auto& in) { return max(in[0], 2); }},
      {"min_dim", [](auto& in) { return min(in[0], 0, true); }},
      {"max_all", [](auto& in) { return max(in[0]); }},
      {"min_all", [](auto& in) { return min(in[0]); }},
      {"norm2", [](auto& in) { return norm(in[0]); }},
      {"norm1", [](auto& in) { return norm(in[0], 1.0, {1}); }},
      {"norm3", [](auto& in) { return norm(in[0], 3.0, {2}); }},
      {"sum_transposed", [](auto& in) { return sum(in[0].transpose(0, 2), {1}); }},
  };
  for (auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    EXPECT_GRAD_OK(fn, {x});
  }
}

TEST(Linalg, MatmulValues) {
  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2}), b = from_vector({5, 6, 7, 8}, {2, 2});
  EXPECT_TRUE(values_are(matmul(a, b), {19, 22, 43, 50}));
  // a^T @ b = [[1, 3], [2, 4]] @ b = [[26, 30], [38, 44]] (transposed operand, no copy).
  EXPECT_TRUE(values_are(matmul(a.transpose(0, 1), b), {26, 30, 38, 44}));
  // Vector cases: [1, 2] @ a = [7, 10]; a @ [1, 1] = [3, 7]; [1, 2] @ [3, 4] = 11.
  Tensor v = from_vector({1, 2}, {2});
  EXPECT_TRUE(values_are(matmul(v, a), {7, 10}));
  EXPECT_TRUE(values_are(matmul(a, ones({2})), {3, 7}));
  EXPECT_TRUE(values_are(matmul(v, from_vector({3, 4}, {2})), {11}));
  // Broadcast batch: (2, 2, 2) @ (2, 2): batch 0 = a, batch 1 = identity.
  Tensor batch = from_vector({1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2});
  EXPECT_TRUE(values_are(matmul(batch, b), {19, 22, 43, 50, 5, 6, 7, 8}));
  EXPECT_TRUE(values_are(bmm(batch, batch), {7, 10, 15, 22, 1, 0, 0, 1}));
}

TEST(Linalg, LinearValues) {
  // x [1, 2], weight rows [1, 0], [0, 1], [1, 1], bias [0, 0, 1]: [1, 2, 1 + 2 + 1].
  Tensor x = from_vector({1, 2}, {1, 2});
  Tensor w = from_vector({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_TRUE(values_are(linear(x, w, from_vector({0, 0, 1}, {3})), {1, 2, 4}));
  EXPECT_TRUE(values_are(linear(x, w), {1, 2, 3}));
  // Raw GEMM with beta: C = 2 * A @ B + 1 * C, A = [[1, 2]], B = [[3], [4]], C = [[1]]:
  // 2 * 11 + 1 = 23.
  Tensor c = ones({1, 1});
  gemm(false, false, 1, 1, 2, 2.0, from_vector({1, 2}, {1, 2}), 2, from_vector({3, 4}, {2, 1}), 1,
       1.0, c, 1);
  EXPECT_TRUE(values_are(c, {23}));
}

TEST(Linalg, Gradients) {
  Tensor a = test::rand_leaf({3, 4}, 1), b = test::rand_leaf({4, 2}, 2);
  EXPECT_GRAD_OK([](auto& in) { return matmul(in[0], in[1]); }, {a, b});
  // Transposed (non-contiguous) operands.
  Tensor at = test::rand_leaf({4, 3}, 3), bt = test::rand_leaf({2, 4}, 4);
  EXPECT_GRAD_OK([](auto& in) { return matmul(in[0].transpose(0, 1), in[1].transpose(0, 1)); },
                 {at, bt});
  // Vector operands and broadcast batch dims.
  Tensor v = test::rand_leaf({4}, 5);
  EXPECT_GRAD_OK([](auto& in) { return matmul(in[0], in[1]); }, {a, v});
  EXPECT_GRAD_OK([](auto& in) { return matmul(in[0], in[0]); }, {v});
  EXPECT_GRAD_OK([](auto& in) { return matmul(in[0], in[1]); }, {v, b});
  Tensor ba = test::rand_leaf({2, 1, 3, 4}, 6), bb = test::rand_leaf({3, 4, 2}, 7);
  EXPECT_GRAD_OK([](auto& in) { return matmul(in[0], in[1]); }, {ba, bb});
  Tensor x = test::rand_leaf({2, 3, 4}, 8), y = test::rand_leaf({2, 4, 5}, 9);
  EXPECT_GRAD_OK([](auto& in) { return bmm(in[0], in[1]); }, {x, y});
  Tensor w = test::rand_leaf({5, 4}, 10), bias = test::rand_leaf({5}, 11);
  EXPECT_GRAD_OK([](auto& in) { return linear(in[0], in[1], in[2]); }, {x, w, bias});
  EXPECT_GRAD_OK([](auto& in) { return linear(in[0], in[1]); }, {x, w});
  EXPECT_GRAD_OK([](auto& in) { return linear(in[0].transpose(0, 1), in[1], in[2]); },
                 {x, w, bias});
}
