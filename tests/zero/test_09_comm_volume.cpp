// Lesson 9 — communication volume.
// Invariant: one ZeRO-3 training step moves each parameter three times: an all-gather
// before forward, an all-gather before backward, and a reduce-scatter of its gradient.
// Counted as bytes received per rank ((N - 1) / N of the padded tensor each time), the
// all-gather plus reduce-scatter traffic of a step is exactly 3 x (N - 1) x shard bytes.
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson09CommVolume, ThreeTimesTheParametersPerStep) {
  for (int N : {2, 3, 4}) {
    comm::run_threads(N, [N](comm::Communicator& comm) {
      std::shared_ptr<lesson::Mixed> m;
      {
        zero::Init init(comm);
        m = std::make_shared<lesson::Mixed>();
      }
      zero::Engine engine(m, comm, lesson::eager_release_config(), {});
      int64_t shard_bytes = 0;
      for (const auto& mp : engine.partitioned())
        shard_bytes += zero::zero_param(mp.param)->part.shard_numel * 4;
      for (int step = 0; step < 2; ++step) {
        comm.reset_counters();
        auto [x, y] = lesson::batch(2, step);
        engine.backward(mse_loss(engine(x), y));
        engine.step();
        comm::CommCounters c = comm.counters();
        int64_t ag = c[comm::Collective::kAllGather].bytes;
        int64_t rs = c[comm::Collective::kReduceScatter].bytes;
        EXPECT_EQ(ag, 2 * (N - 1) * shard_bytes) << "forward + backward all-gathers, N=" << N;
        EXPECT_EQ(rs, (N - 1) * shard_bytes) << "one reduce-scatter of every gradient";
        EXPECT_EQ(ag + rs, 3 * (N - 1) * shard_bytes);
      }
    });
  }
}
