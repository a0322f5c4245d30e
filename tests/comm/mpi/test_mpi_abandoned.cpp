// MpiComm after a collective that rank 0 gave up on (its wait timed out, the caller caught
// the error and let its tensor go) while the other ranks were late: MPI cannot cancel the
// request, so when they arrive and MPI makes progress their data lands in memory the
// abandoned request still holds, never in a tensor allocated since; and the communicator
// is still destroyed cleanly on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "common/test_util.h"
#include "zero/comm/mpi_comm.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {

// Elements of `t` that are not zero.
int64_t nonzero(const Tensor& t) {
  int64_t k = 0;
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) k += p[i] != 0.0f;
  return k;
}

}  // namespace

TEST(MpiComm, AnAbandonedCollectiveNeverWritesIntoNewMemory) {
  const int64_t n = int64_t{1} << 18;  // 1 MiB of f32: past MPI's eager sends
  // Whole: the broadcast is one MPI call. Split: in two calls (a lowered chunk limit) and
  // the late ranks broadcast half, which pairs with rank 0's first call.
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split in two calls" : "one call");
    auto c = std::make_unique<MpiComm>();
    c->set_timeout(20s);
    c->set_check_collectives(false);  // the broadcast itself is the abandoned request
    if (split) c->set_chunk_limit(n / 2);
    c->barrier();
    if (c->rank() == 0) {
      c->set_timeout(300ms);
      Tensor t = zeros({n});
      EXPECT_TRUE(test::throws_with([&] { c->broadcast(t, 1); }, "timed out after 300 ms"));
      t = Tensor();  // let go, as a caller does after an error
      // New memory, half t's size: malloc's first pick is t's block (an aligned block of
      // t's own size needs a little more than t's block).
      Tensor u = zeros({n / 2});
      // The late ranks' broadcast completes (on the others) while this waits, MPI's
      // progress writing it into the abandoned request's memory.
      MPI_Barrier(MPI_COMM_WORLD);
      EXPECT_EQ(nonzero(u), 0) << "a late rank's broadcast landed in a new tensor";
    } else {
      std::this_thread::sleep_for(600ms);
      Tensor t = full({split ? n / 2 : n}, 7.0);
      c->broadcast(t, 1);
      EXPECT_EQ(nonzero(t), t.numel());
      MPI_Barrier(MPI_COMM_WORLD);
    }
    c.reset();  // rank 0's abandoned request is done: its memory goes with the communicator
  }
  // MPI still works for new communicators.
  auto d = std::make_unique<MpiComm>();
  d->set_timeout(20s);
  Tensor one = ones({4});
  d->all_reduce(one, ReduceOp::kSum);
  EXPECT_EQ(one.to_vector(), std::vector<double>(4, d->size()));
}

// A collective whose Work rank 0 dropped without wait(), and which then failed (the other
// ranks were late: it timed out), is not lost: finish_queued() returns its error, which
// launch() raises after the rank's code returns, as run_threads does for thread ranks (it
// was dropped: the job exited 0).
TEST(MpiComm, AnAsyncCollectiveDroppedUnwaitedStillReportsItsError) {
  auto c = std::make_unique<MpiComm>();
  c->set_timeout(20s);
  c->set_check_collectives(false);
  c->barrier();
  Tensor t = zeros({4});
  if (c->rank() == 0) {
    c->set_timeout(300ms);
    c->broadcast(t, 1, /*async=*/true);  // the Work dropped at once
    const std::exception_ptr lost = c->finish_queued();
    ASSERT_TRUE(lost) << "the timed-out broadcast's error was dropped";
    EXPECT_TRUE(
        test::throws_with([&] { std::rethrow_exception(lost); },
                          "broadcast #1 (f32 x 4, root 1) on rank 0 timed out after 300 ms"));
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    std::this_thread::sleep_for(600ms);
    c->broadcast(t, 1);  // late: rank 0's abandoned request takes it
    EXPECT_EQ(c->finish_queued(), nullptr);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}
