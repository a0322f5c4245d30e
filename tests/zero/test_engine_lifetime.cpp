// A graph recorded through a zero::Engine can outlive it: a loss kept past the engine's
// scope, or one made by the engine a second engine on the same model replaces. Its backward
// would gather and reduce through the dead engine's parts; instead it is an error that says
// which engine ran the forward, and nothing of the model or the new engine is touched.
// A gradient the old engine never took (a layer unfrozen after it was built) does not reach
// the next engine's first step either.
#include <memory>
#include <string>

#include "zero/lesson_util.h"

using namespace zt;

namespace {

const char* const kGone = "ran through a zero::Engine that has been destroyed";

// A loss made through an engine on `m` that is gone when it returns. Nothing is kept
// gathered, so the outputs carry the engine's backward hooks.
Tensor loss_of_a_gone_engine(const std::shared_ptr<lesson::TanhStack>& m,
                             comm::Communicator& comm) {
  zero::Engine e(m, comm, lesson::eager_release_config(), lesson::adamw());
  manual_seed(1);
  return mean(e(randn({3, 8})));
}

}  // namespace

TEST(EngineLifetime, ABackwardAfterItsEngineIsGoneIsAnError) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const Tensor loss = loss_of_a_gone_engine(std::make_shared<lesson::TanhStack>(2, 8), comm);
    EXPECT_TRUE(test::throws_with([&] { loss.backward(); }, kGone));
  });
}

// The graph of the first engine reaches the second engine's backward: refused there, and
// the second engine trains on afterwards as if it had never seen it (on one rank: with more,
// a failed backward also aborts the communicator, as any failed backward does).
TEST(EngineLifetime, AnOldEnginesGraphIsRefusedByTheNextEngine) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    auto m = std::make_shared<lesson::TanhStack>(2, 8);
    const Tensor old_loss = loss_of_a_gone_engine(m, comm);
    zero::Engine second(m, comm, lesson::eager_release_config(), lesson::adamw());
    EXPECT_TRUE(test::throws_with([&] { second.backward(old_loss); }, kGone));
    second.discard_gradients();
    manual_seed(2);
    second.backward(mean(second(randn({3, 8}))));
    EXPECT_TRUE(second.step());
  });
}

// A freezing schedule's next phase: a layer frozen when the engine was built is unfrozen,
// the step after a backward refuses it, and the engine built for the new phase trains from
// its own gradients, as if the refused step's backward had never run (it left the layer's
// whole gradient in its .grad(), which the old engine's discard_gradients() drops). A
// gradient still there when an engine is built is an error that says where it came from.
TEST(EngineLifetime, AnUnfrozenLayersGradientFromARefusedStepStaysOutOfTheNextEngine) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto loss = [&](zero::Engine& e, int seed) {
      manual_seed(static_cast<uint64_t>(seed));
      return mean(e(lesson::rank_slice(randn({4, 8}), comm)));
    };
    auto run = [&](bool refused_step, bool discard) {
      manual_seed(3);
      auto m = lesson::partitioned<lesson::TanhStack>(comm, 2, 8);
      m->layers[1]->requires_grad_(false);
      auto e =
          std::make_unique<zero::Engine>(m, comm, lesson::eager_release_config(), lesson::adamw());
      e->backward(loss(*e, 1));
      EXPECT_TRUE(e->step());
      m->layers[1]->requires_grad_(true);
      if (refused_step) {
        e->backward(loss(*e, 2));
        EXPECT_TRUE(test::throws_with([&] { e->step(); },
                                      "'l1.weight' was frozen when the engine was built"));
        if (discard) e->discard_gradients();
      }
      e.reset();
      if (refused_step && !discard) {
        EXPECT_TRUE(test::throws_with(
            [&] { zero::Engine(m, comm, lesson::eager_release_config(), lesson::adamw()); },
            "parameter 'l1.weight' already holds a gradient"));
        m->zero_grad();
      }
      zero::Engine next(m, comm, lesson::eager_release_config(), lesson::adamw());
      next.backward(loss(next, 3));
      EXPECT_TRUE(next.step());
      return lesson::full_parameters(*m, comm);
    };
    const auto want = run(false, false);
    for (bool discard : {true, false}) {
      const auto got = run(true, discard);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(test::all_close(got[i].second, want[i].second, 0, 0))
            << got[i].first << (discard ? " after discard_gradients()" : " after zero_grad()");
    }
  });
}
