// Lesson 26 — prefetching in inference.
// Invariant: inference passes (forwards under NoGradGuard, or of a model in eval mode)
// follow a trace of their own, apart from training's. The first pass records the order in
// which modules fetch their parameters; later passes prefetch along it within the bounds
// training has (stage3_prefetch_bucket_size ahead, stage3_max_live_parameters at most).
// A pass starts with a call of the model (Engine::forward), or, where inference calls
// submodules directly, with a top-level call of the module its trace starts with. A
// module called out of order invalidates the inference trace, what was prefetched for it
// is released, and the next pass records again. Training steps and inference passes in
// between disturb neither trace, and inference keeps nothing for a reuse: after a pass that
// followed its trace nothing is left gathered.
#include <tuple>

#include "zero/lesson_util.h"

using namespace zt;

namespace {

// a, then b, or c instead when use_c; encode() calls the same modules without the model.
class Branchy : public nn::UnaryModule {
 public:
  Branchy() : nn::UnaryModule("Branchy") {
    a = register_module("a", std::make_shared<nn::Linear>(6, 6));
    b = register_module("b", std::make_shared<nn::Linear>(6, 6));
    c = register_module("c", std::make_shared<nn::Linear>(6, 6));
  }
  std::shared_ptr<nn::Linear> a, b, c;
  bool use_c = false;
  Tensor encode(const Tensor& x) { return forward(x); }

 protected:
  Tensor forward(const Tensor& x) override { return use_c ? (*c)((*a)(x)) : (*b)((*a)(x)); }
};

std::vector<std::string> gathered(nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [n, p] : m.named_parameters())
    if (p.has_storage()) out.push_back(n);
  return out;
}

// The same model whole, with the partitioned one's current values.
template <typename M>
std::shared_ptr<M> plain_copy(M& m, comm::Communicator& comm) {
  auto plain = std::make_shared<M>();
  nn::load_state_dict(*plain, lesson::full_parameters(m, comm));
  return plain;
}

double max_diff(const Tensor& a, const Tensor& b) {
  return max(abs(sub(a, b))).item();
}

}  // namespace

TEST(Lesson26InferencePrefetch, APassRecordsAndTheNextOnesPrefetch) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    auto [x, y] = lesson::batch(2, comm.rank());
    autograd::NoGradGuard no_grad;
    const Tensor first = engine(x);  // records
    EXPECT_EQ(engine.stats().prefetches_issued, 0);
    EXPECT_EQ(engine.inference_trace().state(), zero::Trace::State::kRecording);
    engine.set_event_log(true);
    const Tensor second = engine(x);
    EXPECT_EQ(engine.inference_trace().state(), zero::Trace::State::kValid);
    const std::vector<std::string> fetched = lesson::modules_of(engine.events(), "fetch:");
    // The first module is gathered on demand; every other one was prefetched before its call
    // (the window holds the whole model here).
    EXPECT_EQ(lesson::modules_of(engine.events(), "gather:"),
              std::vector<std::string>{fetched.front()});
    EXPECT_EQ(lesson::modules_of(engine.events(), "prefetch:"),
              std::vector<std::string>(fetched.begin() + 1, fetched.end()));
    EXPECT_EQ(max_diff(first, second), 0.0);
    EXPECT_EQ(gathered(*m), std::vector<std::string>{}) << "inference keeps nothing gathered";
    EXPECT_EQ(engine.trace().size(), 0u) << "the training trace is not touched";
    EXPECT_EQ(engine.stats().inference_trace_invalidations, 0);
  });
}

// After each step the prefetched values are the updated ones: the evaluation matches the
// plain model holding the partitioned one's current weights.
TEST(Lesson26InferencePrefetch, TrainingStepsAndEvaluationsKeepTheirOwnTraces) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), lesson::adamw());
    // Tied, not a structured binding: clang 14 lets no lambda capture a binding.
    Tensor x, y;
    std::tie(x, y) = lesson::batch(2, comm.rank());
    auto train_step = [&] {
      engine.backward(mse_loss(engine(x), y));
      engine.step();
    };
    auto evaluate = [&] {
      autograd::NoGradGuard no_grad;
      return engine(x);
    };
    train_step();
    evaluate();
    evaluate();
    train_step();
    engine.set_event_log(true);
    const Tensor got = evaluate();
    EXPECT_EQ(lesson::modules_of(engine.events(), "gather:").size(), 1u)
        << "the rest was prefetched";
    EXPECT_LT(max_diff(got, (*plain_copy(*m, comm))(x)), 1e-6);
    const int64_t before = engine.stats().prefetches_issued;
    train_step();
    EXPECT_GT(engine.stats().prefetches_issued, before) << "training still prefetches";
    EXPECT_EQ(engine.stats().trace_invalidations, 0);
    EXPECT_EQ(engine.stats().inference_trace_invalidations, 0);
    EXPECT_EQ(engine.trace().state(), zero::Trace::State::kValid);
    EXPECT_EQ(engine.inference_trace().state(), zero::Trace::State::kValid);
  });
}

TEST(Lesson26InferencePrefetch, AnotherOrderReleasesWhatWasPrefetchedForTheOldOne) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Branchy> m = lesson::partitioned<Branchy>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    Tensor x = full({2, 6}, 0.5);
    autograd::NoGradGuard no_grad;
    engine(x);  // records a, b
    engine(x);  // prefetches b at a's call
    m->use_c = true;
    engine.set_event_log(true);
    const Tensor got = engine(x);
    EXPECT_EQ(engine.stats().inference_trace_invalidations, 1);
    const auto& ev = engine.events();
    auto pos = [&](const std::string& e) {  // an event missing is a failure, not "last"
      const size_t at = lesson::index_of(ev, e);
      EXPECT_NE(at, std::string::npos) << "no event " << e;
      return at;
    };
    // b was prefetched at a's call, for the old order; c's call gives it back.
    EXPECT_LT(pos("prefetch:b"), pos("fetch:c"));
    EXPECT_LT(pos("fetch:c"), pos("release:b"));
    EXPECT_EQ(gathered(*m), std::vector<std::string>{});
    std::shared_ptr<Branchy> plain = plain_copy(*m, comm);
    plain->use_c = true;
    EXPECT_EQ(max_diff(got, (*plain)(x)), 0.0);
    engine(x);  // records a, c
    const int64_t before = engine.stats().prefetches_issued;
    engine(x);
    EXPECT_EQ(engine.stats().prefetches_issued, before + 1) << "c, at a's call";
    EXPECT_EQ(engine.stats().inference_trace_invalidations, 1);
    EXPECT_EQ(gathered(*m), std::vector<std::string>{});
  });
}

// Inference that calls submodules directly (an app's model->encode()): passes start at a
// top-level call of the module the trace starts with.
TEST(Lesson26InferencePrefetch, PassesOfSubmoduleCallsArePrefetchedToo) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Branchy> m = lesson::partitioned<Branchy>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    Tensor x = full({2, 6}, 0.5);
    autograd::NoGradGuard no_grad;
    const Tensor first = m->encode(x);
    engine.set_event_log(true);
    const Tensor second = m->encode(x);
    const Tensor third = m->encode(x);
    EXPECT_EQ(lesson::count_of(engine.events(), "prefetch:b"), 2);
    EXPECT_EQ(lesson::count_of(engine.events(), "gather:b"), 0);
    EXPECT_EQ(max_diff(first, second), 0.0);
    EXPECT_EQ(max_diff(first, third), 0.0);
    EXPECT_EQ(engine.stats().inference_trace_invalidations, 0);
    EXPECT_EQ(gathered(*m), std::vector<std::string>{});
  });
}

// The live bound holds in inference as in training: with room for two modules'
// parameters, each call prefetches only the next.
TEST(Lesson26InferencePrefetch, TheLiveBoundHolds) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::TanhStack> m = lesson::partitioned<lesson::TanhStack>(comm, 6, 8);
    zero::Config cfg = lesson::prefetch_config();
    int64_t layer = 0;
    for (auto& [n, p] : m->layers[0]->named_parameters())
      layer += zero::zero_param(p)->part.padded_numel();
    cfg.stage3_max_live_parameters = 2 * layer;
    zero::Engine engine(m, comm, cfg, {});
    Tensor x = full({2, 8}, 0.25);
    autograd::NoGradGuard no_grad;
    engine(x);
    const int64_t before = engine.stats().prefetches_issued;
    reset_peak_memory();
    engine(x);
    EXPECT_EQ(engine.stats().prefetches_issued - before, 5) << "every layer but the first";
    // At most the bound and the module being fetched (lesson 18).
    EXPECT_LE(engine.memory_report().gathered_param_peak,
              (2 + 1) * layer * static_cast<int64_t>(sizeof(float)));
  });
}

// An inference pass has no step at which the ranks compare the modules they ran, so each of
// its gathers names its module in the collective's signature: where one rank runs c and the
// others b (the same size: the collectives would pair up, and each would compute with the
// other module's shards), every rank fails at that gather, naming both.
TEST(Lesson26InferencePrefetch, RanksRunningDifferentModulesFailAtTheGather) {
  const std::string err = test::error_of([] {
    comm::run_threads(2, [](comm::Communicator& comm) {
      std::shared_ptr<Branchy> m = lesson::partitioned<Branchy>(comm);
      zero::Engine engine(m, comm, lesson::prefetch_config(), {});
      m->use_c = comm.rank() == 1;
      autograd::NoGradGuard no_grad;
      engine(ones({2, 6}));
    });
  });
  EXPECT_NE(err.find("mismatched collectives"), std::string::npos) << err;
  EXPECT_NE(err.find("called all_gather (f32 x 42) [module 'b']"), std::string::npos) << err;
  EXPECT_NE(err.find("called all_gather (f32 x 42) [module 'c']"), std::string::npos) << err;
}

// A prefetch names its module too. Both ranks record a, b, d, then rank 1 runs c instead of
// b: with a window of one module, rank 0's fetch of b prefetches d while rank 1 gathers c.
// Those two collectives pair up (the same size), and the error names both modules.
TEST(Lesson26InferencePrefetch, APrefetchNamesItsModuleWhenTheRanksPartWays) {
  class Forked : public Branchy {
   public:
    Forked() { d = register_module("d", std::make_shared<nn::Linear>(6, 6)); }
    std::shared_ptr<nn::Linear> d;

   protected:
    Tensor forward(const Tensor& x) override { return (*d)(Branchy::forward(x)); }
  };
  const std::string err = test::error_of([] {
    comm::run_threads(2, [](comm::Communicator& comm) {
      std::shared_ptr<Forked> m = lesson::partitioned<Forked>(comm);
      zero::Config cfg = lesson::prefetch_config();
      cfg.stage3_prefetch_bucket_size = 42;  // one Linear(6, 6): the next module only
      zero::Engine engine(m, comm, cfg, {});
      autograd::NoGradGuard no_grad;
      engine(ones({2, 6}));  // recorded: a, b, d
      m->use_c = comm.rank() == 1;
      engine(ones({2, 6}));
    });
  });
  EXPECT_NE(err.find("called all_gather (f32 x 42) [module 'd']"), std::string::npos) << err;
  EXPECT_NE(err.find("called all_gather (f32 x 42) [module 'c']"), std::string::npos) << err;
}
