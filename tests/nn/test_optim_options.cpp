// Optimizer and schedule options out of range: each error names the optimizer (AdamW as
// AdamW) or the schedule, the option and the value given.
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "optim/optim.h"

using namespace zt;

namespace {

optim::NamedTensors one_param() {
  Tensor p = from_vector({1.0, 2.0}, {2});
  p.set_requires_grad(true);
  return {{"w", p}};
}

}  // namespace

TEST(OptimizerOptions, ErrorsNameTheOptimizerAndTheValue) {
  const double nan = std::nan("");
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[] { optim::SGD(one_param(), optim::SGDOptions(-0.1)); },
       "SGD: learning rate must be finite and >= 0, got -0.1"},
      {[] { optim::Adam(one_param(), optim::AdamOptions(-1)); },
       "Adam: learning rate must be finite and >= 0, got -1"},
      {[] { optim::AdamW(one_param(), optim::AdamWOptions(-2)); },
       "AdamW: learning rate must be finite and >= 0, got -2"},
      {[] { optim::AdamW(one_param(), optim::AdamWOptions().betas(0.9, 1.0)); },
       "AdamW: betas must be in [0, 1), got (0.9, 1)"},
      {[&] { optim::AdamW(one_param(), optim::AdamWOptions().betas(nan, 0.999)); },
       "AdamW: betas must be in [0, 1), got (nan, 0.999)"},
      {[] { optim::Adam(one_param(), optim::AdamOptions().betas(-0.1, 0.999)); },
       "Adam: betas must be in [0, 1), got (-0.1, 0.999)"},
      {[] { optim::AdamW(one_param(), optim::AdamWOptions().eps(0)); },
       "AdamW: eps must be finite and > 0, got 0"},
      {[] { optim::SGD(one_param(), optim::SGDOptions(0.1).momentum(-0.5)); },
       "SGD: momentum must be finite and >= 0, got -0.5"},
      {[] { optim::SGD(one_param(), optim::SGDOptions(0.1).nesterov(true)); },
       "SGD: nesterov needs momentum > 0 and dampening 0, got momentum 0"},
  };
  for (const auto& [make, message] : cases)
    EXPECT_TRUE(test::throws_with(make, message)) << message;
  // A learning rate set later (a schedule's) is named the same way, and not taken.
  optim::AdamW adamw(one_param(), optim::AdamWOptions(0.1));
  EXPECT_TRUE(test::throws_with([&] { adamw.set_lr(-3); },
                                "AdamW: learning rate must be finite and >= 0, got -3"));
  EXPECT_EQ(adamw.lr(), 0.1);
}

// StepLR's base and gamma must be finite as every other schedule's values: an infinite
// base, or gamma, was taken, and its learning rate refused only when a step set it.
TEST(OptimizerOptions, StepScheduleValuesMustBeFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(test::throws_with([&] { optim::LrSchedule::step(inf, 3); },
                                "LrSchedule::step: need a finite base >= 0"));
  EXPECT_TRUE(test::throws_with([&] { optim::LrSchedule::step(0.1, 3, inf); }, "got 0.1, 3, inf"));
  EXPECT_TRUE(test::throws_with([&] { optim::LrSchedule::step(0.1, 0); }, "step_size > 0"));
  const optim::LrSchedule s = optim::LrSchedule::step(0.1, 3, 0.5);
  EXPECT_EQ(s.lr_at(2), 0.1);
  EXPECT_EQ(s.lr_at(3), 0.05);
}

// A parameter group's settings out of range name the group in the factory (they named no
// group, parameter or optimizer), and set_settings names the optimizer and the parameters.
TEST(OptimizerOptions, GroupSettingsErrorsNameTheGroup) {
  optim::OptimizerConfig c;
  c.param_groups = {{.params = {"w"}, .lr_scale = 2.0}, {.params = {"v"}, .lr_scale = -1.0}};
  optim::NamedTensors ps = one_param();
  ps.emplace_back("v", from_vector({3.0}, {1}));
  EXPECT_TRUE(test::throws_with(
      [&] { optim::make_optimizer(c, ps); },
      "optimizer: param_groups[1] has lr_scale -1; a learning-rate scale must be finite and >= 0"));
  c.param_groups[1] = {.params = {"v"}, .weight_decay = std::nan("")};
  EXPECT_TRUE(test::throws_with([&] { optim::make_optimizer(c, ps); },
                                "optimizer: param_groups[1] has weight_decay nan"));
  optim::AdamW adamw(ps, optim::AdamWOptions(0.1));
  EXPECT_TRUE(test::throws_with(
      [&] {
        adamw.set_settings({"w", "v"}, {.lr_scale = -1});
      },
      "AdamW: settings for w, v: lr_scale and weight_decay must be finite and >= 0, got -1"));
  EXPECT_EQ(adamw.settings("v").lr_scale, 1.0);
}

// max_norm 0 or less is refused, saying what to do, where torch would zero (or flip) every
// gradient; the gradients are left as they were.
TEST(OptimizerOptions, ClippingToZeroOrLessIsRefused) {
  optim::NamedTensors ps = one_param();
  Tensor w = ps[0].second;
  w.set_grad(from_vector({3.0, 4.0}, {2}));
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0"}, {-1.0, "-1"}, {std::nan(""), "nan"}};
  for (const auto& c : cases)  // (a structured binding: clang before 16 cannot capture it)
    EXPECT_TRUE(test::throws_with([&] { optim::clip_grad_norm({w}, c.first); },
                                  "clip: max_norm must be > 0, got " + c.second +
                                      "; to leave the gradients as they are, do not clip"));
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{3.0, 4.0}));
}
