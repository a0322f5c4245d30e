// Mistakes a program embedding zero::Engine makes, each refused with an error that says what
// is wrong and what to do, where the engine would otherwise train something else silently:
// a second engine on one model, a step without a backward, freezing or
// unfreezing a parameter after the engine was built, zero::Config values out of range, a
// trainable f64 parameter or 16-bit replica, a buffer policy for a path the model lacks, a
// parameter some ranks backpropagate through and others not, a replica loaded on one
// rank after the engine was built, and an optimizer of the user's over partitioned
// parameters. Also: backward
// twice through one graph with retain_graph, as in PyTorch.
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "optim/factory.h"
#include "zero/lesson_util.h"

using namespace zt;
using lesson::Pair;

namespace {

// A trunk and two heads of one size; forward runs both and returns the one `use_b` picks.
struct Heads : nn::UnaryModule {
  Heads() : nn::UnaryModule("Heads") {
    trunk = register_module("trunk", std::make_shared<nn::Linear>(4, 4));
    a = register_module("a", std::make_shared<nn::Linear>(4, 4));
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = tanh((*trunk)(x));
    Tensor ya = (*a)(h), yb = (*b)(h);
    return use_b ? yb : ya;
  }
  std::shared_ptr<nn::Linear> trunk, a, b;
  bool use_b = false;
};

// A replicated Linear (a frozen tokenizer, say) in front of a partitioned one.
struct Tokenized : nn::UnaryModule {
  Tokenized(comm::Communicator& comm, bool train_tok) : nn::UnaryModule("Tokenized") {
    {
      zero::Replicated replica(comm);
      tok = register_module("tok", std::make_shared<nn::Linear>(4, 4));
    }
    tok->requires_grad_(train_tok);
    head = register_module("head", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override { return (*head)(tanh((*tok)(x))); }
  std::shared_ptr<nn::Linear> tok, head;
};

zero::OptimizerConfig adamw() {
  zero::OptimizerConfig o;
  o.lr = 1e-2;
  return o;
}

Tensor loss_of(zero::Engine& e, int seed) {
  manual_seed(static_cast<uint64_t>(seed));
  return mean(mul(e(randn({3, 4})), e(randn({3, 4}))));
}

}  // namespace

TEST(EngineMisuse, ASecondEngineOnOneModelIsRefusedWhileTheFirstLives) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    {
      zero::Engine first(m, comm, {}, adamw());
      EXPECT_TRUE(test::throws_with([&] { zero::Engine second(m, comm, {}, adamw()); },
                                    "is trained by another zero::Engine that is still alive"));
    }
    zero::Engine after(m, comm, {}, adamw());  // once the first is gone
    after.backward(loss_of(after, 1));
    EXPECT_TRUE(after.step());
  });
}

// Thread ranks share one address space, so a model built before comm::launch and captured
// by every rank compiles and runs: each rank's engine would partition the same tensors at
// once (a data race: heap corruption, or collectives of different sizes). The first engine
// claims the parameters; the others are refused before they touch them.
TEST(EngineMisuse, OneModelSharedByTheThreadRanksIsRefused) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto shared = std::make_shared<Pair>();
    const std::string why = test::error_of([&] {
      comm::run_threads(
          4, [&](comm::Communicator& comm) { zero::Engine e(shared, comm, {}, adamw()); });
    });
    EXPECT_NE(why.find("the ranks share one model object. Under thread ranks each rank builds its "
                       "own model inside the function comm::launch runs"),
              std::string::npos)
        << why;
  }
}

// Module::to converts tensors in place, which a partitioned parameter's shards (its real
// storage) would not follow: cast to bf16 after the engine was built, a small parameter kept
// gathered would be read as bf16 bytes of f32 values at the next re-gather. Refused, naming
// the parameter, before anything changes; the precision config is the way to 16 bits.
// Replicated modules are plain tensors and convert as usual.
TEST(EngineMisuse, ConvertingAPartitionedModelIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Pair> m;
    std::shared_ptr<nn::Linear> replica;
    {
      zero::Init init(comm);
      m = std::make_shared<Pair>();
      zero::Replicated whole(comm);
      replica = std::make_shared<nn::Linear>(4, 4);
    }
    const char* refused = "Pair.to(bf16): cannot convert 'a.weight': it is partitioned by ZeRO-3";
    EXPECT_TRUE(test::throws_with([&] { m->to(DType::bf16); }, refused));
    zero::Engine e(m, comm, {}, adamw());  // the defaults keep Pair's parameters gathered
    EXPECT_TRUE(test::throws_with([&] { m->to(DType::bf16); }, refused));
    EXPECT_EQ(m->b->bias.dtype(), DType::f32) << "nothing converted";
    e.backward(loss_of(e, 1));
    EXPECT_TRUE(e.step());
    EXPECT_TRUE(std::isfinite(loss_of(e, 2).item()));
    replica->to(DType::bf16);
    EXPECT_EQ(replica->weight.dtype(), DType::bf16);
  });
}

// The engine owns the optimizer, over its fp32 shards: an optim::Optimizer of the user's over
// the model's parameters (the PyTorch habit) would see no gradient, the engine's hooks taking
// them all into the shards, and would update nothing without a word. Refused, naming a
// partitioned parameter, when made, and at its step for parameters partitioned after it.
TEST(EngineMisuse, AnOptimizerOverPartitionedParametersIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const char* refused =
        "optimizer: parameter 'a.weight' cannot be updated here: it is "
        "partitioned by ZeRO-3";
    auto before = std::make_shared<Pair>();
    auto own = optim::make_optimizer(optim::OptimizerConfig{}, before->named_parameters());
    zero::Engine e(before, comm, {}, adamw());
    e.backward(loss_of(e, 1));
    EXPECT_TRUE(test::throws_with([&] { own->step(); }, refused));
    EXPECT_TRUE(test::throws_with(
        [&] { optim::make_optimizer(optim::OptimizerConfig{}, before->named_parameters()); },
        "call engine.step()"));
    EXPECT_TRUE(e.step()) << "the engine's own optimizer is the way";
    zero::Replicated whole(comm);  // a replica is a plain tensor: any optimizer may take it
    auto replica = std::make_shared<nn::Linear>(4, 4);
    EXPECT_NO_THROW(optim::make_optimizer(optim::OptimizerConfig{}, replica->named_parameters()));
  });
}

// A Linear and a BatchNorm1d after it.
struct Normed : nn::UnaryModule {
  Normed() : nn::UnaryModule("Normed") {
    lin = register_module("lin", std::make_shared<nn::Linear>(4, 4));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
  }
  Tensor forward(const Tensor& x) override { return (*bn)((*lin)(x)); }
  std::shared_ptr<nn::Linear> lin;
  std::shared_ptr<nn::BatchNorm1d> bn;
};

// A modifier scope gives every tensor it covers the modifier rank's value, buffers it did
// not edit included. In the middle of a window, a scope over a whole module with BatchNorm
// therefore replaces the other ranks' running statistics of the window with rank 0's; a
// scope over just the edited tensors leaves them to the step's average.
TEST(EngineMisuse, AModifierScopeInAWindowCoversWhatItNames) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Normed>();
    zero::Engine e(m, comm, {}, adamw());
    manual_seed(static_cast<uint64_t>(10 + comm.rank()));
    e.backward(mean(e(randn({8, 4}))));  // each rank's own batch statistics
    const std::vector<double> own = m->bn->running_mean.to_vector();
    auto rank0 = [&](const Tensor& t) {
      return comm.all_gather_object(zero::content_hash(t))[0] == zero::content_hash(t);
    };
    ASSERT_EQ(rank0(m->bn->running_mean), comm.rank() == 0) << "the ranks' batches differ";
    {
      zero::GatheredParameters g({m->lin->bias}, comm, /*modifier_rank=*/0);
      if (comm.rank() == 0) {
        autograd::NoGradGuard no_grad;
        m->lin->bias.fill_(0.5);
      }
    }
    EXPECT_EQ(m->lin->bias.to_vector(), std::vector<double>(4, 0.5));
    EXPECT_EQ(m->bn->running_mean.to_vector(), own) << "rank " << comm.rank();
    { zero::GatheredParameters g(*m, comm, /*modifier_rank=*/0); }
    EXPECT_TRUE(rank0(m->bn->running_mean)) << "rank " << comm.rank();
    EXPECT_TRUE(e.step());
    EXPECT_NO_THROW(zero::verify_replicas(m->named_buffers(), comm));
  });
}

// Collectives that only some ranks issue (a GatheredParameters scope opened on rank 0 alone,
// while rank 1 runs a forward) fail at once on every rank, naming the call they came from.
TEST(EngineMisuse, ACallOnSomeRanksOnlyIsNamedInTheMismatch) {
  const std::string why = test::error_of([] {
    comm::run_threads(2, [](comm::Communicator& comm) {
      auto m = std::make_shared<Pair>();
      zero::Engine e(m, comm, lesson::eager_release_config(), adamw());
      if (comm.rank() == 0) {
        zero::GatheredParameters g(*m, comm);
      } else {
        e(ones({3, 4}));
      }
    });
  });
  EXPECT_NE(why.find("mismatched collectives"), std::string::npos) << why;
  EXPECT_NE(why.find("[GatheredParameters]"), std::string::npos) << why;
}

// An engine whose construction fails after it took the parameters (here its optimizer type
// is unknown) leaves the model free: the next engine builds.
TEST(EngineMisuse, AFailedConstructionLeavesTheModelFreeForTheNext) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    zero::OptimizerConfig lamb = adamw();
    lamb.type = "lamb";
    EXPECT_TRUE(test::throws_with([&] { zero::Engine e(m, comm, {}, lamb); }, "lamb"));
    zero::Engine e(m, comm, {}, adamw());
    e.backward(loss_of(e, 1));
    EXPECT_TRUE(e.step());
  });
}

TEST(EngineMisuse, AStepWithoutABackwardIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    zero::Engine e(std::make_shared<Pair>(), comm, {}, adamw());
    EXPECT_TRUE(test::throws_with([&] { e.step(); }, "no backward() since the last step()"));
    e.backward(loss_of(e, 1));
    EXPECT_TRUE(e.step());
    EXPECT_TRUE(test::throws_with([&] { e.step(); }, "call engine.backward(loss) first"));
  });
}

// A plain loss.backward() (a gradient check, a saliency map) sends its gradients through
// the engine's hooks into the shards, where Module::zero_grad() cannot reach them: the next
// step would apply them. Refused at the next backward or step, naming a parameter.
TEST(EngineMisuse, ABackwardOutsideTheEngineIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    zero::Engine e(std::make_shared<Pair>(), comm, {}, adamw());
    loss_of(e, 1).backward();
    const char* why = "a gradient reached 'b.bias' (of this engine's Pair) outside engine.backward";
    EXPECT_TRUE(test::throws_with([&] { e.backward(loss_of(e, 2)); }, why));
    EXPECT_TRUE(test::throws_with([&] { e.step(); }, "engine.discard_gradients() drops it"));
    // Dropped with the window, the engine trains on.
    e.discard_gradients();
    e.backward(loss_of(e, 3));
    EXPECT_TRUE(e.step());
  });
}

// On some ranks only, that backward's gathers meet the others' next collective (an
// evaluation's gather here): the mismatch names where they came from.
TEST(EngineMisuse, ABackwardOutsideTheEngineOnOneRankIsNamedInTheMismatch) {
  const std::string err = test::error_of([] {
    comm::run_threads(2, [](comm::Communicator& comm) {
      zero::Engine e(std::make_shared<Pair>(), comm, lesson::eager_release_config(), adamw());
      Tensor loss = loss_of(e, 1);
      if (comm.rank() == 1) {
        loss.backward();
      } else {
        autograd::NoGradGuard no_grad;
        e(ones({3, 4}));
      }
    });
  });
  EXPECT_NE(err.find("called all_gather (f32 x 20) [a backward outside engine.backward(loss)]"),
            std::string::npos)
      << err;
}

// The same through a trainable replica alone (a term of the replicated module's output,
// backpropagated by hand): its gradient would wait in the replica's .grad() for the step,
// unscaled and not averaged over the accumulation. Refused the same way.
TEST(EngineMisuse, ABackwardOutsideTheEngineThroughOnlyATrainableReplicaIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    manual_seed(1);
    auto m = std::make_shared<Tokenized>(comm, /*train_tok=*/true);
    zero::Engine e(m, comm, {}, adamw());
    sum((*m->tok)(ones({3, 4}))).backward();
    EXPECT_TRUE(
        test::throws_with([&] { e.backward(loss_of(e, 1)); },
                          "a gradient reached 'tok.bias' (of this engine's Tokenized) outside"));
    e.discard_gradients();
    EXPECT_FALSE(m->tok->weight.grad().defined() && sum(abs(m->tok->weight.grad())).item() != 0.0);
    e.backward(loss_of(e, 2));
    EXPECT_TRUE(e.step());
  });
}

// A read-only GatheredParameters scope held across a step sees the step's update as the
// scope's values, not as an edit (it blamed the optimizer on the user); an edit after the
// step is still one.
TEST(EngineMisuse, AReadOnlyScopeHeldAcrossAStepTakesTheUpdate) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    zero::Engine e(m, comm, {}, adamw());
    {
      zero::GatheredParameters g(*m, comm);
      e.backward(loss_of(e, 1));
      EXPECT_TRUE(e.step());
      EXPECT_NO_THROW(g.exit());
    }
    zero::GatheredParameters g(*m, comm);
    e.backward(loss_of(e, 2));
    EXPECT_TRUE(e.step());
    {
      autograd::NoGradGuard no_grad;
      m->b->bias.fill_(1.0);
    }
    EXPECT_TRUE(test::throws_with([&] { g.exit(); }, "'b.bias' was modified inside a scope"));
  });
}

// A modifier scope held across a step: rank 0's edit before the step is the value the step
// updates (it was overwritten by the step's re-gather), and an edit after it reaches every
// rank at the exit; partitioned and persistent parameters alike.
TEST(EngineMisuse, AModifierScopeHeldAcrossAStepKeepsItsEdits) {
  for (bool persistent : {false, true}) {
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto m = std::make_shared<Pair>();
      zero::Engine e(m, comm, persistent ? zero::Config{} : lesson::eager_release_config(),
                     adamw());
      {
        zero::GatheredParameters g(*m, comm, /*modifier_rank=*/0);
        e.backward(loss_of(e, 1));
        if (comm.rank() == 0) {
          autograd::NoGradGuard no_grad;
          m->b->bias.fill_(7.0);
        }
        EXPECT_TRUE(e.step());
        if (comm.rank() == 0) {
          autograd::NoGradGuard no_grad;
          m->a->bias.fill_(3.0);
        }
      }
      for (const auto& [name, t] : lesson::full_parameters(*m, comm)) {
        if (name == "b.bias") {
          // The step updated the edited value: AdamW's first step moves each element by
          // lr (1e-2) times about 1, plus lr x decay x 7 = 7e-4.
          for (double v : t.to_vector()) EXPECT_NEAR(std::abs(v - 7.0), 0.01, 0.002) << persistent;
        } else if (name == "a.bias") {
          EXPECT_TRUE(test::values_are(t, std::vector<double>(4, 3.0))) << persistent;
        }
      }
    });
  }
}

// Under gradient accumulation the engine counts micro-batches by step() calls (DeepSpeed's
// contract). Several backward() calls before one step(), as a PyTorch loop accumulates,
// would update at every gas-th step() only, with gas times the gradient: refused.
TEST(EngineMisuse, SeveralBackwardsPerStepUnderAccumulationAreRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    zero::Config cfg;
    cfg.gradient_accumulation_steps = 2;
    zero::Engine e(std::make_shared<Pair>(), comm, cfg, adamw());
    e.backward(loss_of(e, 1));
    e.backward(loss_of(e, 2));
    EXPECT_TRUE(test::throws_with(
        [&] { e.step(); },
        "2 backward() calls since the last step() with gradient_accumulation_steps = 2"));
  });
}

// A module registered after the engine was built is not partitioned, reduced or updated:
// its parameters would keep each rank's own unreduced .grad and never train.
TEST(EngineMisuse, AModuleAddedAfterTheEngineIsRefusedAtTheStep) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    zero::Engine e(m, comm, {}, adamw());
    e.backward(loss_of(e, 1));
    EXPECT_TRUE(e.step()) << "registrations elsewhere in the process leave the model alone";
    m->register_module("extra", std::make_shared<nn::Linear>(4, 4));
    e.backward(loss_of(e, 2));
    EXPECT_TRUE(test::throws_with([&] { e.step(); },
                                  "'extra.weight' was registered (or replaced) after the engine"));
  });
}

TEST(EngineMisuse, FreezingOrUnfreezingAfterTheEngineIsBuiltIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    m->b->bias.set_requires_grad(false);  // frozen from the start: fine
    zero::Engine e(m, comm, {}, adamw());
    e.backward(loss_of(e, 1));
    EXPECT_TRUE(e.step());
    m->a->weight.set_requires_grad(false);
    e.backward(loss_of(e, 2));
    EXPECT_TRUE(
        test::throws_with([&] { e.step(); }, "'a.weight' was trainable when the engine was built"));
    m->a->weight.set_requires_grad(true);
    m->b->bias.set_requires_grad(true);
    e.backward(loss_of(e, 3));
    EXPECT_TRUE(
        test::throws_with([&] { e.step(); }, "'b.bias' was frozen when the engine was built"));
  });
}

// A zero::Config built in code gets the ranges the YAML loader enforces: a value the
// engine would act on wrongly (an infinite loss scale from gradient_accumulation_steps 0,
// gradient ascent from -2, clipping silently off for NaN, an fp16 scale of 2^2000 that
// skips every step forever, a fixed one so small that its reciprocal overflows, bf16 and
// fp16 together) is an error naming the field.
TEST(EngineMisuse, ConfigValuesOutOfRangeAreRefusedNamingTheField) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    const std::vector<std::pair<std::function<void(zero::Config&)>, std::string>> cases = {
        {[](zero::Config& c) { c.gradient_accumulation_steps = 0; },
         "gradient_accumulation_steps is 0; it must be >= 1"},
        {[](zero::Config& c) { c.gradient_accumulation_steps = -2; },
         "gradient_accumulation_steps is -2"},
        {[](zero::Config& c) { c.gradient_clipping = std::nan(""); }, "gradient_clipping is nan"},
        {[](zero::Config& c) { c.gradient_clipping = -1; }, "gradient_clipping is -1"},
        {[](zero::Config& c) { c.reduce_bucket_size = -5; }, "reduce_bucket_size is -5"},
        {[](zero::Config& c) { c.reduce_bucket_size = 0; },
         "reduce_bucket_size is 0; it must be >= 1"},
        {[](zero::Config& c) { c.buffers.verify_every = -1; }, "buffers.verify_every is -1"},
        {[](zero::Config& c) { c.precision.bf16 = c.precision.fp16 = true; },
         "precision.bf16 and precision.fp16 are both enabled"},
        {[](zero::Config& c) {
           c.precision.fp16 = true;
           c.precision.initial_scale_power = 2000;
         },
         "precision.initial_scale_power is 2000; use 0 to 62"},
        {[](zero::Config& c) {
           c.precision.fp16 = true;
           c.precision.loss_scale = 1e-40;
         },
         "precision.loss_scale is 1e-40; it must be 0 (dynamic) or a finite scale of at least "
         "2^-126"},
        {[](zero::Config& c) { c.stage = 2; }, "stage 3 only, got stage 2"},
    };
    for (const auto& [edit, message] : cases) {
      zero::Config cfg;
      edit(cfg);
      EXPECT_TRUE(test::throws_with(
          [&] { zero::Engine e(std::make_shared<Pair>(), comm, cfg, adamw()); }, message))
          << message;
    }
    zero::OptimizerConfig nesterov = adamw();
    nesterov.nesterov = true;
    EXPECT_TRUE(
        test::throws_with([&] { zero::Engine e(std::make_shared<Pair>(), comm, {}, nesterov); },
                          "nesterov is an SGD option"));
  });
}

// The engine's master and gradient shards are fp32: a trainable f64 parameter would learn
// at fp32 precision, so it is refused; a frozen one is fine.
TEST(EngineMisuse, TrainableF64ParametersAreRefused) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    m->to(DType::f64);
    EXPECT_TRUE(test::throws_with([&] { zero::Engine e(m, comm, {}, adamw()); },
                                  "parameter 'a.weight' is f64 and requires grad"));
    auto frozen = std::make_shared<Pair>();
    frozen->to(DType::f64);
    frozen->requires_grad_(false);
    frozen->b->to(DType::f32);
    frozen->b->requires_grad_(true);
    zero::Engine e(frozen, comm, {}, adamw());
    EXPECT_EQ(frozen->a->weight.dtype(), DType::f64);
  });
}

// A buffers.modules path that names nothing would leave the default policy in force; so
// would one naming a module's second path (its buffers go by the first), and a second
// entry for one path would win over the first without a word.
TEST(EngineMisuse, ABufferPolicyForNoModuleIsRefused) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    auto bn = [] {
      auto s = std::make_shared<nn::Sequential>();
      s->push_back(std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(4)));
      return s;
    };
    zero::Config cfg;
    cfg.buffers.modules.push_back({"O.running_mean", zero::BufferSync::none});
    EXPECT_TRUE(test::throws_with([&] { zero::Engine e(bn(), comm, cfg, adamw()); },
                                  "buffers.modules names 'O.running_mean', which is no module"));
    cfg.buffers.modules = {{"0", zero::BufferSync::none},
                           {"0.running_var", zero::BufferSync::none}};
    zero::Engine e(bn(), comm, cfg, adamw());  // a module and a buffer: both fine
    cfg.buffers.modules = {{"0", zero::BufferSync::none}, {"0", zero::BufferSync::broadcast}};
    EXPECT_TRUE(test::throws_with([&] { zero::Engine twice(bn(), comm, cfg, adamw()); },
                                  "buffers.modules names '0' twice"));
    auto shared = bn();
    shared->push_back((*shared)[0]);  // one BatchNorm under the paths 0 and 1
    cfg.buffers.modules = {{"1", zero::BufferSync::none}};
    EXPECT_TRUE(test::throws_with([&] { zero::Engine alias(shared, comm, cfg, adamw()); },
                                  "names '1', a second path of module '0' (registered twice)"));
  });
}

// Two backward passes through one graph (two losses sharing a forward) need retain_graph
// on the first, as in PyTorch; the gradients add up.
TEST(EngineMisuse, RetainGraphAllowsASecondBackward) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    zero::Engine e(m, comm, {}, adamw());
    const Tensor loss = loss_of(e, 1);
    e.backward(loss, /*retain_graph=*/true);
    e.reduce_gradients();
    const Tensor once = zero::zero_param(m->a->weight)->grad_shard.clone();
    e.backward(loss);
    e.reduce_gradients();
    EXPECT_CLOSE(zero::zero_param(m->a->weight)->grad_shard, mul(once, 2.0), 1e-6, 1e-7);
    EXPECT_TRUE(e.step());
  });
}

// Each rank reduce-scatters the gradients it got. A head that only some ranks' losses use
// (every rank ran both) shifts their buckets against the others'; the heads have one size, so
// the collective pairs rank 0's 'a' slices with rank 1's 'b' slices without an error of its
// own. The step compares the ranks' layouts first: an error on every rank, nothing updated,
// and the next step, with every rank on one head, trains. (On the first step, which records
// the trace of module calls, the ranks' traces differ already and say so first.)
TEST(EngineMisuse, AParameterWithAGradientOnSomeRanksOnlyIsAnErrorAtTheStep) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Heads>();
    zero::Engine e(m, comm, {}, adamw());
    e.backward(mean(e(randn({3, 4}))));
    EXPECT_TRUE(e.step());
    const Tensor before = m->trunk->weight.detach().clone();
    m->use_b = comm.rank() == 1;
    e.backward(mean(e(randn({3, 4}))));
    const std::string why = test::error_of([&] { e.step(); });
    EXPECT_NE(why.find("the ranks reduced different gradients of this engine's Heads in this "
                       "window: 'a."),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("' got a gradient on ranks {0} and none on ranks {1}. Every rank must "
                       "backpropagate through the same parameters"),
              std::string::npos)
        << why;
    EXPECT_TRUE(test::all_close(m->trunk->weight, before, 0, 0)) << "nothing was applied";
    m->use_b = false;
    e.backward(mean(e(randn({3, 4}))));
    EXPECT_TRUE(e.step());
    EXPECT_FALSE(test::all_close(m->trunk->weight, before, 0, 0));
  });
}

// A replica written on one rank after the engine was built (a load on rank 0 only) would stay
// divergent for good. The write moves the replica's storage version, the step's exchange
// tells every rank, and the replicas are verified before that step's update, with
// verify_every at its default 0: nothing is applied. The same load on every rank passes.
TEST(EngineMisuse, AReplicaLoadedOnOneRankAfterTheEngineIsBuiltIsFoundAtTheNextStep) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Tokenized>(comm, false);
    zero::Engine e(m, comm, {}, adamw());
    const nn::NamedTensors loaded = {{"weight", full({4, 4}, 0.5)}, {"bias", zeros({4})}};
    if (comm.rank() == 0) nn::load_state_dict(*m->tok, loaded);
    e.backward(loss_of(e, 1));
    const Tensor before = m->head->weight.detach().clone();
    EXPECT_TRUE(test::throws_with(
        [&] { e.step(); },
        "replica check failed: 'tok.weight' differs across ranks (2 distinct values): "
        "ranks {0} ranks {1}"));
    EXPECT_TRUE(test::all_close(m->head->weight, before, 0, 0)) << "nothing was applied";
    nn::load_state_dict(*m->tok, loaded);
    e.backward(loss_of(e, 2));
    EXPECT_TRUE(e.step());
    e.backward(loss_of(e, 3));
    EXPECT_TRUE(e.step());
  });
}

// A replica has no fp32 master: the optimizer updates it in its own dtype, where a 16-bit
// weight would lose every update under half an ulp. Refused when trainable; frozen is fine.
TEST(EngineMisuse, ATrainable16BitReplicaIsRefused) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    auto m = std::make_shared<Tokenized>(comm, true);
    m->tok->to(DType::bf16);
    EXPECT_TRUE(test::throws_with([&] { zero::Engine e(m, comm, {}, adamw()); },
                                  "parameter 'tok.weight' is a trainable replica in bf16"));
    m->tok->requires_grad_(false);
    zero::Engine e(m, comm, {}, adamw());
  });
}
