// Kernel thread counts: set per thread, and a default that never oversubscribes the
// cores: $OMP_NUM_THREADS first, then the process's own cores, shared among the node's
// processes when a launcher started several without pinning them. And the elementwise
// loops share even one long contiguous row among the threads.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "core/cpu/loops.h"
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

// The CPUs a launcher pinned the process to, not the machine's: a thread pinned to one
// CPU counts one.
TEST(Threads, HardwareThreadsCountTheAffinityMask) {
  const int n = hardware_threads();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  int pinned = 0;
  std::thread t([&] {  // its own mask (sched_setaffinity(0) is the calling thread's)
    cpu_set_t all, one;
    ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &all)) {
        CPU_SET(c, &one);
        break;
      }
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    pinned = hardware_threads();
  });
  t.join();
  EXPECT_EQ(pinned, 1);
  EXPECT_EQ(hardware_threads(), n) << "the other thread's mask is its own";
}

TEST(Threads, EachThreadKeepsItsOwnCount) {
  test::ThreadCount three(3);
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
}

TEST(Threads, LongRowsAreCutIntoPiecesForTheThreads) {
  // One contiguous tensor is one merged row; it must still be shared by the threads, and
  // its pieces must cover every element once.
  const int64_t n = 3 * cpu::kRowPiece + 5;
  Tensor t = Tensor::empty({4, n / 4 + 1}, DType::f32);
  const int64_t numel = t.numel();
  auto l = cpu::make_loop<1>(t.sizes(), {t.strides()});
  ASSERT_EQ(l.sizes.size(), 1u);  // merged into one row
  test::ThreadCount two(2);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> pieces;
  std::set<std::thread::id> threads;
  cpu::for_each_row(l, [&](auto off, int64_t len, auto st) {
    std::lock_guard<std::mutex> lock(mu);
    pieces.emplace_back(off[0], len);
    threads.insert(std::this_thread::get_id());
    EXPECT_EQ(st[0], 1);
  });
  std::sort(pieces.begin(), pieces.end());
  EXPECT_EQ(static_cast<int64_t>(pieces.size()), (numel + cpu::kRowPiece - 1) / cpu::kRowPiece);
  int64_t next = 0;
  for (const auto& [start, len] : pieces) {
    EXPECT_EQ(start, next);
    EXPECT_LE(len, cpu::kRowPiece);
    next = start + len;
  }
  EXPECT_EQ(next, numel);
  EXPECT_EQ(threads.size(), 2u);
}

// An exception thrown in any chunk of parallel_for reaches the caller once every chunk has
// run, also from a worker thread (an exception escaping an OpenMP region would end the
// process); when several chunks throw, the lowest chunk's is the one rethrown, whatever
// the scheduling. Other exception types keep theirs.
TEST(Threads, ParallelForRethrowsAChunksExceptionOnTheCallingThread) {
  test::ThreadCount two(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> ran{0};
  std::thread::id thrower;
  EXPECT_TRUE(test::throws_with(
      [&] {
        parallel_for(2, 1, [&](int64_t b, int64_t) {
          ++ran;
          if (b == 1) {
            thrower = std::this_thread::get_id();
            ZT_FAIL("chunk ", b, " failed");
          }
        });
      },
      "chunk 1 failed"));
  EXPECT_EQ(ran.load(), 2);
  EXPECT_NE(thrower, caller);  // the second chunk ran on a worker
  EXPECT_TRUE(test::throws_with(
      [] { parallel_for(2, 1, [](int64_t b, int64_t) { ZT_FAIL("chunk ", b, " failed"); }); },
      "chunk 0 failed"));
  EXPECT_THROW(parallel_for(2, 1,
                            [](int64_t b, int64_t) {
                              if (b == 1) throw std::bad_alloc();
                            }),
               std::bad_alloc);
  // The threads are still usable afterwards.
  std::atomic<int64_t> covered{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) { covered += e - b; });
  EXPECT_EQ(covered.load(), 1000);
}
