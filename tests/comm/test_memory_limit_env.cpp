// $ZT_MEMORY_LIMIT that does not parse: run_threads raises the parse error like any
// rank's error (each thread rank's memory ledger reads it when the rank starts). The
// process reads the variable once, so the check runs in a child process of its own (a
// death test in the "threadsafe" style re-runs this test alone in a fresh process).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "zero/comm/thread_comm.h"

TEST(MemoryLimitEnv, AValueThatDoesNotParseIsAnErrorNotAnAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("ZT_MEMORY_LIMIT", "lots", 1);
        try {
          zt::comm::run_threads(2, [](zt::comm::Communicator&) {});
        } catch (const std::exception& e) {
          std::fprintf(stderr, "caught: %s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3), "caught: .*ZT_MEMORY_LIMIT: 'lots' is not a byte size");
}
