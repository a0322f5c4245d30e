// KernelProfile on the GPU (label cuda): dispatches are timed by events in GPU time, so a
// large matrix multiply shows its milliseconds even though its dispatch returns at once,
// calls are counted per kernel, and nothing is timed inside a CUDA graph capture; and the
// library calls under an ApiProfile. A SpanTimer times GPU work with events, waiting only
// when its time is taken, on one stream.
#include <chrono>

#include "core/api_profile.h"
#include "core/kernel_profile.h"
#include "core/span_timer.h"
#include "core/work_counts.h"
#include "cuda/cuda_compare.h"
#ifdef ZT_WITH_CUDA
#include "core/cuda/graph.h"
#include "core/cuda/stream.h"
#endif

using namespace zt;
using namespace zt::cuda_test;

TEST(CudaKernelProfile, TimesKernelsInGpuTime) {
  ZT_SKIP_WITHOUT_GPU();
  const Tf32Policy saved = tf32();
  set_tf32({.matmul = false, .conv = false});
  const Tensor a = randn({4096, 4096}).to(kGpu);
  Tensor c = matmul(a, a);  // warm-up: cuBLAS's handle and heuristics
  (void)c.to(kCpu);
  KernelProfile profile;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) c = matmul(a, a);
  c = add(c, a);
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<KernelProfile::Entry> all = profile.totals();  // waits for the GPU
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].kernel, "gemm") << "four 4096^3 f32 multiplies outweigh one add";
  EXPECT_EQ(all[0].calls, 4);
  // 4 x 137 GFLOP in exact f32: milliseconds on any GPU (about 9 on an H200), while
  // issuing them takes the host microseconds (the profile must not time the host's side).
  EXPECT_GT(all[0].ms, 2.0);
  EXPECT_GT(all[0].ms, host_ms) << "GPU time, not the time the host took to queue the work";
  // The host's side is kept apart: positive, and within the host's wall time.
  EXPECT_GT(all[0].host_ms, 0.0);
  EXPECT_LE(all[0].host_ms, host_ms);
  set_tf32(saved);
}

#ifdef ZT_WITH_CUDA
TEST(CudaSpanTimer, TimesGpuWorkAndWaitsOnlyWhenTaken) {
  ZT_SKIP_WITHOUT_GPU();
  const Tf32Policy saved = tf32();
  set_tf32({.matmul = false, .conv = false});
  const Tensor a = randn({4096, 4096}).to(kGpu);
  Tensor c = matmul(a, a);  // warm-up
  (void)c.to(kCpu);
  SpanTimer t(kGpu);
  const WorkCounts before = work_counts();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) {
    t.begin();
    for (int j = 0; j < 2; ++j) c = matmul(a, a);
    t.end();
    c = add(c, a);  // between spans: not timed
  }
  const double host_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ((work_counts() - before).syncs, 0) << "no host wait before the take";
  const double s = t.take_seconds();
  EXPECT_EQ((work_counts() - before).syncs, 1) << "the take waits once";
  // 4 x 137 GFLOP in exact f32: milliseconds on any GPU, while queueing them took the host
  // microseconds.
  EXPECT_GT(s, 0.002);
  EXPECT_GT(s, host_s) << "GPU time, not the time the host took to queue the work";
  EXPECT_EQ(t.take_seconds(), 0.0);
  set_tf32(saved);
  // Every span on one stream: the last end event done then means every earlier one is.
  cuda::Stream side;
  cuda::StreamGuard guard(side);
  EXPECT_TRUE(zt::test::throws_with([&] { t.begin(); }, "than its first one's"));
}

TEST(CudaKernelProfile, NothingIsTimedInsideACapture) {
  ZT_SKIP_WITHOUT_GPU();
  const Tensor a = randn({64, 64}).to(kGpu);
  Tensor out;
  cuda::Graph graph(0);
  KernelProfile profile;
  graph.capture([&] { out = add(a, a); });
  EXPECT_TRUE(profile.totals().empty());
  (void)add(a, a);
  ASSERT_EQ(profile.totals().size(), 1u);
  EXPECT_EQ(profile.totals()[0].calls, 1);
}
#endif

// The library calls behind GPU work are sites of an ApiProfile (core/api_profile.h): a
// device-to-host copy is one checked cudaMemcpy-family call at least, and every site's time
// is host time, within the host's wall time.
TEST(CudaApiProfile, ListsTheLibraryCallsOfGpuWork) {
  ZT_SKIP_WITHOUT_GPU();
  const Tensor a = randn({256, 256}).to(kGpu);
  Tensor c = matmul(a, a);
  (void)c.to(kCpu);  // warm-up: handles, heuristics
  const WorkCounts before = work_counts();
  ApiProfile profile;
  const auto t0 = std::chrono::steady_clock::now();
  c = matmul(a, a);
  (void)c.to(kCpu);
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<ApiProfile::Site> sites = profile.sites();
  ASSERT_FALSE(sites.empty()) << "a multiply and a copy back make library calls";
  int64_t calls = 0;
  double ms = 0;
  bool memcpy_seen = false;
  for (const auto& s : sites) {
    calls += s.calls;
    ms += s.host_ms;
    memcpy_seen |= s.call.rfind("cudaMemcpy", 0) == 0;
  }
  EXPECT_TRUE(memcpy_seen) << "the copy back to the host";
  EXPECT_EQ(calls, (work_counts() - before).api_calls) << "one thread, every call a site";
  EXPECT_LE(ms, host_ms);
}
