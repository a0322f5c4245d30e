// The CUDA backend's streams and caching allocator: work on a side stream ordered by an
// event, freed blocks reused by size class and given back by empty_cache, many threads
// allocating at once. Without a GPU these tests skip and say why; the size classes are
// arithmetic and run anyway.
#include <atomic>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "cuda/cuda_compare.h"

#ifdef ZT_WITH_CUDA
#include "core/cuda/allocator.h"
#include "core/cuda/stream.h"
#endif

using namespace zt;
using namespace zt::cuda_test;
using zt::test::all_close;

#ifdef ZT_WITH_CUDA

// The side stream's result comes at the end of a long chain of GEMMs, and the default
// stream reads it at once, ordered by an event alone: a non-blocking stream does not
// synchronize with the legacy default stream, so without the wait the read would see the
// buffer before the side stream wrote it. The all-1/n matrix is its own square (1/n a
// power of two), so every value is exact.
TEST(CudaStreams, WorkOnASideStreamIsOrderedByEvents) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t n = 2048;
  Tensor m = full({n, n}, 1.0 / n, DType::f32, kGpu);  // written on the default stream
  cuda::Event made, done;
  made.record(cuda::current_stream());
  cuda::Stream side;
  Tensor rows;
  {
    cuda::StreamGuard guard(side);
    EXPECT_EQ(cuda::current_stream(), side.get());
    cuda::stream_wait_event(side.get(), made);
    Tensor y = m;
    for (int i = 0; i < 40; ++i) y = matmul(y, m);
    rows = sum(y, {1});  // every row of y sums to 1
    done.record(side.get());
  }
  EXPECT_EQ(cuda::current_stream(), nullptr);  // back on the legacy default stream
  cuda::stream_wait_event(cuda::current_stream(), done);
  Tensor twice = add(rows, rows);  // read on the default stream
  EXPECT_TRUE(all_close(twice, full({n}, 2.0), 0, 0));
  done.synchronize();
  EXPECT_TRUE(done.query());
}

TEST(CudaAllocator, ReusesFreedBlocksAndEmptiesItsCache) {
  ZT_SKIP_WITHOUT_GPU();
  Allocator* alloc = allocator_for(DeviceType::CUDA);
  ASSERT_EQ(alloc, &cuda::caching_allocator());
  alloc->empty_cache();
  EXPECT_EQ(alloc->cached_bytes(), 0);
  int64_t before = memory_stats(kGpu).total_current;
  void* p = nullptr;
  {
    Tensor t = Tensor::empty({1000}, DType::f32, kGpu);
    p = t.data_ptr();
    EXPECT_EQ(memory_stats(kGpu).total_current, before + 4000);  // Storage counts bytes
  }
  EXPECT_EQ(memory_stats(kGpu).total_current, before);
  EXPECT_EQ(alloc->cached_bytes(), 4096);  // rounded to its size class and kept
  {
    Tensor t = Tensor::empty({999}, DType::f32, kGpu);  // same size class
    EXPECT_EQ(t.data_ptr(), p);
    EXPECT_EQ(alloc->cached_bytes(), 0);
  }
  alloc->empty_cache();
  EXPECT_EQ(alloc->cached_bytes(), 0);
}

TEST(CudaAllocator, IsThreadSafe) {
  ZT_SKIP_WITHOUT_GPU();
  // Blocks that earlier tests in this process keep for its life (the optimizer kernels'
  // uploaded tables) stay allocated: the threads must give back what they took.
  const int64_t held_before = cuda::caching_allocator().allocated_bytes();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < 200; ++i) {
        Tensor a = full({64 + (i % 7) * 100}, static_cast<double>(t), DType::f32, kGpu);
        if (sum(a).item() != static_cast<double>(t) * a.numel()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cuda::caching_allocator().allocated_bytes(), held_before);
}

TEST(CudaAllocator, SizeClasses) {  // pure arithmetic: runs without a GPU
  using A = cuda::CachingAllocator;
  EXPECT_EQ(A::round_size(0), 512u);
  EXPECT_EQ(A::round_size(1), 512u);
  EXPECT_EQ(A::round_size(513), 1024u);
  EXPECT_EQ(A::round_size((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(A::round_size(1u << 20), 1u << 20);
  EXPECT_EQ(A::round_size((1u << 20) + 1), (1u << 20) + (1u << 18));
  EXPECT_EQ(A::round_size(3u << 20), 3u << 20);
  for (size_t b : {size_t{5000}, size_t{3} << 22, (size_t{1} << 33) + 7}) {
    EXPECT_GE(A::round_size(b), b);
    EXPECT_LE(A::round_size(b), b + b / 4 + 512);
  }
}
#endif
