// Lesson 9 — communication volume.
// Invariant: with nothing persistent and nothing kept for reuse
// (`lesson::eager_release_config()`), one training step moves each parameter three times:
// an all-gather before forward, another before backward (one collective per module,
// lesson 16, but the bytes are the parameters'), and a reduce-scatter of its gradient.
// The communicator counts the textbook volume each rank receives, (N - 1) / N of the
// padded tensor per collective, so a step's traffic is exactly 3 x (N - 1) x shard bytes.
//
// The defaults trade memory for traffic. Parameters of at most
// `stage3_param_persistence_threshold` (100k) elements stay gathered: one all-gather after
// each step, none in forward or backward. A module whose backward comes back in fewer than
// `stage3_max_reuse_distance` (1e9) elements is kept from its forward to its backward:
// 2 x instead of 3 x, with the whole model gathered at the forward/backward turn
// (lesson 18).
//
// Against plain data parallelism, which all-reduces each gradient (a reduce-scatter and an
// all-gather: 2 x (N - 1) / N of the model), ZeRO-3's 3 x is 1.5 times the traffic: the
// price of holding 1/N of the parameters (the paper's Section 7).
//
// Gradient accumulation: every micro-step gathers and reduce-scatters as above. The
// window's first micro-step copies its (1/gas-scaled) gradient over the fp32 gradient
// shards' stale values and each later one adds to them; nothing clears the shards (the
// optimizer step only marks them stale: lesson 22). An optimizer step over gas
// micro-batches therefore moves gas times as much.
#include <optional>

#include "zero/lesson_util.h"

using namespace zt;

namespace {
// This rank's parameter shards, in bytes (padding included).
int64_t shard_bytes(const zero::Engine& engine) {
  int64_t bytes = 0;
  for (const auto& mp : engine.partitioned()) {
    const zero::ZeroParam* z = zero::zero_param(mp.param);
    bytes += z->part.shard_numel * static_cast<int64_t>(dtype_size(z->shard.dtype()));
  }
  return bytes;
}

// One forward, backward and step() on rank-specific batch `step`.
void micro_step(zero::Engine& engine, comm::Communicator& comm, int step) {
  auto [x, y] = lesson::batch(2, 10 * step + comm.rank());
  engine.backward(mse_loss(engine(x), y));
  engine.step();
}
}  // namespace

TEST(Lesson09CommVolume, ThreeTimesTheParametersPerStep) {
  for (int N : {2, 3, 4}) {
    comm::run_threads(N, [N](comm::Communicator& comm) {
      std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
      zero::Engine engine(m, comm, lesson::eager_release_config(), {});
      const int64_t shard = shard_bytes(engine);
      for (int step = 0; step < 2; ++step) {
        comm.reset_counters();
        micro_step(engine, comm, step);
        comm::CommCounters c = comm.counters();
        int64_t ag = c[comm::Collective::kAllGather].bytes;
        int64_t rs = c[comm::Collective::kReduceScatter].bytes;
        EXPECT_EQ(ag, 2 * (N - 1) * shard) << "forward + backward all-gathers, N=" << N;
        EXPECT_EQ(rs, (N - 1) * shard) << "one reduce-scatter of every gradient";
        // Together: 3 x (N - 1) x shard bytes a step.
      }
    });
  }
}

// Persistence off, the default reuse distance: once the first step has recorded the trace,
// every module's backward comes back in fewer than 1e9 elements, so nothing is released between
// forward and backward.
TEST(Lesson09CommVolume, DefaultReuseDistanceMakesItTwice) {
  const int N = 2;
  comm::run_threads(N, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Config cfg;  // the defaults, except:
    cfg.stage3_param_persistence_threshold = 0;
    zero::Engine engine(m, comm, cfg, {});
    const int64_t shard = shard_bytes(engine);
    int64_t whole = 0;  // the gathered model, in bytes (no padding)
    for (const auto& [n, p] : m->named_parameters())
      whole += p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
    for (int step = 0; step < 3; ++step) {
      comm.reset_counters();
      reset_peak_memory();
      micro_step(engine, comm, step);
      comm::CommCounters c = comm.counters();
      const int gathers = step == 0 ? 2 : 1;  // step 0 records the trace: no reuse yet
      EXPECT_EQ(c[comm::Collective::kAllGather].bytes, gathers * (N - 1) * shard)
          << "step " << step;
      EXPECT_EQ(c[comm::Collective::kReduceScatter].bytes, (N - 1) * shard) << "step " << step;
      const zero::MemoryReport r = engine.memory_report();
      if (step > 0) {
        EXPECT_GE(r.gathered_param_peak, whole)  // (padded buffers: at least the model)
            << "the whole model, gathered at the turn";
      }
      EXPECT_EQ(r.gathered_param, 0) << "released after the step: nothing persists";
    }
  });
}

// Under the defaults Mixed is all persistent (every parameter under 100k elements).
TEST(Lesson09CommVolume, PersistentParametersAreGatheredOnceAfterTheStep) {
  const int N = 2;
  comm::run_threads(N, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Engine engine(m, comm, zero::Config{}, {});
    const int64_t shard = shard_bytes(engine);
    for (int step = 0; step < 2; ++step) {
      comm.reset_counters();
      Tensor x, y;
      std::tie(x, y) = lesson::batch(2, 10 * step + comm.rank());
      engine.backward(mse_loss(engine(x), y));
      EXPECT_EQ(comm.counters()[comm::Collective::kAllGather].bytes, 0)
          << "no gathers in forward or backward";
      engine.step();
      const comm::CommCounters c = comm.counters();
      EXPECT_EQ(c[comm::Collective::kAllGather].bytes, (N - 1) * shard)
          << "one re-gather of the updated shards after the step";
      EXPECT_EQ(c[comm::Collective::kReduceScatter].bytes, (N - 1) * shard);
    }
  });
}

// A zero::Replicated model is plain data parallelism: whole on every rank, its gradients
// all-reduced. Counted in the same units, ZeRO-3 moves 1.5 times its bytes (TanhStack's
// parameters divide evenly by N: no padding in ZeRO-3's shards).
TEST(Lesson09CommVolume, OneAndAHalfTimesDataParallel) {
  const int N = 2;
  comm::CommCounters dp, z3;
  for (bool replicated : {true, false}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      std::shared_ptr<lesson::TanhStack> m;
      {
        zero::Init init(comm);
        std::optional<zero::Replicated> whole;  // a scope inside Init: the model opts out
        if (replicated) whole.emplace(comm);
        m = std::make_shared<lesson::TanhStack>(4, 32);
      }
      zero::Engine engine(m, comm, lesson::eager_release_config(), {});
      comm.reset_counters();
      Generator g(comm.rank() + 1);
      engine.backward(sum(engine(randn({4, 32}, g))));
      engine.step();
      if (comm.rank() == 0) (replicated ? dp : z3) = comm.counters();
    });
  }
  using comm::Collective;
  EXPECT_EQ(dp[Collective::kAllGather].bytes + dp[Collective::kReduceScatter].bytes, 0);
  // Both all-reduce the gradient norm's partial sums; the rest of DP's is the gradients.
  const int64_t dp_bytes = dp[Collective::kAllReduce].bytes - z3[Collective::kAllReduce].bytes;
  const int64_t z3_bytes = z3[Collective::kAllGather].bytes + z3[Collective::kReduceScatter].bytes;
  ASSERT_GT(dp_bytes, 0);
  EXPECT_EQ(2 * z3_bytes, 3 * dp_bytes) << "ZeRO-3 " << z3_bytes << " B, DP " << dp_bytes << " B";
}

TEST(Lesson09CommVolume, AccumulationMovesEveryMicroStep) {
  const int N = 2, gas = 3;
  comm::run_threads(N, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Config cfg = lesson::eager_release_config();
    cfg.gradient_accumulation_steps = gas;
    zero::Engine engine(m, comm, cfg, {});
    const int64_t shard = shard_bytes(engine);
    comm.reset_counters();
    for (int k = 0; k < gas; ++k) micro_step(engine, comm, k);
    EXPECT_EQ(engine.stats().steps, 1) << "one optimizer step";
    comm::CommCounters c = comm.counters();
    EXPECT_EQ(c[comm::Collective::kAllGather].bytes, gas * 2 * (N - 1) * shard);
    EXPECT_EQ(c[comm::Collective::kReduceScatter].bytes, gas * (N - 1) * shard)
        << "every micro-step reduce-scatters its gradient into the shards";
  });
}
