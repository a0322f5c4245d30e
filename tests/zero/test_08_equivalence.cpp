// Lesson 8 — equivalence.
// Invariant: ZeRO-3 changes where state lives, not what is computed. Training the Mixed
// model (Linear, Conv2d, Conv3d, GroupNorm, LayerNorm, attention) for 5 steps on N = 1..4
// thread ranks — the global batch split across ranks — gives the parameters of plain
// single-process training on the whole batch, to 1e-5 relative in f32; also with
// gradient accumulation, with gradient clipping active, with weight decay left off the
// biases and norm scales, and with a parameter group of its own learning rate.
//
// AdamW alone would hide a wrong gradient scale (its update does not change when every
// gradient is multiplied by a constant), so the SGD cases check the 1/N average of the
// reduce-scatter and the 1/gas factor of accumulation. A trainable replica (a LayerNorm
// in a zero::Replicated scope) trains to the same values too: its gradients are
// all-reduced (averaged) instead of reduce-scattered and count once in the global norm.
// A frozen replica is left alone: no gradient, no optimizer state, no reduction.
//
// The training loop is in lesson08_loop.cpp: train_single (one process, the whole batch)
// and train_zero_and_compare (ZeRO-3, each rank its slice). Read it next: the batch split,
// the loss that is not rescaled, step() once per micro-batch and the comparison of the
// full parameters are all there.
#include <tuple>

#include "zero/lesson_util.h"

using namespace zt;

namespace {
void check_equivalence(int N, const lesson::EquivalenceSetup& s) {
  SCOPED_TRACE(s.optimizer + ", N " + std::to_string(N) + ", gas " + std::to_string(s.gas) +
               ", clip " + std::to_string(s.clip) + (s.replicated_front ? ", replica" : "") +
               (s.decay_1d ? "" : ", no 1-d decay") + (s.param_groups ? ", param groups" : ""));
  auto expect = lesson::train_single(s);
  comm::run_threads(
      N, [&](comm::Communicator& comm) { lesson::train_zero_and_compare(comm, s, expect); });
}
}  // namespace

TEST(Lesson08Equivalence, PlainAdamW) {
  for (int N : {1, 2, 3, 4}) check_equivalence(N, {});
}

TEST(Lesson08Equivalence, WithGradientAccumulation) {
  check_equivalence(3, {.gas = 2});
}

TEST(Lesson08Equivalence, WithClipping) {
  check_equivalence(4, {.clip = 0.05});
}

// SGD's update is linear in the gradient: a sum instead of an average over ranks, or a
// missing 1/gas, moves every parameter by the wrong amount.
TEST(Lesson08Equivalence, PlainSgd) {
  for (int N : {1, 2, 3, 4}) check_equivalence(N, {.optimizer = "sgd"});
  check_equivalence(3, {.gas = 2, .optimizer = "sgd"});
  check_equivalence(4, {.clip = 0.05, .optimizer = "sgd"});
}

// Weight decay left off biases and norm scales (GPT-2-style): the optimizer sees flat
// shards, so the engine must decide by each parameter's full shape, as plain training does.
TEST(Lesson08Equivalence, WeightDecayLeavesVectorsOut) {
  check_equivalence(3, {.optimizer = "sgd", .decay_1d = false});
  check_equivalence(2, {.optimizer = "sgd", .replicated_front = true, .decay_1d = false});
}

// A parameter group (half the learning rate, no weight decay for conv2): the engine gives
// the flat shards the settings plain training gives the parameters.
TEST(Lesson08Equivalence, ParamGroups) {
  check_equivalence(3, {.optimizer = "sgd", .param_groups = true});
  check_equivalence(2, {.param_groups = true});
}

TEST(Lesson08Equivalence, TrainableReplica) {
  for (int N : {2, 3}) {
    check_equivalence(N, {.optimizer = "sgd", .replicated_front = true});
    check_equivalence(N, {.clip = 0.05, .optimizer = "sgd", .replicated_front = true});
  }
}

// The global norm (what clipping divides by) is the one plain training computes: the
// shards' squares summed over the ranks, and a trainable replica's once, though every rank
// holds all of its (averaged) gradient. The replica's share is small, so the clipped runs
// above would hide a norm without it to 1e-5: the norm itself is compared.
TEST(Lesson08Equivalence, TheGlobalNormCountsATrainableReplicaOnce) {
  // Tied, not a structured binding: clang 14 lets no lambda capture a binding.
  Tensor x, y;
  std::tie(x, y) = lesson::batch(12, 7);
  manual_seed(11);
  lesson::ReplicatedFront plain(nullptr);
  mse_loss(plain(x), y).backward();
  const double want = optim::clip_grad_norm(plain.parameters(), 1e9);
  for (int N : {2, 3}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(11);
      auto m = lesson::partitioned<lesson::ReplicatedFront>(comm, &comm);
      zero::Engine engine(m, comm, lesson::eager_release_config(), lesson::adamw());
      engine.backward(mse_loss(engine(lesson::rank_slice(x, comm)), lesson::rank_slice(y, comm)));
      engine.step();
      EXPECT_NEAR(engine.last_grad_norm(), want, 1e-6 * want) << N << " ranks";
    });
  }
}

// A zero_grad() between micro-steps (a PyTorch habit) drops nothing: the partitioned
// parameters' gradients are in the shards, and the engine keeps each trainable replica's
// window sum too, as DeepSpeed's engine owns its gradients.
TEST(Lesson08Equivalence, AZeroGradBetweenMicroStepsDropsNothing) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto build = [&] {
      manual_seed(11);
      zero::Init init(comm);
      return std::make_shared<lesson::ReplicatedFront>(&comm);
    };
    auto a = build(), b = build();
    zero::Config cfg = lesson::eager_release_config();
    cfg.gradient_accumulation_steps = 2;
    zero::Engine ea(a, comm, cfg, {}), eb(b, comm, cfg, {});
    for (int s = 0; s < 4; ++s) {
      auto [x, y] = lesson::batch(4, 10 * s + comm.rank());
      ea.backward(mse_loss(ea(x), y));
      ea.step();
      a->zero_grad();
      eb.backward(mse_loss(eb(x), y));
      eb.step();
    }
    const auto want = lesson::full_parameters(*b, comm), got = lesson::full_parameters(*a, comm);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << got[i].first;
  });
}

TEST(Lesson08Equivalence, FrozenReplicaIsLeftAlone) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    manual_seed(11);
    auto m = lesson::partitioned<lesson::ReplicatedFront>(comm, &comm);
    m->front->requires_grad_(false);
    const Tensor before = m->front->weight.detach().clone();
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    for (const auto& [name, t] : engine.optimizer().params())
      EXPECT_EQ(name.rfind("front.", 0), std::string::npos) << name << " is optimized";
    auto [x, y] = lesson::batch(4, comm.rank());
    engine.backward(mse_loss(engine(x), y));
    comm.reset_counters();
    EXPECT_TRUE(engine.step());
    EXPECT_EQ(comm.counters()[comm::Collective::kAllReduce].calls, 1)
        << "the global norm's only: a trainable replica adds one per gradient";
    EXPECT_FALSE(m->front->weight.grad().defined()) << "a frozen replica gets no gradient";
    EXPECT_CLOSE(m->front->weight, before, 0, 0) << "and is not updated";
  });
}
