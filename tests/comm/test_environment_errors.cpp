// Environment variables that do not parse are errors naming them, raised where the ranks
// start, never an abort or a silent default.
//  - $ZT_MEMORY_LIMIT: run_threads raises the parse error like any rank's error (each
//    thread rank's memory ledger reads it when the rank starts). The process reads the
//    variable once, so the check runs in a child process of its own (a death test in the
//    "threadsafe" style re-runs this test alone in a fresh process).
//  - $ZT_COMM_TIMEOUT_MS: read by every communicator as it is made.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "common/test_util.h"
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

TEST(CommTimeoutEnv, AValueThatIsNotAPositiveWholeNumberIsAnError) {
  for (const char* bad : {"abc", "0", "-1", "10s", "1e3"}) {
    SCOPED_TRACE(bad);
    ::setenv("ZT_COMM_TIMEOUT_MS", bad, 1);
    const std::string err =
        zt::test::error_of([] { zt::comm::run_threads(2, [](zt::comm::Communicator&) {}); });
    EXPECT_NE(err.find(std::string("ZT_COMM_TIMEOUT_MS: '") + bad + "' is not a positive whole"),
              std::string::npos)
        << err;
  }
  ::setenv("ZT_COMM_TIMEOUT_MS", "1234", 1);
  zt::comm::run_threads(1, [](zt::comm::Communicator& c) {
    EXPECT_EQ(c.timeout(), std::chrono::milliseconds(1234));
  });
  ::unsetenv("ZT_COMM_TIMEOUT_MS");
  zt::comm::run_threads(1, [](zt::comm::Communicator& c) {
    EXPECT_EQ(c.timeout(), std::chrono::minutes(10)) << "unset: the default";
  });
}

// A valid $ZT_MEMORY_LIMIT caps every device of a new ledger: the CPU and each GPU.
TEST(MemoryLimitEnv, AValueCapsEveryDeviceOfANewLedger) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("ZT_MEMORY_LIMIT", "3MiB", 1);
        const zt::MemoryLedger ledger;
        const int64_t want = int64_t{3} << 20;
        for (zt::Device d :
             {zt::Device::cpu(), zt::Device::cuda(0), zt::Device::cuda(zt::kMaxCudaDevices - 1)})
          if (ledger.limit(d) != want) {
            std::fprintf(stderr, "limit on %s: %lld\n", d.str().c_str(),
                         static_cast<long long>(ledger.limit(d)));
            std::exit(4);
          }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}
