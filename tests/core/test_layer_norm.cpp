// layer_norm's fused kernels (cpu::layer_norm_forward / layer_norm_backward through the
// op and its autograd record) against a reference computed here in double from the same
// (rounded) inputs, per row: mean, biased variance, y = xhat w + b, and
//   dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w,
//   dweight = sum over rows of dy xhat, dbias = sum over rows of dy.
// Tolerances, as a fraction of the reference's largest magnitude: f64 1e-10; f32 1e-5
// (f32 affine and gradient arithmetic, statistics in double; times 1 + |mean| / 100 for
// rows far from zero, since the mean is stored in f32); bf16 and f16 1e-2 (one rounding
// to the 16-bit output: bf16 keeps 8 bits, 2^-8 = 0.4%).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/test_util.h"
#include "core/kernels.h"

using namespace zt;

namespace {

struct Reference {
  std::vector<double> y, dx, dw, db;
};

// x, dy (rows, D) and w, b (D; empty when absent) in row-major double.
Reference reference(const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b, const std::vector<double>& dy, int64_t rows,
                    int64_t D, double eps) {
  Reference r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dw.assign(D, 0.0);
  r.db.assign(D, 0.0);
  std::vector<double> xhat(D), g(D);
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = x.data() + i * D;
    const double* gr = dy.data() + i * D;
    double mu = 0, var = 0;
    for (int64_t j = 0; j < D; ++j) mu += xr[j];
    mu /= static_cast<double>(D);
    for (int64_t j = 0; j < D; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    const double rs = 1.0 / std::sqrt(var / static_cast<double>(D) + eps);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < D; ++j) {
      xhat[j] = (xr[j] - mu) * rs;
      g[j] = gr[j] * (w.empty() ? 1.0 : w[j]);
      r.y[i * D + j] = xhat[j] * (w.empty() ? 1.0 : w[j]) + (b.empty() ? 0.0 : b[j]);
      r.dw[j] += gr[j] * xhat[j];
      r.db[j] += gr[j];
      mg += g[j] / static_cast<double>(D);
      mgx += g[j] * xhat[j] / static_cast<double>(D);
    }
    for (int64_t j = 0; j < D; ++j) r.dx[i * D + j] = rs * (g[j] - mg - xhat[j] * mgx);
  }
  return r;
}

// max |got - want| <= tol * max(1, max |want|).
::testing::AssertionResult close_scaled(const Tensor& got, const std::vector<double>& want,
                                        double tol, const char* what) {
  const std::vector<double> v = got.to(DType::f64).to_vector();
  if (v.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": " << v.size() << " values, want " << want.size();
  double scale = 1, worst = 0;
  for (double a : want) scale = std::max(scale, std::abs(a));
  for (size_t i = 0; i < v.size(); ++i) {
    const double d = std::abs(v[i] - want[i]);
    if (std::isnan(d) || d > worst) worst = d;  // a NaN stays the worst (std::max drops it)
  }
  if (std::isfinite(worst) && worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": max difference " << worst << " > " << tol * scale;
}

double tolerance(DType dt) {
  if (dt == DType::f64) return 1e-10;
  if (dt == DType::f32) return 1e-5;
  return 1e-2;
}

struct Case {
  Shape x_shape;
  Shape normalized;
  bool weight, bias;
  double offset;  // added to x: statistics must not cancel when |mean| >> std
};

// Runs layer_norm forward and backward in dt and checks y, dx, dweight and dbias.
void check_case(const Case& c, DType dt, uint64_t seed) {
  const double eps = 1e-5;
  Generator gen(seed);
  const int64_t D = shape_numel(c.normalized);
  Tensor x = add(randn(c.x_shape, gen, DType::f64), c.offset).to(dt);
  Tensor w = c.weight ? add(randn(c.normalized, gen, DType::f64), 1.0).to(dt) : Tensor();
  Tensor b = c.bias ? randn(c.normalized, gen, DType::f64).to(dt) : Tensor();
  Tensor dy = randn(c.x_shape, gen, DType::f64).to(dt);
  const int64_t rows = x.numel() / D;
  for (const Tensor* t : {&x, &w, &b})
    if (t->defined()) t->set_requires_grad(true);
  Tensor y = layer_norm(x, c.normalized, w, b, eps);
  ASSERT_EQ(y.dtype(), dt);
  ASSERT_EQ(y.sizes(), x.sizes());
  y.backward(dy);
  auto vec = [](const Tensor& t) {
    return t.defined() ? t.detach().to(DType::f64).to_vector() : std::vector<double>();
  };
  const Reference r = reference(vec(x), vec(w), vec(b), vec(dy), rows, D, eps);
  // The mean is stored in f32 for f32 input, so xhat carries an absolute error of about
  // |mean| 2^-24 rstd, the size of the input's own rounding: scale the f32 tolerance.
  const double tol = tolerance(dt) * (dt == DType::f32 ? 1 + std::abs(c.offset) / 100 : 1);
  const std::string where = std::string(dtype_name(dt)) + " x " + shape_str(c.x_shape) +
                            (c.weight ? " weight" : "") + (c.bias ? " bias" : "");
  EXPECT_TRUE(close_scaled(y, r.y, tol, "y")) << where;
  EXPECT_TRUE(close_scaled(x.grad(), r.dx, tol, "dx")) << where;
  if (c.weight) {
    EXPECT_EQ(w.grad().dtype(), dt);
    EXPECT_TRUE(close_scaled(w.grad(), r.dw, tol, "dweight")) << where;
  }
  if (c.bias) {
    EXPECT_TRUE(close_scaled(b.grad(), r.db, tol, "dbias")) << where;
  }
}

}  // namespace

TEST(LayerNormKernel, MatchesDoubleReference) {
  // D = 37 and 19 are not multiples of any SIMD width; rows = 1; a 2-D normalized shape;
  // more rows than one block of the parameter-gradient sums.
  const std::vector<Case> cases = {
      {{7, 37}, {37}, true, true, 0.0},        {{1, 19}, {19}, true, true, 0.0},
      {{3, 5, 24}, {5, 24}, true, false, 0.0}, {{4, 33}, {33}, false, true, 0.0},
      {{2, 3, 16}, {16}, false, false, 0.0},   {{80, 40}, {40}, true, true, 0.0},
      {{6, 64}, {64}, true, true, 300.0},
  };
  uint64_t seed = 1;
  for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16})
    for (const Case& c : cases) check_case(c, dt, seed++);
}

TEST(LayerNormKernel, ResultsDoNotDependOnThreadCount) {
  // 2000 rows of 96: enough work that 2 threads split both the rows and the 63 blocks of
  // rows for dweight/dbias; the outputs and gradients must agree bit for bit with 1.
  for (DType dt : {DType::f32, DType::bf16}) {
    Generator g(7);
    Tensor x = randn({2000, 96}, g, DType::f64).to(dt);
    Tensor w = randn({96}, g, DType::f64).to(dt), b = randn({96}, g, DType::f64).to(dt);
    Tensor dy = randn({2000, 96}, g, DType::f64).to(dt);
    auto run = [&](int threads) {
      set_num_threads(threads);
      Tensor xl = x.clone().set_requires_grad(true);
      Tensor wl = w.clone().set_requires_grad(true), bl = b.clone().set_requires_grad(true);
      Tensor y = layer_norm(xl, {96}, wl, bl, 1e-5);
      y.backward(dy);
      return std::vector<std::vector<double>>{
          y.to(DType::f64).to_vector(), xl.grad().to(DType::f64).to_vector(),
          wl.grad().to(DType::f64).to_vector(), bl.grad().to(DType::f64).to_vector()};
    };
    const int prev = num_threads();
    auto one = run(1);
    auto two = run(2);
    set_num_threads(prev);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_EQ(one[i], two[i]) << dtype_name(dt) << " output " << i;
  }
}

TEST(LayerNormKernel, WideRowsSplitTheirParameterGradientsOverThreads) {
  // 40 rows of 20000: the per-column sums of dweight and dbias (two blocks of rows) are
  // cut into column ranges for three threads, and each range must add its own columns'
  // partial sums: the gradients match the double reference.
  const int64_t rows = 40, D = 20000;
  Generator g(11);
  Tensor x = randn({rows, D}, g, DType::f64).to(DType::f32);
  Tensor w = randn({D}, g, DType::f64).to(DType::f32), b = randn({D}, g, DType::f64).to(DType::f32);
  Tensor dy = randn({rows, D}, g, DType::f64).to(DType::f32);
  test::ThreadCount threads(3);
  Tensor xl = x.clone().set_requires_grad(true);
  Tensor wl = w.clone().set_requires_grad(true), bl = b.clone().set_requires_grad(true);
  layer_norm(xl, {D}, wl, bl, 1e-5).backward(dy);
  auto vec = [](const Tensor& t) { return t.to(DType::f64).to_vector(); };
  const Reference r = reference(vec(x), vec(w), vec(b), vec(dy), rows, D, 1e-5);
  EXPECT_TRUE(close_scaled(wl.grad(), r.dw, 1e-5, "dweight"));
  EXPECT_TRUE(close_scaled(bl.grad(), r.db, 1e-5, "dbias"));
}

TEST(LayerNormKernel, GradientsByCentralDifferences) {
  // Bias only, one row, and D = 5 (shorter than the summation lanes).
  Tensor x = test::rand_leaf({1, 5}, 51), b = test::rand_leaf({5}, 52);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], {5}, Tensor(), in[1]); },
      {x, b});
  Tensor x2 = test::rand_leaf({3, 2, 9}, 53), w2 = test::rand_leaf({9}, 54);
  Tensor b2 = test::rand_leaf({9}, 55);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], {9}, in[1], in[2], 1e-3); },
      {x2, w2, b2});
}

TEST(LayerNormKernel, StatisticsAndDirectKernelCall) {
  // The kernel's mean and rstd (f32 for bf16 input) for rows [1, 2, 3] and [2, 4, 6]:
  // means 2 and 4, variances 2/3 and 8/3.
  Tensor x = from_vector({1, 2, 3, 2, 4, 6}, {2, 3}, DType::bf16);
  Tensor y = Tensor::empty({2, 3}, DType::bf16);
  Tensor mean = Tensor::empty({2}, DType::f32), rstd = Tensor::empty({2}, DType::f32);
  cpu::layer_norm_forward(y, mean, rstd, x, Tensor(), Tensor(), 2, 3, 0.0);
  EXPECT_TRUE(test::values_are(mean, {2, 4}));
  EXPECT_TRUE(test::values_are(rstd, {1 / std::sqrt(2.0 / 3), 1 / std::sqrt(8.0 / 3)}));
  EXPECT_TRUE(test::values_are(y, {-1.2247, 0, 1.2247, -1.2247, 0, 1.2247}, 1e-2));
}

TEST(LayerNormKernel, RejectsMismatchedParameters) {
  Tensor x = zeros({2, 4});
  EXPECT_TRUE(test::throws_with([&] { layer_norm(x, {4}, ones({4}, DType::f64), Tensor()); },
                                "layer_norm"));
  EXPECT_TRUE(test::throws_with([&] { layer_norm(x, {4}, ones({3}), Tensor()); }, "weight"));
}
