// A graph recorded through a zero::Engine can outlive it: a loss kept past the engine's
// scope, or one made by the engine a second engine on the same model replaces. Its backward
// would gather and reduce through the dead engine's parts; instead it is an error that says
// which engine ran the forward, and nothing of the model or the new engine is touched.
#include <string>

#include "zero/lesson_util.h"

using namespace zt;

namespace {

// Two Linear(8, 8) layers in a row, partitioned (the threshold below keeps nothing
// gathered), so each call's outputs carry the engine's backward hooks.
struct Pair : nn::UnaryModule {
  Pair() : nn::UnaryModule("Pair") {
    a = register_module("a", std::make_shared<nn::Linear>(8, 8));
    b = register_module("b", std::make_shared<nn::Linear>(8, 8));
  }
  Tensor forward(const Tensor& x) override { return (*b)(tanh((*a)(x))); }
  std::shared_ptr<nn::Linear> a, b;
};

zero::Config partitioned() {
  zero::Config c;
  c.stage3_param_persistence_threshold = 0;
  return c;
}

zero::OptimizerConfig adamw() {
  zero::OptimizerConfig o;
  o.lr = 1e-2;
  return o;
}

const char* const kGone = "ran through a zero::Engine that has been destroyed";

}  // namespace

TEST(EngineLifetime, ABackwardAfterItsEngineIsGoneIsAnError) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    Tensor loss;
    {
      zero::Engine e(m, comm, partitioned(), adamw());
      manual_seed(1);
      loss = mean(e(randn({3, 8})));
    }
    EXPECT_TRUE(test::throws_with([&] { loss.backward(); }, kGone));
  });
}

// The graph of the first engine reaches the second engine's backward: refused there, and
// the second engine trains on afterwards as if it had never seen it (on one rank: with more,
// a failed backward also aborts the communicator, as any failed backward does).
TEST(EngineLifetime, AnOldEnginesGraphIsRefusedByTheNextEngine) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>();
    Tensor old_loss;
    {
      zero::Engine first(m, comm, partitioned(), adamw());
      manual_seed(1);
      old_loss = mean(first(randn({3, 8})));
    }
    zero::Engine second(m, comm, partitioned(), adamw());
    EXPECT_TRUE(test::throws_with([&] { second.backward(old_loss); }, kGone));
    second.discard_gradients();
    manual_seed(2);
    second.backward(mean(second(randn({3, 8}))));
    EXPECT_TRUE(second.step());
  });
}
