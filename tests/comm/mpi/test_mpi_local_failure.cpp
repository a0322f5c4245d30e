// MpiComm when a collective fails on one rank's own side (not in MPI): its memory limit
// refuses the scratch of a reduce-scatter or an all-reduce. A collective makes its scratch
// before any MPI call, the check's included, so such a failure is as if it was never
// issued: where every rank failed alike a retry works, and a rank that failed alone meets
// the others' collective with its next one, a mismatch every rank reports. (A failure after
// the first MPI call leaves the communicator unusable on that rank: MPI would pair its next
// calls with the others' pending ones.)
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

// Rank 0's memory limit alone refuses the scratch of a reduce-scatter, which comes before
// any MPI call of it: the other ranks are in the collective's check, where rank 0's next
// collective meets them. Every rank fails there at once, naming what each called, rather
// than pairing rank 0's later calls with the others' reduce-scatter or waiting for the
// deadline.
TEST(MpiCommLocalFailure, AnOutOfMemoryOnOneRankFailsEveryRankAtItsNextCollective) {
  auto ledger = std::make_shared<MemoryLedger>("comm thread");
  auto c = make_comm(ledger);
  const int n = c->size();
  c->barrier();  // #0
  Tensor in = ones({4 * n}), out = zeros({4});
  const auto t0 = std::chrono::steady_clock::now();
  std::string err;
  if (c->rank() == 0) {
    ledger->set_limit(Device::cpu(), 1);
    EXPECT_THROW(c->reduce_scatter(out, in, ReduceOp::kSum), OutOfMemoryError);  // #1
    ledger->set_limit(Device::cpu(), 0);
    err = test::error_of([&] { c->barrier(); });  // #2
  } else {
    err = test::error_of([&] { c->reduce_scatter(out, in, ReduceOp::kSum); });  // #1
  }
  EXPECT_LT(seconds_since(t0), 10.0) << "a rank waited for its deadline: " << err;
  EXPECT_NE(err.find("mismatched collectives"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 0 called barrier"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1 called reduce_scatter (f32 x 4, sum)"), std::string::npos) << err;
}

// The same refusal on every rank alike, with the check on: no MPI call of the collective was
// made anywhere (the check comes after the scratch), so every rank retries, as thread ranks
// do. The all-reduce's scratch, split in pieces by a low chunk limit, is made before too.
TEST(MpiCommLocalFailure, AnOutOfMemoryOnEveryRankAlikeCanBeRetried) {
  auto ledger = std::make_shared<MemoryLedger>("comm thread");
  auto c = make_comm(ledger);
  ASSERT_TRUE(c->checks_collectives());
  const int n = c->size();
  Tensor in = ones({4 * n}), out = zeros({4}), t = ones({10});
  c->set_chunk_limit(4);
  ledger->set_limit(Device::cpu(), 1);
  EXPECT_THROW(c->reduce_scatter(out, in, ReduceOp::kSum), OutOfMemoryError);
  EXPECT_THROW(c->all_reduce(t, ReduceOp::kSum), OutOfMemoryError);
  ledger->set_limit(Device::cpu(), 0);
  EXPECT_EQ(c->abort_reason(), "");
  c->reduce_scatter(out, in, ReduceOp::kSum);
  EXPECT_EQ(out.to_vector(), std::vector<double>(4, n));
  c->all_reduce(t, ReduceOp::kSum);
  EXPECT_EQ(t.to_vector(), std::vector<double>(10, n));
  c->barrier();
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
