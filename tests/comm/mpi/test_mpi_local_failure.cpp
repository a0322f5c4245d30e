// MpiComm when a collective fails on one rank's own side (not in MPI): its memory limit
// refuses the scratch of a reduce-scatter. Before any MPI call of the collective the
// failure is as if it was never issued, and a retry on every rank works. After its first
// MPI call (the check's all-reduce) the other ranks are inside the collective, and MPI
// would pair this rank's next calls with theirs (garbage, or a hang): the communicator is
// then unusable on that rank, and its next call says so at once, naming the failure.
#include <gtest/gtest.h>

#include <chrono>

#include "common/test_util.h"
#include "core/allocator.h"
#include "core/ops.h"
#include "zero/comm/mpi_comm.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {

// A communicator whose communication thread charges `ledger` (its scratch tensors).
std::unique_ptr<MpiComm> make_comm(const std::shared_ptr<MemoryLedger>& ledger) {
  LedgerScope scope(ledger);  // the communication thread takes the ledger current here
  auto c = std::make_unique<MpiComm>();
  c->set_timeout(20s);
  return c;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(MpiCommLocalFailure, AFailureAfterTheFirstMpiCallMakesTheCommunicatorUnusable) {
  auto ledger = std::make_shared<MemoryLedger>("comm thread");
  auto c = make_comm(ledger);
  const int n = c->size();
  c->barrier();  // #0
  Tensor in = ones({4 * n}), out = zeros({4});
  if (c->rank() == 0) {
    ledger->set_limit(Device::cpu(), 1);  // refuses the scratch, after the check's all-reduce
    EXPECT_THROW(c->reduce_scatter(out, in, ReduceOp::kSum), OutOfMemoryError);  // #1
    ledger->set_limit(Device::cpu(), 0);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string err = test::error_of([&] { c->barrier(); });  // #2
    EXPECT_LT(seconds_since(t0), 5.0) << "the barrier waited instead of failing at once";
    EXPECT_NE(err.find("barrier #2 on rank 0 aborted because the communicator is unusable since "
                       "reduce_scatter #1 (f32 x 4, sum) on rank 0 failed on this rank"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("comm thread is out of memory"), std::string::npos) << err;
  } else {
    // Rank 0 never joins the all-to-all: these ranks wait for it until their deadline, and
    // do not take its next collective for it.
    c->set_timeout(1s);
    EXPECT_TRUE(test::throws_with([&] { c->reduce_scatter(out, in, ReduceOp::kSum); },
                                  "timed out after 1000 ms"));
  }
}

// A failure before the collective's first MPI call (the check is off: the scratch is the
// first thing it does) on every rank alike is retried on every rank; so is a call that every
// rank's argument checks refuse.
TEST(MpiCommLocalFailure, AFailureBeforeAnyMpiCallOnEveryRankCanBeRetried) {
  auto ledger = std::make_shared<MemoryLedger>("comm thread");
  auto c = make_comm(ledger);
  c->set_check_collectives(false);
  const int n = c->size();
  Tensor in = ones({4 * n}), out = zeros({4});
  ledger->set_limit(Device::cpu(), 1);
  EXPECT_THROW(c->reduce_scatter(out, in, ReduceOp::kSum), OutOfMemoryError);
  ledger->set_limit(Device::cpu(), 0);
  Tensor wrong = zeros({3});
  EXPECT_TRUE(
      test::throws_with([&] { c->reduce_scatter(wrong, in, ReduceOp::kSum); }, "pad the input"));
  c->reduce_scatter(out, in, ReduceOp::kSum);
  EXPECT_EQ(out.to_vector(), std::vector<double>(4, n));
  c->barrier();
}
