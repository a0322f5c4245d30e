// Two models with an engine each, as a GAN trains them. The generator's loss runs through
// the discriminator, so the generator's engine.backward(loss) also sends gradients into
// the discriminator's shards, outside that engine's backward: its next backward refuses
// them, naming the parameter and the likely cause. discard_gradients() after each backward
// that is not its own drops them, and the two engines then train as two plain models with
// an optimizer each do (where zero_grad() clears the discriminator's stray gradients).
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "zero/lesson_util.h"

using namespace zt;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 8;

std::shared_ptr<nn::Linear> generator() {
  return std::make_shared<nn::Linear>(2, 3);
}
std::shared_ptr<nn::Linear> discriminator() {
  return std::make_shared<nn::Linear>(3, 1);
}

// Noise and real samples of one step.
std::pair<Tensor, Tensor> gan_batch(int step) {
  Generator g(500 + static_cast<uint64_t>(step));
  Tensor z = randn({kBatch, 2}, g);
  Tensor real = add(randn({kBatch, 3}, g), 1.0);
  return {z, real};
}

// The discriminator scores real samples 1 and generated ones 0; the generator wants 1.
Tensor d_loss(nn::Module& d, const Tensor& real, const Tensor& fake) {
  const Tensor r = d(real), f = d(fake.detach());
  return add(mse_loss(r, ones_like(r)), mse_loss(f, zeros_like(f)));
}
Tensor g_loss(nn::Module& d, const Tensor& fake) {
  const Tensor f = d(fake);
  return mse_loss(f, ones_like(f));
}

zero::Config partitioned_config() {
  zero::Config cfg;
  cfg.stage3_param_persistence_threshold = 0;  // every parameter partitioned
  return cfg;
}

}  // namespace

TEST(TwoEngines, AGeneratorsBackwardThroughTheDiscriminatorIsNamedAtItsNextBackward) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto md = lesson::partitioned<nn::Linear>(comm, 3, 1);
    zero::Engine g(lesson::partitioned<nn::Linear>(comm, 2, 3), comm, partitioned_config(),
                   lesson::adamw());
    zero::Engine d(md, comm, partitioned_config(), lesson::adamw());
    // Tied, not a structured binding: clang 14 lets no lambda capture a binding.
    Tensor z, real;
    std::tie(z, real) = gan_batch(0);
    z = lesson::rank_slice(z, comm);
    real = lesson::rank_slice(real, comm);
    g.backward(g_loss(*md, g(z)));
    g.step();
    EXPECT_TRUE(test::throws_with([&] { d.backward(d_loss(*md, real, g(z))); },
                                  "another engine's backward through this model"));
    // The message names the parameter's model by type: which of the two engines refused.
    EXPECT_TRUE(test::throws_with([&] { d.backward(d_loss(*md, real, g(z))); },
                                  "a gradient reached 'bias' (of this engine's Linear)"));
  });
}

TEST(TwoEngines, DiscardingTheOtherEnginesGradientsTrainsAsTwoPlainModels) {
  manual_seed(3);
  auto pg = generator();
  auto pd = discriminator();
  auto opt_g = optim::make_optimizer(lesson::adamw(), pg->named_parameters());
  auto opt_d = optim::make_optimizer(lesson::adamw(), pd->named_parameters());
  for (int step = 0; step < kSteps; ++step) {
    auto [z, real] = gan_batch(step);
    pd->zero_grad();
    d_loss(*pd, real, (*pg)(z)).backward();
    opt_d->step();
    pg->zero_grad();
    g_loss(*pd, (*pg)(z)).backward();
    opt_g->step();
  }
  for (int N : {1, 2}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(3);
      std::shared_ptr<nn::Linear> mg, md;
      {
        zero::Init init(comm);
        mg = generator();
        md = discriminator();
      }
      zero::Engine g(mg, comm, partitioned_config(), lesson::adamw());
      zero::Engine d(md, comm, partitioned_config(), lesson::adamw());
      for (int step = 0; step < kSteps; ++step) {
        auto [z, real] = gan_batch(step);
        z = lesson::rank_slice(z, comm);
        real = lesson::rank_slice(real, comm);
        d.backward(d_loss(*md, real, g(z)));
        d.step();
        g.backward(g_loss(*md, g(z)));
        d.discard_gradients();  // what the generator's backward left in d's shards
        g.step();
      }
      for (auto& [mine, plain] : {std::pair{mg, pg}, {md, pd}}) {
        const auto got = lesson::full_parameters(*mine, comm);
        const auto want = plain->named_parameters();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(test::all_close(got[i].second, want[i].second, 1e-5, 1e-6))
              << got[i].first << " at " << N << " ranks";
      }
    });
  }
}
