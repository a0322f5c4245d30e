// Lesson 12 — buffer policies while training.
// Invariant: after each optimizer step the engine applies `buffers.sync` per module path:
// `average` leaves every rank with the MEAN of the ranks' running statistics, `broadcast`
// with rank 0's, and `none` leaves them as each rank computed them (DeepSpeed's behaviour:
// the ranks differ, as the user asked). verify_replicas() checks every buffer the policy
// keeps identical, naming the first divergent one and the ranks (a buffer edited on one
// rank behind the engine's back, say), and leaves `none` buffers out.
// A checkpoint (lesson 15) keeps every rank's `none` buffers (each in its own rank file): a load at
// the same world size gives each rank its own back, so a resume goes on as the run would have. At
// another world size there is no rank to match: every rank takes rank 0's, with a note. `average`
// gives the mean of the ranks' running variances, not the variance of the global batch (the spread
// between the ranks' means is lost); lesson 13's sync BatchNorm is the exact version.
#include "zero/checkpoint_util.h"
#include "zero/lesson_util.h"

using namespace zt;

namespace {
// k training steps on rank-specific data. Returns this rank's running_mean as its own
// forward left it (read before step() syncs it) and as it is after the last sync. With
// `diverged`, also runs verify_replicas() and reports whether it threw; with `tamper`,
// rank 1 first adds 1 to its running_mean outside the engine.
struct Stats {
  std::vector<double> local_mean;  // this rank's own running_mean before the last sync
  std::vector<double> synced_mean;
};

// Every rank's `local`, averaged element by element.
std::vector<double> mean_over_ranks(const std::vector<double>& local, comm::Communicator& comm) {
  const std::vector<std::vector<double>> all = lesson::gather_doubles(local, comm);
  std::vector<double> m(local.size(), 0.0);
  for (const std::vector<double>& v : all)
    for (size_t c = 0; c < m.size(); ++c) m[c] += v[c] / static_cast<double>(all.size());
  return m;
}

// conv -> bn_a -> bn_b: two modules with buffers, for per-module rules.
class TwoNorms : public nn::UnaryModule {
 public:
  TwoNorms() : nn::UnaryModule("TwoNorms") {
    conv = register_module("conv", std::make_shared<nn::Conv3d>(nn::Conv3dOptions(3, 4, 1)));
    bn_a = register_module("bn_a", std::make_shared<nn::BatchNorm3d>(nn::BatchNormOptions(4)));
    bn_b = register_module("bn_b", std::make_shared<nn::BatchNorm3d>(nn::BatchNormOptions(4)));
  }
  std::shared_ptr<nn::Conv3d> conv;
  std::shared_ptr<nn::BatchNorm3d> bn_a, bn_b;

 protected:
  Tensor forward(const Tensor& x) override { return (*bn_b)((*bn_a)((*conv)(x))); }
};

// The lesson's model, partitioned, with the same initial weights on every call.
std::shared_ptr<lesson::TokenizerLike> tokenizer(comm::Communicator& comm) {
  manual_seed(9);
  return lesson::partitioned<lesson::TokenizerLike>(comm);
}

Stats train(comm::Communicator& comm, zero::BufferSync sync, int k, bool* diverged = nullptr,
            bool tamper = false) {
  const auto tok = tokenizer(comm);
  zero::Config cfg;
  cfg.buffers.sync = sync;
  zero::Engine engine(tok, comm, cfg, {});
  Stats run;
  for (int step = 0; step < k; ++step) {
    Generator g(100 + 10 * comm.rank() + step);  // different data on every rank
    Tensor x = add(randn({2, 3, 4, 6, 6}, g), static_cast<double>(comm.rank()));
    engine.backward(mean(engine(x)));
    run.local_mean = tok->bn->running_mean.to_vector();
    engine.step();
  }
  run.synced_mean = tok->bn->running_mean.to_vector();
  if (tamper && comm.rank() == 1) {
    autograd::NoGradGuard ng;
    add_(tok->bn->running_mean, ones_like(tok->bn->running_mean));
  }
  if (diverged) {
    try {
      engine.verify_replicas();
      *diverged = false;
    } catch (const Error& e) {
      *diverged = true;
      std::string msg = e.what();
      EXPECT_NE(msg.find("bn.running_mean"), std::string::npos) << msg;
      // Every group of ranks holding one value is named: the tamperer alone, the others
      // together.
      EXPECT_NE(msg.find("ranks {1}"), std::string::npos) << msg;
      EXPECT_NE(msg.find("ranks {0, 2}"), std::string::npos) << msg;
    }
  }
  return run;
}
}  // namespace

// Before any policy applies, a buffer registered inside zero::Init (or zero::Replicated)
// is broadcast from rank 0 as it is registered, as a parameter is scattered from it: the
// ranks agree from the start, whatever each one computed. Outside a scope each keeps its
// own.
TEST(Lesson12BufferSync, ABufferRegisteredInsideInitIsRankZeros) {
  class Stamped : public nn::UnaryModule {
   public:
    explicit Stamped(double value) : nn::UnaryModule("Stamped") {
      stamp = register_buffer("stamp", full({4}, value));
    }
    Tensor stamp;

   protected:
    Tensor forward(const Tensor& x) override { return x; }
  };
  comm::run_threads(3, [](comm::Communicator& comm) {
    const double mine = 1.0 + comm.rank();
    auto plain = std::make_shared<Stamped>(mine);
    EXPECT_TRUE(test::values_are(plain->stamp, std::vector<double>(4, mine)));
    auto inside = lesson::partitioned<Stamped>(comm, mine);
    EXPECT_TRUE(test::values_are(inside->stamp, std::vector<double>(4, 1.0)))
        << "rank 0's value, on rank " << comm.rank();
    std::shared_ptr<Stamped> replica;
    {
      zero::Init init(comm);
      zero::Replicated frozen(comm);
      replica = std::make_shared<Stamped>(mine);
    }
    EXPECT_TRUE(test::values_are(replica->stamp, std::vector<double>(4, 1.0)))
        << "a zero::Replicated module's buffer too: rank 0's value, on rank " << comm.rank();
  });
}

TEST(Lesson12BufferSync, AverageGivesTheMeanOfRanks) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    Stats r = train(comm, zero::BufferSync::average, 1);
    const std::vector<double> m = mean_over_ranks(r.local_mean, comm);
    for (size_t c = 0; c < r.synced_mean.size(); ++c)
      EXPECT_NEAR(r.synced_mean[c], m[c], 1e-6) << "channel " << c;
  });
}

// A step the engine skips for an fp16 overflow (mixed precision and loss scaling: lesson
// 14) updated the buffers all the same (the forward ran): they are synchronized as after
// an applied step.
TEST(Lesson12BufferSync, AStepSkippedForAnFp16OverflowStillSyncsTheBuffers) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const auto tok = tokenizer(comm);
    zero::Config cfg;
    cfg.precision.fp16 = true;
    cfg.precision.loss_scale = 1;  // fixed: the gradients below overflow f16 whatever it is
    zero::Engine engine(tok, comm, cfg, {});
    Generator g(100 + comm.rank());  // different data on every rank
    const Tensor x = add(randn({2, 3, 4, 6, 6}, g), static_cast<double>(comm.rank()));
    engine.backward(mul(mean(engine(x.to(DType::f16)).to(DType::f32)), 1e30));
    EXPECT_FALSE(engine.step()) << "the overflowed update is skipped";
    EXPECT_NO_THROW(engine.verify_replicas());
  });
}

TEST(Lesson12BufferSync, BroadcastGivesRankZeros) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    Stats r = train(comm, zero::BufferSync::broadcast, 2);
    const std::vector<double> rank0 = lesson::gather_doubles(r.local_mean, comm)[0];
    EXPECT_EQ(r.synced_mean, rank0);
  });
}

TEST(Lesson12BufferSync, NoneDivergesAndVerifyLeavesItOut) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    bool diverged = true;
    Stats r = train(comm, zero::BufferSync::none, 2, &diverged);
    EXPECT_EQ(r.synced_mean, r.local_mean) << "none leaves each rank's own statistics";
    const std::vector<double> m = mean_over_ranks(r.synced_mean, comm);
    EXPECT_NE(r.synced_mean, m) << "the ranks' statistics differ";
    EXPECT_FALSE(diverged) << "verify_replicas checks only what the policy keeps identical";
  });
}

TEST(Lesson12BufferSync, VerifyNamesABufferEditedOnOneRank) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    bool diverged = false;
    train(comm, zero::BufferSync::average, 1, &diverged, /*tamper=*/true);
    EXPECT_TRUE(diverged);
  });
}

TEST(Lesson12BufferSync, PerModulePolicy) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    manual_seed(9);
    std::shared_ptr<TwoNorms> m = lesson::partitioned<TwoNorms>(comm);
    zero::Config cfg;
    cfg.buffers.sync = zero::BufferSync::average;
    cfg.buffers.modules.push_back({"bn_a", zero::BufferSync::none});
    zero::Engine engine(m, comm, cfg, {});
    Generator g(7 + comm.rank());  // different data on every rank
    engine.backward(mean(engine(randn({2, 3, 4, 6, 6}, g))));
    const std::vector<double> local_b = m->bn_b->running_mean.to_vector();
    engine.step();
    auto h = lesson::hashes_across_ranks(m->bn_a->running_mean, comm);
    EXPECT_NE(h[0], h[1]) << "the 'bn_a' rule (none) beats the default (average)";
    const std::vector<double> want = mean_over_ranks(local_b, comm);
    const std::vector<double> got = m->bn_b->running_mean.to_vector();
    for (size_t c = 0; c < got.size(); ++c)
      EXPECT_NEAR(got[c], want[c], 1e-6) << "bn_b keeps the default (average), channel " << c;
  });
}

// Synchronizing costs one collective per kind of buffer, not one per buffer: three
// BatchNorms' six running statistics go in one all-reduce (packed side by side) and their
// three batch counters in one broadcast, with the values a collective per buffer gives.
TEST(Lesson12BufferSync, OneCollectivePerKindOfBuffer) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    nn::Sequential m({std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(4)),
                      std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(3)),
                      std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(5))});
    const zero::NamedTensors buffers = m.named_buffers();
    ASSERT_EQ(buffers.size(), 9u);
    // Rank r's statistics: (r + 1) x (the buffer's index + each channel's); counters 10 r + i.
    for (size_t i = 0; i < buffers.size(); ++i) {
      const Tensor& b = buffers[i].second;
      const double r = comm.rank();
      if (is_floating(b.dtype()))
        b.copy_(mul(add(arange(0, static_cast<double>(b.numel())), static_cast<double>(i)), r + 1));
      else
        b.fill_(10 * r + static_cast<double>(i));
    }
    comm.reset_counters();
    zero::BuffersConfig policy;  // average: floating buffers averaged, counters rank 0's
    zero::sync_buffers(buffers, policy, comm);
    const comm::CommCounters c = comm.counters();
    EXPECT_EQ(c[comm::Collective::kAllReduce].calls, 1) << "six running statistics";
    EXPECT_EQ(c[comm::Collective::kBroadcast].calls, 1) << "three batch counters";
    const double mean_factor = (1 + 2 + 3) / 3.0;  // the ranks' factors r + 1, averaged
    for (size_t i = 0; i < buffers.size(); ++i) {
      const Tensor& b = buffers[i].second;
      if (is_floating(b.dtype())) {
        EXPECT_CLOSE(b, mul(add(arange(0, static_cast<double>(b.numel())), static_cast<double>(i)),
                            mean_factor))
            << buffers[i].first;
      } else {
        EXPECT_EQ(b.item(), static_cast<double>(i)) << buffers[i].first << ": rank 0's counter";
      }
    }
  });
}

// A buffer every rank holds alike averages back to itself bit for bit at any world size:
// the average is taken in f64, where (x + x + x) / 3 is x (in f32 it often is not). So a
// frozen module's statistics do not drift by a rounding step per step, whatever N is.
TEST(Lesson12BufferSync, EqualBuffersAverageToThemselves) {
  for (int N : {3, 5, 6}) {
    comm::run_threads(N, [N](comm::Communicator& comm) {
      Generator g(4);  // the same values on every rank
      const zero::NamedTensors buffers = {{"bn.running_mean", randn({64}, g)},
                                          {"bn.running_var", exp(randn({64}, g))}};
      std::vector<Tensor> before;
      for (const auto& [name, b] : buffers) before.push_back(b.clone());
      comm.reset_counters();
      for (int step = 0; step < 3; ++step) zero::sync_buffers(buffers, {}, comm);
      EXPECT_GT(comm.counters()[comm::Collective::kAllReduce].calls, 0) << "the average was taken";
      for (size_t i = 0; i < buffers.size(); ++i)
        EXPECT_CLOSE(buffers[i].second, before[i], 0, 0) << buffers[i].first << " at N=" << N;
    });
  }
}

TEST(Lesson12BufferSync, ACheckpointKeepsEachRanksNoneBuffers) {
  lesson::TempDir tmp;
  const std::string dir = tmp / "ckpt/step";
  zero::Config cfg;
  cfg.buffers.sync = zero::BufferSync::none;
  std::vector<std::vector<double>> saved(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const auto tok = tokenizer(comm);
    zero::Engine engine(tok, comm, cfg, {});
    Generator g(100 + comm.rank());  // different data on every rank
    engine.backward(mean(engine(add(randn({2, 3, 4, 6, 6}, g), comm.rank()))));
    engine.step();
    saved[comm.rank()] = tok->bn->running_mean.to_vector();
    zero::save_checkpoint(engine, tmp / "ckpt", "step");
  });
  ASSERT_NE(saved[0], saved[1]) << "the ranks' statistics differ";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const auto tok = tokenizer(comm);
    zero::Engine engine(tok, comm, cfg, {});
    zero::load_checkpoint(engine, dir);
    EXPECT_EQ(tok->bn->running_mean.to_vector(), saved[comm.rank()]) << "rank " << comm.rank();
  });
  testing::internal::CaptureStderr();
  comm::run_threads(3, [&](comm::Communicator& comm) {
    const auto tok = tokenizer(comm);
    zero::Engine engine(tok, comm, cfg, {});
    zero::load_checkpoint(engine, dir);
    EXPECT_EQ(tok->bn->running_mean.to_vector(), saved[0]) << "rank " << comm.rank();
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("note: the buffers under buffers.sync none (bn.running_mean and 2 more) "
                     "were saved per rank on 2 ranks; on 3 ranks every rank starts from rank 0's"),
            std::string::npos)
      << err;
}

// Statistics loaded on one rank after the engine is built (the classic bug, a load that
// was meant for every rank) are not mixed into the others' by the next step's sync, where
// they would pass every check afterwards: the ranks agree at each step on which buffers
// they wrote outside the model's forwards since the last sync, and one written on some
// ranks only is an error naming it and the ranks. The forwards' own writes (a BatchNorm
// that trains) are the same on every rank: they neither count nor hide the load.
TEST(Lesson12BufferSync, ABufferWrittenOnOneRankAfterTheEngineIsBuiltIsRefused) {
  for (const bool frozen : {true, false}) {
    comm::run_threads(2, [&](comm::Communicator& comm) {
      const auto tok = tokenizer(comm);
      zero::Engine engine(tok, comm, zero::Config{}, {});
      if (frozen) tok->bn->eval();  // its statistics change only by the load below
      Generator g(7);
      engine.backward(mean(engine(randn({2, 3, 4, 6, 6}, g))));
      EXPECT_TRUE(engine.step()) << "nothing written outside the forwards: the ranks agree";
      if (comm.rank() == 0) lesson::load_pretrained_stats(*tok);
      engine.backward(mean(engine(randn({2, 3, 4, 6, 6}, g))));
      EXPECT_TRUE(test::throws_with([&] { engine.step(); },
                                    "buffer 'bn.running_mean' (of this engine's "
                                    "TokenizerLike) was written on rank(s) 0 only"))
          << (frozen ? "frozen" : "training");
      // Mended by writing it everywhere: a modifier scope's exit broadcasts rank 0's values.
      { zero::GatheredParameters everywhere(*tok->bn, comm, /*modifier_rank=*/0); }
      engine.backward(mean(engine(randn({2, 3, 4, 6, 6}, g))));
      EXPECT_TRUE(engine.step());
      const std::vector<std::string> h = lesson::hashes_across_ranks(tok->bn->running_mean, comm);
      EXPECT_EQ(h[0], h[1]);
    });
  }
}

// The documented ways to put rank 0's statistics on every rank after the engine is built
// are writes on every rank (a broadcast counts as one), so the next step goes on and every
// rank holds rank 0's values: zero::load_state_dict, a modifier scope (edited before its
// exit, or held open across the step), and under `buffers.sync: broadcast` a plain write on
// rank 0, which that policy keeps.
TEST(Lesson12BufferSync, StatisticsPutOnEveryRankAfterTheEngineIsBuiltStep) {
  for (const std::string how : {"load_state_dict", "scope", "scope across the step", "broadcast"}) {
    comm::run_threads(2, [&](comm::Communicator& comm) {
      const auto tok = tokenizer(comm);
      zero::Config cfg;
      if (how == "broadcast") cfg.buffers.sync = zero::BufferSync::broadcast;
      zero::Engine engine(tok, comm, cfg, {});
      tok->bn->eval();  // its statistics change only by the writes below
      lesson::TokenizerLike pretrained;
      lesson::load_pretrained_stats(pretrained);
      const std::vector<double> want = pretrained.bn->running_mean.to_vector();
      Generator g(7);
      std::optional<zero::GatheredParameters> scope;
      if (how == "load_state_dict") {
        zero::load_state_dict(
            *tok, comm.rank() == 0 ? nn::state_dict(pretrained) : nn::NamedTensors{}, comm);
      } else if (how == "broadcast") {
        if (comm.rank() == 0) lesson::load_pretrained_stats(*tok);
      } else {
        scope.emplace(*tok->bn, comm, /*modifier_rank=*/0);
        if (comm.rank() == 0) lesson::load_pretrained_stats(*tok);
        if (how == "scope") scope.reset();
      }
      engine.backward(mean(engine(randn({2, 3, 4, 6, 6}, g))));
      EXPECT_TRUE(engine.step()) << how;
      scope.reset();
      EXPECT_EQ(tok->bn->running_mean.to_vector(), want) << how << ", rank " << comm.rank();
      engine.backward(mean(engine(randn({2, 3, 4, 6, 6}, g))));
      EXPECT_TRUE(engine.step()) << how << ": the next step too";
    });
  }
}
