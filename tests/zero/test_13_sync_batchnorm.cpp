// Lesson 13 — synchronized BatchNorm.
// Invariant: with sync_batchnorm the statistics of every BatchNorm are computed over ALL
// ranks' batches (an all-reduce of per-channel sums whose backward all-reduces the
// gradients), so N-rank training equals single-process training on the global batch:
// the same outputs, the same gradients, the same running statistics.
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
      std::shared_ptr<lesson::TokenizerLike> tok;
      {
        zero::Init init(comm);
        tok = std::make_shared<lesson::TokenizerLike>();
      }
      zero::Config cfg;
      cfg.sync_batchnorm = true;
      zero::Engine engine(tok, comm, cfg, {});
      int64_t local = kGlobal / N, off = comm.rank() * local;
      Tensor out = engine(x.narrow(0, off, local));
      EXPECT_CLOSE(out, ref_out.narrow(0, off, local), 1e-5, 1e-6) << "outputs";
      engine.backward(mse_loss(out, target.narrow(0, off, local)));
      engine.reduce_gradients();
      const auto& ps = engine.partitioned();
      for (size_t i = 0; i < ps.size(); ++i) {
        const zero::Partition& part = zero::zero_param(ps[i].param)->part;
        int64_t valid = part.shard_valid(comm.rank());
        if (valid == 0) continue;
        EXPECT_CLOSE(zero::zero_param(ps[i].param)->grad_shard.narrow(0, 0, valid),
                     ref_grads[i].reshape({-1}).narrow(0, part.shard_offset(comm.rank()), valid),
                     1e-5, 1e-6)
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
    EXPECT_EQ(zero::enable_sync_batchnorm(*tok, comm), 1);
    comm.reset_counters();
    Tensor out = (*tok)(x);
    mse_loss(out, target).backward();
    EXPECT_EQ(comm.counters().total_calls(), 0) << comm.counters().json();
    EXPECT_CLOSE(out, ref_out, 1e-5, 1e-6) << "outputs";
    const auto ps = tok->parameters(), ref_ps = ref->parameters();
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_CLOSE(ps[i].grad(), ref_ps[i].grad(), 1e-5, 1e-6);
    EXPECT_CLOSE(tok->bn->running_mean, ref->bn->running_mean, 1e-5, 1e-6);
    EXPECT_CLOSE(tok->bn->running_var, ref->bn->running_var, 1e-5, 1e-6);
  });
}
