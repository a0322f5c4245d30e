// Lesson 23 — activation checkpointing under ZeRO-3.
// Invariant: a checkpointed module (Module::set_checkpointing) keeps only its inputs from
// forward to backward and recomputes its forward when its gradients arrive, with its
// parameters gathered again for the recomputation by the same hooks as any forward.
// Training is bit for bit the same as without checkpointing (dropout draws the same
// masks); the activation peak is lower; the extra gathers are part of the recorded
// trace, so prefetching keeps working (no trace invalidation); and the engine's
// end-of-backward work runs once, after the last gradient, although the first gradients
// of the step arrive inside a recomputation.
//
// Run alone: ctest --test-dir build -R zero.Lesson23
#include "zero/lesson_util.h"

using namespace zt;

namespace {

constexpr int64_t kWidth = 32, kBlocks = 4, kBatch = 64;
constexpr int kSteps = 4;

// A transformer-style feed-forward block: x + W2 dropout(gelu(W1 LayerNorm(x))).
class Block : public nn::UnaryModule {
 public:
  Block() : nn::UnaryModule("Block") {
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({kWidth})));
    up = register_module("up", std::make_shared<nn::Linear>(kWidth, 4 * kWidth));
    down = register_module("down", std::make_shared<nn::Linear>(4 * kWidth, kWidth));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.1));
  }
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::Linear> up, down;
  std::shared_ptr<nn::Dropout> drop;

 protected:
  Tensor forward(const Tensor& x) override {
    return add(x, (*down)((*drop)(gelu((*up)((*ln)(x))))));
  }
};

class Net : public nn::UnaryModule {
 public:
  Net() : nn::UnaryModule("Net") {
    for (int64_t i = 0; i < kBlocks; ++i)
      blocks.push_back(register_module("b" + std::to_string(i), std::make_shared<Block>()));
    head = register_module("head", std::make_shared<nn::Linear>(kWidth, 1));
  }
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<nn::Linear> head;

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& b : blocks) h = (*b)(h);
    return (*head)(h);
  }
};

struct Outcome {
  std::vector<double> losses;
  std::vector<std::pair<std::string, Tensor>> params;
  zero::EngineStats stats;
  int64_t activation_peak = 0;
  int64_t reduced_bytes = 0;  // reduce-scatter traffic over the run
};

// One block applied twice: under checkpointing each call recomputes in its own backward,
// so its parameters' gradients reach the reducer twice a step.
class Twice : public nn::UnaryModule {
 public:
  Twice() : nn::UnaryModule("Twice") {
    block = register_module("block", std::make_shared<Block>());
    head = register_module("head", std::make_shared<nn::Linear>(kWidth, 1));
  }
  std::shared_ptr<Block> block;
  std::shared_ptr<nn::Linear> head;

 protected:
  Tensor forward(const Tensor& x) override { return (*head)((*block)((*block)(x))); }
};

// kSteps of AdamW on 2 thread ranks, each on its half of a seeded batch, for a model M
// built under zero::Init; `checkpoint` says which of its modules are checkpointed.
// Returns rank 0's outcome.
template <typename M>
Outcome train_model(const zero::Config& config, const std::function<void(M&)>& checkpoint) {
  Outcome out;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(3);
    std::shared_ptr<M> net = lesson::partitioned<M>(comm);
    checkpoint(*net);
    zero::OptimizerConfig adamw;
    adamw.lr = 1e-2;
    zero::Engine engine(net, comm, config, adamw);
    manual_seed(100 + comm.rank());  // each rank its own dropout masks
    comm.reset_counters();
    Outcome r;
    for (int s = 0; s < kSteps; ++s) {
      Generator g(s);
      Tensor x = lesson::rank_slice(randn({kBatch, kWidth}, g), comm);
      reset_peak_memory();
      Tensor y = engine(x);
      Tensor loss = mean(mul(y, y));
      engine.backward(loss);
      r.activation_peak = std::max(r.activation_peak, engine.memory_report().activation_peak);
      engine.step();
      r.losses.push_back(loss.item());
    }
    r.reduced_bytes = comm.counters()[comm::Collective::kReduceScatter].bytes;
    r.params = lesson::full_parameters(*net, comm);
    r.stats = engine.stats();
    if (comm.rank() == 0) out = std::move(r);
  });
  return out;
}

// What else is checkpointed besides the blocks: the head (then the step's first gradients
// arrive inside its recomputation, and the blocks' come after, in other ones), or the
// whole model (checkpoints inside a checkpoint).
enum class Also { kNothing, kHead, kModel };

Outcome train(bool checkpointing, const zero::Config& config, Also also = Also::kNothing) {
  return train_model<Net>(config, [&](Net& net) {
    for (auto& b : net.blocks) b->set_checkpointing(checkpointing);
    net.head->set_checkpointing(also == Also::kHead);
    net.set_checkpointing(also == Also::kModel);
  });
}

Outcome train_twice(bool checkpointing) {
  return train_model<Twice>(lesson::eager_release_config(),
                            [&](Twice& t) { t.block->set_checkpointing(checkpointing); });
}

}  // namespace

TEST(Lesson23ActivationCheckpointing, TrainsBitForBitAsWithoutItWithLessActivationMemory) {
  zero::Config c = lesson::eager_release_config();
  // About one block ahead: a block holds 8416 elements (ln 64, up 4224, down 4128).
  c.stage3_prefetch_bucket_size = 2 * 5 * kWidth * kWidth;
  const Outcome plain = train(false, c), checkpointed = train(true, c);
  EXPECT_EQ(checkpointed.losses, plain.losses);
  ASSERT_EQ(checkpointed.params.size(), plain.params.size());
  for (size_t i = 0; i < plain.params.size(); ++i)
    EXPECT_EQ(checkpointed.params[i].second.to_vector(), plain.params[i].second.to_vector())
        << plain.params[i].first;
  // Each block's forward runs twice, so its parameters are gathered once more a step.
  EXPECT_GT(checkpointed.stats.gathers_issued, plain.stats.gathers_issued);
  EXPECT_EQ(checkpointed.stats.trace_invalidations, 0);
  // The first runs (no graph) are traced and prefetched along as a plain forward is, and
  // the recomputations prefetch too: more prefetches than without checkpointing.
  EXPECT_GT(checkpointed.stats.prefetches_issued, plain.stats.prefetches_issued);
  EXPECT_LT(checkpointed.activation_peak, plain.activation_peak * 3 / 4)
      << "plain " << plain.activation_peak << " B, checkpointed " << checkpointed.activation_peak
      << " B";
}

// The first runs follow the training trace, as a plain forward does (they are part of the
// training step, though they record no graph): from the second step on, the forward
// gathers its first module on demand and finds every later one prefetched, the head that
// is not checkpointed included.
TEST(Lesson23ActivationCheckpointing, TheFirstRunsArePrefetchedAlongTheTrainingTrace) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(3);
    std::shared_ptr<Net> net = lesson::partitioned<Net>(comm);
    for (auto& b : net->blocks) b->set_checkpointing(true);
    zero::Config c = lesson::eager_release_config();
    c.stage3_prefetch_bucket_size = 2 * 5 * kWidth * kWidth;  // about one block ahead
    zero::Engine engine(net, comm, c, {});
    for (int s = 0; s < 2; ++s) {
      Generator g(s);
      engine.set_event_log(s == 1);
      Tensor y = engine(lesson::rank_slice(randn({kBatch, kWidth}, g), comm));
      if (s == 1) {
        EXPECT_EQ(lesson::modules_of(engine.events(), "gather:"), std::vector<std::string>{"b0.ln"})
            << "gathered on demand in the second step's forward";
      }
      engine.backward(mean(mul(y, y)));
      engine.step();
    }
  });
}

TEST(Lesson23ActivationCheckpointing, WithTheDefaultReuseAndPersistenceToo) {
  // DeepSpeed's defaults keep these small modules gathered: the recomputation then
  // gathers nothing, and training is still the same.
  const zero::Config c;
  const Outcome plain = train(false, c), checkpointed = train(true, c);
  EXPECT_EQ(checkpointed.losses, plain.losses);
  EXPECT_EQ(checkpointed.stats.gathers_issued, plain.stats.gathers_issued)
      << "the recomputations gathered something";
  EXPECT_EQ(checkpointed.stats.trace_invalidations, 0);
  EXPECT_LT(checkpointed.activation_peak, plain.activation_peak);
}

TEST(Lesson23ActivationCheckpointing, TheBackwardEndsOnceWhereverItsFirstGradientsArrive) {
  // The engine's end-of-backward work (flush the last bucket, release what is left) is
  // queued by the first module whose gradients arrive. With the head checkpointed that
  // happens inside the head's recomputation; the work must run when the whole backward
  // ends, not when the head's inner one does, or every later recomputation would flush
  // a bucket of its own.
  const zero::Config c = lesson::eager_release_config();  // one bucket holds every gradient
  const Outcome plain = train(false, c);
  for (Also also : {Also::kHead, Also::kModel}) {
    const Outcome o = train(true, c, also);
    EXPECT_EQ(o.losses, plain.losses);
    ASSERT_EQ(o.params.size(), plain.params.size());
    for (size_t i = 0; i < plain.params.size(); ++i)
      EXPECT_EQ(o.params[i].second.to_vector(), plain.params[i].second.to_vector())
          << plain.params[i].first;
    EXPECT_EQ(o.stats.buckets_reduced, plain.stats.buckets_reduced);
  }
}

TEST(Lesson23ActivationCheckpointing, ABlockCalledTwiceSumsItsTwoGradients) {
  // The reducer gets the block's gradients once per recomputation and sums the two in the
  // bucket they share: each gradient is reduced once, as without checkpointing (a bucket
  // holding a parameter twice would send it twice and write its shard twice).
  const Outcome plain = train_twice(false), checkpointed = train_twice(true);
  ASSERT_EQ(checkpointed.losses.size(), plain.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i)
    EXPECT_NEAR(checkpointed.losses[i], plain.losses[i], 1e-6 * std::abs(plain.losses[i]));
  ASSERT_EQ(checkpointed.params.size(), plain.params.size());
  for (size_t i = 0; i < plain.params.size(); ++i)
    EXPECT_CLOSE(checkpointed.params[i].second, plain.params[i].second, 1e-5, 1e-7)
        << plain.params[i].first;
  EXPECT_GT(plain.reduced_bytes, 0);
  EXPECT_EQ(checkpointed.reduced_bytes, plain.reduced_bytes);
}
