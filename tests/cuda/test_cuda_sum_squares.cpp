// sum_squares on the GPU (label cuda): the CPU's sum to double rounding for sizes from 1
// to five million in f32, bf16, f16 and f64, exact on small integers, the same bits run
// after run, at most two launches with no synchronization, copy or host read, no
// temporary of the input's size, and the gradient norm on the GPU built on it.
#include <cstring>

#include "core/allocator.h"
#include "core/work_counts.h"
#include "cuda/cuda_compare.h"
#include "optim/optim.h"

using namespace zt;
using namespace zt::cuda_test;

namespace {

// 4096 elements fill the kernel's one-block case; 4097 needs the second pass; five
// million runs the largest grid with several strides per thread.
const int64_t kSizes[] = {1, 7, 255, 4096, 4097, 100003, 1 << 20, 5000011};

// Both devices square in double; only the order of the additions differs (CPU: eight
// sequential lanes, GPU: short per-thread runs and fixed trees). Summing positive terms,
// the CPU's rounding error measured against a long double Kahan sum is 1.3e-14 of the
// total at 1e5 elements, 7.6e-14 at 1M and 1.9e-13 at 5M (f32 normals); the GPU's short
// chains err less. Relative 2e-12 holds with a tenfold margin, while a lost or repeated
// element (about 1/n of the total) or squares rounded to f32 (each off by up to 6e-8,
// about 1e-10 of the total at 1M elements) fail it.
constexpr double kRtol = 2e-12;

double one(const Tensor& t) {
  return t.to(kCpu).contiguous().data<double>()[0];
}

}  // namespace

TEST(CudaSumSquares, MatchesTheCpuForSizesFromOneToMillions) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::f16})
    for (int64_t n : kSizes) {
      if (dt == DType::f16 && n > 100003) continue;  // f16 shares bf16's conversion path
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Tensor x = normal_cpu({n}, 40 + static_cast<uint64_t>(n), dt);
      Tensor s = sum_squares(x.to(kGpu));
      EXPECT_EQ(s.device(), kGpu);
      EXPECT_EQ(s.dtype(), DType::f64);
      EXPECT_EQ(s.sizes(), (Shape{1}));
      const double want = one(sum_squares(x));
      EXPECT_NEAR(one(s), want, kRtol * want);
    }
}

TEST(CudaSumSquares, SmallIntegersSumExactly) {
  ZT_SKIP_WITHOUT_GPU();
  // Integer squares summed in double are exact in any order: the devices agree to the bit.
  for (DType dt : {DType::f32, DType::bf16, DType::f64})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Tensor x = ints_cpu({n}, -8, 9, 60 + static_cast<uint64_t>(n)).to(dt);
      EXPECT_EQ(one(sum_squares(x.to(kGpu))), one(sum_squares(x)));
    }
}

TEST(CudaSumSquares, EmptyAndStridedInputs) {
  ZT_SKIP_WITHOUT_GPU();
  EXPECT_EQ(one(sum_squares(Tensor::empty({0}, DType::f32, kGpu))), 0.0);
  Tensor x = normal_cpu({300, 77}, 70);
  Tensor t = x.to(kGpu).transpose(0, 1);
  ASSERT_FALSE(t.is_contiguous());
  const double want = one(sum_squares(x));
  EXPECT_NEAR(one(sum_squares(t)), want, kRtol * want);
}

TEST(CudaSumSquares, RepeatedRunsGiveTheSameBits) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor x = normal_cpu({3000017}, 80).to(kGpu);
  const double a = one(sum_squares(x)), b = one(sum_squares(x));
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(double)), 0) << a << " vs " << b;
}

TEST(CudaSumSquares, NoWaitNoReadBackAndNoFullSizeTemporary) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor big = normal_cpu({5000011}, 90).to(kGpu);
  Tensor small = normal_cpu({100}, 91).to(kGpu);
  (void)sum_squares(big);  // the allocator's blocks exist before the counted stretch
  (void)sum_squares(small);

  reset_peak_memory();
  const int64_t before_bytes = memory_stats(kGpu).total_current;
  const WorkCounts before = work_counts();
  Tensor s = sum_squares(big);
  const WorkCounts w = work_counts() - before;
  EXPECT_EQ(w.launches, 2);  // per-block sums, then one block over them
  EXPECT_EQ(w.syncs, 0);
  EXPECT_EQ(w.host_reads, 0);
  EXPECT_EQ(w.d2h_copies, 0);
  EXPECT_EQ(w.h2d_copies, 0);
  // At most 1024 per-block doubles and the result: 20 MB of input is never copied.
  EXPECT_LE(memory_stats(kGpu).total_peak - before_bytes, 1024 * 8 + 64);

  const WorkCounts before_small = work_counts();
  (void)sum_squares(small);
  const WorkCounts ws = work_counts() - before_small;
  EXPECT_EQ(ws.launches, 1);  // one block writes the result directly
  EXPECT_EQ(ws.syncs, 0);
  EXPECT_EQ(ws.host_reads, 0);
}

TEST(CudaSumSquares, GradientNormOnTheGpuUsesItWithoutWaiting) {
  ZT_SKIP_WITHOUT_GPU();
  std::vector<Tensor> cpu = {normal_cpu({2000003}, 100), normal_cpu({1001}, 101, DType::bf16),
                             Tensor(), normal_cpu({3}, 102, DType::f64)};
  std::vector<Tensor> gpu;
  for (const Tensor& g : cpu) gpu.push_back(g.defined() ? g.to(kGpu) : Tensor());
  const double want = optim::grad_norm_sq(cpu);
  (void)optim::grad_norm_sq_on(gpu, kGpu);  // warm
  const WorkCounts before = work_counts();
  Tensor on = optim::grad_norm_sq_on(gpu, kGpu);
  const WorkCounts w = work_counts() - before;
  EXPECT_EQ(w.syncs, 0);
  EXPECT_EQ(w.host_reads, 0);
  EXPECT_EQ(on.device(), kGpu);
  EXPECT_NEAR(one(on), want, kRtol * want);
  EXPECT_NEAR(optim::grad_norm_sq(gpu), want, kRtol * want);
}
