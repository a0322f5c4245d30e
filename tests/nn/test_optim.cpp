// Optimizers: SGD/Adam/AdamW trajectories over several steps against the update formulas
// evaluated in double; the fused CPU loop and the generic (device) path agree; state
// dict round trips; clipping and LR schedules.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "core/kernel_profile.h"
#include "optim/optim.h"

using namespace zt;
using zt::test::values_are;

namespace {

const std::vector<double> kP0{1.0, -2.0, 3.0, 0.5};
const std::vector<double> kShift{0.1, 0.2, -0.3, 0.0};

// The gradient used at every step: g = 0.5 p + shift (a quadratic bowl).
std::vector<double> grad_of(const std::vector<double>& p) {
  std::vector<double> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = 0.5 * p[i] + kShift[i];
  return g;
}

// Runs `steps` steps of `opt` on `p`, setting the gradient from the current value.
void run(optim::Optimizer& opt, const Tensor& p, int steps) {
  for (int s = 0; s < steps; ++s) {
    p.set_grad(from_vector(grad_of(p.to_vector()), p.sizes(), p.dtype()));
    opt.step();
  }
}

Tensor param() {
  Tensor p = from_vector(kP0, {4});
  p.set_requires_grad(true);
  return p;
}

std::vector<double> sgd_reference(double lr, double mom, double damp, double wd, bool nesterov,
                                  int steps) {
  std::vector<double> p = kP0, buf(p.size());
  for (int s = 0; s < steps; ++s) {
    std::vector<double> g = grad_of(p);
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + wd * p[i];
      if (mom != 0) {
        buf[i] = s == 0 ? d : mom * buf[i] + (1 - damp) * d;
        d = nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  }
  return p;
}

std::vector<double> adam_reference(double lr, double b1, double b2, double eps, double wd,
                                   bool decoupled, int steps) {
  std::vector<double> p = kP0, m(p.size()), v(p.size());
  for (int t = 1; t <= steps; ++t) {
    std::vector<double> g = grad_of(p);
    for (size_t i = 0; i < p.size(); ++i) {
      double gi = g[i];
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        gi += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      double mh = m[i] / (1 - std::pow(b1, t));
      double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= lr * mh / denom;
    }
  }
  return p;
}

// The calls of the fused update kernels (adam_update, sgd_update) fn makes.
int64_t fused_update_calls(const std::function<void()>& fn) {
  KernelProfile profile;
  fn();
  int64_t calls = 0;
  for (const KernelProfile::Entry& e : profile.totals())
    if (e.kernel == "adam_update" || e.kernel == "sgd_update") calls += e.calls;
  return calls;
}

}  // namespace

TEST(SGD, TrajectoriesMatchTheFormula) {
  struct Case {
    double mom, damp, wd;
    bool nesterov;
  };
  for (Case c : {Case{0, 0, 0, false}, Case{0.9, 0.1, 0.01, false}, Case{0.9, 0, 0.05, true}}) {
    Tensor p = param();
    optim::SGD opt(
        {{"w", p}},
        optim::SGDOptions(0.1).momentum(c.mom).dampening(c.damp).weight_decay(c.wd).nesterov(
            c.nesterov));
    run(opt, p, 6);
    EXPECT_TRUE(values_are(p, sgd_reference(0.1, c.mom, c.damp, c.wd, c.nesterov, 6), 1e-5))
        << "momentum " << c.mom << " nesterov " << c.nesterov;
    EXPECT_EQ(opt.step_count(), 6);
  }
}

TEST(Adam, AdamAndAdamWTrajectoriesMatchTheFormula) {
  Tensor p = param();
  optim::AdamW adamw({{"w", p}}, optim::AdamWOptions(0.05).betas(0.8, 0.95).weight_decay(0.1));
  run(adamw, p, 7);
  EXPECT_TRUE(values_are(p, adam_reference(0.05, 0.8, 0.95, 1e-8, 0.1, true, 7), 1e-5));

  Tensor q = param();
  optim::Adam adam({{"w", q}}, optim::AdamOptions(0.05).weight_decay(0.1).eps(1e-3));
  run(adam, q, 7);
  EXPECT_TRUE(values_are(q, adam_reference(0.05, 0.9, 0.999, 1e-3, 0.1, false, 7), 1e-5));
  EXPECT_FALSE(values_are(p, q.to_vector(), 1e-4));  // decoupled decay differs from L2
}

TEST(Adam, GenericPathMatchesFusedLoop) {
  // A transposed (non-contiguous) parameter takes the ops path; a contiguous one the loop.
  // In f64 the two agree to rounding (in f32 the different operation order shows at 1e-5).
  // AdamW; SGD with Nesterov momentum; SGD with dampened momentum.
  Tensor base = from_vector({1, -2, 3, 0.5, 0.25, -1}, {2, 3}, DType::f64);
  Tensor strided = base.transpose(0, 1);  // (3, 2) view
  Tensor dense = strided.contiguous();
  ASSERT_FALSE(strided.is_contiguous());
  for (int kind = 0; kind < 3; ++kind) {
    Tensor a = strided.clone().detach().transpose(0, 1).contiguous().transpose(0, 1);
    Tensor b = dense.clone().detach();
    std::unique_ptr<optim::Optimizer> oa, ob;
    if (kind == 0) {
      oa = std::make_unique<optim::AdamW>(optim::NamedTensors{{"a", a}}, optim::AdamWOptions(0.1));
      ob = std::make_unique<optim::AdamW>(optim::NamedTensors{{"b", b}}, optim::AdamWOptions(0.1));
    } else {
      auto o = kind == 1 ? optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.1)
                         : optim::SGDOptions(0.1).momentum(0.9).dampening(0.5);
      oa = std::make_unique<optim::SGD>(optim::NamedTensors{{"a", a}}, o);
      ob = std::make_unique<optim::SGD>(optim::NamedTensors{{"b", b}}, o);
    }
    ASSERT_FALSE(a.is_contiguous());
    int64_t a_fused = 0, b_fused = 0;
    for (int s = 0; s < 4; ++s) {
      Tensor g = add(mul(b.detach(), 0.5), 0.1);
      a.set_grad(g);
      b.set_grad(g);
      a_fused += fused_update_calls([&] { oa->step(); });
      b_fused += fused_update_calls([&] { ob->step(); });
    }
    EXPECT_CLOSE(a.contiguous(), b, 1e-12, 1e-12);
    // The comparison is of the two paths.
    EXPECT_EQ(a_fused, 0) << "kind " << kind << ": the strided parameter took the fused loop";
    EXPECT_EQ(b_fused, 4) << "kind " << kind << ": the contiguous one did not";
  }
}

TEST(SGD, NesterovOptionsAreChecked) {
  Tensor p = from_vector({1.0}, {1});
  p.set_requires_grad(true);
  EXPECT_TRUE(test::throws_with(
      [&] {
        optim::SGD({{"p", p}}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.5).nesterov(true));
      },
      "nesterov needs momentum > 0 and dampening 0, got momentum 0.9 and dampening 0.5"));
}

// Out-of-range and non-finite settings are refused when given, naming the setting: an
// infinite learning rate or decay would turn every parameter into NaN at the first step.
TEST(Optimizer, SettingsOutOfRangeOrNotFiniteAreRefused) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::nan("");
  auto sgd = [](const optim::SGDOptions& o) {
    Tensor p = from_vector({1.0}, {1});
    optim::SGD opt({{"p", p}}, o);
  };
  auto adam = [](const optim::AdamOptions& o) {
    Tensor p = from_vector({1.0}, {1});
    optim::AdamW opt({{"p", p}}, o);
  };
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[&] { sgd(optim::SGDOptions(inf)); }, "learning rate must be finite and >= 0, got inf"},
      {[&] { sgd(optim::SGDOptions(-1)); }, "learning rate must be finite and >= 0, got -1"},
      {[&] { adam(optim::AdamOptions(nan)); }, "learning rate must be finite and >= 0, got nan"},
      {[&] { sgd(optim::SGDOptions(0.1).momentum(inf)); }, "momentum must be finite and >= 0"},
      {[&] { sgd(optim::SGDOptions(0.1).dampening(nan)); }, "dampening must be finite, got nan"},
      {[&] { sgd(optim::SGDOptions(0.1).weight_decay(inf)); },
       "SGD: weight_decay must be finite and >= 0"},
      {[&] { adam(optim::AdamOptions(0.1).weight_decay(inf)); },
       "AdamW: weight_decay must be finite and >= 0"},
      {[&] { adam(optim::AdamOptions(0.1).eps(inf)); }, "eps must be finite and > 0, got inf"},
      {[&] { optim::LrSchedule::constant(inf); }, "lr must be finite and >= 0, got inf"},
      {[&] { optim::LrSchedule::warmup_cosine(inf, 0, 10, 0); }, "both finite, got base inf"},
  };
  for (const auto& [make, message] : cases)
    EXPECT_TRUE(test::throws_with(make, message)) << message;
  // set_lr as the constructor: an engine's schedule passes through it every step.
  Tensor p = from_vector({1.0}, {1});
  optim::SGD opt({{"p", p}}, optim::SGDOptions(0.1));
  EXPECT_TRUE(test::throws_with([&] { opt.set_lr(inf); }, "got inf"));
  EXPECT_TRUE(test::throws_with([&] { opt.set_settings({"p"}, {.lr_scale = inf}); },
                                "lr_scale and weight_decay must be finite and >= 0"));
  EXPECT_EQ(opt.lr(), 0.1);
  // PyTorch's ranges otherwise: momentum and dampening past 1 are allowed.
  EXPECT_NO_THROW(sgd(optim::SGDOptions(0.1).momentum(1.5).dampening(2)));
}

TEST(Optimizer, FactoryBuildsTheConfiguredOptimizer) {
  // Each type from the config follows the trajectory of the class built by hand.
  optim::OptimizerConfig c;
  c.lr = 0.05;
  c.beta1 = 0.8;
  c.beta2 = 0.95;
  c.weight_decay = 0.1;
  Tensor p = param();
  auto adamw = optim::make_optimizer(c, {{"w", p}});
  run(*adamw, p, 7);
  EXPECT_TRUE(values_are(p, adam_reference(0.05, 0.8, 0.95, 1e-8, 0.1, true, 7), 1e-5));
  c.type = "adam";
  Tensor q = param();
  auto adam = optim::make_optimizer(c, {{"w", q}});
  run(*adam, q, 7);
  EXPECT_TRUE(values_are(q, adam_reference(0.05, 0.8, 0.95, 1e-8, 0.1, false, 7), 1e-5));
  c = optim::OptimizerConfig();
  c.type = "sgd";
  c.lr = 0.1;
  c.momentum = 0.9;
  c.nesterov = true;
  Tensor r = param();
  auto sgd = optim::make_optimizer(c, {{"w", r}});
  run(*sgd, r, 6);
  EXPECT_TRUE(values_are(r, sgd_reference(0.1, 0.9, 0, 0, true, 6), 1e-5));
  c.type = "lion";
  EXPECT_TRUE(test::throws_with(
      [&] {
        optim::make_optimizer(c, {{"w", param()}});
      },
      "unknown optimizer 'lion'"));
}

TEST(Optimizer, WeightDecayLeavesOutWhatTheConfigSays) {
  EXPECT_TRUE(optim::glob_match("*.bias", "block.0.fc.bias"));
  EXPECT_TRUE(optim::glob_match("tok_emb.*", "tok_emb.weight"));
  EXPECT_TRUE(optim::glob_match("*ln*w*", "h.0.ln_1.weight"));
  EXPECT_FALSE(optim::glob_match("*.bias", "block.0.fc.bias_scale"));
  EXPECT_FALSE(optim::glob_match("fc.*", "block.fc.weight"));
  // With a zero gradient, only the weight decay moves a parameter: decoupled, L2 (through
  // the moments) and SGD's. Matrices decay; the vector and the pattern's matrix do not,
  // on the fused loop and, for the transposed (non-contiguous) matrices, the ops path.
  for (const std::string type : {"adamw", "adam", "sgd"}) {
    SCOPED_TRACE(type);
    optim::OptimizerConfig c;
    c.type = type;
    c.lr = 0.1;
    c.weight_decay = 0.5;
    c.weight_decay_1d = false;
    c.no_weight_decay = {"emb*"};
    Tensor w = ones({2, 3}), strided = ones({3, 2}).transpose(0, 1), bias = ones({3}),
           emb = ones({3, 4}).transpose(0, 1);
    auto opt =
        optim::make_optimizer(c, {{"w", w}, {"strided", strided}, {"bias", bias}, {"emb", emb}});
    for (const Tensor& t : {w, strided, bias, emb}) t.set_grad(zeros(t.sizes()));
    opt->step();
    EXPECT_LT(w.to_vector()[0], 1.0);
    EXPECT_TRUE(values_are(strided, w.to_vector(), 1e-5));
    EXPECT_TRUE(values_are(bias, {1, 1, 1}, 0));
    EXPECT_TRUE(values_are(emb, std::vector<double>(12, 1.0), 0));
    // A setting, not state: loading a state dict keeps it.
    opt->load_state_dict(opt->state_dict());
    EXPECT_EQ(opt->settings("w").weight_decay, 0.5);
    EXPECT_EQ(opt->settings("bias").weight_decay, 0.0);
    EXPECT_EQ(opt->settings("emb").weight_decay, 0.0);
  }
  optim::OptimizerConfig c;
  c.no_weight_decay = {"*.bais"};
  EXPECT_TRUE(test::throws_with(
      [&] {
        optim::make_optimizer(c, {{"fc.bias", param()}});
      },
      "the no_weight_decay pattern '*.bais' matches no trained "
      "parameter; they are named like fc.bias"));
  EXPECT_TRUE(test::throws_with(
      [] {
        optim::make_optimizer({}, {{"w", param()}})->exclude_from_weight_decay({"b"});
      },
      "no parameter named b"));
}

// param_groups: a group's parameters take its learning-rate scale and weight decay (over
// weight_decay_1d and no_weight_decay); a parameter in two groups, a pattern that matches
// nothing and a group without parameters are errors.
TEST(Optimizer, ParamGroupsGiveTheirParametersTheirSettings) {
  optim::OptimizerConfig c;
  c.weight_decay = 0.1;
  c.weight_decay_1d = false;
  c.param_groups = {{.params = {"emb.*"}, .lr_scale = 0.1},
                    {.params = {"head.*", "*.scale"}, .lr_scale = 2.0, .weight_decay = 0.3}};
  auto opt = optim::make_optimizer(c, {{"emb.weight", ones({3, 2})},
                                       {"head.weight", ones({2, 3})},
                                       {"head.bias", ones({3})},
                                       {"ln.scale", ones({3})},
                                       {"fc.weight", ones({3, 3})},
                                       {"fc.bias", ones({3})}});
  auto expect = [&](const std::string& n, double lr_scale, double wd) {
    EXPECT_EQ(opt->settings(n).lr_scale, lr_scale) << n;
    EXPECT_EQ(opt->settings(n).weight_decay, wd) << n;
  };
  expect("emb.weight", 0.1, 0.1);  // the group keeps the decay it had
  expect("head.weight", 2.0, 0.3);
  expect("head.bias", 2.0, 0.3);  // the group's decay wins over weight_decay_1d
  expect("ln.scale", 2.0, 0.3);
  expect("fc.weight", 1.0, 0.1);
  expect("fc.bias", 1.0, 0.0);
  opt->load_state_dict(opt->state_dict());
  expect("head.bias", 2.0, 0.3);  // settings, not state: a load keeps them

  auto refused = [](std::vector<optim::ParamGroup> groups, const std::string& why) {
    optim::OptimizerConfig bad;
    bad.param_groups = std::move(groups);
    return test::throws_with(
        [&] {
          optim::make_optimizer(bad, {{"a.weight", param()}, {"b.weight", param()}});
        },
        why);
  };
  EXPECT_TRUE(refused({{.params = {"a.*"}}, {.params = {"*.weight"}}},
                      "'a.weight' is in param_groups[0] and param_groups[1]"));
  EXPECT_TRUE(refused({{.params = {"c.*"}}},
                      "the param_groups[0] pattern 'c.*' matches no trained parameter; they are "
                      "named like a.weight, b.weight"));
  EXPECT_TRUE(refused({{}}, "param_groups[0] lists no parameters"));

  // A tied tensor's other names (aliases) are matched too: "head.weight" is "emb.weight".
  optim::OptimizerConfig tied;
  tied.weight_decay = 0.1;
  tied.no_weight_decay = {"head.*"};
  tied.param_groups = {{.params = {"head.weight"}, .lr_scale = 0.5}};
  auto t = optim::make_optimizer(tied, {{"emb.weight", ones({3, 2})}, {"fc.weight", ones({2, 2})}},
                                 {}, {{"head.weight"}, {}});
  EXPECT_EQ(t->settings("emb.weight").lr_scale, 0.5);
  EXPECT_EQ(t->settings("emb.weight").weight_decay, 0.0);
  EXPECT_EQ(t->settings("fc.weight").weight_decay, 0.1);
}

TEST(Optimizer, StateDictRoundTrip) {
  for (int kind = 0; kind < 3; ++kind) {
    auto make = [&](const Tensor& p) -> std::unique_ptr<optim::Optimizer> {
      if (kind == 0)
        return std::make_unique<optim::AdamW>(optim::NamedTensors{{"layer.w", p}},
                                              optim::AdamWOptions(0.05));
      return std::make_unique<optim::SGD>(optim::NamedTensors{{"layer.w", p}},
                                          optim::SGDOptions(0.05).momentum(0.9));
    };
    Tensor p = param();
    auto a = make(p);
    run(*a, p, 3);
    std::vector<std::string> keys;
    optim::NamedTensors saved;
    for (auto& [k, t] : a->state_dict()) {
      keys.push_back(k);
      saved.emplace_back(k, t.clone());
    }
    if (kind == 0)
      EXPECT_EQ(keys, (std::vector<std::string>{"step", "layer.w.step", "layer.w.exp_avg",
                                                "layer.w.exp_avg_sq"}));
    else
      EXPECT_EQ(keys,
                (std::vector<std::string>{"step", "layer.w.step", "layer.w.momentum_buffer"}));

    Tensor q = p.detach().clone();
    q.set_requires_grad(true);
    auto b = make(q);
    b->load_state_dict(saved);
    EXPECT_EQ(b->step_count(), 3);
    run(*a, p, 2);
    run(*b, q, 2);
    EXPECT_EQ(p.to_vector(), q.to_vector());  // bit-identical continuation
  }
}

TEST(Optimizer, LoadStateDictReportsAllProblems) {
  Tensor p = param();
  optim::AdamW opt({{"w", p}}, optim::AdamWOptions());
  optim::NamedTensors bad{
      {"step", scalar_tensor(1, DType::i64)}, {"w.exp_avg", zeros({5})}, {"v.exp_avg", zeros({4})}};
  try {
    opt.load_state_dict(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unexpected keys (1): v.exp_avg"), std::string::npos) << m;
    EXPECT_NE(m.find("w.exp_avg ([5], expected [4])"), std::string::npos) << m;
  }
  // Thousands of keys (another optimizer's state for a large model) are counted, not listed.
  optim::NamedTensors many{{"step", scalar_tensor(1, DType::i64)}};
  for (int i = 0; i < 1000; ++i)
    many.emplace_back("p" + std::to_string(i) + ".momentum", zeros({4}));
  const std::string m = test::error_of([&] { opt.load_state_dict(many); });
  EXPECT_NE(m.find("unexpected keys (1000): p0.momentum, p1.momentum"), std::string::npos) << m;
  EXPECT_NE(m.find("p7.momentum and 992 more"), std::string::npos) << m;
  EXPECT_LT(m.size(), 500u) << m;
}

TEST(Optimizer, SkipsParamsWithoutGradAndZeroGrad) {
  Tensor a = param(), b = param();
  optim::SGD opt({{"a", a}, {"b", b}}, optim::SGDOptions(1.0));
  a.set_grad(ones({4}));
  opt.step();
  EXPECT_TRUE(values_are(a, {0, -3, 2, -0.5}));
  EXPECT_TRUE(values_are(b, kP0));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_THROW(optim::SGD({{"a", a}, {"a", b}}, optim::SGDOptions(1.0)), Error);
  opt.set_lr(0.5);
  EXPECT_EQ(opt.lr(), 0.5);
}

namespace {
// Plain gradient steps whose update of a 3-element parameter can be made to fail, as a
// GPU's kernel launch for a later group of parameters can be refused after the first ran.
class Flaky : public optim::Optimizer {
 public:
  explicit Flaky(optim::NamedTensors params) : Optimizer(std::move(params), 1.0, 0.0, {}) {}
  std::string kind() const override { return "Flaky"; }
  bool fail = false;

 protected:
  void update(const Tensor& p, const Tensor& g, ParamState&) override {
    if (fail && p.numel() == 3) throw Error("the launch was refused");
    p.copy_(sub(p, g));
  }
};
}  // namespace

TEST(Optimizer, AStepThatFailsPartWayRefusesTheNextUntilAStateIsLoaded) {
  Tensor a = param(), b = from_vector({1.0, 2.0, 3.0}, {3});
  b.set_requires_grad(true);
  Flaky opt({{"a", a}, {"b", b}});
  optim::NamedTensors start;
  for (const auto& [k, t] : opt.state_dict()) start.emplace_back(k, t.clone());
  a.set_grad(ones({4}));
  b.set_grad(ones({3}));
  opt.fail = true;
  EXPECT_THROW(opt.step(), Error);
  EXPECT_TRUE(values_are(a, {0, -3, 2, -0.5})) << "a was updated before b failed";
  EXPECT_TRUE(values_are(b, {1, 2, 3}));
  opt.fail = false;
  EXPECT_TRUE(test::throws_with([&] { opt.step(); },
                                "Flaky: an earlier step failed after it had updated some "
                                "parameters (the launch was refused)"));
  EXPECT_TRUE(values_are(b, {1, 2, 3})) << "the refused step changed nothing";
  EXPECT_FALSE(opt.consistent()) << "what a checkpoint save asks before it saves";
  opt.load_state_dict(start);
  EXPECT_TRUE(opt.consistent());  // a whole state again (here the one before the first step)
  opt.step();
  EXPECT_TRUE(values_are(b, {0, 1, 2}));
  EXPECT_EQ(opt.step_count(), 1);
}

// Per-parameter entries that do not belong together are refused, naming the parameters: a
// moment without its step would restart Adam's bias correction, and a step without the
// moments would make its next update about three times too large. SGD's missing momentum
// buffer is its first step (torch's None), so a step alone is whole there.
TEST(Optimizer, IncompleteStateIsRefused) {
  Tensor a = param(), b = from_vector({1.0, 2.0, 3.0}, {3});
  b.set_requires_grad(true);
  optim::Adam adam({{"a", a}, {"b", b}}, optim::AdamOptions(0.1));
  a.set_grad(ones({4}));
  b.set_grad(ones({3}));
  adam.step();
  optim::NamedTensors partial;
  for (const auto& [k, t] : adam.state_dict())
    if (k != "a.step" && k != "b.exp_avg_sq") partial.emplace_back(k, t.clone());
  EXPECT_TRUE(test::throws_with([&] { adam.load_state_dict(partial); },
                                "incomplete state (2): a (exp_avg without step), b (step 1 "
                                "without exp_avg_sq)"));
  EXPECT_EQ(adam.state_dict().size(), 7u) << "a refused load changes nothing";
  optim::SGD sgd({{"a", a}, {"b", b}}, optim::SGDOptions(0.1).momentum(0.9));
  sgd.load_state_dict(
      {{"step", scalar_tensor(1.0, DType::i64)}, {"a.step", scalar_tensor(1.0, DType::i64)}});
  EXPECT_EQ(sgd.step_count(), 1);
}

// A negative or fractional step (damaged state) is refused, not divided by: Adam's bias
// correction 1 - beta^step is zero at step 0 of a step -1 state.
TEST(Optimizer, StepCountsMustBeWholeNumbersAtLeastZero) {
  Tensor a = param();
  optim::Adam adam({{"a", a}}, optim::AdamOptions(0.1));
  const Tensor moments = zeros({4});
  EXPECT_TRUE(test::throws_with(
      [&] {
        adam.load_state_dict({{"step", scalar_tensor(1.0, DType::i64)},
                              {"a.step", scalar_tensor(-1.0, DType::i64)},
                              {"a.exp_avg", moments},
                              {"a.exp_avg_sq", moments}});
      },
      "a.step (-1.000000, expected a whole number >= 0)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        adam.load_state_dict({{"step", scalar_tensor(-3.0, DType::i64)}});
      },
      "missing or malformed 'step' entry (one whole number >= 0)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        adam.load_state_dict({{"step", scalar_tensor(1.5, DType::f32)}});
      },
      "malformed 'step'"));
}

// One tensor under two names (tied weights listed twice) would be updated twice a step
// with two states: refused with both names.
TEST(Optimizer, ATensorGivenTwiceIsRefused) {
  Tensor a = param();
  EXPECT_TRUE(test::throws_with(
      [&] {
        optim::SGD sgd({{"a", a}, {"tied", a}}, optim::SGDOptions(0.1));
      },
      "parameters 'a' and 'tied' are the same tensor"));
}

TEST(Clip, GlobalNormSeparable) {
  Tensor a = from_vector({3, 4}, {2}), b = from_vector({12}, {1});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  a.set_grad(from_vector({3, 4}, {2}));
  b.set_grad(from_vector({12}, {1}));
  // Shards can be summed: the norm of the union is the sum of the parts.
  EXPECT_DOUBLE_EQ(optim::grad_norm_sq({a.grad()}) + optim::grad_norm_sq({b.grad()}), 169.0);
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({a, b}, 6.5), 13.0);
  // torch.nn.utils.clip_grad_norm_'s coefficient, max_norm / (norm + 1e-6), in both forms.
  const double c = 6.5 / (13.0 + 1e-6);
  EXPECT_DOUBLE_EQ(optim::clip_coefficient(13.0, 6.5), c);
  EXPECT_DOUBLE_EQ(optim::clip_coefficient(from_vector({13.0}, {1}, DType::f64), 6.5).item(), c);
  EXPECT_TRUE(values_are(a.grad(), {3 * c, 4 * c}));
  EXPECT_TRUE(values_are(b.grad(), {12 * c}));
  // Below the limit nothing changes.
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 100.0), 6.5, 1e-5);
  EXPECT_TRUE(values_are(b.grad(), {12 * c}));
}

// A non-finite total norm. inf: the coefficient is 0, so finite gradients become 0 and an
// infinite one NaN (inf x 0), as torch.nn.utils.clip_grad_norm_ does. NaN: the coefficient
// is 1, so nothing is clipped and only the NaN gradient stays NaN; torch's coefficient would
// be NaN and turn every gradient NaN. Both forms, the double one and the one-element tensor
// the engine uses, agree.
TEST(Clip, NonFiniteNorms) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto with_grad = [](const std::vector<double>& g) {
    Tensor p = zeros({static_cast<int64_t>(g.size())});
    p.set_requires_grad(true);
    p.set_grad(from_vector(g, {static_cast<int64_t>(g.size())}));
    return p;
  };
  Tensor a = with_grad({3, 4}), b = with_grad({nan});
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm({a, b}, 1.0)));
  EXPECT_TRUE(values_are(a.grad(), {3, 4}, 0)) << "a NaN norm clips nothing";
  EXPECT_TRUE(std::isnan(b.grad().item()));
  Tensor c = with_grad({inf, 4}), d = with_grad({3});
  EXPECT_EQ(optim::clip_grad_norm({c, d}, 1.0), inf);
  const std::vector<double> cg = c.grad().to_vector();
  EXPECT_TRUE(std::isnan(cg[0]));
  EXPECT_EQ(cg[1], 0.0);
  EXPECT_TRUE(values_are(d.grad(), {0}, 0));
  EXPECT_EQ(optim::clip_coefficient(nan, 1.0), 1.0);
  EXPECT_EQ(optim::clip_coefficient(inf, 1.0), 0.0);
  EXPECT_EQ(optim::clip_coefficient(from_vector({nan}, {1}, DType::f64), 1.0).item(), 1.0);
  EXPECT_EQ(optim::clip_coefficient(from_vector({inf}, {1}, DType::f64), 1.0).item(), 0.0);
}

TEST(Schedule, Values) {
  auto c = optim::LrSchedule::constant(0.3);
  EXPECT_DOUBLE_EQ(c.lr_at(0), 0.3);
  EXPECT_DOUBLE_EQ(c.lr_at(1000), 0.3);
  auto wc = optim::LrSchedule::warmup_cosine(1.0, 2, 6, 0.1);
  EXPECT_DOUBLE_EQ(wc.lr_at(0), 0.5);
  EXPECT_DOUBLE_EQ(wc.lr_at(1), 1.0);
  EXPECT_DOUBLE_EQ(wc.lr_at(2), 1.0);
  EXPECT_NEAR(wc.lr_at(4), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(wc.lr_at(6), 0.1);
  EXPECT_DOUBLE_EQ(wc.lr_at(60), 0.1);
  auto st = optim::LrSchedule::step(1.0, 2, 0.5);
  EXPECT_DOUBLE_EQ(st.lr_at(1), 1.0);
  EXPECT_DOUBLE_EQ(st.lr_at(2), 0.5);
  EXPECT_DOUBLE_EQ(st.lr_at(5), 0.25);
  EXPECT_THROW(optim::LrSchedule::warmup_cosine(1.0, 10, 5), Error);
}
