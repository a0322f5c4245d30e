// Lesson 17 — the trace and the gradient buckets, as plain data structures.
// Invariant (trace): the first step records which module groups fetch, in order, with
// their sizes; later steps walk it. upcoming(E) is the prefetch window: the groups
// expected next whose sizes add up to at most E elements. reuse_distance(id) is how many
// elements are fetched before `id` comes back (-1: not this step) — a released group
// that returns within stage3_max_reuse_distance stays gathered. A fetch out of order
// invalidates the trace; the next step records again.
// Invariant (buckets): lesson 6 showed that a bucket's reduce-scatter hands each rank the
// average of its slices; here is the layout that makes it so. The reducer lays a bucket
// out rank-major,
//   [ rank 0: p slice 0 | q slice 0 ][ rank 1: p slice 1 | q slice 1 ]
// so that the reduce-scatter's piece r is every parameter's slice r (ABucketIsLaidOutRankMajor
// builds one by hand). A parameter that would overflow reduce_bucket_size starts a new bucket, and
// one larger than the bucket gets a bucket of its own: a parameter is never split across buckets
// (why lesson 6's 64-element buckets still reduce conv2's 216-element weight).
#include "zero/lesson_util.h"

using namespace zt;
using State = zero::Trace::State;

TEST(Lesson17Trace, UpcomingAndReuseDistance) {
  zero::Trace t;
  // Forward through groups 0, 1, 2, backward through 2, 1, 0 (elements per fetch).
  const std::vector<std::pair<int, int64_t>> step = {{0, 100}, {1, 50}, {2, 30},
                                                     {2, 30},  {1, 50}, {0, 100}};
  for (auto [id, elems] : step) EXPECT_TRUE(t.on_fetch(id, elems));
  EXPECT_EQ(t.state(), State::kRecording);
  EXPECT_TRUE(t.end_step()) << "a recording just finished";
  EXPECT_EQ(t.state(), State::kValid);
  EXPECT_EQ(t.ids(), (std::vector<int>{0, 1, 2, 2, 1, 0}));

  // The window is measured in elements, nearest first.
  EXPECT_EQ(t.upcoming(1'000), (std::vector<int>{0, 1, 2, 2, 1, 0}));
  EXPECT_EQ(t.upcoming(150), (std::vector<int>{0, 1}));
  EXPECT_TRUE(t.upcoming(99).empty()) << "the next group alone does not fit";

  EXPECT_TRUE(t.on_fetch(0, 100));
  EXPECT_EQ(t.upcoming(80), (std::vector<int>{1, 2}));
  // After group 0's forward: 1, 2, 2, 1 (160 elements) are fetched before it returns.
  EXPECT_EQ(t.reuse_distance(0), 50 + 30 + 30 + 50);
  EXPECT_EQ(t.reuse_distance(1), 0) << "group 1 is next";
  EXPECT_EQ(t.reuse_distance(7), -1) << "not fetched again this step";
  EXPECT_TRUE(t.on_fetch(1, 50));
  EXPECT_TRUE(t.on_fetch(2, 30));
  EXPECT_EQ(t.reuse_distance(2), 0) << "its backward follows its forward at once";

  // Out of order: the trace is invalid (no window, no reuse), then records again.
  EXPECT_FALSE(t.on_fetch(0, 100));
  EXPECT_EQ(t.state(), State::kInvalid);
  EXPECT_EQ(t.invalidations(), 1);
  EXPECT_TRUE(t.upcoming(1'000).empty());
  EXPECT_EQ(t.reuse_distance(1), -1);
  EXPECT_FALSE(t.end_step());
  EXPECT_EQ(t.state(), State::kRecording);
  EXPECT_TRUE(t.ids().empty());
}

TEST(Lesson17Buckets, OneReduceScatterPerBucket) {
  const int N = 2;
  for (int64_t bucket : {int64_t{1} << 20, int64_t{6}, int64_t{3}}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      // p: 5 elements (shards of 3, padded to 6), q: 3 elements (shards of 2, padded 4).
      // Rank r's gradients are r + 1 times the base values; the average is 1.5 times.
      std::vector<std::vector<double>> base = {{1, 2, 3, 4, 5}, {10, 20, 30}};
      std::vector<Tensor> params;
      for (const auto& b : base) {
        Tensor p = zeros({static_cast<int64_t>(b.size())});
        p.set_name(params.empty() ? "p" : "q");
        p.set_requires_grad(true);
        zero::partition_param(p, comm, 0);
        zero::zero_param(p)->grad_shard = zeros({zero::zero_param(p)->part.shard_numel});
        std::vector<double> g = b;
        for (double& v : g) v *= comm.rank() + 1;
        p.set_grad(from_vector(g, {static_cast<int64_t>(g.size())}));
        params.push_back(p);
      }
      comm.reset_counters();
      zero::GradReducer reducer(comm, bucket, /*async=*/true);
      for (const Tensor& p : params) reducer.add(p);
      reducer.flush();
      reducer.drain();
      // Both fit in a large bucket (S = 3 + 2); with 6 elements, q (4 padded) would
      // overflow p's bucket (6 padded) and goes into a second one; with 3, each is larger
      // than a bucket and gets one of its own, whole.
      int64_t expect_buckets = bucket >= 10 ? 1 : 2;
      EXPECT_EQ(reducer.buckets(), expect_buckets);
      // What went into each bucket, in order ("|": a bucket issued).
      EXPECT_EQ(reducer.layout(), expect_buckets == 1 ? "p\nq\n|\n" : "p\n|\nq\n|\n");
      comm::CommCounters c = comm.counters();
      EXPECT_EQ(c[comm::Collective::kReduceScatter].calls, expect_buckets);
      EXPECT_EQ(c[comm::Collective::kReduceScatter].bytes, (N - 1) * (3 + 2) * 4)
          << "the same traffic however the buckets fall";
      for (size_t k = 0; k < params.size(); ++k) {
        zero::ZeroParam* z = zero::zero_param(params[k]);
        int64_t off = z->part.shard_offset(comm.rank()), valid = z->part.shard_valid(comm.rank());
        std::vector<double> got = z->grad_shard.to_vector();
        for (int64_t i = 0; i < valid; ++i)
          EXPECT_DOUBLE_EQ(got[i], 1.5 * base[k][off + i]) << "parameter " << k << " [" << i << "]";
        for (int64_t i = valid; i < z->part.shard_numel; ++i) EXPECT_EQ(got[i], 0) << "padding";
        EXPECT_FALSE(params[k].grad().defined()) << "the reducer took the full gradient";
      }
    });
  }
}

// What the reducer does with a bucket of p and q, by hand: rank r's part holds slice r of
// each parameter side by side (padding zero), so one reduce-scatter hands rank r its
// slices of both averages at once (the reducer's own layout is checked by
// OneReduceScatterPerBucket above).
TEST(Lesson17Buckets, ABucketIsLaidOutRankMajor) {
  const int N = 2;
  comm::run_threads(N, [&](comm::Communicator& comm) {
    // Rank r's full gradients, r + 1 times the base values: p 5 elements (slices of 3),
    // q 3 elements (slices of 2), so S = 3 + 2 elements per rank.
    const double f = comm.rank() + 1;
    const Tensor p = mul(from_vector({1, 2, 3, 4, 5}, {5}), f);
    const Tensor q = mul(from_vector({10, 20, 30}, {3}), f);
    // [ rank 0: p[0:3] | q[0:2] ][ rank 1: p[3:5] pad | q[2:3] pad ]
    Tensor bucket = zeros({N * 5});
    bucket.narrow(0, 0, 3).copy_(p.narrow(0, 0, 3));
    bucket.narrow(0, 3, 2).copy_(q.narrow(0, 0, 2));
    bucket.narrow(0, 5, 2).copy_(p.narrow(0, 3, 2));
    bucket.narrow(0, 8, 1).copy_(q.narrow(0, 2, 1));
    Tensor mine = zeros({5});
    comm.reduce_scatter(mine, bucket, comm::ReduceOp::kAvg);
    // The averages are 1.5 times the base values; rank r gets [p slice r | q slice r].
    const std::vector<std::vector<double>> want = {{1.5, 3, 4.5, 15, 30}, {6, 7.5, 0, 45, 0}};
    EXPECT_TRUE(test::values_are(mine, want[comm.rank()])) << "rank " << comm.rank();
  });
}
