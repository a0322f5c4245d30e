// Mistakes a program embedding zero::Engine makes, each refused with an error that says what
// is wrong and what to do, where the engine would otherwise train something else silently:
// tied weights, a second engine on one model, a step without a backward, and freezing or
// unfreezing a parameter after the engine was built. Also: backward twice through one graph
// with retain_graph, as in PyTorch.
#include "zero/lesson_util.h"

using namespace zt;

namespace {

// Two Linear(4, 4) layers in a row; with `tie`, the second reuses the first's weight.
struct Pair : nn::UnaryModule {
  explicit Pair(bool tie) : nn::UnaryModule("Pair") {
    a = register_module("a", std::make_shared<nn::Linear>(4, 4));
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
    if (tie) {
      b->weight = a->weight;
      b->replace_tensor("weight", a->weight);
    }
  }
  Tensor forward(const Tensor& x) override { return (*b)(tanh((*a)(x))); }
  std::shared_ptr<nn::Linear> a, b;
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

TEST(EngineMisuse, TiedWeightsAreRefusedNamingBothPlaces) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    EXPECT_TRUE(
        test::throws_with([&] { zero::Engine e(std::make_shared<Pair>(true), comm, {}, adamw()); },
                          "zero::Engine: 'a.weight' and 'b.weight' are one tensor (tied weights)"));
    // Under zero::Init the second registration is refused at once.
    EXPECT_TRUE(test::throws_with(
        [&] {
          zero::Init init(comm);
          nn::Sequential s;
          auto first = std::make_shared<nn::Linear>(4, 4);
          s.push_back(first);
          s.register_parameter("again", first->weight);
        },
        "zero::Init: Sequential.again is a tensor already registered (tied weights)"));
  });
}

TEST(EngineMisuse, ASecondEngineOnOneModelIsRefusedWhileTheFirstLives) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>(false);
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

// An engine whose construction fails after it took the parameters (here its optimizer type
// is unknown) leaves the model free: the next engine builds.
TEST(EngineMisuse, AFailedConstructionLeavesTheModelFreeForTheNext) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>(false);
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
    zero::Engine e(std::make_shared<Pair>(false), comm, {}, adamw());
    EXPECT_TRUE(test::throws_with([&] { e.step(); }, "no backward() since the last step()"));
    e.backward(loss_of(e, 1));
    EXPECT_TRUE(e.step());
    EXPECT_TRUE(test::throws_with([&] { e.step(); }, "call engine.backward(loss) first"));
  });
}

TEST(EngineMisuse, FreezingOrUnfreezingAfterTheEngineIsBuiltIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>(false);
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

// Two backward passes through one graph (two losses sharing a forward) need retain_graph
// on the first, as in PyTorch; the gradients add up.
TEST(EngineMisuse, RetainGraphAllowsASecondBackward) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = std::make_shared<Pair>(false);
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
