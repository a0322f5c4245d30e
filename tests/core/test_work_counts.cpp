// The per-thread work counters (core/work_counts.h): every kernel-table dispatch is
// counted once on the thread that issued it, the CPU never launches or synchronizes,
// and another thread's work does not show in this thread's counts.
#include <gtest/gtest.h>

#include <thread>

#include "core/ops.h"
#include "core/work_counts.h"

namespace zt {
namespace {

TEST(WorkCounts, EachDispatchCountsOnce) {
  Tensor a = ones({8});
  Tensor out = Tensor::empty({8}, DType::f32, Device::cpu());
  const WorkCounts before = work_counts();
  out.fill_(2.0);  // one fill kernel
  const WorkCounts one = work_counts() - before;
  EXPECT_EQ(one.dispatches, 1);
  Tensor s = add(a, out);  // one binary kernel
  Tensor t = mul(s, 3.0);
  const WorkCounts more = work_counts() - before;
  EXPECT_EQ(more.dispatches, 3) << "the fill, the add, the multiply: each once";
  EXPECT_EQ(t.to_vector(), std::vector<double>(8, 9.0));
  // The CPU never launches, waits or copies between host and device.
  EXPECT_EQ(more.launches, 0);
  EXPECT_EQ(more.syncs, 0);
  EXPECT_EQ(more.d2h_copies + more.h2d_copies, 0);
}

TEST(WorkCounts, AreCountedPerThread) {
  const WorkCounts before = work_counts();
  int64_t other = 0;
  std::thread th([&] {
    const WorkCounts b = work_counts();
    for (int i = 0; i < 5; ++i) (void)add(ones({4}), 1.0);
    other = (work_counts() - b).dispatches;
  });
  th.join();
  EXPECT_GE(other, 5);
  EXPECT_EQ((work_counts() - before).dispatches, 0);  // none of that thread's work is ours
}

}  // namespace
}  // namespace zt
