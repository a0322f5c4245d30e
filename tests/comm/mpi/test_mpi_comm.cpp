// MpiComm under mpirun (registered with -np 2 and -np 3, label mpi): the same collective
// checks as the thread ranks, async progress, counters, a deadline, and the launch rule.
// Every process runs every test; each test uses a fresh MpiComm.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/checks.h"
#include "common/test_util.h"
#include "zero/comm/launch.h"
#include "zero/comm/mpi_comm.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {
// A generous deadline: a failing check on one rank must not hang the others for long.
std::unique_ptr<MpiComm> make_comm() {
  auto c = std::make_unique<MpiComm>();
  c->set_timeout(20s);
  return c;
}
}  // namespace

TEST(MpiComm, RunsUnderMpirun) {
  ASSERT_TRUE(under_mpirun()) << "run this test with mpirun";
  auto c = make_comm();
  EXPECT_STREQ(c->backend(), "mpi");
  EXPECT_GE(c->size(), 1);
}

TEST(MpiComm, EveryCollective) {
  auto c = make_comm();
  EXPECT_NO_THROW(checks::every_collective(*c));
  EXPECT_NO_THROW(checks::every_collective_at_the_edges(*c));
}

TEST(MpiComm, CountersMatchTextbookVolumes) {
  auto c = make_comm();
  EXPECT_NO_THROW(checks::counters_match_textbook(*c));
}

TEST(MpiComm, AsyncCompletesWhileCallerComputes) {
  auto c = make_comm();
  EXPECT_NO_THROW(checks::async_completes_while_computing(*c));
}

TEST(MpiComm, ResultsEqualThreadRanksBitwise) {
  // The same inputs reduce to the same bits as with ThreadComm (rank order 0..N-1).
  auto c = make_comm();
  const int64_t numel = 1001;
  auto input = [](int rank) {
    Generator g(7 + rank);
    return randn({numel}, g);
  };
  Tensor t = input(c->rank());
  c->all_reduce(t, ReduceOp::kSum);
  std::vector<float> serial(numel);
  for (int r = 0; r < c->size(); ++r) {
    Tensor x = input(r);
    for (int64_t i = 0; i < numel; ++i)
      serial[i] = r == 0 ? x.data<float>()[i] : serial[i] + x.data<float>()[i];
  }
  EXPECT_EQ(std::memcmp(t.data<float>(), serial.data(), numel * 4), 0);
}

TEST(MpiComm, TimeoutNamesCollectiveAndSequence) {
  auto c = make_comm();
  // Off, so that the late ranks' barrier is the very MPI call rank 0 abandoned (with the
  // check on, that would be the check's all-reduce, and their barrier would wait alone).
  c->set_check_collectives(false);
  c->barrier();  // #0
  if (c->rank() == 0) {
    c->set_timeout(200ms);
    try {
      c->barrier();  // #1: the others arrive late
      ADD_FAILURE() << "no timeout";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("barrier #1 on rank 0 timed out after 200 ms"), std::string::npos) << msg;
    }
    Tensor t = ones({3});
    EXPECT_THROW(c->all_reduce(t, ReduceOp::kSum), AbortedError);
  } else {
    std::this_thread::sleep_for(500ms);
    c->barrier();  // completes rank 0's abandoned request
  }
}

TEST(MpiComm, ATimeoutNamesTheTimeoutItsDeadlineCameFrom) {
  auto c = make_comm();
  c->set_check_collectives(false);  // as above: the late ranks' barrier completes rank 0's
  c->barrier();                     // #0
  if (c->rank() == 0) {
    c->set_timeout(300ms);
    // Set while the barrier waits: it applies to later collectives, not this one's deadline.
    std::thread later([&] {
      std::this_thread::sleep_for(100ms);
      c->set_timeout(20s);
    });
    const std::string msg = test::error_of([&] { c->barrier(); });  // #1
    later.join();
    EXPECT_NE(msg.find("barrier #1 on rank 0 timed out after 300 ms"), std::string::npos) << msg;
  } else {
    std::this_thread::sleep_for(800ms);
    c->barrier();
  }
}

TEST(MpiComm, MismatchedCollectivesFailAtOnceNamingEachSide) {
  // Without the check, rank 0's broadcast would wait for the others until the timeout
  // (20 s here) and their all-reduces of another size would read garbage or hang.
  auto c = make_comm();
  c->barrier();  // #0
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = test::error_of([&] {
    Tensor t = ones({c->rank() == 0 ? 6 : 7});
    if (c->rank() == 0)
      c->broadcast(t, 0);
    else
      c->all_reduce(t, ReduceOp::kSum);
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_NE(err.find("mismatched collectives at sequence #1: rank 0 called broadcast (f32 x 6, "
                     "root 0), rank 1 called all_reduce (f32 x 7, sum)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("different code paths"), std::string::npos) << err;
  EXPECT_THROW(c->barrier(), AbortedError) << "the communicator is failed on every rank";
}

// The check applies as it stood when each collective was issued: rank 0 queues two
// collectives, then turns the check off before its communication thread runs them; the
// others issue the same two blocking (checked), then turn it off. Read when run, rank 0
// would skip the check's all-reduce the others make, and the ranks' MPI calls would pair
// off wrongly (both time out).
TEST(MpiComm, TheCheckIsReadWhenACollectiveIsIssued) {
  auto c = make_comm();
  c->set_timeout(5s);
  Tensor t = ones({8}), u = ones({8});
  if (c->rank() == 0) {
    auto w1 = c->broadcast(t, 0, /*async=*/true);
    auto w2 = c->all_reduce(u, ReduceOp::kSum, /*async=*/true);
    c->set_check_collectives(false);
    w1->wait();
    w2->wait();
  } else {
    c->broadcast(t, 0);
    c->all_reduce(u, ReduceOp::kSum);
    c->set_check_collectives(false);
  }
  EXPECT_EQ(u.to_vector(), std::vector<double>(8, c->size()));
  c->barrier();  // unchecked on every rank now
}

// An agreement after a failed forward on one rank only meets another rank's labelled
// gather of host objects: a mismatch naming the agreement, not a silent pairing.
TEST(MpiComm, AnAgreementOnOneRankIsNamedWhereTheOthersGatherBytes) {
  auto c = make_comm();
  if (c->rank() == 0) c->agree_before_next_collective("the agreement after a failed forward");
  const std::string err = test::error_of([&] { c->all_gather_bytes("x"); });
  EXPECT_NE(err.find("the agreement after a failed forward"), std::string::npos) << err;
}

TEST(MpiComm, AnMpiErrorNamesTheCollective) {
  // Rank 0 gathers 4 elements per rank, the others 8: rank 0 cannot take the others' 8
  // (MPI_ERR_TRUNCATE). MPI's error comes back to zt, which names the collective, instead
  // of ending the job inside MPI; the communicator is failed from then on. (The signature
  // check, off here, would name the mismatch before MPI sees it.)
  auto c = make_comm();
  c->set_check_collectives(false);
  const int64_t s = c->rank() == 0 ? 4 : 8;
  Tensor out = Tensor::empty({s * c->size()});
  const std::string err = test::error_of([&] { c->all_gather(out, ones({s})); });
  if (c->rank() == 0) {
    const std::string what =
        "zt.comm: all_gather #0 (f32 x " + std::to_string(4 * c->size()) + ") on rank 0";
    EXPECT_NE(err.find(what + ": MPI_Test failed: MPI_ERR_TRUNCATE"), std::string::npos) << err;
    EXPECT_THROW(c->barrier(), AbortedError);
  }
}

TEST(MpiComm, LaunchUsesOneProcessPerRank) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  launch(1, [&](Communicator& c) {
    EXPECT_STREQ(c.backend(), "mpi");
    EXPECT_EQ(c.size(), world);
    c.barrier();
  });
}
