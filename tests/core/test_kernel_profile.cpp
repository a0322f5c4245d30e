// KernelProfile: the per-kernel split of a thread's dispatches. Calls are counted per
// kernel-table name, time is summed (most first), a dispatch inside another one counts
// toward the outer one, other threads' work is not included, and a thread runs one
// profile at a time. SpanTimer: spans of host time summed until taken.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/test_util.h"
#include "core/kernel_profile.h"
#include "core/ops.h"
#include "core/span_timer.h"
#include "core/work_counts.h"

using namespace zt;

namespace {
const KernelProfile::Entry* find(const std::vector<KernelProfile::Entry>& all,
                                 const std::string& kernel) {
  for (const auto& e : all)
    if (e.kernel == kernel) return &e;
  return nullptr;
}
}  // namespace

TEST(KernelProfile, CountsAndTimesEachKernelOfThisThread) {
  const Tensor a = randn({96, 96});
  const Tensor b = randn({96, 96});
  KernelProfile profile;
  const WorkCounts before = work_counts();
  Tensor c = matmul(a, b);
  for (int i = 0; i < 3; ++i) c = matmul(c, b);
  Tensor d = add(c, a);
  d = add(d, a);
  const int64_t dispatched = (work_counts() - before).dispatches;
  // Work on another thread is that thread's own.
  std::thread([&] { (void)matmul(a, b); }).join();

  const std::vector<KernelProfile::Entry> all = profile.totals();
  const KernelProfile::Entry* gemm = find(all, "gemm");
  const KernelProfile::Entry* binary = find(all, "binary");
  ASSERT_NE(gemm, nullptr);
  ASSERT_NE(binary, nullptr);
  EXPECT_EQ(gemm->calls, 4);
  EXPECT_EQ(binary->calls, 2);
  EXPECT_GT(gemm->ms, 0.0);
  int64_t calls = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    calls += all[i].calls;
    EXPECT_GE(all[i].ms, 0.0) << all[i].kernel;
    EXPECT_EQ(all[i].host_ms, all[i].ms) << "on the CPU the kernel runs inside the call";
    if (i > 0) {
      EXPECT_GE(all[i - 1].ms, all[i].ms) << "not sorted by time";
    }
  }
  EXPECT_EQ(calls, dispatched) << "every dispatch of this thread, and only those";

  profile.clear();
  EXPECT_TRUE(profile.totals().empty());
}

TEST(KernelProfile, ADispatchInsideAnotherCountsTowardTheOuterOne) {
  // A CPU bf16 matrix multiply converts its operands to f32 with dispatched copies.
  const Tensor a = randn({32, 32}).to(DType::bf16);
  const Tensor b = randn({32, 32}).to(DType::bf16);
  KernelProfile profile;
  const WorkCounts before = work_counts();
  (void)matmul(a, b);
  const int64_t dispatched = (work_counts() - before).dispatches;
  const std::vector<KernelProfile::Entry> all = profile.totals();
  const KernelProfile::Entry* gemm = find(all, "gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->calls, 1);
  int64_t calls = 0;
  for (const auto& e : all) calls += e.calls;
  EXPECT_LT(calls, dispatched) << "the gemm's own conversions were counted apart";
}

TEST(KernelProfile, NothingIsRecordedWithoutAProfileAndOneRunsAtATime) {
  const Tensor a = randn({8, 8});
  (void)add(a, a);  // no profile: nothing to record into
  {
    KernelProfile profile;
    EXPECT_TRUE(profile.totals().empty());
    EXPECT_TRUE(test::throws_with([] { KernelProfile second; }, "already runs a profile"));
    (void)add(a, a);
    EXPECT_EQ(profile.totals().size(), 1u);
  }
  KernelProfile after;  // the first one ended: a new one may start
  EXPECT_TRUE(after.totals().empty());
}

TEST(SpanTimer, SumsItsEndedSpansAndStartsOverAtEachTake) {
  using namespace std::chrono_literals;
  SpanTimer t(Device::cpu());
  EXPECT_EQ(t.take_seconds(), 0.0);
  for (auto d : {20ms, 10ms}) {
    t.begin();
    std::this_thread::sleep_for(d);
    t.end();
  }
  const double both = t.take_seconds();
  EXPECT_GE(both, 0.030);
  EXPECT_LT(both, 5.0);
  EXPECT_EQ(t.take_seconds(), 0.0) << "a take clears the sum";
  // An open span is not counted until it ends.
  t.begin();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(t.take_seconds(), 0.0);
  t.end();
  EXPECT_GE(t.take_seconds(), 0.010);
  EXPECT_TRUE(test::throws_with([&] { t.end(); }, "end() without begin()"));
  t.begin();
  EXPECT_TRUE(test::throws_with([&] { t.begin(); }, "begin() while a span is open"));
}
