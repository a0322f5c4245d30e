// Watchdog: the thread that keeps the deadlines of a communicator whose waits do not
// block the host (NcclComm). Its collectives are stood in for by flags here, so every
// rule runs on the CPU: finished work is retired in issue order, the late front entry
// fails once with a message naming it, a backend error (or a query that throws) fails at
// once, an idle watchdog polls nothing, and stopping never waits for unfinished work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/test_util.h"
#include "core/error.h"
#include "zero/comm/watchdog.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {
// Records the failures a watchdog reports.
struct Reports {
  std::atomic<int> count{0};
  std::mutex mu;
  std::string first;
  Watchdog::Fail callback() {
    return [this](const std::string& why) {
      std::lock_guard<std::mutex> lock(mu);
      if (count++ == 0) first = why;
    };
  }
  std::string message() {
    std::lock_guard<std::mutex> lock(mu);
    return first;
  }
  // Passes once a failure is reported (waiting up to 10 s) whose message holds every
  // phrase.
  ::testing::AssertionResult say(std::initializer_list<const char*> phrases);
};

// Polls `ready` for up to 10 s (the watchdog thread may be slow to run on a loaded host).
template <typename Ready>
bool eventually(Ready ready) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

::testing::AssertionResult Reports::say(std::initializer_list<const char*> phrases) {
  if (!eventually([&] { return count.load() > 0; }))
    return ::testing::AssertionFailure() << "no failure reported";
  const std::string msg = message();
  for (const char* phrase : phrases)
    if (msg.find(phrase) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << phrase << "' not in: " << msg;
  return ::testing::AssertionSuccess();
}

Watchdog::Done flag_done(const std::shared_ptr<std::atomic<bool>>& flag) {
  return [flag] { return flag->load(); };
}
}  // namespace

TEST(Watchdog, FinishedCollectivesAreRetiredInIssueOrder) {
  Reports reports;
  Watchdog dog({}, reports.callback(), 200us);
  std::vector<std::shared_ptr<std::atomic<bool>>> flags;
  for (int i = 0; i < 3; ++i) {
    flags.push_back(std::make_shared<std::atomic<bool>>(false));
    dog.watch("all_gather #" + std::to_string(i), 60s, flag_done(flags.back()));
  }
  EXPECT_EQ(dog.in_flight(), 3u);
  // The last one finishing first retires nothing: the front is still in flight.
  flags[2]->store(true);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(dog.in_flight(), 3u);
  // The front finishing retires it alone: the next one is still in flight.
  flags[0]->store(true);
  EXPECT_TRUE(eventually([&] { return dog.in_flight() == 2; })) << "in flight: " << dog.in_flight();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(dog.in_flight(), 2u);
  // Then the rest go together.
  flags[1]->store(true);
  EXPECT_TRUE(eventually([&] { return dog.in_flight() == 0; }));
  EXPECT_EQ(reports.count.load(), 0);
  EXPECT_EQ(dog.failure(), "");
}

TEST(Watchdog, ALateCollectiveFailsOnceAndNamesItself) {
  Reports reports;
  Watchdog dog({}, reports.callback(), 200us);
  auto never = std::make_shared<std::atomic<bool>>(false);
  dog.watch("reduce_scatter #4 (f32 x 8, avg) on rank 1", 30ms, flag_done(never));
  dog.watch("all_gather #5 (f32 x 8) on rank 1", 60s, flag_done(never));
  ASSERT_TRUE(reports.say(
      {"reduce_scatter #4 (f32 x 8, avg) on rank 1", "timed out after 30 ms", "set_timeout"}));
  const std::string msg = reports.message();
  EXPECT_EQ(dog.failure(), msg);
  // A failed communicator's work is abandoned, and nothing new is watched.
  EXPECT_EQ(dog.in_flight(), 0u);
  dog.watch("barrier #6 on rank 1", 1ms, flag_done(never));
  EXPECT_EQ(dog.in_flight(), 0u);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(reports.count.load(), 1) << "a failure is reported once";
}

TEST(Watchdog, WorkThatFinishesInTimeIsNeverLate) {
  Reports reports;
  Watchdog dog({}, reports.callback(), 200us);
  auto flag = std::make_shared<std::atomic<bool>>(false);
  dog.watch("all_reduce #0 (f32 x 1, sum) on rank 0", 2s, flag_done(flag));
  std::this_thread::sleep_for(10ms);
  flag->store(true);
  EXPECT_TRUE(eventually([&] { return dog.in_flight() == 0; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(reports.count.load(), 0) << reports.message();
}

TEST(Watchdog, ABackendErrorFailsAtOnceAndIsPolledOnlyWhileWorkIsInFlight) {
  Reports reports;
  std::atomic<int> health_polls{0};
  std::atomic<bool> broken{false};
  Watchdog dog(
      [&]() -> std::string {
        ++health_polls;
        return broken.load() ? "NCCL reports unhandled system error" : "";
      },
      reports.callback(), 200us);
  // Idle: the thread sleeps and asks the backend nothing.
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(health_polls.load(), 0);

  auto never = std::make_shared<std::atomic<bool>>(false);
  dog.watch("broadcast #2 (bf16 x 3, root 0) on rank 1", 60s, flag_done(never));
  EXPECT_TRUE(eventually([&] { return health_polls.load() > 0; }));
  EXPECT_EQ(reports.count.load(), 0);
  broken.store(true);
  EXPECT_TRUE(reports.say(
      {"broadcast #2 (bf16 x 3, root 0) on rank 1 failed", "NCCL reports unhandled system error"}));
}

TEST(Watchdog, AQueryThatThrowsIsThatCollectivesFailure) {
  Reports reports;
  Watchdog dog({}, reports.callback(), 200us);
  dog.watch("all_gather #9 (f32 x 2) on rank 0", 60s,
            []() -> bool { ZT_FAIL("CUDA error: an illegal memory access was encountered"); });
  EXPECT_TRUE(reports.say({"all_gather #9 (f32 x 2) on rank 0 failed", "illegal memory access"}));
}

TEST(Watchdog, StoppingDoesNotWaitForUnfinishedWork) {
  Reports reports;
  const auto t0 = std::chrono::steady_clock::now();
  {
    Watchdog dog({}, reports.callback(), 200us);
    dog.watch("all_gather #0 (f32 x 1) on rank 0", 60s, [] { return false; });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(reports.count.load(), 0);
}

TEST(Watchdog, NeedsAFailureCallbackAndAPositiveInterval) {
  EXPECT_TRUE(test::throws_with([] { Watchdog dog({}, {}); }, "a failure callback is required"));
  EXPECT_TRUE(test::throws_with(
      [] {
        Watchdog dog(
            {}, [](const std::string&) {}, 0us);
      },
      "polling interval must be positive"));
}
