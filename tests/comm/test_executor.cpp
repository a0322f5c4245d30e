// The communication thread of the CPU communicators (comm/executor.h).
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "zero/comm/executor.h"

using namespace zt;
using namespace zt::comm;

TEST(Executor, ATaskSubmittedAfterFinishIsAnErrorNotAWorkThatNeverEnds) {
  // finish() joined the thread: a task queued now would never run, and a wait() on its
  // work (MpiComm's blocking collectives wait on theirs) would block for ever.
  Executor ex;
  EXPECT_EQ(ex.finish(), nullptr);
  bool ran = false;
  const std::string err = test::error_of([&] { ex.submit([&] { ran = true; }); });
  EXPECT_NE(err.find("issued after its communicator's queue was closed"), std::string::npos) << err;
  EXPECT_FALSE(ran);
}
