// Activations against torch.nn.functional: values in f64 (to 1e-12) and f32, gradients at
// the kinks as PyTorch defines them (its numbers, embedded), gradients elsewhere by
// central differences, and the modules' options and printed form.
#include <cmath>
#include <functional>
#include <string>

#include "common/test_util.h"
#include "nn/activation.h"

using namespace zt;
using zt::test::values_are;

namespace {

// The points every activation is evaluated at: both sides of every kink, and the kinks.
const std::vector<double> kPoints = {-4, -3, -1.5, -0.5, 0, 0.5, 1.5, 3, 4};

struct Case {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  std::vector<double> value;     // f(kPoints)
  std::vector<double> gradient;  // d f / d x at kPoints
};

// Values from torch.nn.functional.<name>(torch.tensor(kPoints, dtype=torch.float64)) and
// the gradient of their sum, with the options shown.
std::vector<Case> cases() {
  return {
      {"leaky_relu(negative_slope=0.2)",
       [](const Tensor& x) { return leaky_relu(x, 0.2); },
       {-0.8, -0.6000000000000001, -0.30000000000000004, -0.1, 0.0, 0.5, 1.5, 3.0, 4.0},
       {0.2, 0.2, 0.2, 0.2, 0.2, 1.0, 1.0, 1.0, 1.0}},
      {"elu(alpha=1.5)",
       [](const Tensor& x) { return elu(x, 1.5); },
       {-1.4725265416668987, -1.4253193974482041, -1.1653047597773554, -0.5902040104310499, 0.0,
        0.5, 1.5, 3.0, 4.0},
       {0.027473458333101268, 0.07468060255179591, 0.33469524022264474, 0.9097959895689501, 1.5,
        1.0, 1.0, 1.0, 1.0}},
      {"softplus(beta=2, threshold=3)",
       [](const Tensor& x) { return softplus(x, 2.0, 3.0); },
       {0.00016770318644788442, 0.0012378425688652247, 0.02429367578687103, 0.15663084375911143,
        0.34657359027997264, 0.6566308437591114, 1.524293675786871, 3.0, 4.0},
       {0.00033535013046647816, 0.0024726231566347748, 0.04742587317756679, 0.2689414213699951, 0.5,
        0.7310585786300049, 0.9525741268224333, 1.0, 1.0}},
      {"softplus()",
       [](const Tensor& x) { return softplus(x); },
       {0.018149927917809738, 0.04858735157374206, 0.2014132779827524, 0.4740769841801067,
        0.6931471805599453, 0.9740769841801067, 1.7014132779827524, 3.048587351573742,
        4.0181499279178094},
       {0.017986209962091555, 0.04742587317756679, 0.18242552380635632, 0.37754066879814546, 0.5,
        0.6224593312018546, 0.8175744761936437, 0.9525741268224333, 0.9820137900379085}},
      {"logsigmoid",
       [](const Tensor& x) { return log_sigmoid(x); },
       {-4.0181499279178094, -3.048587351573742, -1.7014132779827524, -0.9740769841801067,
        -0.6931471805599453, -0.4740769841801067, -0.2014132779827524, -0.04858735157374206,
        -0.018149927917809738},
       {0.9820137900379085, 0.9525741268224333, 0.8175744761936437, 0.6224593312018545, 0.5,
        0.37754066879814546, 0.18242552380635632, 0.04742587317756679, 0.017986209962091555}},
      {"mish",
       [](const Tensor& x) { return mish(x); },
       {-0.07259174079202535, -0.1456474612756246, -0.2980997421668068, -0.22074377465173, 0.0,
        0.37524521130489513, 1.4033782663958028, 2.9865350049679575, 3.9974128069762385},
       {-0.05377320979348033, -0.09339311453232084, -0.06409781589225866, 0.28951067791351226, 0.6,
        0.8864243753577273, 1.0884879850078475, 1.0211069109294435, 1.0044328769037503}},
      // PyTorch's gradient at the kinks -3 and 3 since 2.7 (0 and 1, the outer sides');
      // earlier releases, 2.5 among them, gave -0.5 and 1.5 there.
      {"hardswish",
       [](const Tensor& x) { return hardswish(x); },
       {0.0, 0.0, -0.375, -0.20833333333333334, 0.0, 0.2916666666666667, 1.125, 3.0, 4.0},
       {0.0, 0.0, 0.0, 0.33333333333333337, 0.5, 0.6666666666666666, 1.0, 1.0, 1.0}},
      // PyTorch's hardsigmoid gradient is the float 1/6 (0.1666666716337204) even in f64;
      // zt's is 1/6 in the input's dtype, 5e-9 from it.
      {"hardsigmoid",
       [](const Tensor& x) { return hardsigmoid(x); },
       {0.0, 0.0, 0.25, 0.4166666666666667, 0.5, 0.5833333333333334, 0.75, 1.0, 1.0},
       {0.0, 0.0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0.0, 0.0}},
  };
}

}  // namespace

TEST(Activations, ValuesAndKinkGradientsMatchPyTorchInF64) {
  for (const Case& c : cases()) {
    Tensor x = from_vector(kPoints, {9}, DType::f64).set_requires_grad(true);
    Tensor y = c.fn(x);
    EXPECT_EQ(y.dtype(), DType::f64) << c.name;
    EXPECT_TRUE(values_are(y, c.value, 1e-12)) << c.name;
    sum(y).backward();
    EXPECT_TRUE(values_are(x.grad(), c.gradient, 1e-12)) << c.name;
  }
}

TEST(Activations, ValuesInF32) {
  for (const Case& c : cases()) {
    Tensor x = from_vector(kPoints, {3, 3}, DType::f32);
    Tensor y = c.fn(x);
    EXPECT_EQ(y.dtype(), DType::f32) << c.name;
    EXPECT_EQ(y.sizes(), Shape({3, 3})) << c.name;
    EXPECT_TRUE(values_are(y, c.value, 1e-6)) << c.name;
  }
}

TEST(Activations, SixteenBitKeepsTheDtypeAndTheGradientDtype) {
  for (const Case& c : cases()) {
    for (DType dt : {DType::bf16, DType::f16}) {
      Tensor x = from_vector(kPoints, {9}).to(dt).set_requires_grad(true);
      Tensor y = c.fn(x);
      EXPECT_EQ(y.dtype(), dt) << c.name;
      EXPECT_TRUE(values_are(y, c.value, 2e-2)) << c.name << " " << dtype_name(dt);
      sum(y).backward();
      EXPECT_EQ(x.grad().dtype(), dt) << c.name;
    }
  }
}

TEST(Activations, GradientsByFiniteDifferences) {
  // Points off the kinks (0, +-3, softplus's threshold at x = 1.5 for beta 2) by more
  // than the difference step, on a 2-D leaf.
  Tensor x = from_vector({-4.2, -2.7, -1.1, -0.3, 0.2, 0.9, 1.7, 2.6, 3.8, -30, 25, 0.01}, {3, 4},
                         DType::f64)
                 .set_requires_grad(true);
  for (const Case& c : cases())
    EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return c.fn(in[0]); }, {x}) << c.name;
}

TEST(Activations, ExtremeInputsStayFiniteAndAccurate) {
  // torch.nn.functional.softplus / logsigmoid / mish of [-800, -40, 40, 800] in f64.
  Tensor x = from_vector({-800, -40, 40, 800}, {4}, DType::f64);
  EXPECT_TRUE(values_are(softplus(x), {0.0, 4.248354255291589e-18, 40.0, 800.0}, 1e-12));
  EXPECT_TRUE(values_are(log_sigmoid(x), {-800.0, -40.0, -4.248354255291589e-18, 0.0}, 1e-12));
  EXPECT_TRUE(values_are(mish(x), {0.0, -1.6993417021166355e-16, 40.0, 800.0}, 1e-12));
  // Relative accuracy where the value is tiny: torch.nn.functional.softplus(-40) and
  // elu([-1e-10, -1e-5]) (expm1, not e^x - 1).
  EXPECT_NEAR(softplus(from_vector({-40}, {1}, DType::f64)).item() / 4.248354255291589e-18, 1.0,
              1e-14);
  Tensor small = from_vector({-1e-10, -1e-5}, {2}, DType::f64);
  const std::vector<double> elu_small = {-9.999999999500001e-11, -9.999950000166666e-06};
  const std::vector<double> got = elu(small).to_vector();
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(got[i] / elu_small[i], 1.0, 1e-14);
  // Gradients far out are finite: 0 and 1.
  Tensor xl = from_vector({-800, 800}, {2}, DType::f64).set_requires_grad(true);
  sum(add(add(softplus(xl), mish(xl)), elu(xl))).backward();
  EXPECT_TRUE(values_are(xl.grad(), {0, 3}, 1e-12));
}

TEST(Activations, Log1pAndExpm1AreAccurateNearZero) {
  Tensor a = from_vector({1e-300, 1e-17, 1e-10, -0.25, 0.4, 3.0, -1.0}, {7}, DType::f64);
  const std::vector<double> got = log1p(a).to_vector();
  const std::vector<double> want = {std::log1p(1e-300), std::log1p(1e-17), std::log1p(1e-10),
                                    std::log1p(-0.25),  std::log1p(0.4),   std::log1p(3.0)};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i] / want[i], 1.0, 1e-15) << i;
  EXPECT_TRUE(std::isinf(got[6]) && got[6] < 0);
  Tensor b = from_vector({1e-300, 1e-17, 1e-10, -0.25, 0.4, 3.0, -50}, {7}, DType::f64);
  const std::vector<double> e = expm1(b).to_vector();
  const std::vector<double> e_want = {std::expm1(1e-300), std::expm1(1e-17), std::expm1(1e-10),
                                      std::expm1(-0.25),  std::expm1(0.4),   std::expm1(3.0),
                                      std::expm1(-50.0)};
  for (size_t i = 0; i < e_want.size(); ++i) EXPECT_NEAR(e[i] / e_want[i], 1.0, 1e-15) << i;
  Tensor leaf = from_vector({-0.7, -0.2, 1e-8, 0.3, 2.0}, {5}, DType::f64).set_requires_grad(true);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return log1p(in[0]); }, {leaf});
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return expm1(in[0]); }, {leaf});
}

TEST(Activations, IntegerInputIsAnErrorNamingTheOp) {
  Tensor ids = from_vector({1, 2}, {2}, DType::i64);
  EXPECT_TRUE(test::throws_with([&] { leaky_relu(ids); }, "leaky_relu: expected a floating"));
  EXPECT_TRUE(test::throws_with([&] { elu(ids); }, "elu: expected a floating"));
  EXPECT_TRUE(test::throws_with([&] { softplus(ids); }, "softplus: expected a floating"));
  EXPECT_TRUE(test::throws_with([&] { mish(ids); }, "mish: expected a floating"));
  EXPECT_TRUE(test::throws_with([&] { hardswish(ids); }, "hardswish: expected a floating"));
  EXPECT_TRUE(test::throws_with([&] { hardsigmoid(ids); }, "hardsigmoid: expected a floating"));
  EXPECT_TRUE(test::throws_with([&] { log1p(ids); }, "log1p: expected a floating"));
  EXPECT_TRUE(test::throws_with([&] { softplus(zeros({2}), 0.0); }, "softplus: beta must be"));
}

TEST(ActivationModules, ForwardTheirOpWithTheirOptions) {
  Tensor x = from_vector(kPoints, {9}, DType::f64);
  EXPECT_CLOSE(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2))(x), leaky_relu(x, 0.2), 0,
               0);
  EXPECT_CLOSE(nn::LeakyReLU()(x), leaky_relu(x, 0.01), 0, 0);
  EXPECT_CLOSE(nn::ELU(nn::ELUOptions().alpha(1.5))(x), elu(x, 1.5), 0, 0);
  EXPECT_CLOSE(nn::Softplus(nn::SoftplusOptions().beta(2).threshold(3))(x), softplus(x, 2, 3), 0,
               0);
  EXPECT_CLOSE(nn::Mish()(x), mish(x), 0, 0);
  EXPECT_CLOSE(nn::Hardswish()(x), hardswish(x), 0, 0);
  EXPECT_CLOSE(nn::Hardsigmoid()(x), hardsigmoid(x), 0, 0);
  Tensor m = from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  EXPECT_CLOSE(nn::Softmax(1)(m), softmax(m, 1), 0, 0);
  EXPECT_CLOSE(nn::Softmax(nn::SoftmaxOptions(0))(m), softmax(m, 0), 0, 0);
  EXPECT_CLOSE(nn::LogSoftmax(-1)(m), log_softmax(m, 1), 0, 0);
  // Rows of softmax over dim 1 sum to 1; columns over dim 0 too.
  EXPECT_TRUE(values_are(sum(nn::Softmax(1)(m), {1}), {1, 1}, 1e-15));
  EXPECT_TRUE(values_are(sum(nn::Softmax(0)(m), {0}), {1, 1, 1}, 1e-15));
}

TEST(ActivationModules, PrintTheirOptionsAndHaveNoParameters) {
  EXPECT_EQ(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)).extra_repr(),
            "negative_slope=0.2");
  EXPECT_EQ(nn::ELU().extra_repr(), "alpha=1");
  EXPECT_EQ(nn::Softplus(nn::SoftplusOptions().beta(2)).extra_repr(), "beta=2, threshold=20");
  EXPECT_EQ(nn::Softmax(-1).extra_repr(), "dim=-1");
  EXPECT_EQ(nn::LogSoftmax(1).extra_repr(), "dim=1");
  EXPECT_EQ(nn::Mish().type_name(), "Mish");
  EXPECT_EQ(nn::Hardswish().type_name(), "Hardswish");
  EXPECT_EQ(nn::Hardsigmoid().type_name(), "Hardsigmoid");
  EXPECT_TRUE(nn::LeakyReLU().named_parameters().empty());
  EXPECT_TRUE(test::throws_with([] { nn::Softplus(nn::SoftplusOptions().beta(0)); },
                                "Softplus: beta must be non-zero"));
  EXPECT_TRUE(test::throws_with([] { nn::Softmax(2)(zeros({2, 2})); }, "softmax"));
}
