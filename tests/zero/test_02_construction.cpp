// Lesson 2 — construction under zero::Init.
// Invariant: a parameter registered inside Init is partitioned at once: every rank keeps
// exactly its slice of RANK 0's initialized value (whatever its own RNG produced), and
// the full tensor is freed before the next parameter is created, so building a model
// never holds more than one full parameter (the gathered-param peak is at most the
// largest parameter; rank 0 also holds, for the scatter, one padded copy of the parameter
// being partitioned, counted as a comm buffer). An initialization of one's own after
// construction runs module by module, never holding the whole model (apply_gathered).
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson02Construction, EachRankHoldsItsSliceOfRank0sValue) {
  manual_seed(7);
  auto reference = std::make_shared<lesson::Mixed>();  // what rank 0 will build
  for (int N : {1, 2, 3, 4}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(7 + 100 * comm.rank());  // ranks disagree on purpose; rank 0 matches
      zero::Init init(comm);
      auto m = std::make_shared<lesson::Mixed>();
      auto ref = reference->named_parameters();
      auto got = m->named_parameters();
      ASSERT_EQ(ref.size(), got.size());
      for (size_t i = 0; i < got.size(); ++i) {
        zero::ZeroParam* z = zero::zero_param(got[i].second);
        ASSERT_NE(z, nullptr) << got[i].first;
        EXPECT_EQ(z->status, zero::ParamStatus::kNotAvailable);
        EXPECT_FALSE(got[i].second.has_storage());
        EXPECT_EQ(got[i].second.sizes(), ref[i].second.sizes()) << "full shape is kept";
        int64_t valid = z->part.shard_valid(comm.rank());
        if (valid < z->part.shard_numel) {  // (a rank may hold only padding)
          Tensor pad = z->shard.narrow(0, valid, z->part.shard_numel - valid);
          EXPECT_EQ(sum(abs(pad)).item(), 0.0) << "padding is zero";
        }
        EXPECT_TRUE(lesson::shard_is_slice(z->shard, z->part, comm.rank(), ref[i].second.detach()))
            << got[i].first << " on rank " << comm.rank();
      }
    });
  }
}

TEST(Lesson02Construction, NeverMoreThanOneFullParameterAlive) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    reset_peak_memory();
    int64_t before = memory_stats().cur(MemTag::kGatheredParam);
    std::shared_ptr<lesson::Mixed> m;
    {
      zero::Init init(comm);
      m = std::make_shared<lesson::Mixed>();
    }
    int64_t largest = 0;
    for (auto& [n, p] : m->named_parameters())
      largest = std::max<int64_t>(largest, p.numel() * static_cast<int64_t>(dtype_size(p.dtype())));
    MemoryCounters c = memory_stats();
    // The largest parameter was whole once (so the count sees the full tensors), and no
    // other one beside it.
    EXPECT_EQ(c.pk(MemTag::kGatheredParam) - before, largest);
    if (comm.rank() == 0) {  // the scatter's staging copy, padded, one parameter at a time
      EXPECT_LE(c.pk(MemTag::kCommBuffer), largest + (comm.size() - 1) * 4)
          << "at most N - 1 padding";
    }
    EXPECT_EQ(c.cur(MemTag::kGatheredParam), before) << "every full tensor was freed";
    int64_t shard_bytes = 0;
    for (auto& [n, p] : m->named_parameters()) {
      const Tensor& shard = zero::zero_param(p)->shard;
      shard_bytes += shard.numel() * static_cast<int64_t>(dtype_size(shard.dtype()));
    }
    EXPECT_EQ(c.cur(MemTag::kParamShard), shard_bytes);
  });
}

// A custom initialization (GPT-2's N(0, 0.02), say) cannot run after construction on the
// model's own tensors: under Init they are shards. zero::apply_gathered runs it module by
// module, each module's own parameters gathered whole for its call and rank 0's result
// re-partitioned, so the whole model is never held, and the values are those of the same
// initialization applied to a model built without partitioning.
TEST(Lesson02Construction, ACustomInitializationRunsOneModuleAtATime) {
  const auto init = [](const std::string&, nn::Module& m) {
    for (const auto& [name, p] : m.local_parameters())
      nn::init::normal_(p, name == "bias" ? 1.0 : 0.0, 0.02);
  };
  manual_seed(7);
  auto reference = std::make_shared<lesson::Mixed>();
  for (const auto& [name, m] : reference->named_modules()) init(name, *m);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(7 + 100 * comm.rank());  // rank 0's values win, as at construction
    auto m = lesson::partitioned<lesson::Mixed>(comm);
    const int64_t before = memory_stats().cur(MemTag::kGatheredParam);
    int calls = 0;
    zero::apply_gathered(*m, comm, [&](const std::string& name, nn::Module& module) {
      int64_t own = 0;
      for (const auto& [local, p] : module.local_parameters())
        own += p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
      EXPECT_EQ(memory_stats().cur(MemTag::kGatheredParam) - before, own)
          << "only '" << name << "' is whole while it is initialized";
      init(name, module);
      ++calls;
    });
    EXPECT_EQ(calls, static_cast<int>(m->named_modules().size()));
    EXPECT_EQ(memory_stats().cur(MemTag::kGatheredParam), before) << "everything released";
    const auto got = lesson::full_parameters(*m, comm);
    const auto want = reference->named_parameters();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_CLOSE(got[i].second, want[i].second, 0.0, 0.0) << got[i].first;
  });
}
