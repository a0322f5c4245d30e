// Lesson 16 — one all-gather per module.
// Invariant: the parameters a module owns directly are gathered by ONE all-gather (as
// DeepSpeed's coalesced all-gather per submodule; FSDP2 goes further and gathers a whole
// fully_shard unit, such as a transformer block, at once). Each rank sends its shards side by side
// (S elements); the collective lays the ranks' pieces one after another, so parameter k's slice
// from rank r sits at r * S + offset[k]. Copying each parameter's slices out in rank order gives
// back its full value; the traffic is the same as one all-gather per parameter.
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson16GroupGather, FlatBufferLayoutAndCopyOut) {
  const int N = 3;
  comm::run_threads(N, [&](comm::Communicator& comm) {
    // 7, 4 and 1 elements over 3 ranks: shards of 3, 2 and 1 elements, S = 6.
    std::vector<Tensor> full = {arange(0, 7), arange(100, 104).reshape({2, 2}),
                                from_vector({7.5}, {1})};
    std::vector<Tensor> params;
    std::vector<zero::ZeroParam*> group;
    for (const Tensor& f : full) {
      Tensor p = f.clone();
      zero::partition_param(p, comm, 0);
      params.push_back(p);
      group.push_back(zero::zero_param(p));
    }
    comm.reset_counters();
    auto profile = std::make_unique<KernelProfile>();
    EXPECT_EQ(zero::gather_group(group, comm), N * (3 + 2 + 1))
        << "padded elements gathered: N x each shard, padding included";
    EXPECT_EQ(lesson::kernel_calls(*profile), (lesson::KernelCalls{{"multi_copy", 1}}))
        << "the three shards are laid side by side by one kernel call";
    // One collective in flight, shared by the three parameters.
    std::shared_ptr<zero::GroupGather> g = group[0]->flight;
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(group[1]->flight, g);
    EXPECT_EQ(group[2]->flight, g);
    EXPECT_EQ(g->piece, 6);
    EXPECT_EQ(g->offsets, (std::vector<int64_t>{0, 3, 5}));
    comm::CommCounters c = comm.counters();
    EXPECT_EQ(c[comm::Collective::kAllGather].calls, 1);
    EXPECT_EQ(c[comm::Collective::kAllGather].bytes, (N - 1) * 6 * 4);

    // The flat buffer, rank-major: [r0: p0 s0 | p1 s0 | p2 s0][r1: ...][r2: ...].
    if (g->work) g->work->wait();
    std::vector<double> flat = g->flat.to_vector();
    ASSERT_EQ(flat.size(), 18u);
    for (size_t k = 0; k < full.size(); ++k) {
      const zero::Partition& part = group[k]->part;
      std::vector<double> value = full[k].to_vector();
      for (int r = 0; r < N; ++r)
        for (int64_t i = 0; i < part.shard_valid(r); ++i)
          EXPECT_EQ(flat[r * 6 + g->offsets[k] + i], value[part.shard_offset(r) + i])
              << "parameter " << k << " slice of rank " << r;
    }

    // wait() copies every member out, all six slices (3 + 2 + 1) in one kernel call (one
    // launch on a GPU, however many members and ranks); the flat buffer is gone.
    profile->clear();
    group[1]->wait();
    EXPECT_EQ(lesson::kernel_calls(*profile), (lesson::KernelCalls{{"multi_copy", 1}}));
    profile.reset();
    for (size_t k = 0; k < full.size(); ++k) {
      EXPECT_EQ(group[k]->status, zero::ParamStatus::kAvailable);
      EXPECT_EQ(group[k]->flight, nullptr);
      EXPECT_CLOSE(params[k], full[k], 0, 0) << "parameter " << k;
    }
    for (zero::ZeroParam* z : group) z->release();
    EXPECT_EQ(memory_stats().cur(MemTag::kGatheredParam), 0);
  });
}

TEST(Lesson16GroupGather, EngineGathersEachModuleOnce) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m = lesson::partitioned<lesson::Mixed>(comm);
    int groups = 0;  // modules owning parameters themselves (a Linear: weight and bias)
    for (auto& [path, mod] : m->named_modules()) groups += mod->local_parameters().empty() ? 0 : 1;
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    comm.reset_counters();
    auto [x, y] = lesson::batch(2, comm.rank());
    engine.backward(mse_loss(engine(x), y));
    engine.step();
    EXPECT_EQ(comm.counters()[comm::Collective::kAllGather].calls, 2 * groups)
        << "one all-gather per module before forward and one before backward";
    EXPECT_EQ(engine.stats().gathers_issued, 2 * groups);
  });
}
