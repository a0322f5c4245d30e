// Losses against torch.nn.functional: every reduction, class weights and ignore_index,
// in f64 (to 1e-12) and f32, gradients by central differences (and PyTorch's own where
// the loss has a kink or a clamp), the errors that name the loss, and the modules.
#include <cmath>
#include <limits>
#include <string>

#include "common/test_util.h"
#include "nn/loss.h"
#include "nn/nn_test_util.h"
#include "nn/state_dict.h"

using namespace zt;
using zt::nn_test::keys;
using zt::nn_test::seq;
using zt::test::values_are;

namespace {

const Reduction kAll[] = {Reduction::kMean, Reduction::kSum, Reduction::kNone};

// log_softmax(seq((3, 4), 0.9, 0.2), 1), as torch computes it.
Tensor nll_input(DType dt = DType::f64) {
  return from_vector(
      {-1.804258675680702, -1.1117206464143279, -1.0936305796500816, -1.7636786772617814,
       -1.5984871521463737, -1.986552518767755, -1.6178958990759753, -0.7715092731158388,
       -1.004337045277068, -1.0008733073324008, -1.6801552269884472, -2.5281157899815767},
      {3, 4}, dt);
}

}  // namespace

TEST(NllLoss, MatchesPyTorchInEveryReduction) {
  // torch.nn.functional.nll_loss(nll_input(), [1, -100, 3], weight=[0.5, 1, 2, 1.5] or
  // none, reduction=...).
  const Tensor target = from_vector({1, -100, 3}, {3}, DType::i64);
  const Tensor w = from_vector({0.5, 1.0, 2.0, 1.5}, {4}, DType::f64);
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    const Tensor logp = nll_input(dt);
    const Tensor wt = w.to(dt);
    EXPECT_TRUE(values_are(nll_loss(logp, target), {1.8199182181979523}, tol));
    EXPECT_TRUE(values_are(nll_loss(logp, target, {.reduction = Reduction::kSum}),
                           {3.6398364363959046}, tol));
    EXPECT_TRUE(values_are(nll_loss(logp, target, {.reduction = Reduction::kNone}),
                           {1.1117206464143279, 0.0, 2.5281157899815767}, tol));
    EXPECT_TRUE(values_are(nll_loss(logp, target, {.weight = wt}), {1.9615577325546774}, tol));
    EXPECT_TRUE(values_are(nll_loss(logp, target, {.reduction = Reduction::kSum, .weight = wt}),
                           {4.903894331386693}, tol));
    EXPECT_TRUE(values_are(nll_loss(logp, target, {.reduction = Reduction::kNone, .weight = wt}),
                           {1.1117206464143279, 0.0, 3.792173684972365}, tol));
    EXPECT_EQ(nll_loss(logp, target).dtype(), dt);
  }
}

TEST(NllLoss, SpatialWithIgnoreIndexAndWeights) {
  // torch.nn.functional.nll_loss(seq((2, 3, 2), 0.7, 0.1), [[0, 2], [1, -1]],
  // weight=[1, 2, 3], ignore_index=-1, reduction=...).
  const Tensor x = seq({2, 3, 2}, 0.7, 0.1);
  const Tensor target = from_vector({0, 2, 1, -1}, {2, 2}, DType::i32);
  NLLLossOptions o{.ignore_index = -1, .weight = from_vector({1, 2, 3}, {3}, DType::f64)};
  EXPECT_TRUE(values_are(nll_loss(x, target, o), {0.38818316640550105}, 1e-12));
  o.reduction = Reduction::kSum;
  EXPECT_TRUE(values_are(nll_loss(x, target, o), {2.329098998433006}, 1e-12));
  o.reduction = Reduction::kNone;
  const Tensor none = nll_loss(x, target, o);
  EXPECT_EQ(none.sizes(), Shape({2, 2}));
  EXPECT_TRUE(
      values_are(none, {-0.09983341664682815, 1.3275613298845574, 1.1013710851952767, 0.0}, 1e-12));
}

TEST(NllLoss, GradientsByFiniteDifferences) {
  const Tensor x = test::rand_leaf({2, 3, 2}, 7);
  const Tensor target = from_vector({0, 2, 1, -100}, {2, 2}, DType::i64);
  for (Reduction r : kAll) {
    for (bool weighted : {false, true}) {
      NLLLossOptions o{.reduction = r};
      if (weighted) o.weight = from_vector({1, 2, 3}, {3}, DType::f64);
      EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return nll_loss(in[0], target, o); }, {x})
          << reduction_name(r) << (weighted ? " weighted" : "");
    }
  }
}

TEST(NllLoss, EveryTargetIgnoredIsNaNWithAZeroGradient) {
  // torch.nn.functional.nll_loss with every target ignored: mean nan, sum 0.
  Tensor x = zeros({2, 3}, DType::f64).set_requires_grad(true);
  const Tensor target = from_vector({-100, -100}, {2}, DType::i64);
  Tensor loss = nll_loss(x, target);
  EXPECT_TRUE(std::isnan(loss.item()));
  EXPECT_EQ(nll_loss(x, target, {.reduction = Reduction::kSum}).item(), 0.0);
  loss.backward();
  EXPECT_TRUE(values_are(x.grad(), {0, 0, 0, 0, 0, 0}, 0));
}

TEST(NllLoss, AgreesWithCrossEntropyOverLogSoftmax) {
  Generator g(3);
  const Tensor logits = randn({4, 5, 3}, g, DType::f64);
  const Tensor target = randint(0, 5, {4, 3}, g);
  EXPECT_NEAR(nll_loss(log_softmax(logits, 1), target).item(), cross_entropy(logits, target).item(),
              1e-12);
}

TEST(NllLoss, ErrorsNameTheLoss) {
  const Tensor logp = nll_input();
  EXPECT_TRUE(test::throws_with(
      [&] {
        nll_loss(logp, from_vector({0, 1, 4}, {3}, DType::i64));
      },
      "nll_loss: target 4 at position 2 is out of range [0, 4) (and is not ignore_index = -100)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        nll_loss(logp, from_vector({0, 1}, {2}, DType::i64));
      },
      "nll_loss: target shape [2] does not match input [3, 4]"));
  EXPECT_TRUE(test::throws_with([&] { nll_loss(logp, zeros({3})); },
                                "nll_loss: target must hold class indices"));
  EXPECT_TRUE(test::throws_with([&] { nll_loss(zeros({3}), zeros({3}, DType::i64)); },
                                "nll_loss: input must be (N, C) or (N, C, *)"));
  EXPECT_TRUE(test::throws_with(
      [&] { nll_loss(logp, zeros({3}, DType::i64), {.weight = ones({3}, DType::f64)}); },
      "nll_loss: weight must be a floating tensor of one weight per class (4)"));
  EXPECT_TRUE(test::throws_with(
      [&] { nll_loss(logp, zeros({3}, DType::i64), {.reduction = Reduction::kBatchMean}); },
      "nll_loss: reduction batchmean is kl_div's alone"));
}

TEST(BinaryCrossEntropy, MatchesPyTorchInEveryReduction) {
  // torch.nn.functional.binary_cross_entropy(p, y, weight=[1, 2, 0.5] or none,
  // reduction=...): p = 0 and p = 1 reach the clamp of the logs at -100.
  const std::vector<double> p = {0.1, 0.5, 0.9, 0.0, 1.0, 0.3};
  const std::vector<double> y = {0.0, 1.0, 0.5, 1.0, 0.0, 0.7};
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    const Tensor pt = from_vector(p, {2, 3}, dt), yt = from_vector(y, {2, 3}, dt);
    const Tensor w = from_vector({1.0, 2.0, 0.5}, {3}, dt);
    EXPECT_TRUE(values_are(binary_cross_entropy(pt, yt), {33.82537732445891}, tol));
    EXPECT_TRUE(values_are(binary_cross_entropy(pt, yt, {.reduction = Reduction::kSum}),
                           {202.95226394675348}, tol));
    EXPECT_TRUE(values_are(binary_cross_entropy(pt, yt, {.reduction = Reduction::kNone}),
                           {0.10536051565782631, 0.6931471805599453, 1.2039728043259361, 100.0,
                            100.0, 0.949783446209775},
                           tol));
    EXPECT_TRUE(values_are(binary_cross_entropy(pt, yt, {.weight = w}), {50.42808883367426}, tol));
    EXPECT_TRUE(
        values_are(binary_cross_entropy(pt, yt, {.reduction = Reduction::kSum, .weight = w}),
                   {302.56853300204557}, tol));
    EXPECT_TRUE(
        values_are(binary_cross_entropy(pt, yt, {.reduction = Reduction::kNone, .weight = w}),
                   {0.10536051565782631, 1.3862943611198906, 0.6019864021629681, 100.0, 200.0,
                    0.4748917231048875},
                   tol));
    // A weight of the input's own shape (a per-element mask) weighs alike.
    const Tensor w_full = w.expand({2, 3}).contiguous();
    EXPECT_TRUE(
        values_are(binary_cross_entropy(pt, yt, {.weight = w_full}), {50.42808883367426}, tol));
  }
}

TEST(BinaryCrossEntropy, GradientsAsPyTorchAtTheClamp) {
  // The gradient to p of torch.nn.functional.binary_cross_entropy(..., weight, 'sum'):
  // (p - y) / max(p (1 - p), 1e-12 as a float), so p = 0 and 1 give about -+1e12.
  Tensor p =
      from_vector({0.1, 0.5, 0.9, 0.0, 1.0, 0.3}, {2, 3}, DType::f64).set_requires_grad(true);
  Tensor y =
      from_vector({0.0, 1.0, 0.5, 1.0, 0.0, 0.7}, {2, 3}, DType::f64).set_requires_grad(true);
  const Tensor w = from_vector({1.0, 2.0, 0.5}, {3}, DType::f64);
  binary_cross_entropy(p, y, {.reduction = Reduction::kSum, .weight = w}).backward();
  EXPECT_TRUE(values_are(p.grad(),
                         {1.111111111111111, -4.0, 2.2222222222222228, -1000000003995.8029,
                          2000000007991.6057, -0.9523809523809523},
                         1e-12));
  // To y: log(1 - p) - log p with PyTorch's values where p is inside (0, 1); at p = 0 and
  // 1 zt clamps both logs as the loss does (100 w and -100 w, where PyTorch has +-inf).
  EXPECT_TRUE(values_are(
      y.grad(), {2.197224577336219, 0.0, -1.0986122886681098, 100.0, -200.0, 0.4236489301936018},
      1e-12));
}

TEST(BinaryCrossEntropy, GradientsByFiniteDifferences) {
  Tensor p =
      from_vector({0.1, 0.45, 0.9, 0.02, 0.97, 0.3}, {2, 3}, DType::f64).set_requires_grad(true);
  Tensor y =
      from_vector({0.0, 1.0, 0.5, 1.0, 0.2, 0.7}, {2, 3}, DType::f64).set_requires_grad(true);
  const Tensor w = from_vector({1.0, 2.0, 0.5}, {3}, DType::f64);
  for (Reduction r : kAll)
    EXPECT_GRAD_OK(
        [&](const std::vector<Tensor>& in) {
          return binary_cross_entropy(in[0], in[1], {.reduction = r, .weight = w});
        },
        {p, y}, 1e-7)
        << reduction_name(r);
}

TEST(BinaryCrossEntropy, RefusesWhatIsNotAProbability) {
  const Tensor y = zeros({3}, DType::f64);
  for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_TRUE(test::throws_with(
        [&] {
          binary_cross_entropy(from_vector({0.5, bad, 0.5}, {3}, DType::f64), y);
        },
        "binary_cross_entropy: every element of the input must be a probability in [0, 1]"))
        << bad;
  }
  EXPECT_TRUE(test::throws_with(
      [&] {
        binary_cross_entropy(full({3}, 0.5, DType::f64), y, {.weight = ones({2}, DType::f64)});
      },
      "binary_cross_entropy: weight [2] must broadcast to the input's shape [3]"));
}

TEST(BinaryCrossEntropyWithLogits, MatchesPyTorchInEveryReduction) {
  // torch.nn.functional.binary_cross_entropy_with_logits(z, y, weight=[1, 2, 0.5],
  // pos_weight=[2, 0.5, 3] or neither, reduction=...).
  const std::vector<double> z = {-30.0, -1.0, 0.0, 2.0, 40.0, 0.5};
  const std::vector<double> y = {0.0, 1.0, 0.5, 1.0, 0.0, 0.25};
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    const Tensor zt = from_vector(z, {2, 3}, dt), yt = from_vector(y, {2, 3}, dt);
    const BCEWithLogitsLossOptions both{.weight = from_vector({1.0, 2.0, 0.5}, {3}, dt),
                                        .pos_weight = from_vector({2.0, 0.5, 3.0}, {3}, dt)};
    EXPECT_TRUE(values_are(binary_cross_entropy_with_logits(zt, yt), {7.163735643883556}, tol));
    EXPECT_TRUE(values_are(binary_cross_entropy_with_logits(zt, yt, {.reduction = Reduction::kSum}),
                           {42.98241386330134}, tol));
    EXPECT_TRUE(
        values_are(binary_cross_entropy_with_logits(zt, yt, {.reduction = Reduction::kNone}),
                   {9.237055564881302e-14, 1.3132616875182228, 0.6931471805599453,
                    0.1269280110429725, 40.0, 0.8490769841801067},
                   tol));
    BCEWithLogitsLossOptions o = both;
    EXPECT_TRUE(values_are(binary_cross_entropy_with_logits(zt, yt, o), {13.800553771383212}, tol));
    o.reduction = Reduction::kSum;
    EXPECT_TRUE(values_are(binary_cross_entropy_with_logits(zt, yt, o), {82.80332262829927}, tol));
    o.reduction = Reduction::kNone;
    EXPECT_TRUE(values_are(binary_cross_entropy_with_logits(zt, yt, o),
                           {9.237055564881302e-14, 1.3132616875182228, 0.6931471805599453,
                            0.253856022085945, 80.0, 0.5430577381350801},
                           tol));
  }
  // Relative accuracy of the tiny loss at z = -30, y = 0: log(1 + e^-30).
  const Tensor tiny =
      binary_cross_entropy_with_logits(from_vector({-30}, {1}, DType::f64), zeros({1}, DType::f64));
  EXPECT_NEAR(tiny.item() / 9.237055564881302e-14, 1.0, 1e-14);
}

TEST(BinaryCrossEntropyWithLogits, GradientsByFiniteDifferences) {
  const Tensor z = test::rand_leaf({2, 3}, 11);
  const Tensor y =
      from_vector({0.0, 1.0, 0.5, 1.0, 0.2, 0.25}, {2, 3}, DType::f64).set_requires_grad(true);
  const Tensor pw = from_vector({2.0, 0.5, 3.0}, {3}, DType::f64).set_requires_grad(true);
  const Tensor w = from_vector({1.0, 2.0, 0.5}, {3}, DType::f64);
  for (Reduction r : kAll)
    EXPECT_GRAD_OK(
        [&](const std::vector<Tensor>& in) {
          return binary_cross_entropy_with_logits(
              in[0], in[1], {.reduction = r, .weight = w, .pos_weight = in[2]});
        },
        {z, y, pw})
        << reduction_name(r);
  // Far out the gradient is still finite: sigmoid(z) - y = 0 - 1 and 1 - 0.
  Tensor big = from_vector({-800, 800}, {2}, DType::f64).set_requires_grad(true);
  binary_cross_entropy_with_logits(big, from_vector({1, 0}, {2}, DType::f64),
                                   {.reduction = Reduction::kSum})
      .backward();
  EXPECT_TRUE(values_are(big.grad(), {-1, 1}, 1e-12));
}

TEST(PointwiseLosses, MatchPyTorchInEveryReduction) {
  // torch.nn.functional.{mse,l1,smooth_l1,huber}_loss(a, b, reduction=..., beta / delta).
  const std::vector<double> a = {0.0, 0.2, -0.5, 1.0, 2.5, -3.0, 0.49, -0.7};
  const std::vector<double> b = {0.1, -0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3};
  struct Expect {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&, Reduction)> fn;
    double mean, sum;
    std::vector<double> none;
  };
  const std::vector<Expect> expects = {
      {"mse_loss",
       [](const Tensor& x, const Tensor& y, Reduction r) { return mse_loss(x, y, r); },
       2.2387625,
       17.9101,
       {0.010000000000000002, 0.16000000000000003, 0.25, 1.0, 6.25, 9.0, 0.24009999999999998, 1.0}},
      {"l1_loss",
       [](const Tensor& x, const Tensor& y, Reduction r) { return l1_loss(x, y, r); },
       1.12375,
       8.99,
       {0.1, 0.4, 0.5, 1.0, 2.5, 3.0, 0.49, 1.0}},
      {"smooth_l1_loss(beta=0.5)",
       [](const Tensor& x, const Tensor& y, Reduction r) { return smooth_l1_loss(x, y, r, 0.5); },
       0.8950125,
       7.1601,
       {0.010000000000000002, 0.16000000000000003, 0.25, 0.75, 2.25, 2.75, 0.24009999999999998,
        0.75}},
      {"smooth_l1_loss(beta=1)",
       [](const Tensor& x, const Tensor& y, Reduction r) { return smooth_l1_loss(x, y, r); },
       0.72875625,
       5.83005,
       {0.005000000000000001, 0.08000000000000002, 0.125, 0.5, 2.0, 2.5, 0.12004999999999999, 0.5}},
      {"smooth_l1_loss(beta=0)",
       [](const Tensor& x, const Tensor& y, Reduction r) { return smooth_l1_loss(x, y, r, 0.0); },
       1.12375,
       8.99,
       {0.1, 0.4, 0.5, 1.0, 2.5, 3.0, 0.49, 1.0}},
      {"huber_loss(delta=2)",
       [](const Tensor& x, const Tensor& y, Reduction r) { return huber_loss(x, y, r, 2.0); },
       1.04125625,
       8.33005,
       {0.005000000000000001, 0.08000000000000002, 0.125, 0.5, 3.0, 4.0, 0.12004999999999999, 0.5}},
      {"huber_loss(delta=1)",
       [](const Tensor& x, const Tensor& y, Reduction r) { return huber_loss(x, y, r); },
       0.72875625,
       5.83005,
       {0.005000000000000001, 0.08000000000000002, 0.125, 0.5, 2.0, 2.5, 0.12004999999999999, 0.5}},
  };
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    const Tensor x = from_vector(a, {2, 4}, dt), y = from_vector(b, {2, 4}, dt);
    for (const Expect& e : expects) {
      EXPECT_TRUE(values_are(e.fn(x, y, Reduction::kMean), {e.mean}, tol)) << e.name;
      EXPECT_TRUE(values_are(e.fn(x, y, Reduction::kSum), {e.sum}, tol)) << e.name;
      const Tensor none = e.fn(x, y, Reduction::kNone);
      EXPECT_EQ(none.sizes(), Shape({2, 4})) << e.name;
      EXPECT_TRUE(values_are(none, e.none, tol)) << e.name;
    }
  }
  // The two-argument forms still mean-reduce.
  const Tensor x = from_vector(a, {2, 4}, DType::f64), y = from_vector(b, {2, 4}, DType::f64);
  EXPECT_TRUE(values_are(mse_loss(x, y), {2.2387625}, 1e-12));
  EXPECT_TRUE(values_are(l1_loss(x, y), {1.12375}, 1e-12));
}

TEST(PointwiseLosses, GradientsAtTheKinksAsPyTorch) {
  // Gradients of torch.nn.functional.smooth_l1_loss(a, b, 'sum', beta=0.5) and
  // huber_loss(a, b, 'sum', delta=2): |d| = beta at the third element.
  const std::vector<double> av = {0.0, 0.2, -0.5, 1.0, 2.5, -3.0, 0.49, -0.7};
  const Tensor b = from_vector({0.1, -0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3}, {2, 4}, DType::f64);
  Tensor a = from_vector(av, {2, 4}, DType::f64).set_requires_grad(true);
  smooth_l1_loss(a, b, Reduction::kSum, 0.5).backward();
  EXPECT_TRUE(values_are(a.grad(), {-0.2, 0.8, -1.0, 1.0, 1.0, -1.0, 0.98, -1.0}, 1e-12));
  Tensor a2 = from_vector(av, {2, 4}, DType::f64).set_requires_grad(true);
  huber_loss(a2, b, Reduction::kSum, 2.0).backward();
  EXPECT_TRUE(values_are(a2.grad(), {-0.1, 0.4, -0.5, 1.0, 2.0, -2.0, 0.49, -1.0}, 1e-12));
  // beta = 0 is l1's gradient, sign(d), 0 at d = 0, and no NaN.
  Tensor z = from_vector({0.0, 1.0, -2.0}, {3}, DType::f64).set_requires_grad(true);
  smooth_l1_loss(z, zeros({3}, DType::f64), Reduction::kSum, 0.0).backward();
  EXPECT_TRUE(values_are(z.grad(), {0, 1, -1}, 0));
}

TEST(PointwiseLosses, GradientsByFiniteDifferences) {
  const Tensor x = test::rand_leaf({3, 4}, 21), y = test::rand_leaf({3, 4}, 22);
  for (Reduction r : kAll) {
    const std::string name = reduction_name(r);
    EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], r); }, {x, y})
        << name;
    EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return l1_loss(in[0], in[1], r); }, {x, y})
        << name;
    EXPECT_GRAD_OK(
        [&](const std::vector<Tensor>& in) { return smooth_l1_loss(in[0], in[1], r, 0.7); }, {x, y})
        << name;
    EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return huber_loss(in[0], in[1], r, 0.7); },
                   {x, y})
        << name;
  }
}

TEST(PointwiseLosses, ErrorsNameTheLoss) {
  const Tensor x = zeros({2, 3}, DType::f64);
  EXPECT_TRUE(
      test::throws_with([&] { huber_loss(x, zeros({3}, DType::f64)); },
                        "huber_loss: input [2, 3] and target [3] must have the same shape"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        smooth_l1_loss(x, zeros({2, 3}));
      },
      "smooth_l1_loss: input f64 and target f32 must have one dtype"));
  EXPECT_TRUE(test::throws_with([&] { mse_loss(zeros({2}, DType::i64), zeros({2}, DType::i64)); },
                                "mse_loss: input and target must be floating"));
  EXPECT_TRUE(test::throws_with([&] { smooth_l1_loss(x, x, Reduction::kMean, -1); },
                                "smooth_l1_loss: beta must be non-negative"));
  EXPECT_TRUE(test::throws_with([&] { huber_loss(x, x, Reduction::kMean, 0); },
                                "huber_loss: delta must be positive"));
  EXPECT_TRUE(test::throws_with([&] { l1_loss(x, x, Reduction::kBatchMean); },
                                "l1_loss: reduction batchmean is kl_div's alone"));
  // The mean of nothing is an error naming the loss; the sum of nothing is 0.
  const Tensor empty = zeros({0, 3}, DType::f64);
  for (const char* op : {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
                         "binary_cross_entropy", "binary_cross_entropy_with_logits"}) {
    const std::string name = op;
    auto run = [&](Reduction r) {
      if (name == "mse_loss") return mse_loss(empty, empty, r);
      if (name == "l1_loss") return l1_loss(empty, empty, r);
      if (name == "smooth_l1_loss") return smooth_l1_loss(empty, empty, r);
      if (name == "huber_loss") return huber_loss(empty, empty, r);
      if (name == "kl_div") return kl_div(empty, empty, {.reduction = r});
      if (name == "binary_cross_entropy")
        return binary_cross_entropy(empty, empty, {.reduction = r});
      return binary_cross_entropy_with_logits(empty, empty, {.reduction = r});
    };
    EXPECT_TRUE(test::throws_with([&] { run(Reduction::kMean); }, name + ": mean over an empty"));
    EXPECT_EQ(run(Reduction::kSum).item(), 0.0) << name;
    EXPECT_EQ(run(Reduction::kNone).sizes(), Shape({0, 3})) << name;
  }
}

TEST(KLDiv, MatchesPyTorchInEveryReduction) {
  // torch.nn.functional.kl_div(lq, t, reduction=...) with lq = log_softmax(seq((2, 3),
  // 1.3, 0.4), 1), t = [[0.2, 0, 0.8], [0.5, 0.25, 0.25]]; and with log_target=True,
  // t = log_softmax(seq((2, 3), 0.6, 0.9), 1).
  const std::vector<double> lq = {-1.2826944899921533, -0.6804480218483354, -1.5309928242409367,
                                  -1.915039474670061,  -1.6301401757929266, -0.42043377353240546};
  const std::vector<double> lt = {-1.2005641811480876, -0.9863961041715167, -1.1206817241266975,
                                  -0.6338765208163561, -1.2190020951934346, -1.74902256023416};
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    const Tensor x = from_vector(lq, {2, 3}, dt);
    const Tensor t = from_vector({0.2, 0.0, 0.8, 0.5, 0.25, 0.25}, {2, 3}, dt);
    const Tensor tl = from_vector(lt, {2, 3}, dt);
    auto kl = [&](const Tensor& target, Reduction r, bool log_target) {
      return kl_div(x, target, {.reduction = r, .log_target = log_target});
    };
    EXPECT_TRUE(values_are(kl(t, Reduction::kMean, false), {0.23522886461323966}, tol));
    EXPECT_TRUE(values_are(kl(t, Reduction::kSum, false), {1.411373187679438}, tol));
    EXPECT_TRUE(values_are(kl(t, Reduction::kBatchMean, false), {0.705686593839719}, tol));
    EXPECT_TRUE(values_are(kl(t, Reduction::kNone, false),
                           {-0.06534868448838943, 0.0, 1.0462794183413817, 0.6109461470550579,
                            0.060961453668259, -0.24146514689687126},
                           tol));
    EXPECT_TRUE(values_are(kl(tl, Reduction::kMean, true), {0.1024188606589075}, tol));
    EXPECT_TRUE(values_are(kl(tl, Reduction::kSum, true), {0.614513163953445}, tol));
    EXPECT_TRUE(values_are(kl(tl, Reduction::kBatchMean, true), {0.3072565819767225}, tol));
    EXPECT_TRUE(values_are(kl(tl, Reduction::kNone, true),
                           {0.024723221335551323, -0.1140936175280597, 0.13378498592892607,
                            0.6796969120987861, 0.12150155066927029, -0.2310998885510291},
                           tol));
  }
}

// A target of 0 contributes 0 with no gradient, whatever logp is there: -inf too, where a
// mask left the class out (0 * -inf would make the loss NaN).
TEST(KLDiv, AZeroTargetContributesNothingEvenAtMinusInfinity) {
  const Tensor logp = log_softmax(from_vector({0.0, -INFINITY}, {1, 2}, DType::f64), 1);
  const Tensor t = from_vector({1.0, 0.0}, {1, 2}, DType::f64).set_requires_grad(true);
  const Tensor l = kl_div(logp, t, {.reduction = Reduction::kSum});
  EXPECT_EQ(l.item(), 0.0);
  const Tensor x = from_vector({-0.1, -2.3}, {2}, DType::f64).set_requires_grad(true);
  const Tensor t2 = from_vector({1.0, 0.0}, {2}, DType::f64).set_requires_grad(true);
  kl_div(x, t2, {.reduction = Reduction::kSum}).backward();
  // d/dt [t (log t - x)] = log t + 1 - x = 1.1 at t = 1; 0 at t = 0. d/dx = -t.
  EXPECT_TRUE(values_are(t2.grad(), {1.1, 0.0}, 1e-12));
  EXPECT_TRUE(values_are(x.grad(), {-1.0, 0.0}, 1e-12));
}

TEST(KLDiv, GradientsByFiniteDifferences) {
  const Tensor x = test::rand_leaf({2, 3}, 31);
  const Tensor t =
      from_vector({0.2, 0.1, 0.7, 0.5, 0.25, 0.25}, {2, 3}, DType::f64).set_requires_grad(true);
  const Tensor tl = test::rand_leaf({2, 3}, 32);
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone, Reduction::kBatchMean}) {
    EXPECT_GRAD_OK(
        [&](const std::vector<Tensor>& in) { return kl_div(in[0], in[1], {.reduction = r}); },
        {x, t})
        << reduction_name(r);
    EXPECT_GRAD_OK(
        [&](const std::vector<Tensor>& in) {
          return kl_div(in[0], in[1], {.reduction = r, .log_target = true});
        },
        {x, tl})
        << reduction_name(r);
  }
  // A zero target contributes 0, and so does its gradient (log t + 1 - x would be -inf
  // there; and +inf where x is -inf); to the input, -t.
  Tensor xz = from_vector({-1.0, -2.0}, {2}, DType::f64).set_requires_grad(true);
  Tensor tz = from_vector({0.0, 0.5}, {2}, DType::f64).set_requires_grad(true);
  kl_div(xz, tz, {.reduction = Reduction::kSum}).backward();
  EXPECT_TRUE(values_are(xz.grad(), {0.0, -0.5}, 0));
  EXPECT_TRUE(values_are(tz.grad(), {0.0, std::log(0.5) + 1 + 2.0}, 1e-15));
  EXPECT_TRUE(test::throws_with(
      [] {
        kl_div(zeros({}, DType::f64), zeros({}, DType::f64), {.reduction = Reduction::kBatchMean});
      },
      "kl_div: batchmean needs a batch"));
}

TEST(Losses, SixteenBitInputsGiveF32LossesAndSixteenBitGradients) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor x = from_vector({0.25, 0.5, 0.75, -1.0}, {4}).to(dt).set_requires_grad(true);
    const Tensor p = from_vector({0.25, 0.5, 0.75, 0.5}, {4}).to(dt);
    const Tensor y = from_vector({0.0, 1.0, 1.0, 0.0}, {4}).to(dt);
    const std::vector<Tensor> losses = {
        smooth_l1_loss(x, y),       huber_loss(x, y), binary_cross_entropy_with_logits(x, y),
        binary_cross_entropy(p, y), kl_div(x, y),     mse_loss(x, y, Reduction::kSum)};
    for (const Tensor& l : losses) EXPECT_EQ(l.dtype(), DType::f32) << dtype_name(dt);
    EXPECT_EQ(nll_loss(x.reshape({2, 2}), from_vector({0, 1}, {2}, DType::i64)).dtype(),
              DType::f32);
    sum(stack({losses[0], losses[1], losses[2]}, 0)).backward();
    EXPECT_EQ(x.grad().dtype(), dt);
  }
}

TEST(LossModules, ForwardTheirLossWithTheirOptions) {
  const Tensor a = seq({2, 4}, 0.8, 0.3), b = seq({2, 4}, 0.5, 1.1);
  EXPECT_EQ(nn::MSELoss()(a, b).item(), mse_loss(a, b).item());
  EXPECT_EQ(nn::MSELoss(Reduction::kSum)(a, b).item(), mse_loss(a, b, Reduction::kSum).item());
  EXPECT_EQ(nn::L1Loss(Reduction::kNone)(a, b).sizes(), Shape({2, 4}));
  EXPECT_EQ(
      nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0.3).reduction(Reduction::kSum))(a, b).item(),
      smooth_l1_loss(a, b, Reduction::kSum, 0.3).item());
  EXPECT_EQ(nn::HuberLoss(nn::HuberLossOptions().delta(0.3))(a, b).item(),
            huber_loss(a, b, Reduction::kMean, 0.3).item());
  const Tensor logp = nll_input(), target = from_vector({1, -100, 3}, {3}, DType::i64);
  const Tensor w = from_vector({0.5, 1.0, 2.0, 1.5}, {4}, DType::f64);
  EXPECT_NEAR(nn::NLLLoss({.weight = w})(logp, target).item(), 1.9615577325546774, 1e-12);
  const Tensor kl_t = softmax(b, 1);
  EXPECT_EQ(nn::KLDivLoss({.reduction = Reduction::kBatchMean})(log_softmax(a, 1), kl_t).item(),
            kl_div(log_softmax(a, 1), kl_t, {.reduction = Reduction::kBatchMean}).item());
  const Tensor p = sigmoid(a), y = sigmoid(b);
  EXPECT_EQ(nn::BCELoss()(p, y).item(), binary_cross_entropy(p, y).item());
  const Tensor pw = from_vector({1, 2, 3, 4}, {4}, DType::f64);
  EXPECT_EQ(nn::BCEWithLogitsLoss({.pos_weight = pw})(a, y).item(),
            binary_cross_entropy_with_logits(a, y, {.pos_weight = pw}).item());
  // CrossEntropyLoss on (N, C, H, W) logits (H != W) and (N, H, W) targets, as the op; a
  // target whose spatial dims are not the logits' is the module's error.
  const Tensor maps = seq({2, 3, 4, 5}, 0.3, 0.7);
  const Tensor classes = from_vector(std::vector<double>(40, 2.0), {2, 4, 5}, DType::i64);
  EXPECT_EQ(nn::CrossEntropyLoss({.label_smoothing = 0.1})(maps, classes).item(),
            cross_entropy(maps, classes, {.label_smoothing = 0.1}).item());
  EXPECT_TRUE(test::throws_with(
      [&] { nn::CrossEntropyLoss()(maps, classes.transpose(1, 2)); },
      "CrossEntropyLoss: logits [2, 3, 4, 5] (N, C, *) and target [2, 5, 4] (N, *) do not match"));
  // A module's shape error names the module.
  EXPECT_TRUE(test::throws_with([&] { nn::HuberLoss()(a, b.reshape({8})); },
                                "HuberLoss: input [2, 4] and target [8] must have the same shape"));
}

TEST(LossModules, WeightsAreBuffersNamedAsPyTorchNamesThem) {
  const Tensor w = from_vector({0.5, 1.0, 2.0}, {3}, DType::f64);
  nn::NLLLoss nll({.weight = w});
  EXPECT_EQ(keys(nn::state_dict(nll)), std::vector<std::string>({"weight"}));
  EXPECT_TRUE(keys(nn::state_dict(nn::NLLLoss())).empty());
  nn::BCEWithLogitsLoss bce({.weight = w, .pos_weight = w});
  EXPECT_EQ(keys(nn::state_dict(bce)), std::vector<std::string>({"weight", "pos_weight"}));
  EXPECT_EQ(keys(nn::state_dict(nn::BCELoss({.weight = w}))), std::vector<std::string>({"weight"}));
  nn::CrossEntropyLoss ce(CrossEntropyOptions{.weight = w.clone()});
  EXPECT_EQ(keys(nn::state_dict(ce)), std::vector<std::string>({"weight"}));
  ce.to(DType::f32);
  EXPECT_EQ(nn::state_dict(ce)[0].second.dtype(), DType::f32);
  // The buffer is what forward reads: converting the module converts the weight it uses.
  bce.to(DType::f32);
  EXPECT_EQ(bce.options.weight.dtype(), DType::f32);
  const Tensor z = seq({2, 3}, 0.4, 0.2, DType::f32), y = full({2, 3}, 0.5, DType::f32);
  EXPECT_EQ(bce(z, y).dtype(), DType::f32);
}

TEST(LossModules, PrintTheirOptions) {
  EXPECT_EQ(nn::MSELoss().extra_repr(), "reduction=mean");
  EXPECT_EQ(nn::L1Loss(Reduction::kSum).extra_repr(), "reduction=sum");
  EXPECT_EQ(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0.5)).extra_repr(),
            "reduction=mean, beta=0.5");
  EXPECT_EQ(nn::HuberLoss(nn::HuberLossOptions().reduction(Reduction::kNone)).extra_repr(),
            "reduction=none, delta=1");
  EXPECT_EQ(nn::NLLLoss().extra_repr(), "ignore_index=-100, reduction=mean");
  EXPECT_EQ(nn::KLDivLoss({.reduction = Reduction::kBatchMean, .log_target = true}).extra_repr(),
            "reduction=batchmean, log_target=true");
  EXPECT_EQ(nn::BCEWithLogitsLoss().extra_repr(), "reduction=mean");
  EXPECT_EQ(nn::CrossEntropyLoss(CrossEntropyOptions{.reduction = Reduction::kSum}).extra_repr(),
            "ignore_index=-100, reduction=sum");
  EXPECT_TRUE(test::throws_with([] { nn::HuberLoss(nn::HuberLossOptions().delta(-1)); },
                                "HuberLoss: delta must be positive"));
  EXPECT_TRUE(test::throws_with([] { nn::BCELoss({.reduction = Reduction::kBatchMean}); },
                                "BCELoss: reduction batchmean is KLDivLoss's"));
  EXPECT_TRUE(test::throws_with(
      [] {
        cross_entropy(zeros({2, 3}), zeros({2}, DType::i64), {.reduction = Reduction::kBatchMean});
      },
      "cross_entropy: reduction batchmean is kl_div's alone"));
}
