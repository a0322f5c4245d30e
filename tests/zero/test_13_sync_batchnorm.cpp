// Lesson 13 — synchronized BatchNorm.
// Invariant: with sync_batchnorm the statistics of every BatchNorm are computed over ALL
// ranks' batches (an all-reduce of per-channel sums whose backward all-reduces the
// gradients), so N-rank training equals single-process training on the global batch:
// the same outputs, the same gradients, the same running statistics.
#include "core/work_counts.h"
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson13SyncBatchNorm, MatchesSingleProcessOnTheGlobalBatch) {
  constexpr int64_t kGlobal = 6;
  Generator g(77);
  Tensor x = randn({kGlobal, 3, 4, 6, 6}, g);
  Tensor target = randn({kGlobal, 8, 4, 6, 6}, g);
  // Single process.
  manual_seed(5);
  auto ref = std::make_shared<lesson::TokenizerLike>();
  Tensor ref_out = (*ref)(x);
  mse_loss(ref_out, target).backward();
  std::vector<Tensor> ref_grads;
  for (auto& p : ref->parameters()) ref_grads.push_back(p.grad());

  for (int N : {2, 3}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(5);
      auto tok = lesson::partitioned<lesson::TokenizerLike>(comm);
      zero::Config cfg;
      cfg.sync_batchnorm = true;
      zero::Engine engine(tok, comm, cfg, {});
      Tensor out = engine(lesson::rank_slice(x, comm));
      EXPECT_CLOSE(out, lesson::rank_slice(ref_out, comm), 1e-5, 1e-6) << "outputs";
      engine.backward(mse_loss(out, lesson::rank_slice(target, comm)));
      engine.reduce_gradients();
      const auto& ps = engine.partitioned();
      ASSERT_EQ(ps.size(), ref_grads.size());
      for (size_t i = 0; i < ps.size(); ++i) {
        const zero::ZeroParam* z = zero::zero_param(ps[i].param);
        EXPECT_TRUE(
            lesson::shard_is_slice(z->grad_shard, z->part, comm.rank(), ref_grads[i], 1e-5, 1e-6))
            << ps[i].name;
      }
      EXPECT_CLOSE(tok->bn->running_mean, ref->bn->running_mean, 1e-5, 1e-6);
      EXPECT_CLOSE(tok->bn->running_var, ref->bn->running_var, 1e-5, 1e-6);
    });
  }
}

// One rank: the global batch is the rank's own, so the reducer hands back the local
// statistics without a collective (a one-GPU NCCL communicator takes only GPU tensors, and
// nothing is read back to the host) and training is the single process's.
TEST(Lesson13SyncBatchNorm, OneRankUsesItsOwnStatisticsWithoutACollective) {
  Generator g(78);
  Tensor x = randn({2, 3, 4, 6, 6}, g);
  Tensor target = randn({2, 8, 4, 6, 6}, g);
  manual_seed(6);
  auto ref = std::make_shared<lesson::TokenizerLike>();
  Tensor ref_out = (*ref)(x);
  mse_loss(ref_out, target).backward();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    manual_seed(6);
    auto tok = std::make_shared<lesson::TokenizerLike>();
    EXPECT_EQ(zero::enable_sync_batchnorm(*tok, comm).size(), 1u);
    comm.reset_counters();
    Tensor out = (*tok)(x);
    mse_loss(out, target).backward();
    EXPECT_EQ(comm.counters().total_calls(), 0) << comm.counters().json();
    EXPECT_CLOSE(out, ref_out, 1e-5, 1e-6) << "outputs";
    const auto ps = tok->parameters(), ref_ps = ref->parameters();
    ASSERT_EQ(ps.size(), ref_ps.size());
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_CLOSE(ps[i].grad(), ref_ps[i].grad(), 1e-5, 1e-6);
    EXPECT_CLOSE(tok->bn->running_mean, ref->bn->running_mean, 1e-5, 1e-6);
    EXPECT_CLOSE(tok->bn->running_var, ref->bn->running_var, 1e-5, 1e-6);
  });
}

// Several ranks: the statistics reach every rank without a read back to the host (on a
// GPU each read waits for every kernel queued so far, at every BatchNorm of every forward):
// the per-channel sums are all-reduced on their device, and the element counts, which each
// rank's host knows, are gathered from the hosts.
TEST(Lesson13SyncBatchNorm, SeveralRanksReadNothingBackToTheHost) {
  Generator g(80);
  const Tensor x = randn({5, 3, 4, 6, 6}, g);  // 2 clips on rank 0, 3 on rank 1
  manual_seed(6);
  auto ref = std::make_shared<lesson::TokenizerLike>();
  const Tensor ref_out = (*ref)(x);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(6);
    auto tok = std::make_shared<lesson::TokenizerLike>();
    EXPECT_EQ(zero::enable_sync_batchnorm(*tok, comm).size(), 1u);
    const int64_t first = comm.rank() == 0 ? 0 : 2, count = comm.rank() == 0 ? 2 : 3;
    const WorkCounts before = work_counts();
    Tensor out = (*tok)(x.narrow(0, first, count));
    mse_loss(out, zeros_like(out)).backward();
    EXPECT_EQ((work_counts() - before).host_reads, 0);
    EXPECT_CLOSE(out, ref_out.narrow(0, first, count), 1e-5, 1e-6)
        << "the global batch's statistics";
    EXPECT_CLOSE(tok->bn->running_var, ref->bn->running_var, 1e-5, 1e-6);
  });
}

// The reducer belongs to the engine that installed it: a later engine over the same model
// without sync_batchnorm keeps each rank's statistics its own.
TEST(Lesson13SyncBatchNorm, AnEngineTakesItsReducersWithIt) {
  std::vector<std::vector<double>> synced(2), own(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(6);
    auto tok = lesson::partitioned<lesson::TokenizerLike>(comm);
    Generator g(90 + comm.rank());  // each rank its own data
    const Tensor x = randn({2, 3, 4, 6, 6}, g);
    {
      zero::Config sync;
      sync.sync_batchnorm = true;
      zero::Engine first(tok, comm, sync, {});
      first(x);
      synced[comm.rank()] = tok->bn->running_mean.to_vector();
    }
    zero::Config apart;
    apart.buffers.sync = zero::BufferSync::none;
    zero::Engine second(tok, comm, apart, {});
    second(x);
    own[comm.rank()] = tok->bn->running_mean.to_vector();
  });
  EXPECT_EQ(synced[0], synced[1]);
  EXPECT_NE(own[0], own[1]);
}
