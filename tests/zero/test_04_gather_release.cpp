// Lesson 4 — gather before forward, release after.
// Invariant: with nothing persistent and nothing kept for reuse, a partitioned parameter
// has storage only while its module runs: the pre-forward hook gathers it (AVAILABLE
// inside forward), the post-forward hook releases it (NOT_AVAILABLE after). The engine
// gathers a module's own parameters with one all-gather (lesson 16 shows the layout).
// Touching a released parameter is an error that names it and says how to gather it —
// never a silent zero-sized tensor. A module's own hooks are inside its call: the engine
// gathers before every pre-forward hook and releases after every forward hook, registered
// before the engine was built or after. A tensor registered in two modules (tied weights) is
// gathered for either one (lesson 24). At one rank there is nothing to gather: the
// gathered parameter is its shard, used in place. An inference forward (under
// NoGradGuard) keeps nothing for reuse: even with the default reuse distance it releases
// every module after its forward (persistent parameters aside). A tensor made from a
// gathered parameter and kept past the call keeps that call's values; the step notes it.
//
// These lessons use `lesson::eager_release_config()` so every release is visible. The
// engine's defaults (DeepSpeed's) keep parameters of at most 100k elements gathered for
// good (`stage3_param_persistence_threshold`: PersistentParametersStayGathered below). They
// also keep a module gathered from its forward to its backward when that comes back in
// fewer than 1e9 elements (`stage3_max_reuse_distance`, lesson 18). For models this small,
// that means everything: with the defaults nothing here would be released in training.
#include "zero/lesson_util.h"

using namespace zt;

namespace {
// A module owning one Linear.
class Probe : public nn::UnaryModule {
 public:
  Probe() : nn::UnaryModule("Probe") {
    lin = register_module("lin", std::make_shared<nn::Linear>(4, 3));
  }
  std::shared_ptr<nn::Linear> lin;

 protected:
  Tensor forward(const Tensor& x) override { return (*lin)(x); }
};
}  // namespace

TEST(Lesson04GatherRelease, AvailableOnlyAroundForward) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Probe> m;
    {
      zero::Init init(comm);
      m = std::make_shared<Probe>();
    }
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    zero::ParamStatus during = zero::ParamStatus::kNotAvailable;
    m->lin->add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) {
      during = zero::zero_param(m->lin->weight)->status;
    });
    Tensor x = ones({2, 4});
    {
      autograd::NoGradGuard ng;
      Tensor y = engine(x);
      EXPECT_EQ(y.sizes(), (Shape{2, 3}));
    }
    EXPECT_EQ(during, zero::ParamStatus::kAvailable);
    EXPECT_EQ(zero::zero_param(m->lin->weight)->status, zero::ParamStatus::kNotAvailable);
    EXPECT_FALSE(m->lin->weight.has_storage());
  });
}

TEST(Lesson04GatherRelease, HooksRegisteredBeforeOrAfterTheEngineSeeTheParameters) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Probe> m;
    {
      zero::Init init(comm);
      m = std::make_shared<Probe>();
    }
    Tensor whole;
    {
      zero::GatheredParameters g(*m->lin, comm);
      whole = m->lin->weight.detach().clone();
    }
    // A pre-forward hook that reads the weight (a weight norm logged, a reparametrization),
    // registered before the engine's gather hook, and a forward hook registered after its
    // release hook.
    std::vector<double> before, after;
    m->lin->add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) {
      before.push_back(sum_squares(m->lin->weight.detach()).item());
    });
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    m->lin->add_forward_hook([&](nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>&) {
      after.push_back(sum_squares(m->lin->weight.detach()).item());
    });
    {
      autograd::NoGradGuard ng;
      engine(ones({2, 4}));
    }
    engine.backward(sum(engine(ones({2, 4}))));
    engine.step();
    const double expected = sum_squares(whole).item();
    ASSERT_EQ(before.size(), 2u);
    ASSERT_EQ(after.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_DOUBLE_EQ(before[i], expected) << "call " << i;
      EXPECT_DOUBLE_EQ(after[i], expected) << "call " << i;
    }
    EXPECT_FALSE(m->lin->weight.has_storage()) << "released after the forward hooks";
  });
}

namespace {
// 1-D and 2-D convolutions and their transposes: x (B, 2, 8) -> (B, 2, 8).
class Convs : public nn::UnaryModule {
 public:
  Convs() : nn::UnaryModule("Convs") {
    c1 = register_module("c1", std::make_shared<nn::Conv1d>(nn::Conv1dOptions(2, 4, 3).padding(1)));
    t1 = register_module(
        "t1", std::make_shared<nn::ConvTranspose1d>(nn::ConvTranspose1dOptions(4, 4, 2).stride(2)));
    c2 = register_module("c2", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(4, 2, 3)));
  }
  std::shared_ptr<nn::Conv1d> c1;
  std::shared_ptr<nn::ConvTranspose1d> t1;
  std::shared_ptr<nn::Conv2d> c2;

 protected:
  // (B, 2, 8) -> (B, 4, 8) -> (B, 4, 16) -> as (B, 4, 4, 4) -> (B, 2, 2, 2) -> (B, 2, 4).
  Tensor forward(const Tensor& x) override {
    Tensor h = (*t1)(silu((*c1)(x)));
    return (*c2)(h.reshape({x.size(0), 4, 4, 4})).reshape({x.size(0), 2, 4});
  }
};
}  // namespace

// Released means the gathered bytes are freed, not only the parameter emptied: an op
// keeps the weight it was given for backward, never a view of it, so nothing holds the
// gathered storage from forward to backward, whatever the layer's rank.
TEST(Lesson04GatherRelease, NoLayerKeepsAGatheredWeightUntilBackward) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Convs> m = lesson::partitioned<Convs>(comm);
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    Generator g(3);
    Tensor x = randn({2, 2, 8}, g);
    Tensor y = engine(x);
    Tensor loss = sum(y * y);
    EXPECT_EQ(engine.memory_report().gathered_param, 0)
        << "gathered weights outlive their forward: " << engine.memory_report().json();
    EXPECT_GT(engine.memory_report().gathered_param_peak, 0);
    engine.backward(loss);
    engine.step();
    EXPECT_EQ(engine.memory_report().gathered_param, 0);
  });
}

TEST(Lesson04GatherRelease, TouchingAReleasedParameterNamesIt) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Probe> m;
    {
      zero::Init init(comm);
      m = std::make_shared<Probe>();
    }
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    try {
      (void)m->lin->weight.data<float>();
      ADD_FAILURE() << "reading a released parameter must throw";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("lin.weight"), std::string::npos) << msg;
      EXPECT_NE(msg.find("NOT_AVAILABLE"), std::string::npos) << msg;
      EXPECT_NE(msg.find("GatheredParameters"), std::string::npos) << msg;
    }
    // Using the weight outside the module call (here the functional `linear`) skips the
    // pre-forward gather: the same error.
    EXPECT_TRUE(test::throws_with(
        [&] {
          linear(ones({1, 4}), m->lin->weight, Tensor());
        },
        "lin.weight"));
    // GatheredParameters makes it readable for a scope.
    {
      zero::GatheredParameters g({m->lin->weight}, comm);
      EXPECT_EQ(m->lin->weight.to_vector().size(), 12u);
    }
    EXPECT_FALSE(m->lin->weight.has_storage());
  });
}

// A loss term that reads a weight outside its module's call (a penalty on it) inside a
// GatheredParameters scope: the backward needs the weight again, and only a scope still
// open then has it. Closed before the backward, the error says so rather than only asking
// for the scope the code did open.
TEST(Lesson04GatherRelease, ABackwardThroughAUseInAClosedScopeSaysWhy) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    std::shared_ptr<Probe> m;
    {
      zero::Init init(comm);
      m = std::make_shared<Probe>();
    }
    zero::Engine engine(m, comm, lesson::eager_release_config(), lesson::adamw());
    auto loss = [&] {
      Tensor out = sum(engine(ones({2, 4})));
      zero::GatheredParameters g({m->lin->weight}, comm);
      return add(out, sum(mul(m->lin->weight, m->lin->weight)));
    };
    const std::string err = test::error_of([&] { engine.backward(loss()); });
    EXPECT_NE(err.find("'lin.weight' is not available (NOT_AVAILABLE: its data is partitioned "
                       "across ranks) to the backward that needs it"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("and around the backward through it"), std::string::npos) << err;
    {
      zero::GatheredParameters g({m->lin->weight}, comm);  // open across the backward
      engine.backward(add(sum(engine(ones({2, 4}))), sum(mul(m->lin->weight, m->lin->weight))));
    }
    EXPECT_TRUE(engine.step());
  });
}

TEST(Lesson04GatherRelease, PersistentParametersStayGathered) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Probe> m;
    {
      zero::Init init(comm);
      m = std::make_shared<Probe>();
    }
    zero::Config cfg = lesson::eager_release_config();
    cfg.stage3_param_persistence_threshold = 3;  // the bias (3 elements) persists
    zero::Engine engine(m, comm, cfg, {});
    autograd::NoGradGuard ng;
    engine(ones({1, 4}));
    EXPECT_TRUE(m->lin->bias.has_storage());
    EXPECT_FALSE(m->lin->weight.has_storage());
  });
}

// At one rank the cycle costs nothing it need not: the gathered parameter IS its shard,
// used in place (the same storage: no copy, no gathered memory), and its gradient is
// written into the gradient shard in one flush, with no bucket and no reduce-scatter
// (the engine still counts the flush in EngineStats::buckets_reduced: lesson 6).
TEST(Lesson04GatherRelease, AtOneRankTheGatheredParameterIsItsShard) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    std::shared_ptr<Probe> m;
    {
      zero::Init init(comm);
      m = std::make_shared<Probe>();
    }
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    const void* shard = zero::zero_param(m->lin->weight)->shard.data_ptr();
    const void* during = nullptr;
    m->lin->add_forward_pre_hook(
        [&](nn::Module&, std::vector<Tensor>&) { during = m->lin->weight.data_ptr(); });
    reset_peak_memory();
    comm.reset_counters();
    engine.backward(sum(engine(ones({2, 4}))));
    EXPECT_TRUE(engine.step());
    EXPECT_EQ(during, shard) << "the gathered weight is the shard's storage";
    EXPECT_EQ(engine.memory_report().gathered_param_peak, 0) << "nothing was copied out";
    EXPECT_EQ(comm.counters()[comm::Collective::kReduceScatter].calls, 0);
  });
}

// Under the default reuse distance a training step keeps each module gathered from its
// forward to its backward (lesson 18). An inference forward under NoGradGuard has no
// backward to wait for: it keeps nothing for reuse, and every module is released after
// its forward.
TEST(Lesson04GatherRelease, AnInferenceForwardKeepsNothingForReuse) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m;
    {
      zero::Init init(comm);
      m = std::make_shared<lesson::Mixed>();
    }
    zero::Config cfg;  // the defaults, except that nothing persists
    cfg.stage3_param_persistence_threshold = 0;
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = lesson::batch(2, comm.rank());
    engine.backward(mse_loss(engine(x), y));  // records the trace reuse is decided by
    engine.step();
    autograd::NoGradGuard ng;
    engine(x);
    for (auto& [n, p] : m->named_parameters()) EXPECT_FALSE(p.has_storage()) << n;
  });
}

namespace {
// A module whose forward returns its parameter itself (a learned table handed out whole).
class Table : public nn::Module {
 public:
  Table() : nn::Module("Table") {
    table = register_parameter("table", arange(0, 12).reshape({3, 4}));
  }
  Tensor table;

 protected:
  std::vector<Tensor> forward(const std::vector<Tensor>&) override { return {table}; }
};
}  // namespace

// The release after forward takes a parameter's storage, so an output that is the
// parameter itself leaves the module as a view of it, which keeps the gathered values: in
// inference as in training (where the engine's backward hooks wrap outputs anyway).
TEST(Lesson04GatherRelease, AParameterReturnedByItsModuleStaysReadable) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Table> m = lesson::partitioned<Table>(comm);
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    const std::vector<double> want = arange(0, 12).to_vector();
    {
      autograd::NoGradGuard no_grad;
      const Tensor out = engine.forward({})[0];
      EXPECT_FALSE(m->table.has_storage()) << "released after the forward";
      EXPECT_EQ(out.to_vector(), want);
    }
    const Tensor out = engine.forward({})[0];
    EXPECT_EQ(out.to_vector(), want);
  });
}

namespace {
// A linear layer that keeps its weight's transpose from its last call, as a cache would.
class Caching : public nn::UnaryModule {
 public:
  Caching() : nn::UnaryModule("Caching") {
    weight = register_parameter("weight", full({3, 4}, 0.5));
    bias = register_parameter("bias", zeros({3}));
  }
  Tensor weight, bias, kept;

 protected:
  Tensor forward(const Tensor& x) override {
    kept = weight.detach().transpose(0, 1);
    return linear(x, weight, bias);
  }
};

// Rank 0's stderr while a Caching model trains two steps on two ranks; `cache` off: the
// same steps without the kept tensor.
std::string caching_notes(bool cache) {
  ::testing::internal::CaptureStderr();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    std::shared_ptr<Caching> m = lesson::partitioned<Caching>(comm);
    zero::Engine engine(m, comm, lesson::eager_release_config(), lesson::adamw());
    for (int step = 0; step < 2; ++step) {
      engine.backward(sum(engine(ones({2, 4}))));
      if (!cache) m->kept = Tensor();
      const std::vector<double> before = cache ? m->kept.to_vector() : std::vector<double>{};
      engine.step();
      if (cache) {
        EXPECT_EQ(m->kept.to_vector(), before) << "the kept copy misses the update";
      }
    }
  });
  return ::testing::internal::GetCapturedStderr();
}
}  // namespace

// Released, a gathered copy is gone unless a tensor made from it (a view, detach(), a
// transpose) was kept past the call: that one holds the call's values, and the step's update
// does not reach it (at one rank the gathered parameter is the shard, updated in place, and
// a view follows it as in PyTorch). The step notes such a copy, once per parameter, naming it.
TEST(Lesson04GatherRelease, ACopyKeptPastItsCallIsNotedAtTheStep) {
  const std::string noted = caching_notes(/*cache=*/true);
  EXPECT_NE(noted.find("a tensor made from parameter 'weight' (of this engine's Caching) "
                       "outlived the call that gathered it"),
            std::string::npos)
      << noted;
  EXPECT_EQ(noted.find("parameter 'bias'"), std::string::npos) << noted;
  const size_t first = noted.find("outlived");
  EXPECT_EQ(noted.find("outlived", first + 1), std::string::npos) << "once: " << noted;
  const std::string quiet = caching_notes(/*cache=*/false);
  EXPECT_EQ(quiet.find("outlived"), std::string::npos) << quiet;
}
