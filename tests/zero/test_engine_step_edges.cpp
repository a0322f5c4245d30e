// Parameters the engine's step meets at its edges, each checked against values worked out
// here by hand: a parameter that got no gradient in a step is still updated, from a zero
// gradient, as DeepSpeed's ZeRO-3 does (torch and optim::Optimizer skip it); a parameter
// with no elements trains beside the others in every precision and on any number of
// ranks, and adds nothing to the clipped norm. A parameter frozen when the engine was built
// is not the optimizer's: asking for its settings is an error that says so.
#include <cmath>
#include <string>
#include <vector>

#include "zero/lesson_util.h"

using namespace zt;
using zt::test::values_are;

namespace {

// y = x + v, v (n): a loss sum(y) gives every element of v a gradient of 1.
struct Offset : nn::UnaryModule {
  explicit Offset(const std::vector<double>& init) : nn::UnaryModule("Offset") {
    v = register_parameter("v", from_vector(init, {static_cast<int64_t>(init.size())}));
  }
  Tensor forward(const Tensor& x) override { return add(x, v); }
  Tensor v;
};

// Two offsets of one size, both run every step; the output is `used`'s, plus `unused`'s
// when `both`: with `both` false, `unused` is a branch the step computed but did not use.
struct TwoOffsets : nn::UnaryModule {
  TwoOffsets() : nn::UnaryModule("TwoOffsets") {
    used = register_module("used", std::make_shared<Offset>(std::vector<double>(4, 0.5)));
    unused = register_module("unused", std::make_shared<Offset>(std::vector<double>{1, -1, 2, -2}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor a = (*used)(x), b = (*unused)(x);
    return both ? add(a, b) : a;
  }
  std::shared_ptr<Offset> used, unused;
  bool both = true;
};

// e (0, 3) beside an Offset: y = x + v + sum(e), where sum(e) is 0 and e's gradient is empty.
struct WithEmpty : nn::UnaryModule {
  WithEmpty() : nn::UnaryModule("WithEmpty") {
    offset = register_module("offset",
                             std::make_shared<Offset>(std::vector<double>{0.5, 1, 1.5, 2, 2.5}));
    e = register_parameter("e", zeros({0, 3}));
  }
  Tensor forward(const Tensor& x) override { return add((*offset)(x), sum(e)); }
  std::shared_ptr<Offset> offset;
  Tensor e;
};

// torch.optim.AdamW's update of one element, in double, given its gradient at each step.
double adamw_by_hand(double p, const std::vector<double>& grads, double lr, double wd) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  double m = 0, v = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    const double t = static_cast<double>(i + 1), g = grads[i];
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double m_hat = m / (1 - std::pow(b1, t)), v_hat = v / (1 - std::pow(b2, t));
    p -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
  return p;
}

Tensor full_value(nn::Module& m, comm::Communicator& comm, const std::string& name) {
  for (auto& [n, t] : lesson::full_parameters(m, comm))
    if (n == name) return t;
  ADD_FAILURE() << "no parameter '" << name << "'";
  return Tensor();
}

double state_value(zero::Engine& e, const std::string& key) {
  for (const auto& [name, t] : e.optimizer().state_dict())
    if (name == key) return t.item();
  ADD_FAILURE() << "no optimizer state '" << key << "'";
  return -1;
}

}  // namespace

// `unused` gets a gradient of 1 at step 1 and none at steps 2 and 3. The engine updates it
// at every step from a zero gradient: AdamW's weight decay shrinks it and its first moment
// keeps moving it, and its own step count reaches 3. (optim::AdamW, as torch's, would leave
// it at its step-1 value with a step count of 1.) Alike on 1, 2 and 3 ranks (4 elements: on
// 3 ranks one shard is padding only).
TEST(EngineStepEdges, AParameterWithoutAGradientIsUpdatedFromZero) {
  const double lr = 0.1, wd = 0.1;
  std::vector<double> expect, step1_only;
  for (double p0 : {1.0, -1.0, 2.0, -2.0}) {
    expect.push_back(adamw_by_hand(p0, {1, 0, 0}, lr, wd));
    step1_only.push_back(adamw_by_hand(p0, {1}, lr, wd));
  }
  EXPECT_NEAR(expect[0], 0.7541575, 1e-7);  // moved well past its step-1 value
  EXPECT_NEAR(step1_only[0], 0.89, 1e-7);
  for (int N : {1, 2, 3}) {
    SCOPED_TRACE("ranks " + std::to_string(N));
    comm::run_threads(N, [&](comm::Communicator& comm) {
      auto m = lesson::partitioned<TwoOffsets>(comm);
      zero::OptimizerConfig o;
      o.lr = lr;
      o.weight_decay = wd;
      zero::Engine e(m, comm, {}, o);
      for (int step = 1; step <= 3; ++step) {
        m->both = step == 1;
        e.backward(sum(e(zeros({4}))));
        ASSERT_TRUE(e.step());
      }
      // 1e-5: the update runs in f32 (1 - beta2 rounded to f32 alone is 1.3e-5 off).
      EXPECT_TRUE(values_are(full_value(*m, comm, "unused.v"), expect, 1e-5));
      EXPECT_EQ(state_value(e, "unused.v.step"), 3.0);
      EXPECT_EQ(state_value(e, "used.v.step"), 3.0);
      EXPECT_EQ(e.optimizer().step_count(), 3);
      // The control: `used` got a gradient of 1 at every step.
      EXPECT_TRUE(values_are(full_value(*m, comm, "used.v"),
                             std::vector<double>(4, adamw_by_hand(0.5, {1, 1, 1}, lr, wd)), 1e-5));
    });
  }
}

TEST(EngineStepEdges, AFrozenParameterHasNoSettingsAndTheErrorSaysWhy) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = lesson::partitioned<TwoOffsets>(comm);
    m->unused->requires_grad_(false);
    zero::Engine e(m, comm, {}, {});
    EXPECT_EQ(e.optimizer().settings("used.v").weight_decay, 0.0);
    EXPECT_TRUE(test::throws_with([&] { e.optimizer().settings("unused.v"); },
                                  "optimizer: no parameter named 'unused.v' (settings) (an "
                                  "optimizer holds only the parameters it was made over, so "
                                  "none that was frozen then)"));
  });
}

// A (0, 3) parameter: a partition of nothing on every rank. It trains beside a 5-element
// one in f32, bf16 and fp16 on 1 to 3 ranks with clipping on; the norm is the 5-element
// parameter's alone, sqrt(5), and the clipped SGD step moves it by lr / (sqrt(5) + 1e-6).
TEST(EngineStepEdges, AZeroSizeParameterTrainsInEveryPrecision) {
  const double lr = 0.1, coef = 1.0 / (std::sqrt(5.0) + 1e-6);
  std::vector<double> expect;
  for (double p0 : {0.5, 1.0, 1.5, 2.0, 2.5}) expect.push_back(p0 - 2 * lr * coef);  // 2 steps
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (int N : {1, 2, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " on " + std::to_string(N) + " ranks");
      comm::run_threads(N, [&](comm::Communicator& comm) {
        auto m = lesson::partitioned<WithEmpty>(comm);
        zero::Config cfg;
        cfg.gradient_clipping = 1.0;
        cfg.precision.bf16 = dtype == DType::bf16;
        cfg.precision.fp16 = dtype == DType::f16;
        cfg.precision.initial_scale_power = 8;  // 2^8 x a gradient of 1 fits in fp16
        zero::OptimizerConfig o;
        o.type = "sgd";
        o.lr = lr;
        zero::Engine e(m, comm, cfg, o);
        for (int step = 0; step < 2; ++step) {
          e.backward(sum(e(zeros({5}, dtype))).to(DType::f32));
          ASSERT_TRUE(e.step());
          EXPECT_NEAR(e.last_grad_norm(), std::sqrt(5.0), 1e-6);
        }
        const Tensor empty_param = full_value(*m, comm, "e");
        EXPECT_EQ(empty_param.sizes(), (Shape{0, 3}));
        // The 16-bit copies are the fp32 masters rounded: within half an ulp (relative).
        EXPECT_TRUE(values_are(full_value(*m, comm, "offset.v").to(DType::f32), expect,
                               dtype == DType::f32 ? 1e-6 : 0.5 * machine_epsilon(dtype)));
      });
    }
  }
}
