// GPU kernels on tensors of 2^31 elements or more, which 32-bit sizes, strides or library
// limits would break: each case checks chosen parts of its large result (both ends, and
// either side of where a 32-bit index or a chunk would end) against their sources or the
// same op on those parts alone. Sized to run in seconds on an H100 or H200: at most about
// 20 GiB of GPU memory a test.
// Without a GPU every test skips and says why.
#include <cmath>
#include <string>
#include <vector>

#include "cuda/cuda_compare.h"

using namespace zt;
using namespace zt::cuda_test;

namespace {

// A (N, C, H, W) tensor on the GPU: `base` (1, C, H, W) times scale[n] for sample n.
Tensor scaled_batch(const Tensor& base, const std::vector<double>& scale) {
  const int64_t n = static_cast<int64_t>(scale.size());
  const Tensor s = from_vector(scale, {n, 1, 1, 1}, base.dtype(), kGpu);
  return mul(base.expand({n, base.size(1), base.size(2), base.size(3)}), s);
}

}  // namespace

// cuDNN takes no tensor of 2^31 elements or more: a 2048 x 16 x 256 x 256 bf16 batch
// (2^31 elements, 4 GiB, as a VAE decoder's activations) runs as chunks of samples, forward
// and backward, and each sample gets what a call on it alone gives; the weight and bias
// gradients add up over the whole batch. (Failed in the tensor descriptor before.)
TEST(CudaLargeTensors, ConvolutionPastCudnnsTensorSizeRunsInChunks) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t N = 2048, C = 16, H = 256, W = 256;
  ASSERT_GT(N * C * H * W, int64_t{INT32_MAX});
  // Per-sample scales that bf16 holds exactly (powers of two), so that sample n is exactly
  // scale[n] times the base and the weight gradient is sum(scale) times the base's.
  std::vector<double> scale(static_cast<size_t>(N));
  double scale_sum = 0;
  for (int64_t n = 0; n < N; ++n) {
    scale[static_cast<size_t>(n)] = std::ldexp(1.0, static_cast<int>(n % 4) - 1);
    scale_sum += scale[static_cast<size_t>(n)];
  }
  const Tensor base = normal_cpu({1, C, H, W}, 41, DType::bf16).to(kGpu);
  const Tensor up_base = normal_cpu({1, C, H, W}, 42, DType::bf16).to(kGpu);
  const Tensor w = normal_cpu({C, C, 3, 3}, 43, DType::bf16).to(kGpu);
  const Tensor b = normal_cpu({C}, 44, DType::bf16).to(kGpu);
  Conv2dArgs a;
  a.padding = {1, 1, 1, 1};

  Tensor x = scaled_batch(base, scale).detach();
  Tensor wl = w.detach(), bl = b.detach();
  x.set_requires_grad(true);
  wl.set_requires_grad(true);
  bl.set_requires_grad(true);
  const Tensor y = conv2d(x, wl, bl, a);
  y.backward(up_base.expand(y.sizes()).contiguous());

  // Samples at both ends of the batch and on either side of the chunk boundary.
  for (int64_t n : {int64_t{0}, N - 2, N - 1}) {
    SCOPED_TRACE("sample " + std::to_string(n));
    Tensor xn = x.detach().narrow(0, n, 1).clone().detach();
    xn.set_requires_grad(true);
    const Tensor yn = conv2d(xn, w, b, a);
    yn.backward(up_base);
    // Another algorithm may sum in another order: one bf16 rounding apart.
    EXPECT_TRUE(test::all_close(y.detach().narrow(0, n, 1), yn.detach(), 1e-2, 1e-1));
    EXPECT_TRUE(test::all_close(x.grad().narrow(0, n, 1), xn.grad(), 1e-2, 1e-1));
  }
  // The parameter gradients of the base sample alone, in f32, times the batch's sums.
  Tensor x1 = base.to(DType::f32).detach(), w1 = w.to(DType::f32).detach();
  Tensor b1 = b.to(DType::f32).detach();
  w1.set_requires_grad(true);
  b1.set_requires_grad(true);
  conv2d(x1, w1, b1, a).backward(up_base.to(DType::f32));
  const Tensor dw_ref = mul(w1.grad(), scale_sum), db_ref = mul(b1.grad(), static_cast<double>(N));
  const double dw_top = max(abs(dw_ref)).item(), db_top = max(abs(db_ref)).item();
  EXPECT_TRUE(test::all_close(wl.grad().to(DType::f32), dw_ref, 2e-2, 1e-2 * dw_top));
  EXPECT_TRUE(test::all_close(bl.grad().to(DType::f32), db_ref, 2e-2, 1e-2 * db_top));
}

// A strided copy of 2^31 + 6 elements, the transpose of a (2, 2^30 + 3) bf16 tensor (4.3 GB
// each side): past 2^31 elements the elementwise loop splits indices with 64-bit divisions
// (loops.cuh, OffsetCalc over Int64Divider), a path no smaller test reaches. Rows at the
// start, around element 2^31 (row 2^30) and at the end equal their sources.
TEST(CudaLargeTensors, AStridedCopyPastTwoToThe31ElementsIsWhole) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t rows = (int64_t{1} << 30) + 3;
  Generator g(17);
  const Tensor x = rand({2, rows}, g, DType::bf16, kGpu);
  const Tensor y = x.transpose(0, 1).contiguous();
  ASSERT_EQ(y.sizes(), (Shape{rows, 2}));
  for (const int64_t r0 : {int64_t{0}, (int64_t{1} << 30) - 2, rows - 4}) {
    SCOPED_TRACE("rows from " + std::to_string(r0));
    const std::vector<double> got = y.narrow(0, r0, 4).to(Device::cpu()).to_vector();
    const std::vector<double> want =
        x.narrow(1, r0, 4).transpose(0, 1).to(Device::cpu()).to_vector();
    EXPECT_EQ(got, want);
  }
}
