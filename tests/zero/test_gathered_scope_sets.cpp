// What a GatheredParameters scope gathers, and when it lets go. A scope holds each tensor
// once, however often it is named: one all-gather of it, one gathered copy, one broadcast of
// a modifier's edit. The copy a scope gathered goes when the last scope holding it closes,
// in whatever order the scopes close, and when an exit fails (a broken communicator): a
// parameter is never left gathered, and held, for the rest of the run.
#include "zero/lesson_util.h"

using namespace zt;

namespace {

zero::ZeroParam& z_of(const Tensor& p) {
  return *zero::zero_param(p);
}

// The weight's whole value, as the ranks hold it now (a scope of its own).
std::vector<double> whole(const Tensor& p, comm::Communicator& comm) {
  zero::GatheredParameters g({p}, comm);
  return p.to_vector();
}

}  // namespace

// A tensor named twice is gathered once (the traffic and the memory of one copy), a
// modifier's edit of it is broadcast once, and it is released at the exit.
TEST(GatheredScopeSets, ATensorNamedTwiceIsGatheredOnce) {
  const int N = 2;
  comm::run_threads(N, [&](comm::Communicator& comm) {
    auto lin = lesson::partitioned<nn::Linear>(comm, 6, 4);  // weight: 24 elements, shards of 12
    const Tensor& w = lin->weight;
    comm.reset_counters();
    reset_peak_memory();
    {
      zero::GatheredParameters g({w, lin->bias, w}, comm, /*modifier_rank=*/0);
      const comm::CommCounters c = comm.counters();
      EXPECT_EQ(c[comm::Collective::kAllGather].calls, 1);
      EXPECT_EQ(c[comm::Collective::kAllGather].bytes, (N - 1) * (12 + 2) * 4)
          << "the weight's shard was sent twice";
      EXPECT_EQ(memory_stats().pk(MemTag::kGatheredParam), 2 * (24 + 4) * 4)
          << "at most the all-gather's buffer and one copy of each parameter";
      if (comm.rank() == 0) {
        autograd::NoGradGuard no_grad;
        w.fill_(3.0);
      }
      comm.reset_counters();
    }
    EXPECT_EQ(comm.counters()[comm::Collective::kBroadcast].calls, 2) << "weight and bias, once";
    EXPECT_EQ(z_of(w).status, zero::ParamStatus::kNotAvailable);
    EXPECT_EQ(z_of(w).holds, 0);
    EXPECT_EQ(memory_stats().cur(MemTag::kGatheredParam), 0);
    EXPECT_EQ(whole(w, comm), std::vector<double>(24, 3.0));
  });
}

// Named twice with a tensor of another dtype between (a batch of its own): the second
// mention found the first one's copy there already, and the copy was kept past the exit.
TEST(GatheredScopeSets, ATensorNamedTwiceAcrossGatherBatchesIsReleased) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    Tensor a = arange(0, 6), b = arange(0, 6);
    zero::partition_param(a, comm, 0);
    zero::partition_param(b, comm, 0, DType::bf16);
    {
      zero::GatheredParameters g({a, b, a}, comm);
      EXPECT_EQ(a.to_vector(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
    }
    EXPECT_EQ(z_of(a).status, zero::ParamStatus::kNotAvailable);
    EXPECT_EQ(z_of(b).status, zero::ParamStatus::kNotAvailable);
    EXPECT_EQ(memory_stats().cur(MemTag::kGatheredParam), 0);
  });
}

// Two scopes over one weight, the one that gathered it closed first (std::optional,
// unique_ptr, or an explicit exit()): the copy is released when the other one closes, not
// kept, held by nobody, for the rest of the run.
TEST(GatheredScopeSets, OverlappingScopesClosedOutOfOrderReleaseTheCopy) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto lin = lesson::partitioned<nn::Linear>(comm, 6, 4);
    const Tensor& w = lin->weight;
    auto first = std::make_unique<zero::GatheredParameters>(std::vector<Tensor>{w}, comm);
    auto second =
        std::make_unique<zero::GatheredParameters>(std::vector<Tensor>{w, lin->bias}, comm);
    first.reset();
    EXPECT_EQ(z_of(w).status, zero::ParamStatus::kAvailable) << "the second scope holds it";
    second.reset();
    EXPECT_EQ(z_of(w).status, zero::ParamStatus::kNotAvailable);
    EXPECT_EQ(z_of(lin->bias).status, zero::ParamStatus::kNotAvailable);
    EXPECT_EQ(memory_stats().cur(MemTag::kGatheredParam), 0);
  });
}

// A modifier scope whose exit fails (the communicator broke inside it, so the broadcast of
// the edits cannot run): the error comes out, and the scope still lets go of what it held
// and gathered, by exit() and by the destructor of a scope an exception unwinds alike.
TEST(GatheredScopeSets, AScopeWhoseExitFailsStillReleasesWhatItGathered) {
  for (bool unwinding : {false, true}) {
    SCOPED_TRACE(unwinding ? "unwinding" : "exit()");
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto lin = lesson::partitioned<nn::Linear>(comm, 6, 4);
      try {
        zero::GatheredParameters g(*lin, comm, /*modifier_rank=*/0);
        comm.abort("the communicator broke inside the scope");
        if (unwinding) throw std::runtime_error("an error inside the scope");
        EXPECT_TRUE(test::throws_with([&] { g.exit(); }, "broke inside the scope"));
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "an error inside the scope");
      }
      for (const Tensor& p : {lin->weight, lin->bias}) {
        EXPECT_EQ(z_of(p).holds, 0) << p.name();
        EXPECT_EQ(z_of(p).status, zero::ParamStatus::kNotAvailable) << p.name();
      }
      EXPECT_EQ(memory_stats().cur(MemTag::kGatheredParam), 0);
    });
  }
}

// A read-only scope copies at entry what its exit may have to put back (at one rank, the
// gathered parameter is its shard itself). A memory limit that refuses the copy fails the
// scope's construction, and what it gathered and held goes with it.
TEST(GatheredScopeSets, AScopeWhoseEntryCopyIsRefusedHoldsNothing) {
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto lin = lesson::partitioned<nn::Linear>(comm, 6, 4);
    current_ledger()->set_limit(Device::cpu(), memory_stats().total_current + 8);
    EXPECT_THROW(zero::GatheredParameters g(*lin, comm), OutOfMemoryError);
    current_ledger()->set_limit(Device::cpu(), 0);
    for (const Tensor& p : {lin->weight, lin->bias}) {
      EXPECT_EQ(z_of(p).holds, 0) << p.name();
      EXPECT_EQ(z_of(p).status, zero::ParamStatus::kNotAvailable) << p.name();
    }
  });
}

// A parameter partitioned over 2 ranks, named to a scope over a communicator of 1 (a model
// of another run, another engine's group): refused, naming it and both rank counts. The
// gather would have taken the one-rank shard for the whole parameter, reading past it.
TEST(GatheredScopeSets, AParameterPartitionedOverAnotherRankCountIsRefused) {
  Tensor p;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    Tensor t = arange(0, 6);
    t.set_name("w");
    zero::partition_param(t, comm, 0);
    if (comm.rank() == 0) p = t;
  });
  comm::run_threads(1, [&](comm::Communicator& comm) {
    EXPECT_TRUE(test::throws_with([&] { zero::GatheredParameters g({p}, comm); },
                                  "'w' is partitioned over 2 ranks, as rank 0; this "
                                  "communicator has 1"));
    EXPECT_EQ(z_of(p).holds, 0);
    EXPECT_EQ(z_of(p).status, zero::ParamStatus::kNotAvailable);
  });
}
