// CUDA elementwise kernels at the edges of their inputs' range, against their CPU twins
// (core/cpu/elementwise.cpp is the specification): values where one formula for an op
// keeps its bits and another, equal in exact arithmetic, loses them (tensors past 2^31
// elements: test_cuda_large_tensors.cpp). Without a GPU every test skips and says why.
#include <cmath>

#include "common/test_util.h"
#include "core/kernels.h"
#include "cuda/cuda_compare.h"

using namespace zt;
using zt::cuda_test::kGpu;
using zt::test::all_close;

#ifdef ZT_WITH_CUDA

// tanh-GELU's left tail, x in [-6, -3]: the value x sigmoid(2u) goes from -3.6e-3 to
// -8.5e-11 there. The CPU's f32 kernel (and so the 16-bit ones) computes that form; the
// form 0.5 x (1 + tanh(u)) cancels (tanhf(u) rounds to -1 from x of about -5.2) and kept
// about 10 correct bits at -4, none from -5.2 (0 for every x there). f32 agrees to the
// exponentials' last bits, amplified by |2u| <= 25 (rtol 3e-5, no atol: the values are
// tiny); bf16 to one rounding of such a float (2^-8 relative).
TEST(CudaElementwiseEdges, TanhGeluKeepsItsBitsInTheLeftTail) {
  ZT_SKIP_WITHOUT_GPU();
  std::vector<double> x;
  for (int i = 0; i <= 300; ++i) x.push_back(-6.0 + 0.01 * i);
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor in = from_vector(x, {static_cast<int64_t>(x.size())}, dt);
    Tensor ref = Tensor::empty(in.sizes(), dt);
    cpu::unary(UnaryOp::kGeluTanh, ref, in, 0.0, 0.0);
    Tensor out = Tensor::empty(in.sizes(), dt, kGpu);
    cuda::unary(UnaryOp::kGeluTanh, out, in.to(kGpu), 0.0, 0.0);
    EXPECT_TRUE(all_close(out, ref, dt == DType::f32 ? 3e-5 : 8e-3, 0.0));
  }
}

#else

TEST(CudaElementwiseEdges, NeedACudaBuild) {
  ZT_GPU_OR_SKIP(zt::cuda_test::no_gpu_reason() << ": the CUDA edge tests are not compiled");
}

#endif
