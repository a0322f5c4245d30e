// Lesson 5 — backward boundaries.
// Invariant: a module's parameters are gathered again before its backward runs and
// released after it. The engine wraps each module's outputs in an identity autograd
// function whose backward fires first (pre-backward: gather) and its inputs in one whose
// backward fires last (post-backward: release). Modules whose inputs need no gradient
// (the first layer) are released when backward ends.
//
// The engine's event log (Engine::set_event_log, used from here on) names what happens,
// module by module: "fetch:m" (forward needs m's parameters, which may be gathered
// already), "gather:m" (an all-gather was issued for it on demand), "prefetch:m" (issued
// ahead of need, lesson 7), "forward_end:m", "fetch_backward:m" (its backward needs them),
// "release:m" (its call or its backward ended and it was not kept for reuse: logged even
// when nothing was releasable, e.g. persistent parameters; a module kept for reuse,
// lesson 18, logs none, and neither does the end-of-backward sweep; an inference pass
// logs it too for the idle prefetches it frees when it leaves its trace, lesson 26).
#include "zero/checkpoint.h"
#include "zero/lesson_util.h"

using namespace zt;
using lesson::index_of;

TEST(Lesson05BackwardBoundaries, RegatheredForBackwardReleasedAfter) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    engine.set_event_log(true);
    auto [x, y] = lesson::batch(2, comm.rank());
    Tensor loss = mse_loss(engine(x), y);
    size_t fwd_end = engine.events().size();
    for (auto& [n, p] : m->named_parameters())
      EXPECT_FALSE(p.has_storage()) << n << " released after forward";
    engine.backward(loss);
    const auto& ev = engine.events();
    // Backward visits modules in reverse: head first, conv3 last.
    size_t head = index_of(ev, "fetch_backward:head", fwd_end);
    size_t conv2 = index_of(ev, "fetch_backward:conv2", fwd_end);
    ASSERT_NE(head, std::string::npos);
    ASSERT_NE(conv2, std::string::npos);
    EXPECT_LT(head, conv2);
    // The head is released (post-backward) before conv2 is gathered for its backward.
    size_t head_release = index_of(ev, "release:head", head);
    EXPECT_LT(head_release, conv2);
    // conv3, the first layer, is gathered for backward last.
    size_t conv3 = index_of(ev, "fetch_backward:conv3", fwd_end);
    ASSERT_NE(conv3, std::string::npos);
    EXPECT_GT(conv3, conv2);
    EXPECT_EQ(lesson::modules_of(ev, "fetch_backward:").back(), "conv3");
    // Everything is released once backward is over, conv3 included. Its input (the batch)
    // needs no gradient, so no post-backward hook released it: the end-of-backward sweep
    // did (it logs no event).
    for (auto& [n, p] : m->named_parameters())
      EXPECT_FALSE(p.has_storage()) << n << " released after backward";
    EXPECT_EQ(index_of(ev, "release:conv3", conv3), std::string::npos)
        << "no post-backward release: conv3's input needs no grad; the end-of-backward sweep "
           "freed it";
  });
}

// The hooks belong to the engine, not to the model: an engine going away takes them with
// it (the modules' forward hooks and the parameters' gradient hooks), so a second engine
// can take over the same model (an evaluation engine, a resumed run) without the first
// one's hooks firing too.
TEST(Lesson05BackwardBoundaries, AModelOutlivesItsEngine) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    auto module_hooks = [&m] {  // hooks on every module of the model
      size_t n = 0;
      for (auto& [path, mod] : m->named_modules()) n += mod->hook_count();
      return n;
    };
    const size_t before = module_hooks();
    for (int round = 0; round < 2; ++round) {  // a second engine takes over the same model
      {
        zero::Engine engine(m, comm, lesson::eager_release_config(), {});
        EXPECT_GT(module_hooks(), before) << "the engine hooks every module";
        auto [x, y] = lesson::batch(2, comm.rank());
        engine.backward(mse_loss(engine(x), y));
        EXPECT_TRUE(engine.step());
      }
      // (Checked before the next engine runs: a hook left behind would call into the
      // engine that is gone.)
      ASSERT_EQ(module_hooks(), before) << "no module hook left behind";
      for (auto& [n, p] : m->named_parameters())
        ASSERT_TRUE(p.impl()->post_accumulate_hooks.empty()) << n << ": no gradient hook left";
    }
  });
}

// A module whose parameters all persist (stage3_param_persistence_threshold) stays gathered
// through backward: it gets neither function, so its backward logs no fetch; the step
// trains the weights as a run where nothing persists does.
TEST(Lesson05BackwardBoundaries, AModuleWhoseParametersPersistIsNotWrapped) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    NamedTensors trained[2];
    for (int persist : {0, 1}) {
      manual_seed(5);  // the same initial weights each time
      std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
      zero::Config cfg = lesson::eager_release_config();
      // The GroupNorm's weight and bias persist; every other module holds a larger one.
      cfg.stage3_param_persistence_threshold = persist ? m->gn->weight.numel() : 0;
      zero::Engine engine(m, comm, cfg, {});
      engine.set_event_log(true);
      auto [x, y] = lesson::batch(2, comm.rank());
      Tensor loss = mse_loss(engine(x), y);
      const size_t fwd_end = engine.events().size();
      engine.backward(loss);
      const auto& ev = engine.events();
      EXPECT_EQ(index_of(ev, "fetch_backward:gn", fwd_end) == std::string::npos, persist == 1);
      EXPECT_NE(index_of(ev, "fetch_backward:head", fwd_end), std::string::npos);
      EXPECT_TRUE(engine.step());
      trained[persist] = zero::consolidated_state(engine);
    }
    ASSERT_EQ(trained[0].size(), trained[1].size());
    for (size_t i = 0; i < trained[0].size(); ++i)
      EXPECT_EQ(trained[1][i].second.to_vector(), trained[0][i].second.to_vector())
          << trained[0][i].first;
  });
}

namespace {
// A module that calls itself once: h = tanh(W x); h = self(h) on the outer call; then
// tanh(W h). The inner call ends (its post-forward, and in backward its post-backward)
// while the outer one still needs W.
class SelfCalling : public nn::UnaryModule {
 public:
  SelfCalling() : nn::UnaryModule("SelfCalling") {
    weight = register_parameter("weight", randn({6, 6}, DType::f32) * 0.5);
  }
  Tensor weight;

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = tanh(linear(x, weight));
    if (!inner_) {
      inner_ = true;
      h = (*this)(h);
      inner_ = false;
    }
    return tanh(linear(h, weight));
  }

 private:
  bool inner_ = false;
};
}  // namespace

// The engine counts the calls under way: a module's parameters are released when its
// outermost call ends, in forward and in backward, and the step trains as a plain model.
TEST(Lesson05BackwardBoundaries, AModuleThatCallsItselfKeepsItsParametersUntilItsOuterCallEnds) {
  manual_seed(9);
  const Tensor x = randn({4, 6}), y = randn({4, 6});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    std::shared_ptr<SelfCalling> m = lesson::partitioned<SelfCalling>(comm);
    zero::OptimizerConfig sgd;
    sgd.type = "sgd";
    sgd.lr = 0.1;
    sgd.momentum = 0;
    sgd.weight_decay = 0;
    zero::Engine engine(m, comm, lesson::eager_release_config(), sgd);
    // The same model unpartitioned, from the same weights, on the whole batch.
    SelfCalling plain;
    {
      autograd::NoGradGuard ng;
      plain.weight.copy_(lesson::full_parameters(*m, comm).at(0).second);
    }
    mse_loss(plain(x), y).backward();
    const Tensor expect = plain.weight.detach() - plain.weight.grad() * 0.1;

    engine.backward(mse_loss(engine(lesson::rank_slice(x, comm)), lesson::rank_slice(y, comm)));
    EXPECT_FALSE(m->weight.has_storage()) << "released when backward ended";
    ASSERT_TRUE(engine.step());
    EXPECT_TRUE(
        test::all_close(lesson::full_parameters(*m, comm).at(0).second, expect, 1e-5, 1e-6));
  });
}
