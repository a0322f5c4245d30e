// Normalization ops: values worked out by hand, gradients by central differences, the
// fused kernels against a reference composed of elementwise and reduction ops, and
// BatchNorm's running statistics after a training step.
#include <functional>

#include "common/test_util.h"

using namespace zt;
using zt::test::values_are;

namespace {

// GroupNorm from mean/var/elementwise ops, the definition the fused kernel must match.
Tensor group_norm_reference(const Tensor& x, int64_t G, const Tensor& w, const Tensor& b,
                            double eps) {
  int64_t N = x.size(0), C = x.size(1);
  Tensor xg = x.reshape({N, G, -1});
  Tensor mu = mean(xg, {2}, true);
  Tensor var_b = var(xg, {2}, false, true);
  Tensor y = div(sub(xg, mu), sqrt(add(var_b, eps))).reshape(x.sizes());
  Shape pshape(x.dim(), 1);
  pshape[1] = C;
  return add(mul(y, w.reshape(pshape)), b.reshape(pshape));
}

// fn(x, w, b) and its gradients for x (3, 8, 5, 7) offset by 10, in f32 against f64.
void expect_f32_matches_f64(
    const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& fn) {
  Generator g(11);
  Tensor x = add(randn({3, 8, 5, 7}, g, DType::f64), 10.0), w = randn({8}, g, DType::f64);
  Tensor b = randn({8}, g, DType::f64), gy = randn({3, 8, 5, 7}, g, DType::f64);
  auto run = [&](DType dt) {
    Tensor xl = x.to(dt).set_requires_grad(true), wl = w.to(dt).set_requires_grad(true);
    Tensor bl = b.to(dt).set_requires_grad(true);
    Tensor y = fn(xl, wl, bl);
    y.backward(gy.to(dt));
    return std::vector<Tensor>{y, xl.grad(), wl.grad(), bl.grad()};
  };
  const std::vector<Tensor> f32 = run(DType::f32), f64 = run(DType::f64);
  for (size_t i = 0; i < f32.size(); ++i)
    EXPECT_CLOSE(f32[i].to(DType::f64), f64[i], 1e-4, 1e-4) << "output " << i;
}

}  // namespace

TEST(GroupNorm, HandValuesOneGroup) {
  // x (1, 2, 2) = channels [1, 2] and [3, 4], one group: mean 2.5,
  // var = (1.5^2 + 0.5^2 + 0.5^2 + 1.5^2) / 4 = 1.25, rstd = 1 / 1.118034.
  // xhat = [-1.341641, -0.447214, 0.447214, 1.341641]; weight [2, 1], bias [0, 1]:
  // y = [-2.683282, -0.894427, 1.447214, 2.341641].
  Tensor x = from_vector({1, 2, 3, 4}, {1, 2, 2});
  Tensor w = from_vector({2, 1}, {2});
  Tensor b = from_vector({0, 1}, {2});
  EXPECT_TRUE(values_are(group_norm(x, 1, w, b, 0.0), {-2.683282, -0.894427, 1.447214, 2.341641}));
  // Two groups (one channel each): [1, 2] -> mean 1.5, var 0.25 -> [-1, 1]; same for [3, 4].
  EXPECT_TRUE(values_are(group_norm(x, 2, Tensor(), Tensor(), 0.0), {-1, 1, -1, 1}));
}

TEST(GroupNorm, EpsInsideSqrt) {
  // [0, 2]: mean 1, biased var 1; eps 3 -> (x - 1) / sqrt(4) = [-0.5, 0.5].
  Tensor x = from_vector({0, 2}, {1, 1, 2});
  EXPECT_TRUE(values_are(group_norm(x, 1, Tensor(), Tensor(), 3.0), {-0.5, 0.5}));
}

TEST(GroupNorm, MatchesComposedReference) {
  Generator g(3);
  // A large offset checks the shifted-moment variance against cancellation.
  Tensor x = add(randn({3, 8, 5, 7}, g, DType::f64), 100.0);
  Tensor w = randn({8}, g, DType::f64), b = randn({8}, g, DType::f64);
  EXPECT_CLOSE(group_norm(x, 4, w, b, 1e-6), group_norm_reference(x, 4, w, b, 1e-6), 1e-8, 1e-8);
  // f32 input against the f64 reference.
  EXPECT_CLOSE(group_norm(x.to(DType::f32), 4, w.to(DType::f32), b.to(DType::f32), 1e-6),
               group_norm_reference(x, 4, w, b, 1e-6).to(DType::f32), 1e-4, 1e-4);
}

TEST(GroupNorm, Gradients) {
  Tensor x = test::rand_leaf({2, 4, 3}, 1);
  Tensor w = test::rand_leaf({4}, 2), b = test::rand_leaf({4}, 3);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) { return group_norm(in[0], 2, in[1], in[2], 1e-5); },
      {x, w, b});
  // No affine parameters, 3-D spatial, per-channel groups.
  Tensor x5 = test::rand_leaf({2, 2, 2, 2, 3}, 4);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) { return group_norm(in[0], 2, Tensor(), Tensor(), 1e-5); },
      {x5});
  // Non-contiguous input: a transposed view.
  Tensor xt = test::rand_leaf({3, 4, 2}, 5);
  EXPECT_GRAD_OK(
      [&](const std::vector<Tensor>& in) {
        return group_norm(in[0].transpose(1, 2), 1, in[1], in[2], 1e-5);
      },
      {xt, test::rand_leaf({2}, 6), test::rand_leaf({2}, 7)});
}

// The f32 kernels run vectorized loops picked for the CPU (AVX-512, AVX2 or SSE2), with
// tails (35 elements per channel) and 2 channels per group; f64 runs the generic loops.
TEST(GroupNorm, F32GradientsMatchF64) {
  expect_f32_matches_f64([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return group_norm(x, 4, w, b, 1e-6);
  });
}

TEST(GroupNorm, WeightOnlyGradient) {
  Tensor x = test::rand_leaf({2, 4, 3}, 8);
  x.set_requires_grad(false);
  Tensor w = test::rand_leaf({4}, 9);
  EXPECT_GRAD_OK(
      [&](const std::vector<Tensor>& in) { return group_norm(x, 2, in[0], Tensor(), 1e-5); }, {w});
}

TEST(GroupNorm, Bf16RunsInF32) {
  Tensor x = from_vector({1, 2, 3, 4}, {1, 2, 2}, DType::bf16);
  Tensor y = group_norm(x, 2, Tensor(), Tensor(), 0.0);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(values_are(y, {-1, 1, -1, 1}, 1e-2));
}

TEST(GroupNorm, BadGroups) {
  Tensor x = zeros({1, 6, 2});
  try {
    group_norm(x, 4, Tensor(), Tensor());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("groups must divide C"), std::string::npos);
  }
  EXPECT_THROW(group_norm(x, 3, ones({5}), Tensor()), Error);
}

// num_batches_tracked is counted in the statistics' kernel; given where nothing counts
// (eval, no running statistics) or of another type, it is refused.
TEST(BatchNorm, CountsInTheStatisticsKernel) {
  Tensor x = from_vector({1, 2, 3, 4}, {2, 1, 2});
  Tensor rm = zeros({1}), rv = ones({1}), count = full({}, 41.0, DType::i64);
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5, count);
  EXPECT_EQ(count.item(), 42.0);
  batch_norm(x.to(DType::bf16), rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5, count);
  EXPECT_EQ(count.item(), 43.0);
  EXPECT_TRUE(
      test::throws_with([&] { batch_norm(x, rm, rv, Tensor(), Tensor(), false, 0.1, 1e-5, count); },
                        "pass it only with training = true"));
  EXPECT_TRUE(test::throws_with(
      [&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5, count); },
      "pass it only with training = true"));
  EXPECT_TRUE(test::throws_with(
      [&] { batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5, zeros({})); },
      "num_batches_tracked must be an i64 scalar"));
  // An input the kernel refuses (integers) counts nothing.
  EXPECT_THROW(batch_norm(x.to(DType::i32), rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5, count),
               Error);
  EXPECT_EQ(count.item(), 43.0);
}

TEST(BatchNorm, TrainingStepByHand) {
  // x (N=2, C=2, 1): channel 0 = {1, 3}: mean 2, biased var 1, unbiased 2;
  // channel 1 = {10, 20}: mean 15, biased var 25, unbiased 50. eps 0:
  // y = [(1-2)/1, (10-15)/5, (3-2)/1, (20-15)/5] = [-1, -1, 1, 1].
  Tensor x = from_vector({1, 10, 3, 20}, {2, 2, 1});
  Tensor rm = zeros({2}), rv = ones({2});
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 0.0);
  EXPECT_TRUE(values_are(y, {-1, -1, 1, 1}));
  // running_mean = 0.9 * 0 + 0.1 * [2, 15] = [0.2, 1.5];
  // running_var = 0.9 * 1 + 0.1 * [2, 50] = [1.1, 5.9] (unbiased variance).
  EXPECT_TRUE(values_are(rm, {0.2, 1.5}));
  EXPECT_TRUE(values_are(rv, {1.1, 5.9}));
  EXPECT_FALSE(rm.requires_grad());
  // Eval uses the running statistics: (1 - 0.2) / sqrt(1.1) = 0.762770,
  // (10 - 1.5) / sqrt(5.9) = 8.5 / 2.428992 = 3.499395, (3 - 0.2) / sqrt(1.1) = 2.669694,
  // (20 - 1.5) / sqrt(5.9) = 18.5 / 2.428992 = 7.616329.
  Tensor ye = batch_norm(x, rm, rv, Tensor(), Tensor(), false, 0.1, 0.0);
  EXPECT_TRUE(values_are(ye, {0.762770, 3.499395, 2.669694, 7.616329}));
  EXPECT_TRUE(values_are(rm, {0.2, 1.5}));  // eval leaves them alone
}

TEST(BatchNorm, RunningStatisticsOfEveryDtypeUpdateInPlace) {
  // One kernel computes the batch statistics and updates the running ones where they
  // lie, in double, rounded into their own dtype, whatever the input's (a bf16 input runs
  // in f32).
  Generator g(5);
  const Tensor x = add(randn({3, 2, 5}, g, DType::f64), 4.0);
  const Tensor r0m = from_vector({0.25, -1.5}, {2}, DType::f64);
  const Tensor r0v = from_vector({0.75, 2.0}, {2}, DType::f64);
  for (DType xt : {DType::f64, DType::f32, DType::bf16}) {
    const Tensor xr = x.to(xt).to(DType::f64);  // the values the kernel sees
    const Tensor want_m = add(mul(r0m, 0.9), mul(mean(xr, {0, 2}), 0.1));
    const Tensor want_v = add(mul(r0v, 0.9), mul(var(xr, {0, 2}, /*unbiased=*/true), 0.1));
    for (DType rt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
      Tensor rm = r0m.to(rt).clone(), rv = r0v.to(rt).clone();
      const void* storage = rm.data_ptr();
      batch_norm(x.to(xt), rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
      EXPECT_EQ(rm.data_ptr(), storage);
      EXPECT_EQ(rm.dtype(), rt);
      const double tol = std::max(machine_epsilon(rt), 1e-14) * 8;
      EXPECT_TRUE(test::all_close(rm.to(DType::f64), want_m, tol, tol))
          << dtype_name(xt) << " input, " << dtype_name(rt) << " statistics";
      EXPECT_TRUE(test::all_close(rv.to(DType::f64), want_v, tol, tol))
          << dtype_name(xt) << " input, " << dtype_name(rt) << " statistics";
    }
  }
  // One dtype for both (the kernel reads them as one).
  EXPECT_TRUE(test::throws_with(
      [&] {
        batch_norm(x, zeros({2}), ones({2}, DType::f64), Tensor(), Tensor(), true, 0.1, 1e-5);
      },
      "batch_norm: running_mean is f32 and running_var f64; keep the running statistics in one "
      "dtype"));
  // Updated in place: a graph that saved them sees the write (an eval forward's backward,
  // after a training forward, is refused as PyTorch refuses it).
  Tensor rm = zeros({2}, DType::f64), rv = ones({2}, DType::f64);
  Tensor xe = x.detach().clone();
  xe.set_requires_grad(true);
  Tensor ye = batch_norm(xe, rm, rv, Tensor(), Tensor(), false, 0.1, 1e-5);
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_TRUE(
      test::throws_with([&] { sum(ye).backward(); }, "was written in place since the forward"));
  // Updated in place, so they must be contiguous.
  Tensor strided = zeros({4}).slice(0, 0, 4, 2);
  EXPECT_TRUE(test::throws_with(
      [&] { batch_norm(x, strided, ones({2}), Tensor(), Tensor(), true, 0.1, 1e-5); },
      "must be contiguous floating tensors of shape [2]"));
}

TEST(BatchNorm, AffineAndSpatial) {
  // x (1, 1, 4) = [0, 2, 4, 6]: mean 3, biased var 5; weight 2, bias 1, eps 0:
  // y = 2 (x - 3) / sqrt(5) + 1 = [-1.683282, 0.105573, 1.894427, 3.683282].
  Tensor x = from_vector({0, 2, 4, 6}, {1, 1, 4});
  Tensor y = batch_norm(x, Tensor(), Tensor(), full({1}, 2.0), full({1}, 1.0), true, 0.1, 0.0);
  EXPECT_TRUE(values_are(y, {-1.683282, 0.105573, 1.894427, 3.683282}));
}

TEST(BatchNorm, RunningStatsNotRecorded) {
  Tensor x = test::rand_leaf({4, 3, 2}, 11);
  Tensor rm = zeros({3}, DType::f64), rv = ones({3}, DType::f64);
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_FALSE(rv.requires_grad());
  EXPECT_TRUE(rm.is_leaf() && rv.is_leaf());
}

TEST(BatchNorm, F32GradientsMatchF64) {
  expect_f32_matches_f64([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
  });
}

TEST(BatchNorm, Gradients) {
  Tensor x = test::rand_leaf({3, 2, 4}, 12);
  Tensor w = test::rand_leaf({2}, 13), b = test::rand_leaf({2}, 14);
  Tensor rm = zeros({2}, DType::f64), rv = ones({2}, DType::f64);
  EXPECT_GRAD_OK(
      [&](const std::vector<Tensor>& in) {
        return batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b});
  // Eval mode: the statistics are constants.
  Tensor rm2 = from_vector({0.3, -0.2}, {2}, DType::f64);
  Tensor rv2 = from_vector({0.5, 2.0}, {2}, DType::f64);
  EXPECT_GRAD_OK(
      [&](const std::vector<Tensor>& in) {
        return batch_norm(in[0], rm2, rv2, in[1], in[2], false, 0.1, 1e-5);
      },
      {x, w, b});
  // 5-D input as BatchNorm3d sees it, no running stats, no affine.
  Tensor x5 = test::rand_leaf({2, 2, 2, 2, 2}, 15);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) {
        return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      },
      {x5});
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({1, 3, 1});
  try {
    batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1 value per channel"), std::string::npos);
  }
  EXPECT_THROW(batch_norm(zeros({2, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false, 0.1, 1e-5),
               Error);
  EXPECT_THROW(
      batch_norm(zeros({2, 3}), zeros({4}), ones({4}), Tensor(), Tensor(), true, 0.1, 1e-5), Error);
}

TEST(LayerNorm, HandValues) {
  // Row [1, 2, 3]: mean 2, var 2/3, xhat = [-1.224745, 0, 1.224745]; row [2, 4, 6] has
  // the same xhat. weight [1, 2, 3], bias [0, 0, 1]: [-1.224745, 0, 4.674235].
  Tensor x = from_vector({1, 2, 3, 2, 4, 6}, {2, 3});
  Tensor w = from_vector({1, 2, 3}, {3}), b = from_vector({0, 0, 1}, {3});
  EXPECT_TRUE(
      values_are(layer_norm(x, {3}, w, b, 0.0), {-1.224745, 0, 4.674235, -1.224745, 0, 4.674235}));
}

TEST(LayerNorm, Gradients) {
  Tensor x = test::rand_leaf({2, 3, 4}, 21);
  Tensor w = test::rand_leaf({4}, 22), b = test::rand_leaf({4}, 23);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1], in[2]); },
                 {x, w, b});
  Tensor w2 = test::rand_leaf({3, 4}, 24);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) {
        return layer_norm(in[0], {3, 4}, in[1], Tensor());
      },
      {x, w2});
  EXPECT_THROW(layer_norm(zeros({2, 3}), {4}, Tensor(), Tensor()), Error);
}

TEST(RmsNorm, HandValuesAndGradients) {
  // [3, 4]: mean of squares 12.5, rms 3.535534 -> [0.848528, 1.131371]; weight [1, 2].
  Tensor x = from_vector({3, 4}, {1, 2});
  EXPECT_TRUE(values_are(rms_norm(x, {2}, from_vector({1, 2}, {2}), 0.0), {0.848528, 2.262742}));
  Tensor xl = test::rand_leaf({3, 5}, 31), w = test::rand_leaf({5}, 32);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return rms_norm(in[0], {5}, in[1]); },
                 {xl, w});
}

TEST(Norms, ResultsDoNotDependOnThreadCount) {
  // Rows are reduced serially whatever the split, so 1 and 2 threads agree bit for bit.
  Generator g(41);
  Tensor x = randn({4, 8, 32, 64}, g), w = randn({8}, g), b = randn({8}, g);
  Tensor gy = randn({4, 8, 32, 64}, g);
  auto run = [&](int threads) {
    test::ThreadCount count(threads);
    Tensor xl = x.clone().set_requires_grad(true);
    Tensor y1 = group_norm(xl, 4, w, b, 1e-6);
    Tensor y2 = batch_norm(xl, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
    Tensor y3 = softmax(xl, 2);
    add(add(y1, y2), y3).backward(gy);
    return std::vector<std::vector<double>>{y1.to_vector(), y2.to_vector(), y3.to_vector(),
                                            xl.grad().to_vector()};
  };
  auto one = run(1);
  auto two = run(2);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], two[i]) << "output " << i;
}

// 16-bit inputs are summed in f32 and rounded once: f16's squares of 40 sum past its 65504,
// and squares of 1e-4 underflow to 0.
TEST(Norm, SixteenBitInputsDoNotOverflowOrUnderflow) {
  EXPECT_NEAR(norm(full({64}, 40.0, DType::f16)).to(DType::f32).item(), 320.0, 0.5);
  EXPECT_NEAR(norm(full({64}, 20.0, DType::f16), 3.0).to(DType::f32).item(), 80.0, 0.1);
  EXPECT_NEAR(norm(full({4096}, 1e-4, DType::f16)).to(DType::f32).item(), 6.4e-3, 1e-5);
  EXPECT_EQ(norm(full({4}, 1.0, DType::bf16)).dtype(), DType::bf16);
  EXPECT_TRUE(test::throws_with([] { norm(ones({2, 3}), 2.0, {5}); }, "norm: dimension 5"));
}
