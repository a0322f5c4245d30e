// BatchNorm: running statistics over several training steps and the eval output,
// against values computed from the definition (PyTorch semantics: biased variance to
// normalize, unbiased variance into running_var, momentum 0.1); the synchronized-stats
// hook; the buffers' names; and a training forward that counts its batch without reading
// the counter back (on a GPU, a wait per BatchNorm layer).
#include <cmath>

#include "common/test_util.h"
#include "core/work_counts.h"
#include "nn/nn.h"

using namespace zt;
using zt::test::values_are;

namespace {

// Per-channel mean and biased variance of x (N, C, *) from the definition.
void channel_stats(const Tensor& x, int64_t c, double& mean, double& var, double& count) {
  std::vector<double> v = x.to_vector();
  const int64_t n = x.size(0), ch = x.size(1), inner = x.numel() / (n * ch);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < inner; ++k) s += v[static_cast<size_t>((i * ch + c) * inner + k)];
  count = static_cast<double>(n * inner);
  mean = s / count;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < inner; ++k) {
      double d = v[static_cast<size_t>((i * ch + c) * inner + k)] - mean;
      s2 += d * d;
    }
  var = s2 / count;
}

}  // namespace

TEST(BatchNorm, BuffersNamedAsPyTorch) {
  nn::BatchNorm3d bn(nn::BatchNormOptions(4));
  std::vector<std::string> names;
  for (auto& [n, t] : nn::state_dict(bn)) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                             "num_batches_tracked"}));
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(bn.num_batches_tracked.dim(), 0);
  EXPECT_EQ(bn.running_var.dtype(), DType::f32);
  nn::BatchNorm2d plain(nn::BatchNormOptions(4).affine(false).track_running_stats(false));
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_TRUE(plain.named_buffers().empty());
}

// reset_parameters() restores a trained layer's weight, bias and statistics (its in-place
// writes to parameters that require grad run without recording).
TEST(BatchNorm, ResetParametersRestoresTheInitialState) {
  nn::BatchNorm2d bn(nn::BatchNormOptions(2));
  bn.train();
  bn(from_vector({1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0}, {2, 2, 2, 1}));
  {
    autograd::NoGradGuard ng;
    bn.weight.fill_(3.0);
    bn.bias.fill_(-1.0);
  }
  bn.reset_parameters();
  EXPECT_TRUE(values_are(bn.weight, {1.0, 1.0}));
  EXPECT_TRUE(values_are(bn.bias, {0.0, 0.0}));
  EXPECT_TRUE(values_are(bn.running_mean, {0.0, 0.0}));
  EXPECT_TRUE(values_are(bn.running_var, {1.0, 1.0}));
  EXPECT_EQ(bn.num_batches_tracked.item(), 0);
  EXPECT_TRUE(bn.weight.requires_grad());
}

TEST(BatchNorm, ADictWithoutTheBatchCounterLoads) {
  // As PyTorch's: older and converted checkpoints have no num_batches_tracked; a strict
  // load takes them and the module keeps its own count. Any other missing key is missing.
  nn::BatchNorm2d bn(nn::BatchNormOptions(2));
  bn.num_batches_tracked.fill_(7);
  nn::NamedTensors dict;
  for (const auto& [n, t] : nn::state_dict(bn))
    if (n != "num_batches_tracked") dict.emplace_back(n, full(t.sizes(), 0.5, t.dtype()));
  nn::load_state_dict(bn, dict);
  EXPECT_TRUE(values_are(bn.running_var, {0.5, 0.5}));
  EXPECT_EQ(bn.num_batches_tracked.item(), 7);
  dict.pop_back();  // running_var
  EXPECT_TRUE(
      test::throws_with([&] { nn::load_state_dict(bn, dict); }, "missing keys (1): running_var"));
}

TEST(BatchNorm, FirstStepByHand) {
  // Channel 0 holds 1, 2, 3, 4: mean 2.5, biased var 1.25, unbiased 5/3.
  nn::BatchNorm2d bn(nn::BatchNormOptions(1));
  Tensor x = from_vector({1, 2, 3, 4}, {2, 1, 1, 2});
  Tensor y = bn(x);
  const double s = std::sqrt(1.25 + 1e-5);
  EXPECT_TRUE(values_are(y, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}, 1e-5));
  EXPECT_TRUE(values_are(bn.running_mean, {0.25}));                  // 0.9 * 0 + 0.1 * 2.5
  EXPECT_TRUE(values_are(bn.running_var, {0.9 + 0.1 * 5.0 / 3.0}));  // 0.9 * 1 + 0.1 * 5/3
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
}

TEST(BatchNorm, RunningStatsOverStepsThenEval) {
  manual_seed(11);
  const int64_t c = 3;
  nn::BatchNorm2d bn(nn::BatchNormOptions(c).momentum(0.2));
  {
    autograd::NoGradGuard ng;
    bn.weight.copy_(from_vector({1.0, 2.0, 0.5}, {c}));
    bn.bias.copy_(from_vector({0.0, -1.0, 3.0}, {c}));
  }
  std::vector<double> rm(c, 0.0), rv(c, 1.0);
  for (int step = 0; step < 4; ++step) {
    Tensor x = add(mul(randn({4, c, 2, 3}), 1.0 + step), static_cast<double>(step));
    bn(x);
    for (int64_t k = 0; k < c; ++k) {
      double mean, var, n;
      channel_stats(x, k, mean, var, n);
      rm[k] = 0.8 * rm[k] + 0.2 * mean;
      rv[k] = 0.8 * rv[k] + 0.2 * var * n / (n - 1);
    }
  }
  EXPECT_TRUE(values_are(bn.running_mean, rm, 1e-5));
  EXPECT_TRUE(values_are(bn.running_var, rv, 1e-5));
  EXPECT_EQ(bn.num_batches_tracked.item(), 4.0);

  // Eval normalizes with the running statistics and leaves them alone.
  bn.eval();
  Tensor x = randn({2, c, 1, 2});
  Tensor y = bn(x);
  std::vector<double> xv = x.to_vector(), want(xv.size());
  const double w[] = {1.0, 2.0, 0.5}, b[] = {0.0, -1.0, 3.0};
  for (size_t i = 0; i < xv.size(); ++i) {
    size_t k = (i / 2) % c;
    want[i] = (xv[i] - rm[k]) / std::sqrt(rv[k] + 1e-5) * w[k] + b[k];
  }
  EXPECT_TRUE(values_are(y, want, 1e-5));
  EXPECT_TRUE(values_are(bn.running_mean, rm, 1e-5));
  EXPECT_EQ(bn.num_batches_tracked.item(), 4.0);
}

TEST(BatchNorm, CumulativeMomentum) {
  // momentum = None: the running mean is the plain average of the batch means.
  nn::BatchNorm2d bn(nn::BatchNormOptions(1).momentum(std::nullopt));
  bn(add(full({2, 1, 1, 1}, 2.0), from_vector({-1, 1}, {2, 1, 1, 1})));  // mean 2
  bn(add(full({2, 1, 1, 1}, 6.0), from_vector({-1, 1}, {2, 1, 1, 1})));  // mean 6
  EXPECT_TRUE(values_are(bn.running_mean, {4.0}));
  EXPECT_TRUE(values_are(bn.running_var, {2.0}));  // unbiased var of (-1, 1) is 2 each time
}

// An empty batch trains as PyTorch's (which supports it since 1.5): the output is empty,
// the weight and bias get zero gradients, the running statistics stay where they were and
// the batch is counted. With momentum None the next batch's weight is 1 / 2. The
// synchronized path takes it too, and a batch empty on every rank leaves the statistics.
TEST(BatchNorm, AnEmptyBatchTrainsAsPyTorch) {
  for (bool synchronized : {false, true}) {
    for (bool cumulative : {false, true}) {
      nn::BatchNormOptions o(3);
      if (cumulative) o.momentum(std::nullopt);
      nn::BatchNorm2d bn(o);
      if (synchronized) bn.stats_reducer = [](const nn::BatchNormStats& s) { return s; };
      Tensor x = zeros({0, 3, 2, 2}).set_requires_grad(true);
      Tensor y = bn(x);
      EXPECT_EQ(y.sizes(), (Shape{0, 3, 2, 2}));
      sum(y).backward();
      EXPECT_EQ(x.grad().sizes(), (Shape{0, 3, 2, 2}));
      EXPECT_TRUE(values_are(bn.weight.grad(), {0, 0, 0}));
      EXPECT_TRUE(values_are(bn.bias.grad(), {0, 0, 0}));
      EXPECT_TRUE(values_are(bn.running_mean, {0, 0, 0}));
      EXPECT_TRUE(values_are(bn.running_var, {1, 1, 1}));
      EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
      bn(full({2, 3, 1, 1}, 4.0));  // mean 4, unbiased variance 0
      const double f = cumulative ? 0.5 : 0.1;
      EXPECT_TRUE(values_are(bn.running_mean, {4 * f, 4 * f, 4 * f}, 1e-6));
      EXPECT_TRUE(values_are(bn.running_var, {1 - f, 1 - f, 1 - f}, 1e-6));
      EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);
    }
  }
}

TEST(BatchNorm, TrainingCountsBatchesWithoutReadingBack) {
  nn::BatchNorm3d bn(nn::BatchNormOptions(3));
  Tensor x = randn({2, 3, 2, 4, 4});
  const WorkCounts before = work_counts();
  for (int i = 0; i < 5; ++i) bn(x);
  const WorkCounts five = work_counts() - before;
  EXPECT_EQ(five.host_reads, 0);
  // The statistics' kernel updates the running statistics and the counter; the other
  // normalizes: two dispatches a training forward.
  EXPECT_EQ(five.dispatches, 10);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(bn.num_batches_tracked.item(), 5.0);
  // A counter loaded from elsewhere goes on from its value.
  bn.num_batches_tracked.fill_(41.0);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item(), 42.0);
}

TEST(BatchNorm, WithoutRunningStatsEvalUsesBatchStats) {
  nn::BatchNorm2d bn(nn::BatchNormOptions(1).track_running_stats(false).affine(false));
  bn.eval();
  EXPECT_TRUE(values_are(bn(from_vector({1, 3}, {2, 1, 1, 1})), {-1, 1}, 1e-4));
}

TEST(BatchNorm, StatsReducerPathMatchesFusedPath) {
  // An identity reducer (one rank) must give the fused op's outputs, gradients and
  // running statistics; a reducer that doubles the batch (two identical ranks) changes
  // only the unbiased correction.
  manual_seed(12);
  Tensor x = randn({3, 2, 2, 2}, DType::f64);
  auto make = [] {
    auto bn = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(2));
    bn->to(DType::f64);
    autograd::NoGradGuard ng;
    bn->weight.copy_(from_vector({1.5, -0.5}, {2}, DType::f64));
    bn->bias.copy_(from_vector({0.1, 0.2}, {2}, DType::f64));
    return bn;
  };
  auto fused = make(), synced = make();
  int calls = 0;
  synced->stats_reducer = [&](const nn::BatchNormStats& s) {
    ++calls;
    return s;
  };
  Tensor xa = x.clone().detach(), xb = x.clone().detach();
  xa.set_requires_grad(true);
  xb.set_requires_grad(true);
  Tensor w = randn({3, 2, 2, 2}, DType::f64);
  Tensor ya = (*fused)(xa), yb = (*synced)(xb);
  EXPECT_CLOSE(ya, yb, 1e-9, 1e-9);
  sum(mul(ya, w)).backward();
  sum(mul(yb, w)).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_CLOSE(xa.grad(), xb.grad(), 1e-8, 1e-9);
  EXPECT_CLOSE(fused->weight.grad(), synced->weight.grad(), 1e-8, 1e-9);
  EXPECT_CLOSE(fused->running_mean, synced->running_mean, 1e-9, 1e-12);
  EXPECT_CLOSE(fused->running_var, synced->running_var, 1e-9, 1e-12);
  // Counted once each: in the statistics' kernel, and by the module on the reducer's path.
  EXPECT_EQ(fused->num_batches_tracked.item(), 1.0);
  EXPECT_EQ(synced->num_batches_tracked.item(), 1.0);
  EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return (*synced)(in[0]); },
                 {test::rand_leaf({3, 2, 2, 2}, 13), synced->weight, synced->bias});

  // Two identical ranks: same mean and biased var, count 2n -> running_var uses 2n/(2n-1).
  auto twice = make();
  twice->stats_reducer = [](const nn::BatchNormStats& s) {
    return nn::BatchNormStats{mul(s.sum, 2.0), mul(s.sum_sq, 2.0), 2 * s.count};
  };
  auto once = make();
  Tensor y2 = (*twice)(x), y1 = (*once)(x);
  EXPECT_CLOSE(y2, y1, 1e-9, 1e-9);
  double mean, var, n;
  channel_stats(x, 0, mean, var, n);
  EXPECT_NEAR(twice->running_var.to_vector()[0], 0.9 + 0.1 * var * 2 * n / (2 * n - 1), 1e-9);
  // Eval ignores the reducer and uses the running statistics.
  twice->eval();
  EXPECT_CLOSE((*twice)(x), batch_norm(x, twice->running_mean, twice->running_var, twice->weight,
                                       twice->bias, false, 0.1, 1e-5));
  // So does an eval without running statistics: it normalizes by its own batch, so a rank
  // may evaluate alone (PyTorch's SyncBatchNorm syncs in training only).
  auto untracked =
      std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(2).track_running_stats(false));
  untracked->to(DType::f64);
  int untracked_calls = 0;
  untracked->stats_reducer = [&](const nn::BatchNormStats& s) {
    ++untracked_calls;
    return s;
  };
  untracked->eval();
  EXPECT_CLOSE((*untracked)(x), batch_norm(x, Tensor(), Tensor(), untracked->weight,
                                           untracked->bias, true, 0.1, 1e-5));
  EXPECT_EQ(untracked_calls, 0);
}

// A reduced (synchronized) BatchNorm on bf16 activations normalizes in f32: a channel whose
// mean (100) is large beside its spread (0.5) keeps its variance, which E[x^2] - E[x]^2 in
// bf16 rounds away (the output would then be scaled by 1 / sqrt(eps)). The result is the
// fused BatchNorm's on the same values, rounded to bf16.
TEST(BatchNorm, ReducedStatisticsOfBf16InputsAreComputedInF32) {
  Generator g(21);
  const Tensor x = (randn({8, 2, 3, 3}, g) * 0.5 + 100.0).to(DType::bf16);
  auto reduced = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(2));
  reduced->to(DType::bf16);
  reduced->stats_reducer = [](const nn::BatchNormStats& s) { return s; };
  auto fused = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(2));
  const Tensor y = (*reduced)(x), want = (*fused)(x.to(DType::f32));
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_CLOSE(y.to(DType::f32), want, 1e-2, 1e-2);
  EXPECT_CLOSE(reduced->running_var.to(DType::f32), fused->running_var, 1e-2, 1e-3);
}

// The same for f32 inputs: a channel at 1000 +- 0.01 keeps its variance (1e-4), which
// E[x^2] - E[x]^2 summed in f32 would lose (x^2 ~ 1e6 carries about 0.06 of rounding), and
// is centered on its exact mean. The reference is BatchNorm in f64 on the same values.
TEST(BatchNorm, ReducedStatisticsOfF32InputsKeepASmallVariance) {
  Generator g(22);
  const Tensor x = randn({8, 2, 3, 3}, g) * 0.01 + 1000.0;
  auto reduced = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(2));
  reduced->stats_reducer = [](const nn::BatchNormStats& s) { return s; };
  auto exact = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(2));
  exact->to(DType::f64);
  const Tensor y = (*reduced)(x), want = (*exact)(x.to(DType::f64));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_CLOSE(y, want.to(DType::f32), 1e-5, 1e-5);
  EXPECT_CLOSE(reduced->running_var, exact->running_var.to(DType::f32), 1e-5, 1e-9);
}

// The running statistics of a reduced (synchronized) BatchNorm are updated as the fused
// BatchNorm updates them: (1 - momentum) * running + momentum * batch computed in f64 and
// rounded once to the buffers' dtype. Rounded after each multiply and the add, bf16
// statistics drift from the fused path's by an ulp or more per step (f32 ones by a few).
TEST(BatchNorm, ReducedRunningStatisticsAreRoundedOnceAsTheFusedOnes) {
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    auto reduced = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(3));
    reduced->stats_reducer = [](const nn::BatchNormStats& s) { return s; };
    auto fused = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(3));
    reduced->to(dt);
    fused->to(dt);
    Generator g(23);
    for (int step = 0; step < 8; ++step) {
      const Tensor x = (randn({6, 3, 4, 4}, g) * 1.7 + 0.3).to(dt);
      (*reduced)(x);
      (*fused)(x);
    }
    EXPECT_EQ(reduced->running_mean.to_vector(), fused->running_mean.to_vector()) << dtype_name(dt);
    EXPECT_EQ(reduced->running_var.to_vector(), fused->running_var.to_vector()) << dtype_name(dt);
  }
}
