// The strided-batched GEMM (cublasGemmStridedBatchedEx) and scaled_dot_product_attention
// (batched GEMMs around the warp-per-row scale / causal-mask softmax kernel) on the GPU
// against the CPU. Tolerances: f32 and f64 differ only by summation order and exp's
// last bit (1e-4 and 1e-10; TF32 stays off); bf16 by a bf16 rounding of the scores and
// probabilities (2^-8 relative, compounded through the backward's three products, so
// 5e-2 for values of order 1). Without a GPU every test skips and says why.
#include "common/attention_cases.h"
#include "cuda/cuda_compare.h"

#ifdef ZT_WITH_CUDA
#include "core/cuda/gemm.h"
#endif

using namespace zt;
using test::Layout;
using namespace zt::cuda_test;

#ifdef ZT_WITH_CUDA
TEST(CudaAttention, GemmBatchedMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  ASSERT_FALSE(zt::tf32().matmul);
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const double tol = dt == DType::bf16 ? 1e-2 : (dt == DType::f32 ? 1e-4 : 1e-10);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " ta=" + std::to_string(ta) +
                     " tb=" + std::to_string(tb));
        const int64_t B = 5, M = 33, N = 17, K = 40;
        const Layout la{ta, 3, 2, false}, lb{tb, 1, 1, true}, lc{false, 2, 2, false};
        auto operands = [&](Device dev) {
          return std::vector<Tensor>{test::strided_operand(B, M, K, la, 1, dt, dev),
                                     test::strided_operand(B, K, N, lb, 2, dt, dev),
                                     test::strided_operand(B, M, N, lc, 3, dt, dev)};
        };
        std::vector<Tensor> c = operands(kCpu), g = operands(kGpu);
        auto va = test::blas_view(c[0], la), vb = test::blas_view(c[1], lb);
        cpu::gemm_batched(ta, tb, M, N, K, 1.5, c[0], va.ld, va.stride, c[1], vb.ld, vb.stride, 0.5,
                          c[2], c[2].stride(1), c[2].stride(0), B);
        cuda::gemm_batched(ta, tb, M, N, K, 1.5, g[0], va.ld, va.stride, g[1], vb.ld, vb.stride,
                           0.5, g[2], g[2].stride(1), g[2].stride(0), B);
        EXPECT_TRUE(test::all_close(g[2].to(kCpu), c[2], tol, tol));
      }
    }
  }
  // bmm on transposed views (read in place) equals the CPU.
  Tensor a = normal_cpu({6, 20, 12}, 4), b = normal_cpu({6, 9, 20}, 5);
  EXPECT_TRUE(test::all_close(bmm(a.to(kGpu).transpose(1, 2), b.to(kGpu).transpose(1, 2)),
                              bmm(a.transpose(1, 2), b.transpose(1, 2)), 1e-4, 1e-4));
}
#endif

TEST(CudaAttention, ForwardBackwardMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const double tol = dt == DType::bf16 ? 5e-2 : (dt == DType::f32 ? 1e-4 : 1e-10);
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " causal=" + std::to_string(causal));
      // 70 keys: rows longer than a warp, so each lane loops; the causal rows hold 1..70.
      Tensor q = normal_cpu({2, 3, 70, 16}, 10, dt), k = normal_cpu({2, 3, 70, 16}, 11, dt);
      Tensor v = normal_cpu({2, 3, 70, 8}, 12, dt);
      Fn fn = [causal](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], causal);
      };
      EXPECT_TRUE(runs_match(run_on(kGpu, fn, {q, k, v}), run_on(kCpu, fn, {q, k, v}), tol, tol));
    }
  }
  // The tokenizer's layout: (N, HW, C) transposed views of (N, C, HW) maps.
  Tensor q = normal_cpu({4, 32, 64}, 13), k = normal_cpu({4, 32, 64}, 14);
  Tensor v = normal_cpu({4, 32, 64}, 15);
  Fn tok = [](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention(in[0].transpose(1, 2), in[1].transpose(1, 2),
                                        in[2].transpose(1, 2));
  };
  EXPECT_TRUE(runs_match(run_on(kGpu, tok, {q, k, v}), run_on(kCpu, tok, {q, k, v}), 1e-4, 1e-4));
}

TEST(CudaAttention, SoftmaxKernelMatchesCpuInPlace) {
  ZT_SKIP_WITHOUT_GPU();
  // Rows of 1, 31, 32, 33 and 300 keys, causal and not, in place on the GPU.
  for (int64_t L : {1, 31, 32, 33, 300}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE("L=" + std::to_string(L) + " causal=" + std::to_string(causal));
      Tensor x = normal_cpu({3 * L, L}, 20);
      Tensor y = Tensor::empty(x.sizes());
      cpu::attention_softmax_forward(y, x, 3 * L, L, 0.3, causal);
#ifdef ZT_WITH_CUDA
      Tensor xg = x.to(kGpu);
      cuda::attention_softmax_forward(xg, xg, 3 * L, L, 0.3, causal);
      EXPECT_TRUE(test::all_close(xg.to(kCpu), y, 1e-6, 1e-7));
#endif
    }
  }
}
