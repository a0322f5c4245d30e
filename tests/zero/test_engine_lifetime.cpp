// A graph recorded through a zero::Engine can outlive it: a loss kept past the engine's
// scope, or one made by the engine a second engine on the same model replaces. Its backward
// would gather and reduce through the dead engine's parts; instead it is an error that says
// which engine ran the forward, and nothing of the model or the new engine is touched.
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
