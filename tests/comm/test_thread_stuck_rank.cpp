// A thread rank that does not return after another failed: stuck outside any collective (in
// its own code, I/O, a lock), it never meets the abort, and run_threads cannot return while
// that thread runs. Once the failing rank's timeout (at least 10 s) has passed, it names the ranks
// and the failure on stderr and ends the process (exit code 1), as an MPI job's abort ends the
// processes of ranks stuck in their own code, where the run hung without end.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/test_util.h"
#include "zero/comm/thread_comm.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

// Rank 1 is in its own code for 30 s, well past rank 0's timeout (200 ms, so the least wait,
// 10 s, applies): the process ends then, where run_threads waited for rank 1 (and returned
// after 30 s, the error thrown here).
static void fail_while_rank_one_is_stuck() {
  run_threads(3, [](Communicator& c) {
    c.set_timeout(200ms);
    if (c.rank() == 0) throw std::runtime_error("boom on rank zero");
    std::this_thread::sleep_for(c.rank() == 1 ? 30s : 0s);  // rank 1: in its own code
  });
}

TEST(ThreadCommStuckRank, ARankThatDoesNotReturnAfterAFailureIsNamedAndEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_EXIT(fail_while_rank_one_is_stuck(), ::testing::ExitedWithCode(1),
              "zt.comm: rank\\(s\\) 1 have not returned 10000 ms after rank 0 failed .*ending the "
              "process.*rank 0 failed: boom on rank zero");
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 20s);
}

TEST(ThreadCommStuckRank, RanksThatReturnInTimeAreNotNamed) {
  ::testing::internal::CaptureStderr();
  const std::string err = test::error_of([] {
    run_threads(2, [](Communicator& c) {
      c.set_timeout(2s);
      if (c.rank() == 0) throw std::runtime_error("boom on rank zero");
      std::this_thread::sleep_for(100ms);
    });
  });
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "boom on rank zero");
  EXPECT_EQ(said, "");
}
