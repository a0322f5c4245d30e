// Softmax family, losses and dropout: values worked out by hand, gradients by central
// differences, ignore_index, and the dropout mask's dependence on the generator only.
#include <cmath>

#include "common/test_util.h"

using namespace zt;
using zt::test::values_are;

TEST(Softmax, HandValues) {
  // [1, 2, 3]: exp(x - 3) = [e^-2, e^-1, 1], sum 1.503215 ->
  // [0.090031, 0.244728, 0.665241]; log: x - 3 - log(1.503215) = [-2.407606, -1.407606, -0.407606].
  Tensor x = from_vector({1, 2, 3}, {3});
  EXPECT_TRUE(values_are(softmax(x, 0), {0.090031, 0.244728, 0.665241}));
  EXPECT_TRUE(values_are(log_softmax(x, -1), {-2.407606, -1.407606, -0.407606}));
}

TEST(Softmax, OverAnyDim) {
  // x (2, 2) = [[1, 5], [1, 5]]; over dim 0 each column is [1, 1] -> 0.5 everywhere.
  Tensor x = from_vector({1, 5, 1, 5}, {2, 2});
  EXPECT_TRUE(values_are(softmax(x, 0), {0.5, 0.5, 0.5, 0.5}));
  // Over dim 1: [1, 5] -> [1 / (1 + e^4), e^4 / (1 + e^4)] = [0.017986, 0.982014].
  EXPECT_TRUE(values_are(softmax(x, 1), {0.017986, 0.982014, 0.017986, 0.982014}));
  // Middle dim of a 3-D tensor equals moving it last.
  Generator g(1);
  Tensor z = randn({2, 3, 4}, g, DType::f64);
  EXPECT_CLOSE(softmax(z, 1), softmax(z.transpose(1, 2), 2).transpose(1, 2), 1e-12, 1e-12);
}

TEST(Softmax, NumericallyStable) {
  Tensor big = from_vector({1000, 1000}, {2});
  EXPECT_TRUE(values_are(softmax(big, 0), {0.5, 0.5}));
  // log_softmax([-1000, 0]) = [-1000 - log(1 + e^-1000), -log(1 + e^-1000)] = [-1000, 0].
  EXPECT_TRUE(values_are(log_softmax(from_vector({-1000, 0}, {2}), 0), {-1000, 0}));
  // Rows of large negative scores, where exp(x) alone underflows to 0 for every element,
  // along a dim that is not the last (a strided row) and along the last in f64: the row's
  // max is subtracted first. Columns [-1000, -1000] -> [0.5, 0.5]; [-1000, -999] ->
  // [1 / (1 + e), e / (1 + e)] = [0.268941, 0.731059], whose logs are
  // [-1.313262, -0.313262].
  const Tensor far = from_vector({-1000, -1000, -1000, -999}, {2, 2});
  EXPECT_TRUE(values_are(softmax(far, 0), {0.5, 0.268941, 0.5, 0.731059}));
  EXPECT_TRUE(values_are(log_softmax(far, 0), {-0.693147, -1.313262, -0.693147, -0.313262}));
  const Tensor far64 = far.transpose(0, 1).contiguous().to(DType::f64);
  EXPECT_TRUE(values_are(softmax(far64, 1), {0.5, 0.5, 0.268941, 0.731059}));
  EXPECT_TRUE(values_are(log_softmax(far64, -1), {-0.693147, -0.693147, -1.313262, -0.313262}));
}

TEST(Softmax, Gradients) {
  Tensor x = test::rand_leaf({2, 3, 4}, 1);
  for (int64_t d : {0, 1, 2}) {
    EXPECT_GRAD_OK([d](const std::vector<Tensor>& in) { return softmax(in[0], d); }, {x});
    EXPECT_GRAD_OK([d](const std::vector<Tensor>& in) { return log_softmax(in[0], d); }, {x});
  }
  // Non-contiguous input.
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return softmax(in[0].transpose(0, 2), 1); },
                 {x});
}

TEST(CrossEntropy, HandValues) {
  // Row 0 = [0, 0, 0]: -log(1/3) = 1.098612 whatever the target.
  // Row 1 = [0, 0, ln 2]: exp sum 1 + 1 + 2 = 4, target 2 -> -log(2/4) = 0.693147.
  // Mean: (1.098612 + 0.693147) / 2 = 0.895880.
  Tensor logits = from_vector({0, 0, 0, 0, 0, std::log(2.0)}, {2, 3});
  Tensor target = from_vector({0, 2}, {2}, DType::i64);
  EXPECT_NEAR(cross_entropy(logits, target).item(), 0.895880, 1e-5);
  // Ignoring row 1 leaves row 0 alone.
  Tensor t_ign = from_vector({1, -100}, {2}, DType::i64);
  EXPECT_NEAR(cross_entropy(logits, t_ign).item(), 1.098612, 1e-5);
  Tensor t_ign2 = from_vector({1, 7}, {2}, DType::i64);
  EXPECT_NEAR(cross_entropy(logits, t_ign2, 7).item(), 1.098612, 1e-5);
}

TEST(CrossEntropy, GradientByHand) {
  // d loss / d logits = (softmax - onehot) / count. Row 0 uniform, target 0, count 1:
  // [1/3 - 1, 1/3, 1/3]; the ignored row gets zeros.
  Tensor logits = zeros({2, 3}, DType::f64).set_requires_grad(true);
  Tensor target = from_vector({0, -100}, {2}, DType::i64);
  cross_entropy(logits, target).backward();
  EXPECT_TRUE(values_are(logits.grad(), {-2.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0, 0}));
}

TEST(CrossEntropy, SpatialMatchesFlattened) {
  // logits (N, C, H, W) equal the (N*H*W, C) form with the class dim moved last.
  Generator g(5);
  Tensor logits = randn({2, 3, 2, 2}, g, DType::f64);
  Tensor target = randint(0, 3, {2, 2, 2}, g);
  target.data<int64_t>()[3] = -100;
  Tensor flat = logits.permute({0, 2, 3, 1}).reshape({-1, 3});
  EXPECT_NEAR(cross_entropy(logits, target).item(),
              cross_entropy(flat, target.reshape({-1})).item(), 1e-12);
}

TEST(CrossEntropy, Gradients) {
  Tensor logits = test::rand_leaf({4, 5}, 2);
  Tensor target = from_vector({0, 4, -100, 2}, {4}, DType::i64);
  EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], target); },
                 {logits});
  Tensor l4 = test::rand_leaf({2, 3, 2, 2}, 3);
  Tensor t4 = from_vector({0, 1, 2, -100, 2, 2, 1, 0}, {2, 2, 2}, DType::i64);
  EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t4); }, {l4});
}

TEST(CrossEntropy, Errors) {
  Tensor logits = zeros({2, 3});
  try {
    cross_entropy(logits, from_vector({0, 3}, {2}, DType::i64));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range [0, 3)"), std::string::npos);
  }
  EXPECT_THROW(cross_entropy(logits, from_vector({0, 1, 2}, {3}, DType::i64)), Error);
  EXPECT_THROW(cross_entropy(logits, zeros({2})), Error);  // float targets
}

// Numeric against analytic gradients of cross_entropy with `o`, in each reduction, on
// spatial (N, C, H, W) logits drawn from `seed`, one target ignored.
namespace {
void expect_gradients_in_every_reduction(CrossEntropyOptions o, uint64_t seed) {
  Tensor l4 = test::rand_leaf({2, 3, 2, 2}, seed);
  Tensor t4 = from_vector({0, 1, 2, -100, 2, 2, 1, 0}, {2, 2, 2}, DType::i64);
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    o.reduction = r;
    EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t4, o); },
                   {l4});
  }
}
}  // namespace

TEST(CrossEntropy, LabelSmoothingAndReductionsAsPyTorchDefinesThem) {
  // Rows of HandValues: -log p = [1.098612 x 3] and [1.386294, 1.386294, 0.693147].
  // label_smoothing 0.3: (1 - 0.3) * nll + 0.3 * mean_c(-log p_c).
  Tensor logits = from_vector({0, 0, 0, 0, 0, std::log(2.0)}, {2, 3}, DType::f64);
  Tensor target = from_vector({0, 2}, {2}, DType::i64);
  CrossEntropyOptions o;
  o.label_smoothing = 0.3;
  o.reduction = Reduction::kNone;
  const double row1 = 0.7 * 0.693147 + 0.3 * (2 * 1.386294 + 0.693147) / 3;
  EXPECT_TRUE(values_are(cross_entropy(logits, target, o), {1.098612, row1}));
  o.reduction = Reduction::kSum;
  EXPECT_NEAR(cross_entropy(logits, target, o).item(), 1.098612 + row1, 1e-5);
  o.reduction = Reduction::kMean;
  EXPECT_NEAR(cross_entropy(logits, target, o).item(), (1.098612 + row1) / 2, 1e-5);
  // Without smoothing every reduction agrees with the fused loss; an ignored target is 0
  // in kNone and left out of the mean.
  Tensor ignored = from_vector({0, -100}, {2}, DType::i64);
  CrossEntropyOptions plain;
  plain.reduction = Reduction::kNone;
  EXPECT_TRUE(values_are(cross_entropy(logits, ignored, plain), {1.098612, 0}));
  plain.reduction = Reduction::kSum;
  EXPECT_NEAR(cross_entropy(logits, target, plain).item(), 2 * cross_entropy(logits, target).item(),
              1e-12);
  o.reduction = Reduction::kMean;
  EXPECT_NEAR(cross_entropy(logits, ignored, o).item(), 1.098612, 1e-5);
  // Gradients, spatial logits included.
  expect_gradients_in_every_reduction(o, 3);
  o.label_smoothing = 1.5;
  EXPECT_TRUE(test::throws_with([&] { cross_entropy(logits, target, o); },
                                "label_smoothing must be in [0, 1], got 1.5"));
  o.label_smoothing = 0;
  o.weight = ones({4});
  EXPECT_TRUE(test::throws_with([&] { cross_entropy(logits, target, o); },
                                "weight must be a floating tensor of one weight per class (3)"));
  o.weight = Tensor();
  o.label_smoothing = 0.1;
  EXPECT_TRUE(test::throws_with(
      [&] {
        cross_entropy(logits, from_vector({0, 3}, {2}, DType::i64), o);
      },
      "target 3 at position 1 is out of range [0, 3)"));
}

TEST(Losses, MseAndL1) {
  // x = [1, 2, 3], y = [1, 0, 0]: mse = (0 + 4 + 9) / 3 = 4.333333, l1 = (0 + 2 + 3) / 3.
  Tensor x = from_vector({1, 2, 3}, {3}), y = from_vector({1, 0, 0}, {3});
  EXPECT_NEAR(mse_loss(x, y).item(), 13.0 / 3, 1e-6);
  EXPECT_NEAR(l1_loss(x, y).item(), 5.0 / 3, 1e-6);
  Tensor a = test::rand_leaf({2, 3}, 4), b = test::rand_leaf({2, 3}, 5);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); }, {a, b});
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return l1_loss(in[0], in[1]); }, {a, b});
  EXPECT_THROW(mse_loss(zeros({2, 3}), zeros({3})), Error);
}

// 16-bit inputs give f32 losses (loss.h), so that fp16's loss scale of 65536 times the
// loss seeds backward with a finite value; their gradients come back in 16 bits.
TEST(Losses, SixteenBitInputsGiveF32Losses) {
  for (DType dt : {DType::f16, DType::bf16}) {
    // Logits [0, ln 3] over two classes, target 1 in a batch of 4: p = [1/4, 3/4], loss
    // ln(4/3), gradient (p - onehot) * 65536 / 4 = [4096, -4096] per row.
    Tensor logits = from_vector({0, std::log(3.0)}, {1, 2}).expand({4, 2}).contiguous().to(dt);
    logits.set_requires_grad(true);
    Tensor loss = cross_entropy(logits, from_vector({1, 1, 1, 1}, {4}, DType::i64));
    EXPECT_EQ(loss.dtype(), DType::f32) << dtype_name(dt);
    EXPECT_NEAR(loss.item(), std::log(4.0 / 3.0), 2e-3);
    loss.backward(full({}, 65536.0, DType::f32));
    EXPECT_EQ(logits.grad().dtype(), dt);
    EXPECT_TRUE(test::all_close(logits.grad().to(DType::f64),
                                from_vector({4096, -4096}, {1, 2}).expand({4, 2}).to(DType::f64),
                                1e-2, 0))
        << dtype_name(dt);
    // A difference of 300 squares to 90000, past f16's largest value.
    Tensor x = full({2}, 300.0, dt).set_requires_grad(true), y = zeros({2}, dt);
    Tensor mse = mse_loss(x, y);
    EXPECT_EQ(mse.dtype(), DType::f32);
    EXPECT_EQ(mse.item(), 90000.0) << dtype_name(dt);
    mse.backward();
    EXPECT_EQ(x.grad().dtype(), dt);
    EXPECT_TRUE(values_are(x.grad(), {300, 300})) << "2 * 300 / 2";
    EXPECT_EQ(l1_loss(x, y).dtype(), DType::f32);
  }
}

TEST(Dropout, MaskFromGenerator) {
  // Element i is kept iff the f32 uniform at stream position offset + i is < 1 - p;
  // kept values are scaled by 1 / (1 - p) = 4/3.
  Generator g(7);
  g.advance(5);
  Tensor x = ones({64});
  Tensor y = dropout(x, 0.25, true, g);
  EXPECT_EQ(g.offset(), 5u + 64u);
  Generator ref(7);
  std::vector<double> expected(64);
  for (int i = 0; i < 64; ++i) expected[i] = ref.uniform(5 + i) < 0.75f ? 4.0 / 3 : 0.0;
  EXPECT_TRUE(values_are(y, expected));
}

TEST(Dropout, IdentityAndRate) {
  Tensor x = randn({10});
  EXPECT_TRUE(dropout(x, 0.5, false).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).same(x));
  EXPECT_TRUE(values_are(dropout(x, 1.0, true), std::vector<double>(10, 0.0)));
  Generator g(1);
  Tensor y = dropout(ones({4000}), 0.5, true, g);
  double kept = sum(y).item() / 2.0 / 4000.0;
  EXPECT_NEAR(kept, 0.5, 0.03);
  EXPECT_THROW(dropout(x, 1.5, true), Error);
}

TEST(Dropout, GradCheckWithFixedMask) {
  // A fresh generator per call gives the same mask each evaluation.
  Tensor x = test::rand_leaf({4, 5}, 10);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) {
        Generator g(11);
        return dropout(in[0], 0.3, true, g);
      },
      {x});
}

TEST(Dropout, GradientIsTheMask) {
  Tensor x = test::rand_leaf({50}, 9);
  Generator g(3);
  Tensor y = dropout(x, 0.4, true, g);
  y.backward(ones({50}, DType::f64));
  // Where y kept x, the gradient is 1 / 0.6; elsewhere 0.
  std::vector<double> xv = x.to_vector(), yv = y.to_vector(), gv = x.grad().to_vector();
  for (int i = 0; i < 50; ++i) {
    bool kept = yv[i] != 0.0;
    EXPECT_NEAR(gv[i], kept ? 1.0 / 0.6 : 0.0, 1e-12);
    if (kept) {
      EXPECT_NEAR(yv[i], xv[i] / 0.6, 1e-12);
    }
  }
}

TEST(CrossEntropy, ClassWeightsAsPyTorchDefinesThem) {
  // The rows of HandValues again, with weights w = [1, 2, 4]: -log p = [1.098612 x 3] and
  // [1.386294, 1.386294, 0.693147]; targets 0 and 2 weigh 1 and 4.
  const double a = 1.098612, b = 1.386294, c = 0.693147;
  Tensor logits = from_vector({0, 0, 0, 0, 0, std::log(2.0)}, {2, 3}, DType::f64);
  Tensor target = from_vector({0, 2}, {2}, DType::i64);
  CrossEntropyOptions o;
  o.weight = from_vector({1, 2, 4}, {3}, DType::f64);
  // Each position's loss times its target's weight; the mean divides by the weights' sum.
  EXPECT_NEAR(cross_entropy(logits, target, o).item(), (1 * a + 4 * c) / 5, 1e-5);
  o.reduction = Reduction::kSum;
  EXPECT_NEAR(cross_entropy(logits, target, o).item(), 1 * a + 4 * c, 1e-5);
  o.reduction = Reduction::kNone;
  EXPECT_TRUE(values_are(cross_entropy(logits, target, o), {1 * a, 4 * c}));
  // An ignored target weighs nothing in the mean.
  o.reduction = Reduction::kMean;
  EXPECT_NEAR(cross_entropy(logits, from_vector({0, -100}, {2}, DType::i64), o).item(), a, 1e-5);
  // Smoothing: (1 - e) w_t nll + e / C sum_c w_c (-log p_c); the mean divides by sum w_t.
  o.label_smoothing = 0.3;
  const double row0 = 0.7 * a + 0.1 * (1 + 2 + 4) * a;
  const double row1 = 0.7 * 4 * c + 0.1 * (1 * b + 2 * b + 4 * c);
  EXPECT_NEAR(cross_entropy(logits, target, o).item(), (row0 + row1) / 5, 1e-5);
  // Weights of 1 are no weights at all, and gradients check out in every reduction.
  CrossEntropyOptions ones_w;
  ones_w.weight = ones({3}, DType::f64);
  EXPECT_NEAR(cross_entropy(logits, target, ones_w).item(), cross_entropy(logits, target).item(),
              1e-12);
  expect_gradients_in_every_reduction(o, 5);
}

// Every target ignored (a micro-batch of padding alone): the mean is 0 / 0, NaN, as
// PyTorch's, but the gradient is 0, not NaN, with label smoothing or class weights too, so
// summing it with other ranks' gradients spreads nothing.
TEST(CrossEntropy, EveryTargetIgnoredGivesAZeroGradient) {
  const Tensor target = full({3}, -100, DType::i64);
  for (const bool weighted : {false, true}) {
    CrossEntropyOptions o;
    o.label_smoothing = 0.2;
    if (weighted) o.weight = from_vector({1, 2, 3, 4}, {4}, DType::f64);
    Tensor logits = test::rand_leaf({3, 4}, 7);
    Tensor loss = cross_entropy(logits, target, o);
    EXPECT_TRUE(std::isnan(loss.item())) << "0 / 0";
    loss.backward();
    EXPECT_TRUE(values_are(logits.grad(), std::vector<double>(12, 0.0), 0)) << weighted;
  }
}
