// Lesson 6 — gradient reduce-scatter.
// Invariant: after backward, rank r's fp32 gradient shard of each parameter equals the
// r-th slice of the AVERAGE over ranks of the full gradients each rank computed on its
// own data — one reduce-scatter per bucket, with no rank ever holding the averaged full
// gradient. Small buckets (many reduce-scatters) give the same result as one. Laying a
// bucket out and adding its result into the shards are one kernel call each, whatever the
// number of parameters and ranks (one launch each on a GPU).
#include "zero/lesson_util.h"

using namespace zt;

static void check_shards(int N, int64_t bucket) {
  // Reference: every rank's full gradient from a plain (unpartitioned) replica.
  manual_seed(3);
  auto plain = std::make_shared<lesson::Mixed>();
  std::vector<std::vector<Tensor>> full_grads(N);
  for (int r = 0; r < N; ++r) {
    plain->zero_grad();
    auto [x, y] = lesson::batch(2, r);
    mse_loss((*plain)(x), y).backward();
    for (auto& p : plain->parameters()) full_grads[r].push_back(p.grad().detach().clone());
  }
  comm::run_threads(N, [&](comm::Communicator& comm) {
    manual_seed(3);
    std::shared_ptr<lesson::Mixed> m;
    {
      zero::Init init(comm);
      m = std::make_shared<lesson::Mixed>();
    }
    zero::Config cfg = lesson::eager_release_config();
    cfg.reduce_bucket_size = bucket;
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = lesson::batch(2, comm.rank());
    engine.backward(mse_loss(engine(x), y));
    engine.reduce_gradients();
    if (bucket < 100) {
      EXPECT_GT(engine.stats().buckets_reduced, 3);
    }
    const auto& ps = engine.partitioned();
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor avg = zeros_like(full_grads[0][i]);
      for (int r = 0; r < N; ++r) avg = add(avg, full_grads[r][i]);
      avg = mul(avg, 1.0 / N).reshape({-1});
      const zero::Partition& part = zero::zero_param(ps[i].param)->part;
      int64_t valid = part.shard_valid(comm.rank());
      if (valid == 0) continue;
      EXPECT_CLOSE(zero::zero_param(ps[i].param)->grad_shard.narrow(0, 0, valid),
                   avg.narrow(0, part.shard_offset(comm.rank()), valid), 1e-5, 1e-6)
          << ps[i].name << " rank " << comm.rank() << " N=" << N;
    }
  });
}

TEST(Lesson06ReduceScatter, ShardIsSliceOfAverage) {
  for (int N : {1, 2, 3, 4}) check_shards(N, 500'000'000);
}

TEST(Lesson06ReduceScatter, SmallBucketsSameResult) {
  check_shards(3, 64);
}

TEST(Lesson06ReduceScatter, BucketIsPackedAndUnpackedByOneKernelCallEach) {
  for (int N : {1, 2, 4}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      // Four parameters whose sizes divide by every N (no padding to zero).
      std::vector<Tensor> params;
      for (int64_t n : {8, 12, 4, 16}) {
        Tensor p = zeros({n});
        zero::partition_param(p, comm, 0);
        zero::ZeroParam* z = zero::zero_param(p);
        z->grad_shard = zeros({z->part.shard_numel});
        p.set_grad(full({n}, 1.0 + comm.rank()));  // rank r's gradient: all r + 1
        params.push_back(p);
      }
      zero::GradReducer reducer(comm, /*bucket_elems=*/1'000'000, /*async=*/false);
      KernelProfile profile;
      for (const Tensor& p : params) reducer.add(p);
      reducer.flush();
      reducer.drain();
      EXPECT_EQ(lesson::kernel_calls(profile),
                (lesson::KernelCalls{{"multi_copy", N == 1 ? 1 : 2}}))
          << "N=" << N << ": one call lays the bucket out, one adds the result into the shards";
      const double mean = (N + 1) / 2.0;  // the average of 1 .. N
      for (const Tensor& p : params)
        EXPECT_TRUE(
            test::values_are(zero::zero_param(p)->grad_shard,
                             std::vector<double>(zero::zero_param(p)->part.shard_numel, mean)));
    });
  }
}
