// A thread rank that does not return after another failed: stuck outside any collective (in
// its own code, I/O, a lock), it never meets the abort, and run_threads, which cannot return
// while that thread runs, waits for it. It says so on stderr once the failing rank's
// timeout has passed, naming the ranks and the failure, where the run hung without a word.
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

TEST(ThreadCommStuckRank, ARankThatDoesNotReturnAfterAFailureIsNamed) {
  ::testing::internal::CaptureStderr();
  const std::string err = test::error_of([] {
    run_threads(3, [](Communicator& c) {
      c.set_timeout(200ms);
      if (c.rank() == 0) throw std::runtime_error("boom on rank zero");
      std::this_thread::sleep_for(c.rank() == 1 ? 1500ms : 0ms);  // rank 1: in its own code
    });
  });
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "boom on rank zero");
  EXPECT_NE(said.find("zt.comm: rank(s) 1 have not returned 200 ms after rank 0 failed"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("boom on rank zero"), std::string::npos) << said;
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
