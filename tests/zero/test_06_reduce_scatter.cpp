// Lesson 6 — gradient reduce-scatter.
// Invariant: after backward, rank r's fp32 gradient shard of each parameter equals the
// r-th slice of the AVERAGE over ranks of the full gradients each rank computed on its
// own data — one reduce-scatter per bucket, with no rank ever holding the averaged full
// gradient, and each full gradient freed as soon as it is laid out into its bucket
// (AtMostTwoBucketsInFlight). Small buckets (many reduce-scatters) give the same result as
// one. Laying a bucket out is one kernel call (multi_copy_, plus one fill per padded tail:
// the zeros past a parameter's end in each rank's slot) and writing its result into the
// shards one more (multi_copy_ for a window's first gradient of a shard, multi_add_ after:
// the multi_copy kernel with accumulate on; the profile counts both as "multi_copy"),
// whatever the number of parameters and ranks (one launch each on a GPU). At most two
// buckets are in flight at once (GradReducer::kMaxInFlight): with overlap_comm, backward
// goes on while they reduce, yet the buckets' memory stays bounded.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "zero/lesson_util.h"

using namespace zt;

// Reduces one backward of Mixed on N ranks with buckets of `bucket` elements and checks
// every shard against the average of plain replicas' gradients.
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
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    zero::Config cfg = lesson::eager_release_config();
    cfg.reduce_bucket_size = bucket;
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = lesson::batch(2, comm.rank());
    engine.backward(mse_loss(engine(x), y));
    engine.reduce_gradients();
    const auto& ps = engine.partitioned();
    // A bucket closes when the next gradient would overflow it; a gradient larger than the
    // bucket gets one of its own.
    int64_t total = 0, larger = 0;
    for (const auto& mp : ps) {
      const int64_t n = zero::zero_param(mp.param)->part.padded_numel();
      total += n;
      larger += n > bucket ? 1 : 0;
    }
    if (total <= bucket) {
      EXPECT_EQ(engine.stats().buckets_reduced, 1)
          << "everything fits in one bucket (at one rank: one flush, written in place)";
    } else {
      EXPECT_GT(engine.stats().buckets_reduced, larger)
          << "one bucket per gradient larger than " << bucket << ", more for the small ones";
    }
    for (size_t i = 0; i < ps.size(); ++i) {
      EXPECT_FALSE(ps[i].param.grad().defined()) << ps[i].name << ": handed to the reducer";
      Tensor avg = zeros_like(full_grads[0][i]);
      for (int r = 0; r < N; ++r) avg = add(avg, full_grads[r][i]);
      avg = mul(avg, 1.0 / N);
      const zero::ZeroParam* z = zero::zero_param(ps[i].param);
      EXPECT_TRUE(lesson::shard_is_slice(z->grad_shard, z->part, comm.rank(), avg, 1e-5, 1e-6))
          << ps[i].name << " rank " << comm.rank() << " N=" << N;
    }
  });
}

// Flat parameters of the given sizes, partitioned, each with a gradient shard to add into
// and rank r's full gradient: every element r + 1 (tagged as an activation, as backward's
// gradients are, so that a test can see them freed).
static std::vector<Tensor> with_rank_gradients(comm::Communicator& comm,
                                               const std::vector<int64_t>& sizes) {
  std::vector<Tensor> params;
  for (int64_t n : sizes) {
    Tensor p = zeros({n});
    zero::partition_param(p, comm, 0);
    zero::ZeroParam* z = zero::zero_param(p);
    z->grad_shard = zeros({z->part.shard_numel});
    MemTagScope tag(MemTag::kActivation);
    p.set_grad(full({n}, 1.0 + comm.rank()));
    params.push_back(p);
  }
  return params;
}

// Reduces `params` in one bucket, counting the kernel calls it takes.
static lesson::KernelCalls reduce_in_one_bucket(comm::Communicator& comm,
                                                const std::vector<Tensor>& params) {
  zero::GradReducer reducer(comm, /*bucket_elems=*/1'000'000, /*async=*/false);
  KernelProfile profile;
  for (const Tensor& p : params) reducer.add(p);
  reducer.flush();
  reducer.drain();
  return lesson::kernel_calls(profile);
}

TEST(Lesson06ReduceScatter, ShardIsSliceOfAverage) {
  for (int N : {1, 2, 3, 4}) check_shards(N, 500'000'000);
}

TEST(Lesson06ReduceScatter, SmallBucketsSameResult) {
  check_shards(3, 64);  // smaller than several of Mixed's gradients (conv2's weight: 216)
}

TEST(Lesson06ReduceScatter, BucketIsPackedAndUnpackedByOneKernelCallEach) {
  for (int N : {1, 2, 4}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      // Four parameters whose sizes divide by every N (no padding to zero).
      const std::vector<Tensor> params = with_rank_gradients(comm, {8, 12, 4, 16});
      // One rank adds its gradients into the shards at once: no bucket to lay out
      // (Lesson04GatherRelease.AtOneRankTheGatheredParameterIsItsShard).
      EXPECT_EQ(reduce_in_one_bucket(comm, params),
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

TEST(Lesson06ReduceScatter, EachPaddedTailCostsOneFill) {
  for (int N : {2, 3, 4}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      // 5 and 7 elements leave a padded tail on the last rank(s) at every N here (5 over
      // 4 ranks: 2 + 2 + 1 + 0, two tails); 12 divides evenly. Each (parameter, rank) slot
      // that is not full gets its own zero fill.
      const std::vector<Tensor> params = with_rank_gradients(comm, {5, 12, 7});
      int64_t padded_tails = 0;
      for (const Tensor& p : params) {
        const zero::Partition& part = zero::zero_param(p)->part;
        for (int r = 0; r < N; ++r) padded_tails += part.shard_valid(r) < part.shard_numel;
      }
      ASSERT_GT(padded_tails, 0);
      EXPECT_EQ(reduce_in_one_bucket(comm, params),
                (lesson::KernelCalls{{"multi_copy", 2}, {"fill", padded_tails}}))
          << "N=" << N << ": one layout, one add, and a fill per padded tail";
      const double mean = (N + 1) / 2.0;
      for (const Tensor& p : params) {
        const zero::ZeroParam* z = zero::zero_param(p);
        const int64_t valid = z->part.shard_valid(comm.rank());
        std::vector<double> want(z->part.shard_numel, 0.0);  // padding stays zero
        std::fill(want.begin(), want.begin() + valid, mean);
        EXPECT_TRUE(test::values_are(z->grad_shard, want)) << "rank " << comm.rank();
      }
    });
  }
}

// The bound on buckets in flight is what keeps overlap from costing memory: a rank that
// runs ahead (here rank 0: rank 1 starts late, so none of rank 0's reduce-scatters can
// finish) waits for its oldest bucket before laying out a third, instead of holding every
// bucket of the backward. Nor does a bucket in flight keep the full gradients it was laid
// out from: they are freed as soon as their slices are copied into it.
TEST(Lesson06ReduceScatter, AtMostTwoBucketsInFlight) {
  const int N = 2;
  const int64_t n = 64;  // eight parameters of 64 elements, one per bucket
  std::atomic<bool> measured{false};
  comm::run_threads(N, [&](comm::Communicator& comm) {
    const int64_t before = memory_stats().cur(MemTag::kActivation);
    const std::vector<Tensor> params = with_rank_gradients(comm, std::vector<int64_t>(8, n));
    zero::GradReducer reducer(comm, /*bucket_elems=*/n, /*async=*/true);
    reset_peak_memory();
    if (comm.rank() == 1) {
      for (int ms = 0; !measured && ms < 10'000; ++ms)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      reducer.add(params[i]);
      if (comm.rank() == 0 && i == 2) {
        // The first two gradients are in buckets in flight (rank 1 has not started), the
        // third is queued and the other five not added yet: only those six are still held.
        EXPECT_EQ(memory_stats().cur(MemTag::kActivation) - before,
                  static_cast<int64_t>(params.size() - 2) * n * 4)
            << "a bucket in flight holds its full gradients";
        measured = true;
      }
    }
    reducer.flush();
    const int64_t peak = memory_stats().pk(MemTag::kCommBuffer);
    reducer.drain();
    const int64_t shard = n / N, bucket_bytes = (N * shard + shard) * 4;  // input + output
    if (comm.rank() == 0) {
      EXPECT_LE(peak, (zero::GradReducer::kMaxInFlight + 1) * bucket_bytes)
          << "two buckets in flight and the one being laid out, not all eight";
    }
    for (const Tensor& p : params)
      EXPECT_TRUE(
          test::values_are(zero::zero_param(p)->grad_shard, std::vector<double>(shard, 1.5)));
  });
}
