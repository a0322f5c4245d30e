// A graph recorded before an optimizer step cannot be backpropagated after it: its saved
// activations belong to the old weights, and a backward would pair them with the new ones
// (a discriminator's graph kept with retain_graph across its step, in a GAN, is the classic
// case). A plain model refuses it, since the step writes the saved weights in place. Under
// ZeRO-3 a gathered weight is a new copy each time, so the engine checks the parameters'
// shards instead: the backward is refused, naming the module, whether the weights were
// released after the forward or stayed gathered (persistent). (At one rank a gathered weight
// is its shard: where the engine has no check of its own, autograd's names the parameter.)
#include <string>

#include "zero/lesson_util.h"

using namespace zt;
using lesson::Pair;

namespace {

Tensor loss_of(nn::Module& m, comm::Communicator* comm, int seed) {
  Generator g(seed);
  Tensor x = randn({6, 4}, g), y = randn({6, 4}, g);
  if (comm) {
    x = lesson::rank_slice(x, *comm);
    y = lesson::rank_slice(y, *comm);
  }
  return mse_loss(m(x), y);
}

}  // namespace

TEST(GraphAfterStep, APlainModelRefusesIt) {
  manual_seed(1);
  auto m = std::make_shared<Pair>();
  auto opt = optim::make_optimizer(lesson::adamw(), m->named_parameters());
  const Tensor loss = loss_of(*m, nullptr, 1);
  loss.backward(Tensor(), /*retain_graph=*/true);
  opt->step();
  EXPECT_TRUE(
      test::throws_with([&] { loss.backward(); }, "was written in place since the forward"));
}

TEST(GraphAfterStep, TheEngineRefusesItWhetherTheWeightsWereReleasedOrPersist) {
  for (bool persist : {false, true})
    for (int N : {1, 2, 3}) {
      SCOPED_TRACE(std::string(persist ? "persistent" : "released") + " on " + std::to_string(N));
      comm::run_threads(N, [&](comm::Communicator& comm) {
        manual_seed(1);
        auto m = lesson::partitioned<Pair>(comm);
        zero::Config cfg = persist ? zero::Config{} : lesson::eager_release_config();
        zero::Engine e(m, comm, cfg, lesson::adamw());
        const Tensor loss = loss_of(e.module(), &comm, 1);
        e.backward(loss, /*retain_graph=*/true);
        ASSERT_TRUE(e.step());
        const std::string why = test::error_of([&] { e.backward(loss); });
        // At one rank the gathered weight is the shard itself, which the step wrote in place.
        EXPECT_TRUE(why.find("'b'") != std::string::npos ||
                    why.find("was written in place since the forward") != std::string::npos)
            << why;
        if (N > 1) {
          EXPECT_NE(why.find("backward through a call of module 'b' made before an optimizer "
                             "step, a load or an edit changed its parameters"),
                    std::string::npos)
              << why;
        }
      });
    }
}

// The GAN form of it: the discriminator's scores of the generated samples serve both losses,
// and the generator's backward runs after the discriminator's step. (A plain pair of models
// refuses it too.) With the default settings the discriminator's parameters all persist.
TEST(GraphAfterStep, AGeneratorsBackwardThroughTheDiscriminatorsOldGraphIsRefused) {
  for (int N : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(N) + " ranks");
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(2);
      auto mg = lesson::partitioned<nn::Linear>(comm, 2, 3);
      auto md = lesson::partitioned<nn::Linear>(comm, 3, 1);
      zero::Engine g(mg, comm, {}, lesson::adamw());
      zero::Engine d(md, comm, {}, lesson::adamw());
      Generator gen(7);
      const Tensor z = lesson::rank_slice(randn({6, 2}, gen), comm);
      const Tensor scores = d(g(z));
      d.backward(mse_loss(scores, zeros_like(scores)), /*retain_graph=*/true);
      ASSERT_TRUE(d.step());
      g.discard_gradients();  // what the discriminator's backward left in g's shards
      const std::string why =
          test::error_of([&] { g.backward(mse_loss(scores, ones_like(scores))); });
      EXPECT_TRUE(
          why.find("backward through a call of module '<root>' made before an optimizer "
                   "step") != std::string::npos ||
          (N == 1 && why.find("was written in place since the forward") != std::string::npos))
          << why;
    });
  }
}

// Within a step the weights do not change: a second backward through the graph is the
// gradient twice (retain_graph, as in PyTorch). Nor does an fp16 step skipped for an
// overflow change them: the graph still serves after it.
TEST(GraphAfterStep, ABackwardWhileTheWeightsAreUnchangedStillRuns) {
  for (int N : {1, 2}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(1);
      auto m = lesson::partitioned<Pair>(comm);
      zero::Engine e(m, comm, lesson::eager_release_config(), lesson::adamw());
      const Tensor loss = loss_of(e.module(), &comm, 1);
      e.backward(loss, /*retain_graph=*/true);
      e.backward(loss);
      EXPECT_TRUE(e.step());
    });
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(1);
      auto m = lesson::partitioned<Pair>(comm);
      zero::Config cfg = lesson::eager_release_config();
      cfg.precision.fp16 = true;
      cfg.precision.initial_scale_power = 40;  // the first step overflows
      cfg.quiet = true;
      zero::Engine e(m, comm, cfg, lesson::adamw());
      Generator g(1);
      const Tensor x = lesson::rank_slice(randn({6, 4}, g), comm).to(DType::f16);
      const Tensor loss = mean(e(x).to(DType::f32));
      e.backward(loss, /*retain_graph=*/true);
      ASSERT_FALSE(e.step()) << "skipped for the overflow";
      EXPECT_EQ(test::error_of([&] { e.backward(loss); }), "");
    });
  }
}
