// Lesson 7 — prefetching along the trace.
// Invariant: the first step records the order in which modules fetch parameters (the
// trace: forward order, then backward order). Later steps follow it and issue all-gathers
// ahead of need: at each fetch, for the upcoming groups in trace order that fit in
// `stage3_prefetch_bucket_size` elements (nearest first, and while the gathered elements
// stay under `stage3_max_live_parameters`, lesson 18). The window counts every upcoming
// group, gathered or not (DeepSpeed counts only what it actually prefetches, so it reaches
// further past persistent or kept parameters). A module
// arriving out of order invalidates the trace (the next step records again); ranks that
// ran different modules in a step get an error naming the first difference, before the
// update.
// Lesson 17 takes the trace apart as a plain data structure (the window, the reuse
// distance).
#include <algorithm>
#include <functional>
#include <string>

#include "zero/lesson_util.h"

using namespace zt;

namespace {
// Two same-shaped layers whose order can be swapped.
class Swappable : public nn::UnaryModule {
 public:
  Swappable() : nn::UnaryModule("Swappable") {
    a = register_module("a", std::make_shared<nn::Linear>(6, 6));
    b = register_module("b", std::make_shared<nn::Linear>(6, 6));
  }
  std::shared_ptr<nn::Linear> a, b;
  bool swap = false;

 protected:
  Tensor forward(const Tensor& x) override { return swap ? (*a)((*b)(x)) : (*b)((*a)(x)); }
};

void train_step(zero::Engine& engine, const Tensor& x, const Tensor& y) {
  engine.backward(mse_loss(engine(x), y));
  engine.step();
}

void train_step(zero::Engine& engine) {
  train_step(engine, ones({2, 6}), zeros({2, 6}));
}

// What rank 0's engine notes on stderr while `steps` trains a Swappable on two ranks, with
// a prefetch window.
std::string swappable_notes(
    const std::function<void(zero::Engine&, Swappable&, comm::Communicator&)>& steps) {
  ::testing::internal::CaptureStderr();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    std::shared_ptr<Swappable> m = lesson::partitioned<Swappable>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    steps(engine, *m, comm);
  });
  return ::testing::internal::GetCapturedStderr();
}
}  // namespace

TEST(Lesson07Prefetch, TraceIsModuleOrder) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    auto [x, y] = lesson::batch(2, 0);
    train_step(engine, x, y);
    ASSERT_EQ(engine.trace().state(), zero::Trace::State::kValid);
    // The trace holds module group ids: the modules that own partitioned parameters,
    // numbered in registration order (zero/coordinator.h).
    std::vector<std::string> groups;
    for (const auto& [path, module] : m->named_modules()) {
      const auto& params = module->local_parameters();
      if (std::any_of(params.begin(), params.end(),
                      [](const auto& p) { return zero::is_partitioned(p.second); }))
        groups.push_back(path);
    }
    std::vector<std::string> traced;
    for (int id : engine.trace().ids()) traced.push_back(groups.at(static_cast<size_t>(id)));
    // Forward order of the modules that own parameters, then backward in reverse. The
    // attention block owns no parameters itself: its projections do.
    const std::vector<std::string> expect_fwd = {
        "conv3",       "conv2",       "gn",          "embed",         "ln",
        "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "head"};
    std::vector<std::string> expect = expect_fwd;
    expect.insert(expect.end(), expect_fwd.rbegin(), expect_fwd.rend());
    EXPECT_EQ(traced, expect);
    // The next step fetches along it, and nothing arrives out of order.
    engine.set_event_log(true);
    train_step(engine, x, y);
    EXPECT_EQ(lesson::modules_of(engine.events(), "fetch:"), expect_fwd);
    EXPECT_EQ(engine.stats().trace_invalidations, 0);
  });
}

TEST(Lesson07Prefetch, NextGatherIssuedBeforeCurrentForwardEnds) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    // A window of exactly conv2's padded elements: at conv3's fetch only conv2 fits.
    zero::Config cfg = lesson::prefetch_config();
    cfg.stage3_prefetch_bucket_size = 0;
    for (auto& [n, p] : m->conv2->named_parameters())
      cfg.stage3_prefetch_bucket_size += zero::zero_param(p)->part.padded_numel();
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = lesson::batch(2, 0);
    train_step(engine, x, y);  // records the trace
    int64_t before = engine.stats().prefetches_issued;
    engine.set_event_log(true);
    train_step(engine, x, y);
    EXPECT_GT(engine.stats().prefetches_issued, before);
    const auto& ev = engine.events();
    auto pos = [&](const std::string& e) {
      const size_t at = lesson::index_of(ev, e);
      EXPECT_NE(at, std::string::npos) << "no event " << e;
      return at;
    };
    // conv2's parameters are in flight before conv3 (the module before it) finishes.
    EXPECT_LT(pos("prefetch:conv2"), pos("forward_end:conv3"));
    EXPECT_LT(pos("forward_end:conv3"), pos("fetch:conv2"));
    // gn, after conv2, did not fit in the window at conv3's fetch: it is prefetched at
    // conv2's, once conv3 is done.
    EXPECT_GT(pos("prefetch:gn"), pos("forward_end:conv3"));
  });
}

TEST(Lesson07Prefetch, OrderChangeInvalidatesTheTrace) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Swappable> m = lesson::partitioned<Swappable>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    Tensor x = ones({2, 6}), y = zeros({2, 6});
    train_step(engine, x, y);
    EXPECT_EQ(engine.trace().state(), zero::Trace::State::kValid);
    m->swap = true;
    train_step(engine, x, y);  // out of order: counted, then re-recorded
    EXPECT_EQ(engine.stats().trace_invalidations, 1);
    train_step(engine, x, y);  // records the new order
    EXPECT_EQ(engine.trace().state(), zero::Trace::State::kValid);
    train_step(engine, x, y);
    EXPECT_EQ(engine.stats().trace_invalidations, 1);
  });
}

TEST(Lesson07Prefetch, RanksRunningDifferentModulesIsAnError) {
  try {
    comm::run_threads(2, [](comm::Communicator& comm) {
      std::shared_ptr<Swappable> m = lesson::partitioned<Swappable>(comm);
      zero::Engine engine(m, comm, lesson::prefetch_config(), {});
      m->swap = comm.rank() == 1;  // same shapes, so the collectives still match
      train_step(engine, ones({2, 6}), zeros({2, 6}));
    });
    FAIL() << "expected the trace divergence error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("first difference at fetch #0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0 ran 'a'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1 ran 'b'"), std::string::npos) << msg;
  }
}

namespace {
// Two frozen same-shaped layers, one of which runs, then a trainable head.
class FrozenChoice : public nn::UnaryModule {
 public:
  FrozenChoice() : nn::UnaryModule("FrozenChoice") {
    a = register_module("a", std::make_shared<nn::Linear>(6, 6));
    b = register_module("b", std::make_shared<nn::Linear>(6, 6));
    head = register_module("head", std::make_shared<nn::Linear>(6, 6));
    a->requires_grad_(false);
    b->requires_grad_(false);
  }
  std::shared_ptr<nn::Linear> a, b, head;
  bool use_b = false;

 protected:
  Tensor forward(const Tensor& x) override { return (*head)(use_b ? (*b)(x) : (*a)(x)); }
};
}  // namespace

// The ranks compare the modules they fetched at every step, not only when recording: once
// the trace is valid, a rank that runs b where the others run a gathers b's slices while
// they gather a's, and with equal sizes and no gradient from either the collectives pair
// up and the gradients agree. The step is refused before it changes anything.
TEST(Lesson07Prefetch, RanksDivergingAfterTheTraceIsRecordedIsAnError) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<FrozenChoice> m = lesson::partitioned<FrozenChoice>(comm);
    zero::Engine engine(m, comm, lesson::eager_release_config(), lesson::adamw());
    Tensor x = ones({2, 6}), y = zeros({2, 6});
    train_step(engine, x, y);
    train_step(engine, x, y);
    ASSERT_EQ(engine.trace().state(), zero::Trace::State::kValid);
    const auto before = lesson::full_parameters(*m, comm);
    m->use_b = comm.rank() == 1;
    const std::string err = test::error_of([&] { train_step(engine, x, y); });
    EXPECT_NE(err.find("ranks ran different modules of this engine's FrozenChoice"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("rank 0 ran 'a'"), std::string::npos) << err;
    EXPECT_NE(err.find("rank 1 ran 'b'"), std::string::npos) << err;
    EXPECT_NE(err.find("on every rank, its output multiplied by 0"), std::string::npos) << err;
    const auto after = lesson::full_parameters(*m, comm);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i)
      EXPECT_EQ(after[i].second.to_vector(), before[i].second.to_vector()) << after[i].first;
  });
}

// A divergent step discards its recording (an invalidation); a later reorder is still
// reported, once, and counted with it.
TEST(Lesson07Prefetch, AReorderAfterADivergentStepIsReported) {
  const std::string err =
      swappable_notes([](zero::Engine& engine, Swappable& m, comm::Communicator& comm) {
        m.swap = comm.rank() == 1;
        EXPECT_TRUE(test::throws_with([&] { train_step(engine); }, "first difference"));
        EXPECT_EQ(engine.stats().trace_invalidations, 1);
        m.swap = false;
        train_step(engine);  // records
        train_step(engine);  // follows the trace
        EXPECT_EQ(engine.trace().state(), zero::Trace::State::kValid);
        m.swap = true;
        train_step(engine);  // out of order
        EXPECT_EQ(engine.stats().trace_invalidations, 2);
      });
  EXPECT_NE(err.find("module 'b' (of an engine's Swappable) fetched out of the recorded order"),
            std::string::npos)
      << err;
}

// A training step with the model left in eval mode after an evaluation: its forward is
// traced as an evaluation, so its backward fetches out of the training order, and the note
// names the likelier cause.
TEST(Lesson07Prefetch, ATrainingStepInEvalModeIsNamedInTheNote) {
  const std::string err =
      swappable_notes([](zero::Engine& engine, Swappable& m, comm::Communicator&) {
        train_step(engine);
        train_step(engine);
        m.eval();
        train_step(engine);
      });
  EXPECT_NE(err.find("fetched out of the recorded order"), std::string::npos) << err;
  EXPECT_NE(err.find("or the model is in eval mode in a training step (call model->train()"),
            std::string::npos)
      << err;
}

// Backward follows the trace too: while a module's backward runs, the all-gathers of the
// next modules' backward are already issued.
TEST(Lesson07Prefetch, BackwardPrefetchesToo) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Config cfg = lesson::eager_release_config();
    cfg.stage3_prefetch_bucket_size = 300;  // a few small modules ahead
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = lesson::batch(2, 0);
    train_step(engine, x, y);  // records the trace
    engine.set_event_log(true);
    train_step(engine, x, y);
    const std::vector<std::string>& ev = engine.events();
    size_t last_forward = 0;
    for (size_t i = 0; i < ev.size(); ++i)
      if (ev[i].rfind("forward_end:", 0) == 0) last_forward = i;
    ASSERT_GT(last_forward, 0u) << "no forward_end event: nothing tells forward from backward";
    const auto backward_prefetches =
        std::count_if(ev.begin() + static_cast<int64_t>(last_forward), ev.end(),
                      [](const std::string& e) { return e.rfind("prefetch:", 0) == 0; });
    EXPECT_GT(backward_prefetches, 0);
  });
}

// A window over the whole step, with every module released right after its use: a
// module's backward fetch comes after its forward release, and must be prefetched again.
// The prefetcher walks each entry of the window once and goes back only to entries a
// release emptied, so this checks that it does go back: in a traced step only two fetches
// gather for themselves, the step's first and the backward's first (the forward's last
// module, released and needed again at once); every other fetch was prefetched.
TEST(Lesson07Prefetch, AModuleReleasedAfterForwardIsPrefetchedForBackward) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    auto [x, y] = lesson::batch(2, 0);
    train_step(engine, x, y);  // records the trace
    engine.set_event_log(true);
    const int64_t before = engine.stats().prefetches_issued;
    train_step(engine, x, y);
    const std::vector<std::string>& ev = engine.events();
    std::vector<std::string> gathers;
    int64_t prefetches = 0, fetches = 0;
    for (const std::string& e : ev) {
      if (e.rfind("gather:", 0) == 0) gathers.push_back(e);
      prefetches += e.rfind("prefetch:", 0) == 0;
      fetches += e.rfind("fetch:", 0) == 0 || e.rfind("fetch_backward:", 0) == 0;
    }
    EXPECT_EQ(gathers, (std::vector<std::string>{"gather:conv3", "gather:head"}));
    EXPECT_EQ(prefetches, engine.stats().prefetches_issued - before);
    EXPECT_EQ(prefetches + 2, fetches) << "every other fetch was prefetched";
  });
}

// Evaluating between steps: a forward under no_grad neither records nor invalidates the
// trace. A forward with gradients on and no backward (an evaluation that forgot no_grad)
// breaks the recorded order once: the next step records again.
TEST(Lesson07Prefetch, AnEvaluationBetweenStepsKeepsTheTrace) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    auto [x, y] = lesson::batch(2, 0);
    train_step(engine, x, y);
    {
      autograd::NoGradGuard eval;
      engine(x);
    }
    train_step(engine, x, y);
    EXPECT_EQ(engine.stats().trace_invalidations, 0);
    EXPECT_EQ(engine.trace().state(), zero::Trace::State::kValid);
    engine(x);  // gradients on, never backpropagated
    train_step(engine, x, y);
    EXPECT_EQ(engine.stats().trace_invalidations, 1);
  });
}

// An evaluation that forgot its NoGradGuard: the model in eval mode runs an inference
// forward even with gradients on. It keeps nothing gathered for a reuse (with the
// defaults, a training forward keeps the whole model gathered until its backward, which
// here never comes) and leaves the trace alone.
TEST(Lesson07Prefetch, AnEvalModeForwardWithGradientsOnIsInference) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Config cfg;  // DeepSpeed's defaults: every module kept for its reuse
    cfg.stage3_param_persistence_threshold = 0;
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = lesson::batch(2, 0);
    train_step(engine, x, y);
    m->eval();
    engine(x);
    for (auto& [n, p] : m->named_parameters()) EXPECT_FALSE(p.has_storage()) << n;
    m->train();
    train_step(engine, x, y);
    train_step(engine, x, y);
    EXPECT_EQ(engine.stats().trace_invalidations, 0);
    EXPECT_EQ(engine.trace().state(), zero::Trace::State::kValid);
  });
}

// A forward with gradients on and no backward leaves the backward's prefetches in flight,
// posted with the shards of then. zero::load_state_dict (lesson 15) finishes them before it writes
// the shards, and overwrites their gathered copies too: the next forward computes with the loaded
// weights, never the gathered old ones.
TEST(Lesson07Prefetch, AStateDictLoadedOverAPrefetchInFlightIsTheOneUsed) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, lesson::prefetch_config(), {});
    auto [x, y] = lesson::batch(2, 0);
    train_step(engine, x, y);  // records the trace
    engine(x);                 // prefetches for a backward that never comes
    int64_t in_flight = 0;
    for (const auto& mp : engine.partitioned())
      in_flight += zero::zero_param(mp.param)->status == zero::ParamStatus::kInflight;
    EXPECT_GT(in_flight, 0) << "the case this lesson is about";
    std::vector<std::pair<std::string, Tensor>> loaded;
    for (const auto& [name, t] : nn::unique_state_dict(*m))
      loaded.emplace_back(name, full(t.sizes(), 0.25, t.dtype()));
    zero::load_state_dict(*m, loaded, comm);
    for (const auto& [name, t] : lesson::full_parameters(*m, comm))
      EXPECT_EQ(max(abs(add(t.to(DType::f32), -0.25))).item(), 0.0) << name;
    autograd::NoGradGuard eval;
    const Tensor got = engine(x);
    std::shared_ptr<lesson::Mixed> plain = std::make_shared<lesson::Mixed>();
    nn::load_state_dict(*plain, loaded);
    EXPECT_EQ(max(abs(sub(got, (*plain)(x)))).item(), 0.0);
  });
}
