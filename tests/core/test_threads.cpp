// Kernel thread counts: set per thread, and a default that never oversubscribes the
// cores: $OMP_NUM_THREADS first, then the process's own cores, shared among the node's
// processes when a launcher started several without pinning them.
#include <gtest/gtest.h>

#include <thread>

#include "core/parallel.h"

using namespace zt;

TEST(Threads, DefaultCountSharesTheCoresAmongUnpinnedProcesses) {
  using detail::default_thread_count;
  EXPECT_EQ(default_thread_count(0, 8, 8, 1), 8);  // alone on the machine
  EXPECT_EQ(default_thread_count(3, 8, 8, 1), 3);  // $OMP_NUM_THREADS wins
  EXPECT_EQ(default_thread_count(3, 1, 8, 4), 3);
  EXPECT_EQ(default_thread_count(0, 8, 8, 4), 2);   // mpirun -np 4 --bind-to none
  EXPECT_EQ(default_thread_count(0, 2, 2, 4), 1);   // more processes than cores: one each
  EXPECT_EQ(default_thread_count(0, 1, 2, 2), 1);   // mpirun pinned each to one core
  EXPECT_EQ(default_thread_count(0, 4, 16, 2), 4);  // pinned to four: all four
  EXPECT_EQ(default_thread_count(0, 4, 16, 1), 4);  // taskset: the mask's cores
}

TEST(Threads, HardwareThreadsCountTheAffinityMask) {
  const int n = hardware_threads();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(Threads, EachThreadKeepsItsOwnCount) {
  const int prev = num_threads();
  set_num_threads(3);
  int other_before = 0, other_after = 0;
  std::thread t([&] {
    other_before = num_threads();  // the default, not this thread's 3
    set_num_threads(1);
    other_after = num_threads();
  });
  t.join();
  EXPECT_EQ(num_threads(), 3);
  EXPECT_NE(other_before, 0);
  EXPECT_EQ(other_after, 1);
  set_num_threads(0);  // clamps to one
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(prev);
}
